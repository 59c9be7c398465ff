#!/usr/bin/env python
"""The sampled softmax loss, forward + backward, at elmo-zh-small's pretraining sizes: the hand-written backward
(`hf_elmo.kernels.sampled_softmax.sampled_softmax_losses`) against the plain formula in torch operations
(`sampled_softmax_losses_reference`, what the model ran before), in one process, alternating.

    python benchmarks/bench_sampled_softmax.py [--threads 1] [--rounds 6] [--repeats 5]

One call is one direction of one training step: hidden states of the predicted words (rows) x 128, a
vocabulary of 39,833 words, 2,048 sampled negatives. Prints milliseconds per call (median over rounds, and the
range) and the largest absolute difference of the losses and gradients between the two. Nothing else should
run while it measures.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from hf_elmo.kernels.sampled_softmax import sampled_softmax_losses
from hf_elmo.pretraining.language_model import log_uniform_samples
from hf_elmo.pretraining.language_model import sampled_softmax_losses as sampled_softmax_losses_reference

VOCAB, DIM, NUM_SAMPLED = 39_833, 128, 2048


def one_call(function, hidden, weight, bias, targets, generator) -> list[torch.Tensor]:
    samples, log_expected = log_uniform_samples(VOCAB, NUM_SAMPLED, hidden.device, generator)
    leaves = [tensor.detach().requires_grad_(True) for tensor in (hidden, weight, bias)]
    losses = function(*leaves, targets, samples, log_expected)
    losses.sum().backward()
    return [losses.detach()] + [leaf.grad for leaf in leaves]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    functions = {"plain formula (before)": sampled_softmax_losses_reference, "hand-written backward": sampled_softmax_losses}
    rows = []
    for num_rows in (768, 1536, 3072):  # predicted words of one direction: batch 64 x 12, 24 and 48 words
        generator = torch.Generator().manual_seed(0)
        hidden = torch.randn(num_rows, DIM, generator=generator)
        weight = torch.randn(VOCAB, DIM, generator=generator) * 0.1
        bias = torch.randn(VOCAB, generator=generator) * 0.1
        targets = torch.randint(0, VOCAB, (num_rows,), generator=generator)
        outputs = {name: one_call(function, hidden, weight, bias, targets, torch.Generator().manual_seed(1))
                   for name, function in functions.items()}
        difference = max(float((a - b).abs().max()) for a, b in zip(*outputs.values()))
        times = {name: [] for name in functions}
        for _ in range(args.rounds):
            for name, function in functions.items():
                generator = torch.Generator().manual_seed(2)
                started = time.perf_counter()
                for _ in range(args.repeats):
                    one_call(function, hidden, weight, bias, targets, generator)
                times[name].append((time.perf_counter() - started) / args.repeats * 1000)
        medians = {name: statistics.median(values) for name, values in times.items()}
        reference, fast = medians.values()
        rows.append((num_rows, *(f"{medians[name]:.1f} ({min(times[name]):.1f}-{max(times[name]):.1f})" for name in functions),
                     f"{reference / fast:.2f}x", f"{difference:.1e}"))
    header = ("rows", *(f"{name}, ms" for name in functions), "speed-up", "max abs difference")
    print(f"sampled softmax, vocabulary {VOCAB:,}, dim {DIM}, {NUM_SAMPLED:,} samples, {args.threads} thread(s), "
          f"forward + backward per call, median (range) of {args.rounds} rounds x {args.repeats} calls\n")
    print("| " + " | ".join(header) + " |\n|" + " --- |" * len(header))
    for row in rows:
        print("| " + " | ".join(map(str, row)) + " |")


if __name__ == "__main__":
    main()
