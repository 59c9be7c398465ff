"""The importance-sampled softmax: the kernels' loss with its hand-written backward (hf_elmo/kernels/sampled_softmax.py)
against the plain formula of pretraining/language_model.py, and the sampling itself."""

import math

import pytest
import torch

from hf_elmo.kernels.sampled_softmax import accidental_hits, sampled_softmax_losses
from hf_elmo.pretraining.language_model import log_uniform_samples
from hf_elmo.pretraining.language_model import sampled_softmax_losses as sampled_softmax_losses_reference

pytestmark = pytest.mark.numerics  # also run under forced AVX2 kernels by .ci/run


def _problem(dtype, rows=37, dim=8, vocab=50, num_sampled=24, seed=0):
    generator = torch.Generator().manual_seed(seed)
    hidden = torch.randn(rows, dim, generator=generator, dtype=dtype)
    weight = torch.randn(vocab, dim, generator=generator, dtype=dtype)
    bias = torch.randn(vocab, generator=generator, dtype=dtype)
    targets = torch.randint(0, vocab, (rows,), generator=generator)
    samples, log_expected = log_uniform_samples(vocab, num_sampled, torch.device("cpu"), generator)
    targets[:5] = samples[:5]  # accidental hits
    assert samples.unique().numel() < num_sampled  # and negatives drawn twice
    return hidden, weight, bias, targets, samples, log_expected


def _losses_and_gradients(function, hidden, weight, bias, targets, samples, log_expected, upstream):
    leaves = [tensor.clone().requires_grad_(True) for tensor in (hidden, weight, bias)]
    losses = function(*leaves, targets, samples, log_expected)
    (losses * upstream).sum().backward()
    return [losses.detach()] + [leaf.grad for leaf in leaves]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_the_fast_loss_and_its_gradients_equal_the_plain_formula(dtype):
    problem = _problem(dtype)
    upstream = torch.rand(problem[0].shape[0], generator=torch.Generator().manual_seed(1), dtype=dtype)
    fast = _losses_and_gradients(sampled_softmax_losses, *problem, upstream)
    reference = _losses_and_gradients(sampled_softmax_losses_reference, *problem, upstream)
    # Each value is a sum of at most K + 1 = 25 terms of size ~1: a few float eps per term.
    tolerance = 25 * 4 * torch.finfo(dtype).eps
    for name, got, expected in zip(("losses", "hidden", "weight", "bias"), fast, reference):
        torch.testing.assert_close(got, expected, rtol=tolerance, atol=tolerance, msg=name)


def test_the_backward_matches_finite_differences():
    # (torch.autograd.gradcheck calls backward more than once on one graph; this backward may be called once,
    # as a training step does, and reuses its saved buffer: a second call is refused by autograd.)
    hidden, weight, bias, targets, samples, log_expected = _problem(torch.float64, rows=6, dim=3, vocab=12, num_sampled=9, seed=3)
    targets[0] = samples[0]
    upstream = torch.rand(6, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    _, *analytic = _losses_and_gradients(sampled_softmax_losses, hidden, weight, bias, targets, samples, log_expected, upstream)

    def objective(h, w, b):
        return float((sampled_softmax_losses(h, w, b, targets, samples, log_expected) * upstream).sum())

    leaves, step = [hidden, weight, bias], 1e-6
    for which, gradient in enumerate(analytic):
        numeric = torch.zeros_like(gradient)
        for index in range(gradient.numel()):
            values = []
            for sign in (1, -1):
                moved = [leaf.clone() for leaf in leaves]
                moved[which].view(-1)[index] += sign * step
                values.append(objective(*moved))
            numeric.view(-1)[index] = (values[0] - values[1]) / (2 * step)
        torch.testing.assert_close(gradient, numeric, rtol=1e-6, atol=1e-8)
    hidden = hidden.clone().requires_grad_(True)
    losses = sampled_softmax_losses(hidden, weight, bias, targets, samples, log_expected).sum()
    losses.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        losses.backward()


def test_log_uniform_samples_follow_zipf_and_carry_their_correction():
    vocab, draws = 20, 200_000
    samples, log_expected = log_uniform_samples(vocab, draws, torch.device("cpu"), torch.Generator().manual_seed(0))
    probability = torch.tensor([math.log((w + 2) / (w + 1)) / math.log(vocab + 1) for w in range(vocab)])
    frequency = torch.bincount(samples, minlength=vocab).double() / draws
    # Binomial standard deviation of a frequency: sqrt(p (1 - p) / n); 5 of them.
    assert (frequency - probability).abs().le(5 * (probability * (1 - probability) / draws).sqrt() + 1e-12).all()
    torch.testing.assert_close(log_expected, torch.log(draws * probability.double()[samples]))


@pytest.mark.parametrize("seed", range(5))
def test_accidental_hits_are_the_places_where_a_sample_equals_its_rows_target(seed):
    generator = torch.Generator().manual_seed(seed)
    samples = torch.randint(0, 12, (30,), generator=generator)  # a small vocabulary: many repeats and hits
    targets = torch.randint(0, 14, (9,), generator=generator)  # 12 and 13 are never sampled
    rows, columns = accidental_hits(samples, targets)
    expected_rows, expected_columns = (samples.unsqueeze(0) == targets.unsqueeze(1)).nonzero(as_tuple=True)
    assert sorted(zip(rows.tolist(), columns.tolist())) == sorted(zip(expected_rows.tolist(), expected_columns.tolist()))
    assert rows.tolist() == sorted(rows.tolist())


def test_no_accidental_hits_and_no_targets():
    samples = torch.tensor([3, 1, 1])
    assert [t.tolist() for t in accidental_hits(samples, torch.tensor([0, 2, 4]))] == [[], []]
    assert [t.tolist() for t in accidental_hits(samples, torch.tensor([], dtype=torch.long))] == [[], []]
