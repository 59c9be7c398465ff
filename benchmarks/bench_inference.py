#!/usr/bin/env python
"""CPU inference benchmark: hf-elmo's `ElmoModel` against AllenNLP's `Elmo`, side by side, in one run.

    python benchmarks/bench_inference.py --allennlp-python /path/to/venv-allennlp/bin/python

What it does:

1. builds the standard ``2x4096_512_2048cnn_2xhighway`` biLM with random (seeded) weights and writes it
   in the bilm-tf hdf5 layout (``options.json`` + ``weights.hdf5``), then converts it with our converter
   (`hf_elmo.convert.bilm_hdf5.convert_bilm_to_folder`) and times the conversion;
2. for every batch shape (1, 8, 32, 64 sentences of 20 words; 32 sentences of 5-60 words) starts one
   fresh process per side (ours via `from_pretrained` on the converted folder, AllenNLP's `Elmo` on the
   hdf5 file, in the AllenNLP virtualenv) on identical sentences; each process times its model load,
   dumps all layers of the first batch from the fresh model (zero state), warms up, then times
   `--repeats` runs and reports the median and its peak RSS;
3. measures this machine's matrix-multiply rate and the rate at which a matrix-vector product reads
   one direction-layer's per-step weights in the same run, and prints the fraction of the resulting
   words/s ceiling that our model reaches: the lower of the compute ceiling (all FLOPs at the
   matrix-multiply rate) and the memory ceiling (every step reads every direction-layer's recurrent and
   projection weights once, whatever the batch size: it binds at batch 1);
4. optionally times extra modes of ours at 32 x 20 words (the straightforward reference recurrence,
   the fast path without oneDNN (MKL products), oneDNN with the weights packed per call,
   the token-embedding cache, bf16, int8 dynamic quantisation) with their drift against fp32.

Both sides use `--threads` threads and `torch.set_flush_denormal(True)`. The AllenNLP reference venv is
built by ``benchmarks/setup_allennlp_reference.sh``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import string
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
WORKER = HERE / "_bench_worker.py"

# name, sentences, shortest, longest (words)
SHAPES = [
    ("1 x 20", 1, 20, 20),
    ("8 x 20", 8, 20, 20),
    ("32 x 20", 32, 20, 20),
    ("64 x 20", 64, 20, 20),
    ("32 x 5-60", 32, 5, 60),
]
EXTRA_MODE_SHAPE = "32 x 20"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--allennlp-python", help="python of the AllenNLP reference venv (setup_allennlp_reference.sh)")
    parser.add_argument("--ours-only", action="store_true", help="run without AllenNLP (no ratios or diffs)")
    parser.add_argument("--work-dir", default=os.path.join(tempfile.gettempdir(), "hf_elmo_bench"),
                        help="where the random standard model is written (reused between runs)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per shape (batch 1 uses 3x)")
    parser.add_argument("--shapes", default=",".join(s[0] for s in SHAPES), help="comma-separated subset of the shapes")
    parser.add_argument("--extra-modes", default="reference,mkl,repack,cache,bf16,int8",
                        help=f"extra modes of ours timed at {EXTRA_MODE_SHAPE} ('' for none)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--against", metavar="REV",
        help="instead of AllenNLP, time this checkout against the commit REV (a git worktree under --work-dir), "
        "the two alternating in fresh processes --rounds times per shape",
    )
    parser.add_argument("--rounds", type=int, default=3, help="with --against: alternating runs per shape and side")
    parser.add_argument("--markdown", help="also write the tables (and the command) to this file")
    parser.add_argument("--json", help="also write all raw numbers to this file")
    parser.add_argument("--ceiling-only", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


# Model and inputs -------------------------------------------------------------------------------


def standard_options() -> dict:
    return {
        "lstm": {"use_skip_connections": True, "projection_dim": 512, "cell_clip": 3, "proj_clip": 3,
                 "dim": 4096, "n_layers": 2},
        "char_cnn": {"activation": "relu", "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
                     "n_highway": 2, "embedding": {"dim": 16}, "n_characters": 262, "max_characters_per_token": 50},
    }


def flops_per_token(options: dict) -> float:
    """Multiply-add FLOPs of one token through the char CNN (all 50 positions, as AllenNLP), highway,
    projection and both directions of every LSTM layer."""
    cnn, lstm = options["char_cnn"], options["lstm"]
    width, dim = cnn["max_characters_per_token"], cnn["embedding"]["dim"]
    filters = sum(n for _, n in cnn["filters"])
    cell, projection = lstm["dim"], lstm["projection_dim"]
    conv = sum(2 * dim * w * n * (width - w + 1) for w, n in cnn["filters"])
    highway = cnn["n_highway"] * 2 * filters * 2 * filters
    proj = 2 * filters * projection
    per_direction_layer = 2 * (projection * 4 * cell + projection * 4 * cell + cell * projection)
    return conv + highway + proj + 2 * lstm["n_layers"] * per_direction_layer


def build_model_files(work_dir: Path, seed: int) -> tuple[Path, Path, Path, float]:
    """Random standard model in the hdf5 layout, and its conversion; returns paths and conversion seconds."""
    import torch

    from hf_elmo.convert.bilm_hdf5 import config_from_allennlp_options, convert_bilm_to_folder, write_bilm_files
    from hf_elmo.models.elmo.modeling_elmo import ElmoModel

    bilm_dir = work_dir / f"bilm-standard-seed{seed}"
    folder = work_dir / f"hf-standard-seed{seed}"
    options, weights = bilm_dir / "options.json", bilm_dir / "weights.hdf5"
    if not weights.exists():
        print(f"writing the random standard model to {bilm_dir} ...", flush=True)
        torch.manual_seed(seed)
        model = ElmoModel(config_from_allennlp_options(standard_options()))
        write_bilm_files(model, bilm_dir, overwrite=True)
        del model
    start = time.perf_counter()
    convert_bilm_to_folder(options, weights, folder, overwrite=True)
    return options, weights, folder, time.perf_counter() - start


def make_vocabulary(rng: random.Random, size: int = 5000) -> list[str]:
    # Word lengths roughly like English text (mostly 2-8 letters, a few long ones).
    lengths = [1, 2, 2, 3, 3, 3, 4, 4, 4, 5, 5, 5, 6, 6, 7, 7, 8, 9, 10, 12, 14]
    words = set()
    while len(words) < size:
        words.add("".join(rng.choice(string.ascii_lowercase) for _ in range(rng.choice(lengths))))
    return sorted(words)


def make_sentences(rng: random.Random, vocabulary: list[str], count: int, shortest: int, longest: int):
    return [[rng.choice(vocabulary) for _ in range(rng.randint(shortest, longest))] for _ in range(count)]


# Running the sides ---------------------------------------------------------------------------------


def run_worker(python: str, spec: dict, work_dir: Path, tag: str, threads: int, repo: Path = REPO) -> dict:
    """One fresh process timing one side (`repo`: the checkout whose hf_elmo and worker script run)."""
    spec_path, result_path = work_dir / f"spec-{tag}.json", work_dir / f"result-{tag}.json"
    spec["first_batch"] = str(work_dir / f"first-{tag}.npy")
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    if spec["side"] == "ours":
        env["PYTHONPATH"] = os.pathsep.join([str(repo)] + [p for p in [env.get("PYTHONPATH")] if p])
    worker = repo / "benchmarks" / WORKER.name
    completed = subprocess.run([python, str(worker), str(spec_path), str(result_path)], env=env,
                               capture_output=True, text=True)
    if completed.returncode != 0:
        raise RuntimeError(f"{tag} worker failed:\n{completed.stderr[-4000:]}")
    result = json.loads(result_path.read_text(encoding="utf-8"))
    result["layers"] = np.load(spec["first_batch"])
    return result


def measure_ceiling(threads: int) -> tuple[float, float]:
    """(matrix-multiply GFLOP/s, matrix-vector weight-reading GB/s), measured in a fresh process."""
    completed = subprocess.run([sys.executable, __file__, "--ceiling-only", "--threads", str(threads)],
                               env=dict(os.environ, OMP_NUM_THREADS=str(threads)), capture_output=True, text=True)
    if completed.returncode != 0:
        raise RuntimeError(f"ceiling measurement failed:\n{completed.stderr[-2000:]}")
    gflops, gbps = completed.stdout.strip().splitlines()[-1].split()
    return float(gflops), float(gbps)


def ceiling_gflops(threads: int) -> float:
    import torch

    torch.set_num_threads(threads)
    torch.set_flush_denormal(True)
    best = 0.0
    generator = torch.Generator().manual_seed(0)
    for m, k, n in [(704, 512, 16384), (16384, 512, 704), (1408, 2048, 4096), (2048, 2048, 2048)]:
        a, b = torch.randn(m, k, generator=generator), torch.randn(k, n, generator=generator)
        torch.mm(a, b)
        times = []
        for _ in range(5):
            start = time.perf_counter()
            torch.mm(a, b)
            times.append(time.perf_counter() - start)
        best = max(best, 2 * m * k * n / min(times) / 1e9)
    return best


def step_weight_bytes(options: dict) -> int:
    """Bytes of the per-step (recurrent and projection) fp32 weights of all direction-layers: what every
    time step must read, shared by the rows of a batch."""
    lstm = options["lstm"]
    cell, projection = lstm["dim"], lstm["projection_dim"]
    return 2 * lstm["n_layers"] * 4 * (projection * 4 * cell + cell * projection)


def weight_streaming_gbps(threads: int, options: dict) -> float:
    """Best GB/s at which matrix-vector products read one direction-layer's per-step weights, the
    recurrent (4C, P) and projection (P, C) in (in, out) memory order, one after the other as in a step.
    Repeating the same weights lets them stay in whatever cache holds them: the most favourable case."""
    import torch

    torch.set_num_threads(threads)
    lstm = options["lstm"]
    cell, projection = lstm["dim"], lstm["projection_dim"]
    generator = torch.Generator().manual_seed(0)
    recurrent = torch.randn(projection, 4 * cell, generator=generator).t()
    project = torch.randn(cell, projection, generator=generator).t()
    state, gates, hidden = torch.randn(projection), torch.empty(4 * cell), torch.empty(projection)
    cell_state = torch.randn(cell)
    bytes_per_step = 4 * (recurrent.numel() + project.numel())
    best = 0.0
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(10):
            torch.mv(recurrent, state, out=gates)
            torch.mv(project, cell_state, out=hidden)
        best = max(best, 10 * bytes_per_step / (time.perf_counter() - start) / 1e9)
    return best


def layer_diff(ours: np.ndarray, reference: np.ndarray) -> tuple[float, float]:
    """Max abs difference over all layers, and the same relative to the largest |value|."""
    if ours.shape != reference.shape:
        raise RuntimeError(f"layer shapes differ: ours {ours.shape}, reference {reference.shape}")
    diff = float(np.abs(ours.astype(np.float64) - reference.astype(np.float64)).max())
    return diff, diff / float(np.abs(reference).max())


def drift(ours: np.ndarray, reference: np.ndarray) -> dict:
    """Cosine similarity per vector (real positions only) and max abs difference, against fp32."""
    a, b = ours.reshape(-1, ours.shape[-1]).astype(np.float64), reference.reshape(-1, reference.shape[-1]).astype(np.float64)
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    real = norms > 0
    cosine = (a[real] * b[real]).sum(axis=1) / norms[real]
    return {"min_cosine": float(cosine.min()), "mean_cosine": float(cosine.mean()),
            "max_abs": float(np.abs(a - b).max())}


def machine_info(threads: int) -> str:
    import torch

    cpu = platform.processor() or "cpu"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else ("?",) * 3
    return (f"{cpu}, {os.cpu_count()} logical CPUs, {threads} threads per side, torch {torch.__version__}, "
            f"load average {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} (1 / 5 / 15 min) at the start")


# Main --------------------------------------------------------------------------------------------


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.ceiling_only:
        print(ceiling_gflops(args.threads), weight_streaming_gbps(args.threads, standard_options()))
        return 0
    sys.path.insert(0, str(REPO))
    for report_path in (args.markdown, args.json):  # fail now, not after minutes of timing
        if report_path:
            Path(report_path).parent.mkdir(parents=True, exist_ok=True)
    if not args.ours_only and not args.against:
        python = args.allennlp_python
        if not python or not (os.path.isfile(python) and os.access(python, os.X_OK)):
            print(
                f"error: the AllenNLP reference python is missing ({python or 'no --allennlp-python given'}).\n"
                "Build it with:  bash benchmarks/setup_allennlp_reference.sh /path/to/venv-allennlp\n"
                "then pass --allennlp-python /path/to/venv-allennlp/bin/python (or use --ours-only).",
                file=sys.stderr,
            )
            return 2
        check = subprocess.run([python, "-c", "from allennlp.modules.elmo import Elmo"], capture_output=True, text=True)
        if check.returncode != 0:
            print(f"error: {python} cannot import allennlp.modules.elmo:\n{check.stderr[-1500:]}", file=sys.stderr)
            return 2

    work_dir = Path(args.work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    if args.against:
        return compare_commits(args, work_dir)
    info = machine_info(args.threads)
    print(info, flush=True)
    options, weights, folder, convert_seconds = build_model_files(work_dir, args.seed)
    per_word_token_flops = flops_per_token(standard_options())
    print(f"converted hdf5 -> {folder} in {convert_seconds:.1f} s", flush=True)
    gflops, gbps = measure_ceiling(args.threads)
    bytes_per_step = step_weight_bytes(standard_options())
    print(f"matrix-multiply rate: {gflops:.0f} GFLOP/s; per-step weights read at {gbps:.0f} GB/s", flush=True)

    rng = random.Random(args.seed)
    vocabulary = make_vocabulary(rng)
    wanted = [s.strip() for s in args.shapes.split(",") if s.strip()]
    unknown = set(wanted) - {s[0] for s in SHAPES}
    if unknown:
        print(f"error: unknown shapes {sorted(unknown)}; choose from {[s[0] for s in SHAPES]}", file=sys.stderr)
        return 2
    base = {"options": str(options), "weights": str(weights), "folder": str(folder), "threads": args.threads,
            "warmup": args.warmup, "vocabulary": vocabulary}
    rows, extra_rows, loads = [], [], {"ours": [], "allennlp": []}
    for name, count, shortest, longest in SHAPES:
        sentences = make_sentences(rng, vocabulary, count, shortest, longest)
        if name not in wanted:
            continue
        words = sum(len(s) for s in sentences)
        tokens = words + 2 * len(sentences)
        repeats = args.repeats * (3 if count == 1 else 1)
        spec = dict(base, sentences=sentences, repeats=repeats)
        tag = name.replace(" ", "")
        ours = run_worker(sys.executable, dict(spec, side="ours", mode="fp32"), work_dir, f"ours-{tag}", args.threads)
        loads["ours"].append(ours["load_s"])
        row = {"shape": name, "words": words, "ours": ours}
        # Ceiling for this shape: all of its FLOPs at the measured matrix-multiply rate, or every time step
        # reading all per-step weights at the measured rate, whichever takes longer.
        compute_seconds = tokens * per_word_token_flops / (gflops * 1e9)
        memory_seconds = (max(len(s) for s in sentences) + 2) * bytes_per_step / (gbps * 1e9)
        row["ceiling_wps"] = words / max(compute_seconds, memory_seconds)
        row["bound"] = "memory" if memory_seconds > compute_seconds else "compute"
        if not args.ours_only:
            reference = run_worker(args.allennlp_python, dict(spec, side="allennlp", mode="fp32"), work_dir,
                                   f"allennlp-{tag}", args.threads)
            loads["allennlp"].append(reference["load_s"])
            row["allennlp"] = reference
            row["max_abs"], row["relative"] = layer_diff(ours["layers"], reference["layers"])
        rows.append(row)
        print(format_row(row), flush=True)
        if name == EXTRA_MODE_SHAPE:
            for mode in [m.strip() for m in args.extra_modes.split(",") if m.strip()]:
                result = run_worker(sys.executable, dict(spec, side="ours", mode=mode), work_dir, f"ours-{mode}-{tag}",
                                    args.threads)
                extra = {"mode": mode, "words": words, "result": result, "drift": drift(result["layers"], ours["layers"]),
                         "speedup": ours["median_s"] / result["median_s"]}
                if "allennlp" in row:
                    extra["vs_allennlp"] = row["allennlp"]["median_s"] / result["median_s"]
                extra_rows.append(extra)
                print(f"  mode {mode}: {words / result['median_s']:.0f} words/s, drift {extra['drift']}", flush=True)

    report = render(args, info, rows, extra_rows, loads, convert_seconds, gflops, per_word_token_flops, gbps, bytes_per_step)
    print()
    print(report)
    if args.markdown:
        Path(args.markdown).write_text(report, encoding="utf-8")
    if args.json:
        def clean(value):
            if isinstance(value, dict):
                return {k: clean(v) for k, v in value.items() if k != "layers"}
            if isinstance(value, list):
                return [clean(v) for v in value]
            return value

        Path(args.json).write_text(json.dumps(clean({"rows": rows, "extra": extra_rows, "loads": loads,
                                                     "convert_s": convert_seconds, "gflops": gflops,
                                                     "weight_gbps": gbps}), indent=1))
    return 0


def compare_commits(args, work_dir: Path) -> int:
    """This checkout against commit `args.against`, same weights and sentences, runs interleaved
    (new, old, new, old, ...) so that a machine's drift over minutes reaches both alike."""
    old_repo = work_dir / f"against-{args.against}"
    if not old_repo.is_dir():
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(old_repo), args.against],
                       check=True, capture_output=True)
    info = machine_info(args.threads)
    print(info, flush=True)
    options, weights, folder, _ = build_model_files(work_dir, args.seed)
    rng = random.Random(args.seed)
    vocabulary = make_vocabulary(rng)
    wanted = {s.strip() for s in args.shapes.split(",") if s.strip()}
    base = {"options": str(options), "weights": str(weights), "folder": str(folder), "threads": args.threads,
            "warmup": args.warmup, "vocabulary": vocabulary, "side": "ours", "mode": "fp32"}
    lines = [f"`python benchmarks/bench_inference.py --against {args.against} --rounds {args.rounds} "
             f"--repeats {args.repeats} --threads {args.threads}`", "", info, "",
             f"| shape | this checkout: median ms per round | {args.against}: median ms per round | ratio of "
             "medians (old / new) | max abs diff of all layers |", "| --- | --- | --- | --- | --- |"]
    for name, count, shortest, longest in SHAPES:
        sentences = make_sentences(rng, vocabulary, count, shortest, longest)
        if name not in wanted:
            continue
        spec = dict(base, sentences=sentences, repeats=args.repeats * (3 if count == 1 else 1))
        tag = name.replace(" ", "")
        times = {"new": [], "old": []}
        for round_number in range(args.rounds):
            for side, repo in (("new", REPO), ("old", old_repo)):
                result = run_worker(sys.executable, dict(spec), work_dir, f"{side}-{tag}-{round_number}", args.threads,
                                    repo)
                times[side].append(result["median_s"] * 1000)
                layers = result["layers"]
                if side == "new":
                    new_layers = layers
        max_abs = float(np.abs(new_layers - layers).max())
        new_median, old_median = statistics.median(times["new"]), statistics.median(times["old"])
        lines.append(f"| {name} | {' / '.join(f'{t:.0f}' for t in times['new'])} | "
                     f"{' / '.join(f'{t:.0f}' for t in times['old'])} | {old_median / new_median:.3f} | {max_abs:.1e} |")
        print(lines[-1], flush=True)
    report = "\n".join(lines) + "\n"
    print()
    print(report)
    if args.markdown:
        Path(args.markdown).write_text(report, encoding="utf-8")
    return 0


