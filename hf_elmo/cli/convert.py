"""`hf-elmo convert`: AllenNLP / bilm-tf or ELMoForManyLangs weights -> an hf-elmo folder, or back."""

from __future__ import annotations

import sys

from ..utils.io import output_lock
from .common import (
    check_input_file,
    check_model_folder,
    check_output_apart,
    check_output_parent,
    output_argument,
)
from .errors import CommandError, memory_for

HELP = "convert AllenNLP/bilm-tf or ELMoForManyLangs weights to an hf-elmo folder, or back"
DESCRIPTION = """--from allennlp:         --options options.json --weights weights.hdf5 OUTPUT_DIR
--from elmoformanylangs: --model-dir ZHS_MODEL_DIR [--config-path CNN_CONFIG.json] OUTPUT_DIR
--to allennlp:           --model HF_ELMO_DIR OUTPUT_DIR  (writes options.json + weights.hdf5)
OUTPUT_DIR may also be given as --output OUTPUT_DIR, as for `hf-elmo export` and convert_allennlp.py.
The output folder is built under a temporary name and renamed when complete."""


def add_arguments(parser) -> None:
    parser.add_argument("output", metavar="OUTPUT_DIR", nargs="?",
                        help="folder to write (refused if it exists, see --overwrite); or give it as --output")
    parser.add_argument("--output", dest="output_option", metavar="OUTPUT_DIR", help="the same as OUTPUT_DIR")
    direction = parser.add_mutually_exclusive_group(required=True)
    direction.add_argument("--from", dest="source", choices=["allennlp", "elmoformanylangs"], help="source format")
    direction.add_argument("--to", choices=["allennlp"], help="export an hf-elmo folder to this format")
    parser.add_argument("--options", help="allennlp: options.json")
    parser.add_argument("--weights", help="allennlp: weights.hdf5 (bilm-tf dump_weights layout)")
    parser.add_argument("--model-dir", help="elmoformanylangs: the model folder")
    parser.add_argument("--config-path", help="elmoformanylangs: the model's CNN/LSTM config json, if not found")
    parser.add_argument("--model", help="--to allennlp: the hf-elmo folder to export")
    parser.add_argument(
        "--segmenter", choices=["auto", "jieba", "chars", "whitespace"],
        help="--from: how the saved tokenizer splits raw text; allennlp: whitespace (default: as the model's training "
        "text and `allennlp elmo`), jieba or chars for a Chinese bilm-tf model; elmoformanylangs: default auto",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace OUTPUT_DIR if it exists")
    hub = parser.add_argument_group("Hub (--from only)")
    hub.add_argument("--push-to-hub", metavar="REPO_ID", help="then upload OUTPUT_DIR to this Hub repo in one commit")
    hub.add_argument("--private", action="store_true", help="create the Hub repo as private")
    hub.add_argument("--language", default=None, help="model card language (allennlp; default en)")
    hub.add_argument("--license", default=None, help="model card licence of the weights (allennlp; default apache-2.0)")


# The options each direction of `convert` reads; any other one given is a mistake worth naming.
_CONVERT_OPTIONS = {
    "--from allennlp": ("options", "weights", "segmenter", "push_to_hub", "private", "language", "license"),
    "--from elmoformanylangs": ("model_dir", "config_path", "segmenter", "push_to_hub", "private"),
    "--to allennlp": ("model",),
}


def check(args) -> None:
    args.output = output_argument(args, "OUTPUT_DIR")
    check_output_parent(args.output)
    direction = "--to allennlp" if args.to == "allennlp" else f"--from {args.source}"
    unused = [
        "--" + name.replace("_", "-")
        for name in dict.fromkeys(name for names in _CONVERT_OPTIONS.values() for name in names)
        if getattr(args, name) and name not in _CONVERT_OPTIONS[direction]
    ]
    if unused:
        raise CommandError(f"{', '.join(unused)}: not used with {direction}")
    if args.to == "allennlp":
        if not args.model:
            raise CommandError("--to allennlp needs --model (the hf-elmo folder to export)")
        check_model_folder(args.model)
    elif args.source == "allennlp":
        if not (args.options and args.weights):
            raise CommandError("--from allennlp needs --options options.json and --weights weights.hdf5")
        check_input_file(args.options, "options")
        check_input_file(args.weights, "hdf5 weights")
    elif not args.model_dir:
        raise CommandError("--from elmoformanylangs needs --model-dir (the folder with config.json, char.dic, *.pkl)")
    check_output_apart(args.output, "OUTPUT_DIR", models=[("--model", args.model)] if args.to else [],
                       files=[("--options", args.options), ("--weights", args.weights), ("--model-dir", args.model_dir),
                              ("--config-path", args.config_path)])


def run(args) -> int:
    with output_lock(args.output), memory_for(f"the model converted into {args.output}"):
        return _convert(args)


def _convert(args) -> int:
    if args.to == "allennlp":
        from ..convert.bilm_hdf5 import export_folder_to_bilm

        export_folder_to_bilm(args.model, args.output, overwrite=args.overwrite)
    elif args.source == "allennlp":
        from ..convert.bilm_hdf5 import convert_bilm_to_folder

        tokenizer_kwargs = {"segmenter": args.segmenter} if args.segmenter else None
        card = _model_card(args) if args.push_to_hub else None
        convert_bilm_to_folder(args.options, args.weights, args.output, overwrite=args.overwrite,
                               tokenizer_kwargs=tokenizer_kwargs, model_card=card)
    else:
        from ..convert.elmoformanylangs import convert_elmoformanylangs_to_folder as convert

        kwargs = {"config_path": args.config_path} if args.config_path else {}
        if args.segmenter:
            kwargs["tokenizer_kwargs"] = {"segmenter": args.segmenter}
        convert(args.model_dir, args.output, overwrite=args.overwrite, **kwargs)
    print(f"wrote {args.output}", file=sys.stderr)
    return _push(args) if args.push_to_hub else 0


def _model_card(args):
    """The card of a converted AllenNLP model, checked by the Hub's own metadata validation before any work."""
    from ..convert.bilm_hdf5 import config_from_allennlp_options
    from ..utils.model_card import converted_model_card

    config = config_from_allennlp_options(args.options)
    card = converted_model_card(
        args.push_to_hub, config, args.options, args.weights,
        language=args.language or "en", license=args.license or "apache-2.0",
    )
    try:
        card.validate()
    except ValueError:
        raise
    except Exception as error:  # network trouble: say which step failed
        raise CommandError(f"cannot reach the Hub to validate the model card: {error}") from None
    return card


def _push(args) -> int:
    """Upload the finished folder as one commit; exit status 3 if that fails (the folder is kept)."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    source = "AllenNLP / bilm-tf" if args.source == "allennlp" else "ELMoForManyLangs"
    try:
        api = HfApi()
        api.create_repo(args.push_to_hub, private=args.private, exist_ok=True)
        commit = api.upload_folder(folder_path=args.output, repo_id=args.push_to_hub, commit_message=f"Convert from {source}")
    except (HfHubHTTPError, OSError) as error:
        print(f"hf-elmo: error: upload to {args.push_to_hub} failed (the converted folder is kept): {error}", file=sys.stderr)
        return 3
    print(f"pushed {commit.commit_url}")
    return 0
