"""The ELMo encoder as an ONNX graph, written operator by operator from an `ElmoModel` state dict.

Depends only on the config fields and the state-dict names and shapes (and on onnx and numpy), not on how the
PyTorch modules compute. The graph, for `input_ids` (B, W, K), `attention_mask` (B, W) [and `word_ids` (B, W)]:

1. `<S>` at position 0 and `</S>` at each row's position length + 1 (the config's boundary rows), T = W + 2.
2. Layer 0: character embedding -> one Conv per filter -> max over positions -> activation -> highway layers ->
   [word embedding;] -> projection, for every position (padding too; it is masked at the end).
3. The biLSTM: both directions of a layer run in one ONNX `Scan` over time. The backward direction reads each
   row reversed within its own length (`ReverseSequence`), so the padding stays at the end and can only
   influence steps past the row's length, whose outputs are dropped. The input products of all steps are one
   MatMul per direction before the Scan; the loop body holds only the per-step work. Every weight is a 2-D
   constant, the form onnxruntime packs once for its matrix kernels.
4. `layers` (L+1, B, W, 2P): [token; token] and [forward_j; backward_j], boundaries dropped, exactly zero at
   padding (`Where`, so nothing computed at padding can leak into the output).

Every length is read from the inputs at run time, so the graph runs on batches and sentences of any size.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8  # the oldest that carries opset 17, so older onnxruntime builds load the file too

INPUT_IDS, ATTENTION_MASK, WORD_IDS, LAYERS, MIXES = "input_ids", "attention_mask", "word_ids", "layers", "mixes"


class _GraphBuilder:
    """Nodes and initializers of one graph, with unique tensor names. A loop body's builder puts its constants into
    the enclosing graph's (`constants`), which its nodes can read."""

    def __init__(self, prefix: str = "", constants: _GraphBuilder | None = None):
        self.prefix = prefix
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._constant_names: set[str] = set()
        self._count = 0
        self._constants = constants

    def _name(self, hint: str) -> str:
        self._count += 1
        return f"{self.prefix}{hint}_{self._count}"

    def constant(self, value, name: str | None = None, dtype=np.float32) -> str:
        if self._constants is not None:
            return self._constants.constant(value, self.prefix + name if name else None, dtype)
        array = np.array(value, dtype=dtype, order="C")  # np.ascontiguousarray would make scalars 1-d
        name = self._name(name) if name in self._constant_names else (name or self._name("const"))
        self._constant_names.add(name)
        self.initializers.append(numpy_helper.from_array(array, name))
        return name

    def op(self, op_type: str, *inputs: str, outputs: int = 1, **attributes) -> str | list[str]:
        names = [self._name(op_type.lower()) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), names, **attributes))
        return names[0] if outputs == 1 else names


def _weight(state: Mapping, name: str, shape: tuple[int, ...]) -> np.ndarray:
    """The float32 array of the state-dict entry `name`, checked to have the `shape` the config describes."""
    if name not in state:
        raise ValueError(f"the model's weights have no {name!r}: not an ElmoModel state dict this exporter knows")
    tensor = state[name]
    array = tensor.detach().cpu().float().numpy() if hasattr(tensor, "detach") else np.asarray(tensor)
    if tuple(array.shape) != tuple(shape):
        raise ValueError(f"{name} has shape {tuple(array.shape)}, but the config describes {tuple(shape)}")
    return array.astype(np.float32)


def graph_inputs(config, extra=()) -> list:
    """The encoder's inputs (`input_ids`, `attention_mask`[, `word_ids`]) and `extra` value infos."""
    width = config.max_characters_per_token
    inputs = [
        helper.make_tensor_value_info(INPUT_IDS, TensorProto.INT64, ["batch", "words", width]),
        helper.make_tensor_value_info(ATTENTION_MASK, TensorProto.INT64, ["batch", "words"]),
    ]
    if config.word_vocab_size:
        inputs.append(helper.make_tensor_value_info(WORD_IDS, TensorProto.INT64, ["batch", "words"]))
    return inputs + list(extra)


