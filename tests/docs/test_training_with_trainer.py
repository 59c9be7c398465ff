"""docs/training_with_trainer.md: both examples run as written (with a tiny model for MODEL), quietly."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from finetune_helpers import save_tiny_base
from paths import REPO_ROOT

GUIDE = REPO_ROOT / "docs" / "training_with_trainer.md"


def code_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", GUIDE.read_text(encoding="utf-8"), flags=re.S)


def test_the_guide_has_a_tagger_and_a_classifier():
    blocks = code_blocks()
    assert len(blocks) == 2
    assert "ElmoForTokenClassification" in blocks[0] and "tag_metrics_function" in blocks[0]
    assert "ElmoForSequenceClassification" in blocks[1]
    for block in blocks:
        assert 'MODEL = "default"' in block and "processing_class=tokenizer" in block


@pytest.mark.parametrize("index", [0, 1], ids=["tagger", "classifier"])
def test_the_example_runs_and_trains(index, tmp_path):
    base = save_tiny_base(tmp_path / "base")
    code = code_blocks()[index].replace('MODEL = "default"', f"MODEL = {base!r}")
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600,
        env={**__import__("os").environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    assert result.returncode == 0, result.stderr[-4000:]
    metric = "eval_f1" if index == 0 else "eval_accuracy"
    assert metric in result.stdout, result.stdout[-2000:]
    assert (tmp_path / "runs" / ("ner" if index == 0 else "cls") / "model.safetensors").is_file()
    # transformers warns when the tokenizer's special tokens differ from the model config's
    assert "PAD/BOS/EOS" not in result.stderr, result.stderr[-2000:]
