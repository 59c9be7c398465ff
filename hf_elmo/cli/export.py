"""`hf-elmo export`: an ELMo model -> a folder another runtime serves (ONNX: model.onnx + tokenizer + README)."""

from __future__ import annotations

import sys

from ..utils.io import output_lock
from .common import check_model_folder, check_output_apart, check_output_parent
from .errors import CommandError

HELP = "export a model for serving without PyTorch (ONNX) or as a sentence-transformers folder"
DESCRIPTION = """--format onnx: OUTPUT_DIR gets model.onnx, the whole model: an encoder's layers (L+1) x batch x
words x 2P and learned mixes, a tagger's or character tagger's tag scores (a CRF's scores go beside it, in
client.json), a sentence classifier's class scores; inputs input_ids (batch x words x characters) and
attention_mask (batch x words), int64, and word_ids for models with a word embedding. Beside it: elmo_client.py,
a client needing only numpy and onnxruntime (and jieba) that tokenizes exactly as ElmoTokenizer and gives vectors,
entity spans or labels (docs/deployment.md), the tokenizer files and a README.md of the interface. A model with a
part the exporter does not know is refused, naming it. Needs onnx and onnxruntime (pip install -e ".[export]"
in a clone of hf-elmo). The folder is built under a temporary name and renamed when complete; --overwrite
replaces an earlier export or another hf-elmo output folder.

--format sentence-transformers: OUTPUT_DIR is a folder that SentenceTransformer(OUTPUT_DIR,
trust_remote_code=True) loads without hf-elmo; its encode() gives hf_elmo.Embedder's sentence_vectors
(--layers, --pooling; the same defaults). Needs pip install -e ".[sentence-transformers]"."""

FORMATS = ("onnx", "sentence-transformers")


def add_arguments(parser) -> None:
    parser.add_argument("--model", default="default",
                        help="model folder or Hub id (default: the small Chinese model shipped with hf-elmo)")
    parser.add_argument("--format", choices=FORMATS, default="onnx", help="what to export to (default: onnx)")
    parser.add_argument("--output", required=True, metavar="OUTPUT_DIR", help="folder to write (refused if it exists)")
    parser.add_argument("--overwrite", action="store_true", help="replace OUTPUT_DIR if it exists")
    parser.add_argument("--layers", default="average",
                        help="sentence-transformers: the word vectors pooled: average (default), top, mix or a layer index")
    parser.add_argument("--pooling", choices=("mean", "max"), default="mean",
                        help="sentence-transformers: how the words' vectors become the sentence's (default: mean)")


def check(args) -> None:
    check_output_parent(args.output)
    check_model_folder(args.model)
    check_output_apart(args.output, "--output", models=[("--model", args.model)])


def run(args) -> int:
    from importlib.util import find_spec

    from ..utils.transformers_versions import transformers_5_needed

    package = "onnx" if args.format == "onnx" else "sentence_transformers"
    if package == "sentence_transformers" and transformers_5_needed("--format sentence-transformers"):
        raise CommandError(transformers_5_needed("--format sentence-transformers"))
    if find_spec(package) is None:
        extra = "export" if args.format == "onnx" else "sentence-transformers"
        raise CommandError(f"--format {args.format} needs the {package} package: pip install -e \".[{extra}]\" "
                           "(in a clone of hf-elmo)")
    with output_lock(args.output):
        if args.format == "onnx":
            from ..convert.onnx import export_onnx

            export_onnx(args.model, args.output, overwrite=args.overwrite)
        else:
            from ..integrations.sentence_transformers import save_sentence_transformer

            layers = int(args.layers) if args.layers.lstrip("-").isdigit() else args.layers
            save_sentence_transformer(args.model, args.output, layers=layers, pooling=args.pooling,
                                      overwrite=args.overwrite)
    print(f"wrote {args.output}", file=sys.stderr)
    return 0