def layers_output(config):
    return helper.make_tensor_value_info(LAYERS, TensorProto.FLOAT, [config.num_lstm_layers + 1, "batch", "words",
                                                                     2 * config.projection_dim])


def encoder_layers(g: _GraphBuilder, config, state: Mapping) -> tuple[_Sentences, list[str]]:
    """The biLM in `g`: (the batch with its boundaries, the L+1 layers (B, T, 2P) with `<S>`/`</S>`, not masked)."""
    sentences = _sentences_with_boundaries(g, config)
    tokens = _token_vectors(g, config, state, sentences)  # (B, T, P)
    lstm_layers = _bilstm(g, config, state, tokens, sentences)
    return sentences, [g.op("Concat", tokens, tokens, axis=-1), *lstm_layers]


def finished_model(g: _GraphBuilder, config, inputs, outputs, doc: str) -> onnx.ModelProto:
    graph = helper.make_graph(g.nodes, "elmo", inputs, outputs, initializer=g.initializers)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="hf-elmo", ir_version=IR_VERSION
    )
    model.doc_string = (
        f"ELMo: {config.num_lstm_layers} biLSTM layers, projection {config.projection_dim}, cell "
        f"{config.lstm_cell_dim}. layers[0] = [token; token], layers[j] = [forward_j; backward_j]. {doc}"
    ).strip()
    return model


def boundary_mask(g: _GraphBuilder, sentences) -> str:
    """(B, T) bool: the positions of `<S>`, the words and `</S>` of each row."""
    int64 = np.int64
    steps = g.op("Squeeze", sentences.steps, g.constant([0], dtype=int64))
    positions = g.op("Range", g.constant(0, dtype=int64), steps, g.constant(1, dtype=int64))
    return g.op("Less", g.op("Unsqueeze", positions, g.constant([0], dtype=int64)),
                g.op("Unsqueeze", sentences.lengths, g.constant([1], dtype=int64)))


def scalar_mix(g: _GraphBuilder, config, state, prefix: str, layers: list[str], mask: str) -> str:
    """`ElmoScalarMix` (weights under `prefix`) of `layers` (B, T, D) each, `mask` (B, T) bool: gamma * sum_j
    softmax(w)_j * layer_j, each layer first normalised over the batch's masked elements when the config says so."""
    count = config.num_lstm_layers + 1
    weights = _weight(state, prefix + "scalar_parameters", (count,)).astype(np.float64)
    gamma = _weight(state, prefix + "gamma", (1,))
    softmax = np.exp(weights - weights.max())
    softmax = (softmax / softmax.sum()).astype(np.float32)
    if config.scalar_mix_layer_norm:
        layers = [_masked_layer_norm(g, layer, mask) for layer in layers]
    total = None
    for weight, layer in zip(softmax, layers):
        term = g.op("Mul", layer, g.constant(weight))
        total = term if total is None else g.op("Add", total, term)
    return g.op("Mul", total, g.constant(gamma))


def _masked_layer_norm(g: _GraphBuilder, layer: str, mask: str, eps: float = 1e-12) -> str:
    """AllenNLP's normalisation of a layer by one mean and variance over all its masked elements in the batch."""
    mask = g.op("Cast", g.op("Unsqueeze", mask, g.constant([-1], dtype=np.int64)), to=TensorProto.FLOAT)
    width = g.op("Cast", g.op("Slice", g.op("Shape", layer), g.constant([-1], dtype=np.int64),
                              g.constant([3], dtype=np.int64)), to=TensorProto.FLOAT)
    count = g.op("Mul", g.op("ReduceSum", mask, keepdims=0), width)
    mean = g.op("Div", g.op("ReduceSum", g.op("Mul", layer, mask), keepdims=0), count)
    centred = g.op("Sub", layer, mean)
    masked = g.op("Mul", centred, mask)
    variance = g.op("Div", g.op("ReduceSum", g.op("Mul", masked, masked), keepdims=0), count)
    return g.op("Div", centred, g.op("Sqrt", g.op("Add", variance, g.constant(eps))))


