"""Issue 45: the `hf-elmo` command imports only what a command needs and ends without the interpreter's teardown.

The times are benchmarks/bench_startup.py's; these tests check the causes: what a one-line `hf-elmo embed`, `similar`
and `info` import (a local folder's encoder loads as an `ElmoBiLm`: no transformers model classes, no pipelines), and
that ending the process early keeps what an ordinary exit does (exit handlers, flushed output, exit status).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import h5py

import hf_elmo
from paths import REPO_ROOT

# The console script's `main` (its argv[0] is the script); an exit handler registered before the command runs
# reports, at exit, which of the modules the command does not need were imported; an object left to the
# interpreter's teardown says whether there was one.
AS_THE_CONSOLE_SCRIPT = """
import atexit
import sys

NOT_NEEDED = ("transformers.modeling_utils", "transformers.pipelines", "hf_elmo.models.elmo.modeling_elmo",
              "hf_elmo.pipelines", "hf_elmo.pretraining.language_model", "hf_elmo.kernels.sampled_softmax")
atexit.register(lambda: print("at exit:", sorted(name for name in NOT_NEEDED if name in sys.modules)))


class Teardown:  # deleted when the interpreter tears its modules down, which the command's end skips
    def __del__(self):
        print("teardown")


witness = Teardown()
sys.argv = ["/somewhere/bin/hf-elmo", *sys.argv[1:]]
from hf_elmo.cli import main
sys.exit(main())
"""


def run(*argv) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", AS_THE_CONSOLE_SCRIPT, *map(str, argv)], capture_output=True,
                          text=True, cwd=REPO_ROOT, timeout=600)


def test_embed_imports_no_transformers_model_class_nor_pipelines_and_exits_as_usual(tmp_path):
    (tmp_path / "one.txt").write_text("妈妈用小米和红枣煮了一锅粥。\n", encoding="utf-8")
    result = run("embed", tmp_path / "one.txt", tmp_path / "one.hdf5", "--model", hf_elmo.DEFAULT_MODEL)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines()[-1] == "at exit: []"  # the exit handlers ran, their output was flushed
    assert "teardown" not in result.stdout  # ... and the teardown of torch, transformers, ... was skipped
    assert "wrote " in result.stderr
    with h5py.File(tmp_path / "one.hdf5", "r") as handle:
        assert handle["0"].shape[1] == len(handle["words"]["0"])


def test_similar_imports_no_transformers_model_class_nor_pipelines(tmp_path):
    (tmp_path / "corpus.txt").write_text("我喜欢吃小米。\n小米手机挺好用。\n", encoding="utf-8")
    result = run("similar", "--corpus", tmp_path / "corpus.txt", "--word", "小米", "--sentence", "妈妈用小米煮粥。",
                 "--model", hf_elmo.DEFAULT_MODEL)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "【小米】 手机" in result.stdout and result.stdout.splitlines()[-1] == "at exit: []"


def test_a_folder_whose_tokenizer_config_names_no_class_loads_through_the_auto_classes(tmp_path):
    """The commands read the class a folder's tokenizer_config.json names; one that names none is AutoTokenizer's,
    which then needs the ELMo classes registered."""
    model = tmp_path / "model"
    shutil.copytree(hf_elmo.DEFAULT_MODEL, model)
    config = json.loads((model / "tokenizer_config.json").read_text(encoding="utf-8"))
    del config["tokenizer_class"]
    (model / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    (tmp_path / "one.txt").write_text("妈妈用小米和红枣煮了一锅粥。\n", encoding="utf-8")
    result = run("embed", tmp_path / "one.txt", tmp_path / "one.npy", "--model", model, "--layers", "top")
    assert result.returncode == 0, result.stderr[-2000:]


def test_info_output_and_error_status_are_those_of_an_ordinary_exit(tmp_path):
    result = run("info", "--json", "--model", hf_elmo.DEFAULT_MODEL)
    assert result.returncode == 0, result.stderr[-2000:]
    *info, last = result.stdout.splitlines()
    assert json.loads("\n".join(info))["model"] == hf_elmo.DEFAULT_MODEL and last == "at exit: []"
    result = run("info", "--model", tmp_path / "no-model")
    assert result.returncode == 2 and result.stderr.startswith("hf-elmo: error: model folder not found")
    assert result.stdout.splitlines()[-1] == "at exit: []"
