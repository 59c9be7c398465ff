"""The ELMo biLM in plain PyTorch, top-down in the order data flows through it:

1. `ElmoCharacterEncoder`  character ids (words, characters) -> context-insensitive token vectors (layer 0)
2. `ElmoBiLstm`            token vectors -> forward and backward LSTM layers with cell/projection clipping
3. `ElmoScalarMix`         L+1 layers -> gamma * sum_j softmax(w)_j * layer_j
4. `ElmoBiLmMixin`         what the encoder computes: adds sentence boundaries, returns every layer and the mixes;
                           `ElmoModel` (modeling_elmo.py) and `ElmoBiLm` (below) are built on it

This plain PyTorch defines the numbers (AllenNLP's / bilm-tf's). Faster functions for layer 0 and the biLSTM plug
in through `ElmoKernelInterface`, as attention functions do through transformers' `AttentionInterface`: chosen by
name (`lstm_implementation`) when a model is loaded or later, never saved, looked up when called, and set aside
while torch.compile / torch.export trace the model. Nothing here imports transformers' model classes (their import
is most of a command's start-up), so `ElmoBiLm` runs a saved encoder where start-up time counts.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn
from transformers.utils import ModelOutput
from transformers.utils.generic import GeneralInterface

from .configuration_elmo import ElmoConfig

def reference_character_encoder(encoder: ElmoCharacterEncoder, char_ids: torch.Tensor,
                                word_ids: torch.Tensor | None = None) -> torch.Tensor:
    """Layer 0 of `(N, max_characters_per_token)` character ids -> `(N, projection_dim)`; all-zero rows are padding
    and may come out as anything (the model zeroes them)."""
    return encoder(char_ids, word_ids)


def reference_bilstm(bilstm: ElmoBiLstm, inputs: torch.Tensor, lengths: torch.Tensor, initial_state=None,
                     dropout: float = 0.0, skip_final_step: bool = False):
    """`bilstm(inputs, lengths, initial_state, dropout)`; `skip_final_step` tells a kernel that the outputs at the
    steps reading the opposite sentence boundary will be dropped, so it may skip them."""
    return bilstm(inputs, lengths, initial_state, dropout)


class ElmoKernelFunctions(NamedTuple):
    """One implementation: functions with the signatures of `reference_character_encoder` and `reference_bilstm`,
    and optionally `release(model)`, called when an `ElmoModel` or `ElmoBiLm` goes back to training, to drop what
    the functions keep for it (copies of weights that are about to change)."""

    character_encoder: Callable
    bilstm: Callable
    release: Callable | None = None


class ElmoKernelInterface(GeneralInterface):
    """`lstm_implementation` name -> `ElmoKernelFunctions`; register others with
    `ElmoKernelInterface.register(name, ElmoKernelFunctions(...))`. A model uses "auto" where it is registered,
    else "reference" (this file)."""

    _global_mapping = {"reference": ElmoKernelFunctions(reference_character_encoder, reference_bilstm)}


ALL_LSTM_FUNCTIONS = ElmoKernelInterface()


def _check_implementation(implementation: str | None) -> str:
    if implementation is None:
        return "auto" if "auto" in ALL_LSTM_FUNCTIONS else "reference"
    if implementation not in ALL_LSTM_FUNCTIONS:
        raise ValueError(f"lstm_implementation must be one of the registered {', '.join(ALL_LSTM_FUNCTIONS)}, got "
                         f"{implementation!r} (hf-elmo registers its kernels when imported)")
    return implementation



# 1. Characters -> token vectors ------------------------------------------------------------------------------
class ElmoHighwayLayer(nn.Linear):
    """One highway layer's linear map, `size` -> `[transform; carry]` (2 * size)."""

    def __init__(self, size: int):
        super().__init__(size, 2 * size)


