#!/usr/bin/env python
"""Convert an AllenNLP / bilm-tf biLM (options.json + weights.hdf5) into a Hugging Face model folder.

    python conversion/convert_allennlp.py --options options.json --weights weights.hdf5 --output DIR
    python conversion/convert_allennlp.py --reverse --model DIR --output BILM_DIR   # back to bilm-tf

The folder holds config.json, model.safetensors and the tokenizer files, and loads with
``AutoModel.from_pretrained(DIR)`` after ``import hf_elmo``.
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
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from hf_elmo.bilm_format import convert_bilm_to_folder, export_folder_to_bilm

    try:
        if args.reverse:
            if not args.model:
                raise ValueError("--reverse needs --model DIR")
            export_folder_to_bilm(args.model, args.output, overwrite=args.overwrite)
        else:
            if not (args.options and args.weights):
                raise ValueError("--options and --weights are required (or use --reverse --model DIR)")
            convert_bilm_to_folder(args.options, args.weights, args.output, overwrite=args.overwrite)
    except (ValueError, FileExistsError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
