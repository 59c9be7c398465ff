"""PyTorch ELMo (Peters et al., 2018), top-down in the order data flows through the model:

1. `ElmoCharacterEncoder`  character ids (words, characters) -> context-insensitive token vectors (layer 0)
2. `ElmoBiLstm`            token vectors -> forward and backward LSTM layers with cell/projection clipping
3. `ElmoScalarMix`         L+1 layers -> gamma * sum_j softmax(w)_j * layer_j
4. `ElmoModel`             the encoder users load: adds sentence boundaries, returns every layer and the mixes
5. heads                   `ElmoForTokenClassification` (+ `ElmoCrf`), `ElmoForCharacterTagging`,
                           `ElmoForSequenceClassification`

This plain PyTorch defines the numbers (AllenNLP's / bilm-tf's). Faster functions for layer 0 and the biLSTM plug
in through `ElmoKernelInterface`, as attention functions do through transformers' `AttentionInterface`: chosen by
name (`lstm_implementation`) when a model is loaded or later, never saved, looked up when called, and set aside
while torch.compile / torch.export trace the model.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel
from transformers.modeling_outputs import SequenceClassifierOutput, TokenClassifierOutput
from transformers.utils import ModelOutput
from transformers.utils.generic import GeneralInterface

try:
    from transformers import initialization as init
except ImportError:  # transformers 4.x: torch's (4.x initialises only the weights it did not load)
    import types

    init = types.SimpleNamespace(**vars(nn.init), copy_=lambda tensor, other: tensor.copy_(other))

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
    and optionally `release(model)`, called when an `ElmoModel` goes back to training, to drop what the functions
    keep for it (copies of weights that are about to change)."""

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

    def forward(self, inputs, running, state, config: ElmoConfig):
        """inputs (2, B, T, I) with the backward direction already reversed per row, running (B, T) bool, state
        (h (2, B, P), c (2, B, C)) -> outputs (2, B, T, P), zero where a row is not running, and the final (h, c):
        a row's state stops changing after its last step."""
        forget_bias = torch.zeros_like(self.bias[0])
        forget_bias[self.cell_dim : 2 * self.cell_dim] = config.lstm_forget_bias  # TensorFlow adds it at run time
        bias = (self.bias + forget_bias).unsqueeze(1)
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


