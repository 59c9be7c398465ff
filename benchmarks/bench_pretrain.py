#!/usr/bin/env python
"""End-to-end pretraining throughput at elmo-zh-small's configuration on the real Chinese corpus.

    python benchmarks/bench_pretrain.py --work-dir /tmp/bench-pretrain [--steps 40] [--markdown out.md]

Runs `hf-elmo pretrain` (data loading, character CNN, biLSTM, sampled softmax, optimiser step) for a fixed
number of steps in fresh processes, one setup after the other, on the same corpus and vocabulary:

- (a) the build setup of issue #19's starting point: commit 86ee0a7 (checked out into a git worktree under
  --work-dir), 1 process x 1 thread, batch 64, batches drawn without grouping by length (as build.sh ran it);
- the current code in the same setup, and the levers one at a time: length grouping, 2 threads, 2 processes x
  1 thread (torchrun, gloo), the dictionary character scheme (one id per character, 20 positions a word instead
  of 50 bytes: a cheaper character CNN; with 2 x 1 and length grouping it is (b), what build.sh runs), and
  (b) with batch 128 per process.

Words per second count the corpus words of the batches trained on (steps x processes x batch x the mean words
per training piece); tokens per second add the two sentence boundaries. The FLOP ceiling is the arithmetic per
word (forward + backward of every product, counted from the configuration) divided by the matrix-multiply rate
measured here with the same number of threads; "of ceiling" is the fraction reached. Nothing else should run
while it measures (on 2 cores a second busy process distorts every figure).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BASELINE_COMMIT = "86ee0a7"
MODEL_ARGS = [
    "--projection-dim", "128", "--cell-dim", "512", "--layers", "2", "--char-dim", "16",
    "--filters", "[[1,32],[2,32],[3,64],[4,128],[5,256]]", "--highway", "1",
    "--softmax", "sampled", "--num-sampled", "2048", "--dropout", "0.1",
]
# The dictionary scheme: one id per character, 18 characters a word (the shipped bytes scheme: 48 bytes).
DICTIONARY_ARGS = ["--char-scheme", "dictionary", "--char-min-count", "2", "--max-characters", "20"]


def flops_per_word(projection=128, cell=512, layers=2, char_dim=16, filters=((1, 32), (2, 32), (3, 64), (4, 128), (5, 256)),
                   highway=1, sampled=2048, char_width=50) -> float:
    """Multiply-adds x 2 of one word's forward pass, x 3 for forward + backward (the backward is two products
    per forward product)."""
    total_filters = sum(count for _, count in filters)
    cnn = sum(2 * width * char_dim * count * (char_width - width + 1) for width, count in filters)
    cnn += highway * 2 * total_filters * 2 * total_filters + 2 * total_filters * projection
    per_direction_layer = 2 * projection * 4 * cell * 2 + 2 * cell * projection  # input, recurrent, projection
    lstm = 2 * layers * per_direction_layer
    softmax = 2 * 2 * projection * sampled  # both directions' hidden state against the sampled rows
    return 3.0 * (cnn + lstm + softmax)


def matmul_rate(threads: int) -> float:
    """GFLOP/s of a float32 matrix product of the LSTM's shapes, in a fresh process with `threads` threads: the
    faster of torch's own product (MKL) and hf_elmo's (`rows_times`: oneDNN's on CPU float32 where torch has it;
    on AMD processors MKL runs AVX2 kernels only)."""
    code = (
        "import time, torch\n"
        f"torch.set_num_threads({threads})\n"
        "a, b = torch.randn(2048, 512), torch.randn(512, 2048)\n"
        "def rate(product):\n"
        "    for _ in range(3): product()\n"
        "    start = time.perf_counter()\n"
        "    for _ in range(30): product()\n"
        "    return 2 * 2048 * 512 * 2048 * 30 / (time.perf_counter() - start) / 1e9\n"
        "from hf_elmo.kernels.matrix_products import rows_times\n"
        "print(max(rate(lambda: a @ b), rate(lambda: rows_times(a, b.t()))))\n"
    )
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)


def prepare(work: Path) -> tuple[Path, Path, float]:
    """The corpus, its vocabulary (min count 5, as build.sh) and the mean words per training piece."""
    corpus = work / "corpus"
    if not (corpus / "train.txt").exists():
        subprocess.run([sys.executable, "-m", "hf_elmo.pretraining.chinese_corpora", "--output", str(corpus)], check=True, cwd=REPO)
    vocab = corpus / "vocab.txt"
    if not vocab.exists():
        subprocess.run([sys.executable, "-m", "hf_elmo.cli", "corpus", "vocab", "--corpus", str(corpus / "train.txt"),
                        "--output", str(vocab), "--min-count", "5"], check=True, cwd=REPO)
    words = pieces = 0
    max_words = 50
    with open(corpus / "train.txt", encoding="utf-8") as handle:
        for line in handle:
            count = len(line.split())
            words += count
            pieces += max(1, -(-count // max_words))
    return corpus / "train.txt", vocab, words / pieces


def baseline_checkout(work: Path) -> Path:
    tree = work / f"hf-elmo-{BASELINE_COMMIT}"
    if not tree.exists():
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), BASELINE_COMMIT], check=True)
    return tree


def pretrain_arguments(train: Path, vocab: Path, output: Path, batch: int, steps: int, threads: int,
                       extra: tuple = ()) -> list[str]:
    """`hf-elmo pretrain` options for `steps` timed steps at elmo-zh-small's configuration: no evaluation,
    checkpoint or log line inside them."""
    return ["--train-file", str(train), "--vocab", str(vocab), *MODEL_ARGS, "--output-dir", str(output),
            "--batch-size", str(batch), "--max-steps", str(steps), "--threads", str(threads), "--seed", "42",
            "--save-steps", "100000", "--eval-steps", "100000", "--logging-steps", "100000", "--no-progress", *extra]


def run_setup(name, code_dir: Path, work: Path, train: Path, vocab: Path, steps: int, processes: int, threads: int,
              batch: int, grouped: bool, extra: tuple = ()) -> float:
    """Seconds of training (the Trainer's own runtime, without start-up) for `steps` optimiser steps."""
    output = work / "runs" / name
    subprocess.run(["rm", "-rf", str(output)], check=True)
    args = pretrain_arguments(train, vocab, output, batch, steps, threads, extra)
    if not grouped:
        args.append("--no-group-by-length")
    launcher = [sys.executable, "-m"] if processes == 1 else [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(processes), "-m"]
    env = dict(os.environ, PYTHONPATH=str(code_dir), OMP_NUM_THREADS=str(threads))
    # `python -m hf_elmo.cli pretrain`: the command line of every checkout since issue 42 and of the older ones
    # (whose hf_elmo/cli.py took the command the same way).
    result = subprocess.run([*launcher, "hf_elmo.cli", "pretrain", *args], cwd=code_dir, env=env, capture_output=True,
                            text=True)
    if result.returncode != 0:
        raise SystemExit(f"{name} failed:\n{result.stderr[-3000:]}")
    return json.loads((output / "pretraining_summary.json").read_text())["train_seconds_this_run"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work-dir", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args()
    args.work_dir.mkdir(parents=True, exist_ok=True)
    train, vocab, words_per_piece = prepare(args.work_dir)
    baseline = baseline_checkout(args.work_dir)
    setups = [  # name, code, processes, threads, batch per process, grouped by length, more options
        ("(a) 86ee0a7 build setup", baseline, 1, 1, 64, False, ()),
        ("current, same setup", REPO, 1, 1, 64, False, ()),
        ("current, grouped by length", REPO, 1, 1, 64, True, ()),
        ("current, 1 process x 2 threads", REPO, 1, 2, 64, True, ()),
        ("current, 2 processes x 1 thread, bytes", REPO, 2, 1, 64, True, ()),
        ("(b) current, 2 processes x 1 thread, dictionary scheme (build.sh)", REPO, 2, 1, 64, True,
         tuple(DICTIONARY_ARGS)),
        ("(b) with batch 128", REPO, 2, 1, 128, True, tuple(DICTIONARY_ARGS)),
    ]
    rates = {threads: matmul_rate(threads) for threads in (1, 2)}
    rows, reference = [], None
    for name, code, processes, threads, batch, grouped, extra in setups:
        started = time.time()
        flops = flops_per_word(char_width=20 if extra == tuple(DICTIONARY_ARGS) else 50)
        seconds = run_setup(name.replace(" ", "_").replace(",", "").replace("(", "").replace(")", ""), code,
                            args.work_dir, train, vocab, args.steps, processes, threads, batch, grouped, extra)
        words = args.steps * processes * batch * words_per_piece
        speed = words / seconds
        reference = reference or speed
        ceiling = rates[processes * threads if processes * threads in rates else 2] * 1e9 / flops
        rows.append((name, f"{processes}x{threads}", batch, f"{seconds:.1f}", f"{speed:,.0f}",
                     f"{(words + 2 * args.steps * processes * batch) / seconds:,.0f}", f"{speed / reference:.2f}x",
                     f"{ceiling:,.0f}", f"{speed / ceiling:.0%}"))
        print(f"{name}: {seconds:.1f} s ({time.time() - started:.0f} s with start-up)", flush=True)
    header = ("setup", "procs x threads", "batch/proc", f"s / {args.steps} steps", "words/s", "tokens/s", "vs (a)",
              "FLOP ceiling words/s", "of ceiling")
    table = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    table += ["| " + " | ".join(map(str, row)) + " |" for row in rows]
    summary = (f"{flops_per_word() / 1e6:.1f} MFLOP per word (forward + backward; "
               f"{flops_per_word(char_width=20) / 1e6:.1f} with the dictionary scheme's 20 positions); matrix-multiply rate {rates[1]:.0f} GFLOP/s "
               f"(1 thread), {rates[2]:.0f} GFLOP/s (2 threads); {words_per_piece:.2f} words per training piece")
    print("\n".join(table) + "\n\n" + summary)
    if args.markdown:
        args.markdown.write_text("\n".join(table) + "\n\n" + summary + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
