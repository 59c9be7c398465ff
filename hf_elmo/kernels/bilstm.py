"""The biLSTM on hf-elmo's fast kernels: the layer stack of `bilm_elmo.ElmoBiLstm` computed with

- "fast": one row per (step, sentence), every step's products on contiguous blocks of rows (oneDNN's on CPU
  float32, torch's elsewhere), and a hand-written backpropagation through time (lstm_recurrence.py);
- "auto": "fast", except CPU float32 inference, which uses oneDNN's packed per-step products where this torch
  build has them;
- "int8": inference with int8 weights (quantization.py).

All of them give the plain loop's numbers (bilm_elmo.py) up to float32 rounding (int8: up to its
quantisation). Rows are sorted by decreasing length so that the rows still running at step t are a prefix,
which needs the lengths on the host.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .lstm_recurrence import _lstm_forward_int8, _lstm_forward_onednn, _lstm_recurrence, _onednn_chunk_rows
from .matrix_products import onednn_available, onednn_pack
from .quantization import pack_int8
from .weights_key import weights_key


class LayerCopies:
    """Inference copies of one `ElmoBiLstmLayer`'s weights (batch-1 streaming order, oneDNN-packed, int8),
    each kept until the weights it was made from change (`weights_key`) or the runtime is cleared."""

    def __init__(self, layer):
        self.layer = layer
        self._streaming = None  # (key, weights)
        self._packed = None
        self._int8 = None

    def __getattr__(self, name):  # the kernels read the layer's weights through this object
        return getattr(self.layer, name)

    @property
    def cell_dim(self) -> int:
        return self.layer.projection_weight.shape[2]

    def _key(self, with_input_weight: bool = False) -> tuple:
        layer = self.layer
        weights = (layer.recurrent_weight, layer.projection_weight)
        return weights_key((layer.input_weight, *weights) if with_input_weight else weights)

    def single_column_weights(self, keep: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        """`recurrent_weight` and `projection_weight` as (2, in, out) contiguous copies viewed (2, out, in): MKL's
        matrix-vector kernel streams this memory order faster than the stored one (benchmarks/README.md)."""
        weights = (self.layer.recurrent_weight, self.layer.projection_weight)
        if torch.is_grad_enabled() and any(w.requires_grad for w in weights):
            return weights
        key = self._key()
        if self._streaming is not None and self._streaming[0] == key:
            return self._streaming[1]
        self._streaming = None  # free the old copies first
        copies = tuple(w.detach().transpose(1, 2).contiguous().transpose(1, 2) for w in weights)
        if keep:
            self._streaming = (key, copies)
        return copies

    def packed_weights(self, keep: bool = True) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """`recurrent_weight` and `projection_weight` of each direction in oneDNN's blocked layout."""
        key = self._key()
        if self._packed is not None and self._packed[0] == key:
            return self._packed[1]
        self._packed = None
        packed = tuple(
            [onednn_pack(weight.detach()[direction]) for direction in range(2)]
            for weight in (self.layer.recurrent_weight, self.layer.projection_weight)
        )
        if keep:
            self._packed = (key, packed)
        return packed

    def int8_weights(self, keep: bool = True) -> list[tuple]:
        """Per direction, the input, recurrent and projection weights as fbgemm int8 linear weights."""
        key = self._key(with_input_weight=True)
        if self._int8 is not None and self._int8[0] == key:
            return self._int8[1]
        self._int8 = None
        layer = self.layer
        weights = [
            tuple(pack_int8(w.detach()[direction]) for w in (layer.input_weight, layer.recurrent_weight, layer.projection_weight))
            for direction in range(2)
        ]
        if keep:
            self._int8 = (key, weights)
        return weights


