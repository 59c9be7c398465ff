"""Ctrl-C (SIGINT) or SIGTERM during training: finish the step, save a checkpoint, stop, and say which.

Without this, Ctrl-C before the first checkpoint (step 500 by default) lost the whole run. `SaveOnInterrupt` is a
`TrainerCallback`: while the Trainer trains, the first SIGINT or SIGTERM only sets a flag (the step under way
completes); at the end of that optimiser step the callback asks the Trainer for a checkpoint and a stop
(`control.should_save`, `control.should_training_stop`), and `raise_if_interrupted` then ends the command as an
interruption (`TrainingInterrupted`, a KeyboardInterrupt: exit status 130 with the checkpoint named). A second signal
interrupts at once. Under torchrun every rank stops at the same step (the flag is reduced over the ranks).
"""

from __future__ import annotations

import signal
import sys
import threading

from transformers import TrainerCallback

HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class TrainingInterrupted(KeyboardInterrupt):
    """Training stopped on a signal after saving a checkpoint (`checkpoint`, the folder, or None)."""

    def __init__(self, signal_name: str, checkpoint: str | None):
        super().__init__(f"{signal_name}: stopped after saving {checkpoint}")
        self.signal_name = signal_name
        self.checkpoint = checkpoint


class SaveOnInterrupt(TrainerCallback):
    """See the module docstring. `what` names the command in the message printed when the signal comes."""

    def __init__(self, what: str = "training"):
        self.what = what
        self.signal_name: str | None = None
        self.stopped_at: int | None = None
        self._previous: dict = {}

    def on_train_begin(self, args, state, control, **kwargs):
        if threading.current_thread() is not threading.main_thread():
            return  # signal handlers belong to the main thread
        for number in HANDLED_SIGNALS:
            self._previous[number] = signal.signal(number, self._handle)

    def _handle(self, number, frame) -> None:
        if self.signal_name is not None:  # the second one: now
            self._restore()
            raise KeyboardInterrupt
        self.signal_name = signal.Signals(number).name
        # On its own line: the progress bar (and the terminal's ^C) hold the cursor mid-line.
        print(f"{chr(10) if sys.stderr.isatty() else ''}hf-elmo: {self.signal_name} received: {self.what} stops after this step, saving a checkpoint first "
              "(send it again to stop at once, without one)", file=sys.stderr, flush=True)

    def _requested(self, args) -> bool:
        asked = self.signal_name is not None
        if getattr(args, "world_size", 1) > 1:
            import torch
            import torch.distributed as dist

            if dist.is_available() and dist.is_initialized():
                flag = torch.tensor([1.0 if asked else 0.0], device=args.device)
                dist.all_reduce(flag, op=dist.ReduceOp.MAX)
                if flag.item() and not asked:
                    self.signal_name = "a signal to another rank"
                asked = bool(flag.item())
        return asked

    def on_step_end(self, args, state, control, **kwargs):
        if self.stopped_at is None and self._requested(args):
            control.should_save = True
            control.should_training_stop = True
            self.stopped_at = state.global_step
        return control

    def on_train_end(self, args, state, control, **kwargs):
        self._restore()

    def _restore(self) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous = {}

    def raise_if_interrupted(self, output_dir) -> None:
        """After `trainer.train()`: `TrainingInterrupted` naming the checkpoint saved, if a signal stopped training."""
        self._restore()
        if self.signal_name is None:
            return
        from pathlib import Path

        checkpoint = Path(output_dir) / f"checkpoint-{self.stopped_at}" if self.stopped_at is not None else None
        raise TrainingInterrupted(self.signal_name, str(checkpoint) if checkpoint and checkpoint.is_dir() else None)


def next_checkpoint_step(step: int, save_steps: int) -> int:
    """The step of the first regular checkpoint after `step` (checkpoints every `save_steps` steps)."""
    return (step // save_steps + 1) * save_steps


__all__ = ["SaveOnInterrupt", "TrainingInterrupted", "next_checkpoint_step"]
