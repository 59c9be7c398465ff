#!/usr/bin/env python
"""Convert an ELMoForManyLangs (HIT-SCIR) model folder, e.g. ``zhs.model``, into a Hugging Face model folder.

    python conversion/convert_elmoformanylangs.py --model-dir zhs.model --output elmo-zh
    python conversion/convert_elmoformanylangs.py --model-dir zhs.model --output elmo-zh --push-to-hub org/elmo-zh

The output holds config.json, model.safetensors and the tokenizer (char_vocab.json, word_vocab.json,
tokenizer_config.json) and loads with ``AutoModel`` / ``AutoTokenizer.from_pretrained(DIR)`` after
``import hf_elmo``. Outputs match ``elmoformanylangs.Embedder.sents2elmo`` (see docs/elmoformanylangs.md).
"""

from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", required=True, help="ELMoForManyLangs model folder (config.json, *.dic, *.pkl)")
    parser.add_argument("--output", required=True, help="folder to write (refused if it exists, see --overwrite)")
    parser.add_argument(
        "--config-path",
        help="model config JSON (e.g. cnn_50_100_512_4096_sample.json) when config.json's config_path is not found",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output folder")
    parser.add_argument(
        "--segmenter",
        choices=("auto", "jieba", "chars", "whitespace"),
        default="auto",
        help="how the saved tokenizer splits raw Chinese text into words (default: jieba when installed)",
    )
    parser.add_argument("--push-to-hub", metavar="REPO", help="also upload the converted folder to this Hub repo")
    parser.add_argument("--private", action="store_true", help="create the Hub repo as private")
    return parser


def main(argv: list[str] | None = None) -> int:
    """The same as `hf-elmo convert --from elmoformanylangs ...`."""
    from hf_elmo.cli import main as hf_elmo

    args = build_parser().parse_args(argv)
    command = ["convert", args.output, "--from", "elmoformanylangs", "--model-dir", args.model_dir,
               "--segmenter", args.segmenter]
    command += ["--config-path", args.config_path] if args.config_path else []
    command += ["--overwrite"] if args.overwrite else []
    command += ["--push-to-hub", args.push_to_hub] + (["--private"] if args.private else []) if args.push_to_hub else []
    return hf_elmo(command)


if __name__ == "__main__":
    sys.exit(main())
