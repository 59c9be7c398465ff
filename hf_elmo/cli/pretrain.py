"""`hf-elmo pretrain` (also `python -m hf_elmo.cli pretrain`): the options; the work is hf_elmo.pretraining.run.run."""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import sys
from pathlib import Path

HELP = "pretrain a biLM language model from text"
DESCRIPTION = """Pretrain an ELMo biLM from scratch on a word-segmented corpus, on top of `transformers.Trainer`.

    python -m hf_elmo.cli pretrain --train-file corpus.txt --dev-file dev.txt --output-dir runs/my-elmo \\
        --projection-dim 128 --cell-dim 512 --epochs 3

Runs unchanged under ``torchrun --nproc_per_node N`` (DDP; gloo on CPU, NCCL on GPUs). Checkpoints go to
``OUTPUT_DIR/checkpoint-*``; running the same command again resumes from the newest one. The final
model (encoder + softmax, loadable by `ElmoModel.from_pretrained`, which drops the softmax) and the
tokenizer are written to ``OUTPUT_DIR``, with ``pretraining_summary.json`` holding the exact dev perplexity.
"""


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The description as written, and every option's default in its help."""


def add_arguments(parser) -> None:
    data = parser.add_argument_group("data")
    data.add_argument("--train-file", nargs="+", required=True, help="corpus files: one sentence a line, words split by spaces")
    data.add_argument("--dev-file", help="held-out corpus for perplexity")
    data.add_argument("--vocab", help="vocabulary file (<S>, </S>, <UNK>, then by frequency); built from the train files if omitted")
    data.add_argument("--min-count", type=int, default=3, help="min word count (>= 1) when building the vocabulary")
    data.add_argument(
        "--max-vocab", type=int, default=None,
        help="max vocabulary size when building it, the three specials <S>, </S>, <UNK> included (>= 4)",
    )
    data.add_argument("--max-words", type=int, default=50, help="longer sentences are cut into pieces of this many words (>= 1)")
    model = parser.add_argument_group(
        "model", "The architecture options default to the values shown, or with --init-from to that model's (given "
        "ones must agree with it).")
    architecture = {"default": argparse.SUPPRESS}  # absent unless given: see ARCHITECTURE_DEFAULTS
    model.add_argument("--projection-dim", type=int, **architecture,
                       help="LSTM output (projection) size P; layers are 2P wide (128)")
    model.add_argument("--cell-dim", type=int, **architecture, help="LSTM cell size (512)")
    model.add_argument("--layers", type=int, **architecture, help="biLSTM layers (2)")
    model.add_argument("--char-dim", type=int, **architecture, help="character embedding size (16)")
    model.add_argument("--filters", **architecture,
                       help="JSON [[width, count], ...] ([[1,32],[2,32],[3,64],[4,128],[5,256]])")
    model.add_argument("--highway", type=int, **architecture, help="highway layers after the character CNN (1)")
    model.add_argument("--max-characters", type=int, **architecture, help="character ids per word (bilm-tf: 50) (50)")
    model.add_argument(
        "--char-scheme", choices=["bytes", "dictionary"], **architecture,
        help="how words become character ids: UTF-8 bytes (AllenNLP, bilm-tf; any text) or one id per character "
        "from a character vocabulary built from the train files (ELMoForManyLangs; with --init-from, that model's "
        "vocabulary), saved as char_vocab.json (bytes)",
    )
    model.add_argument(
        "--char-min-count", type=int, default=2,
        help="dictionary scheme: characters seen fewer times in the train files share the <oov> id (>= 1)",
    )
    model.add_argument("--cell-clip", type=float, default=3.0, help="clip LSTM cell values to [-x, x]")
    model.add_argument("--proj-clip", type=float, default=3.0, help="clip LSTM outputs to [-x, x]")
    model.add_argument("--no-skip-connections", action="store_true", **architecture,
                       help="no residual connection around layers >= 2 (they have one)")
    model.add_argument(
        "--softmax", choices=["full", "sampled"], default="full",
        help="full softmax over the vocabulary, or sampled (cheaper for large vocabularies)",
    )
    model.add_argument("--num-sampled", type=int, default=8192, help="negatives per batch (sampled softmax)")
    model.add_argument("--dropout", type=float, default=0.1, help="dropout on the biLSTM outputs")
    model.add_argument("--segmenter", default="auto", help="tokenizer segmenter saved with the model")
    train = parser.add_argument_group("training")
    train.add_argument("--output-dir", "--output", dest="output_dir", required=True, help="run folder: checkpoints, then the model, vocabulary and summary")
    train.add_argument("--epochs", type=float, default=1.0, help="passes over the training data (> 0)")
    train.add_argument(
        "--max-steps", type=int, default=None, help="optimiser steps (>= 1); when given it overrides --epochs"
    )
    train.add_argument("--batch-size", type=int, default=64, help="sentences per device")
    train.add_argument("--gradient-accumulation-steps", type=int, default=1, help="batches per optimiser step")
    train.add_argument("--lr", type=float, default=2e-3, help="peak learning rate (AdamW, linear decay)")
    train.add_argument("--warmup-ratio", type=float, default=0.02, help="fraction of the steps spent warming up")
    train.add_argument("--weight-decay", type=float, default=0.0, help="AdamW weight decay")
    train.add_argument("--max-grad-norm", type=float, default=1.0, help="clip the gradient norm to this")
    train.add_argument("--eval-steps", type=int, default=500, help="dev perplexity every this many steps")
    train.add_argument("--save-steps", type=int, default=500, help="checkpoint every this many steps")
    train.add_argument("--save-total-limit", type=int, default=2, help="checkpoints kept")
    train.add_argument("--logging-steps", type=int, default=50, help="log the loss every this many steps")
    train.add_argument("--seed", type=int, default=42, help="initialisation and data order")
    train.add_argument("--threads", type=int, default=None, help="torch CPU threads per process")
    train.add_argument("--no-resume", action="store_true", help="start over even if checkpoints exist")
    train.add_argument(
        "--init-from", metavar="FOLDER",
        help="start from the weights of a model of the same architecture, with a fresh optimiser and schedule "
        "(continued or domain-adaptive pretraining): a finished pretraining run, or an encoder-only folder such as "
        "the shipped default (pass 'default') or a converted AllenNLP model, whose softmax then starts fresh; the "
        "softmax is also fresh when the run's vocabulary differs. A checkpoint in --output-dir takes precedence",
    )
    train.add_argument(
        "--time-budget-minutes", type=float, default=None,
        help="stop (with a checkpoint) once this much training time (> 0 minutes) has passed in this run",
    )
    train.add_argument(
        "--group-by-length", action=argparse.BooleanOptionalAction, default=True,
        help="batch sentences of similar length together (random groups of 50 batches, each sorted by length): "
        "the biLSTM runs as many steps as a batch's longest sentence, so mixed lengths waste most of its work",
    )
    train.add_argument("--no-progress", action="store_true", help="no progress bar")




