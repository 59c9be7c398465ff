"""`hf-elmo export`: an ELMo model -> a folder another runtime serves (ONNX: model.onnx + tokenizer + README)."""

from __future__ import annotations

import os
import sys

from .common import remove_leftovers
from .errors import CommandError

HELP = "export a model for serving without PyTorch (ONNX)"
DESCRIPTION = """--format onnx: OUTPUT_DIR gets model.onnx (inputs input_ids: batch x words x characters and
attention_mask: batch x words, int64; for models with a word embedding also word_ids; output layers:
(L+1) x batch x words x 2P float32, the model's hidden_states without <S>/</S>), the tokenizer files and a
README.md of the interface. Batch size and sentence length are free. Needs the onnx package
(pip install 'hf-elmo[export]'); onnxruntime runs the result. The folder is built under a temporary name
and renamed when complete."""

FORMATS = ("onnx",)


def add_arguments(parser) -> None:
    parser.add_argument("--model", default="default",
                        help="model folder or Hub id (default: the small Chinese model shipped with hf-elmo)")
    parser.add_argument("--format", choices=FORMATS, default="onnx", help="what to export to (default: onnx)")
    parser.add_argument("--output", required=True, metavar="OUTPUT_DIR", help="folder to write (refused if it exists)")
    parser.add_argument("--overwrite", action="store_true", help="replace OUTPUT_DIR if it exists")


def run(args) -> int:
    try:
        import onnx  # noqa: F401
    except ImportError:
        raise CommandError("--format onnx needs the onnx package: pip install 'hf-elmo[export]'") from None
    from ..export import export_onnx

    # As for every output of hf-elmo named by the user: its folder must exist.
    parent = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(parent):
        raise CommandError(f"output folder does not exist: {parent}")
    remove_leftovers(args.output)
    export_onnx(args.model, args.output, overwrite=args.overwrite)
    print(f"wrote {args.output}", file=sys.stderr)
    return 0
