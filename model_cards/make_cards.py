#!/usr/bin/env python
"""Write the model cards: model_cards/<name>/README.md from hf_elmo.utils.model_card + model_cards/results/<name>.json.

    PYTHONPATH=. python model_cards/make_cards.py            # regenerate every card
    PYTHONPATH=. python model_cards/make_cards.py --check    # fail if a committed card is out of date

Fill measured numbers into model_cards/results/<name>.json (``metric_value``; ``details`` for a
free-form table), then rerun. Upload a card with ``huggingface_hub.ModelCard.load(path).push_to_hub(repo_id)``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHIPPED_DEFAULT = HERE.parent / "hf_elmo" / "pretrained" / "elmo-zh-small"


def render_all(namespace: str) -> dict[Path, str]:
    from hf_elmo.utils.model_card import builtin_specs, load_results, make_model_card

    cards = {}
    for name, spec in builtin_specs(namespace).items():
        results_file = HERE / "results" / f"{name}.json"
        results = load_results(results_file) if results_file.exists() else None
        cards[HERE / name / "README.md"] = str(make_model_card(spec, results))
    # The shipped default carries its card too (what `push_to_hub` of that folder uploads).
    cards[SHIPPED_DEFAULT / "README.md"] = cards[HERE / "elmo-zh-small" / "README.md"]
    return cards


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--namespace", default="hf-elmo", help="Hub user or organisation the models live under")
    parser.add_argument("--check", action="store_true", help="only compare with the committed cards")
    args = parser.parse_args(argv)
    try:
        cards = render_all(args.namespace)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    from hf_elmo.utils.io import atomic_write_text

    stale = []
    for path, text in cards.items():
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        if args.check:
            stale.append(str(path.relative_to(HERE.parent)))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text)  # a reader never sees half a card
        print(f"wrote {path.relative_to(HERE.parent)}")
    if stale:
        print("out of date (run model_cards/make_cards.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    if args.check:
        print(f"all {len(cards)} cards are up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
