#!/usr/bin/env python
"""Training speed of the biLSTM: forward + backward through the fast path (hand-written backpropagation
through time) against autograd through the straightforward per-step loop (`ElmoBiLstm.fast = False`).

    python benchmarks/bench_training.py [--cell-dim 512 --projection-dim 128 --batch 32 --words 20]

Both run `ElmoBiLstm.forward(..., dropout=0.1)` in train mode on the same inputs; the gradients of the
two paths are compared once without dropout.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hf_elmo.configuration_elmo import ElmoConfig  # noqa: E402
from hf_elmo.modeling_elmo import ElmoModel  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cell-dim", type=int, default=512)
    parser.add_argument("--projection-dim", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--words", type=int, default=20, help="longest sentence; lengths are 5..words")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    torch.manual_seed(0)
    config = ElmoConfig(projection_dim=args.projection_dim, lstm_cell_dim=args.cell_dim, num_lstm_layers=args.layers,
                        char_cnn_filters=[[1, 8]], num_highway_layers=0)
    bilstm = ElmoModel(config).bilstm.train()
    steps = args.words + 2
    lengths = torch.randint(7, steps + 1, (args.batch,))
    lengths[0] = steps
    inputs = torch.randn(args.batch, steps, args.projection_dim)
    inputs[torch.arange(steps).unsqueeze(0) >= lengths.unsqueeze(1)] = 0
    words = int(lengths.sum()) - 2 * args.batch

    def step(fast: bool, dropout: float = 0.1):
        bilstm.fast = fast
        bilstm.zero_grad(set_to_none=True)
        leaf = inputs.clone().requires_grad_()
        layers, _ = bilstm(leaf, lengths, dropout=dropout)
        sum(layer.square().mean() for layer in layers).backward()
        return [leaf.grad] + [p.grad.clone() for p in bilstm.parameters()]

    fast_grads, reference_grads = step(True, 0.0), step(False, 0.0)
    grad_diff = max(float((a - b).abs().max()) for a, b in zip(fast_grads, reference_grads))
    grad_scale = max(float(b.abs().max()) for b in reference_grads)
    times = {True: [], False: []}
    for _ in range(args.repeats):
        for fast in (True, False):
            start = time.perf_counter()
            step(fast)
            times[fast].append(time.perf_counter() - start)
    fast_s, reference_s = statistics.median(times[True]), statistics.median(times[False])
    print(f"biLSTM {args.layers} x (cell {args.cell_dim}, projection {args.projection_dim}), batch {args.batch}, "
          f"{words} words (5-{args.words} per sentence), {args.threads} threads, dropout 0.1, median of {args.repeats}")
    print("| path | forward + backward ms | words/s |")
    print("|---|---|---|")
    print(f"| fast (hand-written BPTT) | {fast_s * 1e3:.0f} | {words / fast_s:.0f} |")
    print(f"| per-step loop (autograd) | {reference_s * 1e3:.0f} | {words / reference_s:.0f} |")
    print(f"speed-up {reference_s / fast_s:.2f}x; gradients (no dropout) max abs diff {grad_diff:.1e} "
          f"(largest gradient {grad_scale:.1e})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
