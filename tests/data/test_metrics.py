"""Entity-level scores of a tagger (finetuning/metrics.py): seqeval_scores and the Trainer's compute_metrics."""

import numpy as np
import pytest
from transformers import EvalPrediction

from hf_elmo.finetuning.metrics import seqeval_scores, tag_metrics_function

ID2LABEL = {0: "O", 1: "B-PER", 2: "I-PER", 3: "B-LOC"}


def test_seqeval_scores_on_a_hand_counted_example():
    # Gold: PER (words 0-1) and LOC (word 3). Predicted: PER right, LOC missed, a spurious ORG at word 4.
    gold = [["B-PER", "I-PER", "O", "B-LOC", "O"]]
    predicted = [["B-PER", "I-PER", "O", "O", "B-ORG"]]
    scores = seqeval_scores(gold, predicted)
    # 1 of 2 predicted entities is right, 1 of 2 gold entities is found; 3 of 5 tags are right.
    assert scores["precision"] == pytest.approx(0.5) and scores["recall"] == pytest.approx(0.5)
    assert scores["f1"] == pytest.approx(0.5) and scores["accuracy"] == pytest.approx(0.6)
    assert [scores[f"PER_{name}"] for name in ("precision", "recall", "f1", "support")] == [1.0, 1.0, 1.0, 1]
    assert [scores[f"LOC_{name}"] for name in ("precision", "recall", "f1", "support")] == [0.0, 0.0, 0.0, 1]
    assert [scores[f"ORG_{name}"] for name in ("precision", "recall", "f1", "support")] == [0.0, 0.0, 0.0, 0]
    # Precision and recall apart: 2 of 2 predicted entities right, 2 of 3 gold entities found.
    scores = seqeval_scores([["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG"]], [["B-PER", "I-PER", "O", "O"], ["B-ORG"]])
    assert scores["precision"] == pytest.approx(1.0) and scores["recall"] == pytest.approx(2 / 3)
    assert scores["f1"] == pytest.approx(2 * (2 / 3) / (1 + 2 / 3))  # harmonic mean: 0.8


def one_hot_logits(ids):
    """Logits whose argmax is `ids` (batch, words) -> (batch, words, labels)."""
    logits = np.zeros((*np.shape(ids), len(ID2LABEL)), dtype=np.float32)
    for index, label in np.ndenumerate(np.asarray(ids)):
        logits[index + (label,)] = 5.0
    return logits


def test_compute_metrics_skips_positions_labelled_minus_100():
    label_ids = np.array([[1, 2, 0, 3, -100, -100], [-100, 3, 0, -100, -100, -100]])
    # Where the gold label is -100 the predictions hold entities (B-LOC, B-PER, I-PER): counted, they would be
    # spurious. Kept positions: PER right and LOC missed in row 1; LOC right in row 2.
    predicted_ids = np.array([[1, 2, 0, 0, 3, 1], [1, 3, 0, 2, 0, 0]])
    # gold entities 3, predicted 2, right 2; 5 of the 6 labelled words are right
    expected = {"precision": 1.0, "recall": 2 / 3, "f1": 0.8, "accuracy": 5 / 6}
    compute_metrics = tag_metrics_function(ID2LABEL)
    from_logits = compute_metrics(EvalPrediction(predictions=one_hot_logits(predicted_ids), label_ids=label_ids))
    assert {key: from_logits[key] for key in expected} == pytest.approx(expected)
    # A model's own decoded predictions (the second output; -100 where it tags nothing, read as O) win over the
    # logits, which here would give O everywhere.
    decoded = predicted_ids.copy()
    decoded[0, 3] = -100
    outputs = (np.zeros_like(one_hot_logits(predicted_ids)), decoded)
    from_decoded = compute_metrics(EvalPrediction(predictions=outputs, label_ids=label_ids))
    assert {key: from_decoded[key] for key in expected} == pytest.approx(expected)
