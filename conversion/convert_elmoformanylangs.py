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
    args = build_parser().parse_args(argv)
    from hf_elmo.elmoformanylangs_format import convert_elmoformanylangs_to_folder

    try:
        output = convert_elmoformanylangs_to_folder(
            args.model_dir,
            args.output,
            config_path=args.config_path,
            overwrite=args.overwrite,
            tokenizer_kwargs={"segmenter": args.segmenter},
        )
    except (ValueError, FileExistsError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {output}")
    if args.push_to_hub:
        from hf_elmo import ElmoModel, ElmoTokenizer

        # Push what was written, so the Hub gets exactly the folder that was just checked to load.
        ElmoModel.from_pretrained(output).push_to_hub(args.push_to_hub, private=args.private)
        ElmoTokenizer.from_pretrained(output).push_to_hub(args.push_to_hub, private=args.private)
        print(f"pushed to {args.push_to_hub}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
