"""docs/deployment.md: its five-line client example, as written there, runs in a process where torch (and
transformers, tokenizers, hf_elmo) cannot be imported, on the export of the shipped model (which segments
Chinese with jieba) and of a byte-scheme model, and gives the PyTorch model's sentence vectors and words on text
with punctuation, Latin words, digits, emoji and an empty string."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import hf_elmo  # noqa: E402
from hf_elmo import ElmoTokenizer, Embedder  # noqa: E402
from hf_elmo.convert.onnx import export_onnx  # noqa: E402
from paths import REPO_ROOT  # noqa: E402
from test_onnx_export import random_model  # noqa: E402

pytestmark = pytest.mark.numerics

DOC = REPO_ROOT / "docs" / "deployment.md"
FIRST_LINE = 'import sys; sys.path.insert(0, "elmo-onnx")'
# Packages the client must not need: importing any of them fails in the example's process.
BLOCKED = ("torch", "transformers", "tokenizers", "hf_elmo")
# Appended to the example: what it computed, for the comparison here.
REPORT = """
import json, numpy
numpy.save("vectors.npy", vectors)
json.dump({"texts": texts, "words": words}, open("words.json", "w", encoding="utf-8"), ensure_ascii=False)
"""


def doc_example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    examples = [block for block in blocks if block.startswith(FIRST_LINE)]
    assert len(examples) == 1, f"docs/deployment.md must hold one python block starting with {FIRST_LINE!r}"
    assert len(examples[0].strip().splitlines()) == 5  # the five lines the issue asked for
    return examples[0]


@pytest.fixture(scope="module")
def without_torch(tmp_path_factory):
    """A PYTHONPATH folder whose stub packages make `import torch` (and the others of BLOCKED) fail."""
    folder = tmp_path_factory.mktemp("blocked")
    for name in BLOCKED:
        (folder / name).mkdir()
        (folder / name / "__init__.py").write_text(f"raise ImportError('{name} is blocked in this test')\n")
    environment = {**os.environ, "PYTHONPATH": str(folder), "OMP_NUM_THREADS": "1"}
    check = subprocess.run([sys.executable, "-c", "import torch"], env=environment, capture_output=True, text=True)
    assert check.returncode != 0 and "blocked" in check.stderr
    return environment


def run_doc_example(environment, workdir):
    """Runs the example in `workdir`, which holds the export as `elmo-onnx`."""
    script = workdir / "example.py"
    script.write_text(doc_example() + REPORT, encoding="utf-8")
    result = subprocess.run([sys.executable, str(script)], env=environment, capture_output=True, text=True,
                            timeout=300, cwd=workdir)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((workdir / "words.json").read_text(encoding="utf-8"))
    return np.load(workdir / "vectors.npy"), report["texts"], report["words"]


def assert_as_the_package(embedder, vectors, texts, words):
    assert any(not text for text in texts) and any(ord(c) > 0xFFFF for text in texts for c in text)
    assert [[word for word, _, _ in sentence] for sentence in words] == embedder.tokenize(texts)
    for text, sentence in zip(texts, words):
        assert all(text[start:end] == word for word, start, end in sentence)
    assert vectors.shape == (len(texts), embedder.dim)
    assert np.allclose(vectors, embedder.sentence_vectors(texts), atol=1e-4)


def test_the_doc_example_on_the_shipped_model(without_torch, tmp_path):
    export_onnx(hf_elmo.DEFAULT_MODEL, tmp_path / "elmo-onnx")
    vectors, texts, words = run_doc_example(without_torch, tmp_path)
    embedder = Embedder(hf_elmo.DEFAULT_MODEL, device="cpu")
    assert embedder.tokenizer.segmenter == "jieba"
    embedder.model.set_lstm_implementation("reference")
    assert_as_the_package(embedder, vectors, texts, words)


def test_the_doc_example_on_a_byte_scheme_model(without_torch, tmp_path):
    model = random_model(seed=11, num_lstm_layers=3, projection_dim=128)
    tokenizer = ElmoTokenizer(segmenter="chars", max_characters_per_token=model.config.max_characters_per_token)
    export_onnx(model, tmp_path / "elmo-onnx", tokenizer=tokenizer)
    vectors, texts, words = run_doc_example(without_torch, tmp_path)
    assert_as_the_package(Embedder(model, tokenizer=tokenizer, device="cpu"), vectors, texts, words)
