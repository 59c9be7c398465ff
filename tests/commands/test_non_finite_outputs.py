"""Issue 46.10: finite but huge weights (x 1e30) wrote NaN vectors with exit 0 (the finite check covers the weights,
not what comes out). `embed` and `export` refuse outputs that are not finite, with the count, and write nothing."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from hf_elmo import cli
from hf_elmo.models.elmo.modeling_elmo import ElmoModel
from hf_elmo.models.elmo.tokenization_elmo import ElmoTokenizer
from small_models import tiny_config


def run(*argv) -> int:
    return cli.main([str(a) for a in argv])


@pytest.fixture(scope="module")
def huge_weights(tmp_path_factory):
    folder = tmp_path_factory.mktemp("huge-weights")
    torch.manual_seed(0)
    model = ElmoModel(tiny_config())
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.mul_(1e30)
    assert all(torch.isfinite(parameter).all() for parameter in model.parameters())
    model.save_pretrained(folder)
    ElmoTokenizer(segmenter="whitespace").save_pretrained(folder)
    return folder


@pytest.mark.parametrize("output", ["out.hdf5", "out.npy"])
def test_embed_refuses_non_finite_vectors_with_their_count(tmp_path, huge_weights, output, capsys):
    text = tmp_path / "in.txt"
    text.write_text("the cat sat\ndog run\n", encoding="utf-8")
    assert run("embed", text, tmp_path / output, "--model", huge_weights) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("hf-elmo: error: the model's vectors are not finite: ") and "in 2 sentence(s)" in last, last
    assert "no output was written" in last
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in.txt"]


FORMATS = ["onnx"] + (["sentence-transformers"] if importlib.util.find_spec("sentence_transformers") else [])


@pytest.mark.parametrize("export_format", FORMATS)
def test_export_refuses_a_model_whose_outputs_are_not_finite(tmp_path, huge_weights, export_format, capsys):
    if export_format == "onnx" and importlib.util.find_spec("onnx") is None:
        pytest.skip("needs onnx")
    assert run("export", "--format", export_format, "--model", huge_weights, "--output", tmp_path / "out") == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith(f"hf-elmo: error: {huge_weights}: the model's outputs are not finite: "), last
    assert "NaN or infinite" in last
    assert list(tmp_path.iterdir()) == []
