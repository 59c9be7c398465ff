"""Optional int8 dynamic quantisation of the biLSTM weights (inference only, not exact):
`model.set_lstm_implementation("int8")`, or `from_pretrained(..., lstm_implementation="int8")`.

The input, recurrent and projection weights of every LSTM layer and direction are quantised per output
channel to int8 (symmetric); activations are quantised per call to 7 bits (dynamic quantisation, fbgemm/x86
kernels), so that the products are exact integer sums on every CPU: with 8-bit activations fbgemm's AVX2
kernels (CPUs without AVX-512 VNNI) saturate 16-bit intermediate sums and drift several times further.
The weights take a quarter of the memory traffic, which is what limits batch 1. Outputs drift
from fp32 (see benchmarks/RESULTS.md for cosine and max abs figures), and since each call quantises the
activations of its whole batch, a sentence's vectors also depend slightly on the other sentences of its
batch (up to ~3e-2 on the shipped model), unlike fp32. Weights changed after quantising are quantised again
on the next call.

The int8 weights are never saved (`save_pretrained` writes the fp32 ones, and no setting): the choice is the
loader's. For the bf16 mode no helper is needed: `model.to(torch.bfloat16)`.
"""

from __future__ import annotations

import warnings

import torch


def pack_int8(weight: torch.Tensor):
    """An (out, in) float weight -> fbgemm packed int8 linear weight, symmetric per-channel scales."""
    weight = weight.detach().contiguous().float()
    scales = (weight.abs().amax(dim=1).clamp(min=1e-12) / 127.0).double()
    zero_points = torch.zeros(weight.shape[0], dtype=torch.long)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # quantized tensor creation is marked deprecated
        quantized = torch.quantize_per_channel(weight, scales, zero_points, 0, torch.qint8)
    return torch.ops.quantized.linear_prepack(quantized, None)


def int8_linear(rows: torch.Tensor, packed_weight) -> torch.Tensor:
    """rows (N, in) @ weight (out, in)^T with a weight from `pack_int8`, the rows quantised for this call."""
    # Activations get 7 bits (reduce_range): fbgemm's AVX2 kernels (no VNNI) add pairs of u8 x s8 products
    # in 16-bit lanes, which saturates with 8-bit activations and silently changes results on those CPUs.
    # 2 * 127 * 127 fits, so every kernel then returns the exact integer sums.
    return torch.ops.quantized.linear_dynamic(rows.contiguous(), packed_weight, reduce_range=True)


__all__ = ["int8_linear", "pack_int8"]
