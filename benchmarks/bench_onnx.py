#!/usr/bin/env python
"""onnxruntime (the `hf-elmo export --format onnx` graph) against PyTorch (`ElmoModel`), words per second.

    python benchmarks/bench_onnx.py                 # the standard 2x4096_512_2048cnn model, random weights
    python benchmarks/bench_onnx.py --tiny          # a tiny model: only checks that the script runs

Both sides run the same random sentences of 20 words at batch 1 and 32 (`--shapes`), with `--threads` threads
each (intra-op; onnxruntime's inter-op pool is 1), flush-to-zero of denormal floats on both sides (random
weights can drive activations into denormals, which slows either side several-fold), one warm-up call, then
the median of `--repeats` timed calls. PyTorch runs its default biLSTM path (`lstm_implementation="auto"`)
under `torch.inference_mode()`. The table also gives the largest difference between the two outputs, absolute
and relative to the largest output value.
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import string
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SHAPES = {"1 x 20": (1, 20), "32 x 20": (32, 20)}
TINY = dict(char_embedding_dim=4, char_cnn_filters=[[1, 4], [2, 8]], num_highway_layers=1, projection_dim=8,
            lstm_cell_dim=16, num_lstm_layers=2)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true", help="a tiny model instead of the standard one (a smoke test)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per shape and side (median reported)")
    parser.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated subset of: " + ", ".join(SHAPES))
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def random_sentences(rng: random.Random, batch: int, words: int) -> list[list[str]]:
    return [["".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9))) for _ in range(words)]
            for _ in range(batch)]


def median_seconds(run, repeats: int) -> float:
    run()  # warm-up: first-call allocations, oneDNN packing, onnxruntime's arena
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv=None) -> int:
    args = parse_args(argv)
    import onnxruntime
    import torch

    from hf_elmo import ElmoConfig, ElmoModel, ElmoTokenizer
    from hf_elmo.convert.onnx.graph import elmo_onnx_model

    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    torch.manual_seed(args.seed)
    config = ElmoConfig(**TINY) if args.tiny else ElmoConfig()
    model = ElmoModel(config).eval()
    tokenizer = ElmoTokenizer(segmenter="whitespace", max_characters_per_token=config.max_characters_per_token)

    start = time.perf_counter()
    graph = elmo_onnx_model(config, model.state_dict()).SerializeToString()
    export_seconds = time.perf_counter() - start
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.set_denormal_as_zero", "1")
    start = time.perf_counter()
    session = onnxruntime.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
    session_seconds = time.perf_counter() - start
    del graph

    name = "tiny random model" if args.tiny else "standard 2x4096_512_2048cnn_2xhighway, random weights"
    print(f"# onnxruntime {onnxruntime.__version__} vs torch {torch.__version__}: {name}")
    print(f"# {platform.processor() or platform.machine()}, {args.threads} threads each, median of {args.repeats} "
          f"calls; graph written in {export_seconds:.1f} s, onnxruntime session made in {session_seconds:.1f} s")
    print()
    print("| batch x words | PyTorch words/s | onnxruntime words/s | onnxruntime / PyTorch | max abs diff | relative |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    rng = random.Random(args.seed)
    for shape in [s.strip() for s in args.shapes.split(",") if s.strip()]:
        if shape not in SHAPES:
            raise SystemExit(f"unknown shape {shape!r}; choose from {', '.join(SHAPES)}")
        batch, words = SHAPES[shape]
        encoded = tokenizer(random_sentences(rng, batch, words), is_split_into_words=True, padding=True,
                            return_tensors="pt")
        feeds = {key: encoded[key].numpy().astype(np.int64) for key in ("input_ids", "attention_mask")}

        def run_torch():
            with torch.inference_mode():
                return torch.stack(model(encoded["input_ids"], encoded["attention_mask"]).hidden_states).numpy()

        def run_onnx():
            return session.run(["layers"], feeds)[0]

        torch_seconds = median_seconds(run_torch, args.repeats)
        onnx_seconds = median_seconds(run_onnx, args.repeats)
        expected, got = run_torch(), run_onnx()
        difference = float(np.abs(got - expected).max())
        relative = difference / max(float(np.abs(expected).max()), np.finfo(np.float32).tiny)
        count = batch * words
        print(f"| {shape} | {count / torch_seconds:,.0f} | {count / onnx_seconds:,.0f} | "
              f"{torch_seconds / onnx_seconds:.2f} | {difference:.2e} | {relative:.2e} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
