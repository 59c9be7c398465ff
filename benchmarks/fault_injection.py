"""Fault injection: kill hf-elmo's commands at random moments, fill their disk, damage their weights; print a table.

    python benchmarks/fault_injection.py [--trials 6] [--seed 0] [--markdown table.md]

Each scenario runs the real command line (`python -m hf_elmo.cli ...`) on tiny models built here, so a crash
shows as an exit status. What counts as a pass:

- kill (SIGKILL, SIGTERM or SIGINT after a random delay), then the same command again: `pretrain` and
  `finetune train` end with the weights of an uninterrupted run (pretrain within 1e-6, finetune bit for bit)
  and pretrain's train_loss equals the uninterrupted one; `embed` and `convert` leave either nothing or the
  complete output under the final name, and the rerun removes what the killed run left behind.
- full disk (a tmpfs of a random size from 16 kB to 1 MB, root only): exit 0 with a complete output, or exit 2 with one
  `hf-elmo: error:` line and no traceback, and no temporary file left.
- damaged weights (256 random bytes, or a few flipped low bits, somewhere in model.safetensors): `embed`
  refuses with exit 2 naming the file; it never exits 0 with vectors that differ from the undamaged model's.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
TEMPORARY = re.compile(r"^\..+\.[a-z]+-\d+-\d+-")
TINY = dict(char_embedding_dim=8, char_cnn_filters=[[1, 32], [2, 32]], num_highway_layers=1, projection_dim=16,
            lstm_cell_dim=32, num_lstm_layers=2)
PRETRAIN_SIZE = ["--projection-dim", "16", "--cell-dim", "32", "--char-dim", "4", "--filters", "[[1,8],[2,8],[3,16]]",
                 "--highway", "1", "--threads", "1", "--no-progress"]
WORDS = "the cat sat on a mat and saw dog run to the park in rain while birds sang".split()


def hf_elmo(argv, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hf_elmo.cli", *map(str, argv)], capture_output=True, text=True,
                          cwd=REPO, env=_env(), **kwargs)


def _env() -> dict:
    return dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")


def killed_at_random(argv, rng: random.Random, longest: float) -> tuple[int, str]:
    """Start the command, send a random signal after a random delay (0.5 s to `longest`); (exit status, signal)."""
    sig = rng.choice([signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
    process = subprocess.Popen([sys.executable, "-m", "hf_elmo.cli", *map(str, argv)], cwd=REPO, env=_env(),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        process.wait(timeout=rng.uniform(0.5, longest))
    except subprocess.TimeoutExpired:
        process.send_signal(sig)
        process.wait()
        return process.returncode, sig.name
    return process.returncode, "none (finished first)"


def leftovers(folder: Path) -> list[str]:
    return [name for name in os.listdir(folder) if TEMPORARY.match(name)]


def weights(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def max_difference(a: dict, b: dict) -> float:
    if a.keys() != b.keys():
        return float("inf")
    return max(float((a[k].double() - b[k].double()).abs().max()) if a[k].numel() else 0.0 for k in a)


# Setup --------------------------------------------------------------------------------------------------


def build_inputs(work: Path) -> dict:
    from hf_elmo import ElmoConfig, ElmoModel, ElmoTokenizer

    torch.manual_seed(0)
    ElmoModel(ElmoConfig(**TINY)).save_pretrained(work / "tiny")
    ElmoTokenizer(segmenter="whitespace").save_pretrained(work / "tiny")
    rng = random.Random(0)
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 25))) for _ in range(4000)]
    (work / "sentences.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    corpus = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 15))) for _ in range(2000)]
    (work / "corpus.txt").write_text("\n".join(corpus) + "\n", encoding="utf-8")
    conll = []
    for _ in range(300):
        words = [rng.choice(WORDS) for _ in range(rng.randint(2, 10))]
        conll.append("".join(f"{w}\t{'B-ANIMAL' if w in ('cat', 'dog', 'birds') else 'O'}\n" for w in words))
    (work / "train.conll").write_text("\n".join(conll), encoding="utf-8")
    return {
        "embed": ["embed", work / "sentences.txt", "OUT", "--model", work / "tiny", "--layers", "all"],
        "convert": ["convert", "--to", "allennlp", "--model", work / "tiny", "OUT"],
        "pretrain": ["pretrain", "--train-file", work / "corpus.txt", "--min-count", "1", "--output-dir", "OUT",
                     "--batch-size", "8", "--max-steps", "60", "--save-steps", "10", "--save-total-limit", "2",
                     "--seed", "1", *PRETRAIN_SIZE],
        "finetune": ["finetune", "train", "--model", work / "tiny", "--train", work / "train.conll", "--output-dir",
                     "OUT", "--epochs", "6", "--batch-size", "4", "--dropout", "0.2", "--no-precompute-elmo",
                     "--threads", "1", "--seed", "2"],
    }


def with_output(argv: list, output: Path) -> list:
    return [output if item == "OUT" else item for item in argv]


# Scenarios ----------------------------------------------------------------------------------------------


def kill_trials(commands: dict, work: Path, trials: int, rng: random.Random) -> list[dict]:
    rows = []
    for name in ("pretrain", "finetune", "embed", "convert"):
        output_name = "out.hdf5" if name == "embed" else "out"
        reference = work / f"reference-{name}" / output_name
        reference.parent.mkdir()
        started = time.time()
        done = hf_elmo(with_output(commands[name], reference))
        assert done.returncode == 0, done.stderr[-2000:]
        duration = time.time() - started
        passed, notes = 0, []
        for trial in range(trials):
            folder = work / f"kill-{name}-{trial}"
            folder.mkdir()
            output = folder / output_name
            status, sent = killed_at_random(with_output(commands[name], output), rng, duration)
            partial = output.exists() and not _complete(name, output)
            if name in ("pretrain", "finetune"):
                finished_first = name == "finetune" and output.exists()  # a finished output is replaced only on request
                again = hf_elmo(with_output(commands[name], output) + (["--overwrite"] if finished_first else []))
                ok = again.returncode == 0
                difference = max_difference(weights(output), weights(reference)) if ok else float("inf")
                ok = ok and difference <= (1e-6 if name == "pretrain" else 0.0)
                if ok and name == "pretrain":
                    loss = json.loads((output / "pretraining_summary.json").read_text())["train_loss"]
                    expected = json.loads((reference / "pretraining_summary.json").read_text())["train_loss"]
                    ok = abs(loss - expected) <= 1e-6 * abs(expected)
            else:
                again = hf_elmo(with_output(commands[name], output) + (["--overwrite"] if output.exists() else []))
                ok = again.returncode == 0 and not partial and _complete(name, output)
            ok = ok and not leftovers(folder)
            passed += ok
            if not ok:
                notes.append(f"trial {trial} ({sent}, exit {status}): rerun exit {again.returncode}; "
                             f"partial output {partial}; leftovers {leftovers(folder)}")
        rows.append({"scenario": f"kill `{name}` at a random moment, run again", "trials": trials, "passed": passed,
                     "notes": "; ".join(notes) or f"uninterrupted run {duration:.1f} s"})
    return rows


def _complete(name: str, output: Path) -> bool:
    if name == "embed":
        import h5py

        try:
            with h5py.File(output, "r") as handle:
                return "sentence_to_index" in handle and len(handle) == 4001
        except OSError:
            return False
    if name == "convert":
        return (output / "options.json").is_file() and (output / "weights.hdf5").is_file()
    return (output / "model.safetensors").is_file()


def full_disk_trials(commands: dict, work: Path, trials: int, rng: random.Random) -> list[dict]:
    if os.geteuid() != 0:
        return [{"scenario": "full disk", "trials": 0, "passed": 0, "notes": "not run: mounting a tmpfs needs root"}]
    from_allennlp = ["convert", "--from", "allennlp", "--options", work / "bilm" / "options.json", "--weights",
                     work / "bilm" / "weights.hdf5", "OUT"]
    assert hf_elmo(with_output(commands["convert"], work / "bilm")).returncode == 0
    cases = {
        "embed (hdf5)": (commands["embed"], "out.hdf5"),
        "embed (npy)": (commands["embed"], "out.npy"),
        "convert --to allennlp": (commands["convert"], "out"),
        "convert --from allennlp": (from_allennlp, "out"),
        "pretrain": (commands["pretrain"], "out"),
        "finetune train": (commands["finetune"], "out"),
    }
    rows = []
    for label, (argv, output_name) in cases.items():
        passed, notes, sizes, exits = 0, [], [], {0: 0, 2: 0}
        for trial in range(trials):
            size = rng.randint(16, 1024) * 1024
            sizes.append(size // 1024)
            folder = Path(tempfile.mkdtemp(prefix="fault-disk-"))
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], check=True)
            try:
                result = hf_elmo(with_output(argv, folder / output_name))
                exits[result.returncode] = exits.get(result.returncode, 0) + 1
                lines = result.stderr.strip().splitlines()
                clean = "Traceback" not in result.stderr and not leftovers(folder)
                if result.returncode == 0:
                    ok = clean and (folder / output_name).exists()
                else:
                    ok = clean and result.returncode == 2 and lines[-1].startswith("hf-elmo: error: ")
                passed += ok
                if not ok:
                    notes.append(f"{size // 1024} kB: exit {result.returncode}, {lines[-1][:150] if lines else ''}")
            finally:
                subprocess.run(["umount", "-l", str(folder)], check=False)
                folder.rmdir()
        rows.append({"scenario": f"full disk: `{label}`", "trials": trials, "passed": passed,
                     "notes": "; ".join(notes) or f"tmpfs of {min(sizes)}-{max(sizes)} kB: {exits[0]} finished (exit 0), "
                              f"{exits[2]} refused with one error line (exit 2), nothing left behind"})
    return rows


def damage_trials(commands: dict, work: Path, trials: int, rng: random.Random) -> list[dict]:
    reference = work / "damage-reference.hdf5"
    sentences = work / "few.txt"
    sentences.write_text("the cat sat on a mat\ndog run to the park\n", encoding="utf-8")
    argv = ["embed", sentences, "OUT", "--model", "MODEL", "--layers", "all"]
    assert hf_elmo([reference if a == "OUT" else work / "tiny" if a == "MODEL" else a for a in argv]).returncode == 0
    rows = []
    for kind in ("256 random bytes", "flipped low bits"):
        passed, notes = 0, []
        for trial in range(trials):
            model = work / f"damaged-{kind[:3]}-{trial}"
            shutil.copytree(work / "tiny", model)
            path = model / "model.safetensors"
            data = bytearray(path.read_bytes())
            header = 8 + int.from_bytes(data[:8], "little")
            if kind == "256 random bytes":
                start = rng.randrange(header, len(data) - 256)
                data[start:start + 256] = bytes(rng.randrange(256) for _ in range(256))
            else:
                for _ in range(rng.randint(1, 4)):
                    data[rng.randrange(header, len(data))] ^= 1 << rng.randrange(3)
            path.write_bytes(bytes(data))
            output = model.parent / f"{model.name}.hdf5"
            result = hf_elmo([output if a == "OUT" else model if a == "MODEL" else a for a in argv])
            if result.returncode == 2:
                ok = "model.safetensors" in result.stderr and "Traceback" not in result.stderr and not output.exists()
            else:
                ok = result.returncode == 0 and _same_vectors(output, reference)
            passed += ok
            if not ok:
                notes.append(f"trial {trial}: exit {result.returncode} {result.stderr.strip()[-150:]}")
        rows.append({"scenario": f"damaged model.safetensors ({kind}), `embed`", "trials": trials, "passed": passed,
                     "notes": "; ".join(notes) or "refused naming model.safetensors (checksum)"})
    return rows


def _same_vectors(output: Path, reference: Path) -> bool:
    import h5py

    with h5py.File(output, "r") as a, h5py.File(reference, "r") as b:
        return all(np.array_equal(a[k][...], b[k][...]) for k in ("0", "1"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=6, help="trials per scenario")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--markdown", type=Path, help="also write the table here")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="hf-elmo-faults-"))
    started = time.time()
    try:
        commands = build_inputs(work)
        rows = kill_trials(commands, work, args.trials, rng)
        rows += full_disk_trials(commands, work, args.trials, rng)
        rows += damage_trials(commands, work, args.trials, rng)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    table = ["| scenario | trials | passed | notes |", "| --- | --- | --- | --- |"]
    table += [f"| {r['scenario']} | {r['trials']} | {r['passed']} | {r['notes']} |" for r in rows]
    text = "\n".join(table) + f"\n\n{time.time() - started:.0f} s in all, seed {args.seed}\n"
    print(text)
    if args.markdown:
        args.markdown.write_text(text, encoding="utf-8")
    sys.exit(0 if all(r["passed"] == r["trials"] for r in rows) else 1)


if __name__ == "__main__":
    main()
