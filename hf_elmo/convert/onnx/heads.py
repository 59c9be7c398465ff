"""Task models in the ONNX graph: the biLM of graph.py, then what the head computes from its layers.

* `token-classification` (`ElmoForTokenClassification`) and `character-tagging` (`ElmoForCharacterTagging`): the
  head's learned mix [; its own word vectors x_k] [-> the S/B/M/E places of characters in their words] -> [BiLSTM]
  -> linear: output `logits` (batch x positions x labels), the tag scores. A CRF's start, end and transition scores
  are no function of the input: the export writes them beside the graph (client.json), and the client decodes with
  Viterbi as `ElmoCrf.viterbi_decode` does.
* `sequence-classification` (`ElmoForSequenceClassification`): mix -> mean over the words -> [ReLU layer] ->
  linear: output `logits` (batch x labels).
* `encoder` (`ElmoModel`): the layers and each learned mix (`mixes`, as `ElmoModelOutput.mixes`), graph.py.

Every graph also outputs `layers`, so that any exported model gives word vectors. The builders read the state dict
through `_ReadState`, which records what was read: a weight of the model that no builder read is a part the export
would leave out, and the export is refused naming it (never a partial export).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from onnx import TensorProto, helper

from .graph import (
    INPUT_IDS,
    LAYERS,
    WORD_IDS,
    _float_mask,
    _GraphBuilder,
    _inner_positions,
    _weight,
    boundary_mask,
    elmo_onnx_model,
    encode_characters,
    encoder_layers,
    finished_model,
    graph_inputs,
    layers_output,
    scalar_mix,
)

LOGITS = "logits"
TOKEN_WORD_INDEX, TOKEN_POSITIONS, CHARACTER_INPUT_IDS = "token_word_index", "token_positions", "character_input_ids"

#: Model class -> what its export computes.
KINDS = {"ElmoModel": "encoder", "ElmoForPreTraining": "encoder", "ElmoForTokenClassification": "token-classification",
         "ElmoForCharacterTagging": "character-tagging", "ElmoForSequenceClassification": "sequence-classification"}
TAGGER_KINDS = ("token-classification", "character-tagging")
# What a task model holds that its predictions never read: the encoder's own mixes (the head has its own mix).
_UNREAD_BY_HEADS = ("elmo.scalar_mixes.",)
# The language-model softmax of a pretraining checkpoint: a training objective, not part of the encoder it trains.
_PRETRAINING_ONLY = ("softmax.",)
_WORD_POSITIONS = 4  # S, B, M, E (modeling_elmo.WORD_POSITIONS)


class ExportRefused(ValueError):
    """A model with a part the ONNX export cannot write; nothing is written."""


class _ReadState(Mapping):
    """A state dict (tensors or arrays) that remembers which names were read, under an optional prefix."""

    def __init__(self, state: Mapping, prefix: str = "", read: set | None = None):
        self._state, self._prefix = state, prefix
        self.read = set() if read is None else read

    def __getitem__(self, name):
        self.read.add(self._prefix + name)
        return self._state[self._prefix + name]

    def __contains__(self, name):
        return self._prefix + name in self._state

    def __iter__(self):
        return (name[len(self._prefix):] for name in self._state if name.startswith(self._prefix))

    def __len__(self):
        return sum(1 for _ in self)

    def scoped(self, prefix: str) -> _ReadState:
        return _ReadState(self._state, self._prefix + prefix, self.read)


def _refuse_unread(what: str, state: Mapping, read: set, ignored=()) -> None:
    unread = sorted(name for name in state if name not in read and not name.startswith(tuple(ignored)))
    if unread:
        parts = sorted({name.rsplit(".", 1)[0] for name in unread})
        shown = ", ".join(parts[:4]) + (f" and {len(parts) - 4} more" if len(parts) > 4 else "")
        raise ExportRefused(f"cannot export {what} to ONNX: the exporter does not know its part(s) {shown}; "
                            "nothing was written")


def _own_vectors(g: _GraphBuilder, config, state, ids: str, mask: str, word_ids: str | None) -> str:
    """The head's own x_k (`token_features`, an `ElmoCharacterEncoder`) of (B, N, K) ids: (B, N, P), zero where
    `mask` (B, N) is False."""
    int64 = np.int64
    flat = g.op("Reshape", ids, g.constant([-1, config.max_characters_per_token], dtype=int64))
    words = None
    if word_ids is not None:
        table = _weight(state, "token_features.word_embedding.weight",
                        (config.word_vocab_size, config.word_embedding_dim))
        words = g.op("Gather", g.constant(table, "token_features_word_embedding"),
                     g.op("Reshape", word_ids, g.constant([-1], dtype=int64)))
    vectors = encode_characters(g, config, state, "token_features.", flat, words)
    shape = g.op("Concat", g.op("Shape", ids, start=0, end=2), g.constant([config.projection_dim], dtype=int64), axis=0)
    return g.op("Where", g.op("Unsqueeze", mask, g.constant([-1], dtype=int64)), g.op("Reshape", vectors, shape),
                g.constant(0.0))


def _linear(g: _GraphBuilder, state, name: str, inputs: str, in_size: int, out_size: int) -> str:
    weight = _weight(state, name + ".weight", (out_size, in_size))
    bias = _weight(state, name + ".bias", (out_size,))
    return g.op("Add", g.op("MatMul", inputs, g.constant(weight.T, name + "_weight")), g.constant(bias, name + "_bias"))


def _onnx_gates(array: np.ndarray) -> np.ndarray:
    """PyTorch's LSTM gate order (i, f, g, o) along the first axis -> ONNX's (i, o, f, c)."""
    i, f, cell, o = np.split(array, 4, axis=0)
    return np.concatenate([i, o, f, cell], axis=0)


def _task_bilstm(g: _GraphBuilder, config, state, inputs: str, mask: str, feature_size: int) -> str:
    """`ElmoTaskBiLstm` (an `nn.LSTM`, bidirectional, batch first) over (B, T, F) `inputs` whose rows hold
    `mask.sum(1)` positions (at least 1, as the head packs them): ONNX `LSTM` nodes with `sequence_lens`, so the
    backward direction starts at each row's end. Returns (B, T, 2H)."""
    hidden = config.task_encoder_hidden_size
    int64 = np.int64
    lengths = g.op("Cast", g.op("Max", g.op("ReduceSum", g.op("Cast", mask, to=TensorProto.INT64),
                                            g.constant([1], dtype=int64), keepdims=0),
                                g.constant(1, dtype=int64)), to=TensorProto.INT32)
    sequence = g.op("Transpose", inputs, perm=[1, 0, 2])  # (T, B, F)
    for layer in range(config.task_encoder_num_layers):
        in_size = feature_size if layer == 0 else 2 * hidden
        weights, recurrent, biases = [], [], []
        for suffix in ("", "_reverse"):
            name = f"encoder.{{}}_l{layer}{suffix}"
            weights.append(_onnx_gates(_weight(state, name.format("weight_ih"), (4 * hidden, in_size))))
            recurrent.append(_onnx_gates(_weight(state, name.format("weight_hh"), (4 * hidden, hidden))))
            biases.append(np.concatenate([_onnx_gates(_weight(state, name.format("bias_ih"), (4 * hidden,))),
                                          _onnx_gates(_weight(state, name.format("bias_hh"), (4 * hidden,)))]))
        output = g.op("LSTM", sequence, g.constant(np.stack(weights), f"task_lstm{layer}_W"),
                      g.constant(np.stack(recurrent), f"task_lstm{layer}_R"),
                      g.constant(np.stack(biases), f"task_lstm{layer}_B"), lengths,
                      hidden_size=hidden, direction="bidirectional")  # (T, 2, B, H)
        sequence = g.op("Reshape", g.op("Transpose", output, perm=[0, 2, 1, 3]),
                        g.constant([0, 0, 2 * hidden], dtype=int64))
    return g.op("Transpose", sequence, perm=[1, 0, 2])


