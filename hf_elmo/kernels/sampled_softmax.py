"""The biLM's importance-sampled softmax loss (Jean et al. 2015, as bilm-tf trains ELMo).

Negatives are drawn from a log-uniform (Zipf) distribution over the frequency-sorted vocabulary; their logits
are corrected by log(K q(w)) and accidental hits (a negative equal to the row's target) removed, so that the
sampled normaliser is an unbiased estimate of the full one.

`pretraining.language_model.sampled_softmax_losses` is the plain formula in torch operations, the reference the
tests compare with. `sampled_softmax_losses` computes the same numbers with a hand-written backward: the (rows, K)
logits become exp(logit - row max) in place and then, in the backward, the softmax weights times the upstream
gradient in place again, where autograd's logsumexp keeps several (rows, K) temporaries alive and passes over
them more often (`benchmarks/bench_sampled_softmax.py`, figures in benchmarks/RESULTS.md).
"""

from __future__ import annotations

import torch

from .matrix_products import rows_times


def accidental_hits(samples: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(rows, columns) of every sample equal to its row's target, in row order: a binary search of each target in
    the sorted samples, instead of comparing every row with all K samples (a (rows, K) mask)."""
    sorted_samples, order = torch.sort(samples)
    first = torch.searchsorted(sorted_samples, targets)
    counts = torch.searchsorted(sorted_samples, targets, right=True) - first
    rows = torch.repeat_interleave(torch.arange(len(targets), device=targets.device), counts)
    # The i-th hit of the flattened list is the (i - hits before its row)-th sample equal to its row's target.
    row_starts = torch.repeat_interleave(first - (counts.cumsum(0) - counts), counts)
    return rows, order[row_starts + torch.arange(len(rows), device=targets.device)]


class _SampledSoftmaxLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, bias, targets, samples, log_expected):
        sampled_weight = weight[samples]
        true_weight = weight[targets]
        true_logits = (hidden * true_weight).sum(-1) + bias[targets]
        exps = rows_times(hidden.contiguous(), sampled_weight, bias[samples] - log_expected.to(hidden.dtype))
        exps.index_put_(accidental_hits(samples, targets), exps.new_tensor(float("-inf")))
        row_max = torch.maximum(exps.amax(dim=1), true_logits)
        exps.sub_(row_max.unsqueeze(1)).exp_()
        true_exp = (true_logits - row_max).exp()
        total = exps.sum(dim=1) + true_exp
        ctx.save_for_backward(hidden, weight, targets, samples, exps, true_exp, total)
        ctx.bias_size, ctx.bias_dtype = bias.shape, bias.dtype
        return row_max + total.log() - true_logits

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_losses):
        hidden, weight, targets, samples, exps, true_exp, total = ctx.saved_tensors
        needs_hidden, needs_weight, needs_bias = ctx.needs_input_grad[:3]
        scale = grad_losses / total
        sampled_grad = exps.mul_(scale.unsqueeze(1))  # d loss / d sampled logit; the saved exps are not needed again
        true_grad = scale * true_exp - grad_losses  # d loss / d true logit
        grad_hidden = grad_weight = grad_bias = None
        if needs_hidden:
            grad_hidden = rows_times(sampled_grad, weight[samples].t()).add_(true_grad.unsqueeze(1) * weight[targets])
        if needs_weight:
            grad_weight = torch.zeros_like(weight)
            # sampled_grad^T @ hidden, as (hidden^T @ sampled_grad)^T: the transposed first operand is the small one
            grad_weight.index_add_(0, samples, rows_times(hidden.t(), sampled_grad.t()).t())
            grad_weight.index_add_(0, targets, true_grad.unsqueeze(1) * hidden)
        if needs_bias:
            grad_bias = grad_losses.new_zeros(ctx.bias_size, dtype=ctx.bias_dtype)
            grad_bias.index_add_(0, samples, sampled_grad.sum(dim=0))
            grad_bias.index_add_(0, targets, true_grad)
        return grad_hidden, grad_weight, grad_bias, None, None, None


def sampled_softmax_losses(hidden, weight, bias, targets, samples, log_expected) -> torch.Tensor:
    """`pretraining.language_model.sampled_softmax_losses`' losses, with the hand-written backward."""
    return _SampledSoftmaxLoss.apply(hidden, weight, bias, targets, samples, log_expected)


__all__ = ["accidental_hits", "sampled_softmax_losses"]
