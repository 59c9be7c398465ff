"""The token-embedding cache of hf-elmo's kernels (hf_elmo/kernels/token_cache.py, built by
`hf_elmo.kernels.build_token_cache`): cached vectors equal the character CNN's, a cache that no longer fits the
weights is not used, and the cache lives in memory only (never saved, dropped by `train()`, not copied)."""

from __future__ import annotations

import copy
import json

import pytest
import torch
from safetensors.torch import load_file

import hf_elmo.kernels as kernels
from hf_elmo.kernels import build_token_cache, token_cache_of
from hf_elmo.models.elmo.modeling_elmo import ElmoModel
from hf_elmo.models.elmo.tokenization_elmo import ElmoTokenizer
from numerics import bilm_tolerance
from small_models import cached_model, count_cnn_tokens, encode, max_diff, small_model

pytestmark = pytest.mark.numerics  # also run under forced AVX2 kernels by .ci/run

WORDS = ["the", "cat", "sat"]


def hidden_states(model, sentences):
    with torch.no_grad():
        return model(**encode(sentences)).hidden_states


def test_token_cache_matches_the_cnn_and_falls_back(monkeypatch):
    sentences = [["the", "cat", "sat"], ["a", "dog", "unknownword", "sat"]]
    plain = small_model(implementation="reference")
    model = small_model()
    tokenizer = ElmoTokenizer()
    size = build_token_cache(model, torch.tensor([tokenizer.word_to_char_ids(w) for w in ["the", "cat", "sat", "a", "dog"]]))
    assert size == len(token_cache_of(model)) == 7  # five words and <S>, </S>
    counter = count_cnn_tokens(monkeypatch)
    expected = hidden_states(plain, sentences)
    got = hidden_states(model, sentences)
    assert max_diff(got, expected) <= bilm_tolerance(model.config, *expected)
    assert counter["tokens"] == 1  # only "unknownword" went through the CNN


def test_token_cache_is_not_used_for_gradients_and_is_dropped_by_train(monkeypatch):
    model = cached_model(["the", "cat"])
    counter = count_cnn_tokens(monkeypatch)
    model(**encode([["the", "cat"]]))  # eval mode but gradients wanted: the CNN runs
    assert counter["tokens"] == 4
    model.train()
    assert token_cache_of(model) is None
    with torch.no_grad():
        model(**encode([["the", "cat"]]))
    assert counter["tokens"] == 8
    model.eval()  # back in eval mode, still no cache until it is built again
    hidden_states(model, [["the", "cat"]])
    assert token_cache_of(model) is None and counter["tokens"] == 12


def test_token_cache_is_never_saved(tmp_path, monkeypatch):
    model = cached_model(WORDS)
    expected = hidden_states(model, [WORDS])
    model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert not any("cache" in key for key in config)
    assert sorted(load_file(tmp_path / "model.safetensors")) == sorted(small_model().state_dict())
    loaded = ElmoModel.from_pretrained(tmp_path).eval()
    assert token_cache_of(loaded) is None
    counter = count_cnn_tokens(monkeypatch)
    assert max_diff(hidden_states(loaded, [WORDS]), expected) <= bilm_tolerance(model.config, *expected)
    assert counter["tokens"] == 5  # every word and both boundaries through the CNN


def test_a_copy_of_a_model_starts_without_the_token_cache_and_gives_the_same_numbers(monkeypatch):
    model = cached_model(WORDS)
    expected = hidden_states(model, [WORDS])  # the cache is in use
    twin = copy.deepcopy(model)
    assert token_cache_of(twin) is None and len(token_cache_of(model)) == 5
    counter = count_cnn_tokens(monkeypatch)
    assert max_diff(hidden_states(twin, [WORDS]), expected) <= bilm_tolerance(model.config, *expected)
    assert counter["tokens"] == 5


def test_token_cache_refuses_ids_that_are_not_words_and_models_without_kernels():
    model = small_model()
    good = torch.tensor([ElmoTokenizer().word_to_char_ids("cat")])
    cases = ((torch.cat([good, good + 1000]), ValueError, "outside"), (good.float(), TypeError, "integer"),
             (torch.cat([good, torch.zeros_like(good)]), ValueError, "all-zero row"),
             (good[:, :10], ValueError, r"\(num_words, 50\)"))
    for bad, error, message in cases:
        with pytest.raises(error, match=message):
            build_token_cache(model, bad)
    assert token_cache_of(model) is None
    model.set_lstm_implementation("reference")
    with pytest.raises(ValueError, match="the token cache is part of hf-elmo's kernels"):
        build_token_cache(model, good)


def test_a_token_cache_of_other_weights_is_not_used(monkeypatch):
    model = cached_model(["the", "cat"])
    counter = count_cnn_tokens(monkeypatch)
    with torch.no_grad():
        model.char_encoder.projection.bias.add_(1e-3)  # an in-place update, however small: stale
    got = hidden_states(model, [["the", "cat"]])
    assert counter["tokens"] == 4
    kernels._token_caches.pop(model.char_encoder)
    expected = hidden_states(model, [["the", "cat"]])
    assert max_diff(got, expected) == 0


def test_a_cast_to_bfloat16_makes_the_token_cache_stale(monkeypatch):
    model = cached_model(WORDS).to(torch.bfloat16)
    plain = small_model().to(torch.bfloat16)
    counter = count_cnn_tokens(monkeypatch)
    got = hidden_states(model, [WORDS])
    assert counter["tokens"] == 5  # the float32 vectors are not used for a bfloat16 encoder
    assert max_diff(got, hidden_states(plain, [WORDS])) == 0


def test_a_fused_optimizer_step_in_training_leaves_no_stale_token_cache(monkeypatch):
    """Fused optimisers write without bumping version counters (kernels/weights_key.py): the cache must be gone
    because the model went back to training."""
    model = cached_model(WORDS)
    before = hidden_states(model, [WORDS])
    model.train()
    optimizer = torch.optim.AdamW(model.char_encoder.parameters(), lr=1e-2, fused=True)
    model.char_encoder.projection.bias.sum().backward()
    optimizer.step()
    model.eval()
    counter = count_cnn_tokens(monkeypatch)
    got = hidden_states(model, [WORDS])
    assert counter["tokens"] == 5
    model.set_lstm_implementation("reference")
    expected = hidden_states(model, [WORDS])
    assert max_diff(got, before) > 1e-3
    assert max_diff(got, expected) <= bilm_tolerance(model.config, *expected)
