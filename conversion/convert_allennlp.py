#!/usr/bin/env python
"""Convert an AllenNLP / bilm-tf biLM (options.json + weights.hdf5) into a Hugging Face model folder.

    python conversion/convert_allennlp.py --options options.json --weights weights.hdf5 --output DIR
    python conversion/convert_allennlp.py --options ... --weights ... --output DIR --push-to-hub org/name
    python conversion/convert_allennlp.py --reverse --model DIR --output BILM_DIR   # back to bilm-tf

The folder holds config.json, model.safetensors, the tokenizer files and the modelling code (for
``trust_remote_code=True``), plus a README.md model card with ``--push-to-hub``, and loads with
``AutoModel.from_pretrained(DIR)`` after ``import hf_elmo``. Its tokenizer splits raw text on whitespace only, as
bilm-tf and AllenNLP models were trained (pre-tokenised text) and as ``allennlp elmo`` split its input lines; for a
Chinese bilm-tf model trained on jieba words or single characters, pass ``--segmenter jieba`` or ``--segmenter chars``.
``--push-to-hub`` uploads the finished folder in one commit (``HF_TOKEN`` / ``hf auth login`` for credentials,
``HF_ENDPOINT`` for another Hub).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

if importlib.util.find_spec("hf_elmo") is None:  # run from a source checkout without `pip install .`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--options", help="AllenNLP / bilm-tf options.json")
    parser.add_argument("--weights", help="bilm-tf weights.hdf5 (dump_weights layout)")
    parser.add_argument("--output", required=True, help="folder to write (refused if it exists, see --overwrite)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output folder")
    parser.add_argument("--reverse", action="store_true", help="export --model to options.json + weights.hdf5")
    parser.add_argument("--model", help="hf-elmo model folder to export with --reverse")
    parser.add_argument(
        "--segmenter", choices=["whitespace", "jieba", "chars", "auto"], default="whitespace",
        help="how the saved tokenizer splits raw text: whitespace (default: as the model's training text and "
        "`allennlp elmo`), or for a Chinese bilm-tf model jieba (punctuation apart, jieba words) or chars (one word a "
        "character)",
    )
    parser.add_argument("--push-to-hub", metavar="REPO_ID", help="upload the converted folder to this Hub repo")
    parser.add_argument("--private", action="store_true", help="create the Hub repo as private")
    parser.add_argument("--language", default="en", help="language code for the model card (default: en)")
    parser.add_argument(
        "--license", default="apache-2.0", help="licence of the weights for the model card (AllenNLP's: apache-2.0)"
    )
    return parser


def command_line(args: argparse.Namespace) -> list[str]:
    """The `hf-elmo convert` arguments that do what these options ask."""
    if args.reverse:
        argv = ["convert", args.output, "--to", "allennlp"] + (["--model", args.model] if args.model else [])
        return argv + (["--push-to-hub", args.push_to_hub] if args.push_to_hub else [])
    argv = ["convert", args.output, "--from", "allennlp", "--segmenter", args.segmenter]
    for flag, value in (("--options", args.options), ("--weights", args.weights)):
        if value:
            argv += [flag, value]
    if args.push_to_hub:
        argv += ["--push-to-hub", args.push_to_hub, "--language", args.language, "--license", args.license]
        argv += ["--private"] if args.private else []
    return argv + (["--overwrite"] if args.overwrite else [])


def main(argv: list[str] | None = None) -> int:
    from hf_elmo.cli import main as hf_elmo

    return hf_elmo(command_line(build_parser().parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
