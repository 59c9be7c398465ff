"""The small Chinese ELMo shipped inside the package: loads offline, stays small, and uses context."""

from __future__ import annotations

import os
from pathlib import Path

import torch
from transformers import AutoModel, AutoTokenizer

import hf_elmo
from paths import REPO_ROOT

REPO = REPO_ROOT
XIAOMI = REPO / "docs" / "examples" / "xiaomi.txt"
FOOD_SENTENCES = 12  # the first 12 lines use 小米 the grain, the other 10 the phone maker


def test_default_model_loads_offline_and_is_small():
    folder = Path(hf_elmo.DEFAULT_MODEL)
    size = sum(path.stat().st_size for path in folder.iterdir())
    assert size <= 25 * 1024 * 1024
    model = AutoModel.from_pretrained(hf_elmo.DEFAULT_MODEL)
    tokenizer = AutoTokenizer.from_pretrained(hf_elmo.DEFAULT_MODEL)
    assert isinstance(model, hf_elmo.ElmoModel) and isinstance(tokenizer, hf_elmo.ElmoTokenizer)
    assert tokenizer.chinese_segmentation == "jieba"
    assert (folder / "README.md").is_file()


def test_shipped_folder_holds_weights_config_and_tokenizer_files_only():
    """Issue 34: no symlinks (Windows checkouts would get one-line text files, and pushing the folder would push
    links pointing outside it) and no code; the modelling files are written where they are needed, by
    `save_pretrained`."""
    folder = Path(hf_elmo.DEFAULT_MODEL)
    assert not [path.name for path in folder.iterdir() if path.is_symlink()]
    assert not list(folder.glob("*.py"))
    assert {"config.json", "model.safetensors", "tokenizer_config.json"} <= {path.name for path in folder.iterdir()}


def test_the_shipped_model_saved_by_the_package_loads_by_remote_code_without_it(tmp_path):
    """What a user without hf-elmo gets from a saved copy of the shipped model: the plain PyTorch path of the
    same file, equal to the package's "reference" path."""
    from hub_helpers import run_python

    from remote_code_files import CODE_FILES

    model = AutoModel.from_pretrained(hf_elmo.DEFAULT_MODEL).eval()
    tokenizer = AutoTokenizer.from_pretrained(hf_elmo.DEFAULT_MODEL)
    copy = tmp_path / "elmo-zh-small"
    model.save_pretrained(copy)
    tokenizer.save_pretrained(copy)
    assert sorted(path.name for path in copy.glob("*.py")) == sorted(CODE_FILES)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env["HF_HUB_OFFLINE"] = "1"
    run_python(
        f"""
        import torch
        from transformers import AutoModel, AutoTokenizer
        tokenizer = AutoTokenizer.from_pretrained({str(copy)!r}, trust_remote_code=True)
        model = AutoModel.from_pretrained({str(copy)!r}, trust_remote_code=True).eval()
        assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
        with torch.no_grad():
            vectors = model(**tokenizer(["我爱北京天安门。"], return_tensors="pt")).last_hidden_state
        torch.save(vectors, {str(tmp_path / "vectors.pt")!r})
        """,
        env, cwd=tmp_path, isolated=True,
    )
    model.set_lstm_implementation("reference")
    with torch.no_grad():
        expected = model(**tokenizer(["我爱北京天安门。"], return_tensors="pt")).last_hidden_state
    assert torch.equal(torch.load(tmp_path / "vectors.pt", weights_only=True), expected)


def _xiaomi_vectors():
    tokenizer = AutoTokenizer.from_pretrained(hf_elmo.DEFAULT_MODEL)
    model = AutoModel.from_pretrained(hf_elmo.DEFAULT_MODEL).eval()
    sentences = XIAOMI.read_text(encoding="utf-8").splitlines()
    batch = tokenizer(sentences, padding=True, return_tensors="pt", return_words=True)
    positions = [words.index("小米") for words in batch.pop("words")]
    with torch.no_grad():
        layers = model(**batch).hidden_states
    rows = torch.arange(len(sentences))
    return [layer[rows, positions] for layer in layers]


def _nearest_neighbour_same_sense(vectors: torch.Tensor) -> float:
    vectors = torch.nn.functional.normalize(vectors, dim=-1)
    similarity = vectors @ vectors.t()
    similarity.fill_diagonal_(-2)
    nearest = similarity.argmax(dim=1)
    sense = torch.arange(len(vectors)) < FOOD_SENTENCES
    return (sense[nearest] == sense).float().mean().item()


def test_context_separates_the_two_senses_of_xiaomi_while_layer_zero_cannot():
    layers = _xiaomi_vectors()
    token_layer = layers[0]
    # Layer 0 is context-free: every 小米 gets the same vector, so it cannot tell the senses apart
    # (its nearest-neighbour score is the majority-class rate, 12/22).
    assert (token_layer - token_layer[0]).abs().max() < 1e-5
    assert _nearest_neighbour_same_sense(token_layer) < 0.6
    # The biLSTM layers can. Measured for the shipped model (see its card): the top layer puts 18 of 22
    # occurrences next to one of the same sense, the first layer 15 of 22; in both, same-sense pairs are
    # more similar on average than cross-sense pairs (first 0.624 vs 0.579, top 0.627 vs 0.560).
    assert _nearest_neighbour_same_sense(layers[-1]) >= 0.8
    sense = torch.arange(len(token_layer)) < FOOD_SENTENCES
    same = sense.unsqueeze(0) == sense.unsqueeze(1)
    off_diagonal = ~torch.eye(len(token_layer), dtype=torch.bool)
    for layer in layers[1:]:
        unit = torch.nn.functional.normalize(layer, dim=-1)
        similarity = unit @ unit.t()
        assert similarity[same & off_diagonal].mean() > similarity[~same].mean() + 0.02