class BiLstmRunner:
    """Runs one `ElmoBiLstm` module's layers on the kernel `implementation` asks for; holds its inference copies
    and the scratch buffer of the input products, all dropped by `clear`."""

    def __init__(self, bilstm, implementation: str, keep_inference_copies: bool = True):
        self.bilstm = bilstm
        self.config = bilstm.config
        self.implementation = implementation
        self.keep_inference_copies = keep_inference_copies
        self.layers = [LayerCopies(layer) for layer in bilstm.layers]
        self._kept_gate_buffer = None

    def __call__(self, inputs, lengths, initial_state=None, dropout: float = 0.0, skip_final_step: bool = False):
        """`ElmoBiLstm.forward`'s contract; with `skip_final_step` each row's last step is not run in either
        direction (the forward LSTMs' `</S>`, the backward ones' `<S>`): those outputs are then zero and
        `final_state` is meaningless."""
        batch, steps, _ = inputs.shape
        config = self.config
        if self.bilstm.training:
            # Weights change between calls in training (a fused optimizer step does not even bump their versions):
            # copies are made for this call only.
            self.clear()
        lengths = lengths.to(inputs.device)
        order = torch.argsort(lengths, descending=True, stable=True)
        sorted_lengths = lengths[order]
        positions = torch.arange(steps, device=inputs.device)
        running = positions.unsqueeze(0) < sorted_lengths.unsqueeze(1)  # (B, T), rows sorted
        batch_sizes = running.sum(dim=0).tolist()
        # Index that reverses every row within its own length; applying it twice is the identity.
        reverse_index = torch.where(running, sorted_lengths.unsqueeze(1) - 1 - positions, positions).t()  # (T, B)

        if initial_state is None:
            h = inputs.new_zeros(config.num_lstm_layers, 2, batch, config.projection_dim)
            c = inputs.new_zeros(config.num_lstm_layers, 2, batch, config.lstm_cell_dim)
        else:
            h, c = initial_state[0][:, :, order], initial_state[1][:, :, order]

        # Zeros past each length whatever the caller left there: a NaN or inf would reach the weight gradients.
        sorted_inputs = inputs[order].masked_fill_(~running.unsqueeze(-1), 0)
        run = self._layer_runner(sorted_inputs, (h, c))
        step_batch_sizes = batch_sizes[1:] + [0] if skip_final_step else batch_sizes
        layer_outputs, (h, c) = run(sorted_inputs, step_batch_sizes, reverse_index, (h, c), dropout)

        inverse_order = torch.argsort(order)
        index = reverse_index.unsqueeze(-1).expand(steps, batch, config.projection_dim)
        layers = []
        for output in layer_outputs:  # each (2, T, B, P), sorted rows, backward direction reversed
            both = torch.cat([output[0], output[1].gather(0, index)], dim=-1).transpose(0, 1)
            layers.append(both[inverse_order])
        return layers, (h[:, :, inverse_order], c[:, :, inverse_order])

    def clear(self) -> None:
        self.layers = [LayerCopies(layer) for layer in self.bilstm.layers]
        self._kept_gate_buffer = None

    def _keeps_copies(self) -> bool:
        return self.keep_inference_copies and not self.bilstm.training

    def _layer_runner(self, inputs: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]):
        if self.implementation == "int8":
            return self._int8_layers
        if self.implementation == "auto" and self._can_use_onednn(inputs, state):
            return self._onednn_layers
        return self._fast_layers

    def _can_use_onednn(self, inputs: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor] = ()) -> bool:
        if not (inputs.is_cpu and inputs.dtype == torch.float32):
            return False
        tracked = [inputs, *state, *self.bilstm.parameters()]
        if torch.is_grad_enabled() and any(t.requires_grad for t in tracked):
            return False  # training: the fast path's hand-written backward needs its saved activations
        if torch.compiler.is_compiling():
            return False  # inductor cannot lower the prepacked oneDNN product; the fast path compiles
        return onednn_available()

    def _onednn_layers(self, inputs, batch_sizes, reverse_index, state, dropout):
        config = self.config
        size = 4 * config.lstm_cell_dim * _onednn_chunk_rows(batch_sizes, config.lstm_cell_dim)
        gate_buffer = self._take_gate_buffer(size, inputs)

        def run_layer(layer, layer_input, bias, layer_state):
            return _lstm_forward_onednn(
                layer_input, batch_sizes, layer, bias, layer_state, config.cell_clip, config.proj_clip,
                keep_packed=self._keeps_copies(), gate_buffer=gate_buffer,
            )

        try:
            return self._batch_major_layers(inputs, reverse_index, state, dropout, run_layer)
        finally:
            if self._keeps_copies():
                self._kept_gate_buffer = gate_buffer

    def _int8_layers(self, inputs, batch_sizes, reverse_index, state, dropout):
        if torch.is_grad_enabled() and (inputs.requires_grad or any(p.requires_grad for p in self.bilstm.parameters())):
            raise RuntimeError("the int8 biLSTM is for inference: run it under torch.no_grad()")
        if inputs.dtype != torch.float32 or not inputs.is_cpu:
            raise TypeError(
                f"the int8 biLSTM runs float32 models on the CPU, this one computes in {inputs.dtype} on "
                f"{inputs.device}: model.float() first, or set_lstm_implementation('auto')"
            )
        config = self.config

        def run_layer(layer, layer_input, bias, layer_state):
            weights = layer.int8_weights(keep=self._keeps_copies())
            return _lstm_forward_int8(layer_input, batch_sizes, weights, bias, layer_state, config.cell_clip, config.proj_clip)

        return self._batch_major_layers(inputs, reverse_index, state, dropout, run_layer)

    def _fast_layers(self, inputs, batch_sizes, reverse_index, state, dropout):
        config = self.config

        def run_layer(layer, layer_input, bias, layer_state):
            steps, batch = layer_input.shape[1], layer_input.shape[2]
            return _lstm_recurrence(
                layer_input.reshape(2, steps * batch, -1), batch_sizes, layer.input_weight, bias,
                layer.recurrent_weight, layer.projection_weight, layer_state, config.cell_clip, config.proj_clip,
            )

        return self._batch_major_layers(inputs, reverse_index, state, dropout, run_layer)

    def _take_gate_buffer(self, size: int, like: torch.Tensor) -> torch.Tensor:
        """The buffer the oneDNN path's input products go into, kept for the next call: a fresh buffer that size
        comes from the OS and is zeroed page by page when first written, which cost more than the chunk's own
        product. A call takes the kept buffer out (one atomic attribute swap), so a call running at the same time
        on another thread makes its own instead of writing into the same memory."""
        kept, self._kept_gate_buffer = self._kept_gate_buffer, None
        if (
            kept is not None and kept.numel() >= size and kept.dtype == like.dtype and kept.device == like.device
            # A buffer made under torch.inference_mode cannot be written outside it (e.g. under no_grad).
            and (torch.is_inference_mode_enabled() or not kept.is_inference())
        ):
            return kept
        del kept  # free a smaller one first
        with torch.inference_mode(False):  # a normal tensor, usable in and outside inference mode
            return torch.empty(size, dtype=like.dtype, device=like.device)

    def _batch_major_layers(self, inputs, reverse_index, state, dropout, run_layer):
        """The layer stack on batch-major (2, T, B, P) tensors around `run_layer(layer, layer_input, bias, (h, c))`:
        skip connections, dropout and the final states of all layers."""
        h, c = state
        forward_inputs = inputs.transpose(0, 1)  # (T, B, P)
        backward_inputs = forward_inputs.gather(0, reverse_index.unsqueeze(-1).expand_as(forward_inputs))
        layer_input = torch.stack([forward_inputs, backward_inputs])  # (2, T, B, P)
        final_h, final_c, layer_outputs = [], [], []
        for index, layer in enumerate(self.layers):
            bias = layer.gate_bias(self.config.lstm_forget_bias)
            output, (layer_h, layer_c) = run_layer(layer, layer_input, bias, (h[index], c[index]))
            final_h.append(layer_h)
            final_c.append(layer_c)
            if self.config.use_skip_connections and index > 0:
                output = output + layer_input
            if dropout and self.bilstm.training:
                output = F.dropout(output, dropout, training=True)
            layer_outputs.append(output)
            layer_input = output
        return layer_outputs, (torch.stack(final_h), torch.stack(final_c))
