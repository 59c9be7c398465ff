#!/usr/bin/env python
"""Does the fast path's hand-written backward (lstm_recurrence.py, `_LstmLayerFunction`) pay for its code? Forward +
backward of the biLSTM, three ways on the same inputs and weights, in one process, alternating run by run:

- hand-written: the fast path (`set_lstm_implementation("fast")`), its backpropagation through time written out;
- autograd, same forward: the fast path's forward written out of place (`autograd_recurrence` below: the same
  batch-major layout, the input products of all steps as one product, every product oneDNN's through
  `matrix_products.linear` forward and backward), differentiated by autograd. Only the backward differs;
- reference: autograd through bilm_elmo.py's per-step loop (`set_lstm_implementation("reference")`).

    python benchmarks/bench_lstm_backward.py [--cell-dim 512 --projection-dim 128 --batch 32 --words 20
        --threads 1 2 --repeats 15]

The model, batch and loss are bench_training.py's (the loss: the mean square of every layer), without dropout. Per
thread count: the median and the fastest of `--repeats` runs after one warm-up, and the hand-written backward's
speed-up as the median of the paired runs' ratios with their range (the noise, on a machine others use too), in wall
time and in the process's CPU time (which other processes do not inflate at one thread; at two it also counts
threads waiting for work). The gradients of the three are compared first.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import hf_elmo.kernels.bilstm as kernels_bilstm  # noqa: E402
from hf_elmo.kernels.lstm_recurrence import _last_outputs, _lstm_recurrence  # noqa: E402
from hf_elmo.kernels.matrix_products import linear  # noqa: E402
from hf_elmo.models.elmo.modeling_elmo import ElmoModel  # noqa: E402

from bench_training import add_shape_arguments, model_and_batch  # noqa: E402  (beside this file)


def autograd_recurrence(inputs, batch_sizes, input_weight, bias, recurrent_weight, projection_weight, state,
                        cell_clip, proj_clip):
    """`_lstm_recurrence`'s contract and forward, out of place so that autograd can differentiate it: inputs
    (2, T * B, I), rows sorted by decreasing length -> outputs (2, T, B, P), zero past each row's length, and the
    final (h, c) of every row after its own last step."""
    h, c = state
    num_steps, batch = len(batch_sizes), h.shape[1]
    input_gates = torch.stack([linear(inputs[d], input_weight[d], bias[d]) for d in range(2)])
    # Unbinding once keeps autograd from materialising a full-size gradient for every per-step slice.
    step_input_gates = input_gates.view(2, num_steps, batch, -1).unbind(1)
    recurrent_weight, projection_weight = recurrent_weight.unbind(0), projection_weight.unbind(0)
    rows = torch.arange(batch, device=inputs.device)
    outputs = []
    for t, active in enumerate(batch_sizes):
        if not active:  # all-padding steps come last
            outputs.append(h.new_zeros(h.shape))
            continue
        gates = step_input_gates[t] + torch.stack([linear(h[d], recurrent_weight[d]) for d in range(2)])
        input_gate, forget_gate, cell_input, output_gate = gates.chunk(4, dim=-1)
        cell = torch.sigmoid(input_gate) * torch.tanh(cell_input) + torch.sigmoid(forget_gate) * c
        if cell_clip:
            cell = cell.clamp(-cell_clip, cell_clip)
        projected = torch.sigmoid(output_gate) * torch.tanh(cell)
        running = (rows < active).view(1, batch, 1)
        hidden = torch.stack([linear(projected[d], projection_weight[d]) for d in range(2)]) * running
        if proj_clip:
            hidden = hidden.clamp(-proj_clip, proj_clip)
        c = torch.where(running, cell, c)  # a row's cell stops at its last step
        h = hidden
        outputs.append(hidden)
    outputs = torch.stack(outputs, dim=1)
    return outputs, (_last_outputs(outputs, batch_sizes, state[0]), c)


WAYS = ("hand-written", "autograd, same forward", "reference")
CLOCKS = {"wall": time.perf_counter, "CPU": time.process_time}


def run(way: str, model: ElmoModel, inputs, lengths):
    """One forward + backward; returns the input's and the weights' gradients."""
    model.set_lstm_implementation("reference" if way == "reference" else "fast")
    kernels_bilstm._lstm_recurrence = autograd_recurrence if way == "autograd, same forward" else _lstm_recurrence
    try:
        model.bilstm.zero_grad(set_to_none=True)
        leaf = inputs.clone().requires_grad_()
        layers, _ = model.run_bilstm(leaf, lengths)
        sum(layer.square().mean() for layer in layers).backward()
    finally:
        kernels_bilstm._lstm_recurrence = _lstm_recurrence
    return [leaf.grad] + [p.grad for p in model.bilstm.parameters()]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_shape_arguments(parser)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=15)
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.set_flush_denormal(True)
    model, inputs, lengths, words = model_and_batch(args)

    gradients = {way: run(way, model, inputs, lengths) for way in WAYS}
    scale = max(float(g.abs().max()) for g in gradients["reference"])
    clip = args.clip or "none"
    print(f"biLSTM {args.layers} x (cell {args.cell_dim}, projection {args.projection_dim}, clip {clip}),"
          f" batch {args.batch}, {words} words (5-{args.words} per sentence); median (fastest) of {args.repeats} runs"
          f" after one warm-up, the three ways alternating")
    for way in WAYS[:2]:
        diff = max(float((a - b).abs().max()) for a, b in zip(gradients[way], gradients["reference"]))
        print(f"gradients, {way} vs reference: max abs diff {diff:.1e} (largest gradient {scale:.1e})")
    print()
    print("| threads | clock | hand-written ms | autograd, same forward ms | reference ms | hand-written speed-up over "
          "autograd of the same forward: median (range) of paired runs | over the reference |")
    print("|---|---|---|---|---|---|---|")
    for threads in args.threads:
        torch.set_num_threads(threads)
        times = {(clock, way): [] for clock in CLOCKS for way in WAYS}
        for repeat in range(args.repeats + 1):
            for way in WAYS:
                start = {clock: read() for clock, read in CLOCKS.items()}
                run(way, model, inputs, lengths)
                if repeat:  # the first round warms up
                    for clock, read in CLOCKS.items():
                        times[clock, way].append(read() - start[clock])
        for clock in CLOCKS:
            hand_written = times[clock, WAYS[0]]
            same = [a / h for a, h in zip(times[clock, WAYS[1]], hand_written)]
            reference = [r / h for r, h in zip(times[clock, WAYS[2]], hand_written)]
            cells = [f"{statistics.median(times[clock, way]) * 1e3:.1f} ({min(times[clock, way]) * 1e3:.1f})"
                     for way in WAYS]
            speed_ups = [f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"
                         for ratios in (same, reference)]
            print(f"| {threads} | {clock} | {' | '.join(cells)} | {' | '.join(speed_ups)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