def _float_mask(g: _GraphBuilder, mask: str) -> str:
    return g.op("Cast", g.op("Unsqueeze", mask, g.constant([-1], dtype=np.int64)), to=TensorProto.FLOAT)


def elmo_onnx_model(config, state: Mapping) -> onnx.ModelProto:
    """The ONNX model of `ElmoModel(config)` with the weights `state` (a state dict of tensors or arrays): output
    `layers` (L+1, B, W, 2P) and, when the state holds the model's learned mixes, `mixes` (B, mixes, W, 2P) as
    `ElmoModelOutput.mixes`."""
    g = _GraphBuilder()
    sentences, layers = encoder_layers(g, config, state)
    outputs = [layers_output(config)]
    mixes = [name for name in (f"scalar_mixes.{i}.scalar_parameters" for i in range(config.num_output_representations))
             if name in state]
    if mixes:
        full_mask = boundary_mask(g, sentences)
        mixed = [scalar_mix(g, config, state, f"scalar_mixes.{i}.", layers, full_mask)
                 for i in range(len(mixes))]
        inner = _inner_positions(g, mixed, sentences.word_mask)  # each (1, B, W, 2P)
        stacked = g.op("Transpose", g.op("Concat", *inner, axis=0), perm=[1, 0, 2, 3])
        g.nodes.append(helper.make_node("Identity", [stacked], [MIXES]))
        outputs.append(helper.make_tensor_value_info(MIXES, TensorProto.FLOAT, ["batch", len(mixes), "words",
                                                                                  2 * config.projection_dim]))
    _output_layers(g, layers, sentences.word_mask)
    return finished_model(g, config, graph_inputs(config), outputs, "")


@dataclass(frozen=True)
class _Sentences:
    """Tensor names of the batch with its sentence boundaries."""

    char_ids: str  # (B, T, K): <S>, the words, </S> at each row's length + 1, zeros after
    word_mask: str  # (B, W) bool
    lengths: str  # (B,) int64: words + 2
    batch: str  # (1,) int64: B
    steps: str  # (1,) int64: T = W + 2


def _sentences_with_boundaries(g: _GraphBuilder, config) -> _Sentences:
    int64, width = np.int64, config.max_characters_per_token
    zero, one, two, minus_one = (g.constant([v], dtype=int64) for v in (0, 1, 2, -1))
    ids_shape = g.op("Shape", INPUT_IDS)
    batch = g.op("Slice", ids_shape, zero, one)
    steps = g.op("Add", g.op("Slice", ids_shape, one, two), two)
    word_mask = g.op("Cast", ATTENTION_MASK, to=TensorProto.BOOL)
    lengths = g.op("Add", g.op("ReduceSum", ATTENTION_MASK, one, keepdims=0), g.constant(2, dtype=int64))
    masked_ids = g.op("Mul", INPUT_IDS, g.op("Unsqueeze", ATTENTION_MASK, minus_one))
    edge_shape = g.op("Concat", batch, one, g.constant([width], dtype=int64), axis=0)
    edge_zeros = g.op("ConstantOfShape", edge_shape, value=helper.make_tensor("zero", TensorProto.INT64, [1], [0]))
    bos_row = g.constant(np.reshape(config.bos_char_ids, (1, 1, width)), "bos_char_ids", dtype=int64)
    eos_row = g.constant(np.reshape(config.eos_char_ids, (1, 1, width)), "eos_char_ids", dtype=int64)
    padded_ids = g.op("Concat", g.op("Add", edge_zeros, bos_row), masked_ids, edge_zeros, axis=1)  # (B, T, K)
    positions = g.op("Range", g.constant(0, dtype=int64), g.op("Squeeze", steps, zero), g.constant(1, dtype=int64))
    eos_position = g.op("Sub", lengths, g.constant(1, dtype=int64))
    at_eos = g.op("Equal", g.op("Unsqueeze", positions, zero), g.op("Unsqueeze", eos_position, one))  # (B, T)
    char_ids = g.op("Where", g.op("Unsqueeze", at_eos, minus_one), eos_row, padded_ids)
    return _Sentences(char_ids, word_mask, lengths, batch, steps)


