#!/usr/bin/env python
"""Convert an AllenNLP / bilm-tf biLM (options.json + weights.hdf5) into a Hugging Face model folder.

    python conversion/convert_allennlp.py --options options.json --weights weights.hdf5 --output DIR
    python conversion/convert_allennlp.py --options ... --weights ... --output DIR --push-to-hub org/name
    python conversion/convert_allennlp.py --reverse --model DIR --output BILM_DIR   # back to bilm-tf

The folder holds config.json, model.safetensors, the tokenizer files and the modelling code (for
``trust_remote_code=True``), plus a README.md model card with ``--push-to-hub``, and loads with
``AutoModel.from_pretrained(DIR)`` after ``import hf_elmo``. ``allennlp elmo`` split lines on whitespace:
``--segmenter whitespace`` saves a tokenizer that does the same with raw text. ``--push-to-hub`` uploads the finished folder in one commit (``HF_TOKEN`` /
``hf auth login`` for credentials, ``HF_ENDPOINT`` for another Hub).
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
        "--segmenter", choices=["auto", "jieba", "chars", "whitespace"], default="auto",
        help="how the saved tokenizer splits raw text (default auto: jieba for Chinese runs; whitespace = allennlp elmo)",
    )
    parser.add_argument("--push-to-hub", metavar="REPO_ID", help="upload the converted folder to this Hub repo")
    parser.add_argument("--private", action="store_true", help="create the Hub repo as private")
    parser.add_argument("--language", default="en", help="language code for the model card (default: en)")
    parser.add_argument(
        "--license", default="apache-2.0", help="licence of the weights for the model card (AllenNLP's: apache-2.0)"
    )
    return parser


def push_folder(folder: str, repo_id: str, private: bool = False) -> str:
    """Upload a converted folder as one commit; returns the commit URL."""
    from huggingface_hub import HfApi

    api = HfApi()
    api.create_repo(repo_id, private=private, exist_ok=True)
    commit = api.upload_folder(folder_path=folder, repo_id=repo_id, commit_message="Convert from AllenNLP / bilm-tf")
    return commit.commit_url


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from hf_elmo.bilm_format import convert_bilm_to_folder, export_folder_to_bilm

    try:
        if args.reverse:
            if not args.model:
                raise ValueError("--reverse needs --model DIR")
            if args.push_to_hub:
                raise ValueError("--push-to-hub uploads converted hf-elmo folders, not --reverse exports")
            export_folder_to_bilm(args.model, args.output, overwrite=args.overwrite)
        else:
            if not (args.options and args.weights):
                raise ValueError("--options and --weights are required (or use --reverse --model DIR)")
            card = None
            if args.push_to_hub:
                from hf_elmo.configuration_elmo import ElmoConfig
                from hf_elmo.model_card import converted_model_card

                config = ElmoConfig.from_allennlp_options(args.options)
                card = converted_model_card(
                    args.push_to_hub, config, args.options, args.weights, language=args.language, license=args.license
                )
                try:
                    card.validate()  # the Hub's own metadata check, before any conversion work
                except ValueError:
                    raise
                except Exception as error:  # network trouble: say which step failed
                    raise OSError(f"cannot reach the Hub to validate the model card: {error}") from None
            convert_bilm_to_folder(
                args.options, args.weights, args.output, overwrite=args.overwrite, model_card=card,
                tokenizer_kwargs={"segmenter": args.segmenter},
            )
    except (ValueError, FileExistsError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {args.output}")
    if args.push_to_hub:
        from huggingface_hub.errors import HfHubHTTPError

        try:
            print(f"pushed {push_folder(args.output, args.push_to_hub, private=args.private)}")
        except (HfHubHTTPError, OSError) as error:
            print(f"error: upload to {args.push_to_hub} failed (the converted folder is kept): {error}", file=sys.stderr)
            return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
