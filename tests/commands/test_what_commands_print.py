"""What the commands print around their work (issue 46.11, issue 45.9).

- Exporting or embedding with a tagger's folder printed transformers' load report, a table ending "not ok if you expect
  identical arch": one line now says the biLM of a task model is used.
- A Ctrl-C during interpreter exit printed a traceback from torch's exit hook although the output was complete.
- transformers' "Loading weights" / "Writing model shards" bars: one per weight file read or written (28 in a short
  pretraining run), between the command's own lines.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from hf_elmo.modeling_elmo import ElmoForTokenClassification
from hf_elmo.tokenization_elmo import ElmoTokenizer
from paths import REPO_ROOT
from small_models import tiny_config


def hf_elmo(*argv, code=None):
    command = [sys.executable, "-c", code, *map(str, argv)] if code else [sys.executable, "-m", "hf_elmo.cli",
                                                                         *map(str, argv)]
    environment = dict(os.environ, PYTHONPATH=str(REPO_ROOT), OMP_NUM_THREADS="1")
    return subprocess.run(command, capture_output=True, text=True, cwd=REPO_ROOT, env=environment, timeout=600)


@pytest.fixture(scope="module")
def tagger(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tagger")
    torch.manual_seed(0)
    ElmoForTokenClassification(tiny_config(num_labels=3)).save_pretrained(folder)
    ElmoTokenizer(segmenter="whitespace").save_pretrained(folder)
    return folder


def test_embedding_with_a_taggers_folder_says_so_in_one_line(tmp_path, tagger):
    text = tmp_path / "in.txt"
    text.write_text("the cat sat\n", encoding="utf-8")
    result = hf_elmo("embed", text, tmp_path / "out.hdf5", "--model", tagger)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert lines[0] == (f"{tagger} holds ElmoForTokenClassification: using its biLM as ElmoModel; its classifier, "
                        "scalar_mix weights are left out"), result.stderr
    assert "LOAD REPORT" not in result.stderr and "identical arch" not in result.stderr
    assert "Loading weights" not in result.stderr and len(lines) == 2, result.stderr


# A Ctrl-C that arrives while Python runs its exit hooks (torch registers some): the hook registered first runs last.
INTERRUPTED_AT_EXIT = """
import atexit, os, signal, sys, time

def interrupted():
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.5)
    print("exit hook done", file=sys.stderr)

atexit.register(interrupted)
sys.argv = ["/somewhere/bin/hf-elmo", *sys.argv[1:]]
from hf_elmo.cli import main
sys.exit(main())
"""


def test_a_ctrl_c_while_the_interpreter_exits_prints_no_traceback(tmp_path, tagger):
    result = hf_elmo("info", "--model", tagger, code=INTERRUPTED_AT_EXIT)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Traceback" not in result.stderr and "KeyboardInterrupt" not in result.stderr, result.stderr[-2000:]
    assert "exit hook done" in result.stderr


def test_the_python_entry_point_leaves_ctrl_c_alone(tagger):
    """Called with arguments (from Python, as the tests do), the command does not change the process's signals."""
    import signal

    from hf_elmo import cli

    before = signal.getsignal(signal.SIGINT)
    assert cli.main(["info", "--model", str(tagger)]) == 0
    assert signal.getsignal(signal.SIGINT) is before
