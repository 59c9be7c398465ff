"""Entity-level scores of a tagger with seqeval: the numbers `finetune train` reports and the `Trainer` logs."""

from __future__ import annotations

from collections.abc import Sequence


def seqeval_scores(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> dict[str, float]:
    """Micro precision / recall / F1 over entities, token accuracy, and `{TYPE}_precision/_recall/_f1/_support`."""
    try:
        from seqeval.metrics import accuracy_score, classification_report
    except ImportError:
        raise SystemExit("evaluation needs seqeval: pip install -e \".[train]\" (in a clone of hf-elmo)") from None
    report = classification_report(gold, predicted, output_dict=True, zero_division=0)
    micro = report.get("micro avg", {"precision": 0.0, "recall": 0.0, "f1-score": 0.0})
    scores = {
        "precision": float(micro["precision"]),
        "recall": float(micro["recall"]),
        "f1": float(micro["f1-score"]),
        "accuracy": float(accuracy_score(gold, predicted)),
    }
    for entity, values in report.items():
        if entity.endswith(" avg"):
            continue
        scores[f"{entity}_precision"] = float(values["precision"])
        scores[f"{entity}_recall"] = float(values["recall"])
        scores[f"{entity}_f1"] = float(values["f1-score"])
        scores[f"{entity}_support"] = int(values["support"])
    return scores


def tag_metrics_function(id2label: dict[int, str]):
    """`compute_metrics` for the `Trainer`: reads the model's decoded `predictions` (Viterbi with a CRF)."""

    def compute_metrics(eval_prediction) -> dict[str, float]:
        outputs = eval_prediction.predictions
        predicted_ids = outputs[1] if isinstance(outputs, (tuple, list)) else outputs.argmax(-1)
        gold, predicted = [], []
        for gold_row, predicted_row in zip(eval_prediction.label_ids, predicted_ids):
            keep = gold_row != -100
            gold.append([id2label[int(i)] for i in gold_row[keep]])
            predicted.append([id2label[int(i)] if i >= 0 else "O" for i in predicted_row[keep]])
        return seqeval_scores(gold, predicted)

    return compute_metrics
