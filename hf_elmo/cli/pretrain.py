"""`hf-elmo pretrain` (also `python -m hf_elmo.cli pretrain`): the command line of `PretrainingArguments`
(hf_elmo/pretraining/options.py); the work is hf_elmo.pretraining.run.run."""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
from pathlib import Path

from ..pretraining.options import ARCHITECTURE_DEFAULTS, COMMAND_OPTIONS, PretrainingArguments
from .common import OptionsHelpFormatter, add_dataclass_options

HELP = "pretrain a biLM language model from text"
DESCRIPTION = """Pretrain an ELMo biLM from scratch on a word-segmented corpus, on top of `transformers.Trainer`.

    hf-elmo pretrain --train-file corpus.txt --dev-file dev.txt --output-dir runs/my-elmo \\
        --projection-dim 128 --cell-dim 512 --epochs 3

Runs unchanged under `torchrun --nproc_per_node N -m hf_elmo.cli pretrain ...` (DDP; gloo on CPU, NCCL on GPUs).
Checkpoints go to OUTPUT_DIR/checkpoint-*; running the same command again resumes from the newest one. The final
model (encoder + softmax, loadable by `ElmoModel.from_pretrained`, which drops the softmax) and the tokenizer are
written to OUTPUT_DIR, with pretraining_summary.json holding the exact dev perplexity.
The architecture options default to the values shown, or with --init-from to that model's (given ones must agree
with it).
"""


class HelpFormatter(OptionsHelpFormatter):
    """The options' defaults, an architecture option's being the value it takes without --init-from."""

    def _get_help_string(self, action):
        if action.dest in ARCHITECTURE_DEFAULTS:
            return f"{action.help} (default: {ARCHITECTURE_DEFAULTS[action.dest]})"
        return super()._get_help_string(action)


def add_arguments(parser) -> None:
    add_dataclass_options(parser, *COMMAND_OPTIONS)


def check(args) -> None:
    from .common import check_input_file, check_model_folder, check_output_apart

    for path in args.train_file:
        check_input_file(path, "corpus")
    check_input_file(args.dev_file, "--dev-file corpus")
    check_input_file(args.vocab, "--vocab")
    check_model_folder(args.init_from)
    # The run folder may hold its own inputs (a corpus, the vocab.txt it wrote): it is added to, never replaced.
    check_output_apart(args.output_dir, "--output-dir", models=[("--init-from", args.init_from)])


def run(args) -> int:
    from ..pretraining.run import run as pretrain
    from ..utils.io import output_lock

    options = PretrainingArguments.from_namespace(args)

    primary = os.environ.get("RANK", "0") == "0"  # the run's other processes write under the first one's lock
    # One writer per output folder for the whole run, refused naming the other run (pid, host, start time).
    with output_lock(args.output_dir) if primary else contextlib.nullcontext():
        if primary:
            _remove_what_killed_runs_left(Path(args.output_dir))
        code = pretrain(options)
    trained = code == 0 and getattr(options, "trained_steps", 0) > 0  # no advice when nothing was trained
    advice = data_parallel_advice(os.environ, os.cpu_count() or 1, args.command_line) if trained else None
    if advice:  # after the run, so that a refused run still ends in one error line
        print(advice, file=sys.stderr)
    return code


def _remove_what_killed_runs_left(output_dir: Path) -> None:
    """The temporaries of killed runs beside the run's own files, and checkpoints whose save never finished
    (no trainer_state.json, which Trainer writes last; resuming skips them, but they take space)."""
    from ..utils.checkpoints import remove_incomplete_checkpoints
    from ..utils.io import remove_stale_temporaries

    if not output_dir.is_dir():
        return
    for name in ("run_options.json", "pretraining_summary.json", "vocab.txt", "char_vocab.json"):
        remove_stale_temporaries(output_dir / name, say=True)
    removed = remove_incomplete_checkpoints(output_dir)
    if removed:
        print(f"hf-elmo: removed {len(removed)} incomplete checkpoint(s) of killed runs: {', '.join(removed)}",
              file=sys.stderr)


def after_interruption(args) -> str:
    """What an interrupted run leaves: the checkpoint the same command resumes from, if any."""
    from ..utils.checkpoints import last_complete_checkpoint

    checkpoint = last_complete_checkpoint(Path(args.output_dir)) if os.path.isdir(args.output_dir) else None
    if checkpoint is None:
        return "no checkpoint was written yet; the same command starts the run again"
    return f"the same command resumes the run from {checkpoint}"


def data_parallel_advice(environ, cpu_count: int, options: list[str]) -> str | None:
    """On a CPU with several cores, one process per core (torchrun, gloo, 1 thread each) trains faster than one
    process using the cores as threads (benchmarks/RESULTS.md): say how, after a run as a single process.
    `options` are the run's own `hf-elmo pretrain` options."""
    if "WORLD_SIZE" in environ or cpu_count < 2 or _cuda_available():
        return None
    without_threads = []
    skip = False
    for arg in options:
        if skip:
            skip = False
        elif arg == "--threads":
            skip = True
        elif not arg.startswith("--threads="):
            without_threads.append(arg)
    command = " ".join(shlex.quote(arg) for arg in without_threads)
    return (
        f"hf-elmo pretrain: this CPU has {cpu_count} cores; {cpu_count} processes of 1 thread each train faster "
        f"than one process, next time:\n  OMP_NUM_THREADS=1 torchrun --standalone --nproc_per_node {cpu_count} "
        f"-m hf_elmo.cli pretrain {command} --threads 1"
    )


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()
