"""The optional int8 mode of the biLSTM (hf_elmo/kernels/quantization.py, `set_lstm_implementation("int8")`): exact
integer products, close to fp32, chosen at load or run time and never saved."""

from __future__ import annotations

import pytest
import torch

from hf_elmo.models.elmo.modeling_elmo import ElmoModel
from numerics import float32_tolerance
from small_models import encode, max_diff, small_model

pytestmark = pytest.mark.numerics  # also run under forced AVX2 kernels by .ci/run


def test_int8_products_are_exact_integer_sums_on_every_kernel():
    """fbgemm's AVX2 kernels add pairs of u8 x s8 products in 16 bits; activations at the top of the 8-bit range
    next to weights at +-127 overflow that (2 * 255 * 127 > 32767). The int8 product must equal the same
    quantisation done in float64 (exact integer sums, then one float32 rounding per output) on whatever kernel
    the machine runs; CI also runs this with FBGEMM_ENABLE_INSTRUCTIONS=AVX2."""
    from hf_elmo.kernels.quantization import int8_linear, pack_int8

    generator = torch.Generator().manual_seed(0)
    columns = 256
    weight = torch.randn(64, columns, generator=generator)
    weight[:, ::2] = weight[:, ::2].abs().amax(dim=1, keepdim=True)  # every other weight at its row's +127
    activations = torch.rand(5, columns, generator=generator) * 4.0
    activations[:, 0] = -0.05  # a small negative minimum: the positive values sit at the top of the range
    activations[:, 1::2] = 4.0
    got = int8_linear(activations, pack_int8(weight)).double()

    weight_scales = weight.abs().amax(dim=1).double() / 127.0
    quantized_weight = torch.round(weight.double() / weight_scales[:, None]).clamp(-127, 127) * weight_scales[:, None]
    quantized = torch.quantize_per_tensor_dynamic(activations, torch.quint8, reduce_range=True)
    quantized_activations = quantized.dequantize().double()
    expected = quantized_activations @ quantized_weight.T
    sums_of_magnitudes = quantized_activations.abs() @ quantized_weight.abs().T
    # exact integer sums in both; float32 rounding of the scales and of the result
    assert float(((got - expected).abs() / sums_of_magnitudes).max()) <= float32_tolerance(1.0, 1, stages=4)


def test_int8_mode_is_close_and_reversible():
    model = small_model(clip=False)
    encoded = encode([["the", "cat", "sat"], ["a", "dog"]])
    with torch.no_grad():
        expected = model(**encoded).hidden_states
        model.set_lstm_implementation("int8")
        quantized = model(**encoded).hidden_states
        model.set_lstm_implementation("auto")
        again = model(**encoded).hidden_states
    assert max_diff(again, expected) == 0
    drift = max_diff(quantized[1:], expected[1:])
    # 8-bit weights and 7-bit activations: each product is off by up to about 1/127 of its terms' scale; three
    # products per layer and two layers give a few percent, with margin at 10% of the largest value
    assert 0 < drift < 0.1 * max(float(layer.abs().max()) for layer in expected)
    assert not quantized[-1][1, 2:].any()  # padding stays zero
    with pytest.raises(RuntimeError, match="the int8 biLSTM is for inference"):
        model.set_lstm_implementation("int8")
        model(**encoded)  # gradients wanted


def test_int8_is_chosen_by_the_loader_and_never_saved(tmp_path):
    model = small_model(clip=False)
    encoded = encode([["the", "cat", "sat"]])
    with torch.no_grad():
        exact = model(**encoded).hidden_states[-1]
    model.set_lstm_implementation("int8")
    with torch.no_grad():
        quantized = model(**encoded).hidden_states[-1]
    model.save_pretrained(tmp_path)
    assert "lstm_implementation" not in (tmp_path / "config.json").read_text()
    recipient = ElmoModel.from_pretrained(tmp_path).eval()
    assert recipient.lstm_implementation == "auto"
    chosen = ElmoModel.from_pretrained(tmp_path, lstm_implementation="int8").eval()
    assert chosen.lstm_implementation == "int8"
    with torch.no_grad():
        assert torch.equal(recipient(**encoded).hidden_states[-1], exact)  # the saved fp32 weights, exact
        # quantised on its first call from the saved fp32 weights: the same int8 numbers
        assert torch.equal(chosen(**encoded).hidden_states[-1], quantized)
    assert not torch.equal(quantized, exact)


def test_int8_mode_follows_weight_changes_and_refuses_other_dtypes():
    model = small_model(clip=False, implementation="int8")
    encoded = encode([["the", "cat", "sat"]])
    with torch.no_grad():
        before = model(**encoded).hidden_states[-1]
        model.bilstm.layers[1].recurrent_weight.mul_(0.0)  # e.g. loading other weights in place
        after = model(**encoded).hidden_states[-1]
        model.set_lstm_implementation("auto")
        reference = model(**encoded).hidden_states[-1]
    assert not torch.allclose(before, after)  # the new weights are used...
    assert float((after - reference).abs().max()) < 0.1 * float(reference.abs().max())  # ...quantised
    model.set_lstm_implementation("int8")
    model.to(torch.bfloat16)
    with torch.no_grad(), pytest.raises(TypeError, match="runs float32 models"):
        model(**encoded)