def _head_vectors(g: _GraphBuilder, config, state, inner: list[str], word_mask: str) -> tuple[str, int]:
    """`ElmoHeadModel.mixed_vectors` without dropout: ((B, W, F) [x_k;] mix, F)."""
    mixed = scalar_mix(g, config, state, "scalar_mix.", inner, word_mask)
    size = 2 * config.projection_dim
    if config.task_token_features:
        own = _own_vectors(g, config, state, INPUT_IDS, word_mask, WORD_IDS if config.word_vocab_size else None)
        mixed = g.op("Concat", own, mixed, axis=-1)
        size += config.projection_dim
    return mixed, size


def _tag_scores(g: _GraphBuilder, config, state, vectors: str, mask: str, size: int) -> str:
    """`ElmoTagger.tag`'s logits: [BiLSTM ->] linear."""
    if config.task_encoder == "bilstm":
        vectors = _task_bilstm(g, config, state, vectors, mask, size)
        size = 2 * config.task_encoder_hidden_size
    return _linear(g, state, "classifier", vectors, size, config.num_labels)


def _character_vectors(g: _GraphBuilder, config, state, word_vectors: str, size: int) -> tuple[str, str, int]:
    """`modeling_elmo.character_vectors` [+ the characters' own x_k]: ((B, C, F') vectors, (B, C) mask, F')."""
    int64 = np.int64
    mask = g.op("GreaterOrEqual", TOKEN_WORD_INDEX, g.constant(0, dtype=int64))
    last_word = g.op("Max", g.op("Sub", g.op("Shape", word_vectors, start=1, end=2), g.constant([1], dtype=int64)),
                     g.constant([0], dtype=int64))
    index = g.op("Min", g.op("Max", TOKEN_WORD_INDEX, g.constant(0, dtype=int64)), last_word)  # (B, C)
    expanded = g.op("Expand", g.op("Unsqueeze", index, g.constant([-1], dtype=int64)),
                    g.constant([1, 1, size], dtype=int64))
    vectors = g.op("GatherElements", word_vectors, expanded, axis=1)  # (B, C, F)
    places = g.op("Gather", g.constant(np.eye(_WORD_POSITIONS, dtype=np.float32), "word_positions"),
                  g.op("Clip", TOKEN_POSITIONS, g.constant(0, dtype=int64),
                       g.constant(_WORD_POSITIONS - 1, dtype=int64)))
    features = g.op("Mul", g.op("Concat", vectors, places, axis=-1), _float_mask(g, mask))
    size += _WORD_POSITIONS
    if config.task_character_features:
        own = _own_vectors(g, config, state, CHARACTER_INPUT_IDS, mask, None)
        features = g.op("Concat", features, own, axis=-1)
        size += config.projection_dim
    return features, mask, size