def format_row(row: dict) -> str:
    ours = row["ours"]
    text = f"{row['shape']}: ours {row['words'] / ours['median_s']:.0f} words/s ({ours['peak_rss_mb']:.0f} MB)"
    if "allennlp" in row:
        reference = row["allennlp"]
        text += (f", AllenNLP {row['words'] / reference['median_s']:.0f} words/s ({reference['peak_rss_mb']:.0f} MB), "
                 f"ratio {reference['median_s'] / ours['median_s']:.2f}, max abs {row['max_abs']:.2e} "
                 f"(relative {row['relative']:.2e})")
    return text


def render(args, info, rows, extra_rows, loads, convert_seconds, gflops, per_token_flops, gbps, bytes_per_step) -> str:
    command = "python benchmarks/bench_inference.py " + " ".join(sys.argv[1:])
    lines = [f"Command: `{command}`", "", f"Machine: {info}.", "",
             f"Matrix-multiply rate measured in this run: {gflops:.0f} GFLOP/s; the model needs "
             f"{per_token_flops / 1e6:.0f} MFLOP per token (boundary tokens included in each shape's ceiling). "
             f"Matrix-vector products read one direction-layer's per-step weights at {gbps:.0f} GB/s; every time "
             f"step reads {bytes_per_step / 2**20:.0f} MB of them (all direction-layers), shared by the batch's rows. "
             "The ceiling is the lower of the two limits; 'bound' says which.", ""]
    with_reference = any("allennlp" in row for row in rows)
    header = ["batch (sentences x words)", "ours words/s", "ours ms/batch", "ours peak RSS MB"]
    if with_reference:
        header += ["AllenNLP words/s", "AllenNLP ms/batch", "AllenNLP peak RSS MB", "ratio ours/AllenNLP",
                   "ratio of best runs", "max abs diff (all layers)", "relative diff"]
    header += ["ceiling words/s", "bound", "fraction of ceiling"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        ours = row["ours"]
        cells = [row["shape"], f"{row['words'] / ours['median_s']:.0f}", f"{ours['median_s'] * 1e3:.0f}",
                 f"{ours['peak_rss_mb']:.0f}"]
        if with_reference:
            reference = row["allennlp"]
            cells += [f"{row['words'] / reference['median_s']:.0f}", f"{reference['median_s'] * 1e3:.0f}",
                      f"{reference['peak_rss_mb']:.0f}", f"{reference['median_s'] / ours['median_s']:.2f}x",
                      f"{min(reference['times_s']) / min(ours['times_s']):.2f}x",
                      f"{row['max_abs']:.1e}", f"{row['relative']:.1e}"]
        cells += [f"{row['ceiling_wps']:.0f}", row["bound"], f"{row['words'] / ours['median_s'] / row['ceiling_wps']:.0%}"]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    if extra_rows:
        lines += [f"Other modes of ours at {EXTRA_MODE_SHAPE} (drift against our fp32 output, all layers):", "",
                  "| mode | words/s | speed-up vs fp32 | vs AllenNLP | peak RSS MB | min cosine | mean cosine | max abs diff |",
                  "|---|---|---|---|---|---|---|---|"]
        for extra in extra_rows:
            result, d = extra["result"], extra["drift"]
            note = f" (cache of {result['cache_tokens']} tokens built in {result['cache_build_s']:.1f} s)" if "cache_tokens" in result else ""
            vs = f"{extra['vs_allennlp']:.2f}x" if "vs_allennlp" in extra else "-"
            lines.append(f"| {extra['mode']}{note} | {extra['words'] / result['median_s']:.0f} | {extra['speedup']:.2f}x | {vs} | "
                         f"{result['peak_rss_mb']:.0f} | {d['min_cosine']:.6f} | {d['mean_cosine']:.6f} | {d['max_abs']:.1e} |")
        lines.append("")
    load_line = f"Loading: converting the hdf5 to a folder took {convert_seconds:.1f} s; our `from_pretrained` took " \
                f"{statistics.median(loads['ours']):.2f} s (median of {len(loads['ours'])} processes)"
    if loads["allennlp"]:
        load_line += f", AllenNLP's `Elmo` hdf5 load {statistics.median(loads['allennlp']):.2f} s (median of {len(loads['allennlp'])})"
    lines += [load_line + ".", "",
              f"Times are medians of {args.repeats} runs after {args.warmup} warm-up run(s) (batch 1: {3 * args.repeats} runs), "
              "each side in its own fresh process per shape; peak RSS is that process's maximum resident set "
              "(VmHWM). 'Ratio of best runs' compares the fastest run of each side, which is less sensitive to "
              "other load on the machine than the medians."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
