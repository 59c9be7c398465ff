"""The ELMo biLSTM: per direction a multi-layer LSTM with a projected, clipped state (Peters et al. 2018).

`ElmoBiLstm` runs both directions of every layer; how the recurrence is computed is chosen by
`config.lstm_implementation` (see `ElmoBiLstm._layer_runner`):

- "reference": the straightforward per-step loop, autograd through it; the definition the others are tested
  against.
- "fast": feature-major products with the weights in their stored layout, and a hand-written
  backpropagation through time (`_LstmLayerFunction`).
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
from .module_caches import ModuleWithCaches
from .quantization import int8_linear, pack_int8


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
        return tuple((w.data_ptr(), w._version, w.dtype, w.device) for w in weights)

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
            [_onednn_pack(weight.detach()[direction]) for direction in range(2)]
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


# oneDNN's inner product with a prepacked weight (the kernel torch.compile uses for CPU linear layers). The
# batch size it is packed for is a hint for the blocked layout; any number of rows can use the result.
_ONEDNN_PACKING_BATCH = 32
_onednn_usable: bool | None = None


def _onednn_pack(weight: torch.Tensor) -> torch.Tensor:
    return torch.ops.mkldnn._reorder_linear_weight(weight.contiguous(), _ONEDNN_PACKING_BATCH)


def _onednn_linear(rows: torch.Tensor, packed_weight: torch.Tensor) -> torch.Tensor:
    """rows (N, in) @ weight (out, in)^T with a weight from `_onednn_pack`."""
    return torch.ops.mkldnn._linear_pointwise(rows, packed_weight, None, "none", [], "")


def onednn_available() -> bool:
    """Whether this torch build runs oneDNN's packed inner product here (x86 CPU builds do)."""
    global _onednn_usable
    if _onednn_usable is None:
        try:
            weight = torch.arange(12.0).view(3, 4)
            result = _onednn_linear(torch.ones(2, 4), _onednn_pack(weight))
            _onednn_usable = bool(torch.equal(result, torch.ones(2, 4) @ weight.t()))
        except (AttributeError, RuntimeError, NotImplementedError):
            _onednn_usable = False
    return _onednn_usable


