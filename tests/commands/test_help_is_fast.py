"""`hf-elmo --help` answers without loading torch or transformers (it took 5-8 s when they were imported first).

Timing is for benchmarks; this checks the cause structurally: which modules a `--help` run imports.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from hf_elmo.cli import COMMANDS
from paths import REPO_ROOT

# What the `hf-elmo` console script does (its argv[0] is the script), then the heavy modules that were loaded.
AS_THE_CONSOLE_SCRIPT = """
import sys
sys.argv = ["/somewhere/bin/hf-elmo", *sys.argv[1:]]
from hf_elmo.cli import main
try:
    main()
except SystemExit:
    pass
print(sorted(name for name in ("torch", "transformers", "numpy", "h5py", "jieba") if name in sys.modules))
"""


@pytest.mark.parametrize("argv", [["--help"], *([command, "--help"] for command in COMMANDS), ["finetune", "train", "--help"]])
def test_help_imports_no_heavy_library(argv):
    result = subprocess.run(
        [sys.executable, "-c", AS_THE_CONSOLE_SCRIPT, *argv], capture_output=True, text=True, cwd=REPO_ROOT, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "usage: hf-elmo" in result.stdout
    assert result.stdout.strip().splitlines()[-1] == "[]", result.stdout[-300:]


def test_the_console_script_is_the_one_checked_above():
    assert 'hf-elmo = "hf_elmo.cli:main"' in (REPO_ROOT / "pyproject.toml").read_text()


def test_importing_the_package_still_registers_the_auto_classes():
    code = "import hf_elmo, transformers; print(transformers.AutoConfig.for_model('elmo').__class__.__name__)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert result.stdout.strip() == "ElmoConfig", result.stderr[-2000:]