def _bilstm(g: _GraphBuilder, config, state, tokens: str, sentences: _Sentences) -> list[str]:
    """The biLSTM layers, each (B, T, 2P) `[forward; backward]`. Each direction runs time-major (T, B, P); the
    backward one on its input reversed within each row's length, its outputs reversed back at the end."""
    forward_input = g.op("Transpose", tokens, perm=[1, 0, 2])
    backward_input = g.op("ReverseSequence", forward_input, sentences.lengths, batch_axis=1, time_axis=0)
    layers = []
    for index in range(config.num_lstm_layers):
        forward, backward = _lstm_layer(g, config, state, index, (forward_input, backward_input), sentences.batch)
        if config.use_skip_connections and index > 0:
            forward, backward = g.op("Add", forward, forward_input), g.op("Add", backward, backward_input)
        forward_input, backward_input = forward, backward
        backward = g.op("ReverseSequence", backward, sentences.lengths, batch_axis=1, time_axis=0)
        layers.append(g.op("Transpose", g.op("Concat", forward, backward, axis=-1), perm=[1, 0, 2]))
    return layers


def _inner_positions(g: _GraphBuilder, layers: list[str], word_mask: str) -> list[str]:
    """(B, T, 2P) each -> (1, B, W, 2P) each: boundaries dropped, exactly zero at padding (`Where`, so nothing
    computed at padding can leak into the output)."""
    zero, one, minus_one = (g.constant([v], dtype=np.int64) for v in (0, 1, -1))
    keep = g.op("Unsqueeze", word_mask, minus_one)  # (B, W, 1)
    float_zero = g.constant(0.0)
    inner_layers = []
    for layer in layers:
        inner = g.op("Slice", layer, one, minus_one, one)  # positions 1 .. T-2
        inner_layers.append(g.op("Unsqueeze", g.op("Where", keep, inner, float_zero), zero))
    return inner_layers


def _output_layers(g: _GraphBuilder, layers: list[str], word_mask: str) -> str:
    """`layers` (B, T, 2P) each -> the graph output (L+1, B, W, 2P): boundaries dropped, zero at padding."""
    g.nodes.append(helper.make_node("Concat", _inner_positions(g, layers, word_mask), [LAYERS], axis=0))
    return LAYERS


def _token_vectors(g: _GraphBuilder, config, state, sentences: _Sentences) -> str:
    """Character CNN -> highway -> [word embedding;] -> projection of every (B, T) position -> (B, T, P)."""
    int64 = np.int64
    flat_ids = g.op("Reshape", sentences.char_ids, g.constant([-1, config.max_characters_per_token], dtype=int64))
    word_vectors = _word_vectors(g, config, state, sentences) if config.word_vocab_size else None
    projected = encode_characters(g, config, state, "char_encoder.", flat_ids, word_vectors)
    token_shape = g.op("Concat", sentences.batch, sentences.steps, g.constant([config.projection_dim], dtype=int64),
                       axis=0)
    return g.op("Reshape", projected, token_shape)


