"""The fast kernels of the ELMo biLSTM (bilstm.py chooses among them; `bilm_elmo.reference_lstm_step` defines
the numbers).

- `_lstm_recurrence` / `_lstm_forward` / `_LstmLayerFunction`: the fast path, batch-major, in place, with
  a hand-written backpropagation through time (training and inference).
- `_lstm_forward_onednn`: CPU float32 inference with oneDNN's packed per-step products.
- `_lstm_forward_int8`: inference with int8 products (quantization.py).

The two inference paths share their loop (`_inference_steps`) and step (`_lstm_step`, `reference_lstm_step`'s
arguments in its order, one direction at a time); they differ only in the input products and in the kind of weight
the step multiplies with (`_times`). All three share the element-wise update (`_cell_step_`).
"""

from __future__ import annotations

import torch

from .matrix_products import onednn_packed_linear, rows_times
from .quantization import int8_linear

# The fast path works on batch-major tensors with one row per (step, sentence): inputs (2, T * B, I), outputs
# (2, T * B, P), so that each step's rows are one contiguous (B, features) block per direction and the products
# over all steps (input products, weight gradients) are single matrix products over the T * B rows. Products go
# to oneDNN on CPU float32 and to torch's elsewhere (`rows_times`, matrix_products.py). Input products of all
# steps are computed up front, in chunks of steps holding at most this many gate values, so that long batches do
# not need one huge buffer; a chunk of a few steps already runs at full matrix-multiply speed.
# Every step computes all B rows, also those of rows that have already ended: thin products run no faster with
# fewer rows, and element-wise work on whole (2, B, 4C) blocks is a few long passes instead of many short ones.
# The ended rows are then ignored: their outputs are set to zero, each row's final cell is taken at its own last
# step, and the backward masks them out. Training computes the input products of all steps at once, inference in
# chunks; the two round differently (by about 1e-7) and are both tested against the reference loop.
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

    Shapes (batch-major; B rows sorted by decreasing length, so the rows still running at step t
    are the first `batch_sizes[t]`):
        inputs: (2, T * B, I), row t * B + b is sentence b at step t.
        input_weight (2, 4C, I), bias (2, 4C), recurrent_weight (2, 4C, P), projection_weight (2, P, C).
        state: h (2, B, P), c (2, B, C) before the first step; not modified.

    Returns: outputs (2, T, B, P), exactly zero past each row's length, and the final
    (h (2, B, P), c (2, B, C)) of every row after its own last step.

    Every step works in place on preallocated buffers. With autograd the same forward runs inside
    `_LstmLayerFunction`, which keeps what backpropagation through time needs and computes the weight
    gradients as one product over all steps.
    """
    tensors = (inputs, input_weight, bias, recurrent_weight, projection_weight, *state)
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        outputs, cell = _LstmLayerFunction.apply(*tensors, tuple(batch_sizes), cell_clip, proj_clip)
    else:
        outputs, cell, _ = _lstm_forward(*tensors, batch_sizes, cell_clip, proj_clip, save=False)
    outputs = outputs.view(2, len(batch_sizes), -1, outputs.shape[-1])
    return outputs, (_last_outputs(outputs, batch_sizes, state[0]), cell)


def _rows_ending_at(batch_sizes: list[int], t: int) -> slice:
    """The (sorted) rows whose last step is step t: running at t, not at t + 1 (possibly none)."""
    following = batch_sizes[t + 1] if t + 1 < len(batch_sizes) else 0
    return slice(following, batch_sizes[t])


def _lstm_forward(
    inputs, input_weight, bias, recurrent_weight, projection_weight, h0, c0, batch_sizes, cell_clip, proj_clip, save,
):
    """The in-place recurrence behind `_lstm_recurrence`, outputs as (2, T * B, P). With `save` it also returns
    what the backward needs: the gate activations per direction (T * B, 4C), written over the input products of
    all steps (memory that product has just filled: a fresh buffer is faulted in page by page at every step),
    the (clipped) cells and their tanh (2, T * B, C), the cell clip's pass mask and pre-clip outputs; without,
    the input products are computed in chunks of steps (`_input_chunk_steps`) to bound inference memory."""
    num_steps, batch, cell_dim, projection_dim = len(batch_sizes), h0.shape[1], c0.shape[2], h0.shape[2]
    run_steps = sum(1 for active in batch_sizes if active)  # all-padding steps come last
    chunk_steps = run_steps if save else _input_chunk_steps(num_steps, cell_dim, batch)
    outputs = inputs.new_empty(2, num_steps * batch, projection_dim)
    outputs[:, run_steps * batch :] = 0
    cells_all, tanh_all, inside_cell_clip, hidden_all = (
        _buffers_for_backward(outputs, cell_dim, cell_clip, proj_clip) if save else (None,) * 4
    )
    cell = c0.clone(memory_format=torch.contiguous_format)
    final_cell = cell.clone()  # rows that run no step (`skip_final_step` on length 1) keep their initial cell
    gates = inputs.new_empty(2, batch, 4 * cell_dim)  # the step's gates, both directions in one block
    chunk, previous = [inputs.new_empty(0, 4 * cell_dim)] * 2, h0  # (no step runs: nothing to save)
    for t in range(run_steps):
        active = batch_sizes[t]
        if t % chunk_steps == 0:  # input products (plus bias) of the next chunk of steps, one per direction
            chunk_rows = slice(t * batch, min(run_steps, t + chunk_steps) * batch)
            chunk = [rows_times(inputs[d, chunk_rows], input_weight[d], bias[d]) for d in range(2)]
            chunk_start = t
        step = slice(t * batch, (t + 1) * batch)
        in_chunk = slice((t - chunk_start) * batch, (t - chunk_start + 1) * batch)
        for d in range(2):
            torch.add(chunk[d][in_chunk], rows_times(previous[d], recurrent_weight[d]), out=gates[d])
        inside_step_clip = inside_cell_clip[:, step] if inside_cell_clip is not None else None
        projected = _cell_step_(gates, cell, cell_clip, inside_step_clip, tanh_all[:, step] if save else None)
        if save:
            for d in range(2):
                chunk[d][in_chunk] = gates[d]  # the activations
            cells_all[:, step] = cell
        ending = _rows_ending_at(batch_sizes, t)
        final_cell[:, ending] = cell[:, ending]
        hidden = outputs[:, step]
        for d in range(2):
            hidden[d] = rows_times(projected[d], projection_weight[d])
        if active < batch:
            hidden[:, active:] = 0
        if hidden_all is not None:
            hidden_all[:, step] = hidden
        if proj_clip:
            hidden.clamp_(-proj_clip, proj_clip)
        previous = hidden
    return outputs, final_cell, ((chunk, cells_all, tanh_all, inside_cell_clip, hidden_all) if save else None)


def _buffers_for_backward(outputs: torch.Tensor, cell_dim: int, cell_clip, proj_clip) -> tuple:
    """What `_lstm_forward` keeps for the backward besides the gates, written step by step: cells and their tanh
    (2, T * B, C), the cell clip's pass mask and the pre-clip outputs. Rows of the all-padding steps at the end
    are never written, and the backward never reads them."""
    rows = outputs.shape[1]
    cells_all = outputs.new_empty(2, rows, cell_dim)
    tanh_all = outputs.new_empty(2, rows, cell_dim)
    inside_cell_clip = outputs.new_empty(2, rows, cell_dim, dtype=torch.bool) if cell_clip else None
    hidden_all = torch.empty_like(outputs) if proj_clip else None
    return cells_all, tanh_all, inside_cell_clip, hidden_all


# The oneDNN path runs one direction after the other (one direction's per-step weights, 40 MB at the standard
# size, stay in the last-level cache from step to step, where both directions' 80 MB did not). The input
# products of a chunk of one direction's steps are one product, rows @ W^T: (rows, 4C), so each step's input
# part is a contiguous (active, 4C) block (adding a transposed view of a weight-first product to every step's
# recurrent part cost more than the whole product). They go into one buffer of this many gate values (or one
# step's, if more), reused by every chunk of steps and both directions: 384 rows of the standard model's
# 4 x 4096 gates (24 MB), where the input product reaches full speed (benchmarks/RESULTS.md, "Kernel choices").
_ONEDNN_GATE_BUFFER_ELEMENTS = 384 * 4 * 4096


def _onednn_chunk_rows(batch_sizes: list[int], cell_dim: int) -> int:
    """Rows of the largest chunk of one direction's input products that `_lstm_forward_onednn` computes at once."""
    batch = max(batch_sizes, default=0)
    run_steps = sum(1 for active in batch_sizes if active)
    chunk_steps = max(1, min(run_steps, _ONEDNN_GATE_BUFFER_ELEMENTS // (4 * cell_dim * max(batch, 1))))
    return min(chunk_steps * batch, sum(batch_sizes))


def _packed_step_rows(layer_input: torch.Tensor, batch_sizes: list[int], run_steps: int):
    """Only the running rows of each step, one step after another as in a PackedSequence (a batch of
    5-60-word sentences is ~45% padding): (2, rows, I), and where each step's rows start (run_steps + 1)."""
    batch, input_dim = layer_input.shape[2], layer_input.shape[3]
    if batch_sizes[:run_steps] == [batch] * run_steps:
        rows = layer_input.reshape(2, layer_input.shape[1] * batch, input_dim)
    else:
        rows = torch.cat([layer_input[:, t, :active] for t, active in enumerate(batch_sizes[:run_steps])], dim=1)
    first_rows = [0]
    for active in batch_sizes[:run_steps]:
        first_rows.append(first_rows[-1] + active)
    return rows, first_rows


@torch.no_grad()
def _lstm_forward_onednn(
    layer_input: torch.Tensor,
    batch_sizes: list[int],
    layer,
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
    (h, c) of every row after its own last step. `gate_buffer`, if given, is a 1-D tensor of at least
    4C * `_onednn_chunk_rows(batch_sizes, C)` elements for the input products (see the notes above).
    """
    batch, cell_dim = layer_input.shape[2], layer.cell_dim
    run_steps = sum(1 for active in batch_sizes if active)  # input products past them are never read
    packed_rows, first_rows = _packed_step_rows(layer_input, batch_sizes, run_steps)
    chunk_rows = _onednn_chunk_rows(batch_sizes, cell_dim)  # as many rows as the chunk's steps would unpacked
    if gate_buffer is None:
        gate_buffer = layer_input.new_empty(chunk_rows * 4 * cell_dim)

    def input_gates(direction: int):
        """Each running step's (active, 4C) input products plus bias, computed a chunk of steps at a time."""
        input_weight_t = layer.input_weight[direction].t()
        chunk_end = 0  # first step past the current chunk
        for t in range(run_steps):
            if t == chunk_end:
                chunk_end = t + 1
                while chunk_end < run_steps and first_rows[chunk_end + 1] - first_rows[t] <= chunk_rows:
                    chunk_end += 1
                step_rows = packed_rows[direction, first_rows[t] : first_rows[chunk_end]]
                chunk = gate_buffer[: step_rows.shape[0] * 4 * cell_dim].view(step_rows.shape[0], 4 * cell_dim)
                torch.addmm(bias[direction], step_rows, input_weight_t, out=chunk)
                chunk_start = first_rows[t]
            yield chunk[first_rows[t] - chunk_start :][: batch_sizes[t]]

    # At batch 1 every per-step product is a matrix-vector product bound by reading the weight from memory: there
    # the (in, out)-ordered copies of `single_column_weights` stream faster than the oneDNN-packed weights.
    if batch == 1:
        recurrent, projection = layer.single_column_weights(keep_packed)
    else:
        recurrent, projection = layer.packed_weights(keep=keep_packed)
    weights = [(recurrent[direction], projection[direction]) for direction in range(2)]
    return _inference_steps(input_gates, batch_sizes, weights, state, cell_clip, proj_clip)


@torch.no_grad()
def _lstm_forward_int8(layer_input, batch_sizes, weights, bias, state, cell_clip, proj_clip):
    """`_lstm_forward_onednn`'s contract with int8 products (`weights`: `ElmoBiLstmLayer.int8_weights()`)."""
    num_steps, batch = layer_input.shape[1], layer_input.shape[2]

    def input_gates(direction: int):
        # One product over all steps: the activations are quantised per call, so chunks would change the numbers.
        rows = layer_input[direction].reshape(num_steps * batch, -1)
        gates = (int8_linear(rows, weights[direction][0]) + bias[direction]).view(num_steps, batch, -1)
        return (gates[t, :active] for t, active in enumerate(batch_sizes) if active)

    return _inference_steps(input_gates, batch_sizes, [direction[1:] for direction in weights], state, cell_clip,
                            proj_clip)


def _inference_steps(input_gates, batch_sizes, weights, state, cell_clip, proj_clip):
    """The step loop of the inference paths, one direction after the other (one direction's weights stay in the
    last-level cache from step to step): `input_gates(direction)` yields each running step's (active, 4C) input
    products plus bias, `weights[direction]` is the (recurrent, projection) pair `_times` multiplies with. Returns
    outputs (2, T, B, P), exactly zero past each row's length, and the final (h, c) of every row."""
    h = state[0].clone(memory_format=torch.contiguous_format)
    c = state[1].clone(memory_format=torch.contiguous_format)
    outputs = h.new_zeros(2, len(batch_sizes), h.shape[1], h.shape[2])
    gates = h.new_empty(h.shape[1], 4 * c.shape[2])
    starts_from_zero = not bool(h.any())  # the recurrent product of a zero state is exactly zero: skipped
    for direction in range(2):
        recurrent, projection = weights[direction]
        for t, (active, step_input_gates) in enumerate(zip(batch_sizes, input_gates(direction))):
            previous = None if t == 0 and starts_from_zero else h[direction, :active]
            hidden, _ = _lstm_step(step_input_gates, previous, c[direction, :active], recurrent, projection, cell_clip,
                                   proj_clip, gates=gates[:active], hidden=outputs[direction, t, :active])
            h[direction, :active] = hidden
    return outputs, (h, c)


def _lstm_step(input_gates, h, c, recurrent_weight, projection_weight, cell_clip, proj_clip, gates=None, hidden=None):
    """`reference_lstm_step` of one direction, batch-major: `input_gates` (rows, 4C), `h` (rows, P) (None: a zero
    state), `c` (rows, C), updated in place, weights of a kind `_times` takes; the gates and the new h are written
    into `gates` and `hidden` when given. Returns (h, c)."""
    gates = _times(h, recurrent_weight, plus=input_gates, out=gates)
    hidden = _times(_cell_step_(gates, c, cell_clip), projection_weight, out=hidden)
    if proj_clip:
        hidden.clamp_(-proj_clip, proj_clip)
    return hidden, c


def _times(rows, weight, plus=None, out=None) -> torch.Tensor:
    """`plus + rows @ weight^T` (into `out` when given) for the weights the inference paths keep: int8 (`pack_int8`),
    oneDNN-packed (`onednn_pack`), or, for a single row, an (out, in) view of an (in, out)-ordered copy, which MKL's
    matrix-vector product streams fastest (`addmv` adds `plus` in the same pass). `rows` None stands for zeros."""
    if rows is None:
        return plus if out is None else out.copy_(plus)
    if not isinstance(weight, torch.Tensor):
        product = int8_linear(rows, weight)
    elif weight.is_mkldnn:
        product = onednn_packed_linear(rows, weight)
    else:
        out = rows.new_empty(1, weight.shape[0]) if out is None else out
        if plus is None:
            torch.mv(weight, rows[0], out=out[0])
        else:
            torch.addmv(plus[0], weight, rows[0], out=out[0])
        return out
    if plus is not None:
        return torch.add(plus, product, out=out)
    return product if out is None else out.copy_(product)


def _cell_step_(gates, cell, cell_clip, inside_cell_clip=None, tanh_cell=None) -> torch.Tensor:
    """`reference_lstm_step`'s element-wise part, batch-major and in place: `gates` (..., 4C) pre-activations i, f,
    g, o become their activations and `cell` (..., C) the new (clipped) cell; returns o * tanh(cell), the input of
    the projection. The backward's: where the cell clip passed the gradient into `inside_cell_clip`, tanh(cell) into
    `tanh_cell`."""
    cell_dim = cell.shape[-1]
    input_and_forget, cell_input, output_gate = gates.split([2 * cell_dim, cell_dim, cell_dim], dim=-1)
    torch.sigmoid_(input_and_forget)
    torch.tanh_(cell_input)
    torch.sigmoid_(output_gate)
    input_gate, forget_gate = input_and_forget.chunk(2, dim=-1)
    cell.mul_(forget_gate).addcmul_(input_gate, cell_input)
    if cell_clip:
        if inside_cell_clip is not None:
            torch.le(cell.abs(), cell_clip, out=inside_cell_clip)
        cell.clamp_(-cell_clip, cell_clip)
    if tanh_cell is None:
        return torch.tanh(cell).mul_(output_gate)
    return torch.mul(torch.tanh(cell, out=tanh_cell), output_gate)


class _LstmLayerFunction(torch.autograd.Function):
    """`_lstm_forward` with a hand-written backpropagation through time.

    The loop runs only the per-step work (element-wise gate gradients and the recurrent and projection
    products for the state gradients); the weight and input gradients are single large products over
    the rows of all running steps afterwards. The backward writes the gate gradients over the saved gate
    activations and o * tanh(cell) over the saved tanh(cell) (memory already in use, see `_lstm_forward`), so
    it can run once: backward through it a second time (`retain_graph=True`) raises.
    """

    @staticmethod
    def forward(ctx, inputs, input_weight, bias, recurrent_weight, projection_weight, h0, c0, batch_sizes,
                cell_clip, proj_clip):
        outputs, cell, (gates, cells, tanh_cells, inside_cell_clip, hidden) = _lstm_forward(
            inputs, input_weight, bias, recurrent_weight, projection_weight, h0, c0, batch_sizes,
            cell_clip, proj_clip, save=True,
        )
        ctx.save_for_backward(
            inputs, input_weight, recurrent_weight, projection_weight, h0, c0, outputs, *gates, cells, tanh_cells,
            inside_cell_clip, hidden,
        )
        ctx.settings = (batch_sizes, cell_clip, proj_clip)
        ctx.backward_done = False
        return outputs, cell

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_outputs, grad_cell):
        _claim_saved_buffers(ctx)
        (inputs, input_weight, recurrent_weight, projection_weight, h0, c0, outputs, forward_gates, backward_gates,
         cells, tanh_cells, inside_cell_clip, hidden) = ctx.saved_tensors
        gates = (forward_gates, backward_gates)  # per direction (rows, 4C): activations, then gate gradients
        batch_sizes, cell_clip, proj_clip = ctx.settings
        batch, cell_dim, projection_dim = h0.shape[1], c0.shape[2], h0.shape[2]
        run_steps = sum(1 for active in batch_sizes if active)
        running_rows = run_steps * batch  # only these rows are written and read; the padding steps' gradients are 0
        inside_proj_clip = hidden[:, :running_rows].abs() <= proj_clip if proj_clip else None
        grad_hidden = h0.new_empty(2, running_rows, projection_dim)  # before the projection clip
        grad_h = h0.new_zeros(2, batch, projection_dim)  # recurrent part of d loss / d h_t
        # d loss / d c_t, carried backwards. A row's final-cell gradient joins at the row's last step; until
        # then (rows that have ended) it stays exactly zero through the whole-block operations below,
        # because their output gradients are zeroed.
        grad_c = torch.zeros_like(grad_cell, memory_format=torch.contiguous_format)
        d_projected = c0.new_empty(2, batch, cell_dim)
        factor = c0.new_empty(2, batch, cell_dim)
        step_gates = c0.new_empty(2, batch, 4 * cell_dim)  # the step's activations, both directions in one block
        d_gates = torch.empty_like(step_gates)
        for t in reversed(range(run_steps)):
            active = batch_sizes[t]
            ending = _rows_ending_at(batch_sizes, t)
            grad_c[:, ending] += grad_cell[:, ending]
            step = slice(t * batch, (t + 1) * batch)
            d_hidden = grad_hidden[:, step]
            torch.add(grad_outputs[:, step], grad_h, out=d_hidden)
            if active < batch:
                d_hidden[:, active:] = 0
            if inside_proj_clip is not None:
                d_hidden.mul_(inside_proj_clip[:, step])
            for d in range(2):  # d projected = d hidden @ W_projection, and the step's saved activations
                d_projected[d] = rows_times(d_hidden[d], projection_weight[d].t())
                step_gates[d] = gates[d][step]
            forget_gate, output_gate = step_gates[:, :, cell_dim : 2 * cell_dim], step_gates[:, :, 3 * cell_dim :]
            tanh_cell = tanh_cells[:, step]
            # d cell += d projected * o * (1 - tanh(cell)^2), then through the cell clip
            torch.mul(tanh_cell, tanh_cell, out=factor).neg_().add_(1).mul_(output_gate)
            grad_c.addcmul_(d_projected, factor)
            if inside_cell_clip is not None:
                grad_c.mul_(inside_cell_clip[:, step])
            previous_cell = cells[:, step.start - batch : step.start] if t else c0
            _gate_gradients(d_gates, step_gates, previous_cell, tanh_cell, grad_c, d_projected)
            grad_c.mul_(forget_gate)
            tanh_cell.mul_(output_gate)  # the projection's input, for its weight gradient
            for d in range(2):
                gates[d][step] = d_gates[d]
                grad_h[d] = rows_times(d_gates[d], recurrent_weight[d].t())  # d h_(t-1) = d gates @ W_recurrent
        idle = slice(batch_sizes[0] if batch_sizes else 0, None)  # rows that ran no step: c0 went straight out
        grad_c[:, idle] = grad_cell[:, idle]
        needs = ctx.needs_input_grad
        grad_gates = [direction[:running_rows] for direction in gates]
        weight_gradients = _weight_gradients(
            needs, inputs, input_weight, h0, outputs, tanh_cells, grad_gates, grad_hidden
        )
        return (*weight_gradients, grad_h if needs[5] else None, grad_c if needs[6] else None, None, None, None)


def _claim_saved_buffers(ctx) -> None:
    """The backward overwrites what the forward saved, so it may run only once per forward."""
    if ctx.backward_done:
        raise RuntimeError(
            "the fast biLSTM's backward reuses its saved buffers and runs once per forward: run the forward "
            "again instead of backward(retain_graph=True), or call model.set_lstm_implementation('reference')"
        )
    ctx.backward_done = True


def _gate_gradients(d_gates, gates, previous_cell, tanh_cell, grad_cell, d_projected) -> None:
    """d loss / d gate pre-activations of one step, written into `d_gates` (2, B, 4C): the derivative of each
    activation (x (1 - x) for the sigmoids, 1 - x^2 for tanh) times d cell * g, d cell * previous cell,
    d cell * i and d projected * tanh(cell); `gates` holds the step's activations i, f, g, o."""
    input_gate, _, cell_input, _ = gates.chunk(4, dim=-1)
    torch.mul(gates, gates, out=d_gates)
    torch.sub(gates, d_gates, out=d_gates)
    d_input, d_forget, d_cell_input, d_output = d_gates.chunk(4, dim=-1)
    d_cell_input.sub_(cell_input).add_(1)
    d_input.mul_(cell_input)
    d_forget.mul_(previous_cell)
    d_cell_input.mul_(input_gate)
    batch, cell_dim = grad_cell.shape[1], grad_cell.shape[2]
    d_gates[:, :, : 3 * cell_dim].view(2, batch, 3, cell_dim).mul_(grad_cell.unsqueeze(2))
    d_output.mul_(tanh_cell).mul_(d_projected)


def _weight_gradients(needs, inputs, input_weight, h0, outputs, projected, grad_gates, grad_hidden) -> tuple:
    """The input and weight gradients of `_LstmLayerFunction`, one product per direction over the rows of all
    running steps each (None where `needs` says the input needs none). `projected` (2, T * B, C) holds each
    step's o * tanh(cell), `grad_gates` the two directions' (running rows, 4C) gate gradients."""
    batch, running_rows = h0.shape[1], grad_gates[0].shape[0]

    def per_direction(product):
        return torch.stack([product(d) for d in range(2)])  # contiguous (2, out, in)

    grad_inputs = None
    if needs[0]:
        grad_inputs = inputs.new_zeros(inputs.shape)
        for d in range(2):
            grad_inputs[d, :running_rows] = rows_times(grad_gates[d], input_weight[d].t())
    # d W = (d gates)^T @ layer inputs, summed over all running rows. Computed as (inputs^T @ d gates)^T: oneDNN
    # copies a transposed first operand, and the layer inputs are 4C / I times smaller than the gate gradients.
    grad_input_weight = None
    if needs[1]:
        grad_input_weight = per_direction(lambda d: rows_times(inputs[d, :running_rows].t(), grad_gates[d].t()).t())
    grad_bias = torch.stack([direction.sum(dim=0) for direction in grad_gates]) if needs[2] else None
    grad_recurrent_weight = None
    if needs[3]:
        previous_hidden = torch.cat([h0, outputs[:, : max(0, running_rows - batch)]], dim=1)[:, :running_rows]
        grad_recurrent_weight = per_direction(lambda d: rows_times(previous_hidden[d].t(), grad_gates[d].t()).t())
    grad_projection_weight = None
    if needs[4]:
        grad_projection_weight = per_direction(
            lambda d: rows_times(grad_hidden[d].t(), projected[d, :running_rows].t())
        )
    return grad_inputs, grad_input_weight, grad_bias, grad_recurrent_weight, grad_projection_weight


def _last_outputs(outputs: torch.Tensor, batch_sizes: list[int], h0: torch.Tensor) -> torch.Tensor:
    """(2, T, B, P) outputs -> (2, B, P): each row's output at its own last step (`h0`'s row if it ran none)."""
    batch = outputs.shape[2]
    steps = torch.tensor(batch_sizes, device=outputs.device, dtype=torch.long)
    last = (steps.unsqueeze(1) > torch.arange(batch, device=outputs.device)).sum(dim=0) - 1  # (B,)
    index = last.clamp(min=0).view(1, 1, batch, 1).expand(2, 1, batch, outputs.shape[3])
    return torch.where((last >= 0).view(1, batch, 1), outputs.gather(1, index).squeeze(1), h0)
