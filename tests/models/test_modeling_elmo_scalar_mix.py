"""ElmoScalarMix (bilm_elmo.py): the paper's equation 1, and AllenNLP's layer-normalised variant."""

import math

import pytest
import torch

from hf_elmo import ElmoScalarMix
from modeling_helpers import SENTENCES, make_model, run

pytestmark = pytest.mark.numerics  # also run under forced AVX2 kernels by .ci/run


def test_scalar_mix_math(model):
    output = run(model, SENTENCES)
    for mix, mixed in zip(model.scalar_mixes, output.elmo_representations):
        weights = torch.softmax(mix.scalar_parameters, dim=0)
        expected = mix.gamma * sum(w * layer for w, layer in zip(weights, output.hidden_states))
        assert torch.allclose(mixed, expected, atol=1e-6, rtol=0)
    # Freshly built mixes are the plain average (w = 0, gamma = 1).
    fresh = ElmoScalarMix(3)
    layers = [torch.randn(2, 4, 6) for _ in range(3)]
    assert torch.allclose(fresh(layers), sum(layers) / 3, atol=1e-6)
    with pytest.raises(ValueError, match="expected 3 layers"):
        fresh(layers[:2])


def test_scalar_mix_layer_norm():
    """One mean and variance per layer over all unmasked elements of the batch, the <S>/</S> positions
    included, as AllenNLP computes it (its numbers: test_parity.py); the boundaries are dropped afterwards."""
    model = make_model(scalar_mix_layer_norm=True)
    output = run(model, SENTENCES)
    with_boundaries = run(model, SENTENCES, keep_sentence_boundaries=True)
    mix = model.scalar_mixes[0]
    weights = torch.softmax(mix.scalar_parameters, dim=0)
    expected = 0
    for weight, layer in zip(weights, with_boundaries.hidden_states):
        values = layer[with_boundaries.mask.bool()]  # (real words and boundaries, width)
        normalised = (layer - values.mean()) / torch.sqrt(values.var(unbiased=False) + 1e-12)
        expected = expected + weight * normalised
    expected = (mix.gamma * expected)[:, 1:-1]
    mask = output.mask.bool()
    assert torch.allclose(output.elmo_representations[0][mask], expected[mask], atol=1e-5, rtol=0)
    assert not output.elmo_representations[0][~mask].any()
    assert torch.allclose(with_boundaries.elmo_representations[0][:, 1:-1][mask], expected[mask], atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="mask"):
        mix(list(output.hidden_states))


def test_mix_of_given_weights_equals_a_hand_computation():
    """gamma * sum_j softmax(s)_j * layer_j, with s = (ln 1, ln 2, ln 5): weights 1/8, 2/8, 5/8."""
    mix = ElmoScalarMix(3)
    with torch.no_grad():
        mix.scalar_parameters.copy_(torch.tensor([0.0, math.log(2.0), math.log(5.0)]))
        mix.gamma.fill_(2.0)
    layers = [torch.tensor([[[1.0], [2.0]]]), torch.tensor([[[3.0], [5.0]]]), torch.tensor([[[-1.0], [0.0]]])]
    # word 1: 2 * (1 * 1 + 3 * 2 - 1 * 5) / 8 = 0.5; word 2: 2 * (2 * 1 + 5 * 2 + 0 * 5) / 8 = 3
    with torch.no_grad():
        assert torch.allclose(mix(layers), torch.tensor([[[0.5], [3.0]]]), rtol=0, atol=1e-6)


def test_layer_normalised_mix_of_given_weights_equals_a_hand_computation():
    """Each layer is normalised by the mean and (biased) variance of its unmasked values only; the masked
    position (holding large values here) must not shift them."""
    mix = ElmoScalarMix(2, layer_norm=True)
    with torch.no_grad():
        mix.scalar_parameters.copy_(torch.tensor([0.0, math.log(3.0)]))  # weights 1/4, 3/4
        mix.gamma.fill_(2.0)
    layers = [torch.tensor([[[1.0], [2.0], [6.0], [100.0]]]), torch.tensor([[[0.0], [0.0], [3.0], [-50.0]]])]
    mask = torch.tensor([[True, True, True, False]])
    # layer 1: mean 3, variance (4 + 1 + 9) / 3 = 14 / 3; layer 2: mean 1, variance (1 + 1 + 4) / 3 = 2
    first = [(value - 3.0) / math.sqrt(14.0 / 3.0) for value in (1.0, 2.0, 6.0)]
    second = [(value - 1.0) / math.sqrt(2.0) for value in (0.0, 0.0, 3.0)]
    expected = torch.tensor([[[2.0 * (a / 4.0 + 3.0 * b / 4.0)] for a, b in zip(first, second)]])
    with torch.no_grad():
        assert torch.allclose(mix(layers, mask)[:, :3], expected, rtol=0, atol=1e-6)
