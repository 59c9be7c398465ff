"""Trainer checkpoints as pretraining and fine-tuning resume them: which one is complete, its step, the loss
sum kept in it."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path


def last_complete_checkpoint(output_dir: Path) -> str | None:
    """Newest ``checkpoint-N`` that was fully written (its trainer_state.json is saved last)."""
    candidates = []
    for path in output_dir.glob("checkpoint-*"):
        step = path.name.split("-", 1)[1]
        if step.isdigit() and (path / "trainer_state.json").is_file() and (path / "model.safetensors").is_file():
            candidates.append((int(step), path))
    return str(max(candidates)[1]) if candidates else None


def checkpoint_step(checkpoint: str | os.PathLike) -> int:
    """The global step a complete checkpoint was saved at (its folder is named after it)."""
    return int(Path(checkpoint).name.split("-", 1)[1])


TRAIN_LOSS_FILE = "train_loss.json"


def checkpoint_loss_sum(checkpoint: str | os.PathLike) -> float | None:
    """Sum over the run's steps (from its first, across resumes) of the per-step training loss averaged over
    ranks, kept in a checkpoint so that a resumed run's `train_loss` is the mean over all its steps; None for
    a checkpoint written before this was kept."""
    try:
        kept = json.loads((Path(checkpoint) / TRAIN_LOSS_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(kept, dict) or kept.get("global_step") != checkpoint_step(checkpoint):
        return None
    loss_sum = kept.get("loss_sum")
    return float(loss_sum) if isinstance(loss_sum, (int, float)) and math.isfinite(loss_sum) else None


def cleanup_after_full_disk(error: BaseException, folder: str | os.PathLike) -> tuple[list[str], str | None] | None:
    """After a failed write into the checkpoint `folder`: None unless the disk filled up; then the partial
    checkpoints are removed and this returns (their names, the checkpoint a rerun resumes from or None)."""
    from .file_io import disk_filled_up, remove_incomplete_checkpoints

    if not disk_filled_up(error, folder):
        return None
    return remove_incomplete_checkpoints(folder), last_complete_checkpoint(Path(folder))


__all__ = ["TRAIN_LOSS_FILE", "checkpoint_loss_sum", "checkpoint_step", "cleanup_after_full_disk",
           "last_complete_checkpoint"]