def encode_characters(g: _GraphBuilder, config, state, prefix: str, flat_ids: str,
                      word_vectors: str | None = None) -> str:
    """`ElmoCharacterEncoder` (its weights under `prefix`) of (N, K) character ids -> (N, P): character CNN ->
    highway -> [word vectors (N, word_embedding_dim);] -> projection."""
    width = config.max_characters_per_token
    int64 = np.int64
    tag = prefix.rstrip(".").replace(".", "_") + "_" if prefix != "char_encoder." else ""
    embedding = _weight(state, prefix + "char_embedding.weight", (config.char_vocab_size, config.char_embedding_dim))
    flat_ids = _without_constant_tail(g, flat_ids, width, max(w for w, _ in config.char_cnn_filters))
    characters = g.op("Gather", g.constant(embedding, tag + "char_embedding"), flat_ids)  # (N, K', D)
    channels_first = g.op("Transpose", characters, perm=[0, 2, 1])  # (N, D, K)
    pooled = []
    for index, (filter_width, count) in enumerate(config.char_cnn_filters):
        name = f"{prefix}convolutions.{index}"
        weight = _weight(state, name + ".weight", (count, config.char_embedding_dim, filter_width))
        bias = _weight(state, name + ".bias", (count,))
        convolved = g.op("Conv", channels_first, g.constant(weight, f"{tag}conv{index}_weight"),
                         g.constant(bias, f"{tag}conv{index}_bias"), kernel_shape=[filter_width])
        pooled.append(g.op("ReduceMax", convolved, axes=[2], keepdims=0))  # (N, count)
    features = g.op("Concat", *pooled, axis=1) if len(pooled) > 1 else pooled[0]
    features = g.op("Tanh" if config.char_cnn_activation == "tanh" else "Relu", features)

    filters = sum(count for _, count in config.char_cnn_filters)
    for index in range(config.num_highway_layers):
        name = f"{prefix}highway.layers.{index}"
        weight = _weight(state, name + ".weight", (2 * filters, filters))
        bias = _weight(state, name + ".bias", (2 * filters,))
        both = g.op("Add", g.op("MatMul", features, g.constant(weight.T, f"{tag}highway{index}_weight")),
                    g.constant(bias, f"{tag}highway{index}_bias"))
        transform, carry = g.op("Split", both, g.constant([filters, filters], dtype=int64), axis=1, outputs=2)
        gate = g.op("Sigmoid", carry)
        features = g.op("Add", g.op("Mul", gate, g.op("Relu", transform)),
                        g.op("Mul", g.op("Sub", g.constant(1.0), gate), features))

    projection_inputs = filters
    if word_vectors is not None:
        features = g.op("Concat", word_vectors, features, axis=1)
        projection_inputs += config.word_embedding_dim
    weight = _weight(state, prefix + "projection.weight", (config.projection_dim, projection_inputs))
    bias = _weight(state, prefix + "projection.bias", (config.projection_dim,))
    return g.op("Add", g.op("MatMul", features, g.constant(weight.T, tag + "projection_weight")),
                g.constant(bias, tag + "projection_bias"))


def _without_constant_tail(g: _GraphBuilder, char_ids: str, width: int, widest_filter: int) -> str:
    """(N, K) -> (N, K'): the columns after which every row only repeats its own last id, as the model cuts them.

    Past the last column L in which some row differs from its own last id, every convolution window of a row has
    the same content; keeping L + the widest filter's width columns keeps every distinct window and one of the
    constant ones wherever the full width had one, so the max over positions is unchanged. Words are short: this
    typically halves the convolution work."""
    int64 = np.int64
    last = g.op("Slice", char_ids, g.constant([width - 1], dtype=int64), g.constant([width], dtype=int64),
                g.constant([1], dtype=int64))  # (N, 1)
    varies = g.op("Cast", g.op("Not", g.op("Equal", char_ids, last)), to=TensorProto.INT64)  # (N, K)
    column_numbers = g.constant(np.arange(1, width + 1)[None, :], dtype=int64)  # 1-based: 0 means no column varies
    last_varying = g.op("ReduceMax", g.op("Mul", varies, column_numbers), keepdims=1)  # (1, 1)
    keep = g.op("Min", g.op("Add", g.op("Reshape", last_varying, g.constant([1], dtype=int64)),
                            g.constant([widest_filter], dtype=int64)), g.constant([width], dtype=int64))
    return g.op("Slice", char_ids, g.constant([0], dtype=int64), keep, g.constant([1], dtype=int64))


