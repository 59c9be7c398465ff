"""PyTorch ELMo: character CNN -> highway -> projection -> biLSTM language model -> layer mix.

The file reads top-down in the order data flows through the model:

1. `ElmoCharacterEncoder`   character ids (words, 50) -> context-insensitive token vectors (words, P)
2. `ElmoBiLstm`             token vectors -> forward and backward LSTM layers with cell/projection clipping
3. `ElmoScalarMix`          L+1 layers -> gamma * sum_j softmax(w)_j * layer_j
4. `ElmoModel`              the encoder users load; adds sentence boundaries, returns all layers and mixes
5. task heads               thin layers over `ElmoModel`

Numerics follow AllenNLP / bilm-tf exactly; weights are kept in bilm-tf's (in, out) layout so that
conversion is a pure reshuffle and round-trips bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel
from transformers import initialization as init
from transformers.modeling_outputs import SequenceClassifierOutput, TokenClassifierOutput
from transformers.utils import ModelOutput

from .configuration_elmo import ElmoConfig

# Raw character ids of the byte scheme (before the +1 shift that reserves 0 for padding). The model itself
# reads its `<S>` / `</S>` rows from `config.bos_char_ids` / `config.eos_char_ids`, so it works with any scheme.
BEGINNING_OF_SENTENCE_CHARACTER = 256
END_OF_SENTENCE_CHARACTER = 257
BEGINNING_OF_WORD_CHARACTER = 258
END_OF_WORD_CHARACTER = 259
PADDING_CHARACTER = 260


@dataclass
class ElmoModelOutput(ModelOutput):
    """
    Output of [`ElmoModel`].

    Args:
        last_hidden_state (`torch.FloatTensor` of shape `(batch_size, num_words, 2 * projection_dim)`):
            Top biLSTM layer, `[forward; backward]`.
        elmo_representations (`tuple(torch.FloatTensor)`):
            `config.num_output_representations` learned mixes, each `(batch_size, num_words, 2 * projection_dim)`.
        hidden_states (`tuple(torch.FloatTensor)`):
            All L+1 layers, each `(batch_size, num_words, 2 * projection_dim)`: layer 0 is `[token; token]`,
            layer j >= 1 is `[forward_j; backward_j]`.
        mask (`torch.BoolTensor` of shape `(batch_size, num_words)`): True at real words.
        final_state (`tuple(torch.FloatTensor)`, *optional*):
            `(h, c)` after each sentence, shapes `(num_layers, 2, batch_size, projection_dim)` and
            `(num_layers, 2, batch_size, lstm_cell_dim)`; direction 0 is forward, 1 backward.
            Returned when `return_state=True`; feed it back as `initial_state` to continue statefully.

    `num_words` excludes the `<S>`/`</S>` positions unless `keep_sentence_boundaries=True` was passed,
    in which case it is the number of words + 2.
    """

    last_hidden_state: torch.FloatTensor | None = None
    elmo_representations: tuple[torch.FloatTensor, ...] | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None
    mask: torch.BoolTensor | None = None
    final_state: tuple[torch.FloatTensor, torch.FloatTensor] | None = None


# 1. Characters -> token vectors -------------------------------------------------------------


class ElmoHighwayLayer(nn.Linear):
    """One highway layer's linear map, `size` -> `[transform; carry]` (2 * size)."""

    def __init__(self, size: int):
        super().__init__(size, 2 * size)


class ElmoHighway(nn.Module):
    """Highway layers (TensorFlow convention): ``x <- g * relu(x W_t + b_t) + (1 - g) * x``, ``g = sigmoid(x W_c + b_c)``.

    Each layer is one linear map producing ``[transform; carry]`` side by side.
    """

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
    """Context-insensitive token representation (ELMo layer 0).

    char ids `(num_tokens, max_characters_per_token)` -> embedding -> one Conv1d per filter width ->
    max over positions -> activation -> highway -> linear projection -> `(num_tokens, projection_dim)`.
    An optional word embedding (ELMoForManyLangs models) is concatenated before the projection.
    """

    def __init__(self, config: ElmoConfig):
        super().__init__()
        self.char_embedding = nn.Embedding(config.char_vocab_size, config.char_embedding_dim, padding_idx=0)
        self.convolutions = nn.ModuleList(
            [nn.Conv1d(config.char_embedding_dim, count, width) for width, count in config.char_cnn_filters]
        )
        self.activation = torch.tanh if config.char_cnn_activation == "tanh" else F.relu
        num_filters = config.num_char_filters
        self.highway = ElmoHighway(num_filters, config.num_highway_layers)
        self.word_embedding = (
            nn.Embedding(config.word_vocab_size, config.word_embedding_dim) if config.word_vocab_size else None
        )
        self.projection = nn.Linear(num_filters + (config.word_embedding_dim if config.word_vocab_size else 0), config.projection_dim)

    def forward(self, char_ids: torch.Tensor, word_ids: torch.Tensor | None = None) -> torch.Tensor:
        """`char_ids` (N, max_characters_per_token) -> (N, projection_dim)."""
        char_ids = self._trim_constant_tail(char_ids)
        chars = self.char_embedding(char_ids).transpose(1, 2)  # (N, d_char, positions)
        # Max-pooling before the activation is equivalent for the monotone relu/tanh and cheaper.
        pooled = [conv(chars).amax(dim=-1) for conv in self.convolutions]
        tokens = self.highway(self.activation(torch.cat(pooled, dim=-1)))
        if self.word_embedding is not None:
            if word_ids is None:
                raise ValueError("this model has a word embedding: pass `word_ids` along with `input_ids`")
            tokens = torch.cat([self.word_embedding(word_ids), tokens], dim=-1)
        return self.projection(tokens)

    def _trim_constant_tail(self, char_ids: torch.Tensor) -> torch.Tensor:
        """Drop trailing positions that cannot change the max-pooled features.

        Past a word's last character every id equals the final one (padding), so every convolution
        window lying wholly in that tail has the same value. Keeping one such window per filter width
        (the widest filter's width of tail) leaves every maximum exactly as it was, at a fraction of
        the cost for short words.
        """
        width = char_ids.shape[1]
        widest = max(conv.kernel_size[0] for conv in self.convolutions)
        if char_ids.shape[0] == 0 or width <= widest:
            return char_ids
        differs = char_ids != char_ids[:, -1:]
        positions = torch.arange(1, width + 1, device=char_ids.device)
        tail_start = int((differs * positions).amax())
        return char_ids[:, : min(width, tail_start + widest)]


