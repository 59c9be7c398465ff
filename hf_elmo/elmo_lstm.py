"""The ELMo biLSTM: per direction a multi-layer LSTM with a projected, clipped state (Peters et al. 2018).

`ElmoBiLstm` runs both directions of every layer; how the recurrence is computed is chosen by
`config.lstm_implementation` (see `ElmoBiLstm._layer_runner`):

- "reference": the straightforward per-step loop, autograd through it; the definition the others are tested
  against.
- "fast": one row per (step, sentence), every step's products on contiguous blocks of rows (oneDNN's on CPU
  float32, torch's elsewhere), and a hand-written backpropagation through time (elmo_lstm_kernels.py).
- "auto" (default): "fast", except CPU float32 inference, which uses oneDNN's packed per-step products where
  this torch build has them.
- "int8": inference with int8 weights (`quantize_lstm_int8` in quantization.py beside this file).

All of them give the reference's numbers up to float32 rounding (int8: up to its quantisation).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .configuration_elmo import ElmoConfig
from .elmo_lstm_kernels import (
    _lstm_forward_int8,
    _lstm_forward_onednn,
    _lstm_recurrence,
    _onednn_chunk_rows,
)
from .matrix_products import onednn_available, onednn_pack
from .module_caches import ModuleWithCaches, weights_key
from .quantization import pack_int8


class ElmoBiLstmLayer(ModuleWithCaches):
    """One layer of both LSTM directions, weights stacked on a leading axis of size 2 (forward, backward).

    Weights use `nn.Linear`'s (out, in) layout: `input_weight` (2, 4C, input_dim), `recurrent_weight`
    (2, 4C, P), `bias` (2, 4C), `projection_weight` (2, P, C). Gate blocks are ordered i, f, g, o.
    The layout is the one the fast path multiplies with directly (weight-first products W @ x read
    contiguous weight rows), so inference keeps no transposed copies of the weights.
    """

    def __init__(self, input_dim: int, cell_dim: int, projection_dim: int):
        super().__init__()
        self.input_weight = nn.Parameter(torch.empty(2, 4 * cell_dim, input_dim))
        self.recurrent_weight = nn.Parameter(torch.empty(2, 4 * cell_dim, projection_dim))
        self.bias = nn.Parameter(torch.empty(2, 4 * cell_dim))
        self.projection_weight = nn.Parameter(torch.empty(2, projection_dim, cell_dim))
        self._streaming_copies = None  # (key, weights): see `single_column_weights`
        self._packed_copies = None  # (key, weights): see `packed_weights`
        self._int8_copies = None  # (key, weights): see `int8_weights`

    # The inference copies are caches, rebuilt on demand; oneDNN's packed and the int8 ones cannot even be
    # copied or pickled (opaque objects), which would break copy.deepcopy, pickle and torch.save of a used model.
    _caches = ("_streaming_copies", "_packed_copies", "_int8_copies")

    @property
    def cell_dim(self) -> int:
        return self.projection_weight.shape[2]

    def _weights_key(self, with_input_weight: bool = False) -> tuple:
        """Changes whenever the per-step weights (and, if asked, the input weight) are updated in place or
        replaced: keys the kept copies."""
        weights = (self.recurrent_weight, self.projection_weight)
        if with_input_weight:
            weights = (self.input_weight, *weights)
        return weights_key(weights)

    def single_column_weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        """`recurrent_weight` and `projection_weight` for per-step products with one column (batch 1),
        as (2, in, out) contiguous copies viewed (2, out, in). A matrix-vector product streams a weight
        that does not fit in cache from memory, and MKL's kernel streams this memory order faster than
        the stored one (benchmarks/RESULTS.md, "Kernel choices"). Only inference uses them; the copies are kept (not saved) until
        the weights change or are replaced, and cost (4C + C) * P * 2 floats per layer while kept."""
        weights = (self.recurrent_weight, self.projection_weight)
        if torch.is_grad_enabled() and any(w.requires_grad for w in weights):
            return weights
        key = self._weights_key()
        if self._streaming_copies is None or self._streaming_copies[0] != key:
            self._streaming_copies = None  # free the old copies first
            copies = tuple(w.detach().transpose(1, 2).contiguous().transpose(1, 2) for w in weights)
            self._streaming_copies = (key, copies)
        return self._streaming_copies[1]

    def packed_weights(self, keep: bool = True) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """`recurrent_weight` and `projection_weight` of each direction reordered into oneDNN's blocked layout
        for inference at batch > 1 (see `_lstm_forward_onednn`): the kernel reads the weight in the order it
        computes instead of repacking panels at every call (benchmarks/RESULTS.md, "Kernel choices"). With `keep` they are kept (not
        saved) until the weights change, at the memory cost of the weights packed; otherwise they are made
        for this call only. Returns (recurrent, projection), one tensor per direction each."""
        key = self._weights_key()
        if self._packed_copies is not None and self._packed_copies[0] == key:
            return self._packed_copies[1]
        self._packed_copies = None  # free copies of older weights first
        packed = tuple(
            [onednn_pack(weight.detach()[direction]) for direction in range(2)]
            for weight in (self.recurrent_weight, self.projection_weight)
        )
        if keep:
            self._packed_copies = (key, packed)
        return packed

    def int8_weights(self, keep: bool = True) -> list[tuple]:
        """Per direction, the input, recurrent and projection weights as fbgemm int8 linear weights (see
        quantization.py), kept like `packed_weights`; changed weights are quantised again on the next call."""
        key = self._weights_key(with_input_weight=True)
        if self._int8_copies is not None and self._int8_copies[0] == key:
            return self._int8_copies[1]
        self._int8_copies = None
        weights = [
            tuple(pack_int8(w.detach()[direction]) for w in (self.input_weight, self.recurrent_weight, self.projection_weight))
            for direction in range(2)
        ]
        if keep:
            self._int8_copies = (key, weights)
        return weights


def _lstm_recurrence_reference(
    input_gates: torch.Tensor, batch_sizes: list[int], layer: ElmoBiLstmLayer, state: tuple[torch.Tensor, torch.Tensor],
    cell_clip: float | None, proj_clip: float | None,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """The straightforward recurrence (`lstm_implementation="reference"`), the definition the kernels are tested against.

    Args:
        input_gates: (2, T, B, 4C) input products plus bias for every step, time-major, rows sorted by
            decreasing length so that the rows still running at step t are the first `batch_sizes[t]`.
        layer: its recurrent_weight (2, 4C, P) and projection_weight (2, P, C) are read.
        state: (h (2, B, P), c (2, B, C)) to start from.

    Returns: (2, T, B, P) outputs, exactly zero past each row's length, and the final (h, c): each row
    holds the state after its own last step. Nothing is modified in place, so autograd works.
    """
    h, c = state
    recurrent_weight, projection_weight = layer.recurrent_weight, layer.projection_weight
    batch = input_gates.shape[2]
    # Unbinding once keeps autograd from materialising a full-size gradient for every per-step slice.
    step_gates = input_gates.unbind(1)
    outputs = []
    for t, active in enumerate(batch_sizes):
        if active == 0:
            break
        gates = torch.baddbmm(step_gates[t][:, :active], h[:, :active], recurrent_weight.transpose(1, 2))
        input_gate, forget_gate, cell_input, output_gate = gates.chunk(4, dim=-1)
        cell = torch.sigmoid(input_gate) * torch.tanh(cell_input) + torch.sigmoid(forget_gate) * c[:, :active]
        if cell_clip:
            cell = cell.clamp(-cell_clip, cell_clip)
        hidden = torch.bmm(torch.sigmoid(output_gate) * torch.tanh(cell), projection_weight.transpose(1, 2))
        if proj_clip:
            hidden = hidden.clamp(-proj_clip, proj_clip)
        if active < batch:
            h = torch.cat([hidden, h[:, active:]], dim=1)
            c = torch.cat([cell, c[:, active:]], dim=1)
            hidden = F.pad(hidden, (0, 0, 0, batch - active))
        else:
            h, c = hidden, cell
        outputs.append(hidden)
    missing = input_gates.shape[1] - len(outputs)
    if missing:
        outputs.extend([h.new_zeros(h.shape)] * missing)  # (2, B, P), also when no step ran at all
    return torch.stack(outputs, dim=1), (h, c)


class ElmoBiLstm(ModuleWithCaches):
    """Forward and backward multi-layer LSTM language-model encoders (no weight sharing between directions).

    The backward direction reads each sentence reversed within its own length. Layers >= 1 add
    their input to their output when `use_skip_connections` is set.

    `config.lstm_implementation` chooses how the recurrence is computed (`_layer_runner`, module docstring).
    """

    def __init__(self, config: ElmoConfig):
        super().__init__()
        self.config = config
        self._kept_gate_buffer = None  # see `_take_gate_buffer`; a cache, so not copied or pickled (`_caches`)
        self.layers = nn.ModuleList(
            [
                ElmoBiLstmLayer(config.projection_dim, config.lstm_cell_dim, config.projection_dim)
                for _ in range(config.num_lstm_layers)
            ]
        )

    _caches = ("_kept_gate_buffer",)  # scratch memory, see `_take_gate_buffer`

    def _forget_bias_offset(self, like: torch.Tensor) -> torch.Tensor:
        cell_dim = self.config.lstm_cell_dim
        offset = torch.zeros(4 * cell_dim, dtype=like.dtype, device=like.device)
        offset[cell_dim : 2 * cell_dim] = self.config.lstm_forget_bias
        return offset

    def forward(
        self,
        inputs: torch.Tensor,
        lengths: torch.Tensor,
        initial_state: tuple[torch.Tensor, torch.Tensor] | None = None,
        dropout: float = 0.0,
        skip_final_step: bool = False,
    ) -> tuple[list[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
        """
        Args:
            inputs: (B, T, P) token representations; what lies past each row's length is ignored (read as zeros).
            lengths: (B,) number of real positions per row (boundaries included), each >= 1.
            initial_state: optional (h (L, 2, B, P), c (L, 2, B, C)); zeros when omitted.
            dropout: dropout on each layer's output (pretraining only).
            skip_final_step: do not run each row's last step in either direction: the forward LSTMs at
                the row's last position (`</S>`), the backward ones at its first (`<S>`). Those outputs are
                then zero and `final_state` is meaningless; callers that drop the boundary positions save
                1/T of the work.

        Returns:
            `layers`: L tensors of shape (B, T, 2P), `[forward; backward]`, zero past each length;
            `final_state`: (h, c) shaped like `initial_state`, in the caller's row order.
        """
        batch, steps, _ = inputs.shape
        config = self.config
        lengths = lengths.to(inputs.device)
        if batch and int(lengths.min()) < 1:
            raise ValueError("every row needs at least one position: lengths must be >= 1")
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
            h, c = self._check_state(initial_state, batch, inputs)
            h, c = h[:, :, order], c[:, :, order]

        # Zeros past each length whatever the caller left there: a NaN or inf would reach the weight gradients.
        sorted_inputs = inputs[order].masked_fill_(~running.unsqueeze(-1), 0)
        run = self._layer_runner(sorted_inputs, (h, c))
        # Rows running at step t: those longer than t, or with `skip_final_step` longer than t + 1.
        step_batch_sizes = batch_sizes[1:] + [0] if skip_final_step else batch_sizes
        layer_outputs, (h, c) = run(sorted_inputs, step_batch_sizes, reverse_index, (h, c), dropout)

        inverse_order = torch.argsort(order)
        index = reverse_index.unsqueeze(-1).expand(steps, batch, config.projection_dim)
        layers = []
        for output in layer_outputs:  # each (2, T, B, P), sorted rows, backward direction reversed
            forward_output = output[0]
            backward_output = output[1].gather(0, index)
            both = torch.cat([forward_output, backward_output], dim=-1).transpose(0, 1)
            layers.append(both[inverse_order])
        return layers, (h[:, :, inverse_order], c[:, :, inverse_order])

    def _layer_runner(self, inputs: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]):
        """The layer stack `config.lstm_implementation` asks for; each has `_reference_layers`' contract."""
        implementation = self.config.lstm_implementation
        if implementation == "reference":
            return self._reference_layers
        if implementation == "int8":
            return self._int8_layers
        if implementation == "auto" and self._can_use_onednn(inputs, state):
            return self._onednn_layers
        return self._fast_layers

    def _reference_layers(self, inputs, batch_sizes, reverse_index, state, dropout):
        """Straightforward layers: (B, T, P) sorted inputs -> L outputs (2, T, B, P) and the final state."""
        config = self.config

        def run_layer(layer, layer_input, bias, layer_state):
            steps, batch = layer_input.shape[1], layer_input.shape[2]
            input_gates = torch.baddbmm(
                bias.unsqueeze(1), layer_input.reshape(2, steps * batch, -1), layer.input_weight.transpose(1, 2)
            ).view(2, steps, batch, -1)
            return _lstm_recurrence_reference(
                input_gates, batch_sizes, layer, layer_state, config.cell_clip, config.proj_clip
            )

        return self._batch_major_layers(inputs, reverse_index, state, dropout, run_layer)

    def _can_use_onednn(self, inputs: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor] = ()) -> bool:
        if not (inputs.is_cpu and inputs.dtype == torch.float32):
            return False
        tracked = [inputs, *state, *self.parameters()]
        if torch.is_grad_enabled() and any(t.requires_grad for t in tracked):
            return False  # training: the fast path's hand-written backward needs its saved activations
        if torch.compiler.is_compiling():
            return False  # inductor cannot lower the prepacked oneDNN product; the fast path compiles
        return onednn_available()

    def _onednn_layers(self, inputs, batch_sizes, reverse_index, state, dropout):
        """Inference layers with oneDNN's packed products; same contract as `_reference_layers`."""
        config = self.config
        size = 4 * config.lstm_cell_dim * _onednn_chunk_rows(batch_sizes, config.lstm_cell_dim)
        gate_buffer = self._take_gate_buffer(size, inputs)

        def run_layer(layer, layer_input, bias, layer_state):
            return _lstm_forward_onednn(
                layer_input, batch_sizes, layer, bias, layer_state, config.cell_clip, config.proj_clip,
                keep_packed=config.lstm_keep_inference_copies, gate_buffer=gate_buffer,
            )

        try:
            return self._batch_major_layers(inputs, reverse_index, state, dropout, run_layer)
        finally:
            if config.lstm_keep_inference_copies:
                self._kept_gate_buffer = gate_buffer

    def _int8_layers(self, inputs, batch_sizes, reverse_index, state, dropout):
        """Inference layers with int8 products (see quantization.py); same contract as `_reference_layers`."""
        if torch.is_grad_enabled() and (inputs.requires_grad or any(p.requires_grad for p in self.parameters())):
            raise RuntimeError("the int8 biLSTM is for inference: run it under torch.no_grad()")
        if inputs.dtype != torch.float32 or not inputs.is_cpu:
            raise TypeError(
                f"the int8 biLSTM runs float32 models on the CPU, this one computes in {inputs.dtype} on "
                f"{inputs.device}: model.float() first, or set config.lstm_implementation = 'auto'"
            )
        config = self.config

        def run_layer(layer, layer_input, bias, layer_state):
            weights = layer.int8_weights(keep=config.lstm_keep_inference_copies)
            return _lstm_forward_int8(layer_input, batch_sizes, weights, bias, layer_state, config.cell_clip, config.proj_clip)

        return self._batch_major_layers(inputs, reverse_index, state, dropout, run_layer)

    def _take_gate_buffer(self, size: int, like: torch.Tensor) -> torch.Tensor:
        """The buffer the oneDNN path's input products go into: shared by the layers of a call and, with
        `config.lstm_keep_inference_copies`, kept for the next call (24 MB at the standard size, more only for
        batches over 384 rows): a fresh buffer that size comes from the OS and is zeroed page by page when
        first written, which cost more than the chunk's own product. The kept buffer is taken out of the module
        while a call uses it (one atomic dict operation), so a call running at the same time on another thread
        makes its own instead of writing into the same memory."""
        kept = self.__dict__.pop("_kept_gate_buffer", None)
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
        """The layer stack on batch-major (2, T, B, P) tensors around `run_layer(layer, layer_input, bias, (h, c))`,
        which runs one layer's recurrence: skip connections, dropout and the final states of all layers."""
        h, c = state
        forward_inputs = inputs.transpose(0, 1)  # (T, B, P)
        backward_inputs = forward_inputs.gather(0, reverse_index.unsqueeze(-1).expand_as(forward_inputs))
        layer_input = torch.stack([forward_inputs, backward_inputs])  # (2, T, B, P)
        final_h, final_c, layer_outputs = [], [], []
        for index, layer in enumerate(self.layers):
            bias = layer.bias + self._forget_bias_offset(layer.bias)
            output, (layer_h, layer_c) = run_layer(layer, layer_input, bias, (h[index], c[index]))
            final_h.append(layer_h)
            final_c.append(layer_c)
            if self.config.use_skip_connections and index > 0:
                output = output + layer_input
            if dropout and self.training:
                output = F.dropout(output, dropout, training=True)
            layer_outputs.append(output)
            layer_input = output
        return layer_outputs, (torch.stack(final_h), torch.stack(final_c))

    def _fast_layers(self, inputs, batch_sizes, reverse_index, state, dropout):
        """Fast layers (elmo_lstm_kernels.py), same contract as `_reference_layers`."""
        config = self.config

        def run_layer(layer, layer_input, bias, layer_state):
            steps, batch = layer_input.shape[1], layer_input.shape[2]
            return _lstm_recurrence(
                layer_input.reshape(2, steps * batch, -1), batch_sizes, layer.input_weight, bias,
                layer.recurrent_weight, layer.projection_weight, layer_state, config.cell_clip, config.proj_clip,
            )

        return self._batch_major_layers(inputs, reverse_index, state, dropout, run_layer)

    def _check_state(self, state, batch: int, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        config = self.config
        if not (isinstance(state, (tuple, list)) and len(state) == 2):
            raise ValueError("initial_state must be a pair (h, c)")
        h, c = state
        for name, part in (("h", h), ("c", c)):
            if not isinstance(part, torch.Tensor) or not part.dtype.is_floating_point:
                what = part.dtype if isinstance(part, torch.Tensor) else type(part).__name__
                raise TypeError(f"initial_state {name} must be a floating-point torch.Tensor, got {what}")
        expected_h = (config.num_lstm_layers, 2, batch, config.projection_dim)
        expected_c = (config.num_lstm_layers, 2, batch, config.lstm_cell_dim)
        if tuple(h.shape) != expected_h or tuple(c.shape) != expected_c:
            raise ValueError(
                f"initial_state shapes must be h {expected_h} and c {expected_c}, "
                f"got h {tuple(h.shape)} and c {tuple(c.shape)}"
            )
        if not (bool(torch.isfinite(h).all()) and bool(torch.isfinite(c).all())):
            raise ValueError("initial_state holds NaN or infinite values")
        return h.to(like), c.to(like)
