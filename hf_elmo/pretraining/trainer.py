"""transformers' Trainer for the biLM: exact perplexity on evaluation, batches grouped by length in an order a
resume can replay, the training loss kept across resumes, a full disk reported where a checkpoint is saved,
and a wall-clock budget."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import torch
from transformers import Trainer, TrainerCallback
from transformers.trainer_pt_utils import LengthGroupedSampler

from ..utils.checkpoints import TRAIN_LOSS_FILE, cleanup_after_full_disk
from ..utils.io import DiskFullError, atomic_write_text
from .data import item_lengths


@torch.no_grad()
def exact_perplexity(model, dataloader, accelerator=None) -> dict[str, float]:
    """Token-weighted mean cross-entropy of both directions over a whole dataset, and exp of it."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    totals = torch.zeros(3, dtype=torch.float64, device=device)  # forward, backward, predictions
    for batch in dataloader:
        batch = {key: value.to(device) for key, value in batch.items()}
        output = model(**batch)
        count = output.num_predictions.double()
        totals += torch.stack([output.forward_loss.double() * count, output.backward_loss.double() * count, count])
    if accelerator is not None:
        totals = accelerator.reduce(totals, reduction="sum")
    model.train(was_training)
    forward, backward, count = (float(x) for x in totals)
    if count == 0:
        raise ValueError("no predictions to evaluate")
    loss = (forward + backward) / (2 * count)
    return {
        "loss": loss,
        "perplexity": math.exp(loss),
        "forward_perplexity": math.exp(forward / count),
        "backward_perplexity": math.exp(backward / count),
        "tokens": count,
    }


class TimeBudget(TrainerCallback):
    """Ends training gracefully, saving a checkpoint, when `minutes` of wall-clock time have passed."""

    def __init__(self, minutes: float):
        self.minutes = minutes

    def on_train_begin(self, args, state, control, **kwargs):
        self.deadline = time.time() + 60 * self.minutes

    def on_step_end(self, args, state, control, **kwargs):
        if time.time() > self.deadline:
            control.should_training_stop = True
            control.should_save = True
        return control


class EpochSeededLengthGroupedSampler(LengthGroupedSampler):
    """Length-grouped order drawn from `seed` + epoch alone, so that a resumed run skips exactly the
    batches the interrupted one had trained on (as the Trainer does for its own random sampler)."""

    def __init__(self, batch_size: int, lengths: list[int], seed: int):
        super().__init__(batch_size, lengths=lengths)
        self.seed, self.epoch = seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        self.generator = torch.Generator().manual_seed(self.seed + self.epoch)
        return super().__iter__()


class LanguageModelTrainer(Trainer):
    """Trainer whose evaluation reports the exact, token-weighted perplexity (bilm-tf's definition), and
    which groups training sentences by length when `group_by_length` is set (the lengths come from the
    corpus index, so nothing is read twice)."""

    def __init__(self, *args, group_by_length: bool = False, resumed_loss_sum: float | None = 0.0, **kwargs):
        super().__init__(*args, **kwargs)
        self.group_by_length = group_by_length
        self.resumed_loss_sum = resumed_loss_sum  # None: the checkpoint resumed from did not keep it
        self.loss_sum_this_process = torch.zeros((), dtype=torch.float64)

    def training_step(self, model, inputs, num_items_in_batch=None):
        loss = super().training_step(model, inputs, num_items_in_batch)
        self.loss_sum_this_process += loss.to(torch.float64)  # stays a tensor: no device sync per step
        return loss

    def run_loss_sum(self) -> float | None:
        """The run's loss sum so far (see `checkpoint_loss_sum`). Every rank must call it: it gathers."""
        this_run = self.accelerator.gather(self.loss_sum_this_process.reshape(1)).mean()
        return None if self.resumed_loss_sum is None else self.resumed_loss_sum + float(this_run)

    def _save_checkpoint(self, model, trial):
        # Written before Trainer's files: trainer_state.json, which marks a checkpoint complete, comes last.
        loss_sum = self.run_loss_sum()
        if self.args.should_save:
            folder = Path(self._get_output_dir(trial=trial)) / f"checkpoint-{self.state.global_step}"
            folder.mkdir(parents=True, exist_ok=True)
            kept = {"global_step": self.state.global_step, "loss_sum": loss_sum}
            atomic_write_text(folder / TRAIN_LOSS_FILE, json.dumps(kept) + "\n")
        try:
            super()._save_checkpoint(model, trial)
        except Exception as error:  # safetensors, torch.save and the OS each report a full disk their way
            run_dir = self._get_output_dir(trial=trial)
            cleaned = cleanup_after_full_disk(error, run_dir)
            if cleaned is None:
                raise
            removed, resume = cleaned
            raise DiskFullError(
                f"the disk holding {run_dir} is full: checkpoint-{self.state.global_step} could not be saved"
                f"{' (its partial files were removed)' if removed else ''}; free some space and run the same "
                f"command again to resume from {Path(resume).name if resume else 'the beginning'}"
            ) from None

    def _get_train_sampler(self, train_dataset=None):
        dataset = train_dataset if train_dataset is not None else self.train_dataset
        lengths = item_lengths(dataset) if self.group_by_length else None
        if lengths is None:
            return super()._get_train_sampler(dataset)
        batch = self.args.train_batch_size * self.args.gradient_accumulation_steps
        return EpochSeededLengthGroupedSampler(batch, lengths, seed=self.args.data_seed or self.args.seed)

    def get_eval_dataloader(self, eval_dataset=None):
        # accelerate evens out the processes' last batches by repeating items, which the sum over processes in
        # exact_perplexity would count twice: each process reads its own slice of the dataset instead.
        if self.args.world_size <= 1:
            return super().get_eval_dataloader(eval_dataset)
        dataset = eval_dataset if eval_dataset is not None else self.eval_dataset
        shard = torch.utils.data.Subset(dataset, range(self.args.process_index, len(dataset), self.args.world_size))
        return torch.utils.data.DataLoader(shard, batch_size=self.args.eval_batch_size, collate_fn=self.data_collator,
                                           pin_memory=self.args.dataloader_pin_memory)

    def evaluate(self, eval_dataset=None, ignore_keys=None, metric_key_prefix="eval"):
        dataloader = self.get_eval_dataloader(eval_dataset)
        start = time.time()
        metrics = exact_perplexity(self.model, dataloader, self.accelerator)
        metrics = {f"{metric_key_prefix}_{key}": value for key, value in metrics.items()}
        metrics[f"{metric_key_prefix}_runtime"] = round(time.time() - start, 3)
        self.log(metrics)
        self.control = self.callback_handler.on_evaluate(self.args, self.state, self.control, metrics)
        return metrics


__all__ = ["EpochSeededLengthGroupedSampler", "LanguageModelTrainer", "TimeBudget", "exact_perplexity"]
