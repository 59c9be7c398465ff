#!/usr/bin/env python
"""Where a pretraining step of build.sh's setup spends its time, by kind of work.

    python benchmarks/profile_pretrain_step.py --work-dir /tmp/bench-pretrain [--steps 10] [--markdown out.md]

Runs what one process of (b) in bench_pretrain.py runs (elmo-zh-small's configuration, dictionary character
scheme, batch 64, length grouping, 1 thread) in this process under torch.profiler: a few warm-up steps, then
`--steps` profiled ones. Every operator's own time is put in one of four groups: matrix products, copies and
fills, the other tensor operators (elementwise gate math, reductions, dropout, the optimiser's updates), and
the rest (Python, autograd bookkeeping, the data loader). It also prints the rate the matrix products ran at
(their FLOPs, counted as bench_pretrain counts them, over their time) beside the machine's matrix-multiply
rate. Nothing else should run while it measures.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_pretrain import DICTIONARY_ARGS, flops_per_word, matmul_rate, prepare, pretrain_arguments  # noqa: E402

MATRIX_PRODUCTS = {"mkldnn::_linear_pointwise", "aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm", "aten::addmv",
                   "aten::mv", "aten::addbmm"}
COPIES_AND_FILLS = {"aten::copy_", "aten::fill_", "aten::zero_", "aten::zeros", "aten::empty", "aten::clone",
                    "aten::contiguous", "aten::cat", "aten::index_put_", "aten::_index_put_impl_"}
WARMUP_STEPS = 4


def group(name: str) -> str:
    if name in MATRIX_PRODUCTS:
        return "matrix products"
    if name in COPIES_AND_FILLS:
        return "copies and fills"
    if name.startswith("aten::"):
        return "other tensor operators"
    return "Python, autograd, data loading"


def profile_steps(train: Path, vocab: Path, output: Path, steps: int, batch: int):
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    from hf_elmo.pretraining import trainer
    from hf_elmo import cli

    torch.set_num_threads(1)
    profiler = profile(activities=[ProfilerActivity.CPU],
                       schedule=schedule(wait=0, warmup=WARMUP_STEPS, active=steps, repeat=1))
    training_step = trainer.LanguageModelTrainer.training_step

    def profiled_step(self, *args, **kwargs):
        loss = training_step(self, *args, **kwargs)
        profiler.step()
        return loss

    trainer.LanguageModelTrainer.training_step = profiled_step
    arguments = pretrain_arguments(train, vocab, output, batch, WARMUP_STEPS + steps + 1, 1, tuple(DICTIONARY_ARGS))
    shutil.rmtree(output, ignore_errors=True)  # a fresh run, never a resumed one
    profiler.start()
    try:
        cli.main(["pretrain", *arguments])
    finally:
        profiler.stop()
        trainer.LanguageModelTrainer.training_step = training_step
    return profiler.key_averages()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work-dir", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args()
    os.environ["OMP_NUM_THREADS"] = "1"
    train, vocab, words_per_piece = prepare(args.work_dir)
    events = profile_steps(train, vocab, args.work_dir / "runs" / "profile", args.steps, args.batch_size)

    def per_step(microseconds: float) -> float:  # milliseconds per profiled step
        return microseconds / 1000 / args.steps

    total = sum(event.self_cpu_time_total for event in events)
    groups: dict[str, float] = {}
    for event in events:
        groups[group(event.key)] = groups.get(group(event.key), 0.0) + event.self_cpu_time_total
    lines = ["| work | ms per step | share |", "| --- | --- | --- |"]
    lines += [f"| {name} | {per_step(time):.0f} | {time / total:.0%} |"
              for name, time in sorted(groups.items(), key=lambda item: -item[1])]
    lines += [f"| total | {per_step(total):.0f} | 100% |", "", "| operator | calls per step | ms per step | share |",
              "| --- | --- | --- | --- |"]
    for event in sorted(events, key=lambda event: -event.self_cpu_time_total)[:12]:
        lines.append(f"| {event.key} | {event.count / args.steps:.0f} | {per_step(event.self_cpu_time_total):.1f} "
                     f"| {event.self_cpu_time_total / total:.1%} |")
    words = args.batch_size * words_per_piece
    product_flops = flops_per_word(char_width=20) * words
    product_seconds = groups.get("matrix products", 0.0) / 1e6 / args.steps
    lines += ["", f"{words:.0f} words per step; {per_step(total):.0f} ms per step = "
              f"{words / per_step(total) * 1000:,.0f} words/s; the matrix products ran at "
              f"{product_flops / product_seconds / 1e9:.0f} GFLOP/s (the machine's matrix-multiply rate, 1 thread: "
              f"{matmul_rate(1):.0f} GFLOP/s)"]
    print("\n".join(lines))
    if args.markdown:
        args.markdown.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