# 2. The biLSTM ------------------------------------------------------------------------------


class ElmoBiLstmLayer(nn.Module):
    """One layer of both LSTM directions, weights stacked on a leading axis of size 2 (forward, backward).

    Weights use the (in, out) layout: `input_weight` (2, input_dim, 4C), `recurrent_weight` (2, P, 4C),
    `bias` (2, 4C), `projection_weight` (2, C, P). Gate blocks are ordered i, f, g, o.
    """

    def __init__(self, input_dim: int, cell_dim: int, projection_dim: int):
        super().__init__()
        self.input_weight = nn.Parameter(torch.empty(2, input_dim, 4 * cell_dim))
        self.recurrent_weight = nn.Parameter(torch.empty(2, projection_dim, 4 * cell_dim))
        self.bias = nn.Parameter(torch.empty(2, 4 * cell_dim))
        self.projection_weight = nn.Parameter(torch.empty(2, cell_dim, projection_dim))

    @property
    def cell_dim(self) -> int:
        return self.projection_weight.shape[1]


def _lstm_recurrence(
    input_gates: torch.Tensor,
    batch_sizes: list[int],
    recurrent_weight: torch.Tensor,
    projection_weight: torch.Tensor,
    state: tuple[torch.Tensor, torch.Tensor],
    cell_clip: float | None,
    proj_clip: float | None,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """Step both directions of one layer through time.

    Args:
        input_gates: (2, T, B, 4C) input products plus bias for every step, time-major, rows sorted by
            decreasing length so that the rows still running at step t are the first `batch_sizes[t]`.
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
        gates = torch.baddbmm(step_gates[t][:, :active], h[:, :active], recurrent_weight)
        input_gate, forget_gate, cell_input, output_gate = gates.chunk(4, dim=-1)
        cell = torch.sigmoid(input_gate) * torch.tanh(cell_input) + torch.sigmoid(forget_gate) * c[:, :active]
        if cell_clip:
            cell = cell.clamp(-cell_clip, cell_clip)
        hidden = torch.bmm(torch.sigmoid(output_gate) * torch.tanh(cell), projection_weight)
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


class ElmoBiLstm(nn.Module):
    """Forward and backward multi-layer LSTM language-model encoders (no weight sharing between directions).

    The backward direction reads each sentence reversed within its own length. Layers >= 1 add
    their input to their output when `use_skip_connections` is set.
    """

    def __init__(self, config: ElmoConfig):
        super().__init__()
        self.config = config
        self.layers = nn.ModuleList(
            [
                ElmoBiLstmLayer(config.projection_dim, config.lstm_cell_dim, config.projection_dim)
                for _ in range(config.num_lstm_layers)
            ]
        )

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
    ) -> tuple[list[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
        """
        Args:
            inputs: (B, T, P) token representations, zero past each row's length.
            lengths: (B,) number of real positions per row (boundaries included), each >= 1.
            initial_state: optional (h (L, 2, B, P), c (L, 2, B, C)); zeros when omitted.
            dropout: dropout on each layer's output (pretraining only).

        Returns:
            `layers`: L tensors of shape (B, T, 2P), `[forward; backward]`, zero past each length;
            `final_state`: (h, c) shaped like `initial_state`, in the caller's row order.
        """
        batch, steps, _ = inputs.shape
        config = self.config
        lengths = lengths.to(inputs.device)
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

        forward_inputs = inputs[order].transpose(0, 1)  # (T, B, P)
        backward_inputs = forward_inputs.gather(0, reverse_index.unsqueeze(-1).expand_as(forward_inputs))
        layer_input = torch.stack([forward_inputs, backward_inputs])  # (2, T, B, P)

        if initial_state is None:
            h = inputs.new_zeros(config.num_lstm_layers, 2, batch, config.projection_dim)
            c = inputs.new_zeros(config.num_lstm_layers, 2, batch, config.lstm_cell_dim)
        else:
            h, c = self._check_state(initial_state, batch, inputs)
            h, c = h[:, :, order], c[:, :, order]

        layer_outputs, final_h, final_c = [], [], []
        for index, layer in enumerate(self.layers):
            bias = layer.bias + self._forget_bias_offset(layer.bias)
            input_gates = torch.baddbmm(
                bias.unsqueeze(1), layer_input.reshape(2, steps * batch, -1), layer.input_weight
            ).view(2, steps, batch, -1)
            output, (layer_h, layer_c) = _lstm_recurrence(
                input_gates,
                batch_sizes,
                layer.recurrent_weight,
                layer.projection_weight,
                (h[index], c[index]),
                config.cell_clip,
                config.proj_clip,
            )
            final_h.append(layer_h)
            final_c.append(layer_c)
            if config.use_skip_connections and index > 0:
                output = output + layer_input
            if dropout and self.training:
                output = F.dropout(output, dropout, training=True)
            layer_outputs.append(output)
            layer_input = output

        inverse_order = torch.argsort(order)
        index = reverse_index.unsqueeze(-1).expand(steps, batch, config.projection_dim)
        layers = []
        for output in layer_outputs:
            forward_output = output[0]
            backward_output = output[1].gather(0, index)
            both = torch.cat([forward_output, backward_output], dim=-1).transpose(0, 1)
            layers.append(both[inverse_order])
        h, c = torch.stack(final_h), torch.stack(final_c)
        return layers, (h[:, :, inverse_order], c[:, :, inverse_order])

    def _check_state(self, state, batch: int, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        config = self.config
        if not (isinstance(state, (tuple, list)) and len(state) == 2):
            raise ValueError("initial_state must be a pair (h, c)")
        h, c = state
        expected_h = (config.num_lstm_layers, 2, batch, config.projection_dim)
        expected_c = (config.num_lstm_layers, 2, batch, config.lstm_cell_dim)
        if tuple(h.shape) != expected_h or tuple(c.shape) != expected_c:
            raise ValueError(
                f"initial_state shapes must be h {expected_h} and c {expected_c}, "
                f"got h {tuple(h.shape)} and c {tuple(c.shape)}"
            )
        return h.to(like), c.to(like)


# 3. Mixing the layers -----------------------------------------------------------------------


class ElmoScalarMix(nn.Module):
    """``gamma * sum_j softmax(w)_j * layer_j`` with w initialised to 0 and gamma to 1 (the paper's eq. 1).

    With `layer_norm`, each layer is first normalised by one mean and variance over all of its
    unmasked elements in the batch (AllenNLP's definition, not a per-token LayerNorm).
    """

    def __init__(self, num_layers: int, layer_norm: bool = False, trainable: bool = True):
        super().__init__()
        self.layer_norm = layer_norm
        self.scalar_parameters = nn.Parameter(torch.zeros(num_layers), requires_grad=trainable)
        self.gamma = nn.Parameter(torch.ones(1), requires_grad=trainable)

    def forward(self, layers: list[torch.Tensor] | tuple[torch.Tensor, ...], mask: torch.Tensor | None = None):
        if len(layers) != self.scalar_parameters.numel():
            raise ValueError(f"expected {self.scalar_parameters.numel()} layers, got {len(layers)}")
        weights = torch.softmax(self.scalar_parameters, dim=0)
        if self.layer_norm:
            if mask is None:
                raise ValueError("layer-normalised mixing needs the word mask")
            layers = [_masked_layer_norm(layer, mask) for layer in layers]
        mixed = sum(weight * layer for weight, layer in zip(weights, layers))
        return self.gamma * mixed


def _remote_code_auto_map() -> dict[str, str]:
    """`{auto class: "modeling_elmo.Class"}` for the classes of this file registered for remote code."""
    module = __name__.rsplit(".", 1)[-1]
    auto_map = {}
    for value in list(globals().values()):
        if isinstance(value, type) and issubclass(value, ElmoPreTrainedModel):
            auto_class = value.__dict__.get("_auto_class")  # set on the class itself, not inherited
            if auto_class is not None:
                auto_map[auto_class] = f"{module}.{value.__name__}"
    return auto_map


def _masked_layer_norm(layer: torch.Tensor, mask: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    mask = mask.unsqueeze(-1).to(layer.dtype)
    count = mask.sum() * layer.shape[-1]
    mean = (layer * mask).sum() / count
    variance = (((layer - mean) * mask) ** 2).sum() / count
    return (layer - mean) / torch.sqrt(variance + eps)


# 4. The model -------------------------------------------------------------------------------


class ElmoPreTrainedModel(PreTrainedModel):
    config: ElmoConfig
    config_class = ElmoConfig
    base_model_prefix = "elmo"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = False

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
        # Weights come from safetensors only: never fall back to unpickling a pytorch_model.bin.
        kwargs.setdefault("use_safetensors", True)
        try:
            return super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
        except OSError as error:
            message = str(error)
            if "model.safetensors" in message and ("does not appear to have" in message or "no file named" in message):
                raise OSError(
                    f"{pretrained_model_name_or_path} has no model.safetensors: ELMo weights are loaded from "
                    "safetensors files only (pytorch_model.bin is not unpickled). Save the model with "
                    "`save_pretrained`, or convert bilm-tf / AllenNLP files (options.json + weights.hdf5) with "
                    "conversion/convert_allennlp.py."
                ) from error
            raise

    def save_pretrained(self, save_directory, *args, **kwargs):
        # transformers writes only the saved class's own entry into `config.auto_map`; list every ELMo class
        # registered for remote code (see `register_for_auto_class`), so any head loads from this folder.
        if self.is_remote_code():
            auto_map = {**(getattr(self.config, "auto_map", None) or {}), **_remote_code_auto_map()}
            if not self.config.lm_vocab:  # the pretraining head needs the softmax's word list
                auto_map.pop("AutoModelForPreTraining", None)
            self.config.auto_map = auto_map
        return super().save_pretrained(save_directory, *args, **kwargs)

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
            init.copy_(module.bias, torch.cat([torch.zeros(module.in_features), torch.full((module.in_features,), -2.0)]))
        elif isinstance(module, ElmoLanguageModelSoftmax):
            init.normal_(module.weight, std=module.weight.shape[1] ** -0.5)
            init.zeros_(module.bias)
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


class ElmoModel(ElmoPreTrainedModel):
    """The ELMo encoder: character ids of words in, every biLM layer and the learned ELMo mixes out.

    Stateless by default: each sentence starts from a zero LSTM state, so its vectors depend
    neither on the batch it is in nor on earlier calls. Pass `initial_state` / `return_state=True`
    to carry state between calls the way AllenNLP and bilm-tf do.
    """

    # A pretraining checkpoint also holds the language-model softmax; the encoder does not need it.
    _keys_to_ignore_on_load_unexpected = [r"softmax\."]

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        self.char_encoder = ElmoCharacterEncoder(config)
        self.bilstm = ElmoBiLstm(config)
        self.scalar_mixes = nn.ModuleList(
            [
                ElmoScalarMix(config.num_lstm_layers + 1, layer_norm=config.scalar_mix_layer_norm)
                for _ in range(config.num_output_representations)
            ]
        )
        self.post_init()

    def get_input_embeddings(self):
        return self.char_encoder.char_embedding

    def sentence_boundary_char_ids(self) -> torch.LongTensor:
        """`(2, max_characters_per_token)` character ids of the `<S>` and `</S>` pseudo-words the model adds."""
        return torch.tensor([self.config.bos_char_ids, self.config.eos_char_ids], device=self.device)

    def token_embeddings(self, char_ids: torch.Tensor) -> torch.Tensor:
        """Layer 0 (the context-insensitive token vectors) of single words, without running the LSTMs.

        Args:
            char_ids (`torch.LongTensor` of shape `(..., max_characters_per_token)`): one row per word,
                e.g. `ElmoTokenizer.word_to_char_ids` rows or `sentence_boundary_char_ids()`.

        Returns: `torch.FloatTensor` of shape `(..., projection_dim)`.
        """
        if self.char_encoder.word_embedding is not None:
            raise ValueError("this model also needs word ids for its token vectors; use forward()")
        if char_ids.dim() < 1 or char_ids.shape[-1] != self.config.max_characters_per_token:
            raise ValueError(
                f"char_ids must end in a dimension of {self.config.max_characters_per_token}, "
                f"got shape {tuple(char_ids.shape)}"
            )
        # Reuse the input checks of forward(): a (1, words, width) view has the same ids.
        self._validate_input_ids(char_ids.reshape(1, -1, char_ids.shape[-1]))
        flat = char_ids.reshape(-1, char_ids.shape[-1])
        return self.char_encoder(flat).reshape(*char_ids.shape[:-1], self.config.projection_dim)

    def _validate_input_ids(self, input_ids: torch.Tensor) -> None:
        width = self.config.max_characters_per_token
        if not isinstance(input_ids, torch.Tensor):
            raise TypeError(f"input_ids must be a torch.Tensor, got {type(input_ids).__name__}")
        if input_ids.dim() != 3 or input_ids.shape[-1] != width:
            raise ValueError(
                f"input_ids must have shape (batch, words, {width}) of character ids, got {tuple(input_ids.shape)}"
            )
        if input_ids.dtype.is_floating_point or input_ids.dtype == torch.bool:
            raise TypeError(f"input_ids must be integer character ids, got dtype {input_ids.dtype}")
        if input_ids.shape[0] == 0:
            raise ValueError("empty batch: input_ids has batch size 0")
        if input_ids.numel():
            low, high = int(input_ids.min()), int(input_ids.max())
            if low < 0 or high >= self.config.char_vocab_size:
                raise ValueError(
                    f"input_ids contains character id {low if low < 0 else high}, "
                    f"outside [0, {self.config.char_vocab_size - 1}]"
                )

    def word_mask(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """(batch, words) bool mask of real words; checks that real words come first in every row."""
        if attention_mask is None:
            mask = (input_ids > 0).any(dim=-1)
        else:
            if tuple(attention_mask.shape) != tuple(input_ids.shape[:2]):
                raise ValueError(
                    f"attention_mask must have shape {tuple(input_ids.shape[:2])} (batch, words), "
                    f"got {tuple(attention_mask.shape)}"
                )
            mask = attention_mask.to(device=input_ids.device).bool()
        lengths = mask.sum(dim=1)
        if not torch.equal(mask, torch.arange(mask.shape[1], device=mask.device) < lengths.unsqueeze(1)):
            raise ValueError("padding must come after the words: each row's mask must be ones then zeros")
        if attention_mask is not None and (mask & ~(input_ids > 0).any(dim=-1)).any():
            raise ValueError("attention_mask marks a padded (all-zero) word position as a real word")
        return mask

    def token_representations(
        self, input_ids: torch.Tensor, mask: torch.Tensor, word_ids: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Layer 0 with `<S>`/`</S>` added: returns ((B, W+2, P) zero past each end, lengths (B,) = words + 2)."""
        batch, num_words, width = input_ids.shape
        device = input_ids.device
        lengths = mask.sum(dim=1) + 2
        steps = num_words + 2
        positions = torch.arange(steps, device=device)
        char_ids = input_ids.new_zeros(batch, steps, width)
        char_ids[:, 0] = self._boundary_ids(self.config.bos_char_ids, input_ids)
        char_ids[:, 1:-1] = input_ids * mask.unsqueeze(-1).to(input_ids.dtype)
        end = positions.unsqueeze(0) == (lengths - 1).unsqueeze(1)
        char_ids[end] = self._boundary_ids(self.config.eos_char_ids, input_ids)
        real = positions.unsqueeze(0) < lengths.unsqueeze(1)
        token_word_ids = None
        if self.char_encoder.word_embedding is not None:
            token_word_ids = self._word_ids_with_boundaries(word_ids, mask, steps)[real]
        elif word_ids is not None:
            raise ValueError("this model has no word embedding: word_ids must be None")
        encoded = self.char_encoder(char_ids[real], token_word_ids)
        tokens = encoded.new_zeros(batch, steps, encoded.shape[-1])
        tokens[real] = encoded
        return tokens, lengths

    @staticmethod
    def _boundary_ids(ids: list[int], like: torch.Tensor) -> torch.Tensor:
        """The character ids of `<S>` or `</S>` (from the config, so any character scheme works)."""
        return torch.tensor(ids, dtype=like.dtype, device=like.device)

    def _word_ids_with_boundaries(self, word_ids: torch.Tensor | None, mask: torch.Tensor, steps: int) -> torch.Tensor:
        """(B, W) word ids -> (B, W + 2) with `<S>` first and `</S>` at every padded position (incl. each end)."""
        config = self.config
        if word_ids is None:
            raise ValueError("this model has a word embedding: pass `word_ids` (from the tokenizer) with `input_ids`")
        if not isinstance(word_ids, torch.Tensor) or word_ids.dtype.is_floating_point or word_ids.dtype == torch.bool:
            raise TypeError("word_ids must be an integer torch.Tensor of shape (batch, words)")
        if tuple(word_ids.shape) != tuple(mask.shape):
            raise ValueError(
                f"word_ids must have shape {tuple(mask.shape)} (batch, words) like input_ids, "
                f"got {tuple(word_ids.shape)}"
            )
        word_ids = word_ids.to(mask.device)
        real_ids = word_ids[mask]
        if real_ids.numel() and (int(real_ids.min()) < 0 or int(real_ids.max()) >= config.word_vocab_size):
            bad = int(real_ids.min()) if int(real_ids.min()) < 0 else int(real_ids.max())
            raise ValueError(f"word_ids contains word id {bad}, outside [0, {config.word_vocab_size - 1}]")
        ids = word_ids.new_full((mask.shape[0], steps), config.eos_word_id)
        ids[:, 0] = config.bos_word_id
        # `</S>` lands at each row's end because every position past the words holds it.
        ids[:, 1:-1] = torch.where(mask, word_ids, torch.full_like(word_ids, config.eos_word_id))
        return ids

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        word_ids: torch.Tensor | None = None,
        initial_state: tuple[torch.Tensor, torch.Tensor] | None = None,
        return_state: bool = False,
        keep_sentence_boundaries: bool = False,
        return_dict: bool | None = None,
        **kwargs,
    ) -> ElmoModelOutput | tuple:
        r"""
        Args:
            input_ids (`torch.LongTensor` of shape `(batch_size, num_words, max_characters_per_token)`):
                Character ids from [`ElmoTokenizer`]; a padded word position is all zeros.
            attention_mask (`torch.Tensor` of shape `(batch_size, num_words)`, *optional*):
                1 for real words, 0 for padding; derived from `input_ids` when omitted.
            word_ids (`torch.LongTensor` of shape `(batch_size, num_words)`, *optional*):
                Word-vocabulary ids from the tokenizer; required exactly when the model has a word embedding
                (`config.word_vocab_size > 0`, e.g. converted ELMoForManyLangs models). Padded positions are ignored.
            initial_state (`tuple(torch.FloatTensor)`, *optional*):
                `(h, c)` with shapes `(num_layers, 2, batch_size, projection_dim)` and
                `(num_layers, 2, batch_size, lstm_cell_dim)` to start the LSTMs from (default zeros).
            return_state (`bool`): also return the state after each sentence as `final_state`.
            keep_sentence_boundaries (`bool`): keep the `<S>` and `</S>` positions in the outputs.
        """
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        self._validate_input_ids(input_ids)
        mask = self.word_mask(input_ids, attention_mask)
        tokens, lengths = self.token_representations(input_ids, mask, word_ids)
        lstm_layers, final_state = self.bilstm(tokens, lengths, initial_state)
        layers = [torch.cat([tokens, tokens], dim=-1)] + lstm_layers

        if keep_sentence_boundaries:
            output_mask = torch.arange(tokens.shape[1], device=tokens.device) < lengths.unsqueeze(1)
        else:
            output_mask = mask
            keep = mask.unsqueeze(-1).to(tokens.dtype)
            layers = [layer[:, 1:-1] * keep for layer in layers]
        mixes = tuple(mix(layers, output_mask) for mix in self.scalar_mixes)
        outputs = ElmoModelOutput(
            last_hidden_state=layers[-1],
            elmo_representations=mixes,
            hidden_states=tuple(layers),
            mask=output_mask,
            final_state=final_state if return_state else None,
        )
        return outputs if return_dict else outputs.to_tuple()


# 5. Heads -----------------------------------------------------------------------------------


@dataclass
class ElmoForPreTrainingOutput(ModelOutput):
    """
    Output of [`ElmoForPreTraining`].

    Args:
        loss (`torch.FloatTensor` of shape `()`, returned with `labels`):
            Mean of the forward and backward language models' cross-entropies (perplexity = exp(loss)).
        forward_loss, backward_loss (`torch.FloatTensor` of shape `()`): each direction's mean cross-entropy.
        num_predictions (`torch.LongTensor` of shape `()`): predictions per direction in the batch.
        forward_hidden_states, backward_hidden_states (`torch.FloatTensor` of shape
            `(batch_size, num_words + 2, projection_dim)`): top LSTM layer of each direction, boundaries included.
    """

    loss: torch.FloatTensor | None = None
    forward_loss: torch.FloatTensor | None = None
    backward_loss: torch.FloatTensor | None = None
    num_predictions: torch.LongTensor | None = None
    forward_hidden_states: torch.FloatTensor | None = None
    backward_hidden_states: torch.FloatTensor | None = None


class ElmoLanguageModelSoftmax(nn.Module):
    """The word softmax shared by the forward and backward language models (the paper ties it).

    Training with `config.lm_softmax == "sampled"` uses an importance-sampled softmax: negatives drawn
    from a log-uniform (Zipf) distribution over the frequency-sorted vocabulary, their logits corrected
    by log(K q(w)) and accidental hits removed, so that the sampled normaliser is an unbiased estimate
    of the full one. Evaluation always uses the full softmax, so perplexities are exact.
    """

    def __init__(self, config: ElmoConfig):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(config.lm_vocab_size, config.projection_dim))
        self.bias = nn.Parameter(torch.empty(config.lm_vocab_size))
        self.sampled = config.lm_softmax == "sampled"
        self.num_sampled = config.lm_num_sampled

    def full_loss(self, hidden: torch.Tensor, targets: torch.Tensor, reduction: str = "sum") -> torch.Tensor:
        """hidden (N, P), targets (N,) -> summed (or per-item) cross-entropy of the full softmax."""
        return F.cross_entropy(F.linear(hidden, self.weight, self.bias), targets, reduction=reduction)

    def sampled_loss(
        self, hidden: torch.Tensor, targets: torch.Tensor, reduction: str = "sum", generator: torch.Generator | None = None
    ) -> torch.Tensor:
        vocab_size = self.weight.shape[0]
        num_sampled = self.num_sampled
        log_range = torch.log1p(torch.tensor(float(vocab_size), dtype=torch.float64))
        uniform = torch.rand(num_sampled, dtype=torch.float64, generator=generator).to(hidden.device)
        samples = (torch.exp(uniform * log_range.to(hidden.device)).long() - 1).clamp_(0, vocab_size - 1)
        probability = (torch.log((samples + 2).double()) - torch.log((samples + 1).double())) / log_range
        log_expected = torch.log(num_sampled * probability).to(hidden.dtype)
        true_logits = (hidden * self.weight[targets]).sum(-1) + self.bias[targets]
        sampled_logits = hidden @ self.weight[samples].t() + self.bias[samples] - log_expected
        sampled_logits = sampled_logits.masked_fill(samples.unsqueeze(0) == targets.unsqueeze(1), float("-inf"))
        logits = torch.cat([true_logits.unsqueeze(1), sampled_logits], dim=1)
        losses = torch.logsumexp(logits, dim=1) - true_logits
        return losses.sum() if reduction == "sum" else losses

    def forward(self, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        if self.sampled and self.training:
            return self.sampled_loss(hidden, targets)
        return self.full_loss(hidden, targets)


class ElmoForPreTraining(ElmoPreTrainedModel):
    """ELMo's biLM objective: the forward LM predicts word k from words < k, the backward LM from words > k.

    The token representation and the softmax are shared by both directions; the LSTMs are not.
    `labels` are word ids into `config.lm_vocab` (`<S>`=0, `</S>`=1, `<UNK>`=2), one per input word,
    -100 at padding; the model adds the `<S>`/`</S>` targets itself.
    """

    _keys_to_ignore_on_load_missing = [r"scalar_mixes"]

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        if not config.lm_vocab_size:
            raise ValueError("ElmoForPreTraining needs config.lm_vocab (the word vocabulary of the softmax)")
        self.elmo = ElmoModel(config)
        self.softmax = ElmoLanguageModelSoftmax(config)
        self.dropout = nn.Dropout(config.lm_dropout)
        self.post_init()
        # The layer mix is a downstream-task parameter: pretraining must not touch it (and DDP must
        # not wait for its gradient).
        for parameter in self.elmo.scalar_mixes.parameters():
            parameter.requires_grad_(False)

    # Trainer passes num_items_in_batch only to models that accept it; our loss is already a mean.
    accepts_loss_kwargs = False

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        word_ids: torch.Tensor | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> ElmoForPreTrainingOutput | tuple:
        r"""
        Args:
            input_ids (`torch.LongTensor` of shape `(batch_size, num_words, max_characters_per_token)`)
            attention_mask (`torch.Tensor` of shape `(batch_size, num_words)`, *optional*)
            labels (`torch.LongTensor` of shape `(batch_size, num_words)`, *optional*):
                word ids in `config.lm_vocab` of the input words, -100 at padded positions.
        """
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        elmo = self.elmo
        elmo._validate_input_ids(input_ids)
        mask = elmo.word_mask(input_ids, attention_mask)
        tokens, lengths = elmo.token_representations(input_ids, mask, word_ids)
        layers, _ = elmo.bilstm(self.dropout(tokens), lengths, dropout=self.config.lm_dropout)
        projection_dim = self.config.projection_dim
        top = self.dropout(layers[-1])
        forward_hidden, backward_hidden = top[..., :projection_dim], top[..., projection_dim:]

        loss = forward_loss = backward_loss = num_predictions = None
        if labels is not None:
            if tuple(labels.shape) != tuple(mask.shape):
                raise ValueError(f"labels must have shape {tuple(mask.shape)} (batch, words), got {tuple(labels.shape)}")
            batch, steps = tokens.shape[:2]
            positions = torch.arange(steps, device=tokens.device).unsqueeze(0)
            # Targets of the whole row [<S>, words..., </S>]; positions past </S> are never used.
            targets = labels.new_full((batch, steps), 1)
            targets[:, 0] = 0
            targets[:, 1:-1] = torch.where(mask, labels, targets[:, 1:-1])
            forward_valid = positions[:, :-1] < (lengths - 1).unsqueeze(1)  # position t predicts t + 1
            backward_valid = (positions[:, 1:] < lengths.unsqueeze(1))  # position t predicts t - 1
            num_predictions = forward_valid.sum()
            forward_loss = self.softmax(forward_hidden[:, :-1][forward_valid], targets[:, 1:][forward_valid])
            backward_loss = self.softmax(backward_hidden[:, 1:][backward_valid], targets[:, :-1][backward_valid])
            forward_loss, backward_loss = forward_loss / num_predictions, backward_loss / num_predictions
            loss = (forward_loss + backward_loss) / 2

        output = ElmoForPreTrainingOutput(
            loss=loss,
            forward_loss=forward_loss,
            backward_loss=backward_loss,
            num_predictions=num_predictions,
            forward_hidden_states=forward_hidden,
            backward_hidden_states=backward_hidden,
        )
        return output if return_dict else output.to_tuple()


# 6. Task heads ------------------------------------------------------------------------------

# Score given to tags that a partial label rules out; finite so that gradients stay defined.
_IMPOSSIBLE = -1e4


class ElmoCrf(nn.Module):
    """Linear-chain conditional random field over tag scores.

    A path y_1..y_n through a sentence of n words scores
    ``start[y_1] + sum_t emissions[t, y_t] + sum_t transitions[y_{t-1}, y_t] + end[y_n]``.
    All methods take `emissions` (batch, words, num_tags) and a `mask` (batch, words) of real words
    (ones then zeros per row); rows with no words contribute nothing.
    """

    def __init__(self, num_tags: int):
        super().__init__()
        self.start_transitions = nn.Parameter(torch.zeros(num_tags))
        self.end_transitions = nn.Parameter(torch.zeros(num_tags))
        self.transitions = nn.Parameter(torch.zeros(num_tags, num_tags))  # [from, to]

    def log_partition(self, emissions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """log Z: logsumexp of the scores of every path, shape (batch,)."""
        mask = mask.bool()
        if emissions.shape[1] == 0:
            return emissions.new_zeros(emissions.shape[0])
        score = self.start_transitions + emissions[:, 0]  # (B, K)
        for t in range(1, emissions.shape[1]):
            step = torch.logsumexp(score.unsqueeze(2) + self.transitions + emissions[:, t].unsqueeze(1), dim=1)
            score = torch.where(mask[:, t : t + 1], step, score)
        log_z = torch.logsumexp(score + self.end_transitions, dim=1)
        return torch.where(mask.any(dim=1), log_z, torch.zeros_like(log_z))

    def log_likelihood(self, emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """log p(tags | emissions) per sentence, shape (batch,).

        A tag of -100 on a real word leaves that word unlabelled: the gold score sums over all tags there.
        """
        labelled = tags != -100
        allowed = F.one_hot(tags.clamp(min=0), emissions.shape[-1]).bool() | ~labelled.unsqueeze(-1)
        gold = self.log_partition(emissions.masked_fill(~allowed, _IMPOSSIBLE), mask)
        return gold - self.log_partition(emissions, mask)

    def marginals(self, emissions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """p(tag at word t | sentence) by the forward-backward algorithm, (batch, words, num_tags), 0 at padding."""
        mask = mask.bool()
        num_words = emissions.shape[1]
        if num_words == 0:
            return torch.zeros_like(emissions)
        alphas = [self.start_transitions + emissions[:, 0]]
        for t in range(1, num_words):
            step = torch.logsumexp(alphas[-1].unsqueeze(2) + self.transitions + emissions[:, t].unsqueeze(1), dim=1)
            alphas.append(torch.where(mask[:, t : t + 1], step, alphas[-1]))
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
            candidates = score.unsqueeze(2) + self.transitions  # (B, from, to)
            best_score, best_previous = candidates.max(dim=1)
            step_mask = mask[:, t : t + 1]
            score = torch.where(step_mask, best_score + emissions[:, t], score)
            # Past a row's end the path stays on its last tag, so backtracking starts from the true end.
            backpointers.append(torch.where(step_mask, best_previous, keep))
        best_last = (score + self.end_transitions).argmax(dim=1)
        path = [best_last]
        for pointers in reversed(backpointers):
            path.append(pointers.gather(1, path[-1].unsqueeze(1)).squeeze(1))
        tags = torch.stack(path[::-1], dim=1)
        return tags.masked_fill(~mask, pad_id)


@dataclass
class ElmoTokenClassifierOutput(TokenClassifierOutput):
    """
    [`TokenClassifierOutput`] plus decoded tags.

    Args:
        loss (`torch.FloatTensor` of shape `()`, *optional*): Mean negative log-likelihood per labelled word.
        logits (`torch.FloatTensor` of shape `(batch_size, num_words, num_labels)`):
            Tag scores (the CRF's emission scores when `use_crf`).
        predictions (`torch.LongTensor` of shape `(batch_size, num_words)`, *optional*):
            Best tag per word (Viterbi path with a CRF, argmax otherwise), -100 at padding. Returned in eval mode.
        hidden_states (`tuple(torch.FloatTensor)`, *optional*): The biLM layers, with `output_hidden_states=True`.
    """

    predictions: torch.LongTensor | None = None


def _reduce_loss(total: torch.Tensor, count: torch.Tensor, num_items_in_batch=None) -> torch.Tensor:
    """Sum over labelled items -> mean. Under gradient accumulation `Trainer` passes the labelled count of the
    whole accumulated batch, so that the summed micro-batch losses equal the loss of one large batch."""
    if num_items_in_batch is not None:
        return total / num_items_in_batch
    return total / count.clamp(min=1)


class _ElmoHeadMixin:
    """What both heads share: the biLM (optionally frozen), an own learned mix, dropout, weight init."""

    def _build_elmo(self, config: ElmoConfig) -> None:
        self.elmo = ElmoModel(config)
        # The head's own mix, so that it trains even when the biLM is frozen.
        self.scalar_mix = ElmoScalarMix(config.num_lstm_layers + 1, layer_norm=config.scalar_mix_layer_norm)
        self.dropout = nn.Dropout(config.classifier_dropout)
        self.set_elmo_frozen(config.freeze_elmo)

    def set_elmo_frozen(self, frozen: bool = True) -> None:
        """Freeze (or unfreeze) the biLM; the learned mix and the head always train."""
        self.config.freeze_elmo = bool(frozen)
        self.elmo.requires_grad_(not frozen)
        # The head mixes with its own `scalar_mix`; the encoder's mixes stay out of training (unused parameters
        # that require gradients break DistributedDataParallel).
        self.elmo.scalar_mixes.requires_grad_(False)

    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        loaded = super().from_pretrained(*args, **kwargs)
        model = loaded[0] if isinstance(loaded, tuple) else loaded
        # Loading swaps in fresh parameters (requires_grad=True), so apply `freeze_elmo` again.
        model.set_elmo_frozen(model.config.freeze_elmo)
        return loaded

    def _mixed_representation(self, input_ids, attention_mask, word_ids=None):
        """Run the biLM (without autograd when it is frozen) and mix its layers: ((B, W, 2P), mask, outputs)."""
        track = torch.is_grad_enabled() and any(p.requires_grad for p in self.elmo.parameters())
        with torch.set_grad_enabled(track):
            outputs = self.elmo(input_ids, attention_mask=attention_mask, word_ids=word_ids, return_dict=True)
        mixed = self.scalar_mix(outputs.hidden_states, outputs.mask)
        return self.dropout(mixed), outputs.mask, outputs

    @torch.no_grad()
    def _init_weights(self, module):
        if isinstance(module, nn.LSTM):
            bound = module.hidden_size**-0.5
            for parameter in module.parameters():
                init.uniform_(parameter, -bound, bound)
        elif isinstance(module, ElmoCrf):
            for parameter in module.parameters():
                init.zeros_(parameter)
        else:
            super()._init_weights(module)


class ElmoForTokenClassification(_ElmoHeadMixin, ElmoPreTrainedModel):
    """ELMo with a tagging head: learned mix -> dropout -> [BiLSTM] -> linear -> [CRF].

    `config.task_encoder` picks `"linear"` or `"bilstm"`, `config.use_crf` adds a CRF, and
    `config.freeze_elmo` (default) keeps the biLM fixed. Labels are one per word (no sub-words);
    -100 marks words without a label (padding, or words to leave out of the loss).
    """

    accepts_loss_kwargs = True

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self._build_elmo(config)
        if config.task_encoder == "bilstm":
            self.encoder = nn.LSTM(
                config.hidden_size,
                config.task_encoder_hidden_size,
                num_layers=config.task_encoder_num_layers,
                bidirectional=True,
                batch_first=True,
                dropout=config.classifier_dropout if config.task_encoder_num_layers > 1 else 0.0,
            )
            classifier_input = 2 * config.task_encoder_hidden_size
        else:
            self.encoder = None
            classifier_input = config.hidden_size
        self.classifier = nn.Linear(classifier_input, config.num_labels)
        self.crf = ElmoCrf(config.num_labels) if config.use_crf else None
        self.post_init()

    def _encode(self, mixed: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if self.encoder is None:
            return mixed
        if mixed.shape[1] == 0:  # every sentence empty: nothing to run
            return mixed.new_zeros(mixed.shape[0], 0, 2 * self.encoder.hidden_size)
        # pack_padded_sequence wants host-side lengths; an empty row runs one padding step, ignored later.
        lengths = mask.sum(dim=1).clamp(min=1).tolist()
        packed = nn.utils.rnn.pack_padded_sequence(mixed, lengths, batch_first=True, enforce_sorted=False)
        encoded, _ = self.encoder(packed)
        encoded, _ = nn.utils.rnn.pad_packed_sequence(encoded, batch_first=True, total_length=mixed.shape[1])
        return self.dropout(encoded)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        word_ids: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        num_items_in_batch: int | torch.Tensor | None = None,
        **kwargs,
    ) -> ElmoTokenClassifierOutput | tuple:
        r"""
        Args:
            input_ids (`torch.LongTensor` of shape `(batch_size, num_words, max_characters_per_token)`):
                Character ids from [`ElmoTokenizer`].
            attention_mask (`torch.Tensor` of shape `(batch_size, num_words)`, *optional*): 1 for real words.
            labels (`torch.LongTensor` of shape `(batch_size, num_words)`, *optional*):
                Tag ids in `[0, num_labels)`, or -100 for no label. The loss is the mean over labelled words of
                the cross-entropy (or, with a CRF, each sentence's negative log-likelihood summed and divided by
                the number of labelled words).
            num_items_in_batch (`int`, *optional*):
                Labelled words in the whole (gradient-accumulated) batch; `Trainer` passes it. Replaces the
                local count as the divisor so that accumulated micro-batches add up to the large-batch loss.
        """
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        mixed, mask, elmo_outputs = self._mixed_representation(input_ids, attention_mask, word_ids)
        logits = self.classifier(self._encode(mixed, mask))

        loss = None
        if labels is not None:
            labels = self._check_labels(labels, mask)
            labelled = (labels != -100) & mask
            if self.crf is not None:
                total = -self.crf.log_likelihood(logits, labels.masked_fill(~mask, -100), mask).sum()
            else:
                total = F.cross_entropy(
                    logits[labelled].float(), labels[labelled], reduction="sum"
                )
            loss = _reduce_loss(total, labelled.sum(), num_items_in_batch)

        predictions = None
        if not self.training:
            with torch.no_grad():
                if self.crf is not None:
                    predictions = self.crf.viterbi_decode(logits, mask)
                else:
                    predictions = logits.argmax(dim=-1).masked_fill(~mask, -100)

        hidden_states = elmo_outputs.hidden_states if output_hidden_states else None
        output = ElmoTokenClassifierOutput(
            loss=loss, logits=logits, predictions=predictions, hidden_states=hidden_states
        )
        return output if return_dict else output.to_tuple()

    def _check_labels(self, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if tuple(labels.shape) != tuple(mask.shape):
            raise ValueError(
                f"labels must have shape (batch, words) = {tuple(mask.shape)}, one label per word; "
                f"got {tuple(labels.shape)}"
            )
        labels = labels.to(device=mask.device, dtype=torch.long)
        real = labels[mask & (labels != -100)]
        if real.numel() and (int(real.min()) < 0 or int(real.max()) >= self.num_labels):
            bad = int(real.min()) if int(real.min()) < 0 else int(real.max())
            raise ValueError(f"label id {bad} is outside [0, {self.num_labels}) (use -100 for 'no label')")
        return labels

    def decode(self, logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Best tags (batch, words) from `logits`, -100 at padding: Viterbi with a CRF, argmax otherwise."""
        if self.crf is not None:
            return self.crf.viterbi_decode(logits, mask)
        return logits.argmax(dim=-1).masked_fill(~mask.bool(), -100)

    def tag_probabilities(self, logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """p(tag | sentence) per word, (batch, words, num_labels): CRF marginals, or the softmax of `logits`."""
        if self.crf is not None:
            return self.crf.marginals(logits, mask)
        return torch.softmax(logits.float(), dim=-1) * mask.unsqueeze(-1)


class ElmoForSequenceClassification(_ElmoHeadMixin, ElmoPreTrainedModel):
    """ELMo with a sentence classifier: learned mix -> masked mean over words -> MLP (`classifier_hidden_size`)."""

    accepts_loss_kwargs = True

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self._build_elmo(config)
        if config.classifier_hidden_size:
            self.pre_classifier = nn.Linear(config.hidden_size, config.classifier_hidden_size)
            classifier_input = config.classifier_hidden_size
        else:
            self.pre_classifier = None
            classifier_input = config.hidden_size
        self.classifier = nn.Linear(classifier_input, config.num_labels)
        self.post_init()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        word_ids: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        num_items_in_batch: int | torch.Tensor | None = None,
        **kwargs,
    ) -> SequenceClassifierOutput | tuple:
        r"""
        Args:
            input_ids (`torch.LongTensor` of shape `(batch_size, num_words, max_characters_per_token)`):
                Character ids from [`ElmoTokenizer`].
            attention_mask (`torch.Tensor` of shape `(batch_size, num_words)`, *optional*): 1 for real words.
            labels (`torch.LongTensor` of shape `(batch_size,)`, *optional*):
                Class ids in `[0, num_labels)`, or -100 to leave a sentence out of the mean cross-entropy loss.
            num_items_in_batch (`int`, *optional*): labelled sentences in the whole accumulated batch (`Trainer`).
        """
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        mixed, mask, elmo_outputs = self._mixed_representation(input_ids, attention_mask, word_ids)
        weights = mask.unsqueeze(-1).to(mixed.dtype)
        pooled = (mixed * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)  # (B, 2P)
        if self.pre_classifier is not None:
            pooled = self.dropout(F.relu(self.pre_classifier(pooled)))
        logits = self.classifier(pooled)

        loss = None
        if labels is not None:
            if tuple(labels.shape) != (logits.shape[0],):
                raise ValueError(f"labels must have shape (batch,) = ({logits.shape[0]},), got {tuple(labels.shape)}")
            labels = labels.to(device=logits.device, dtype=torch.long)
            labelled = labels != -100
            real = labels[labelled]
            if real.numel() and (int(real.min()) < 0 or int(real.max()) >= self.num_labels):
                raise ValueError(f"class ids must be in [0, {self.num_labels}) or -100, got {real.tolist()}")
            total = F.cross_entropy(logits[labelled].float(), real, reduction="sum")
            loss = _reduce_loss(total, labelled.sum(), num_items_in_batch)

        hidden_states = elmo_outputs.hidden_states if output_hidden_states else None
        output = SequenceClassifierOutput(loss=loss, logits=logits, hidden_states=hidden_states)
        return output if return_dict else output.to_tuple()


__all__ = [
    "ElmoModelOutput",
    "ElmoHighwayLayer",
    "ElmoHighway",
    "ElmoCharacterEncoder",
    "ElmoBiLstmLayer",
    "ElmoBiLstm",
    "ElmoScalarMix",
    "ElmoPreTrainedModel",
    "ElmoModel",
    "ElmoForPreTrainingOutput",
    "ElmoLanguageModelSoftmax",
    "ElmoForPreTraining",
    "ElmoCrf",
    "ElmoTokenClassifierOutput",
    "ElmoForTokenClassification",
    "ElmoForSequenceClassification",
]
