"""docs/deployment.md: its client script, as written there, runs in a process where torch cannot be imported and
gives the PyTorch model's layers (both character schemes; the shipped model segments Chinese with jieba)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest
import torch

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import hf_elmo  # noqa: E402
from hf_elmo import ElmoModel, ElmoTokenizer  # noqa: E402
from hf_elmo.export import export_onnx  # noqa: E402
from numerics import bilm_tolerance  # noqa: E402
from paths import REPO_ROOT  # noqa: E402
from test_onnx_export import random_model, use_reference_lstm  # noqa: E402

pytestmark = pytest.mark.numerics

DOC = REPO_ROOT / "docs" / "deployment.md"
SCRIPT_NAME = "elmo_onnx.py"
# Packages the client must not need: importing any of them fails in the script's process.
BLOCKED = ("torch", "transformers", "tokenizers", "hf_elmo")


def doc_script() -> str:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    scripts = [block for block in blocks if block.startswith(f"# {SCRIPT_NAME}")]
    assert len(scripts) == 1, f"docs/deployment.md must hold one python block starting with '# {SCRIPT_NAME}'"
    return scripts[0]


@pytest.fixture(scope="module")
def without_torch(tmp_path_factory):
    """A PYTHONPATH folder whose stub packages make `import torch` (and the others of BLOCKED) fail."""
    folder = tmp_path_factory.mktemp("blocked")
    for name in BLOCKED:
        (folder / name).mkdir()
        (folder / name / "__init__.py").write_text(f"raise ImportError('{name} is blocked in this test')\n")
    script = folder.parent / SCRIPT_NAME
    script.write_text(doc_script(), encoding="utf-8")
    environment = {**os.environ, "PYTHONPATH": str(folder), "OMP_NUM_THREADS": "1"}
    check = subprocess.run([sys.executable, "-c", "import torch"], env=environment, capture_output=True, text=True)
    assert check.returncode != 0 and "blocked" in check.stderr
    return script, environment


def run_doc_script(without_torch, folder, texts, tmp_path) -> np.ndarray:
    script, environment = without_torch
    output = tmp_path / "layers.npy"
    result = subprocess.run([sys.executable, str(script), str(folder), str(output), *texts], env=environment,
                            capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(result.stdout.strip().splitlines()) == len(texts)
    return np.load(output)


def pytorch_layers(model, tokenizer, texts) -> np.ndarray:
    encoded = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        return torch.stack(model(encoded["input_ids"], encoded["attention_mask"]).hidden_states).numpy()


def assert_close(got, expected, config):
    assert got.shape == expected.shape  # the same words: the script split the texts as the tokenizer does
    tolerance = bilm_tolerance(config, expected)
    assert float(np.abs(got - expected).max()) <= tolerance


def test_doc_script_on_the_shipped_model(without_torch, tmp_path):
    folder = export_onnx(hf_elmo.DEFAULT_MODEL, tmp_path / "elmo-onnx")
    model = use_reference_lstm(ElmoModel.from_pretrained(hf_elmo.DEFAULT_MODEL))
    tokenizer = ElmoTokenizer.from_pretrained(folder)
    assert tokenizer.segmenter == "jieba"
    texts = ["我们喝小米粥。", "小米发布了新手机，价格“很便宜”！", "",
             "ELMo 在2018年提出, word-level 向量。"]
    assert_close(run_doc_script(without_torch, folder, texts, tmp_path), pytorch_layers(model, tokenizer, texts),
                 model.config)


def test_doc_script_on_a_byte_scheme_model(without_torch, tmp_path):
    model = random_model(seed=11, num_lstm_layers=3)
    tokenizer = ElmoTokenizer(segmenter="chars", max_characters_per_token=model.config.max_characters_per_token)
    folder = export_onnx(model, tmp_path / "elmo-onnx", tokenizer=tokenizer)
    texts = ["The cat sat on the mat.", "naïve café, 😀 emoji & symbols (ok)?", "中文按字切分",
             "a" * 60 + " " + "长" * 20, ""]
    assert_close(run_doc_script(without_torch, folder, texts, tmp_path), pytorch_layers(model, tokenizer, texts),
                 model.config)
