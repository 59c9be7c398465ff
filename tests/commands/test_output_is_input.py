"""Issue 46.1: no command writes its output over what it reads.

`export --model self1 --output self1 --overwrite` exited 0 with the model folder replaced by the export; the same
with `export --format sentence-transformers`, `convert --to allennlp` and `finetune train` (the base model replaced
by the tagger). Every command that writes refuses, exit 2 and one line, an output that is the model (or input file)
it reads, contains it or lies inside it, paths resolved and symbolic links followed; before torch is imported, so
before anything is written.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from paths import REPO_ROOT
from test_errors_before_torch import WITHOUT_TORCH

# What each command reads and where its output goes: "{model}" is the model folder, "{out}" the output.
COMMANDS = {
    "export onnx": ["export", "--model", "{model}", "--output", "{out}", "--overwrite"],
    "export sentence-transformers": ["export", "--format", "sentence-transformers", "--model", "{model}", "--output",
                                     "{out}", "--overwrite"],
    "convert --to allennlp": ["convert", "--to", "allennlp", "--model", "{model}", "{out}", "--overwrite"],
    "finetune train": ["finetune", "train", "--model", "{model}", "--train", "{tmp}/train.conll", "--output-dir", "{out}",
                       "--overwrite"],
    "finetune train-classifier": ["finetune", "train-classifier", "--model", "{model}", "--train", "{tmp}/train.tsv",
                                  "--output-dir", "{out}", "--overwrite"],
    "pretrain --init-from": ["pretrain", "--train-file", "{tmp}/train.conll", "--init-from", "{model}", "--output-dir",
                             "{out}"],
}
# Where the output goes relative to the model folder, and the word the error uses for it.
PLACES = {
    "the model itself": ("{tmp}/models/model", "is the model folder"),
    "the model through a symbolic link": ("{tmp}/link", "is the model folder"),
    "a folder holding the model": ("{tmp}/models", "contains the model folder"),
    "a folder inside the model": ("{tmp}/models/model/sub", "lies inside the model folder"),
}


def snapshot(folder):
    return {os.path.relpath(os.path.join(root, name), folder): open(os.path.join(root, name), "rb").read()
            for root, _, files in os.walk(folder) for name in files}


def without_torch(argv):
    return subprocess.run([sys.executable, "-c", WITHOUT_TORCH, *argv], capture_output=True, text=True,
                          cwd=REPO_ROOT, timeout=120)


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("command", COMMANDS)
def test_an_output_over_the_model_it_reads_is_refused_before_torch(tmp_path, command, place):
    model = tmp_path / "models" / "model"
    model.mkdir(parents=True)
    (model.parent / "config.json").write_text("{}", encoding="utf-8")  # (an "earlier output", for --overwrite)
    (model / "config.json").write_text('{"model_type": "elmo"}', encoding="utf-8")
    (model / "model.safetensors").write_bytes(b"weights")
    (model / "sub").mkdir()
    (model / "sub" / "config.json").write_text("{}", encoding="utf-8")  # an "earlier output" there, for --overwrite
    os.symlink(model, tmp_path / "link")
    (tmp_path / "train.conll").write_text("狗\tB-ANIMAL\n跑\tO\n", encoding="utf-8")
    (tmp_path / "train.tsv").write_text("1\t好\n0\t坏\n", encoding="utf-8")
    before = snapshot(tmp_path)
    output, expected = PLACES[place]
    argv = [arg.replace("{out}", output).replace("{model}", str(model)).replace("{tmp}", str(tmp_path))
            for arg in COMMANDS[command]]
    result = without_torch(argv)
    assert "was imported" not in result.stderr, result.stderr[-1500:]
    assert result.returncode == 2, result.stderr[-1500:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("hf-elmo: error:")]
    assert len(errors) == 1 and expected in errors[0] and "it reads (--" in errors[0], result.stderr[-1500:]
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("argv, expected", [
    (["embed", "{tmp}/in.txt", "{tmp}/model/vectors.hdf5", "--model", "{tmp}/model"], "lies inside the model folder"),
    (["embed", "{tmp}/in.txt", "{tmp}/in.txt", "--overwrite", "--model", "{tmp}/model"], "is the input file"),
    (["embed", "{tmp}/in.txt", "{tmp}/link-to-input", "--overwrite", "--model", "{tmp}/model"], "is the input file"),
    (["corpus", "segment", "--input", "{tmp}/in.txt", "--output", "{tmp}/in.txt", "--overwrite"], "is the input file"),
    (["convert", "--from", "allennlp", "--options", "{tmp}/bilm/options.json", "--weights", "{tmp}/bilm/weights.hdf5",
      "{tmp}/bilm", "--overwrite"], "contains the input file"),
    (["finetune", "train", "--train", "{tmp}/run/train.conll", "--output-dir", "{tmp}/run", "--overwrite"],
     "contains the input file"),
])
def test_an_output_over_an_input_file_is_refused_before_torch(tmp_path, argv, expected):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}", encoding="utf-8")
    (tmp_path / "in.txt").write_text("你好 世界\n", encoding="utf-8")
    os.symlink(tmp_path / "in.txt", tmp_path / "link-to-input")
    (tmp_path / "bilm").mkdir()
    (tmp_path / "bilm" / "options.json").write_text("{}", encoding="utf-8")
    (tmp_path / "bilm" / "weights.hdf5").write_bytes(b"")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.json").write_text("{}", encoding="utf-8")
    (tmp_path / "run" / "train.conll").write_text("狗\tB-ANIMAL\n", encoding="utf-8")
    before = snapshot(tmp_path)
    result = without_torch([arg.replace("{tmp}", str(tmp_path)) for arg in argv])
    assert "was imported" not in result.stderr, result.stderr[-1500:]
    assert result.returncode == 2, result.stderr[-1500:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("hf-elmo: error:")]
    assert len(errors) == 1 and expected in errors[0], result.stderr[-1500:]
    assert snapshot(tmp_path) == before


def test_the_library_refuses_a_finetune_output_over_its_base_model(tmp_path):
    from hf_elmo.finetuning.options import FinetuneOptions

    (tmp_path / "config.json").write_text("{}", encoding="utf-8")
    with pytest.raises(ValueError, match="is the model folder it reads"):
        FinetuneOptions(model=str(tmp_path), output_dir=str(tmp_path), overwrite=True).check()


def test_an_output_beside_the_model_is_accepted(tmp_path):
    from hf_elmo.utils.io import refuse_output_over_inputs

    (tmp_path / "model").mkdir()
    refuse_output_over_inputs(tmp_path / "model-2", "--output", [("the model folder", "--model", tmp_path / "model")])
    refuse_output_over_inputs(tmp_path / "out", "--output", [("the model folder", "--model", "org/name")])  # Hub name