# The architecture options' values when neither given nor read from --init-from's config.json.
ARCHITECTURE_DEFAULTS = {
    "projection_dim": 128, "cell_dim": 512, "layers": 2, "char_dim": 16,
    "filters": "[[1,32],[2,32],[3,64],[4,128],[5,256]]", "highway": 1, "max_characters": 50, "char_scheme": "bytes",
    "no_skip_connections": False,
}


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
    from .common import output_folder_lock

    primary = os.environ.get("RANK", "0") == "0"  # the run's other processes write under the first one's lock
    # One writer per output folder for the whole run, refused naming the other run (pid, host, start time).
    with output_folder_lock(args.output_dir) if primary else contextlib.nullcontext():
        if primary:
            _remove_what_killed_runs_left(Path(args.output_dir))
        code = pretrain(args)
    trained = code == 0 and getattr(args, "trained_steps", 0) > 0  # no advice when nothing was trained
    advice = data_parallel_advice(os.environ, os.cpu_count() or 1, args.command_line) if trained else None
    if advice:  # after the run, so that a refused run still ends in one error line
        print(advice, file=sys.stderr)
    return code


def _remove_what_killed_runs_left(output_dir: Path) -> None:
    """The temporaries of killed runs beside the run's own files, and checkpoints whose save never finished
    (no trainer_state.json, which Trainer writes last; resuming skips them, but they take space)."""
    from ..utils.io import remove_incomplete_checkpoints
    from .common import remove_leftovers

    if not output_dir.is_dir():
        return
    for name in ("run_options.json", "pretraining_summary.json", "vocab.txt", "char_vocab.json"):
        remove_leftovers(output_dir / name)
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