# 4. The model ---------------------------------------------------------------------------------------------------
@dataclass
class ElmoModelOutput(ModelOutput):
    """
    Output of [`ElmoModel`]; `num_words` excludes the `<S>`/`</S>` positions unless `keep_sentence_boundaries=True`.

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


def weight_problems(model: ElmoPreTrainedModel, loading_info: dict, source) -> str | None:
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


class ElmoPreTrainedModel(PreTrainedModel):
    config: ElmoConfig
    config_class = ElmoConfig
    base_model_prefix = "elmo"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = False

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, lstm_implementation: str | None = None, **kwargs):
        r"""transformers' `from_pretrained` (from safetensors: a pytorch_model.bin is never unpickled), plus
        `lstm_implementation` (a name in `ElmoKernelInterface`; not saved). A checkpoint that lacks tensors of the
        biLM, holds foreign ones or holds values that are not finite is refused (ValueError naming them), unless the
        caller inspects the load with `output_loading_info=True`."""
        implementation = _check_implementation(lstm_implementation)
        kwargs.setdefault("use_safetensors", True)
        inspecting = kwargs.pop("output_loading_info", False)
        model, loading_info = super().from_pretrained(pretrained_model_name_or_path, *args, output_loading_info=True,
                                                      **kwargs)
        model.set_lstm_implementation(implementation)
        model._after_loading(loading_info)
        if inspecting:
            return model, loading_info
        source = pretrained_model_name_or_path
        if source is not None and (problem := weight_problems(model, loading_info, source)):
            raise ValueError(f"{problem}, or pass output_loading_info=True to inspect what was loaded")
        return model

    def _after_loading(self, loading_info: dict) -> None:
        """What a head does once its weights are in (see `ElmoHeadModel`)."""

    def __init__(self, config: ElmoConfig, *inputs, **kwargs):
        config.check_values()  # `from_pretrained(..., field=value)` sets its arguments after the config was checked
        super().__init__(config, *inputs, **kwargs)

    def save_pretrained(self, save_directory, *args, **kwargs):
        # transformers writes only the saved class's own entry into `config.auto_map`; list every ELMo class
        # registered for remote code, so that any head loads from this folder.
        if self._auto_class is not None:  # is_remote_code() (5.x)
            self.config.auto_map = {**(getattr(self.config, "auto_map", None) or {}),
                                    **_remote_code_auto_map(type(self))}
        result = super().save_pretrained(save_directory, *args, **kwargs)
        # safetensors writes through mkstemp (mode 0600): give the weights the mode config.json got from the umask.
        config_file = os.path.join(save_directory, "config.json")
        if kwargs.get("is_main_process", True) and os.path.isfile(config_file):
            mode = os.stat(config_file).st_mode & 0o777
            for name in os.listdir(save_directory):
                if name.endswith(".safetensors") and not os.path.islink(os.path.join(save_directory, name)):
                    os.chmod(os.path.join(save_directory, name), mode)
        return result

    def set_lstm_implementation(self, implementation: str | None = None) -> None:
        """Choose how the model computes from now on: a name in `ElmoKernelInterface` (None: "auto" where it is
        registered, else "reference"); not saved in config.json."""
        self.base_model._lstm_implementation = _check_implementation(implementation)

    @property
    def lstm_implementation(self) -> str:
        return self.base_model._lstm_implementation

    @torch.no_grad()
    def _init_weights(self, module):
        if isinstance(module, ElmoBiLstmLayer):
            bound = module.cell_dim**-0.5
            for weight in (module.input_weight, module.recurrent_weight, module.projection_weight):
                init.uniform_(weight, -bound, bound)
            init.zeros_(module.bias)
        elif isinstance(module, ElmoHighwayLayer):
            init.normal_(module.weight, std=module.in_features**-0.5)
            # A negative carry bias starts every highway layer close to the identity (as bilm-tf does).
            size = module.in_features
            init.copy_(module.bias, torch.cat([torch.zeros(size), torch.full((size,), -2.0)]))
        elif isinstance(module, ElmoScalarMix):
            init.zeros_(module.scalar_parameters)
            init.ones_(module.gamma)
        elif isinstance(module, nn.Embedding):
            init.uniform_(module.weight, -1.0, 1.0)
            # Slicing drops the "already loaded" flag, so check it on the full weight.
            if module.padding_idx is not None and not getattr(module.weight, "_is_hf_initialized", False):
                init.zeros_(module.weight[module.padding_idx])
        elif isinstance(module, nn.Conv1d):
            init.normal_(module.weight, std=(module.in_channels * module.kernel_size[0]) ** -0.5)
            init.zeros_(module.bias)
        elif isinstance(module, nn.Linear):
            init.normal_(module.weight, std=module.in_features**-0.5)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, nn.LSTM):
            bound = module.hidden_size**-0.5
            for parameter in module.parameters():
                init.uniform_(parameter, -bound, bound)
        elif isinstance(module, ElmoCrf):
            for parameter in module.parameters():
                init.zeros_(parameter)


def _remote_code_auto_map(model_class: type) -> dict[str, str]:
    """`{auto class: "modeling_elmo.Class"}` for the ELMo classes of this file registered for remote code: the first
    class of each auto class, or the saved class (a character tagger's token classification)."""
    auto_map = {}
    for value in vars(sys.modules[__name__]).values():
        auto_class = value.__dict__.get("_auto_class") if isinstance(value, type) else None
        if auto_class is not None and issubclass(value, ElmoPreTrainedModel) and (
                value is model_class or auto_class not in auto_map):
            auto_map[auto_class] = f"{__name__.rsplit('.', 1)[-1]}.{value.__name__}"
    return auto_map


# Keyword arguments transformers' own code may pass to any model's forward; they do not apply to ELMo.
_IGNORED_ARGUMENTS = frozenset({"token_type_ids", "position_ids", "use_cache", "num_items_in_batch"})


def _refuse_unknown_arguments(model_name: str, kwargs: dict) -> None:
    """A misspelt argument (`initial_states=`) would otherwise be ignored without a word."""
    if kwargs.get("output_attentions"):
        raise ValueError(f"{model_name} has no attention layers: output_attentions=True cannot be honoured")
    unknown = sorted(set(kwargs) - _IGNORED_ARGUMENTS - {"output_attentions"})
    if unknown:
        raise TypeError(f"{model_name}.forward() got unexpected keyword arguments: {', '.join(unknown)}")


class ElmoModel(ElmoPreTrainedModel):
    """The ELMo encoder: character ids of words in, every biLM layer and the learned ELMo mixes out. Stateless by
    default: each sentence starts from a zero LSTM state, so its vectors depend neither on the batch it is in nor on
    earlier calls; pass `initial_state` / `return_state=True` to carry state between calls as AllenNLP and bilm-tf
    do. `forward` checks shapes only; `validate_inputs` checks the values too."""

    # A pretraining checkpoint also holds the language-model softmax; the encoder does not need it.
    _keys_to_ignore_on_load_unexpected = [r"softmax\."]

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        self.char_encoder = ElmoCharacterEncoder(config)
        self.bilstm = ElmoBiLstm(config)
        self.scalar_mixes = nn.ModuleList([ElmoScalarMix(config.num_lstm_layers + 1, config.scalar_mix_layer_norm)
                                           for _ in range(config.num_output_representations)])
        self._lstm_implementation = _check_implementation(None)
        self.post_init()

    def get_input_embeddings(self):
        return self.char_encoder.char_embedding

    def set_input_embeddings(self, value: nn.Embedding):
        self.char_encoder.char_embedding = value

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


# 5. Heads -------------------------------------------------------------------------------------------------------
# Score given to tags that a partial label rules out; finite so that gradients stay defined.
_IMPOSSIBLE = -1e4


class ElmoCrf(nn.Module):
    """Linear-chain conditional random field over tag scores: a path y_1..y_n scores ``start[y_1] + sum_t
    emissions[t, y_t] + sum_t transitions[y_{t-1}, y_t] + end[y_n]``. Methods take `emissions` (batch, words, tags)
    and a `mask` (batch, words) of real words (ones then zeros per row); rows with no words contribute nothing."""

    def __init__(self, num_tags: int):
        super().__init__()
        self.start_transitions = nn.Parameter(torch.zeros(num_tags))
        self.end_transitions = nn.Parameter(torch.zeros(num_tags))
        self.transitions = nn.Parameter(torch.zeros(num_tags, num_tags))  # [from, to]

    def _forward_scores(self, emissions, mask) -> list[torch.Tensor]:
        """log-sum of the scores of every path ending in each tag at each word (a row's score stops at its end)."""
        alphas = [self.start_transitions + emissions[:, 0]]
        for t in range(1, emissions.shape[1]):
            step = torch.logsumexp(alphas[-1].unsqueeze(2) + self.transitions + emissions[:, t].unsqueeze(1), dim=1)
            alphas.append(torch.where(mask[:, t : t + 1], step, alphas[-1]))
        return alphas

    def log_partition(self, emissions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """log Z: logsumexp of the scores of every path, shape (batch,)."""
        mask = mask.bool()
        if emissions.shape[1] == 0:
            return emissions.new_zeros(emissions.shape[0])
        log_z = torch.logsumexp(self._forward_scores(emissions, mask)[-1] + self.end_transitions, dim=1)
        return torch.where(mask.any(dim=1), log_z, torch.zeros_like(log_z))

    def log_likelihood(self, emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """log p(tags | emissions) per sentence; a tag of -100 on a real word leaves it unlabelled (all tags count)."""
        allowed = F.one_hot(tags.clamp(min=0), emissions.shape[-1]).bool() | (tags == -100).unsqueeze(-1)
        constrained = self.log_partition(emissions.masked_fill(~allowed, _IMPOSSIBLE), mask)
        return constrained - self.log_partition(emissions, mask)

    def marginals(self, emissions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """p(tag at word t | sentence) by forward-backward, (batch, words, tags), 0 at padding."""
        mask = mask.bool()
        num_words = emissions.shape[1]
        if num_words == 0:
            return torch.zeros_like(emissions)
        alphas = self._forward_scores(emissions, mask)
        end = self.end_transitions.expand_as(alphas[0])
        betas = [end]
        for t in range(num_words - 2, -1, -1):
            step = torch.logsumexp(self.transitions + (emissions[:, t + 1] + betas[-1]).unsqueeze(1), dim=2)
            # Word t is its sentence's last when word t+1 is padding: nothing follows but the end transition.
            betas.append(torch.where(mask[:, t + 1 : t + 2], step, end))
        log_z = torch.logsumexp(alphas[-1] + self.end_transitions, dim=1)
        scores = torch.stack(alphas, dim=1) + torch.stack(betas[::-1], dim=1) - log_z[:, None, None]
        return scores.exp() * mask.unsqueeze(-1).to(scores.dtype)

    def viterbi_decode(self, emissions: torch.Tensor, mask: torch.Tensor, pad_id: int = -100) -> torch.Tensor:
        """Highest-scoring tag sequence per sentence, (batch, words) with `pad_id` past each end."""
        mask = mask.bool()
        batch, num_words, num_tags = emissions.shape
        if num_words == 0:
            return torch.full((batch, 0), pad_id, dtype=torch.long, device=emissions.device)
        score = self.start_transitions + emissions[:, 0]
        keep = torch.arange(num_tags, device=emissions.device).expand(batch, num_tags)
        backpointers = []
        for t in range(1, num_words):
            best_score, best_previous = (score.unsqueeze(2) + self.transitions).max(dim=1)
            step_mask = mask[:, t : t + 1]
            score = torch.where(step_mask, best_score + emissions[:, t], score)
            # Past a row's end the path stays on its last tag, so backtracking starts from the true end.
            backpointers.append(torch.where(step_mask, best_previous, keep))
        path = [(score + self.end_transitions).argmax(dim=1)]
        for pointers in reversed(backpointers):
            path.append(pointers.gather(1, path[-1].unsqueeze(1)).squeeze(1))
        return torch.stack(path[::-1], dim=1).masked_fill(~mask, pad_id)


def reduce_loss(total: torch.Tensor, count, num_items_in_batch=None) -> torch.Tensor:
    """A sum over labelled items -> the mean over this batch's `count`, or over the whole accumulated batch's items
    when `Trainer` passes `num_items_in_batch`, so that accumulated micro-batches add up to the large batch's loss."""
    return total / (num_items_in_batch if num_items_in_batch is not None else torch.as_tensor(count).clamp(min=1))


def tagging_loss(logits, labels, mask, crf=None, num_items_in_batch=None) -> torch.Tensor:
    """Mean over labelled positions (-100: none) of the cross-entropy, or with a CRF of the sentences' summed
    negative log-likelihoods; `labels` and `mask` are (batch, positions)."""
    if tuple(labels.shape) != tuple(mask.shape):
        raise ValueError(f"labels must have shape (batch, words) = {tuple(mask.shape)}, one label per word; "
                         f"got {tuple(labels.shape)}")
    labels = labels.to(device=mask.device, dtype=torch.long)
    labelled = (labels != -100) & mask
    if not bool(((labels[labelled] >= 0) & (labels[labelled] < logits.shape[-1])).all()):
        bad = labels[labelled & ((labels < 0) | (labels >= logits.shape[-1]))][0]
        raise ValueError(f"label id {int(bad)} is outside [0, {logits.shape[-1]}) (use -100 for 'no label')")
    total = (-crf.log_likelihood(logits, labels.masked_fill(~mask, -100), mask).sum() if crf is not None
             else F.cross_entropy(logits[labelled].float(), labels[labelled], reduction="sum"))
    return reduce_loss(total, labelled.sum(), num_items_in_batch)


def classification_loss(logits, labels, problem_type: str | None = None, num_items_in_batch=None) -> torch.Tensor:
    """A sentence classifier's loss by `problem_type`, inferred as transformers does when unset: regression for one
    label, multi-label for floating-point labels, else single-label (class ids, -100 leaves a sentence out).
    (transformers' own loss averages regression and multi-label losses per micro-batch, hence this one.)"""
    batch, num_labels = logits.shape
    if problem_type is None:
        problem_type = ("regression" if num_labels == 1 else
                        "multi_label_classification" if labels.is_floating_point() else "single_label_classification")
    if problem_type == "regression":
        shapes = [(batch, num_labels)] + ([(batch,)] if num_labels == 1 else [])
        if tuple(labels.shape) not in shapes:
            raise ValueError(f"regression labels must have shape {' or '.join(map(str, shapes))}, "
                             f"got {tuple(labels.shape)}")
    elif problem_type == "multi_label_classification" and tuple(labels.shape) != (batch, num_labels):
        raise ValueError(f"multi-label classification (floating-point labels) needs labels of shape ({batch}, "
                         f"{num_labels}), got {tuple(labels.shape)}; for one class id per sentence pass integer labels")
    if problem_type in ("regression", "multi_label_classification"):
        targets = labels.to(device=logits.device, dtype=torch.float32).reshape(batch, num_labels)
        loss = F.mse_loss if problem_type == "regression" else F.binary_cross_entropy_with_logits
        return reduce_loss(loss(logits.float(), targets, reduction="sum"), targets.numel(), num_items_in_batch)
    if tuple(labels.shape) != (batch,):
        raise ValueError(f"labels must have shape (batch,) = ({batch},), got {tuple(labels.shape)}")
    labels = labels.to(device=logits.device, dtype=torch.long)
    labelled = labels != -100
    real = labels[labelled]
    if real.numel() and not bool(((real >= 0) & (real < num_labels)).all()):
        raise ValueError(f"class ids must be in [0, {num_labels}) or -100, got {real.tolist()}")
    total = F.cross_entropy(logits[labelled].float(), real, reduction="sum")
    return reduce_loss(total, labelled.sum(), num_items_in_batch)


class ElmoHeadModel(ElmoPreTrainedModel):
    """What the task heads share: the biLM (frozen by default, `config.freeze_elmo`), the head's own learned mix,
    optionally its own word vectors x_k (`config.task_token_features`), dropout; and precomputed biLM layers
    (`elmo_hidden_states`) in place of running the biLM."""

    accepts_loss_kwargs = True

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.elmo = ElmoModel(config)
        # The head's own mix, so that it trains even when the biLM is frozen.
        self.scalar_mix = ElmoScalarMix(config.num_lstm_layers + 1, layer_norm=config.scalar_mix_layer_norm)
        self.token_features = ElmoCharacterEncoder(config) if config.task_token_features else None
        self.feature_size = config.hidden_size + (config.projection_dim if config.task_token_features else 0)
        self.dropout = nn.Dropout(config.classifier_dropout)
        self.set_elmo_frozen(config.freeze_elmo)

    def resize_token_embeddings(self, new_num_tokens=None, pad_to_multiple_of=None, mean_resizing=True):
        embeddings = super().resize_token_embeddings(new_num_tokens, pad_to_multiple_of, mean_resizing)
        if self.token_features is not None:  # the head's own x_k reads the same characters
            self.token_features.char_embedding = self._get_resized_embeddings(
                self.token_features.char_embedding, embeddings.num_embeddings, mean_resizing=mean_resizing)
        return embeddings

    def set_elmo_frozen(self, frozen: bool = True) -> None:
        """Freeze (or unfreeze) the biLM; the head's mix and layers always train."""
        self.config.freeze_elmo = bool(frozen)
        self.elmo.requires_grad_(not frozen)
        # Unused parameters that require gradients break DistributedDataParallel: the encoder's mixes stay out.
        self.elmo.scalar_mixes.requires_grad_(False)

    def _after_loading(self, loading_info: dict) -> None:
        if self.token_features is not None and any(key.startswith("token_features.")
                                                   for key in loading_info["missing_keys"]):
            # A biLM checkpoint without a task head: the head's word vectors start as the biLM's layer 0.
            self.token_features.load_state_dict(self.elmo.char_encoder.state_dict())
        self.set_elmo_frozen(self.config.freeze_elmo)  # loading swaps in fresh parameters (requires_grad=True)

    def elmo_layers(self, input_ids, attention_mask, word_ids=None, elmo_hidden_states=None):
        """The biLM's L+1 layers and the word mask: run the biLM (without autograd when frozen), or check and take
        `elmo_hidden_states` ((batch, L+1, words, 2P), or L+1 tensors (batch, words, 2P)) computed beforehand."""
        if elmo_hidden_states is None:
            if input_ids is None:
                raise ValueError("pass input_ids (character ids) or elmo_hidden_states (precomputed biLM layers)")
            track = torch.is_grad_enabled() and any(p.requires_grad for p in self.elmo.parameters())
            with torch.set_grad_enabled(track):
                outputs = self.elmo(input_ids, attention_mask=attention_mask, word_ids=word_ids,
                                    output_hidden_states=True, return_dict=True)
            return outputs.hidden_states, outputs.mask.bool()
        if input_ids is not None and self.token_features is None:
            raise ValueError("pass either input_ids or elmo_hidden_states, not both")
        if not self.config.freeze_elmo:
            raise ValueError("elmo_hidden_states (precomputed biLM layers) need a frozen biLM (config.freeze_elmo)")
        if attention_mask is None:
            raise ValueError("elmo_hidden_states need the attention_mask that says which positions are words")
        expected = (*attention_mask.shape, self.config.hidden_size)
        layers = elmo_hidden_states.unbind(1) if torch.is_tensor(elmo_hidden_states) else tuple(elmo_hidden_states)
        if len(layers) != self.config.num_lstm_layers + 1 or any(tuple(layer.shape) != expected for layer in layers):
            raise ValueError(f"elmo_hidden_states must be (batch, {self.config.num_lstm_layers + 1} layers, words, "
                             f"{self.config.hidden_size}) to match attention_mask {tuple(attention_mask.shape)}, got "
                             f"{[tuple(layer.shape) for layer in layers]}")
        return layers, attention_mask.to(layers[0].device).bool()

    def mixed_vectors(self, input_ids, attention_mask, word_ids=None, elmo_hidden_states=None):
        """((B, W, F) mixed and dropped-out word vectors, (B, W) mask, the biLM layers); F = `feature_size`."""
        layers, mask = self.elmo_layers(input_ids, attention_mask, word_ids, elmo_hidden_states)
        mixed = self.scalar_mix(layers, mask)
        if self.token_features is not None:
            mixed = torch.cat([self.own_word_vectors(input_ids, mask, word_ids).to(mixed.dtype), mixed], dim=-1)
        return self.dropout(mixed), mask, layers

    def own_word_vectors(self, input_ids, mask, word_ids=None, name: str = "input_ids") -> torch.Tensor:
        """The head's x_k of each word (zeros at padding): (B, W, P)."""
        if input_ids is None:
            raise ValueError(f"config.task_token_features: the head's own word vectors need {name} (character ids), "
                             "also when the biLM layers come precomputed in elmo_hidden_states")
        if tuple(input_ids.shape[:2]) != tuple(mask.shape):
            raise ValueError(f"{name} must be (batch, positions, characters) with (batch, positions) = "
                             f"{tuple(mask.shape)}, got {tuple(input_ids.shape)}")
        input_ids, mask = input_ids.to(mask.device).long(), mask.bool()
        char_ids = input_ids * mask.unsqueeze(-1).to(input_ids.dtype)
        flat_word_ids = None if word_ids is None else word_ids.to(mask.device).reshape(-1)
        vectors = self.elmo.encode_tokens(self.token_features, char_ids.reshape(-1, char_ids.shape[-1]), flat_word_ids)
        return vectors.view(*mask.shape, vectors.shape[-1])


@dataclass
class ElmoTokenClassifierOutput(TokenClassifierOutput):
    """[`TokenClassifierOutput`] plus `predictions` (`torch.LongTensor` of shape `(batch_size, num_positions)`,
    *optional*): the best tags as `ElmoTagger.decode` gives them (-100 at padding), returned in eval mode."""

    predictions: torch.LongTensor | None = None


class ElmoTaskBiLstm(nn.LSTM):
    """The tagging head's bidirectional LSTM over padded batches: each row runs over its own words only (packed);
    positions past them are zeros. (An `nn.LSTM` itself, so saved taggers keep their weight names.)"""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int, dropout: float):
        super().__init__(input_size, hidden_size, num_layers=num_layers, bidirectional=True, batch_first=True,
                         dropout=dropout if num_layers > 1 else 0.0)

    def forward(self, inputs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(batch, words, features), (batch, words) bool -> (batch, words, 2 * hidden_size)."""
        if inputs.shape[1] == 0:
            return inputs.new_zeros(inputs.shape[0], 0, 2 * self.hidden_size)
        # pack_padded_sequence wants host-side lengths; an empty row runs one padding step, ignored later.
        lengths = mask.sum(dim=1).clamp(min=1).tolist()
        packed = nn.utils.rnn.pack_padded_sequence(inputs, lengths, batch_first=True, enforce_sorted=False)
        encoded, _ = super().forward(packed)
        return nn.utils.rnn.pad_packed_sequence(encoded, batch_first=True, total_length=inputs.shape[1])[0]


class ElmoTagger(ElmoHeadModel):
    """The tagging head's layers over position vectors: dropout -> [BiLSTM] -> linear -> [CRF] (the paper's NER
    model), its loss and decoding; `ElmoForTokenClassification` tags words, the character tagger characters."""

    #: Whether the positions tagged are characters (read over the words they form) rather than the words.
    labels_characters = False

    def __init__(self, config: ElmoConfig, position_feature_size: int = 0):
        super().__init__(config)
        feature_size = self.feature_size + position_feature_size
        self.encoder = ElmoTaskBiLstm(feature_size, config.task_encoder_hidden_size, config.task_encoder_num_layers,
                                      config.classifier_dropout) if config.task_encoder == "bilstm" else None
        encoded_size = 2 * config.task_encoder_hidden_size if self.encoder is not None else feature_size
        self.classifier = nn.Linear(encoded_size, config.num_labels)
        self.crf = ElmoCrf(config.num_labels) if config.use_crf else None

    def save_pretrained(self, save_directory, *args, **kwargs):
        # Saving writes pipeline_elmo.py beside this file; naming its pipeline lets `pipeline(model=folder,
        # trust_remote_code=True)` give entity spans where hf-elmo is not installed.
        from .pipeline_elmo import TASK, ElmoTokenClassificationPipeline

        self.config.custom_pipelines = {TASK: {"impl": f"pipeline_elmo.{ElmoTokenClassificationPipeline.__name__}",
                                               "pt": ["AutoModelForTokenClassification"], "type": "text"}}
        return super().save_pretrained(save_directory, *args, **kwargs)

    def tag(self, vectors, mask, labels, layers, output_hidden_states, return_dict, num_items_in_batch):
        """Logits, loss and predictions of (B, positions, F) `vectors`, as an `ElmoTokenClassifierOutput`."""
        logits = self.classifier(self.dropout(self.encoder(vectors, mask)) if self.encoder is not None else vectors)
        loss = None if labels is None else tagging_loss(logits, labels, mask, self.crf, num_items_in_batch)
        with torch.no_grad():
            predictions = None if self.training else self.decode(logits, mask)
        if output_hidden_states is None:
            output_hidden_states = self.config.output_hidden_states
        output = ElmoTokenClassifierOutput(loss=loss, logits=logits, predictions=predictions,
                                           hidden_states=tuple(layers) if output_hidden_states else None)
        return output if (return_dict if return_dict is not None else self.config.return_dict) else output.to_tuple()

    def decode(self, logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Best tags (batch, positions) from `logits`, -100 at padding: Viterbi with a CRF, argmax otherwise."""
        if self.crf is not None:
            return self.crf.viterbi_decode(logits, mask)
        return logits.argmax(dim=-1).masked_fill(~mask.bool(), -100)

    def tag_probabilities(self, logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """p(tag | sentence) per position, (batch, positions, num_labels): CRF marginals, or the softmax of `logits`."""
        if self.crf is not None:
            return self.crf.marginals(logits, mask)
        return torch.softmax(logits.float(), dim=-1) * mask.unsqueeze(-1)


class ElmoForTokenClassification(ElmoTagger):
    """ELMo with a word tagger, one label per word: learned mix [; own word vectors x_k] -> dropout -> [BiLSTM] ->
    linear -> [CRF] (`config.task_encoder`, `use_crf`, `task_token_features`, `freeze_elmo`)."""

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        self.post_init()

    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        # AutoModelForTokenClassification maps every ElmoConfig here: a saved character tagger loads as what it is.
        architectures = getattr(kwargs.get("config"), "architectures", None) or ()
        if cls is ElmoForTokenClassification and "ElmoForCharacterTagging" in architectures:
            return ElmoForCharacterTagging.from_pretrained(*args, **kwargs)
        return super().from_pretrained(*args, **kwargs)

    def forward(self, input_ids=None, attention_mask=None, word_ids=None, elmo_hidden_states=None, labels=None,
                output_hidden_states=None, return_dict=None, num_items_in_batch=None, **kwargs):
        r"""
        Args:
            input_ids, attention_mask, word_ids: as [`ElmoModel`] takes them.
            elmo_hidden_states (`torch.FloatTensor` of shape `(batch_size, num_lstm_layers + 1, num_words, 2P)`,
                *optional*): the frozen biLM's layers computed beforehand, instead of `input_ids` (which
                `config.task_token_features` still needs).
            labels (`torch.LongTensor` of shape `(batch_size, num_words)`, *optional*): Tag ids in
                `[0, num_labels)` or -100 (none); the loss is `tagging_loss`'s.
            output_hidden_states (`bool`, *optional*): also return the biLM layers (`config.output_hidden_states`,
                True by default, when not given).
            num_items_in_batch (`int`, *optional*): labelled words in the whole accumulated batch (`Trainer`).
        """
        _refuse_unknown_arguments(type(self).__name__, kwargs)
        vectors, mask, layers = self.mixed_vectors(input_ids, attention_mask, word_ids, elmo_hidden_states)
        return self.tag(vectors, mask, labels, layers, output_hidden_states, return_dict, num_items_in_batch)


# Characters tagged with a biLM of words: most Chinese NER sets label characters (MSRA, People's Daily, Weibo), while a
# biLM pretrained on segmented text reads words.
# A character's position in its word, in this order: the whole word, the first, a middle or the last character.
WORD_POSITIONS = ("S", "B", "M", "E")


def character_vectors(word_vectors: torch.Tensor, token_word_index: torch.Tensor, token_positions: torch.Tensor):
    """(batch, words, F) word vectors -> ((batch, characters, F + 4) character vectors, (batch, characters) mask):
    each character gets the vector of its word (`token_word_index`, -1 at padding) and the one-hot of its position in
    `WORD_POSITIONS` (`token_positions`); padding positions are zeros."""
    if token_word_index is None or token_positions is None:
        raise ValueError("ElmoForCharacterTagging: pass token_word_index and token_positions, one per character "
                         "(character_places makes them)")
    batch, shape = word_vectors.shape[0], token_word_index.shape
    if token_word_index.dim() != 2 or shape[0] != batch or token_positions.shape != shape:
        raise ValueError(f"token_word_index and token_positions must both be (batch={batch}, characters), got "
                         f"{tuple(token_word_index.shape)} and {tuple(token_positions.shape)}")
    token_word_index = token_word_index.to(word_vectors.device)
    mask = token_word_index >= 0
    index = token_word_index.clamp(min=0, max=max(word_vectors.shape[1] - 1, 0))
    vectors = word_vectors.gather(1, index.unsqueeze(-1).expand(-1, -1, word_vectors.shape[-1]))
    positions = nn.functional.one_hot(token_positions.to(mask.device).clamp(0, len(WORD_POSITIONS) - 1),
                                      len(WORD_POSITIONS))
    features = torch.cat([vectors, positions.to(vectors.dtype)], dim=-1)
    return features * mask.unsqueeze(-1).to(features.dtype), mask


class ElmoForCharacterTagging(ElmoTagger):
    """ELMo tagging characters, one label each: a character gets [x_k;] its word's learned mix, its S/B/M/E position
    [, with `config.task_character_features`, the head's x_k of the character read alone, which tells the characters
    of one word apart] -> dropout -> [BiLSTM] -> linear -> [CRF]."""

    labels_characters = True

    def __init__(self, config: ElmoConfig):
        extra = len(WORD_POSITIONS) + (config.projection_dim if config.task_character_features else 0)
        super().__init__(config, position_feature_size=extra)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, word_ids=None, token_word_index=None, token_positions=None,
                character_input_ids=None, elmo_hidden_states=None, labels=None, output_hidden_states=None,
                return_dict=None, num_items_in_batch=None, **kwargs):
        r"""
        Args:
            input_ids, attention_mask, word_ids, elmo_hidden_states: of the sentence's *words*, as
                [`ElmoForTokenClassification`] takes them.
            token_word_index, token_positions (`torch.LongTensor` of shape `(batch_size, num_characters)`): each
                character's word (-1 at padding) and the index of its position in `WORD_POSITIONS`.
            character_input_ids (`torch.LongTensor` of shape `(batch_size, num_characters, max_characters_per_token)`):
                with `config.task_character_features`, the character ids of each character read as a word alone.
            labels (`torch.LongTensor` of shape `(batch_size, num_characters)`, *optional*): tag ids or -100.
        """
        _refuse_unknown_arguments(type(self).__name__, kwargs)
        word_vectors, word_mask, layers = self.mixed_vectors(input_ids, attention_mask, word_ids, elmo_hidden_states)
        vectors, mask = character_vectors(word_vectors, token_word_index, token_positions)
        if self.config.task_character_features:  # with a word embedding, a character reads its word's word id
            character_word_ids = None if word_ids is None else word_ids.gather(
                1, token_word_index.to(word_ids.device).clamp(min=0))
            own = self.own_word_vectors(character_input_ids, mask, character_word_ids, name="character_input_ids")
            vectors = torch.cat([vectors, self.dropout(own.to(vectors.dtype))], dim=-1)
        elif character_input_ids is not None:
            raise ValueError("character_input_ids are for taggers with config.task_character_features")
        return self.tag(vectors, mask, labels, layers, output_hidden_states, return_dict, num_items_in_batch)


class ElmoForSequenceClassification(ElmoHeadModel):
    """ELMo with a sentence classifier: learned mix -> masked mean over words -> MLP (`classifier_hidden_size`)."""

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        hidden_size = config.classifier_hidden_size
        self.pre_classifier = nn.Linear(self.feature_size, hidden_size) if hidden_size else None
        self.classifier = nn.Linear(hidden_size or self.feature_size, config.num_labels)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, word_ids=None, elmo_hidden_states=None, labels=None,
                output_hidden_states=None, return_dict=None, num_items_in_batch=None, **kwargs):
        r"""
        Args: as [`ElmoForTokenClassification`], except
            labels (`torch.Tensor`, *optional*): as transformers' classification heads read them, by
                `config.problem_type` (when unset: regression if `num_labels == 1`, else single-label for integer
                labels and multi-label for floating-point ones): class ids `(batch_size,)` (-100 leaves a sentence
                out), regression targets, or 0/1 rows `(batch_size, num_labels)`.
        """
        _refuse_unknown_arguments(type(self).__name__, kwargs)
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        mixed, mask, layers = self.mixed_vectors(input_ids, attention_mask, word_ids, elmo_hidden_states)
        weights = mask.unsqueeze(-1).to(mixed.dtype)
        pooled = (mixed * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)
        if self.pre_classifier is not None:
            pooled = self.dropout(F.relu(self.pre_classifier(pooled)))
        logits = self.classifier(pooled)
        loss = None if labels is None else classification_loss(logits, labels, self.config.problem_type,
                                                               num_items_in_batch)
        if output_hidden_states is None:
            output_hidden_states = self.config.output_hidden_states
        output = SequenceClassifierOutput(loss=loss, logits=logits,
                                          hidden_states=tuple(layers) if output_hidden_states else None)
        return output if return_dict else output.to_tuple()


__all__ = ["ALL_LSTM_FUNCTIONS", "ElmoKernelFunctions", "ElmoKernelInterface", "reference_bilstm",
           "reference_character_encoder", "reference_lstm_step", "weight_problems", "ElmoModelOutput",
           "ElmoHighwayLayer", "ElmoHighway", "ElmoCharacterEncoder", "ElmoBiLstmLayer", "ElmoBiLstm", "ElmoScalarMix",
           "ElmoPreTrainedModel", "ElmoModel", "ElmoCrf", "ElmoHeadModel", "ElmoTagger", "ElmoTokenClassifierOutput",
           "ElmoForTokenClassification", "WORD_POSITIONS", "character_vectors", "ElmoForCharacterTagging",
           "ElmoForSequenceClassification"]
