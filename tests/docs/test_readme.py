"""README.md: its first Python snippet runs as written on the shipped model and gives the shapes it states; what it
says of the word `default` and of the stock feature-extraction pipeline holds."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys

import pytest

import hf_elmo
from paths import REPO_ROOT

README = REPO_ROOT / "README.md"


def readme() -> str:
    return README.read_text(encoding="utf-8")


def paragraph_with(needle: str) -> str:
    """The README paragraph (text between blank lines) holding `needle`."""
    found = [part for part in re.split(r"\n\s*\n", readme()) if needle in part]
    assert found, f"README.md has no paragraph with {needle!r}"
    return found[0]


def test_the_first_python_snippet_runs_as_written_and_gives_the_id_shape_it_states(tmp_path):
    """Issue 36: the README's AutoModel snippet loaded "path/to/elmo-folder" (it could not be pasted) and said the
    ids are (batch, words, 50), where the shipped model gives 20."""
    snippet = re.findall(r"```python\n(.*?)```", readme(), flags=re.S)[0]
    stated = re.search(r'batch\["input_ids"\]\.shape\s*#.*?\((\d+), (\d+), (\d+)\)', snippet)
    assert stated, "the snippet's comment on batch['input_ids'].shape gives no shape in numbers"
    report = ('\nprint(repr((tuple(batch["input_ids"].shape), model.config.max_characters_per_token, '
              'len(out.hidden_states), model.config.num_lstm_layers)))\n')
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1"}
    result = subprocess.run([sys.executable, "-c", snippet + report], cwd=tmp_path, capture_output=True, text=True,
                            timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    shape, characters, layers, lstm_layers = ast.literal_eval(result.stdout.strip().splitlines()[-1])
    assert shape == tuple(int(size) for size in stated.groups())
    assert shape[2] == characters and layers == lstm_layers + 1


def test_the_tokenizer_section_gives_the_shipped_models_id_shape():
    """Issue 36: the README said the tokenizer's ids are (batch, words, 50); the shipped model's are 20 wide."""
    text = readme()
    assert "(batch, words, 50)" not in text
    stated = re.search(r"the shipped model's ids are `\(batch, words, (\d+)\)`", text)
    assert stated, "README.md does not give the shipped model's id shape"
    assert int(stated.group(1)) == hf_elmo.ElmoConfig.from_pretrained(hf_elmo.DEFAULT_MODEL).max_characters_per_token


def test_the_word_default_works_where_the_readme_says_and_not_in_from_pretrained(monkeypatch):
    """Issue 36: the README said models load "from `default`", but `AutoModel.from_pretrained("default")` retried
    the network and failed: the README now says which loaders know the word, and each of them does."""
    import huggingface_hub
    from transformers import AutoModel

    from hf_elmo.loading import load_model_and_tokenizer

    where = paragraph_with("the word `default` names it")
    assert "`from_pretrained` does not know the word" in where and "`hf_elmo.DEFAULT_MODEL`" in where
    assert "`hf_elmo.Embedder(\"default\")`" in where and "`hf_elmo.loading.load_model_and_tokenizer`" in where
    for embedder in (hf_elmo.Embedder("default"), hf_elmo.Embedder()):
        assert embedder.model.name_or_path == hf_elmo.DEFAULT_MODEL
    assert load_model_and_tokenizer("default")[2] == hf_elmo.DEFAULT_MODEL
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(OSError):
        AutoModel.from_pretrained("default")


def test_the_readme_says_what_the_stock_feature_extraction_pipeline_returns_and_how_to_choose():
    """Issue 36: `pipeline("feature-extraction")` returned the top layer and nothing said which; the README names it
    and `config.feature_layer`, and its example value is one the configuration takes."""
    said = paragraph_with('pipeline("feature-extraction", model=...)')
    assert "`last_hidden_state`" in said and "the top biLSTM layer" in said and "`config.feature_layer`" in said
    example = re.search(r'model_kwargs=\{"feature_layer":\s*"(\w+)"\}', said)
    assert example, "the README gives no model_kwargs example for feature_layer"
    config = hf_elmo.ElmoConfig.from_pretrained(hf_elmo.DEFAULT_MODEL, feature_layer=example.group(1))
    assert config.feature_layer == example.group(1)
