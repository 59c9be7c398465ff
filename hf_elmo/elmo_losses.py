"""The heads' losses in one place (as transformers' loss/loss_utils.py keeps its models'), with the label checks
that turn a wrong label into an error naming it.

Every loss is a sum over labelled items divided by their count, or by `num_items_in_batch` when `Trainer` passes
it under gradient accumulation, so that accumulated micro-batches add up to the loss of one large batch.
(transformers' `ForSequenceClassificationLoss` averages regression and multi-label losses per micro-batch and
sets `config.problem_type` as a side effect, hence these.)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def reduce_loss(total: torch.Tensor, count: torch.Tensor | int, num_items_in_batch=None) -> torch.Tensor:
    """Sum over labelled items -> mean over this batch's `count`, or over the accumulated batch's items."""
    if num_items_in_batch is not None:
        return total / num_items_in_batch
    return total / torch.as_tensor(count).clamp(min=1)


def tagging_loss(logits: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor, crf=None, num_items_in_batch=None):
    """Mean over labelled words (-100: no label) of the cross-entropy, or with a CRF of each sentence's negative
    log-likelihood summed; `labels` and `mask` are (batch, words)."""
    labels = check_tag_labels(labels, mask, logits.shape[-1])
    labelled = (labels != -100) & mask
    if crf is not None:
        total = -crf.log_likelihood(logits, labels.masked_fill(~mask, -100), mask).sum()
    else:
        total = F.cross_entropy(logits[labelled].float(), labels[labelled], reduction="sum")
    return reduce_loss(total, labelled.sum(), num_items_in_batch)


def check_tag_labels(labels: torch.Tensor, mask: torch.Tensor, num_labels: int) -> torch.Tensor:
    if tuple(labels.shape) != tuple(mask.shape):
        raise ValueError(
            f"labels must have shape (batch, words) = {tuple(mask.shape)}, one label per word; got {tuple(labels.shape)}"
        )
    labels = labels.to(device=mask.device, dtype=torch.long)
    real = labels[mask & (labels != -100)]
    if real.numel() and (int(real.min()) < 0 or int(real.max()) >= num_labels):
        bad = int(real.min()) if int(real.min()) < 0 else int(real.max())
        raise ValueError(f"label id {bad} is outside [0, {num_labels}) (use -100 for 'no label')")
    return labels


def classification_loss(logits: torch.Tensor, labels: torch.Tensor, problem_type: str | None = None,
                        num_items_in_batch=None) -> torch.Tensor:
    """A sentence classifier's loss by `problem_type`, inferred as transformers does when unset: regression for
    one label, multi-label for floating-point labels, else single-label (class ids, -100 leaves one out)."""
    batch, num_labels = logits.shape
    if problem_type is None:
        if num_labels == 1:
            problem_type = "regression"
        else:
            problem_type = "multi_label_classification" if labels.is_floating_point() else "single_label_classification"
    if problem_type == "regression":
        shapes = [(batch, num_labels)] + ([(batch,)] if num_labels == 1 else [])
        if tuple(labels.shape) not in shapes:
            raise ValueError(f"regression labels must have shape {' or '.join(map(str, shapes))}, got {tuple(labels.shape)}")
        targets = labels.to(device=logits.device, dtype=torch.float32).reshape(batch, num_labels)
        return reduce_loss(F.mse_loss(logits.float(), targets, reduction="sum"), targets.numel(), num_items_in_batch)
    if problem_type == "multi_label_classification":
        if tuple(labels.shape) != (batch, num_labels):
            raise ValueError(
                f"multi-label classification (floating-point labels) needs labels of shape ({batch}, {num_labels}), "
                f"got {tuple(labels.shape)}; for one class id per sentence pass integer labels"
            )
        targets = labels.to(device=logits.device, dtype=torch.float32)
        total = F.binary_cross_entropy_with_logits(logits.float(), targets, reduction="sum")
        return reduce_loss(total, targets.numel(), num_items_in_batch)
    if tuple(labels.shape) != (batch,):
        raise ValueError(f"labels must have shape (batch,) = ({batch},), got {tuple(labels.shape)}")
    labels = labels.to(device=logits.device, dtype=torch.long)
    labelled = labels != -100
    real = labels[labelled]
    if real.numel() and (int(real.min()) < 0 or int(real.max()) >= num_labels):
        raise ValueError(f"class ids must be in [0, {num_labels}) or -100, got {real.tolist()}")
    total = F.cross_entropy(logits[labelled].float(), real, reduction="sum")
    return reduce_loss(total, labelled.sum(), num_items_in_batch)


__all__ = ["check_tag_labels", "classification_loss", "reduce_loss", "tagging_loss"]
