#!/usr/bin/env python
"""Start-up time of the `hf-elmo` command line: this checkout against an older commit, in one run.

    python benchmarks/bench_startup.py --against 09ef1fe --rounds 10

For each round, and for each side (this checkout, then a git worktree of REV; the order alternates from round to
round so that a machine's drift over minutes reaches both alike), fresh processes time:

* ``import hf_elmo`` (wall time of ``python -X importtime -c "import hf_elmo"``, and the cumulative import time that
  ``-X importtime`` gives ``hf_elmo``);
* a one-line ``hf-elmo embed`` (``python -m hf_elmo.cli embed one.txt out.hdf5``, the shipped model, one Chinese
  sentence) and a one-line ``hf-elmo similar`` (a one-line corpus, the same sentence, the word 小米), each from process
  start to process end;
* for scale, ``import torch`` and ``import transformers.modeling_utils`` (what `ElmoModel`, a `PreTrainedModel`,
  needs; `ElmoBiLm`, which the commands load a local folder's encoder into, does without it), and what a command
  that runs the model without transformers' model utilities still imports (torch, the config and tokenizer bases,
  jieba).

A first round on each side is not timed (it compiles the worktree's bytecode and warms the file cache); it also
counts the modules each side's ``hf-elmo embed`` imports and checks that both sides write the same vectors and
print the same ``similar`` lines. Children get ``OMP_NUM_THREADS`` (``--threads``), ``HF_HUB_OFFLINE=1`` and
``PYTHONPATH`` set to their side's tree. Timings mean something only on a quiet machine: the load average is printed
before and after.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SENTENCE = "妈妈用小米和红枣煮了一锅粥。"
WORD = "小米"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", metavar="REV", required=True, help="the older commit (checked out as a worktree)")
    parser.add_argument("--rounds", type=int, default=10, help="timed rounds per side (default 10)")
    parser.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS of the children (default 1)")
    parser.add_argument("--python", default=sys.executable, help="the interpreter to run (default: this one)")
    parser.add_argument("--work-dir", default=None, help="where the worktree and files go (default: a temporary folder)")
    parser.add_argument("--keep-worktree", action="store_true", help="leave the worktree of REV in place")
    parser.add_argument("--no-scale", action="store_true", help="skip the `import torch` / transformers rows")
    parser.add_argument("--markdown", help="also write the table to this file")
    return parser.parse_args(argv)


def child_env(tree: Path, threads: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree), OMP_NUM_THREADS=str(threads), HF_HUB_OFFLINE="1")
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # the worktree's bytecode is compiled in the untimed round
    return env


def timed(argv: list[str], env: dict, cwd: Path) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    result = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=900)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return seconds, result


def importtime_of(stderr: str, module: str) -> float:
    """The cumulative import time (s) that ``-X importtime`` reports for `module`."""
    for line in stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[0].startswith("import time:") and parts[2].strip() == module:
            return int(parts[1]) / 1e6
    raise RuntimeError(f"-X importtime did not report {module}")


class Side:
    """One tree's commands, run from `work` with its own input and output files."""

    def __init__(self, name: str, tree: Path, python: str, work: Path, threads: int):
        self.name, self.tree, self.python, self.work = name, tree, python, work
        self.env = child_env(tree, threads)
        self.one_line = work / "one.txt"
        self.output = work / f"{name}.hdf5"

    def command(self, *argv: str) -> list[str]:
        return [self.python, "-m", "hf_elmo.cli", *argv]

    def embed(self) -> list[str]:
        return self.command("embed", str(self.one_line), str(self.output), "--overwrite")

    def similar(self) -> list[str]:
        return self.command("similar", "--corpus", str(self.one_line), "--sentence", SENTENCE, "--word", WORD,
                            "--top", "1")

    def check_tree(self) -> None:
        _, result = timed([self.python, "-c", "import hf_elmo; print(hf_elmo.__file__)"], self.env, self.work)
        where = Path(result.stdout.strip()).resolve()
        if self.tree.resolve() not in where.parents:
            raise RuntimeError(f"{self.name}: hf_elmo was imported from {where}, not from {self.tree}")

    def modules_of_embed(self) -> int:
        _, result = timed([self.python, "-X", "importtime", *self.embed()[1:]], self.env, self.work)
        return sum(line.startswith("import time:") and "|" in line and "cumulative" not in line
                   for line in result.stderr.splitlines())

    def measure(self) -> dict[str, float]:
        seconds, result = timed([self.python, "-X", "importtime", "-c", "import hf_elmo"], self.env, self.work)
        return {
            "import_wall": seconds,
            "import_cumulative": importtime_of(result.stderr, "hf_elmo"),
            "embed": timed(self.embed(), self.env, self.work)[0],
            "similar": timed(self.similar(), self.env, self.work)[0],
        }


