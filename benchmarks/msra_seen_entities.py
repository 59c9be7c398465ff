#!/usr/bin/env python
"""MSRA test recall on entities a tagger saw in its training data against entities new to it.

A test entity is "seen" when an entity of the same type and text occurs in the tagger's training chunks (the
same seeded selection `ner_experiments.py msra` trained on: pass its --limit-train and --seed). Taggers are
folders written by `ner_experiments.py msra --save-model DIR`. Prints one row per tagger::

    python benchmarks/msra_seen_entities.py /tmp/pretrained /tmp/random --limit-train 8000
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import torch  # noqa: E402

from hf_elmo import ElmoForTokenClassification, ElmoTokenizer  # noqa: E402
from hf_elmo.finetuning.run import predict_tags  # noqa: E402
from hf_elmo.finetuning.predict import tag_spans  # noqa: E402
from ner_experiments import msra_ner, sample  # noqa: E402


def recall_by_novelty(gold: list, predicted: list, known: set[tuple[str, str]]) -> dict[str, tuple[int, int]]:
    """{"seen": (found, total), "new": (found, total)} over the gold entities of `gold` ((characters, tags) pairs)."""
    counts = {"seen": [0, 0], "new": [0, 0]}
    for (characters, tags), predicted_tags in zip(gold, predicted):
        found = set(tag_spans(predicted_tags))
        for span in tag_spans(tags):
            kind = "seen" if (span[0], "".join(characters[span[1] : span[2]])) in known else "new"
            counts[kind][1] += 1
            counts[kind][0] += span in found
    return {kind: tuple(values) for kind, values in counts.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("taggers", nargs="+", help="folders of taggers trained by ner_experiments.py msra")
    parser.add_argument("--limit-train", type=int, default=None, help="as the taggers were trained with")
    parser.add_argument("--seed", type=int, default=42, help="as the taggers were trained with")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    data = msra_ner(0.05, args.seed)
    train = sample(data["train"], args.limit_train, args.seed)
    known = {(kind, "".join(characters[first:end])) for characters, tags in train
             for kind, first, end in tag_spans(tags)}
    test = data["test"]
    print("| tagger | recall, seen entities | recall, new entities | new share of the test entities |")
    print("| --- | --- | --- | --- |")
    for folder in args.taggers:
        model = ElmoForTokenClassification.from_pretrained(folder)
        tokenizer = ElmoTokenizer.from_pretrained(folder)
        predicted = predict_tags(model, tokenizer, [characters for characters, _ in test])
        counts = recall_by_novelty(test, predicted, known)
        (seen_found, seen_total), (new_found, new_total) = counts["seen"], counts["new"]
        print(f"| {folder} | {100 * seen_found / seen_total:.2f} ({seen_found:,} / {seen_total:,}) "
              f"| {100 * new_found / new_total:.2f} ({new_found:,} / {new_total:,}) "
              f"| {100 * new_total / (seen_total + new_total):.1f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
