"""The token-embedding cache (elmo_token_cache.py, built by `ElmoModel.build_token_cache`): cached vectors equal
the character CNN's, and a cache that no longer fits the weights is not used."""

from __future__ import annotations

import pytest
import torch

from hf_elmo.modeling_elmo import ElmoModel
from hf_elmo.tokenization_elmo import ElmoTokenizer
from numerics import bilm_tolerance
from small_models import cached_model, count_cnn_tokens, encode, max_diff, small_model

pytestmark = pytest.mark.numerics  # also run under forced AVX2 kernels by .ci/run


def test_token_cache_matches_cnn_and_falls_back(monkeypatch):
    sentences = [["the", "cat", "sat"], ["a", "dog", "unknownword", "sat"]]
    plain = small_model()
    model = cached_model(["the", "cat", "sat", "a", "dog"])
    assert model.config.token_cache_size == 7  # five words and <S>, </S>
    counter = count_cnn_tokens(model, monkeypatch)
    with torch.no_grad():
        expected = plain(**encode(sentences)).hidden_states
        got = model(**encode(sentences)).hidden_states
    assert max_diff(got, expected) <= bilm_tolerance(model.config, *expected)
    assert counter["tokens"] == 1  # only "unknownword" went through the CNN


def test_token_cache_not_used_for_training_or_gradients(monkeypatch):
    model = cached_model(["the", "cat"])
    counter = count_cnn_tokens(model, monkeypatch)
    model(**encode([["the", "cat"]]))  # eval mode but gradients wanted: the CNN runs
    assert counter["tokens"] == 4
    model.train()
    with torch.no_grad():
        model(**encode([["the", "cat"]]))
    assert counter["tokens"] == 8


def test_token_cache_saved_and_loaded(tmp_path, monkeypatch):
    model = cached_model(["the", "cat", "sat"])
    model.save_pretrained(tmp_path)
    loaded = ElmoModel.from_pretrained(tmp_path).eval()
    assert loaded.config.token_cache_size == 5
    assert torch.equal(loaded.char_encoder.token_cache.vectors, model.char_encoder.token_cache.vectors)
    counter = count_cnn_tokens(loaded, monkeypatch)
    with torch.no_grad():
        got = loaded(**encode([["the", "cat", "sat"]])).hidden_states
    expected_model = small_model()
    with torch.no_grad():
        expected = expected_model(**encode([["the", "cat", "sat"]])).hidden_states
    assert max_diff(got, expected) <= bilm_tolerance(model.config, *expected)
    assert counter["tokens"] == 5  # the first-use spot check of the (5) cached entries; the words skip the CNN


def test_a_copy_of_a_model_keeps_using_its_token_cache(monkeypatch, caplog):
    import copy

    model = cached_model(["the", "cat", "sat"])
    with torch.no_grad():
        model(**encode([["the", "cat"]]))  # the cache is in use
    twin = copy.deepcopy(model)
    counter = count_cnn_tokens(twin, monkeypatch)
    with torch.no_grad(), caplog.at_level("WARNING"):
        twin(**encode([["the", "cat", "sat"]]))
    assert "weights changed" not in caplog.text
    assert counter["tokens"] == 5  # the copy's first-use spot check; the words themselves skip the CNN


def test_token_cache_refuses_ids_that_are_not_words():
    model = small_model()
    good = torch.tensor([ElmoTokenizer().word_to_char_ids("cat")])
    for bad, message in ((good + 1000, "outside"), (good.float(), "integer"), (torch.zeros_like(good), "all-zero row")):
        with pytest.raises((ValueError, TypeError), match=message):
            model.build_token_cache(torch.cat([good, bad]) if bad.dtype == good.dtype else bad)
    assert model.char_encoder.token_cache is None


def test_stale_token_cache_is_ignored(monkeypatch):
    model = cached_model(["the", "cat"])
    with torch.no_grad():
        model.char_encoder.projection.bias.add_(1.0)  # e.g. an optimiser step
        got = model(**encode([["the", "cat"]])).hidden_states[0]
        model.drop_token_cache()
        expected = model(**encode([["the", "cat"]])).hidden_states[0]
    assert torch.equal(got, expected)
    assert model.config.token_cache_size == 0


def test_token_cache_survives_a_cast_to_bfloat16_and_is_refused_for_other_weights(monkeypatch, caplog):
    import logging

    words = ["the", "cat", "sat"]
    model = cached_model(words).to(torch.bfloat16)
    plain = small_model().to(torch.bfloat16)
    with torch.no_grad(), caplog.at_level(logging.WARNING):
        model(**encode([words]))  # the first call after the cast spot-checks a few cached entries
        counter = count_cnn_tokens(model, monkeypatch)
        got = model(**encode([words])).hidden_states
        expected = plain(**encode([words])).hidden_states
    assert "token cache" not in caplog.text and counter["tokens"] == 0  # the cache was used
    assert max_diff(got[:1], expected[:1]) <= 0.05  # layer 0: float32 vectors rounded vs a bf16 CNN
    other = cached_model(words)
    with torch.no_grad():
        for parameter in other.char_encoder.projection.parameters():
            parameter.add_(0.5)  # other weights, same cache
        other.char_encoder.token_cache._signature = None  # as after loading: the spot-check runs
        with caplog.at_level(logging.WARNING):
            other(**encode([words]))
    assert "built with other character-encoder weights" in caplog.text
    stepped = cached_model(words)
    counter = count_cnn_tokens(stepped, monkeypatch)
    with torch.no_grad():
        stepped.char_encoder.projection.bias.add_(1e-7)  # an in-place update, however small: stale
        with caplog.at_level(logging.WARNING):
            stepped(**encode([words]))
    assert "weights changed after the token cache was built" in caplog.text and counter["tokens"] == 5


def test_a_fused_optimizer_step_makes_the_token_cache_stale(monkeypatch, caplog):
    import logging

    words = ["the", "cat", "sat"]
    model = cached_model(words)
    optimizer = torch.optim.AdamW(model.char_encoder.parameters(), lr=1e-2, fused=True)  # no version bump
    model.char_encoder.projection.bias.sum().backward()
    optimizer.step()
    counter = count_cnn_tokens(model, monkeypatch)
    with torch.no_grad(), caplog.at_level(logging.WARNING):
        model(**encode([words]))
    assert "weights changed after the token cache was built" in caplog.text and counter["tokens"] == 5