def _lstm_recurrence_reference(
    input_gates: torch.Tensor,
    batch_sizes: list[int],
    recurrent_weight: torch.Tensor,
    projection_weight: torch.Tensor,
    state: tuple[torch.Tensor, torch.Tensor],
    cell_clip: float | None,
    proj_clip: float | None,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """The straightforward recurrence (`ElmoBiLstm.fast = False`), kept as the reference for the fast path.

    Args:
        input_gates: (2, T, B, 4C) input products plus bias for every step, time-major, rows sorted by
            decreasing length so that the rows still running at step t are the first `batch_sizes[t]`.
        recurrent_weight: (2, 4C, P); projection_weight: (2, P, C).
        state: (h (2, B, P), c (2, B, C)) to start from.

    Returns: (2, T, B, P) outputs, exactly zero past each row's length, and the final (h, c): each row
    holds the state after its own last step. Nothing is modified in place, so autograd works.
    """
    h, c = state
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
        outputs.extend([outputs[0].new_zeros(outputs[0].shape)] * missing)
    return torch.stack(outputs, dim=1), (h, c)


# The fast path works on "feature-major" tensors: gates (2, 4C, N), cells (2, C, B), outputs (2, T, P, B),
# so that every product is weight-first, W (out, in) @ x (in, N), with the weights in their stored
# layout and a row-major destination (the faster orientation for these thin products: benchmarks/RESULTS.md,
# "Kernel choices"). Input products of all steps are computed up front, in chunks of steps holding at most
# this many gate values, so that long batches do not need one huge buffer; a chunk of a few steps already
# runs at full matrix-multiply speed.
_GATE_BUFFER_ELEMENTS = 1 << 22

def _input_chunk_steps(num_steps: int, cell_dim: int, batch: int) -> int:
    """Steps whose input products are computed together: at most `_GATE_BUFFER_ELEMENTS` gate values."""
    return max(1, min(num_steps, _GATE_BUFFER_ELEMENTS // (2 * 4 * cell_dim * batch)))


def _lstm_recurrence(
    inputs: torch.Tensor,
    batch_sizes: list[int],
    input_weight: torch.Tensor,
    bias: torch.Tensor,
    recurrent_weight: torch.Tensor,
    projection_weight: torch.Tensor,
    state: tuple[torch.Tensor, torch.Tensor],
    cell_clip: float | None,
    proj_clip: float | None,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """Run both directions of one LSTM layer over all steps (the fast path, same numbers as the reference).

    Shapes (feature-major; B rows sorted by decreasing length, so the rows still running at step t
    are the first `batch_sizes[t]`):
        inputs: (2, I, T * B), column t * B + b is row b at step t.
        input_weight (2, 4C, I), bias (2, 4C, 1), recurrent_weight (2, 4C, P), projection_weight (2, P, C).
        state: h (2, P, B), c (2, C, B) before the first step; not modified.

    Returns: outputs viewed as (2, T, P, B), exactly zero past each row's length, and the final
    (h (2, P, B), c (2, C, B)) of every row after its own last step.

    Every step works in place on preallocated buffers. With autograd the same forward runs inside
    `_LstmLayerFunction`, which keeps what backpropagation through time needs and computes the weight
    gradients as one product over all steps.
    """
    tensors = (inputs, input_weight, bias, recurrent_weight, projection_weight, *state)
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        outputs, cell = _LstmLayerFunction.apply(*tensors, tuple(batch_sizes), cell_clip, proj_clip)
    else:
        outputs, cell, _ = _lstm_forward(*tensors, batch_sizes, cell_clip, proj_clip, save=False)
    return outputs, (_last_outputs(outputs, batch_sizes), cell)


def _product_into(destination: torch.Tensor, weight: torch.Tensor, columns: torch.Tensor) -> None:
    """``destination = weight @ columns`` per direction: (2, out, N) = (2, out, in) @ (2, in, N).
    With one column a matrix-vector product per direction: the batched product treats N = 1 as a general
    matrix product, which streams weights from memory (batch 1) more slowly."""
    if columns.shape[-1] == 1:
        for direction in range(2):
            torch.mv(weight[direction], columns[direction, :, 0], out=destination[direction, :, 0])
    else:
        torch.bmm(weight, columns, out=destination)


def _rows_ending_at(batch_sizes: list[int], t: int) -> slice:
    """The (sorted) rows whose last step is step t: running at t, not at t + 1 (possibly none)."""
    following = batch_sizes[t + 1] if t + 1 < len(batch_sizes) else 0
    return slice(following, batch_sizes[t])


def _lstm_forward(
    inputs, input_weight, bias, recurrent_weight, projection_weight, h0, c0, batch_sizes, cell_clip, proj_clip, save,
):
    """The in-place recurrence behind `_lstm_recurrence`; with `save`, also returns what the backward needs:
    every step's gate activations (2, 4C, T * B), the (clipped) cells and their tanh (2, C, T * B), where the
    cell clip passed the gradient (bool, 2, C, T * B) and, with a projection clip, pre-clip outputs (2, T, P, B).

    Every step computes all B columns, also those of rows that have already ended: MKL runs these thin
    products no faster with fewer columns (benchmarks/RESULTS.md, "Kernel choices"), and element-wise
    work on a whole contiguous (2, 4C, B) block is a few long passes instead of many short rows. The ended rows'
    columns are then ignored: their outputs are set to zero, each row's final cell is taken at its own
    last step, and the backward masks them out.

    With `save` the input products of all steps are one matrix product into the kept gate buffer; without,
    they are computed in chunks of steps (see `_input_chunk_steps`) to bound inference memory. The two
    can round differently (by about 1e-7): both are tested against the reference loop.
    """
    num_steps, batch = len(batch_sizes), h0.shape[-1]
    cell_dim, projection_dim = c0.shape[1], h0.shape[1]
    run_steps = sum(1 for active in batch_sizes if active)  # all-padding steps come last
    chunk_steps = num_steps if save else _input_chunk_steps(num_steps, cell_dim, batch)
    outputs = inputs.new_empty(2, num_steps, projection_dim, batch)
    outputs[:, run_steps:] = 0
    if save:  # written step by step; the all-padding steps at the end stay zero
        cells_all = inputs.new_empty(2, cell_dim, num_steps * batch)
        tanh_all = inputs.new_empty(2, cell_dim, num_steps * batch)
        for kept in (cells_all, tanh_all):
            kept[:, :, run_steps * batch :] = 0
        inside_cell_clip = torch.ones_like(cells_all, dtype=torch.bool) if cell_clip else None
        hidden_all = torch.zeros_like(outputs) if proj_clip else None
    else:
        cells_all = tanh_all = inside_cell_clip = hidden_all = None
    cell = c0.clone(memory_format=torch.contiguous_format)
    final_cell = torch.empty_like(cell)
    previous = h0
    for t in range(run_steps):
        active = batch_sizes[t]
        if t % chunk_steps == 0:
            # Input products (plus bias) of the next chunk of steps in one large matrix product.
            last = min(num_steps if save else run_steps, t + chunk_steps)
            chunk = torch.baddbmm(bias, input_weight, inputs[:, :, t * batch : last * batch])
            chunk_start = t
        kept_gates = chunk[:, :, (t - chunk_start) * batch : (t - chunk_start + 1) * batch]
        # The step's gates in a contiguous block: element-wise kernels run one long pass over each gate's
        # (C, B) values instead of C short rows of the chunk buffer (B values each).
        gates = previous.new_empty(2, 4 * cell_dim, batch)
        _product_into(gates, recurrent_weight, previous)
        gates += kept_gates
        _activate_gates_(gates, dim=1)
        if save:
            kept_gates.copy_(gates)
        input_gate, forget_gate, cell_input, output_gate = gates.chunk(4, dim=1)
        step = slice(t * batch, (t + 1) * batch)
        cell.mul_(forget_gate).addcmul_(input_gate, cell_input)
        if cell_clip:
            if save:
                torch.le(cell.abs(), cell_clip, out=inside_cell_clip[:, :, step])
            cell.clamp_(-cell_clip, cell_clip)
        if save:
            cells_all[:, :, step] = cell
        ending = _rows_ending_at(batch_sizes, t)
        final_cell[:, :, ending] = cell[:, :, ending]
        if save:
            projected = torch.mul(torch.tanh(cell, out=tanh_all[:, :, step]), output_gate)
        else:
            projected = torch.tanh(cell).mul_(output_gate)
        hidden = outputs[:, t]
        _product_into(hidden, projection_weight, projected)
        if active < batch:
            hidden[:, :, active:] = 0
        if hidden_all is not None:
            hidden_all[:, t] = hidden
        if proj_clip:
            hidden.clamp_(-proj_clip, proj_clip)
        previous = hidden
    if not save:
        return outputs, final_cell, None
    return outputs, final_cell, (chunk, cells_all, tanh_all, inside_cell_clip, hidden_all)


# The oneDNN path runs one direction after the other, and each direction's input products go into one buffer
# of this many gate values (or one step's, if more), reused by every chunk of steps and both directions: 384
# rows of the standard model's 4 x 4096 gates (24 MB), where the input product reaches full speed
# (benchmarks/RESULTS.md, "Kernel choices").
_ONEDNN_GATE_BUFFER_ELEMENTS = 384 * 4 * 4096


def _onednn_chunk_rows(batch_sizes: list[int], cell_dim: int) -> int:
    """Rows of the largest chunk of one direction's input products that `_lstm_forward_onednn` computes at once."""
    batch = max(batch_sizes, default=0)
    run_steps = sum(1 for active in batch_sizes if active)
    chunk_steps = max(1, min(run_steps, _ONEDNN_GATE_BUFFER_ELEMENTS // (4 * cell_dim * max(batch, 1))))
    return min(chunk_steps * batch, sum(batch_sizes))


@torch.no_grad()
def _lstm_forward_onednn(
    layer_input: torch.Tensor,
    batch_sizes: list[int],
    layer: ElmoBiLstmLayer,
    bias: torch.Tensor,
    state: tuple[torch.Tensor, torch.Tensor],
    cell_clip: float | None,
    proj_clip: float | None,
    keep_packed: bool = True,
    gate_buffer: torch.Tensor | None = None,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """Inference recurrence of one layer (both directions) with oneDNN's packed per-step products.

    Batch-major shapes: `layer_input` (2, T, B, I), rows sorted by decreasing length (the rows still running
    at step t are the first `batch_sizes[t]`), `bias` (2, 4C) with the forget-gate offset, `state` h (2, B, P)
    and c (2, B, C). Returns outputs (2, T, B, P), exactly zero past each row's length, and the final
    (h, c) of every row after its own last step. Same numbers as `_lstm_recurrence_reference` up to
    float32 rounding (the products sum in another order). `gate_buffer`, if given, is a 1-D tensor of at least
    4C * `_onednn_chunk_rows(batch_sizes, C)` elements that the input products are written into (otherwise
    one is allocated for the call).

    The directions run one after the other: one direction's per-step weights (40 MB at the standard size)
    stay in the last-level cache from step to step, where both directions' (80 MB) did not.
    """
    num_steps, batch, input_dim = layer_input.shape[1], layer_input.shape[2], layer_input.shape[3]
    cell_dim = layer.cell_dim
    # At batch 1 every per-step product is a matrix-vector product bound by reading the weight from memory:
    # there the (in, out)-ordered copies of `single_column_weights` stream faster than the oneDNN-packed
    # weight, and `addmv` adds the input part in the same pass. Larger batches use the packed weights.
    if batch == 1:
        single_column, recurrent, projection = layer.single_column_weights(), None, None
    else:
        single_column = None
        recurrent, projection = layer.packed_weights(keep=keep_packed)
    run_steps = sum(1 for active in batch_sizes if active)  # input products past them are never read
    outputs = layer_input.new_zeros(2, num_steps, batch, layer.projection_weight.shape[1])
    h = state[0].clone(memory_format=torch.contiguous_format)
    c = state[1].clone(memory_format=torch.contiguous_format)
    starts_from_zero = not bool(h.any())
    # Input products of a chunk of one direction's steps in one product, rows @ W^T: (rows, 4C), so each
    # step's input part is a contiguous (active, 4C) block (adding a transposed view of a weight-first product
    # to every step's recurrent part cost more than the whole product). Only the
    # running rows of each step are multiplied (packed one step after another, as in a PackedSequence):
    # a batch of 5-60-word sentences has ~45% padding.
    if batch_sizes[:run_steps] == [batch] * run_steps:
        packed_rows = layer_input.reshape(2, num_steps * batch, input_dim)
    else:
        packed_rows = torch.cat([layer_input[:, t, :active] for t, active in enumerate(batch_sizes[:run_steps])], dim=1)
    first_rows = [0]  # where each step's rows start in `packed_rows`
    for active in batch_sizes[:run_steps]:
        first_rows.append(first_rows[-1] + active)
    chunk_rows = _onednn_chunk_rows(batch_sizes, cell_dim)  # as many rows as the chunk's steps would unpacked
    if gate_buffer is None:
        gate_buffer = layer_input.new_empty(chunk_rows * 4 * cell_dim)
    gates = layer_input.new_empty(batch, 4 * cell_dim)
    for direction in range(2):
        h_d, c_d, outputs_d = h[direction], c[direction], outputs[direction]
        input_weight_t = layer.input_weight[direction].t()
        chunk_end = 0  # first step past the current chunk
        for t, active in enumerate(batch_sizes):
            if active == 0:
                break
            if t == chunk_end:
                chunk_end = t + 1
                while chunk_end < run_steps and first_rows[chunk_end + 1] - first_rows[t] <= chunk_rows:
                    chunk_end += 1
                step_rows = packed_rows[direction, first_rows[t] : first_rows[chunk_end]]
                chunk = gate_buffer[: step_rows.shape[0] * 4 * cell_dim].view(step_rows.shape[0], 4 * cell_dim)
                torch.addmm(bias[direction], step_rows, input_weight_t, out=chunk)
                chunk_start = first_rows[t]
            first_row = first_rows[t] - chunk_start
            step_gates = gates[:active]
            input_part = chunk[first_row : first_row + active]
            if t == 0 and starts_from_zero:  # the recurrent product of a zero state is exactly zero
                step_gates.copy_(input_part)
            elif single_column is not None:
                torch.addmv(input_part[0], single_column[0][direction], h_d[0], out=step_gates[0])
            else:
                torch.add(input_part, _onednn_linear(h_d[:active], recurrent[direction]), out=step_gates)
            projected = _cell_step_(step_gates, c_d[:active], cell_clip)
            hidden = outputs_d[t, :active]
            if single_column is not None:
                torch.mv(single_column[1][direction], projected[0], out=hidden[0])
            else:
                hidden.copy_(_onednn_linear(projected, projection[direction]))
            if proj_clip:
                hidden.clamp_(-proj_clip, proj_clip)
            h_d[:active] = hidden
    return outputs, (h, c)


def _activate_gates_(gates: torch.Tensor, dim: int) -> None:
    """In place: the four gate blocks i, f, g, o along `dim` (4C values) -> sigmoid, sigmoid, tanh, sigmoid."""
    input_and_forget, cell_input, output_gate = gates.split([gates.shape[dim] // 2] + [gates.shape[dim] // 4] * 2, dim)
    torch.sigmoid_(input_and_forget)
    torch.tanh_(cell_input)
    torch.sigmoid_(output_gate)


def _cell_step_(gates: torch.Tensor, cell: torch.Tensor, cell_clip: float | None) -> torch.Tensor:
    """One step's element-wise LSTM update, batch-major and in place: `gates` (rows, 4C) pre-activations i, f,
    g, o and `cell` (rows, C) become the activations and the new (clipped) cell; returns o * tanh(cell), the
    input of the projection."""
    _activate_gates_(gates, dim=-1)
    input_gate, forget_gate, cell_input, output_gate = gates.chunk(4, dim=-1)
    cell.mul_(forget_gate).addcmul_(input_gate, cell_input)
    if cell_clip:
        cell.clamp_(-cell_clip, cell_clip)
    return output_gate * torch.tanh(cell)


@torch.no_grad()
def _lstm_forward_int8(layer_input, batch_sizes, weights, bias, state, cell_clip, proj_clip):
    """`_lstm_forward_onednn`'s contract with int8 products (`weights`: `ElmoBiLstmLayer.int8_weights()`)."""
    num_steps, batch = layer_input.shape[1], layer_input.shape[2]
    h = state[0].clone(memory_format=torch.contiguous_format)
    c = state[1].clone(memory_format=torch.contiguous_format)
    outputs = layer_input.new_zeros(2, num_steps, batch, h.shape[-1])
    for direction in range(2):
        input_weight, recurrent_weight, projection_weight = weights[direction]
        rows = layer_input[direction].reshape(num_steps * batch, -1)
        input_gates = (int8_linear(rows, input_weight) + bias[direction]).view(num_steps, batch, -1)
        for t, active in enumerate(batch_sizes):
            if active == 0:
                break
            gates = input_gates[t, :active] + int8_linear(h[direction, :active], recurrent_weight)
            hidden = int8_linear(_cell_step_(gates, c[direction, :active], cell_clip), projection_weight)
            if proj_clip:
                hidden.clamp_(-proj_clip, proj_clip)
            h[direction, :active] = hidden
            outputs[direction, t, :active] = hidden
    return outputs, (h, c)


class _LstmLayerFunction(torch.autograd.Function):
    """`_lstm_forward` with a hand-written backpropagation through time.

    The loop runs only the per-step work (element-wise gate gradients and the recurrent and projection
    products for the state gradients); the weight and input gradients are single large products over
    all steps afterwards.
    """

    @staticmethod
    def forward(ctx, inputs, input_weight, bias, recurrent_weight, projection_weight, h0, c0, batch_sizes,
                cell_clip, proj_clip):
        outputs, cell, (gates, cells, tanh_cells, inside_cell_clip, hidden) = _lstm_forward(
            inputs, input_weight, bias, recurrent_weight, projection_weight, h0, c0, batch_sizes,
            cell_clip, proj_clip, save=True,
        )
        ctx.save_for_backward(
            inputs, input_weight, recurrent_weight, projection_weight, h0, c0, outputs, gates, cells, tanh_cells,
            inside_cell_clip, hidden,
        )
        ctx.settings = (batch_sizes, cell_clip, proj_clip)
        return outputs, cell

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_outputs, grad_cell):
        (inputs, input_weight, recurrent_weight, projection_weight, h0, c0, outputs, gates, cells, tanh_cells,
         inside_cell_clip, hidden) = ctx.saved_tensors
        batch_sizes, cell_clip, proj_clip = ctx.settings
        num_steps, batch = len(batch_sizes), h0.shape[-1]
        cell_dim, projection_dim = c0.shape[1], h0.shape[1]
        run_steps = sum(1 for active in batch_sizes if active)
        inside_proj_clip = hidden.abs() <= proj_clip if proj_clip else None
        recurrent_t = recurrent_weight.transpose(1, 2).contiguous()
        projection_t = projection_weight.transpose(1, 2).contiguous()
        grad_gates = gates.new_zeros(2, 4 * cell_dim, num_steps * batch)
        grad_hidden = gates.new_zeros(2, projection_dim, num_steps * batch)  # before the projection clip
        grad_h = h0.new_zeros(2, projection_dim, batch)  # recurrent part of d loss / d h_t
        # d loss / d c_t, carried backwards. A row's final-cell gradient joins at the row's last step; until
        # then (rows that have ended) its columns stay exactly zero through the whole-block operations below,
        # because their output gradients are zeroed.
        grad_c = torch.zeros_like(grad_cell, memory_format=torch.contiguous_format)
        d_projected = c0.new_empty(2, cell_dim, batch)
        factor = c0.new_empty(2, cell_dim, batch)
        for t in reversed(range(run_steps)):
            active = batch_sizes[t]
            ending = _rows_ending_at(batch_sizes, t)
            grad_c[:, :, ending] += grad_cell[:, :, ending]
            step = slice(t * batch, (t + 1) * batch)
            d_hidden = grad_hidden[:, :, step]
            torch.add(grad_outputs[:, t], grad_h, out=d_hidden)
            if active < batch:
                d_hidden[:, :, active:] = 0
            if inside_proj_clip is not None:
                d_hidden.mul_(inside_proj_clip[:, t])
            _product_into(d_projected, projection_t, d_hidden)
            step_gates = gates[:, :, step]
            input_gate, forget_gate, cell_input, output_gate = step_gates.chunk(4, dim=1)
            tanh_cell = tanh_cells[:, :, step]
            # d cell += d projected * o * (1 - tanh(cell)^2), then through the cell clip
            torch.mul(tanh_cell, tanh_cell, out=factor).neg_().add_(1).mul_(output_gate)
            grad_c.addcmul_(d_projected, factor)
            if inside_cell_clip is not None:
                grad_c.mul_(inside_cell_clip[:, :, step])
            # d gates = derivative of each activation (x (1 - x) for the sigmoids, 1 - x^2 for tanh) times
            # d cell * g, d cell * previous cell, d cell * i and d projected * tanh(cell).
            d_gates = grad_gates[:, :, step]
            torch.mul(step_gates, step_gates, out=d_gates)
            torch.sub(step_gates, d_gates, out=d_gates)
            d_input, d_forget, d_cell_input, d_output = d_gates.chunk(4, dim=1)
            d_cell_input.sub_(cell_input).add_(1)
            previous_cell = cells[:, :, step.start - batch : step.start] if t else c0
            d_input.mul_(cell_input)
            d_forget.mul_(previous_cell)
            d_cell_input.mul_(input_gate)
            d_gates[:, : 3 * cell_dim].view(2, 3, cell_dim, batch).mul_(grad_c.unsqueeze(1))
            d_output.mul_(tanh_cell).mul_(d_projected)
            grad_c.mul_(forget_gate)
            _product_into(grad_h, recurrent_t, d_gates)
        needs = ctx.needs_input_grad
        # The weight and input gradients: one product over all steps each.
        grad_inputs = torch.bmm(input_weight.transpose(1, 2), grad_gates) if needs[0] else None
        grad_input_weight = torch.bmm(grad_gates, inputs.transpose(1, 2)) if needs[1] else None
        grad_bias = grad_gates.sum(dim=-1, keepdim=True) if needs[2] else None
        grad_recurrent_weight = None
        if needs[3]:
            previous_hidden = torch.cat(
                [h0, outputs[:, :-1].permute(0, 2, 1, 3).reshape(2, projection_dim, (num_steps - 1) * batch)], dim=-1
            )
            grad_recurrent_weight = torch.bmm(grad_gates, previous_hidden.transpose(1, 2))
        grad_projection_weight = None
        if needs[4]:
            projected = gates[:, 3 * cell_dim :] * tanh_cells
            grad_projection_weight = torch.bmm(grad_hidden, projected.transpose(1, 2))
        return (grad_inputs, grad_input_weight, grad_bias, grad_recurrent_weight, grad_projection_weight,
                grad_h if needs[5] else None, grad_c if needs[6] else None, None, None, None)


def _last_outputs(outputs: torch.Tensor, batch_sizes: list[int]) -> torch.Tensor:
    """(2, T, P, B) outputs -> (2, P, B): each row's output at its own last step."""
    batch = outputs.shape[-1]
    steps = torch.tensor(batch_sizes, device=outputs.device)
    last = (steps.unsqueeze(1) > torch.arange(batch, device=outputs.device)).sum(dim=0) - 1  # (B,)
    index = last.view(1, 1, 1, batch).expand(2, 1, outputs.shape[2], batch)
    return outputs.gather(1, index).squeeze(1)


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
            inputs: (B, T, P) token representations, zero past each row's length.
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
        batch_sizes = (sorted_lengths.unsqueeze(0) > positions.unsqueeze(1)).sum(dim=1).tolist()
        # Index that reverses every row within its own length; applying it twice is the identity.
        reverse_index = torch.where(
            positions.unsqueeze(0) < sorted_lengths.unsqueeze(1),
            sorted_lengths.unsqueeze(1) - 1 - positions.unsqueeze(0),
            positions.unsqueeze(0),
        ).t()  # (T, B)

        if initial_state is None:
            h = inputs.new_zeros(config.num_lstm_layers, 2, batch, config.projection_dim)
            c = inputs.new_zeros(config.num_lstm_layers, 2, batch, config.lstm_cell_dim)
        else:
            h, c = self._check_state(initial_state, batch, inputs)
            h, c = h[:, :, order], c[:, :, order]

        run = self._layer_runner(inputs)
        # Rows running at step t: those longer than t, or with `skip_final_step` longer than t + 1.
        step_batch_sizes = batch_sizes[1:] + [0] if skip_final_step else batch_sizes
        layer_outputs, (h, c) = run(inputs[order], step_batch_sizes, reverse_index, (h, c), dropout)

        inverse_order = torch.argsort(order)
        index = reverse_index.unsqueeze(-1).expand(steps, batch, config.projection_dim)
        layers = []
        for output in layer_outputs:  # each (2, T, B, P), sorted rows, backward direction reversed
            forward_output = output[0]
            backward_output = output[1].gather(0, index)
            both = torch.cat([forward_output, backward_output], dim=-1).transpose(0, 1)
            layers.append(both[inverse_order])
        return layers, (h[:, :, inverse_order], c[:, :, inverse_order])

    def _layer_runner(self, inputs: torch.Tensor):
        """The layer stack `config.lstm_implementation` asks for; each has `_reference_layers`' contract."""
        implementation = self.config.lstm_implementation
        if implementation == "reference":
            return self._reference_layers
        if implementation == "int8":
            return self._int8_layers
        if implementation == "auto" and self._can_use_onednn(inputs):
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
                input_gates, batch_sizes, layer.recurrent_weight, layer.projection_weight, layer_state,
                config.cell_clip, config.proj_clip,
            )

        return self._batch_major_layers(inputs, reverse_index, state, dropout, run_layer)

    def _can_use_onednn(self, inputs: torch.Tensor) -> bool:
        if not (inputs.is_cpu and inputs.dtype == torch.float32):
            return False
        if torch.is_grad_enabled() and (inputs.requires_grad or any(p.requires_grad for p in self.parameters())):
            return False  # training: the fast path's hand-written backward needs its saved activations
        if torch.compiler.is_compiling():
            return False  # inductor cannot lower the prepacked oneDNN product; the MKL path compiles
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
        """Fast layers, same contract as `_reference_layers`; works on feature-major (2, T, P, B) views."""
        config = self.config
        batch, steps, projection_dim = inputs.shape
        h0, c0 = state
        # (B, T, P) -> (T, P, B) feature-major view; the backward direction reads each row reversed.
        forward_inputs = inputs.permute(1, 2, 0)
        backward_inputs = forward_inputs.gather(0, reverse_index.unsqueeze(1).expand_as(forward_inputs))
        layer_input = torch.stack([forward_inputs, backward_inputs])  # (2, T, P, B)
        final_h, final_c, layer_outputs = [], [], []
        for index, layer in enumerate(self.layers):
            bias = (layer.bias + self._forget_bias_offset(layer.bias)).unsqueeze(-1)
            columns = layer_input.permute(0, 2, 1, 3).reshape(2, projection_dim, steps * batch)
            if batch == 1:
                recurrent_weight, projection_weight = layer.single_column_weights()
            else:
                recurrent_weight, projection_weight = layer.recurrent_weight, layer.projection_weight
            output, (h, c) = _lstm_recurrence(
                columns,
                batch_sizes,
                layer.input_weight,
                bias,
                recurrent_weight,
                projection_weight,
                (h0[index].transpose(1, 2), c0[index].transpose(1, 2)),
                config.cell_clip,
                config.proj_clip,
            )
            if config.use_skip_connections and index > 0:
                output = output + layer_input
            if dropout and self.training:
                output = F.dropout(output, dropout, training=True)
            layer_outputs.append(output.permute(0, 1, 3, 2))  # (2, T, B, P) view
            final_h.append(h.transpose(1, 2))
            final_c.append(c.transpose(1, 2))
            layer_input = output
        return layer_outputs, (torch.stack(final_h), torch.stack(final_c))

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
