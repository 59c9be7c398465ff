"""hf_elmo.kernels.matrix_products: oneDNN's products (CPU float32) and torch's, forward and backward, against float64."""

import pytest
import torch
import torch.nn.functional as F

from hf_elmo.kernels.matrix_products import linear, rows_times, uses_onednn
from numerics import float32_tolerance, magnitude

pytestmark = pytest.mark.numerics  # also run under forced AVX2 kernels by .ci/run


def _random(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def test_onednn_is_used_for_cpu_float32_only(products):
    assert uses_onednn(torch.ones(2)) == (products == "onednn")
    assert not uses_onednn(torch.ones(2, dtype=torch.float64))
    assert not uses_onednn(torch.ones(2, dtype=torch.bfloat16))


@pytest.mark.parametrize("transposed", ["none", "rows", "weight", "both"])
@pytest.mark.parametrize("with_bias", [True, False])
def test_rows_times_equals_the_float64_product(products, transposed, with_bias):
    rows, weight, bias = _random(37, 300, seed=1), _random(70, 300, seed=2), _random(70, seed=3)
    if transposed in ("rows", "both"):
        rows = rows.t().contiguous().t()
    if transposed in ("weight", "both"):
        weight = weight.t().contiguous().t()
    got = rows_times(rows, weight, bias if with_bias else None)
    exact = rows.double() @ weight.double().t() + (bias.double() if with_bias else 0)
    assert got.shape == (37, 70) and got.is_contiguous() and got.dtype == torch.float32
    scale = magnitude((rows.double().abs() @ weight.double().abs().t()))  # the sum of |terms|
    assert float((got - exact).abs().max()) <= float32_tolerance(scale, 300 + 1)


@pytest.mark.parametrize("shape", [(5, 7, 300), (300,), (0, 300)])
def test_linear_and_its_gradients_equal_float64(products, shape):
    """Forward and backward of `linear` against F.linear in float64, for any leading dims (also none, also 0 rows)."""
    inputs, weight, bias = _random(*shape, seed=4), _random(70, 300, seed=5), _random(70, seed=6)
    upstream = _random(*shape[:-1], 70, seed=7)

    def run(function, dtype, absolute=False):
        leaves = [(t.abs() if absolute else t).to(dtype).clone().requires_grad_() for t in (inputs, weight, bias)]
        output = function(*leaves)
        (output * (upstream.abs() if absolute else upstream).to(dtype)).sum().backward()
        return [output.detach().double()] + [leaf.grad.double() for leaf in leaves]

    got, exact = run(linear, torch.float32), run(F.linear, torch.float64)
    # the same sums over |terms|: the scale of each value's rounding error
    sums_of_magnitudes = run(F.linear, torch.float64, absolute=True)
    rows = max(1, inputs.numel() // 300)
    # output: sums over the 300 inputs; input gradient: over the 70 outputs; weight and bias gradients: over rows
    for value, reference, scale, length in zip(got, exact, sums_of_magnitudes, (300, 70, rows, rows)):
        assert value.shape == reference.shape
        if reference.numel():
            assert float((value - reference).abs().max()) <= float32_tolerance(magnitude(scale), length)


def test_linear_without_gradients_tracks_nothing(products):
    with torch.no_grad():
        output = linear(_random(4, 300), _random(70, 300).requires_grad_(), _random(70))
    assert not output.requires_grad


def test_a_wrong_result_fails_the_comparison():
    """Guards the tolerances above: a product with one weight off by 1e-3 is far outside them."""
    rows, weight = _random(37, 300, seed=1), _random(70, 300, seed=2)
    wrong = weight.clone()
    wrong[3, 5] += 1e-3 * float(weight.abs().max())
    scale = magnitude(rows.double().abs() @ weight.double().abs().t())
    difference = float((rows_times(rows, wrong) - rows.double() @ weight.double().t()).abs().max())
    assert difference > 10 * float32_tolerance(scale, 301)


def test_a_strided_bias_gives_the_right_numbers(products):
    """oneDNN reads a strided bias as if it were contiguous; `rows_times` hands it a contiguous one."""
    rows, weight, bias = _random(10, 6, seed=1), _random(8, 6, seed=2), _random(8, 2, seed=3)[:, 0]
    assert not bias.is_contiguous()
    exact = rows.double() @ weight.double().t() + bias.double()
    scale = magnitude(rows.double().abs() @ weight.double().abs().t() + bias.double().abs())
    assert float((rows_times(rows, weight, bias) - exact).abs().max()) <= float32_tolerance(scale, 7)
    assert float((linear(rows, weight, bias) - exact).abs().max()) <= float32_tolerance(scale, 7)


def test_linear_can_be_differentiated_twice_and_under_torch_func(products):
    inputs, weight, bias = _random(5, 30, seed=8), _random(7, 30, seed=9), _random(7, seed=10)

    def gradient_norm(function, dtype):
        leaves = [t.to(dtype).clone().requires_grad_() for t in (inputs, weight, bias)]
        (grad_inputs,) = torch.autograd.grad(function(*leaves).pow(2).sum(), leaves[0], create_graph=True)
        return torch.autograd.grad(grad_inputs.pow(2).sum(), leaves[1])[0].double()

    second, exact = gradient_norm(linear, torch.float32), gradient_norm(F.linear, torch.float64)
    assert float((second - exact).abs().max()) <= 1e-4 * float(exact.abs().max())
    jacobian = torch.func.jacrev(lambda x: linear(x, weight, bias))(inputs[0])
    torch.testing.assert_close(jacobian, weight)  # d (W x + b) / d x = W, exactly