def _pooled_logits(g: _GraphBuilder, config, state, vectors: str, mask: str, size: int) -> str:
    """`ElmoForSequenceClassification`: masked mean over the words -> [ReLU layer] -> linear: (B, labels)."""
    weights = _float_mask(g, mask)
    one = g.constant([1], dtype=np.int64)
    total = g.op("ReduceSum", g.op("Mul", vectors, weights), one, keepdims=0)
    pooled = g.op("Div", total, g.op("Max", g.op("ReduceSum", weights, one, keepdims=0), g.constant(1.0)))
    if config.classifier_hidden_size:
        pooled = g.op("Relu", _linear(g, state, "pre_classifier", pooled, size, config.classifier_hidden_size))
        size = config.classifier_hidden_size
    return _linear(g, state, "classifier", pooled, size, config.num_labels)


def task_onnx_model(kind: str, config, state: Mapping, what: str = "this model"):
    """(the ONNX model of the task model `kind` with the weights `state`, the head's constants for the client:
    the CRF's scores as lists). Refuses (`ExportRefused`, one line naming the part) a model with weights the
    builders do not read."""
    if kind == "encoder":
        read = _ReadState(state)
        proto = elmo_onnx_model(config, read)
        _refuse_unread(what, state, read.read, _PRETRAINING_ONLY)
        return proto, {}
    if kind not in KINDS.values():
        raise ExportRefused(f"cannot export {what} to ONNX: unknown kind {kind!r}")
    if config.word_vocab_size and kind == "character-tagging" and config.task_character_features:
        raise ExportRefused(f"cannot export {what} to ONNX: task_character_features with a word embedding")
    read = _ReadState(state)
    g = _GraphBuilder()
    sentences, layers = encoder_layers(g, config, read.scoped("elmo."))
    inner_unsqueezed = _inner_positions(g, layers, sentences.word_mask)
    g.nodes.append(helper.make_node("Concat", inner_unsqueezed, [LAYERS], axis=0))
    inner = [g.op("Squeeze", layer, g.constant([0], dtype=np.int64)) for layer in inner_unsqueezed]
    vectors, size = _head_vectors(g, config, read, inner, sentences.word_mask)
    extra_inputs = []
    if kind == "sequence-classification":
        logits = _pooled_logits(g, config, read, vectors, sentences.word_mask, size)
        logits_shape = ["batch", config.num_labels]
    else:
        mask = sentences.word_mask
        if kind == "character-tagging":
            extra_inputs = [helper.make_tensor_value_info(TOKEN_WORD_INDEX, TensorProto.INT64, ["batch", "characters"]),
                            helper.make_tensor_value_info(TOKEN_POSITIONS, TensorProto.INT64, ["batch", "characters"])]
            if config.task_character_features:
                extra_inputs.append(helper.make_tensor_value_info(
                    CHARACTER_INPUT_IDS, TensorProto.INT64, ["batch", "characters", config.max_characters_per_token]))
            vectors, mask, size = _character_vectors(g, config, read, vectors, size)
        logits = _tag_scores(g, config, read, vectors, mask, size)
        logits_shape = ["batch", "characters" if kind == "character-tagging" else "words", config.num_labels]
    g.nodes.append(helper.make_node("Identity", [logits], [LOGITS]))
    head = {}
    if kind in TAGGER_KINDS and config.use_crf:
        head["crf"] = {key: np.asarray(_weight(read, f"crf.{key}", shape), dtype=np.float32).tolist()
                       for key, shape in (("start_transitions", (config.num_labels,)),
                                          ("end_transitions", (config.num_labels,)),
                                          ("transitions", (config.num_labels, config.num_labels)))}
    _refuse_unread(what, state, read.read, _UNREAD_BY_HEADS)
    outputs = [layers_output(config), helper.make_tensor_value_info(LOGITS, TensorProto.FLOAT, logits_shape)]
    proto = finished_model(g, config, graph_inputs(config, extra_inputs), outputs, f"Task: {kind}; output logits.")
    return proto, head


__all__ = ["CHARACTER_INPUT_IDS", "ExportRefused", "KINDS", "LOGITS", "TAGGER_KINDS", "TOKEN_POSITIONS",
           "TOKEN_WORD_INDEX", "boundary_mask", "scalar_mix", "task_onnx_model"]