def _word_vectors(g: _GraphBuilder, config, state, sentences: _Sentences) -> str:
    """(N, word_embedding_dim) word vectors of every position: `<S>` first, `</S>` at every position past the words
    (so at each row's end too), as `ElmoModel` builds its word ids."""
    int64 = np.int64
    name = "char_encoder.word_embedding.weight"
    table = _weight(state, name, (config.word_vocab_size, config.word_embedding_dim))
    eos, bos = g.constant(config.eos_word_id, dtype=int64), g.constant(config.bos_word_id, dtype=int64)
    inner = g.op("Where", sentences.word_mask, WORD_IDS, eos)  # (B, W)
    column = g.op("ConstantOfShape", g.op("Concat", sentences.batch, g.constant([1], dtype=int64), axis=0),
                  value=helper.make_tensor("zero", TensorProto.INT64, [1], [0]))
    ids = g.op("Concat", g.op("Add", column, bos), inner, g.op("Add", column, eos), axis=1)  # (B, T)
    flat = g.op("Reshape", ids, g.constant([-1], dtype=int64))
    return g.op("Gather", g.constant(table, "word_embedding"), flat)


def _lstm_weights(config, state, index: int) -> tuple[np.ndarray, ...]:
    """Layer `index`'s input (2, 4C, P), recurrent (2, 4C, P), projection (2, P, C) weights and bias (2, 4C), the
    bias with the forget-gate constant added: the model adds `lstm_forget_bias` at run time (its stored bias stays
    bilm-tf's), the graph once here."""
    projection_dim, cell_dim = config.projection_dim, config.lstm_cell_dim
    shapes = {"input_weight": (2, 4 * cell_dim, projection_dim), "recurrent_weight": (2, 4 * cell_dim, projection_dim),
              "projection_weight": (2, projection_dim, cell_dim), "bias": (2, 4 * cell_dim)}
    weights = {}
    for kind, shape in shapes.items():
        name = f"bilstm.layers.{index}.{kind}"
        weights[kind] = _weight(state, name, shape)
    forget_offset = np.zeros(4 * cell_dim, dtype=np.float32)
    forget_offset[cell_dim : 2 * cell_dim] = config.lstm_forget_bias
    bias = (weights["bias"] + forget_offset).astype(np.float32)
    return weights["input_weight"], weights["recurrent_weight"], weights["projection_weight"], bias


