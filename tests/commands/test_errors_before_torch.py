"""Mistakes that need no model (missing inputs, existing outputs, a model folder that is not one, options that do
not go together) are refused before torch or transformers is imported: one `hf-elmo: error:` line, exit status 2.

Importing torch and transformers took 12-15 s before such errors came out. As in test_help_is_fast.py the cause
is checked, not the time: the command runs in a process where importing either of them raises.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from paths import REPO_ROOT

# The console script's `main`, in a process where importing torch or transformers fails loudly (an exception no
# command catches, so the run ends in a traceback, not in an error line).
WITHOUT_TORCH = """
import sys

class TorchImported(BaseException):
    pass

class RefuseHeavyImports:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "transformers"):
            raise TorchImported(f"{name} was imported")
        return None

sys.meta_path.insert(0, RefuseHeavyImports())
sys.argv = ["/somewhere/bin/hf-elmo", *sys.argv[1:]]
from hf_elmo.cli import main
sys.exit(main())
"""

CASES = {
    "embed: missing input": (["embed", "{tmp}/missing.txt", "{tmp}/out.hdf5"], "input file not found"),
    "embed: existing output": (["embed", "{tmp}/in.txt", "{tmp}/exists.hdf5"], "already exists"),
    "embed: missing model folder": (["embed", "{tmp}/in.txt", "{tmp}/out.hdf5", "--model", "{tmp}/nofolder"],
                                    "model folder not found"),
    "embed: folder without config.json": (["embed", "{tmp}/in.txt", "{tmp}/out.hdf5", "--model", "{tmp}/empty"],
                                          "has no config.json"),
    "embed: options that do not go together": (["embed", "{tmp}/in.txt", "{tmp}/out.npy", "--forget-sentences"],
                                               "--forget-sentences"),
    "similar: missing corpus": (["similar", "--corpus", "{tmp}/missing.txt", "--word", "a", "--sentence", "a"],
                                "corpus file not found"),
    "similar: missing model folder": (["similar", "--corpus", "{tmp}/in.txt", "--word", "a", "--types", "--model",
                                       "{tmp}/nofolder"], "model folder not found"),
    "similar: neither --sentence nor --types": (["similar", "--corpus", "{tmp}/in.txt", "--word", "a"], "--sentence"),
    "convert: missing options file": (["convert", "{tmp}/converted", "--from", "allennlp", "--options",
                                       "{tmp}/missing.json", "--weights", "{tmp}/in.txt"], "not found"),
    "convert: option of another direction": (["convert", "{tmp}/converted", "--from", "allennlp", "--model-dir",
                                              "{tmp}"], "not used with"),
    "convert: export of a folder that is no model": (["convert", "{tmp}/converted", "--to", "allennlp", "--model",
                                                      "{tmp}/empty"], "has no config.json"),
    "info: missing model folder": (["info", "--model", "{tmp}/nofolder"], "model folder not found"),
    "corpus segment: missing input": (["corpus", "segment", "--input", "{tmp}/missing.txt", "--output",
                                       "{tmp}/out.txt"], "not found"),
    "corpus vocab: existing output": (["corpus", "vocab", "--corpus", "{tmp}/in.txt", "--output",
                                       "{tmp}/exists.hdf5"], "already exists"),
    "pretrain: missing train file": (["pretrain", "--train-file", "{tmp}/missing.txt", "--output-dir", "{tmp}/run"],
                                     "not found"),
    "pretrain: missing --init-from folder": (["pretrain", "--train-file", "{tmp}/in.txt", "--output-dir", "{tmp}/run",
                                              "--init-from", "{tmp}/nofolder"], "model folder not found"),
    "finetune train: missing train file": (["finetune", "train", "--train", "{tmp}/missing.conll", "--output-dir",
                                            "{tmp}/run"], "not found"),
    "finetune train: existing output folder": (["finetune", "train", "--train", "{tmp}/in.txt", "--output-dir",
                                                "{tmp}/model"], "already exists (pass --overwrite"),
    "finetune train-classifier: existing output folder": (["finetune", "train-classifier", "--train", "{tmp}/in.txt",
                                                           "--output-dir", "{tmp}/model"],
                                                          "already exists (pass --overwrite"),
    "finetune train: output folder holding the train file": (["finetune", "train", "--train", "{tmp}/in.txt",
                                                              "--output-dir", "{tmp}", "--overwrite"],
                                                             "contains the input file it reads (--train"),
    "export: output over the model": (["export", "--model", "{tmp}/model", "--output", "{tmp}/model", "--overwrite"],
                                      "is the model folder it reads (--model"),
    "convert --to allennlp: output inside the model": (["convert", "--to", "allennlp", "--model", "{tmp}/model",
                                                        "{tmp}/model/bilm"], "lies inside the model folder"),
    "embed: output is the input": (["embed", "{tmp}/in.txt", "{tmp}/in.txt", "--overwrite"], "is the input file"),
    "finetune train: missing model folder": (["finetune", "train", "--train", "{tmp}/in.txt", "--output-dir",
                                              "{tmp}/run", "--model", "{tmp}/nofolder"], "model folder not found"),
    "finetune train-classifier: missing dev file": (["finetune", "train-classifier", "--train", "{tmp}/in.txt",
                                                     "--dev", "{tmp}/missing.tsv", "--output-dir", "{tmp}/run"],
                                                    "not found"),
    "finetune predict: missing model folder": (["finetune", "predict", "--model", "{tmp}/nofolder", "text"],
                                               "model folder not found"),
    "finetune predict: missing input": (["finetune", "predict", "--model", "{tmp}/model", "--input",
                                         "{tmp}/missing.txt"], "not found"),
    "finetune predict: missing user dictionary": (["finetune", "predict", "--model", "{tmp}/model", "--user-dict",
                                                   "{tmp}/missing.txt", "text"], "--user-dict file not found"),
    "export: missing model folder": (["export", "--model", "{tmp}/nofolder", "--output", "{tmp}/exported"],
                                     "model folder not found"),
    "export: missing output parent": (["export", "--output", "{tmp}/nofolder/exported"], "does not exist"),
    "serve: missing model folder": (["serve", "--model", "{tmp}/nofolder"], "model folder not found"),
    "serve: a port out of range": (["serve", "--port", "70000"], "--port must be in 0..65535"),
}


@pytest.mark.parametrize("case", CASES)
def test_mistake_is_refused_before_torch_is_imported(case, tmp_path):
    argv, expected = CASES[case]
    (tmp_path / "in.txt").write_text("你好 世界\n", encoding="utf-8")
    (tmp_path / "exists.hdf5").write_bytes(b"")
    (tmp_path / "empty").mkdir()
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}", encoding="utf-8")
    argv = [arg.replace("{tmp}", str(tmp_path)) for arg in argv]
    result = subprocess.run([sys.executable, "-c", WITHOUT_TORCH, *argv], capture_output=True, text=True,
                            cwd=REPO_ROOT, timeout=120)
    assert "was imported" not in result.stderr, result.stderr[-1500:]
    assert result.returncode == 2, result.stderr[-1500:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("hf-elmo: error:")]
    assert len(errors) == 1 and expected in errors[0], result.stderr[-1500:]


def test_the_harness_notices_an_import_of_torch(tmp_path):
    """The harness itself: a command that gets as far as loading a model does end in the import error."""
    (tmp_path / "in.txt").write_text("你好\n", encoding="utf-8")
    result = subprocess.run([sys.executable, "-c", WITHOUT_TORCH, "embed", str(tmp_path / "in.txt"),
                             str(tmp_path / "out.hdf5")], capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert "was imported" in result.stderr
    assert not (tmp_path / "out.hdf5").exists()


def test_a_missing_default_model_is_named_before_torch_is_imported(tmp_path):
    """An installation without the shipped model: `--model default` says so, before any import of torch."""
    gone = f"import hf_elmo\nhf_elmo.DEFAULT_MODEL = {str(tmp_path / 'gone')!r}\n"
    code = WITHOUT_TORCH.replace("from hf_elmo.cli import main", gone + "from hf_elmo.cli import main")
    result = subprocess.run([sys.executable, "-c", code, "info", "--model", "default"], capture_output=True, text=True,
                            cwd=REPO_ROOT, timeout=120)
    assert result.returncode == 2, result.stderr[-1500:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("hf-elmo: error: the default model is not in this installation"), result.stderr[-1500:]
