"""ELMo layer 0, character CNN -> highway -> projection: the plain `bilm_elmo.ElmoCharacterEncoder` and hf-elmo's
kernels for it (hf_elmo/kernels/character_encoder.py) against the obvious Conv1d computation, and the highway layers
against a hand computation."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import hf_elmo.kernels.character_encoder as kernel_encoder
from hf_elmo.models.elmo.bilm_elmo import ElmoCharacterEncoder, ElmoHighway
from hf_elmo.models.elmo.tokenization_elmo import ElmoTokenizer
from numerics import char_encoder_tolerance, float32_tolerance, magnitude
from small_models import count_cnn_tokens, max_diff, small_model, tiny_config

pytestmark = pytest.mark.numerics  # also run under forced AVX2 kernels by .ci/run


def obvious_character_encoder(encoder, char_ids, word_ids=None):
    """ELMo layer 0 written the obvious way: Conv1d over all positions, max, activation, highway, projection."""
    chars = encoder.char_embedding(char_ids).transpose(1, 2)
    pooled = torch.cat([conv(chars).amax(dim=-1) for conv in encoder.convolutions], dim=-1)
    tokens = torch.tanh(pooled) if encoder.config.char_cnn_activation == "tanh" else F.relu(pooled)
    for layer in encoder.highway.layers:
        transform, carry = layer(tokens).chunk(2, dim=-1)
        gate = torch.sigmoid(carry)
        tokens = gate * F.relu(transform) + (1 - gate) * tokens
    if word_ids is not None:
        tokens = torch.cat([encoder.word_embedding(word_ids), tokens], dim=-1)
    return encoder.projection(tokens)


def character_ids(words):
    tokenizer = ElmoTokenizer()
    return torch.tensor([tokenizer.word_to_char_ids(w) if w else [0] * 50 for w in words])


ENCODERS = {
    "plain": lambda encoder, char_ids, word_ids=None: encoder(char_ids, word_ids),
    "kernels": kernel_encoder.encode,
    "kernels, distinct tokens once": kernel_encoder.encode_tokens,
}


@pytest.mark.parametrize("activation", ["relu", "tanh"])
@pytest.mark.parametrize("implementation", sorted(ENCODERS))
def test_character_encoder_equals_the_obvious_convolution(implementation, activation):
    torch.manual_seed(0)
    encoder = ElmoCharacterEncoder(tiny_config(char_cnn_filters=[[1, 4], [2, 8], [3, 8]], char_cnn_activation=activation))
    with torch.no_grad():
        for parameter in encoder.parameters():
            parameter.normal_(0.0, 0.5)
    char_ids = character_ids(["a", "hello", "x" * 60, "日本語", "", "<S>"])
    run = ENCODERS[implementation]
    with torch.no_grad():
        expected = obvious_character_encoder(encoder, char_ids)
        assert float((run(encoder, char_ids) - expected).abs().max()) <= char_encoder_tolerance(encoder.config, expected)
        short = char_ids[[0, 1, 3]]  # no long word: most of the padding tail is dropped
        got = run(encoder, short)
        assert float((got - expected[[0, 1, 3]]).abs().max()) <= char_encoder_tolerance(encoder.config, expected)
        # Guards the comparison against passing vacuously: another activation gives other vectors.
        encoder.config.char_cnn_activation = "tanh" if activation == "relu" else "relu"
        assert float((run(encoder, short) - got).abs().max()) > 100 * char_encoder_tolerance(encoder.config, expected)


@pytest.mark.parametrize("implementation", sorted(ENCODERS))
def test_a_word_embedding_is_concatenated_before_the_projection(implementation):
    torch.manual_seed(0)
    encoder = ElmoCharacterEncoder(tiny_config(word_vocab_size=5, word_embedding_dim=3, bos_word_id=0, eos_word_id=1))
    char_ids = character_ids(["ab", "ab", "cde"])
    word_ids = torch.tensor([2, 3, 4])  # the same characters with other word ids: other vectors
    with torch.no_grad():
        expected = obvious_character_encoder(encoder, char_ids, word_ids)
        got = ENCODERS[implementation](encoder, char_ids, word_ids)
    assert float((got - expected).abs().max()) <= char_encoder_tolerance(encoder.config, expected)
    assert float((got[0] - got[1]).abs().max()) > 1e-3


def test_character_encoder_kernel_chunks(monkeypatch):
    model = small_model()
    char_ids = character_ids(["ab", "cde", "fghij", "k", "lmnopq"])
    encoder = model.char_encoder
    with torch.no_grad():
        whole = kernel_encoder.encode(encoder, char_ids)
        monkeypatch.setattr(kernel_encoder, "CHUNK_SIZE", 2)
        chunked = kernel_encoder.encode(encoder, char_ids)
        monkeypatch.setattr(kernel_encoder, "CONVOLUTION_CHUNK_SIZE", 3)
        chunked_convolutions = kernel_encoder.encode(encoder, char_ids)
        expected = obvious_character_encoder(encoder, char_ids)
    for got in (whole, chunked, chunked_convolutions):
        assert float((got - expected).abs().max()) <= char_encoder_tolerance(model.config, expected)


def test_repeated_tokens_are_encoded_once_with_the_same_vectors_and_gradients(monkeypatch):
    model = small_model()
    char_ids = character_ids(["ab", "cde", "ab", "<S>", "cde", "ab", "<S>"])
    encoder = model.char_encoder
    with torch.no_grad():
        expected = obvious_character_encoder(encoder, char_ids)
    counter = count_cnn_tokens(monkeypatch)
    vectors = model.encode_tokens(encoder, char_ids)  # the model's way to layer 0, on its kernels
    assert counter["tokens"] == 3  # three distinct tokens
    assert float((vectors.detach() - expected).abs().max()) <= char_encoder_tolerance(model.config, expected)
    # Gradients reach the CNN from every occurrence, as if each had been encoded on its own.
    weights = torch.randn(vectors.shape, generator=torch.Generator().manual_seed(3))
    (vectors * weights).sum().backward()
    got = [p.grad.clone() for p in encoder.parameters() if p.grad is not None]
    encoder.zero_grad(set_to_none=True)
    (obvious_character_encoder(encoder, char_ids) * weights).sum().backward()
    wanted = [p.grad for p in encoder.parameters() if p.grad is not None]
    # a weight's gradient sums over every character position of every token
    tolerance = float32_tolerance(magnitude(*wanted), char_ids.numel(), 3 + model.config.num_highway_layers)
    assert len(got) == len(wanted) and max_diff(got, wanted) <= tolerance
    # The plain model encodes every row itself (no deduplication: it is the definition).
    model.set_lstm_implementation("reference")
    plain = model.encode_tokens(encoder, char_ids)
    assert counter["tokens"] == 3
    assert float((plain.detach() - expected).abs().max()) <= char_encoder_tolerance(model.config, expected)


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
