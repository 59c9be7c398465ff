"""Optional int8 dynamic quantisation of the biLSTM weights (inference only, not exact).

    from hf_elmo.quantization import quantize_lstm_int8
    quantize_lstm_int8(model)          # model: ElmoModel or any model holding one

The input, recurrent and projection weights of every LSTM layer and direction are quantised per output
channel to int8 (symmetric); activations are quantised per call to 7 bits (dynamic quantisation, fbgemm/x86
kernels), so that the products are exact integer sums on every CPU: with 8-bit activations fbgemm's AVX2
kernels (CPUs without AVX-512 VNNI) saturate 16-bit intermediate sums and drift several times further. The weights take a quarter of the memory traffic, which is what limits batch 1. Outputs drift
from fp32 (see benchmarks/RESULTS.md for cosine and max abs figures), and since each call quantises the
activations of its whole batch, a sentence's vectors also depend slightly on the other sentences of its
batch (up to ~3e-2 on the shipped model), unlike fp32. Weights changed after quantising are quantised again
on the next call. The int8 weights are not saved: `save_pretrained` writes the fp32 ones, and a loaded model
runs in fp32 until quantised again. `dequantize_lstm(model)` goes back. For the bf16 mode no helper is
needed: `model.to(torch.bfloat16)`.
"""

from __future__ import annotations

import warnings
from functools import partial

import torch
import torch.nn.functional as F


def _encoder(model):
    return getattr(model, getattr(model, "base_model_prefix", "elmo"), model)


def _pack(weight: torch.Tensor):
    """An (out, in) float weight -> fbgemm packed int8 linear weight, per-channel scales."""
    weight = weight.detach().contiguous().float()
    scales = (weight.abs().amax(dim=1).clamp(min=1e-12) / 127.0).double()
    zero_points = torch.zeros(weight.shape[0], dtype=torch.long)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # quantized tensor creation is marked deprecated
        quantized = torch.quantize_per_channel(weight, scales, zero_points, 0, torch.qint8)
    return torch.ops.quantized.linear_prepack(quantized, None)


def quantize_lstm_int8(model) -> None:
    """Run `model`'s biLSTM with int8 weights from now on (CPU, float32 model; eval / no-grad use only)."""
    bilstm = _encoder(model).bilstm
    packed: dict = {}
    _repack_if_changed(bilstm, packed)
    bilstm.layer_runner = partial(_int8_layers, bilstm, packed)


def _weights_key(bilstm) -> tuple:
    """Changes when any LSTM weight is replaced or updated in place."""
    return tuple(
        (w.data_ptr(), w._version)
        for layer in bilstm.layers
        for w in (layer.input_weight, layer.recurrent_weight, layer.projection_weight)
    )


def _repack_if_changed(bilstm, packed: dict) -> None:
    key = _weights_key(bilstm)
    if packed.get("key") != key:
        packed["layers"] = [
            [tuple(_pack(w[d]) for w in (layer.input_weight, layer.recurrent_weight, layer.projection_weight))
             for d in range(2)]
            for layer in bilstm.layers
        ]
        packed["key"] = key


def dequantize_lstm(model) -> None:
    _encoder(model).bilstm.layer_runner = None


def _linear(x: torch.Tensor, packed) -> torch.Tensor:
    # Activations get 7 bits (reduce_range): fbgemm's AVX2 kernels (no VNNI) add pairs of u8 x s8 products
    # in 16-bit lanes, which saturates with 8-bit activations and silently changes results on those CPUs.
    # 2 * 127 * 127 fits, so every kernel then returns the exact integer sums.
    return torch.ops.quantized.linear_dynamic(x.contiguous(), packed, reduce_range=True)


def _int8_layers(bilstm, packed, inputs, batch_sizes, reverse_index, state, dropout):
    """`ElmoBiLstm._reference_layers` with int8 products; same contract (outputs (2, T, B, P) per layer)."""
    if torch.is_grad_enabled() and inputs.requires_grad:
        raise RuntimeError("the int8 biLSTM is for inference: run it under torch.no_grad()")
    if inputs.dtype != torch.float32:
        raise TypeError(f"the int8 biLSTM runs float32 models, this one computes in {inputs.dtype}: model.float() first")
    _repack_if_changed(bilstm, packed)
    config = bilstm.config
    batch, steps, _ = inputs.shape
    h_all, c_all = (s.clone() for s in state)
    forward_inputs = inputs.transpose(0, 1)
    backward_inputs = forward_inputs.gather(0, reverse_index.unsqueeze(-1).expand_as(forward_inputs))
    layer_input = torch.stack([forward_inputs, backward_inputs])  # (2, T, B, P)
    layer_outputs = []
    for index, layer in enumerate(bilstm.layers):
        bias = layer.bias + bilstm._forget_bias_offset(layer.bias)
        output = layer_input.new_zeros(2, steps, batch, config.projection_dim)
        for direction in range(2):
            input_packed, recurrent_packed, projection_packed = packed["layers"][index][direction]
            gates_in = _linear(layer_input[direction].reshape(steps * batch, -1), input_packed) + bias[direction]
            gates_in = gates_in.view(steps, batch, -1)
            h, c = h_all[index, direction], c_all[index, direction]
            for t, active in enumerate(batch_sizes):
                if active == 0:
                    break
                gates = gates_in[t, :active] + _linear(h[:active], recurrent_packed)
                input_gate, forget_gate, cell_input, output_gate = gates.chunk(4, dim=-1)
                cell = torch.sigmoid(input_gate) * torch.tanh(cell_input) + torch.sigmoid(forget_gate) * c[:active]
                if config.cell_clip:
                    cell = cell.clamp(-config.cell_clip, config.cell_clip)
                hidden = _linear(torch.sigmoid(output_gate) * torch.tanh(cell), projection_packed)
                if config.proj_clip:
                    hidden = hidden.clamp(-config.proj_clip, config.proj_clip)
                c[:active], h[:active] = cell, hidden
                output[direction, t, :active] = hidden
        if config.use_skip_connections and index > 0:
            output = output + layer_input
        if dropout and bilstm.training:
            output = F.dropout(output, dropout, training=True)
        layer_outputs.append(output)
        layer_input = output
    return layer_outputs, (h_all, c_all)


__all__ = ["quantize_lstm_int8", "dequantize_lstm"]
