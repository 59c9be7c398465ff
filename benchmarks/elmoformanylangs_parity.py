#!/usr/bin/env python
"""Parity of a converted ELMoForManyLangs model with the reference's recorded `sents2elmo` outputs.

    python benchmarks/elmoformanylangs_parity.py tests/fixtures/elmoformanylangs     # the tiny test fixture
    python benchmarks/elmoformanylangs_parity.py /tmp/emfl-full                     # a standard-size one

The folder is what ``tests/fixtures/elmoformanylangs/make_fixture.py [--standard-size] --output DIR`` writes
(``model/``, ``sentences.json``, ``expected.hdf5``). Prints, per ``output_layer``, the max abs difference, the
max abs reference value and their ratio (float32 summation order alone moves full-size outputs by ~1e-5 relative,
see docs/elmoformanylangs.md), plus the conversion and inference times.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hf_elmo.convert.elmoformanylangs import load_model_from_elmoformanylangs  # noqa: E402

OUTPUT_LAYERS = (0, 1, 2, -1, -2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("fixture", type=Path)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)

    start = time.perf_counter()
    model, tokenizer = load_model_from_elmoformanylangs(args.fixture / "model")
    convert_seconds = time.perf_counter() - start
    with open(args.fixture / "sentences.json", encoding="utf-8") as handle:
        sentences = json.load(handle)
    encoding = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    start = time.perf_counter()
    with torch.no_grad():
        layers = torch.stack(model(**encoding).hidden_states).numpy()
    run_seconds = time.perf_counter() - start

    print(f"model: {sum(p.numel() for p in model.parameters()):,} parameters, "
          f"{len(sentences)} sentences, {sum(map(len, sentences))} words")
    print(f"conversion (read + map) {convert_seconds:.2f} s, one batch forward {run_seconds:.2f} s")
    print(f"{'output_layer':>12} {'max |ours - ref|':>18} {'max |ref|':>10} {'relative':>10}")
    worst = 0.0
    with h5py.File(args.fixture / "expected.hdf5", "r") as handle:
        for output_layer in OUTPUT_LAYERS:
            diff = scale = 0.0
            for index, words in enumerate(sentences):
                data = layers[:, index, : len(words)]
                ours = data.mean(axis=0) if output_layer == -1 else data if output_layer == -2 else data[output_layer]
                reference = handle[f"layer_{output_layer}"][str(index)][...]
                if ours.shape != reference.shape:
                    print(f"shape mismatch at sentence {index}: {ours.shape} vs {reference.shape}")
                    return 1
                diff = max(diff, float(np.abs(ours - reference).max(initial=0.0)))
                scale = max(scale, float(np.abs(reference).max(initial=0.0)))
            worst = max(worst, diff / scale)
            print(f"{output_layer:>12} {diff:>18.3e} {scale:>10.3f} {diff / scale:>10.2e}")
    return 0 if worst <= 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main())