class ElmoHighway(nn.Module):
    """Highway layers (TensorFlow convention): ``x <- g * relu(x W_t + b_t) + (1 - g) * x``,
    ``g = sigmoid(x W_c + b_c)``."""

    def __init__(self, size: int, num_layers: int):
        super().__init__()
        self.layers = nn.ModuleList([ElmoHighwayLayer(size) for _ in range(num_layers)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            transform, carry = layer(x).chunk(2, dim=-1)
            gate = torch.sigmoid(carry)
            x = gate * F.relu(transform) + (1 - gate) * x
        return x


class ElmoCharacterEncoder(nn.Module):
    """Layer 0: char ids `(tokens, max_characters_per_token)` -> embedding -> one convolution per filter width ->
    max over positions -> activation -> highway -> projection -> `(tokens, projection_dim)`. An optional word
    embedding (ELMoForManyLangs models) is concatenated before the projection."""

    def __init__(self, config: ElmoConfig):
        super().__init__()
        self.config = config
        self.char_embedding = nn.Embedding(config.char_vocab_size, config.char_embedding_dim, padding_idx=0)
        self.convolutions = nn.ModuleList([nn.Conv1d(config.char_embedding_dim, count, width)
                                           for width, count in config.char_cnn_filters])
        self.highway = ElmoHighway(config.num_char_filters, config.num_highway_layers)
        self.word_embedding = (nn.Embedding(config.word_vocab_size, config.word_embedding_dim)
                               if config.word_vocab_size else None)
        self.projection = nn.Linear(config.num_char_filters + config.word_embedding_dim, config.projection_dim)

    def forward(self, char_ids: torch.Tensor, word_ids: torch.Tensor | None = None) -> torch.Tensor:
        chars = self.char_embedding(char_ids).transpose(1, 2)  # (tokens, d_char, positions)
        # Max-pooling before the activation equals pooling after it: relu and tanh are monotone.
        features = torch.cat([conv(chars).amax(dim=-1) for conv in self.convolutions], dim=-1)
        tokens = self.highway(torch.tanh(features) if self.config.char_cnn_activation == "tanh" else F.relu(features))
        if self.word_embedding is not None:
            tokens = torch.cat([self.word_embedding(word_ids), tokens], dim=-1)
        return self.projection(tokens)


# 2. The biLSTM --------------------------------------------------------------------------------------------------
def reference_lstm_step(input_gates, h, c, recurrent_weight, projection_weight, cell_clip=None, proj_clip=None):
    """One step of both directions (AllenNLP's `lstm_cell_with_projection`), which the int8 and ONNX steps follow:
    `input_gates` (2, B, 4C) = x W_input^T + bias, h (2, B, P), c (2, B, C), `ElmoBiLstmLayer`'s weights -> (h, c)."""
    gates = torch.baddbmm(input_gates, h, recurrent_weight.transpose(1, 2))
    input_gate, forget_gate, cell_input, output_gate = gates.chunk(4, dim=-1)
    cell = torch.sigmoid(input_gate) * torch.tanh(cell_input) + torch.sigmoid(forget_gate) * c
    if cell_clip:
        cell = cell.clamp(-cell_clip, cell_clip)
    hidden = torch.bmm(torch.sigmoid(output_gate) * torch.tanh(cell), projection_weight.transpose(1, 2))
    if proj_clip:
        hidden = hidden.clamp(-proj_clip, proj_clip)
    return hidden, cell


class ElmoBiLstmLayer(nn.Module):
    """One layer of both LSTM directions, weights stacked on a leading axis of size 2 (forward, backward), in
    `nn.Linear`'s (out, in) layout: `input_weight` (2, 4C, input_dim), `recurrent_weight` (2, 4C, P), `bias` (2, 4C),
    `projection_weight` (2, P, C). Gate blocks are ordered i, f, g, o."""

    def __init__(self, input_dim: int, cell_dim: int, projection_dim: int):
        super().__init__()
        self.cell_dim = cell_dim
        self.input_weight = nn.Parameter(torch.empty(2, 4 * cell_dim, input_dim))
        self.recurrent_weight = nn.Parameter(torch.empty(2, 4 * cell_dim, projection_dim))
        self.bias = nn.Parameter(torch.empty(2, 4 * cell_dim))
        self.projection_weight = nn.Parameter(torch.empty(2, projection_dim, cell_dim))

    def gate_bias(self, forget_bias: float) -> torch.Tensor:
        """(2, 4C): the stored bias plus the forget-gate constant, which TensorFlow's LSTM adds at run time."""
        offset = torch.zeros_like(self.bias[0])
        offset[self.cell_dim : 2 * self.cell_dim] = forget_bias
        return self.bias + offset

    def forward(self, inputs, running, state, config: ElmoConfig):
        """inputs (2, B, T, I) with the backward direction already reversed per row, running (B, T) bool, state
        (h (2, B, P), c (2, B, C)) -> outputs (2, B, T, P), zero where a row is not running, and the final (h, c):
        a row's state stops changing after its last step."""
        bias = self.gate_bias(config.lstm_forget_bias).unsqueeze(1)
        input_gates = torch.baddbmm(bias, inputs.flatten(1, 2), self.input_weight.transpose(1, 2))
        h, c = state
        outputs = []
        # Unbinding once keeps autograd from materialising a full-size gradient for every per-step slice.
        for step_gates, keep in zip(input_gates.view(2, *running.shape, -1).unbind(2), running.unsqueeze(-1).unbind(1)):
            hidden, cell = reference_lstm_step(step_gates, h, c, self.recurrent_weight, self.projection_weight,
                                               config.cell_clip, config.proj_clip)
            h, c = torch.where(keep, hidden, h), torch.where(keep, cell, c)
            outputs.append(hidden * keep)
        return torch.stack(outputs, dim=2), (h, c)


class ElmoBiLstm(nn.Module):
    """Forward and backward multi-layer LSTM language-model encoders (no weight sharing between directions). The
    backward direction reads each sentence reversed within its own length; layers >= 1 add their input to their
    output when `use_skip_connections` is set."""

    def __init__(self, config: ElmoConfig):
        super().__init__()
        self.config = config
        self.layers = nn.ModuleList([ElmoBiLstmLayer(config.projection_dim, config.lstm_cell_dim, config.projection_dim)
                                     for _ in range(config.num_lstm_layers)])

    def forward(self, inputs, lengths, initial_state=None, dropout: float = 0.0):
        """(B, T, P) token `inputs` (ignored past each row's `lengths` (B,), boundaries included), `initial_state`
        (h (L, 2, B, P), c (L, 2, B, C); zeros when None), `dropout` on each layer's output (pretraining) -> L layers
        (B, T, 2P) `[forward; backward]`, zero past each length, and the final (h, c)."""
        config = self.config
        batch, steps, _ = inputs.shape
        positions = torch.arange(steps, device=inputs.device)
        running = positions < lengths.unsqueeze(1)
        # Reverses every row within its own length; applying it twice is the identity.
        reverse = torch.where(running, lengths.unsqueeze(1) - 1 - positions, positions).unsqueeze(-1)
        inputs = inputs.masked_fill(~running.unsqueeze(-1), 0)
        layer_input = torch.stack([inputs, inputs.gather(1, reverse.expand_as(inputs))])  # (2, B, T, P)
        if initial_state is None:
            h = inputs.new_zeros(config.num_lstm_layers, 2, batch, config.projection_dim)
            c = inputs.new_zeros(config.num_lstm_layers, 2, batch, config.lstm_cell_dim)
        else:
            h, c = initial_state
        layers, finals = [], []
        for index, layer in enumerate(self.layers):
            output, final = layer(layer_input, running, (h[index], c[index]), config)
            if config.use_skip_connections and index > 0:
                output = output + layer_input
            if dropout and self.training:
                output = F.dropout(output, dropout, training=True)
            finals.append(final)
            layer_input = output
            layers.append(torch.cat([output[0], output[1].gather(1, reverse.expand_as(output[1]))], dim=-1))
        return layers, tuple(torch.stack(states) for states in zip(*finals))  # (h, c)


# 3. Mixing the layers -------------------------------------------------------------------------------------------
class ElmoScalarMix(nn.Module):
    """``gamma * sum_j softmax(w)_j * layer_j`` with w initialised to 0 and gamma to 1 (the paper's equation 1). With
    `layer_norm`, each layer is first normalised by one mean and variance over all of its unmasked elements in the
    batch (AllenNLP's definition, not a per-token LayerNorm)."""

    def __init__(self, num_layers: int, layer_norm: bool = False):
        super().__init__()
        self.layer_norm = layer_norm
        self.scalar_parameters = nn.Parameter(torch.zeros(num_layers))
        self.gamma = nn.Parameter(torch.ones(1))

    def forward(self, layers, mask: torch.Tensor | None = None) -> torch.Tensor:
        if len(layers) != self.scalar_parameters.numel():
            raise ValueError(f"expected {self.scalar_parameters.numel()} layers, got {len(layers)}")
        weights = torch.softmax(self.scalar_parameters, dim=0)
        if self.layer_norm:
            if mask is None:
                raise ValueError("layer-normalised mixing needs the word mask")
            layers = [_masked_layer_norm(layer, mask) for layer in layers]
        return self.gamma * sum(weight * layer for weight, layer in zip(weights, layers))


def _masked_layer_norm(layer: torch.Tensor, mask: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    mask = mask.unsqueeze(-1).to(layer.dtype)
    count = mask.sum() * layer.shape[-1]
    mean = (layer * mask).sum() / count
    variance = (((layer - mean) * mask) ** 2).sum() / count
    return (layer - mean) / torch.sqrt(variance + eps)


# 4. The encoder ------------------------------------------------------------------------------------------------
@dataclass
class ElmoModelOutput(ModelOutput):
    """
    Output of [`ElmoModel`] and `ElmoBiLm`; `num_words` excludes the `<S>`/`</S>` positions unless
    `keep_sentence_boundaries=True`.

    Args:
        last_hidden_state (`torch.FloatTensor` of shape `(batch_size, num_words, 2 * projection_dim)`):
            The layer `config.feature_layer` chooses: by default the top biLSTM layer, `[forward; backward]`.
        mixes (`torch.FloatTensor` of shape `(batch_size, num_output_representations, num_words, 2 * projection_dim)`):
            The learned ELMo mixes, batch first (so that pipelines split a batch back into its texts).
        hidden_states (`tuple(torch.FloatTensor)`, returned unless `output_hidden_states=False`): All L+1 layers,
            shaped as `last_hidden_state`: layer 0 is `[token; token]`, layer j >= 1 is `[forward_j; backward_j]`.
        mask (`torch.FloatTensor` of shape `(batch_size, num_words)`): 1.0 at real words, 0.0 at padding.
        final_state (`tuple(torch.FloatTensor)`, *optional*): `(h, c)` after each sentence, shaped as `forward`'s
            `initial_state` (direction 0 is forward); given with `return_state=True`, to feed back as `initial_state`.
    """

    last_hidden_state: torch.FloatTensor | None = None
    mixes: torch.FloatTensor | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None
    mask: torch.FloatTensor | None = None
    final_state: tuple[torch.FloatTensor, torch.FloatTensor] | None = None

    @property
    def elmo_representations(self) -> tuple[torch.FloatTensor, ...]:
        """The learned mixes as AllenNLP's `Elmo` returns them: a tuple of `(batch_size, num_words, 2P)` tensors."""
        return () if self.mixes is None else tuple(self.mixes.unbind(1))


# Weights a model legitimately lacks when it starts from an encoder or a pretraining checkpoint: a head's own layers.
_HEAD_WEIGHTS = ("scalar_mix", "elmo.scalar_mixes", "classifier", "pre_classifier", "encoder.", "crf.",
                 "token_features.", "softmax.")


def weight_problems(model: nn.Module, loading_info: dict, source) -> str | None:
    """What makes the checkpoint `source` unusable, from transformers' load report and the loaded values, in one line
    naming its weights: tensors of the biLM it lacks (they would run random), tensors the model does not have, values
    that are not finite."""
    parts = []
    for kind, found in (("missing_keys", "lack {} of the biLM's tensors"),
                        ("unexpected_keys", "hold {} tensors this model does not have")):
        keys = sorted(key for key in loading_info.get(kind, ()) if not key.startswith(_HEAD_WEIGHTS))
        if keys:
            parts.append(f"{found.format(len(keys))} ({', '.join(keys[:4])}{', ...' if len(keys) > 4 else ''})")
    damaged = [name for name, tensor in model.state_dict().items()
               if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all())]
    if damaged:
        parts.append(f"hold NaN or infinite values ({', '.join(damaged[:4])}{', ...' if len(damaged) > 4 else ''})")
    if not parts:
        return None
    weights = os.path.join(source, "model.safetensors")
    where = weights if os.path.isfile(weights) else f"the safetensors weights of {source}"
    return f"{where}: the weights {' and '.join(parts)}: load the folder the weights belong to"


# Keyword arguments transformers' own code may pass to any model's forward; they do not apply to ELMo.
_IGNORED_ARGUMENTS = frozenset({"token_type_ids", "position_ids", "use_cache", "num_items_in_batch"})


def _refuse_unknown_arguments(model_name: str, kwargs: dict) -> None:
    """A misspelt argument (`initial_states=`) would otherwise be ignored without a word."""
    if kwargs.get("output_attentions"):
        raise ValueError(f"{model_name} has no attention layers: output_attentions=True cannot be honoured")
    unknown = sorted(set(kwargs) - _IGNORED_ARGUMENTS - {"output_attentions"})
    if unknown:
        raise TypeError(f"{model_name}.forward() got unexpected keyword arguments: {', '.join(unknown)}")


class ElmoBiLmMixin:
    """The ELMo encoder's computations: character ids of words in, every biLM layer and the learned ELMo mixes out.
    Stateless by default: each sentence starts from a zero LSTM state, so its vectors depend neither on the batch it
    is in nor on earlier calls; pass `initial_state` / `return_state=True` to carry state between calls as AllenNLP
    and bilm-tf do. `forward` checks shapes only; `validate_inputs` checks the values too. The class using it is an
    `nn.Module` with a `config` (`ElmoConfig`) and `device`, and calls `_add_bilm_modules` from its `__init__`."""

    # A pretraining checkpoint also holds the language-model softmax; the encoder does not need it (`re.search`ed).
    _keys_to_ignore_on_load_unexpected = [r"softmax\."]

    def _add_bilm_modules(self, config: ElmoConfig) -> None:
        self.char_encoder = ElmoCharacterEncoder(config)
        self.bilstm = ElmoBiLstm(config)
        self.scalar_mixes = nn.ModuleList([ElmoScalarMix(config.num_lstm_layers + 1, config.scalar_mix_layer_norm)
                                           for _ in range(config.num_output_representations)])
        self._lstm_implementation = _check_implementation(None)

    def set_lstm_implementation(self, implementation: str | None = None) -> None:
        """Choose how the model computes from now on: a name in `ElmoKernelInterface` (None: "auto" where it is
        registered, else "reference"); not saved in config.json."""
        self._lstm_implementation = _check_implementation(implementation)

    @property
    def lstm_implementation(self) -> str:
        return self._lstm_implementation

    def train(self, mode: bool = True):
        release = ALL_LSTM_FUNCTIONS[self._lstm_implementation].release
        if mode and release is not None:
            release(self)
        return super().train(mode)

    def validate_inputs(self, input_ids, attention_mask=None, word_ids=None) -> None:
        """Check the values of a batch (ids inside the vocabularies, a 0/1 mask with the words first, no padded
        word marked as real): ValueError naming the first problem. This reads the tensors (a host synchronisation
        on accelerators), so `forward` checks shapes only; the tokenizer's outputs always pass."""
        self._check_shapes(input_ids, attention_mask, word_ids)
        config = self.config
        if input_ids.numel() and not bool(((input_ids >= 0) & (input_ids < config.char_vocab_size)).all()):
            bad = input_ids[(input_ids < 0) | (input_ids >= config.char_vocab_size)][0]
            raise ValueError(f"input_ids contains character id {int(bad)}, outside [0, {config.char_vocab_size - 1}]")
        words = (input_ids > 0).any(dim=-1)
        mask = words if attention_mask is None else attention_mask
        if attention_mask is not None and not bool(((mask == 0) | (mask == 1)).all()):
            raise ValueError("attention_mask must hold only 0 (padding) and 1 (a word)")
        mask = mask.bool()
        if not torch.equal(mask, torch.arange(mask.shape[1], device=mask.device) < mask.sum(1, keepdim=True)):
            raise ValueError("padding must come after the words: each row's mask must be ones then zeros")
        if bool((mask & ~words).any()):
            raise ValueError("attention_mask marks a padded (all-zero) word position as a real word")
        if config.word_vocab_size:  # `_check_shapes` made sure word_ids are there, shaped as the mask
            real = word_ids[mask]
            if real.numel() and not bool(((real >= 0) & (real < config.word_vocab_size)).all()):
                bad = real[(real < 0) | (real >= config.word_vocab_size)][0]
                raise ValueError(f"word_ids contains word id {int(bad)}, outside [0, {config.word_vocab_size - 1}]")

    def _check_shapes(self, input_ids, attention_mask=None, word_ids=None) -> None:
        width = self.config.max_characters_per_token
        if not isinstance(input_ids, torch.Tensor):
            raise TypeError(f"input_ids must be a torch.Tensor, got {type(input_ids).__name__}")
        if input_ids.dim() != 3 or input_ids.shape[-1] != width:
            raise ValueError(f"input_ids must have shape (batch, words, {width}) of character ids, got "
                             f"{tuple(input_ids.shape)}")
        if input_ids.dtype.is_floating_point or input_ids.dtype == torch.bool:
            raise TypeError(f"input_ids must be integer character ids, got dtype {input_ids.dtype}")
        if input_ids.shape[0] == 0:
            raise ValueError("empty batch: input_ids has batch size 0")
        if attention_mask is not None and tuple(attention_mask.shape) != tuple(input_ids.shape[:2]):
            raise ValueError(f"attention_mask must have shape {tuple(input_ids.shape[:2])} (batch, words), "
                             f"got {tuple(attention_mask.shape)}")
        if self.config.word_vocab_size:
            if word_ids is None:
                raise ValueError("this model has a word embedding: pass `word_ids` (from the tokenizer) with "
                                 "`input_ids`")
            if tuple(word_ids.shape) != tuple(input_ids.shape[:2]) or word_ids.dtype.is_floating_point:
                raise ValueError(f"word_ids must be integer ids of shape {tuple(input_ids.shape[:2])} (batch, words), "
                                 f"got {tuple(word_ids.shape)} {word_ids.dtype}")
        elif word_ids is not None:
            raise ValueError("this model has no word embedding: word_ids must be None")

    def sentence_boundary_char_ids(self) -> torch.LongTensor:
        """`(2, max_characters_per_token)` character ids of the `<S>` and `</S>` pseudo-words the model adds."""
        return torch.tensor([self.config.bos_char_ids, self.config.eos_char_ids], device=self.device)

    def token_embeddings(self, char_ids: torch.Tensor) -> torch.Tensor:
        """Layer 0 of single words (`(..., max_characters_per_token)` ids -> `(..., projection_dim)`), without the
        LSTMs; e.g. `ElmoTokenizer.word_to_char_ids` rows or `sentence_boundary_char_ids()`."""
        if self.config.word_vocab_size:
            raise ValueError("this model also needs word ids for its token vectors; use forward()")
        if char_ids.dim() < 1 or char_ids.shape[-1] != self.config.max_characters_per_token:
            raise ValueError(f"char_ids must end in a dimension of {self.config.max_characters_per_token}, "
                             f"got shape {tuple(char_ids.shape)}")
        flat = char_ids.reshape(-1, char_ids.shape[-1]).long()
        return self.encode_tokens(self.char_encoder, flat).reshape(*char_ids.shape[:-1], self.config.projection_dim)

    def _kernel_functions(self) -> ElmoKernelFunctions:
        # Compilers and exporters trace this file's plain PyTorch, as transformers' attention functions step aside.
        if torch.compiler.is_compiling() or torch.compiler.is_exporting():
            return ALL_LSTM_FUNCTIONS["reference"]
        return ALL_LSTM_FUNCTIONS[self._lstm_implementation]

    def encode_tokens(self, encoder: ElmoCharacterEncoder, char_ids, word_ids=None) -> torch.Tensor:
        """Layer 0 of `(N, max_characters_per_token)` rows with `encoder` (this model's, or a head's own x_k
        encoder), by the chosen implementation; all-zero rows (padding) come out as zeros."""
        tokens = self._kernel_functions().character_encoder(encoder, char_ids, word_ids)
        return tokens * (char_ids != 0).any(dim=-1, keepdim=True).to(tokens.dtype)

    def run_bilstm(self, tokens, lengths, initial_state=None, dropout: float = 0.0, skip_final_step: bool = False):
        """`self.bilstm(...)` by the chosen implementation (see `reference_bilstm`)."""
        return self._kernel_functions().bilstm(self.bilstm, tokens, lengths, initial_state, dropout, skip_final_step)

    def token_representations(self, input_ids, mask, word_ids=None):
        """Layer 0 with `<S>`/`</S>` added: ((B, W+2, P) zero past each end, lengths (B,) = words + 2)."""
        config = self.config
        batch, num_words, width = input_ids.shape
        lengths = mask.sum(dim=1) + 2
        positions = torch.arange(num_words + 2, device=input_ids.device)
        char_ids = F.pad(input_ids * mask.unsqueeze(-1).to(input_ids.dtype), (0, 0, 1, 1))
        char_ids[:, 0] = input_ids.new_tensor(config.bos_char_ids)
        end = (positions == (lengths - 1).unsqueeze(1)).unsqueeze(-1)
        char_ids = torch.where(end, input_ids.new_tensor(config.eos_char_ids), char_ids)
        token_word_ids = None
        if config.word_vocab_size:  # `<S>` first, `</S>` at every position past the words (each row's end among them)
            token_word_ids = torch.cat([word_ids.new_full((batch, 1), config.bos_word_id),
                                        word_ids.masked_fill(~mask, config.eos_word_id),
                                        word_ids.new_full((batch, 1), config.eos_word_id)], dim=1).to(input_ids.device)
            token_word_ids = token_word_ids.reshape(-1)
        tokens = self.encode_tokens(self.char_encoder, char_ids.reshape(-1, width), token_word_ids)
        return tokens.view(batch, num_words + 2, -1), lengths

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                word_ids: torch.Tensor | None = None, initial_state: tuple[torch.Tensor, torch.Tensor] | None = None,
                return_state: bool = False, keep_sentence_boundaries: bool = False,
                output_hidden_states: bool | None = None, return_dict: bool | None = None,
                **kwargs) -> ElmoModelOutput | tuple:
        r"""
        Args:
            input_ids (`torch.LongTensor` of shape `(batch_size, num_words, max_characters_per_token)`):
                Character ids from [`ElmoTokenizer`]; a padded word position is all zeros.
            attention_mask (`torch.Tensor` of shape `(batch_size, num_words)`, *optional*):
                1 for real words, 0 for padding (after the words); derived from `input_ids` when omitted.
            word_ids (`torch.LongTensor` of shape `(batch_size, num_words)`, *optional*):
                Word-vocabulary ids from the tokenizer, for models with a word embedding (`config.word_vocab_size`).
            initial_state (`tuple(torch.FloatTensor)`, *optional*): `(h, c)` of shapes
                `(num_layers, 2, batch_size, projection_dim)` and `(num_layers, 2, batch_size, lstm_cell_dim)`.
            return_state (`bool`): also return the state after each sentence as `final_state`.
            keep_sentence_boundaries (`bool`): keep the `<S>` and `</S>` positions in the outputs.
            output_hidden_states (`bool`, *optional*): return the L+1 layers; `config.output_hidden_states` when
                not given, which for ELMo (whose layers are its output) defaults to True.
        """
        _refuse_unknown_arguments(type(self).__name__, kwargs)
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        if output_hidden_states is None:
            output_hidden_states = self.config.output_hidden_states
        self._check_shapes(input_ids, attention_mask, word_ids)
        input_ids = input_ids.long()  # any integer dtype indexes the embedding as int64
        mask = (input_ids > 0).any(dim=-1) if attention_mask is None else attention_mask.to(input_ids.device).bool()
        tokens, lengths = self.token_representations(input_ids, mask, word_ids)
        initial_state = None if initial_state is None else self._check_state(initial_state, tokens)
        with_boundaries = torch.arange(tokens.shape[1], device=tokens.device) < lengths.unsqueeze(1)
        token_layer = torch.cat([tokens, tokens], dim=-1)
        keep = mask.unsqueeze(-1).to(tokens.dtype)
        if keep_sentence_boundaries:
            layer0, output_mask, lstm_input = token_layer, with_boundaries, token_layer[..., : tokens.shape[-1]]
        else:
            layer0, output_mask = token_layer[:, 1:-1] * keep, mask
            # The biLSTM reads the returned layer 0, boundaries put back (same values): gradients reach what it returns.
            lstm_input = torch.where(F.pad(mask, (1, 1)).unsqueeze(-1),
                                     F.pad(layer0[..., : tokens.shape[-1]], (0, 0, 1, 1)), tokens)
        # A layer-normalised mix, as AllenNLP computes it, normalises each layer over the words *and* the
        # <S>/</S> positions, and only then drops the boundaries: it needs their outputs.
        normalised_mix = any(mix.layer_norm for mix in self.scalar_mixes)
        skip_final_step = not (keep_sentence_boundaries or return_state or normalised_mix)
        lstm_layers, final_state = self.run_bilstm(lstm_input, lengths, initial_state, skip_final_step=skip_final_step)
        layers = [layer0] + [layer if keep_sentence_boundaries else layer[:, 1:-1] * keep for layer in lstm_layers]
        mixes = tuple(mix([token_layer] + lstm_layers, with_boundaries)[:, 1:-1] * keep
                      if mix.layer_norm and not keep_sentence_boundaries else mix(layers, output_mask)
                      for mix in self.scalar_mixes)
        chosen = self.config.feature_layer
        features = (torch.stack(layers).mean(dim=0) if chosen == "average"
                    else mixes[0] if chosen == "mix" else layers[chosen])
        outputs = ElmoModelOutput(
            last_hidden_state=features, hidden_states=tuple(layers) if output_hidden_states else None,
            mixes=torch.stack(mixes, dim=1) if mixes else features.new_zeros(features.shape[0], 0, *features.shape[1:]),
            mask=output_mask.to(tokens.dtype), final_state=final_state if return_state else None)
        return outputs if return_dict else outputs.to_tuple()

    def _check_state(self, state, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        config = self.config
        if not (isinstance(state, (tuple, list)) and len(state) == 2):
            raise ValueError("initial_state must be a pair (h, c)")
        h, c = state
        for name, part in (("h", h), ("c", c)):
            if not isinstance(part, torch.Tensor) or not part.dtype.is_floating_point:
                what = part.dtype if isinstance(part, torch.Tensor) else type(part).__name__
                raise TypeError(f"initial_state {name} must be a floating-point torch.Tensor, got {what}")
        expected_h = (config.num_lstm_layers, 2, like.shape[0], config.projection_dim)
        expected_c = (config.num_lstm_layers, 2, like.shape[0], config.lstm_cell_dim)
        if tuple(h.shape) != expected_h or tuple(c.shape) != expected_c:
            raise ValueError(f"initial_state shapes must be h {expected_h} and c {expected_c}, "
                             f"got h {tuple(h.shape)} and c {tuple(c.shape)}")
        return h.to(like), c.to(like)


class ElmoBiLm(ElmoBiLmMixin, nn.Module):
    """`ElmoModel` without transformers' model machinery: the same modules, weight names and `forward`, as a plain
    `nn.Module` whose import leaves out transformers' model classes. The hf-elmo commands that only run an encoder
    load saved weights into it to start fast; everything else (training, saving, the Hub) uses `ElmoModel`, which also
    initialises weights for training: load a state dict into this one."""

    def __init__(self, config: ElmoConfig):
        super().__init__()
        config.check_values()
        self.config = config
        self._add_bilm_modules(config)

    @property
    def device(self) -> torch.device:
        return self.char_encoder.projection.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.char_encoder.projection.weight.dtype


__all__ = ["ALL_LSTM_FUNCTIONS", "ElmoKernelFunctions", "ElmoKernelInterface", "reference_bilstm",
           "reference_character_encoder", "reference_lstm_step", "ElmoHighwayLayer", "ElmoHighway",
           "ElmoCharacterEncoder", "ElmoBiLstmLayer", "ElmoBiLstm", "ElmoScalarMix", "ElmoModelOutput",
           "weight_problems", "ElmoBiLmMixin", "ElmoBiLm"]