def same_vectors(first: Path, second: Path) -> bool:
    import h5py
    import numpy as np

    with h5py.File(first, "r") as a, h5py.File(second, "r") as b:
        names = []
        a.visititems(lambda name, item: names.append(name) if isinstance(item, h5py.Dataset) else None)
        return all(name in b and np.array_equal(a[name][...], b[name][...]) for name in names)


def worktree_of(rev: str, work: Path) -> Path:
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--verify", f"{rev}^{{commit}}"], check=True,
                            capture_output=True, text=True).stdout.strip()
    tree = work / f"against-{commit[:10]}"
    if not tree.is_dir():
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), commit], check=True,
                       capture_output=True)
    return tree


def seconds(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} (min {min(values):.2f})"


def main(argv=None) -> int:
    args = parse_args(argv)
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="bench-startup-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    old_tree = worktree_of(args.against, work)
    try:
        return compare(args, work, old_tree)
    finally:
        if not args.keep_worktree:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(old_tree)], check=False,
                           capture_output=True)


def compare(args, work: Path, old_tree: Path) -> int:
    sides = {"new": Side("new", REPO, args.python, work, args.threads),
             "old": Side("old", old_tree, args.python, work, args.threads)}
    (work / "one.txt").write_text(SENTENCE + "\n", encoding="utf-8")
    load_before = os.getloadavg()
    print(f"load average {load_before[0]:.2f} / {load_before[1]:.2f} / {load_before[2]:.2f}; {os.cpu_count()} CPUs; "
          f"{args.python}", flush=True)

    # Untimed first round: bytecode, file cache, module counts, same outputs.
    modules, similar_lines = {}, {}
    for name, side in sides.items():
        side.check_tree()
        modules[name] = side.modules_of_embed()
        similar_lines[name] = timed(side.similar(), side.env, side.work)[1].stdout
    if not same_vectors(sides["new"].output, sides["old"].output):
        raise RuntimeError("the two sides' `hf-elmo embed` wrote different vectors")
    if similar_lines["new"] != similar_lines["old"]:
        raise RuntimeError(f"the two sides' `hf-elmo similar` printed different lines:\n{similar_lines}")

    times = {name: {} for name in sides}
    scale = {"import torch": [], "import transformers.modeling_utils": [],
             "import torch, transformers.configuration_utils, transformers.tokenization_utils_base, jieba": []}
    for round_number in range(args.rounds):
        order = ("new", "old") if round_number % 2 == 0 else ("old", "new")
        for name in order:
            for key, value in sides[name].measure().items():
                times[name].setdefault(key, []).append(value)
        if not args.no_scale:
            env = sides["new"].env
            for statement in scale:
                scale[statement].append(timed([args.python, "-c", statement], env, work)[0])
        print(f"round {round_number + 1}/{args.rounds}: " + ", ".join(
            f"{name} embed {times[name]['embed'][-1]:.2f} s, similar {times[name]['similar'][-1]:.2f} s"
            for name in ("new", "old")), flush=True)
    load_after = os.getloadavg()

    rows = [("`import hf_elmo`, wall", "import_wall"), ("`import hf_elmo`, -X importtime cumulative", "import_cumulative"),
            ("one-line `hf-elmo embed`, wall", "embed"), ("one-line `hf-elmo similar`, wall", "similar")]
    lines = [f"`python benchmarks/bench_startup.py --against {args.against} --rounds {args.rounds} --threads "
             f"{args.threads}`", "",
             f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f}; {os.cpu_count()} CPUs; seconds, "
             f"median (min) of {args.rounds} alternating rounds", "",
             f"| measure | this checkout | {args.against} | new / old (medians) |", "| --- | --- | --- | --- |"]
    for label, key in rows:
        new, old = times["new"][key], times["old"][key]
        lines.append(f"| {label} | {seconds(new)} | {seconds(old)} | "
                     f"{statistics.median(new) / statistics.median(old):.2f} |")
    lines.append(f"| modules imported by `hf-elmo embed` | {modules['new']} | {modules['old']} | "
                 f"{modules['new'] / modules['old']:.2f} |")
    if not args.no_scale:
        for statement, values in scale.items():
            lines.append(f"| for scale: `{statement}` | {seconds(values)} | (same) | |")
    lines += ["", "Both sides wrote the same vectors and printed the same `similar` lines."]
    report = "\n".join(lines) + "\n"
    print()
    print(report)
    if args.markdown:
        Path(args.markdown).write_text(report, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
