"""ElmoCharacterEncoder and ElmoHighway (elmo_char_encoder.py): ELMo layer 0, character CNN -> highway -> projection."""

from __future__ import annotations

import math

import pytest
import torch

from hf_elmo.elmo_char_encoder import ElmoHighway
from hf_elmo.tokenization_elmo import ElmoTokenizer
from numerics import char_encoder_tolerance, float32_tolerance, magnitude
from small_models import count_cnn_tokens, max_diff, small_model

pytestmark = pytest.mark.numerics  # also run under forced AVX2 kernels by .ci/run


def plain_character_encoder(encoder, char_ids):
    """ELMo layer 0 written the obvious way: Conv1d over all positions, max, activation, highway, projection."""
    chars = encoder.char_embedding(char_ids).transpose(1, 2)
    pooled = torch.cat([conv(chars).amax(dim=-1) for conv in encoder.convolutions], dim=-1)
    return encoder.projection(encoder.highway(encoder.activation(pooled)))


def test_character_encoder_equals_plain_convolution():
    model = small_model()
    tokenizer = ElmoTokenizer()
    words = ["a", "hello", "x" * 60, "日本語", "", "<S>"]
    char_ids = torch.tensor([tokenizer.word_to_char_ids(w) if w else [0] * 50 for w in words])
    encoder = model.char_encoder
    with torch.no_grad():
        expected = plain_character_encoder(encoder, char_ids)
        assert float((encoder(char_ids) - expected).abs().max()) <= char_encoder_tolerance(model.config, expected)
        short = char_ids[[0, 1, 3]]  # no long word: most of the padding tail is dropped
        assert float((encoder(short) - expected[[0, 1, 3]]).abs().max()) <= char_encoder_tolerance(model.config, expected)


def test_character_encoder_chunks(monkeypatch):
    model = small_model()
    char_ids = torch.tensor([ElmoTokenizer().word_to_char_ids(w) for w in ["ab", "cde", "fghij", "k", "lmnopq"]])
    with torch.no_grad():
        whole = model.char_encoder(char_ids)
        monkeypatch.setattr(type(model.char_encoder), "chunk_size", 2)
        chunked = model.char_encoder(char_ids)
        monkeypatch.setattr(type(model.char_encoder), "convolution_chunk_size", 3)
        chunked_convolutions = model.char_encoder(char_ids)
    assert float((whole - chunked).abs().max()) <= char_encoder_tolerance(model.config, whole)
    assert float((whole - chunked_convolutions).abs().max()) <= char_encoder_tolerance(model.config, whole)


def test_repeated_tokens_are_encoded_once_with_the_same_vectors_and_gradients(monkeypatch):
    model = small_model()
    tokenizer = ElmoTokenizer()
    words = ["ab", "cde", "ab", "<S>", "cde", "ab", "<S>"]
    char_ids = torch.tensor([tokenizer.word_to_char_ids(w) for w in words])
    encoder = model.char_encoder
    with torch.no_grad():
        expected = plain_character_encoder(encoder, char_ids)
    counter = count_cnn_tokens(model, monkeypatch)
    vectors = encoder(char_ids)
    assert counter["tokens"] == 3  # three distinct tokens
    assert float((vectors.detach() - expected).abs().max()) <= char_encoder_tolerance(model.config, expected)
    # Gradients reach the CNN from every occurrence, as if each had been encoded on its own.
    weights = torch.randn(vectors.shape, generator=torch.Generator().manual_seed(3))
    (vectors * weights).sum().backward()
    got = [p.grad.clone() for p in encoder.parameters() if p.grad is not None]
    encoder.zero_grad(set_to_none=True)
    (plain_character_encoder(encoder, char_ids) * weights).sum().backward()
    wanted = [p.grad for p in encoder.parameters() if p.grad is not None]
    # a weight's gradient sums over every character position of every token
    tolerance = float32_tolerance(magnitude(*wanted), char_ids.numel(), 3 + model.config.num_highway_layers)
    assert len(got) == len(wanted) and max_diff(got, wanted) <= tolerance


def test_highway_layers_equal_a_hand_computation():
    """Each highway layer maps x to [transform; carry] and returns g * relu(transform) + (1 - g) * x with
    g = sigmoid(carry) (bilm-tf's convention, the class docstring's); numbers worked out by hand."""
    highway = ElmoHighway(size=2, num_layers=2)
    with torch.no_grad():
        for layer in highway.layers:  # rows 0-1: transform; rows 2-3: carry, the gate's logits
            layer.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, -1.0], [0.0, 0.0], [0.0, 0.0]]))
            layer.bias.copy_(torch.tensor([0.5, 0.0, 0.0, math.log(3.0)]))  # gates 1/2 and sigmoid(ln 3) = 3/4
    x = torch.tensor([[2.0, 3.0]])
    # layer 1: transform (2.5, -3) -> relu (2.5, 0); (1/2 * 2.5 + 1/2 * 2, 3/4 * 0 + 1/4 * 3) = (2.25, 0.75)
    # layer 2: transform (2.75, -0.75) -> relu (2.75, 0); (1/2 * 2.75 + 1/2 * 2.25, 1/4 * 0.75) = (2.5, 0.1875)
    with torch.no_grad():
        one_layer = ElmoHighway(size=2, num_layers=1)
        one_layer.layers[0].load_state_dict(highway.layers[0].state_dict())
        assert torch.allclose(one_layer(x), torch.tensor([[2.25, 0.75]]), rtol=0, atol=1e-6)
        assert torch.allclose(highway(x), torch.tensor([[2.5, 0.1875]]), rtol=0, atol=1e-6)