def _lstm_layer(g: _GraphBuilder, config, state, index: int, inputs: tuple[str, str], batch: str) -> list[str]:
    """One layer of both directions, a Scan over time: (T, B, P) inputs per direction -> (T, B, P) outputs.

    Every product has a 2-D constant weight (onnxruntime packs those once, when the session is made): the input
    products of all steps are one (T * B, P) x (P, 4C) product per direction before the loop, and the loop body
    holds each direction's recurrent and projection products and its gates."""
    projection_dim, cell_dim = config.projection_dim, config.lstm_cell_dim
    input_weight, recurrent_weight, projection_weight, bias = _lstm_weights(config, state, index)
    int64, float_type = np.int64, TensorProto.FLOAT
    prefix = f"lstm{index}_"
    body = _GraphBuilder(prefix=prefix + "step_", constants=g)
    state_inputs, state_outputs, step_outputs, slice_inputs, initial_states, scan_inputs = [], [], [], [], [], []
    for direction, direction_input in enumerate(inputs):
        tag = f"{prefix}{'forward' if direction == 0 else 'backward'}_"
        rows = g.op("Reshape", direction_input, g.constant([-1, projection_dim], dtype=int64))  # (T * B, P)
        gates = g.op("Add", g.op("MatMul", rows, g.constant(input_weight[direction].T, tag + "input_weight")),
                     g.constant(bias[direction], tag + "bias"))
        gates_shape = g.op("Concat", g.op("Shape", direction_input, start=0, end=2),
                           g.constant([4 * cell_dim], dtype=int64), axis=0)
        scan_inputs.append(g.op("Reshape", gates, gates_shape))  # (T, B, 4C)
        initial_states += [_zeros(g, batch, projection_dim), _zeros(g, batch, cell_dim)]
        weights = (g.constant(recurrent_weight[direction].T, tag + "recurrent_weight"),  # (P, 4C)
                   g.constant(projection_weight[direction].T, tag + "projection_weight"))  # (C, P)
        h_in, c_in, gates_in = tag + "h", tag + "c", tag + "gates"
        hidden, cell = _lstm_step(body, gates_in, h_in, c_in, *weights, config.cell_clip, config.proj_clip)
        state_inputs += [helper.make_tensor_value_info(h_in, float_type, ["batch", projection_dim]),
                         helper.make_tensor_value_info(c_in, float_type, ["batch", cell_dim])]
        state_outputs += [helper.make_tensor_value_info(hidden, float_type, ["batch", projection_dim]),
                          helper.make_tensor_value_info(cell, float_type, ["batch", cell_dim])]
        step_output = body.op("Identity", hidden)
        step_outputs.append(helper.make_tensor_value_info(step_output, float_type, ["batch", projection_dim]))
        slice_inputs.append(helper.make_tensor_value_info(gates_in, float_type, ["batch", 4 * cell_dim]))
    # The body reads the states first, then one slice of each scan input, in the order the Scan node lists them.
    body_graph = helper.make_graph(body.nodes, prefix + "step", state_inputs + slice_inputs,
                                   state_outputs + step_outputs)
    outputs = g.op("Scan", *initial_states, *scan_inputs, outputs=6, body=body_graph, num_scan_inputs=2)
    return outputs[4:]


def _lstm_step(g: _GraphBuilder, input_gates: str, h: str, c: str, recurrent_weight: str, projection_weight: str,
               cell_clip: float | None = None, proj_clip: float | None = None) -> tuple[str, str]:
    """`reference_lstm_step` of one direction as nodes of `g`: `input_gates` (B, 4C) = x W_input^T + bias, gates i, f,
    g, o; `h` (B, P), `c` (B, C); the weights transposed, (P, 4C) and (C, P). Returns the new (h, c)."""
    gates = g.op("Add", input_gates, g.op("MatMul", h, recurrent_weight))
    input_gate, forget_gate, cell_input, output_gate = g.op("Split", gates, axis=-1, outputs=4)  # equal parts
    cell = g.op("Add", g.op("Mul", g.op("Sigmoid", input_gate), g.op("Tanh", cell_input)),
                g.op("Mul", g.op("Sigmoid", forget_gate), c))
    if cell_clip:
        cell = g.op("Clip", cell, g.constant(-cell_clip, "cell_clip_low"), g.constant(cell_clip, "cell_clip_high"))
    hidden = g.op("MatMul", g.op("Mul", g.op("Sigmoid", output_gate), g.op("Tanh", cell)), projection_weight)
    if proj_clip:
        hidden = g.op("Clip", hidden, g.constant(-proj_clip, "proj_clip_low"), g.constant(proj_clip, "proj_clip_high"))
    return hidden, cell


def _zeros(g: _GraphBuilder, batch: str, size: int) -> str:
    """A zero state (B, size)."""
    shape = g.op("Concat", batch, g.constant([size], dtype=np.int64), axis=0)
    return g.op("ConstantOfShape", shape, value=helper.make_tensor("zero", TensorProto.FLOAT, [1], [0.0]))


__all__ = ["ATTENTION_MASK", "INPUT_IDS", "LAYERS", "MIXES", "OPSET", "WORD_IDS", "elmo_onnx_model",
           "encode_characters", "encoder_layers", "finished_model", "graph_inputs", "layers_output"]
