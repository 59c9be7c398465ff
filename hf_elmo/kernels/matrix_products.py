"""Matrix products on the CPU in float32: oneDNN's kernels where this torch build has them, torch's elsewhere.

torch hands float32 CPU products to MKL, which on AMD processors runs its AVX2 kernels even where the
processor has AVX-512; oneDNN (inside torch, behind its CPU convolutions and torch.compile's linear layers)
uses the widest instructions the processor has. For the biLM's shapes it ran 2.2-2.4x faster on an AMD EPYC
with AVX-512, and on par elsewhere (benchmarks/RESULTS.md, "oneDNN products in training").

- `rows_times(rows, weight, bias)`: ``rows @ weight.T + bias`` without autograd (hand-written backwards).
- `linear(inputs, weight, bias)`: `F.linear` whose forward and backward products both go through `rows_times`;
  `Linear`, the `nn.Linear` that calls it.
- `onednn_pack` / `onednn_packed_linear`: a weight reordered once into oneDNN's blocked layout, for inference
  that multiplies with it at every step.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

# The batch size a packed weight is laid out for: a hint for the blocked layout; any number of rows can use it.
_ONEDNN_PACKING_BATCH = 32

_onednn_usable: bool | None = None


def onednn_available() -> bool:
    """Whether this torch build runs oneDNN's inner product here (x86 CPU builds do)."""
    global _onednn_usable
    if _onednn_usable is None:
        try:
            weight = torch.arange(12.0).view(3, 4)
            packed = onednn_packed_linear(torch.ones(2, 4), onednn_pack(weight))
            plain = torch.ops.mkldnn._linear_pointwise(torch.ones(2, 4), weight, None, "none", [], "")
            expected = torch.ones(2, 4) @ weight.t()
            _onednn_usable = bool(torch.equal(packed, expected) and torch.equal(plain, expected))
        except (AttributeError, RuntimeError, NotImplementedError):
            _onednn_usable = False
    return _onednn_usable


def uses_onednn(like: torch.Tensor) -> bool:
    """Whether products of tensors like `like` go to oneDNN: CPU float32 where the build has it, and not while
    torch.compile traces (inductor cannot lower the oneDNN operator; it picks its own kernels)."""
    return like.is_cpu and like.dtype == torch.float32 and not torch.compiler.is_compiling() and onednn_available()


def rows_times(rows: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``rows @ weight.T (+ bias)``: rows (N, in), weight (out, in), bias (out,) -> a new contiguous (N, out).

    Either matrix may be a transposed view. oneDNN copies a transposed `rows` first, so of two ways to write a
    product, pass the smaller matrix as `rows`. Neither may be a slice with gaps between its rows: oneDNN
    multiplies those many times more slowly.
    """
    if uses_onednn(rows) and rows.numel() and weight.numel():  # oneDNN has no empty products
        # oneDNN reads a strided bias as if it were contiguous: wrong numbers, no error
        bias = bias.contiguous() if bias is not None else None
        return torch.ops.mkldnn._linear_pointwise(rows, weight, bias, "none", [], "")
    return torch.addmm(bias, rows, weight.t()) if bias is not None else torch.mm(rows, weight.t())


class _Linear(torch.autograd.Function):
    """rows (N, in) @ weight^T + bias. The backward is written with `linear` itself, so it is differentiable
    again (double backward, `create_graph=True`)."""

    @staticmethod
    def forward(ctx, rows, weight, bias):
        ctx.save_for_backward(rows, weight)
        ctx.has_bias = bias is not None
        return rows_times(rows, weight, bias)

    @staticmethod
    def backward(ctx, grad_output):
        rows, weight = ctx.saved_tensors
        needs_rows, needs_weight, needs_bias = ctx.needs_input_grad
        grad_output = grad_output.contiguous()
        grad_rows = linear(grad_output, weight.t()) if needs_rows else None
        grad_weight = None
        if needs_weight:  # grad_output^T @ rows, with the narrower of the two as the transposed first operand
            if weight.shape[0] <= weight.shape[1]:
                grad_weight = linear(grad_output.t(), rows.t())
            else:
                grad_weight = linear(rows.t(), grad_output.t()).t().contiguous()
        grad_bias = grad_output.sum(dim=0) if needs_bias and ctx.has_bias else None
        return grad_rows, grad_weight, grad_bias


def linear(inputs: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """`F.linear(inputs, weight, bias)` for inputs (..., in), with oneDNN's products forward and backward on CPU
    float32 (`F.linear` itself elsewhere)."""
    if (
        not uses_onednn(inputs) or weight.dtype != inputs.dtype or not inputs.shape[-1]
        or torch._C._are_functorch_transforms_active()  # torch.func cannot see into this autograd Function
    ):
        return F.linear(inputs, weight, bias)
    rows = inputs.reshape(-1, inputs.shape[-1])
    if not rows.is_contiguous():
        rows = rows.contiguous()
    tracked = torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (inputs, weight, bias))
    output = _Linear.apply(rows, weight, bias) if tracked else rows_times(rows, weight, bias)
    return output.view(*inputs.shape[:-1], weight.shape[0])


class Linear(nn.Linear):
    """`nn.Linear` (same parameters, names and initialisation) whose products are `linear`'s."""

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return linear(inputs, self.weight, self.bias)


def onednn_pack(weight: torch.Tensor) -> torch.Tensor:
    """`weight` (out, in) reordered into oneDNN's blocked layout for `onednn_packed_linear`."""
    return torch.ops.mkldnn._reorder_linear_weight(weight.contiguous(), _ONEDNN_PACKING_BATCH)


def onednn_packed_linear(rows: torch.Tensor, packed_weight: torch.Tensor) -> torch.Tensor:
    """rows (N, in) @ weight (out, in)^T with a weight from `onednn_pack`."""
    return torch.ops.mkldnn._linear_pointwise(rows, packed_weight, None, "none", [], "")


__all__ = ["Linear", "linear", "onednn_available", "onednn_pack", "onednn_packed_linear", "rows_times", "uses_onednn"]
