#!/usr/bin/env python
"""Training speed of the biLSTM, forward + backward, three ways on the same inputs and weights:

- ours: the fast path (hand-written backpropagation through time, `set_lstm_implementation("fast")`);
- ours, autograd loop: autograd through the straightforward per-step loop of bilm_elmo.py (`set_lstm_implementation("reference")`), which
  already steps both directions together and computes the input products of all steps at once;
- AllenNLP (with `--allennlp-python`): `allennlp.modules.elmo_lstm.ElmoLstm`, the per-step Python loop of
  small matrix products, one cell per direction and layer, loaded with our weights through the bilm-tf
  hdf5 export; its layers are compared with ours before timing.

    python benchmarks/bench_training.py [--cell-dim 512 --projection-dim 128 --batch 32 --words 20]
        [--allennlp-python /path/to/venv-allennlp/bin/python]

The loss is the mean square of every layer. Ours run with dropout 0.1 on the layer outputs (as in
pretraining), AllenNLP's `ElmoLstm` has no such dropout, so it does slightly less work. Medians (and
best runs) of `--repeats` runs after one warm-up; our two paths alternate run by run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hf_elmo.convert.bilm_hdf5 import write_bilm_files  # noqa: E402
from hf_elmo.models.elmo.configuration_elmo import ElmoConfig  # noqa: E402
from hf_elmo.models.elmo.modeling_elmo import ElmoModel  # noqa: E402

ALLENNLP_WORKER = Path(__file__).resolve().parent / "_train_worker_allennlp.py"


def add_shape_arguments(parser: argparse.ArgumentParser) -> None:
    """The biLSTM's size and the batch's (bench_lstm_backward.py measures on the same)."""
    parser.add_argument("--cell-dim", type=int, default=512)
    parser.add_argument("--projection-dim", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--clip", type=float, default=3.0, help="cell and projection clip (0: none)")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--words", type=int, default=20, help="longest sentence; lengths are 5..words")


def model_and_batch(args) -> tuple[ElmoModel, torch.Tensor, torch.Tensor, int]:
    """A random model of the arguments' size in training mode, a batch of inputs (B, words + 2, P) zero past their
    lengths (7..words + 2 positions, one row of the longest), the lengths and the number of words."""
    torch.manual_seed(0)
    config = ElmoConfig(projection_dim=args.projection_dim, lstm_cell_dim=args.cell_dim, num_lstm_layers=args.layers,
                        char_cnn_filters=[[1, 8]], num_highway_layers=0, cell_clip=args.clip, proj_clip=args.clip)
    model = ElmoModel(config)
    model.bilstm.train()
    steps = args.words + 2
    lengths = torch.randint(7, steps + 1, (args.batch,))
    lengths[0] = steps
    inputs = torch.randn(args.batch, steps, args.projection_dim)
    inputs[torch.arange(steps).unsqueeze(0) >= lengths.unsqueeze(1)] = 0
    return model, inputs, lengths, int(lengths.sum()) - 2 * args.batch


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_shape_arguments(parser)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--allennlp-python", help="python of the AllenNLP reference venv (setup_allennlp_reference.sh)")
    parser.add_argument("--work-dir", default=os.path.join(tempfile.gettempdir(), "hf_elmo_bench_training"))
    return parser.parse_args(argv)


def run_allennlp(args, model: ElmoModel, inputs: torch.Tensor, lengths: torch.Tensor) -> dict:
    """Time AllenNLP's ElmoLstm on our weights and inputs in its own venv; returns its times and layers."""
    python = args.allennlp_python
    if not Path(python).exists():
        raise SystemExit(f"error: the AllenNLP reference python is missing ({python}); build it with "
                         "bash benchmarks/setup_allennlp_reference.sh /path/to/venv-allennlp")
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    write_bilm_files(model, work / "bilm", overwrite=True)
    np.save(work / "inputs.npy", inputs.numpy())
    np.save(work / "lengths.npy", lengths.numpy())
    spec = {
        "weights": str(work / "bilm" / "weights.hdf5"), "inputs": str(work / "inputs.npy"),
        "lengths": str(work / "lengths.npy"), "outputs": str(work / "allennlp_layers.npy"),
        "cell_dim": args.cell_dim, "projection_dim": args.projection_dim, "layers": args.layers,
        "cell_clip": args.clip or None, "proj_clip": args.clip or None,
        "threads": args.threads, "warmup": 1, "repeats": args.repeats,
    }
    (work / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads))
    completed = subprocess.run([python, str(ALLENNLP_WORKER), str(work / "spec.json"), str(work / "result.json")],
                               env=env, capture_output=True, text=True)
    if completed.returncode != 0:
        raise SystemExit(f"error: the AllenNLP worker failed:\n{completed.stderr[-3000:]}")
    result = json.loads((work / "result.json").read_text(encoding="utf-8"))
    result["layers"] = np.load(spec["outputs"])
    return result


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    model, inputs, lengths, words = model_and_batch(args)
    bilstm = model.bilstm

    def step(fast: bool, dropout: float = 0.1):
        model.set_lstm_implementation("fast" if fast else "reference")
        bilstm.zero_grad(set_to_none=True)
        leaf = inputs.clone().requires_grad_()
        layers, _ = model.run_bilstm(leaf, lengths, dropout=dropout)
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
    allennlp = None
    if args.allennlp_python:
        with torch.no_grad():
            ours_layers, _ = bilstm(inputs, lengths)
        allennlp = run_allennlp(args, model, inputs, lengths)
        layer_diff = max(float(np.abs(a - ours.numpy()).max()) for a, ours in zip(allennlp["layers"], ours_layers))

    fast_s, loop_s = statistics.median(times[True]), statistics.median(times[False])
    print(f"biLSTM {args.layers} x (cell {args.cell_dim}, projection {args.projection_dim}, clip {args.clip or 'none'}), "
          f"batch {args.batch}, {words} words (5-{args.words} per sentence), {args.threads} threads, "
          f"median (best) of {args.repeats} runs")
    print("| path | forward + backward ms | best ms | words/s | fast path speed-up over it (medians) |")
    print("|---|---|---|---|---|")
    print(f"| ours, fast path (hand-written BPTT) | {fast_s * 1e3:.0f} | {min(times[True]) * 1e3:.0f} | "
          f"{words / fast_s:.0f} | |")
    print(f"| ours, autograd through the per-step loop | {loop_s * 1e3:.0f} | {min(times[False]) * 1e3:.0f} | "
          f"{words / loop_s:.0f} | {loop_s / fast_s:.2f}x |")
    if allennlp is not None:
        reference_s = allennlp["median_s"]
        print(f"| AllenNLP ElmoLstm (per-step loop, autograd) | {reference_s * 1e3:.0f} | {allennlp['min_s'] * 1e3:.0f} | "
              f"{words / reference_s:.0f} | {reference_s / fast_s:.2f}x |")
    print(f"gradients of our two paths (no dropout): max abs diff {grad_diff:.1e} (largest gradient {grad_scale:.1e})")
    if allennlp is not None:
        print(f"AllenNLP's layers on the same weights and inputs (zero state, no dropout): max abs diff {layer_diff:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
