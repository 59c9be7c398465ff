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
- issue 37 (`--only issue37`): weights that are not the model's, `--overwrite` onto special files, `corpus
  shopping` killed / on a full disk (the old or the new complete set of seven files, never a mix), the sweep
  beside a run of another pid namespace, a dictionary model without tokenizer_config.json, two runs into one
  output, `--overwrite` killed between its steps, a "dtype" in config.json, impossible sizes and huge hdf5
  datasets, CR-only line ends, file modes, invalid UTF-8. Each row says what
  passes; a refusal passes only as exit 2 with one `hf-elmo: error:` line and no traceback.
- issue 46 (`--only issue46`): outputs on, around or inside the model they read; a tokenizer that does not fit its
  model; vocabulary ids beyond the embeddings; weights whose outputs are not finite; a tagger's folder loaded for its
  biLM; a Ctrl-C at interpreter exit; a pickle that is not plain tensors; and (issue 45.2) SIGINT / SIGTERM during
  `pretrain` before its first checkpoint.
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
                lines = sum(1 for key in handle if key.isdigit())
                return "sentence_to_index" in handle and lines == 4000 and len(handle["words"]) == 4000
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
    # Without a checksum sidecar (issue 41: weights rewritten by standard tools must load) damage is found by
    # safetensors' own checks (a file cut short) and by the scan of the loaded values (bytes that read as NaN);
    # bytes that still read as finite numbers are not detectable, and are not tried here.
    for kind in ("cut short", "256 bytes of 0xff"):
        passed, notes = 0, []
        for trial in range(trials):
            model = work / f"damaged-{kind[:3]}-{trial}"
            shutil.copytree(work / "tiny", model)
            path = model / "model.safetensors"
            data = bytearray(path.read_bytes())
            header = 8 + int.from_bytes(data[:8], "little")
            if kind == "cut short":
                del data[rng.randrange(1, len(data)):]
            else:
                start = rng.randrange(header, len(data) - 256)
                data[start:start + 256] = b"\xff" * 256
            path.write_bytes(bytes(data))
            output = model.parent / f"{model.name}.hdf5"
            result = hf_elmo([output if a == "OUT" else model if a == "MODEL" else a for a in argv])
            if result.returncode == 2:
                ok = "safetensors" in result.stderr and "Traceback" not in result.stderr and not output.exists()
            else:
                ok = result.returncode == 0 and _same_vectors(output, reference)
            passed += ok
            if not ok:
                notes.append(f"trial {trial}: exit {result.returncode} {result.stderr.strip()[-150:]}")
        rows.append({"scenario": f"damaged model.safetensors ({kind}), `embed`", "trials": trials, "passed": passed,
                     "notes": "; ".join(notes) or "refused naming the safetensors weights"})
    return rows


def _same_vectors(output: Path, reference: Path) -> bool:
    import h5py

    with h5py.File(output, "r") as a, h5py.File(reference, "r") as b:
        return all(np.array_equal(a[k][...], b[k][...]) for k in ("0", "1"))


# Issue 37: what outputs may replace, one writer, interrupted replacements, weights and inputs that are wrong ---


FEW = "the cat sat on a mat\ndog run to the park\n"


def _refused(result: subprocess.CompletedProcess, *phrases: str) -> bool:
    """Exit 2 with one `hf-elmo: error:` line holding every phrase last, and no traceback."""
    lines = result.stderr.strip().splitlines()
    return (result.returncode == 2 and "Traceback" not in result.stderr and bool(lines)
            and lines[-1].startswith("hf-elmo: error: ") and all(phrase in lines[-1] for phrase in phrases))


def _row(scenario: str, outcomes: list[tuple[str, bool]], passing_note: str) -> dict:
    failed = [label for label, ok in outcomes if not ok]
    return {"scenario": scenario, "trials": len(outcomes), "passed": len(outcomes) - len(failed),
            "notes": "failed: " + "; ".join(failed) if failed else passing_note}


def _hidden(folder: Path) -> list[str]:
    return sorted(name for name in os.listdir(folder) if name.startswith("."))


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir()) if not path.name.startswith(".")}


def weights_not_the_models_trials(work: Path) -> list[dict]:
    from safetensors.torch import load_file, save_file

    few = work / "few37.txt"
    few.write_text(FEW, encoding="utf-8")
    damages = {
        "without the biLSTM tensors": lambda name: None if name.startswith("bilstm.") else name,
        "with foreign names only": lambda name: f"encoder.{name}",
    }
    outcomes = []
    for number, (damage, rename) in enumerate(damages.items()):
        model = work / f"weights-not-the-models-{number}"
        shutil.copytree(work / "tiny", model)
        tensors = load_file(str(model / "model.safetensors"))
        save_file({rename(k): v for k, v in tensors.items() if rename(k)}, str(model / "model.safetensors"),
                  metadata={"format": "pt"})
        outputs = work / f"weights-not-the-models-out-{number}"
        outputs.mkdir()
        for command, argv in {
            "embed": ["embed", few, outputs / "out.hdf5", "--model", model],
            "info": ["info", "--model", model],
            "convert --to allennlp": ["convert", "--to", "allennlp", "--model", model, outputs / "bilm"],
        }.items():
            result = hf_elmo(argv)
            ok = _refused(result, str(model / "model.safetensors")) and not os.listdir(outputs)
            outcomes.append((f"`{command}` {damage}: exit {result.returncode}", ok))
    return [_row("model.safetensors without the biLSTM tensors or with foreign names only (rewritten by save_file): "
                 "`embed`, `info`, `convert --to allennlp` (#1)", outcomes,
                 "refused naming model.safetensors, exit 2, nothing written")]


def special_file_trials(work: Path) -> list[dict]:
    import socket
    import stat

    few = work / "few37.txt"
    few.write_text(FEW, encoding="utf-8")
    makers = {
        "a FIFO": (os.mkfifo, stat.S_ISFIFO),
        "a socket": (lambda path: socket.socket(socket.AF_UNIX).bind(str(path)), stat.S_ISSOCK),
        "a symlink to another file": (lambda path: os.symlink(work / "few37.txt", path), stat.S_ISLNK),
        "a dangling symlink": (lambda path: os.symlink(work / "nowhere", path), stat.S_ISLNK),
    }
    if os.geteuid() == 0:
        makers["/dev/null's device numbers"] = (lambda path: os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3)),
                                                stat.S_ISCHR)
    outcomes = []
    for number, (kind, (make, is_kind)) in enumerate(makers.items()):
        for command in ("embed", "corpus segment"):
            folder = work / f"special-{number}-{command.replace(' ', '-')}"
            folder.mkdir()
            output = folder / "out"
            make(output)
            argv = (["embed", few, output, "--model", work / "tiny", "--overwrite"] if command == "embed" else
                    ["corpus", "segment", "--input", few, "--output", output, "--segmenter", "whitespace", "--overwrite"])
            result = hf_elmo(argv)
            ok = _refused(result, str(output)) and is_kind(os.lstat(output).st_mode) and os.listdir(folder) == ["out"]
            ok = ok and few.read_text(encoding="utf-8") == FEW
            outcomes.append((f"`{command} --overwrite` onto {kind}: exit {result.returncode}", ok))
    return [_row("`--overwrite` onto a device node, FIFO, socket or symlink: `embed`, `corpus segment` (#2)", outcomes,
                 "refused by name, exit 2, the entry untouched" + ("" if os.geteuid() == 0 else " (no device: not root)"))]


def _shopping_csv(path: Path, reviews: int = 1500) -> None:
    rng = random.Random(37)
    characters = "小米手机很好用屏幕清楚苹果烂了拍照房间干净一般服务态度物流快质量差价格便宜推荐"
    rows = [f"{rng.choice(['手机', '水果', '酒店', '书籍'])},{rng.randint(0, 1)},"
            + "".join(rng.choice(characters) for _ in range(rng.randint(5, 60))) + f"{i}" for i in range(reviews)]
    path.write_text("cat,label,review\n" + "\n".join(rows) + "\n", encoding="utf-8")


def shopping_trials(work: Path, trials: int, rng: random.Random) -> list[dict]:
    csv_path = work / "shopping.csv"
    _shopping_csv(csv_path)

    def shopping(folder: Path, salt: str, *extra) -> list:
        return ["corpus", "shopping", "--input", csv_path, "--output-dir", folder, "--salt", salt, *extra]

    old, new = work / "shopping-old", work / "shopping-new"
    assert hf_elmo(shopping(old, "old")).returncode == 0
    started = time.time()
    assert hf_elmo(shopping(new, "new")).returncode == 0
    duration = time.time() - started
    old_set, new_set = _snapshot(old), _snapshot(new)
    rows = []
    outcomes = []
    for trial in range(trials):
        folder = work / f"shopping-kill-{trial}"
        shutil.copytree(old, folder)
        status, sent = killed_at_random(shopping(folder, "new", "--overwrite"), rng, duration)
        whole = _snapshot(folder) in (old_set, new_set)
        again = hf_elmo(shopping(folder, "new", "--overwrite"))
        ok = whole and again.returncode == 0 and _snapshot(folder) == new_set and not _hidden(folder)
        outcomes.append((f"trial {trial} ({sent}, exit {status}): a whole set {whole}, rerun exit {again.returncode}, "
                         f"leftovers {_hidden(folder)}", ok))
    rows.append(_row("kill `corpus shopping --salt NEW --overwrite` at a random moment, run again (#3)", outcomes,
                     f"each time the old or the new complete set of 7 files, never a mix; the rerun wrote the new one "
                     f"and left nothing behind (uninterrupted run {duration:.1f} s)"))
    folder = work / "shopping-refuse"
    shutil.copytree(old, folder)
    result = hf_elmo(shopping(folder, "new"))
    rows.append(_row("`corpus shopping` into a folder holding results, without `--overwrite` (#3)",
                     [(f"exit {result.returncode}", _refused(result, "--overwrite") and _snapshot(folder) == old_set)],
                     "refused, the results untouched"))
    if os.geteuid() == 0:
        set_size = sum(map(len, old_set.values()))
        outcomes, exits = [], {0: 0, 2: 0}
        for trial in range(trials):
            size = rng.randint(set_size // 1024 + 8, 2 * set_size // 1024 + 24) * 1024  # old + new need 2x
            folder = Path(tempfile.mkdtemp(prefix="fault-disk-"))
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], check=True)
            try:
                for name, data in old_set.items():
                    (folder / name).write_bytes(data)
                result = hf_elmo(shopping(folder, "new", "--overwrite"))
                exits[result.returncode] = exits.get(result.returncode, 0) + 1
                expected = new_set if result.returncode == 0 else old_set
                ok = (result.returncode == 0 or _refused(result)) and _snapshot(folder) == expected and not _hidden(folder)
                outcomes.append((f"{size // 1024} kB: exit {result.returncode}", ok))
            finally:
                subprocess.run(["umount", "-l", str(folder)], check=False)
                folder.rmdir()
        rows.append(_row("full disk: `corpus shopping --salt NEW --overwrite` over an old set (#3)", outcomes,
                         f"{exits[0]} wrote the new set (exit 0), {exits[2]} refused with one line keeping the old set "
                         "whole (exit 2); nothing left behind"))
    return rows


LIVE_TEMPORARY = """
import os, sys, time
from hf_elmo.utils.io import temporary_name
path = os.path.join(sys.argv[1], temporary_name("out.hdf5"))
open(path, "w").close()
print(path, flush=True)
time.sleep(120)
"""


def other_namespace_trials(work: Path) -> list[dict]:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return [{"scenario": "sweep beside a live run of another pid namespace (#4)", "trials": 0, "passed": 0,
                 "notes": "not run: unshare needs root"}]
    folder = work / "namespace"
    folder.mkdir()
    (folder / "few.txt").write_text(FEW, encoding="utf-8")
    # --kill-child: the run in the namespace ends with unshare (its pid 1 would otherwise outlive it)
    owner = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", sys.executable, "-c",
                              LIVE_TEMPORARY, folder], stdout=subprocess.PIPE, text=True, cwd=REPO, env=_env())
    try:
        temporary = owner.stdout.readline().strip()
        result = hf_elmo(["embed", folder / "few.txt", folder / "out.hdf5", "--model", work / "tiny"])
        ok = result.returncode == 0 and os.path.exists(temporary)
    finally:
        owner.kill()
        owner.wait()
    return [_row("`embed` beside the live temporary of a run in another pid namespace (a container) (#4)",
                 [(f"exit {result.returncode}, temporary kept {os.path.exists(temporary)}", ok)],
                 "the sweep left the live run's temporary alone")]


def dictionary_tokenizer_trials(work: Path) -> list[dict]:
    from hf_elmo import DEFAULT_MODEL

    bare = work / "dictionary-without-tokenizer-config"
    shutil.copytree(DEFAULT_MODEL, bare)
    (bare / "tokenizer_config.json").unlink()
    text = work / "chinese.txt"
    text.write_text("我们喝小米粥\n小米发布了新手机\n", encoding="utf-8")
    results = [hf_elmo(["embed", text, work / f"dictionary-{i}.hdf5", "--model", model])
               for i, model in enumerate((DEFAULT_MODEL, bare))]
    ok = all(r.returncode == 0 for r in results) and _same_vectors(work / "dictionary-0.hdf5", work / "dictionary-1.hdf5")
    return [_row("dictionary-scheme model without tokenizer_config.json, `embed` (#5)",
                 [(f"exits {[r.returncode for r in results]}", ok)],
                 "the vectors of the shipped model with its own tokenizer, bit for bit")]


def one_writer_trials(commands: dict, work: Path) -> list[dict]:
    outcomes = []
    for name in ("out.hdf5", "out.npy"):
        folder = work / f"one-writer-{name}"
        folder.mkdir()
        output = folder / name
        first = subprocess.Popen([sys.executable, "-m", "hf_elmo.cli", *map(str, with_output(commands["embed"], output))],
                                 cwd=REPO, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        lock = folder / f".{name}.lock"
        while first.poll() is None and not (lock.is_file() and "started" in lock.read_text(errors="replace")):
            time.sleep(0.05)
        first.send_signal(signal.SIGSTOP)  # still writing when the second one looks, however slow its start
        try:
            second = hf_elmo(with_output(commands["embed"], output))
        finally:
            first.send_signal(signal.SIGCONT)
        first.wait()
        complete = _complete("embed", output) if name.endswith(".hdf5") else output.is_file()
        ok = _refused(second, f"pid {first.pid} on ") and first.returncode == 0 and complete
        ok = ok and os.listdir(folder) == [name]
        outcomes.append((f"{name}: second exit {second.returncode}, first exit {first.returncode}", ok))
    return [_row("a second `embed` into the output a running one writes (#6)", outcomes,
                 "refused naming the first run's pid, host and start time; the first finished; no lock file left")]


KILLED_BETWEEN_RENAMES = """
import os, sys
from hf_elmo.utils import io as file_io
from hf_elmo.cli import main
step, argv = sys.argv[1], sys.argv[2:]
if step == "between the two renames":
    real_replace = os.replace
    def replace_then_die(source, destination):
        real_replace(source, destination)
        if os.path.basename(destination) == "previous":
            os._exit(9)
    file_io.os.replace = replace_then_die
else:
    file_io.shutil.rmtree = lambda *args, **kwargs: os._exit(9)
main(argv)
"""


def interrupted_overwrite_trials(commands: dict, work: Path) -> list[dict]:
    outcomes = []
    for number, step in enumerate(("between the two renames", "after the two renames")):
        output = work / f"overwrite-{number}" / "out"
        output.parent.mkdir()
        assert hf_elmo(with_output(commands["convert"], output)).returncode == 0
        (output / "marker.txt").write_text("the previous output")
        killed = subprocess.run([sys.executable, "-c", KILLED_BETWEEN_RENAMES, step,
                                 *map(str, with_output(commands["convert"], output)), "--overwrite"],
                                cwd=REPO, env=_env(), capture_output=True, text=True)
        after_kill = "previous only in a .old folder" if not output.exists() else "an output in place"
        refused = hf_elmo(with_output(commands["convert"], output))  # its sweep runs first
        previous_back = (output / "marker.txt").is_file()
        ok = killed.returncode == 9 and _refused(refused, "already exists") and _complete("convert", output)
        ok = ok and previous_back == (step == "between the two renames") and os.listdir(output.parent) == ["out"]
        outcomes.append((f"killed {step} ({after_kill}); next run: previous output back {previous_back}", ok))
    return [_row("`convert --overwrite` killed between its steps, then any run into the same output (#7)", outcomes,
                 "killed between the two renames: the next run's sweep put the previous output back; "
                 "after them: the new output was in place; nothing left behind")]


def dtype_trials(work: Path) -> list[dict]:
    few = work / "few37.txt"
    few.write_text(FEW, encoding="utf-8")
    reference = work / "dtype-reference.hdf5"
    assert hf_elmo(["embed", few, reference, "--model", work / "tiny", "--layers", "all"]).returncode == 0
    outcomes = []
    for dtype in ("bfloat16", "float16"):
        model = work / f"dtype-{dtype}"
        shutil.copytree(work / "tiny", model)
        config = json.loads((model / "config.json").read_text())
        (model / "config.json").write_text(json.dumps({**config, "dtype": dtype}))
        output = work / f"dtype-{dtype}.hdf5"
        result = hf_elmo(["embed", few, output, "--model", model, "--layers", "all"])
        ok = result.returncode == 0 and _same_vectors(output, reference)
        outcomes.append((f'"dtype": "{dtype}": exit {result.returncode}', ok))
    return [_row('`"dtype": "bfloat16"` / `"float16"` in config.json, `embed` (#8)', outcomes,
                 "float32 vectors, bit for bit those of the unmarked model")]


def allocation_trials(work: Path) -> list[dict]:
    import h5py

    corpus = work / "corpus.txt"
    fixtures = REPO / "tests" / "fixtures" / "allennlp_elmo"
    outcomes = []
    for label, extra in (("--cell-dim 1000000000", ["--cell-dim", "1000000000", "--projection-dim", "16"]),
                         ("--filters [[1,1000000]]", ["--filters", "[[1,1000000]]"])):
        result = hf_elmo(["pretrain", "--train-file", corpus, "--min-count", "1", "--output-dir",
                          work / f"oom-{len(outcomes)}", "--max-steps", "1", "--no-progress", *extra])
        # Refused before anything is built (the configuration bounds every size), or where memory runs out.
        ok = ((_refused(result, "Invalid ElmoConfig", "weights, more than") or _refused(result, "not enough memory"))
              and not (work / f"oom-{len(outcomes)}").exists())
        outcomes.append((f"`pretrain {label}`: exit {result.returncode}", ok))
    for label, make, phrase in (
        ("a 100000 x 100000 char_embed never written (a 37 GB allocation)",
         lambda handle: handle.create_dataset("char_embed", (100_000, 100_000), "f4"),
         "dataset char_embed has shape (100000, 100000)"),
        ("a string-typed CNN/b_cnn_0", lambda handle: handle.create_dataset("CNN/b_cnn_0", data=["0.5"] * 4,
                                                                              dtype=h5py.string_dtype()),
         "dataset CNN/b_cnn_0 holds strings"),
    ):
        weights = work / f"bilm-bad-{len(outcomes)}.hdf5"
        shutil.copy(fixtures / "lm_weights.hdf5", weights)
        with h5py.File(weights, "r+") as handle:
            name = "char_embed" if "char_embed" in label else "CNN/b_cnn_0"
            del handle[name]
            make(handle)
        output = work / f"bilm-bad-out-{len(outcomes)}"
        result = hf_elmo(["convert", "--from", "allennlp", "--options", fixtures / "options.json", "--weights", weights,
                          output])
        outcomes.append((f"`convert --from allennlp`, {label}: exit {result.returncode}",
                         _refused(result, phrase, str(weights)) and not output.exists()))
    return [_row("impossible sizes (`pretrain`), a huge or string-typed hdf5 dataset (`convert --from allennlp`) "
                 "(#10, #16)", outcomes,
                 "one line, exit 2: the configuration's size bound before any module is built, or the dataset named "
                 "by its shape or type before any data is read")]


def line_end_trials(work: Path) -> list[dict]:
    import h5py

    text = work / "cr-only.txt"
    text.write_bytes(b"the cat sat\rdog run to the park\rbirds sang\r")
    outcomes = []
    output = work / "cr-only.hdf5"
    result = hf_elmo(["embed", text, output, "--model", work / "tiny"])
    with h5py.File(output, "r") as handle:
        count = sum(1 for key in handle if key.isdigit())  # one dataset a line (and sentence_to_index, words)
    outcomes.append((f"`embed`: {count} sentences", result.returncode == 0 and count == 3))
    result = hf_elmo(["similar", "--corpus", text, "--sentence", "the cat sat", "--word", "cat", "--json",
                      "--model", work / "tiny", "--top", "100"])
    lines = {item["line"] for item in json.loads(result.stdout or "[]")}
    outcomes.append((f"`similar`: lines {sorted(lines)}", result.returncode == 0 and lines == {1, 2, 3}))
    output = work / "cr-only-segmented.txt"
    result = hf_elmo(["corpus", "segment", "--input", text, "--output", output, "--segmenter", "whitespace"])
    count = len(output.read_text(encoding="utf-8").splitlines()) if output.exists() else 0
    outcomes.append((f"`corpus segment`: {count} lines", result.returncode == 0 and count == 3))
    return [_row("a file with CR-only line ends (3 lines): `embed`, `similar`, `corpus segment` (#14)", outcomes,
                 "3 lines each")]


def permission_trials(work: Path) -> list[dict]:
    import stat

    fixtures = REPO / "tests" / "fixtures" / "allennlp_elmo"
    output = work / "permissions"
    result = subprocess.run([sys.executable, "-m", "hf_elmo.cli", "convert", "--from", "allennlp", "--options",
                             str(fixtures / "options.json"), "--weights", str(fixtures / "lm_weights.hdf5"), str(output)],
                            cwd=REPO, env=_env(), capture_output=True, text=True, preexec_fn=lambda: os.umask(0o022))
    modes = {oct(stat.S_IMODE(path.stat().st_mode)) for path in output.iterdir()} if output.exists() else set()
    return [_row("file modes of `convert --from allennlp` under umask 022 (#15)",
                 [(f"exit {result.returncode}, modes {sorted(modes)}", result.returncode == 0 and modes == {"0o644"})],
                 "every file 0644, model.safetensors included")]


def invalid_utf8_trials(work: Path) -> list[dict]:
    csv_path = work / "bad-utf8.csv"
    csv_path.write_bytes("cat,label,review\n手机,1,好\n".encode() + b"\xff\xfe\n")
    result = hf_elmo(["corpus", "shopping", "--input", csv_path, "--output-dir", work / "bad-utf8-out"])
    outcomes = [(f"shopping CSV: exit {result.returncode}", _refused(result, f"{csv_path}:3: not valid UTF-8"))]
    model = work / "bad-char-dic"
    shutil.copytree(REPO / "tests" / "fixtures" / "elmoformanylangs" / "model", model)
    dictionary = model / "char.dic"
    dictionary.write_bytes(dictionary.read_bytes() + b"\xc3\x28\t999\n")
    line = dictionary.read_bytes().count(b"\n")
    result = hf_elmo(["convert", "--from", "elmoformanylangs", "--model-dir", model, work / "bad-char-dic-out"])
    outcomes.append((f"char.dic: exit {result.returncode}", _refused(result, f"{dictionary}:{line}: not valid UTF-8")))
    return [_row("invalid UTF-8 in the shopping CSV and in char.dic (#16)", outcomes,
                 "one line naming the file and line, exit 2")]


def export_client_trials(work: Path, trials: int) -> list[dict]:
    """Issue 46, items 5 and 6: `export --overwrite` replaces its own export; the client shipped with an export
    splits text as `ElmoTokenizer` on random mixed-Unicode strings, refuses ids outside the vocabulary (negative
    ones too) and gives nothing for no texts."""
    sys.path.insert(0, str(REPO / "tests" / "export"))
    from client_fuzz import random_strings

    from hf_elmo import DEFAULT_MODEL, ElmoTokenizer
    from hf_elmo.convert.onnx.client import ElmoClient

    output = work / "export-overwrite"
    results = [hf_elmo(["export", "--format", "onnx", "--output", output] + (["--overwrite"] if again else []))
               for again in (False, True)]
    rows = [_row("`export --overwrite` of its own earlier export (46 #5)",
                 [(f"exits {[r.returncode for r in results]}", all(r.returncode == 0 for r in results)
                   and (output / "model.onnx").is_file())], "the earlier export is replaced, exit 0")]
    client, tokenizer = ElmoClient(output), ElmoTokenizer.from_pretrained(DEFAULT_MODEL)
    texts = random_strings(500 * trials, seed=trials)
    differing = [text for text in texts if [w for w, _, _ in client.tokenizer.words_of(text)] != tokenizer.tokenize(text)]
    feeds = {key: value.numpy() for key, value in tokenizer(["小米"], return_tensors="pt").items()}
    refused = []
    for bad in (-1, client.config["char_vocab_size"]):
        ids = feeds["input_ids"].copy()
        ids[0, 0, 1] = bad
        try:
            client.run({**feeds, "input_ids": ids})
            refused.append(False)
        except ValueError:
            refused.append(True)
    rows.append(_row("the export's client against ElmoTokenizer on random mixed-Unicode strings (46 #6)",
                     [(f"{len(differing)} of {len(texts)} strings split differently", not differing),
                      (f"out-of-range ids refused: {refused}", all(refused)),
                      ("no texts", client.predict([]) == [] if client.kind != "encoder" else client.embed([]) == [])],
                     f"the same words on all {len(texts)} strings; ids -1 and the vocabulary size refused; [] for []"))
    return rows


def issue_37_trials(commands: dict, work: Path, trials: int, rng: random.Random) -> list[dict]:
    rows = weights_not_the_models_trials(work)
    rows += special_file_trials(work)
    rows += shopping_trials(work, trials, rng)
    rows += other_namespace_trials(work)
    rows += dictionary_tokenizer_trials(work)
    rows += one_writer_trials(commands, work)
    rows += interrupted_overwrite_trials(commands, work)
    rows += dtype_trials(work)
    rows += allocation_trials(work)
    rows += line_end_trials(work)
    rows += permission_trials(work)
    rows += invalid_utf8_trials(work)
    return rows


# Issue 46: an output that is its own input, a tokenizer that does not fit its model, outputs that are not finite, ----
# what is printed around a task model, a pickle and an exit; issue 45.2: Ctrl-C during training.


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def output_is_input_trials(work: Path) -> list[dict]:
    """Every command that writes, with its output on the model it reads, around it or inside it (#46.1)."""
    few = work / "few46.txt"
    few.write_text(FEW, encoding="utf-8")
    conll = work / "train.conll"
    outcomes = []
    places = {"the model": "MODEL", "a symbolic link to the model": "LINK", "the folder holding the model": "HOLDER",
              "a folder inside the model": "MODEL/sub"}
    commands = {
        "export --format onnx": ["export", "--model", "MODEL", "--output", "OUT", "--overwrite"],
        "export --format sentence-transformers": ["export", "--format", "sentence-transformers", "--model", "MODEL",
                                                  "--output", "OUT", "--overwrite"],
        "convert --to allennlp": ["convert", "--to", "allennlp", "--model", "MODEL", "OUT", "--overwrite"],
        "finetune train": ["finetune", "train", "--model", "MODEL", "--train", conll, "--output-dir", "OUT",
                           "--overwrite"],
        "pretrain --init-from": ["pretrain", "--train-file", work / "corpus.txt", "--init-from", "MODEL",
                                 "--output-dir", "OUT"],
    }
    for number, (command, argv) in enumerate(commands.items()):
        for place, output in places.items():
            holder = work / f"self-{number}-{len(outcomes)}"
            model = holder / "model"
            shutil.copytree(work / "tiny", model)
            (holder / "config.json").write_text("{}")  # an earlier output, as far as --overwrite can tell
            (model / "sub").mkdir()
            (model / "sub" / "config.json").write_text("{}")
            link = work / f"self-link-{number}-{len(outcomes)}"
            os.symlink(model, link)
            before = _tree(holder)
            target = {"MODEL": model, "LINK": link, "HOLDER": holder, "MODEL/sub": model / "sub"}[output]
            result = hf_elmo([target if a == "OUT" else model if a == "MODEL" else a for a in argv])
            ok = _refused(result, "the model folder it reads") and _tree(holder) == before
            outcomes.append((f"`{command}` into {place}: exit {result.returncode}", ok))
    model = work / "tiny"
    result = hf_elmo(["embed", few, model / "vectors.hdf5", "--model", model])
    outcomes.append((f"`embed` into the model folder: exit {result.returncode}",
                     _refused(result, "lies inside the model folder") and not (model / "vectors.hdf5").exists()))
    result = hf_elmo(["embed", few, few, "--overwrite", "--model", model])
    outcomes.append((f"`embed` onto its input: exit {result.returncode}",
                     _refused(result, "is the input file") and few.read_text(encoding="utf-8") == FEW))
    return [_row("output on, around or inside the model it reads (also through a symbolic link); `embed` into the "
                 "model or onto its input (#46.1)", outcomes,
                 "refused in one line naming the model or input, exit 2, before torch is imported; nothing changed")]


def tokenizer_fit_trials(work: Path) -> list[dict]:
    """A dictionary-scheme tokenizer beside a bytes model (#46.3); vocabulary ids beyond the embeddings (#46.4)."""
    from hf_elmo import DEFAULT_MODEL, ElmoTokenizer

    few = work / "few46.txt"
    foreign = work / "foreign-tokenizer"
    shutil.copytree(work / "tiny", foreign)
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        (foreign / name).unlink(missing_ok=True)
    characters = {name: index for index, name in enumerate(("<bos>", "<eos>", "<oov>", "<pad>", "<bow>", "<eow>", "a"),
                                                           start=1)}
    ElmoTokenizer(char_scheme="dictionary", char_vocab=characters, segmenter="whitespace").save_pretrained(foreign)
    beyond = work / "char-id-beyond"
    shutil.copytree(DEFAULT_MODEL, beyond)
    vocabulary = json.loads((beyond / "char_vocab.json").read_text(encoding="utf-8"))
    vocabulary["狗"] = 100000
    (beyond / "char_vocab.json").write_text(json.dumps(vocabulary, ensure_ascii=False), encoding="utf-8")
    outcomes = []
    for label, model, phrases in (
        ("a dictionary tokenizer beside a bytes model", foreign, ("the tokenizer does not fit the model",
                                                                  "character scheme is 'dictionary'")),
        ("char_vocab.json mapping 狗 to 100000 (5447 rows)", beyond, (str(beyond / "char_vocab.json"), "id 100000")),
    ):
        outputs = work / f"fit-out-{len(outcomes)}"
        outputs.mkdir()
        for command, argv in {
            "embed": ["embed", few, outputs / "out.hdf5", "--model", model],
            "info": ["info", "--model", model],
            "export": ["export", "--model", model, "--output", outputs / "onnx"],
        }.items():
            result = hf_elmo(argv)
            outcomes.append((f"`{command}`, {label}: exit {result.returncode}",
                             _refused(result, *phrases) and not os.listdir(outputs)))
    return [_row("a tokenizer that does not fit its model, vocabulary ids beyond the embeddings: `embed`, `info`, "
                 "`export` (#46.3, #46.4)", outcomes,
                 "refused in one line (the mismatch; the file and the id), exit 2, nothing written")]


def non_finite_output_trials(work: Path) -> list[dict]:
    """Finite weights x 1e30: NaN vectors (#46.10)."""
    from hf_elmo import ElmoConfig, ElmoModel, ElmoTokenizer

    huge = work / "huge-weights"
    torch.manual_seed(0)
    model = ElmoModel(ElmoConfig(**TINY))
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.mul_(1e30)
    model.save_pretrained(huge)
    ElmoTokenizer(segmenter="whitespace").save_pretrained(huge)
    few = work / "few46.txt"
    outputs = work / "huge-out"
    outputs.mkdir()
    outcomes = []
    for command, argv, phrase in (
        ("embed (hdf5)", ["embed", few, outputs / "out.hdf5", "--model", huge], "values are NaN or infinite"),
        ("embed (npy)", ["embed", few, outputs / "out.npy", "--model", huge], "values are NaN or infinite"),
        ("export --format onnx", ["export", "--model", huge, "--output", outputs / "onnx"], "are NaN or infinite"),
    ):
        result = hf_elmo(argv)
        outcomes.append((f"`{command}`: exit {result.returncode}",
                         _refused(result, "not finite", phrase) and not os.listdir(outputs)))
    return [_row("weights x 1e30 (finite; the outputs are NaN): `embed`, `export` (#46.10)", outcomes,
                 "refused with the count of values that are not finite, exit 2, nothing written")]


# A Ctrl-C that arrives while Python runs its exit hooks (torch's among them): the hook registered first runs last.
INTERRUPTED_AT_EXIT = """
import atexit, os, signal, sys, time
atexit.register(lambda: (os.kill(os.getpid(), signal.SIGINT), time.sleep(0.5)))
sys.argv = ["hf-elmo", *sys.argv[1:]]
from hf_elmo.cli import main
sys.exit(main())
"""


def printed_trials(work: Path) -> list[dict]:
    """A task model's folder loaded for its biLM, a Ctrl-C at exit, a pickle that is not plain tensors (#46.11)."""
    from hf_elmo import ElmoConfig, ElmoTokenizer
    from hf_elmo.models.elmo.modeling_elmo import ElmoForTokenClassification

    tagger = work / "tagger46"
    torch.manual_seed(0)
    ElmoForTokenClassification(ElmoConfig(**TINY, num_labels=3)).save_pretrained(tagger)
    ElmoTokenizer(segmenter="whitespace").save_pretrained(tagger)
    few = work / "few46.txt"
    outcomes = []
    for command, argv in (("embed", ["embed", few, work / "tagger46.hdf5", "--model", tagger]),
                          ("export", ["export", "--model", tagger, "--output", work / "tagger46-onnx"])):
        result = hf_elmo(argv)
        lines = result.stderr.strip().splitlines()
        quiet = result.returncode == 0 and "LOAD REPORT" not in result.stderr and "UNEXPECTED" not in result.stderr
        # embed reads the tagger's biLM and says so; export writes the whole tagger (issue 44), head included.
        ok = quiet and (len(lines) == 2 and "holds ElmoForTokenClassification: using its biLM" in lines[0]
                        if command == "embed" else (work / "tagger46-onnx" / "model.onnx").is_file())
        outcomes.append((f"`{command}` of a tagger's folder: exit {result.returncode}, {len(lines)} lines", ok))
    result = subprocess.run([sys.executable, "-c", INTERRUPTED_AT_EXIT, "info", "--model", work / "tiny"],
                            capture_output=True, text=True, cwd=REPO, env=_env())
    outcomes.append((f"Ctrl-C during interpreter exit: exit {result.returncode}",
                     result.returncode == 0 and "Traceback" not in result.stderr))
    model = work / "pickle46"
    shutil.copytree(REPO / "tests" / "fixtures" / "elmoformanylangs" / "model", model)
    torch.save({"projection.weight": signal.Signals}, model / "token_embedder.pkl")  # a class: not a tensor
    result = hf_elmo(["convert", "--from", "elmoformanylangs", "--model-dir", model, work / "pickle46-out"])
    ok = (_refused(result, "token_embedder.pkl cannot be loaded as plain tensors", "never runs the code")
          and "weights_only" not in result.stderr and "likely succeed" not in result.stderr)
    outcomes.append((f"a .pkl holding a class, `convert --from elmoformanylangs`: exit {result.returncode}", ok))
    return [_row("a tagger's folder for `embed` / `export`, Ctrl-C during interpreter exit, a pickle that is not "
                 "plain tensors (#46.11)", outcomes,
                 "embed: one line naming the tagger, export: the whole tagger, neither with the load report; no "
                 "traceback at exit; the project's advice only")]


def interrupted_training_trials(commands: dict, work: Path) -> list[dict]:
    """SIGINT / SIGTERM during `pretrain` before its first checkpoint: one is saved and named; the rerun resumes from
    it and ends with the uninterrupted weights (#45.2)."""
    argv = [a for a in commands["pretrain"]]
    argv[argv.index("--save-steps") + 1] = "1000"  # no regular checkpoint before the end
    argv[argv.index("--max-steps") + 1] = "300"  # long enough to be interrupted on a quiet machine
    reference = work / "interrupt-reference"
    assert hf_elmo(with_output(argv, reference)).returncode == 0
    outcomes = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        output = work / f"interrupt-{sig.name}"
        process = subprocess.Popen([sys.executable, "-m", "hf_elmo.cli", *map(str, with_output(argv, output))],
                                   cwd=REPO, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                   preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        first = ""
        while process.poll() is None and "starting a new run" not in first:  # the line before the first step
            first = process.stderr.readline()
        time.sleep(1.0)  # into the training steps
        process.send_signal(sig)
        _, stderr = process.communicate(timeout=300)
        last = stderr.strip().splitlines()[-1] if stderr.strip() else ""
        saved = last.startswith("hf-elmo: interrupted; saved the checkpoint ") and process.returncode == 130
        again = hf_elmo(with_output(argv, output))
        resumed = "resuming from " in again.stderr
        ok = saved and resumed and again.returncode == 0
        ok = ok and max_difference(weights(output), weights(reference)) <= 1e-6
        outcomes.append((f"{sig.name}: exit {process.returncode}, checkpoint named {saved}, rerun resumed {resumed}",
                         ok))
    return [_row("SIGINT / SIGTERM during `pretrain` before its first checkpoint (#45.2)", outcomes,
                 "a checkpoint saved and named (exit 130); the rerun resumed from it and ended with the "
                 "uninterrupted run's weights")]


def issue_46_trials(commands: dict, work: Path) -> list[dict]:
    rows = output_is_input_trials(work)
    rows += tokenizer_fit_trials(work)
    rows += non_finite_output_trials(work)
    rows += printed_trials(work)
    rows += interrupted_training_trials(commands, work)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=6, help="trials per scenario")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--markdown", type=Path, help="also write the table here")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument("--only", choices=["kill", "disk", "damage", "issue37", "export", "issue46"], action="append",
                        help="run only these groups of scenarios (repeatable; default: all)")
    args = parser.parse_args()
    groups = set(args.only or ["kill", "disk", "damage", "issue37", "export", "issue46"])
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="hf-elmo-faults-"))
    started = time.time()
    try:
        commands = build_inputs(work)
        rows = kill_trials(commands, work, args.trials, rng) if "kill" in groups else []
        rows += full_disk_trials(commands, work, args.trials, rng) if "disk" in groups else []
        rows += damage_trials(commands, work, args.trials, rng) if "damage" in groups else []
        rows += issue_37_trials(commands, work, args.trials, rng) if "issue37" in groups else []
        rows += export_client_trials(work, args.trials) if "export" in groups else []
        rows += issue_46_trials(commands, work) if "issue46" in groups else []
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
