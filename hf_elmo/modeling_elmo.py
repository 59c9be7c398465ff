"""PyTorch ELMo: character CNN -> highway -> projection -> biLSTM language model -> layer mix.

The file reads top-down in the order data flows through the model:

1. `ElmoCharacterEncoder`   character ids (words, 50) -> context-insensitive token vectors (words, P)
2. `ElmoBiLstm`             token vectors -> forward and backward LSTM layers with cell/projection clipping
                            (elmo_lstm.py: the recurrence, its kernels and `config.lstm_implementation`)
3. `ElmoScalarMix`          L+1 layers -> gamma * sum_j softmax(w)_j * layer_j
4. `ElmoModel`              the encoder users load; adds sentence boundaries, returns all layers and mixes
5. task heads               thin layers over `ElmoModel`

Numerics follow AllenNLP / bilm-tf exactly. LSTM weights are stored (out, in) like `nn.Linear`, the
layout the fast path multiplies with; conversion from and to bilm-tf's (in, out) layout is a pure
reshuffle and round-trips bit for bit.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel
from transformers import initialization as init
from transformers.modeling_outputs import SequenceClassifierOutput, TokenClassifierOutput
from transformers.utils import ModelOutput, add_start_docstrings_to_model_forward, logging

from .configuration_elmo import ElmoConfig
from .elmo_char_encoder import ElmoCharacterEncoder, ElmoHighway, ElmoHighwayLayer  # noqa: F401 (public names)
from .elmo_crf import ElmoCrf
from .elmo_losses import classification_loss, tagging_loss
from .elmo_lstm import ElmoBiLstm, ElmoBiLstmLayer
from .elmo_sampled_softmax import log_uniform_samples, sampled_softmax_losses
from .elmo_scalar_mix import ElmoScalarMix
from .elmo_token_cache import ElmoTokenCache
from .elmo_word_characters import LEXICON_ROLES, WORD_POSITIONS, lexicon_vectors, tagged_vectors
from .weight_checksums import (  # noqa: F401 (public names)
    WEIGHT_CHECKSUMS_FILE,
    check_finite_weights,
    verify_weight_checksums,
    write_weight_checksums,
)

logger = logging.get_logger(__name__)

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


# 1. Characters -> token vectors: `ElmoCharacterEncoder` in elmo_char_encoder.py ----------------


# 2. The biLSTM: `ElmoBiLstm` in elmo_lstm.py -------------------------------------------------


# 3. Mixing the layers: `ElmoScalarMix` in elmo_scalar_mix.py ------------------------------------


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


# 4. The model -------------------------------------------------------------------------------


class ElmoWeightShapeError(ValueError):
    """Saved weights whose shapes differ from the model their config.json (with the caller's overrides) describes."""


class ElmoPreTrainedModel(PreTrainedModel):
    config: ElmoConfig
    config_class = ElmoConfig
    base_model_prefix = "elmo"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = False

    def __init__(self, config: ElmoConfig, *inputs, **kwargs):
        # `from_pretrained(..., field=value)` sets its arguments on the config after ElmoConfig checked it.
        config._validate()
        super().__init__(config, *inputs, **kwargs)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
        # Weights come from safetensors only: never fall back to unpickling a pytorch_model.bin.
        kwargs.setdefault("use_safetensors", True)
        known_finite = os.path.isdir(pretrained_model_name_or_path) and verify_weight_checksums(pretrained_model_name_or_path)
        try:
            model = super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
            if not known_finite:  # a NaN scan reads every weight (0.3 s at the standard size): only when unknown
                check_finite_weights(model[0] if isinstance(model, tuple) else model, pretrained_model_name_or_path)
            return model
        except RuntimeError as error:
            if "ignore_mismatched_sizes" not in str(error) and "size mismatch" not in str(error):
                raise
            raise ElmoWeightShapeError(
                f"the weights in {pretrained_model_name_or_path} do not have the shapes its config.json (with your "
                "arguments) describes; transformers' load report lists the tensors that differ"
            ) from error
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
        except Exception as error:
            if type(error).__name__ != "SafetensorError":  # safetensors' own class; not imported here (remote code)
                raise
            raise OSError(
                f"{pretrained_model_name_or_path}: its model.safetensors is damaged or incomplete ({error}); "
                "save or download the model again"
            ) from error

    def save_pretrained(self, save_directory, *args, **kwargs):
        # transformers writes only the saved class's own entry into `config.auto_map`; list every ELMo class
        # registered for remote code (see `register_for_auto_class`), so any head loads from this folder.
        if self.is_remote_code():
            auto_map = {**(getattr(self.config, "auto_map", None) or {}), **_remote_code_auto_map()}
            if not self.config.lm_vocab:  # the pretraining head needs the softmax's word list
                auto_map.pop("AutoModelForPreTraining", None)
            self.config.auto_map = auto_map
        result = super().save_pretrained(save_directory, *args, **kwargs)
        if kwargs.get("is_main_process", True):
            state = kwargs.get("state_dict") or self.state_dict()
            all_finite = all(bool(torch.isfinite(t).all()) for t in state.values() if t.is_floating_point())
            write_weight_checksums(save_directory, all_finite)
        return result

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

    @torch.no_grad()
    def build_token_cache(self, char_ids: torch.Tensor, batch_size: int = 1024) -> int:
        """Precompute layer 0 for a vocabulary so that known words skip the character CNN.

        Args:
            char_ids: `(V, max_characters_per_token)` character ids of the words to cache, e.g.
                `torch.tensor([tokenizer.word_to_char_ids(w) for w in words])`; `<S>`/`</S>` are added.

        The cache is stored as buffers of `char_encoder.token_cache` (so `save_pretrained` writes it and
        `from_pretrained` loads it; `config.token_cache_size` records its size). It is used in eval mode
        when no gradient is needed (e.g. under `torch.no_grad()`); unknown words fall back to the CNN.
        Returns the number of cached tokens.
        """
        encoder = self.char_encoder
        if encoder.word_embedding is not None:
            raise ValueError("a token cache needs a model without a word embedding (its vectors depend on word ids)")
        width = self.config.max_characters_per_token
        if not isinstance(char_ids, torch.Tensor) or char_ids.dim() != 2 or char_ids.shape[1] != width:
            raise ValueError(f"char_ids must be a (num_words, {width}) tensor of character ids")
        if char_ids.shape[0]:
            self._validate_input_ids(char_ids.unsqueeze(0))  # integer ids inside the character vocabulary
            if bool((char_ids == 0).all(dim=1).any()):
                raise ValueError("char_ids has an all-zero row: that is a padded position, not a word")
        device = encoder.projection.weight.device
        boundaries = self.sentence_boundary_char_ids().to(char_ids.device)
        ids = torch.unique(torch.cat([boundaries, char_ids.long()]).to(device), dim=0)
        was_training = encoder.training
        encoder.eval()
        vectors = torch.cat([encoder.encode(ids[i : i + batch_size]) for i in range(0, ids.shape[0], batch_size)])
        encoder.train(was_training)
        encoder.token_cache = ElmoTokenCache(ids.shape[0], width, vectors.shape[1]).to(device)
        encoder.token_cache.fill(ids, vectors, encoder)
        self.config.token_cache_size = ids.shape[0]
        return ids.shape[0]

    def drop_token_cache(self) -> None:
        """Remove the token-embedding cache (and its size from the config)."""
        self.char_encoder.token_cache = None
        self.config.token_cache_size = 0

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
            if not bool(((attention_mask == 0) | (attention_mask == 1)).all()):
                raise ValueError("attention_mask must hold only 0 (padding) and 1 (a word)")
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
        _refuse_unknown_arguments(type(self).__name__, kwargs)
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        self._validate_input_ids(input_ids)
        input_ids = input_ids.long()  # any integer dtype (uint8 and int16 too) indexes the embedding as int64
        mask = self.word_mask(input_ids, attention_mask)
        tokens, lengths = self.token_representations(input_ids, mask, word_ids)
        # A layer-normalised mix, as AllenNLP computes it, normalises each layer over the words *and* the
        # <S>/</S> positions, and only then drops the boundaries: it needs their outputs.
        normalised_mix = any(mix.layer_norm for mix in self.scalar_mixes)
        # Without boundaries, state or such a mix, no caller sees the steps that read the opposite boundary.
        skip_final_step = not (keep_sentence_boundaries or return_state or normalised_mix)
        lstm_layers, final_state = self.bilstm(tokens, lengths, initial_state, skip_final_step=skip_final_step)
        layers = [torch.cat([tokens, tokens], dim=-1)] + lstm_layers

        # Mixed before the boundaries are dropped, as AllenNLP does (it matters only to a layer-normalised mix).
        output_mask = torch.arange(tokens.shape[1], device=tokens.device) < lengths.unsqueeze(1)
        mixes = tuple(mix(layers, output_mask) for mix in self.scalar_mixes)
        if not keep_sentence_boundaries:
            output_mask = mask
            keep = mask.unsqueeze(-1).to(tokens.dtype)
            layers = [layer[:, 1:-1] * keep for layer in layers]
            mixes = tuple(mixed[:, 1:-1] * keep for mixed in mixes)
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

    Training with `config.lm_softmax == "sampled"` uses the importance-sampled softmax of
    `elmo_sampled_softmax` (log-uniform negatives, corrected logits, accidental hits removed).
    Evaluation always uses the full softmax, so perplexities are exact.
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
        samples, log_expected = log_uniform_samples(self.weight.shape[0], self.num_sampled, hidden.device, generator)
        losses = sampled_softmax_losses(hidden, self.weight, self.bias, targets, samples, log_expected)
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
        _refuse_unknown_arguments(type(self).__name__, kwargs)
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


# Keyword arguments transformers' own code may pass to any model's forward; they do not apply to ELMo.
_IGNORED_ARGUMENTS = frozenset(
    {"output_attentions", "output_hidden_states", "token_type_ids", "position_ids", "use_cache", "num_items_in_batch"}
)


def _refuse_unknown_arguments(model_name: str, kwargs: dict) -> None:
    """A misspelt argument (`initial_states=`, `return_states=`) would otherwise be ignored without a word."""
    unknown = sorted(set(kwargs) - _IGNORED_ARGUMENTS)
    if unknown:
        raise TypeError(f"{model_name}.forward() got unexpected keyword arguments: {', '.join(unknown)}")


_HEAD_INPUTS_DOCSTRING = r"""
        Args:
            input_ids (`torch.LongTensor` of shape `(batch_size, num_words, max_characters_per_token)`):
                Character ids from [`ElmoTokenizer`].
            attention_mask (`torch.Tensor` of shape `(batch_size, num_words)`, *optional*): 1 for real words.
            word_ids (`torch.LongTensor` of shape `(batch_size, num_words)`, *optional*): Word-vocabulary ids, for
                models with a word embedding (as [`ElmoModel`] takes them).
            elmo_hidden_states (`torch.FloatTensor` of shape `(batch_size, num_lstm_layers + 1, num_words, 2P)`, *optional*):
                The frozen biLM's layers (`ElmoModel.hidden_states` stacked on dim 1) computed beforehand, instead
                of `input_ids` (which `config.task_token_features` still needs); needs `config.freeze_elmo`.
            output_hidden_states (`bool`, *optional*): Also return the biLM layers.
            num_items_in_batch (`int`, *optional*): Labelled items in the whole accumulated batch (`Trainer`), the
                loss's divisor so that accumulated micro-batches add up to the large-batch loss."""


class _ElmoHeadMixin:
    """What both heads share: the biLM (optionally frozen), an own learned mix, optional own word vectors x_k,
    dropout, weight init."""

    def _build_elmo(self, config: ElmoConfig) -> None:
        self.elmo = ElmoModel(config)
        # The head's own mix, so that it trains even when the biLM is frozen.
        self.scalar_mix = ElmoScalarMix(config.num_lstm_layers + 1, layer_norm=config.scalar_mix_layer_norm)
        # The paper's task models keep their own context-free word vectors x_k and read [x_k; ELMo_k].
        self.token_features = (
            ElmoCharacterEncoder(config, with_token_cache=False) if config.task_token_features else None
        )
        self.feature_size = config.hidden_size + (config.projection_dim if config.task_token_features else 0)
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
        wants_loading_info = kwargs.pop("output_loading_info", False)
        model, loading_info = super().from_pretrained(*args, output_loading_info=True, **kwargs)
        if model.token_features is not None and any(
            key.startswith("token_features.") for key in loading_info["missing_keys"]
        ):
            # A biLM checkpoint without a task head: the head's word vectors start as the biLM's layer 0
            # (not strict: the biLM's token-cache buffers, if any, have no counterpart in the head's copy).
            model.token_features.load_state_dict(model.elmo.char_encoder.state_dict(), strict=False)
        # Loading swaps in fresh parameters (requires_grad=True), so apply `freeze_elmo` again.
        model.set_elmo_frozen(model.config.freeze_elmo)
        return (model, loading_info) if wants_loading_info else model

    def _head_inputs(self, input_ids, attention_mask, word_ids, elmo_hidden_states, return_dict, unknown_arguments):
        """What both heads' `forward` begin with: refuse unknown arguments, resolve `return_dict`, mix the layers.

        Returns (mixed vectors, mask, biLM layers) as `_mixed_representation` does, and `return_dict`."""
        _refuse_unknown_arguments(type(self).__name__, unknown_arguments)
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        return *self._mixed_representation(input_ids, attention_mask, word_ids, elmo_hidden_states), return_dict

    def _mixed_representation(self, input_ids, attention_mask, word_ids=None, elmo_hidden_states=None):
        """Run the biLM (without autograd when it is frozen), or take its precomputed layers, and mix them.

        Returns ((B, W, F) mixed and dropped-out vectors, (B, W) bool mask, the biLM layers (L+1 tensors)).
        F = `feature_size`: 2P, plus P for the head's own word vectors x_k (`config.task_token_features`)."""
        if elmo_hidden_states is not None:
            layers, mask = self._check_precomputed_layers(input_ids, attention_mask, elmo_hidden_states)
        else:
            if input_ids is None:
                raise ValueError("pass input_ids (character ids) or elmo_hidden_states (precomputed biLM layers)")
            track = torch.is_grad_enabled() and any(p.requires_grad for p in self.elmo.parameters())
            with torch.set_grad_enabled(track):
                outputs = self.elmo(input_ids, attention_mask=attention_mask, word_ids=word_ids, return_dict=True)
            layers, mask = outputs.hidden_states, outputs.mask
        mixed = self.scalar_mix(layers, mask)
        if self.token_features is not None:
            mixed = torch.cat([self._own_word_vectors(input_ids, mask, word_ids, like=mixed), mixed], dim=-1)
        return self.dropout(mixed), mask, layers

    def _own_word_vectors(self, input_ids, mask, word_ids, like: torch.Tensor, name: str = "input_ids") -> torch.Tensor:
        """x_k of the words (zeros at padding): (B, W, P)."""
        if input_ids is None:
            raise ValueError(
                f"config.task_token_features: the head's own word vectors need {name} (character ids), "
                "also when the biLM layers come precomputed in elmo_hidden_states"
            )
        if input_ids.shape[:2] != mask.shape:
            raise ValueError(f"{name} must be (batch, positions, characters) with (batch, positions) = "
                             f"{tuple(mask.shape)}, got {tuple(input_ids.shape)}")
        vectors = like.new_zeros(*mask.shape, self.config.projection_dim)
        if mask.any():
            selected_word_ids = None if word_ids is None else word_ids.to(mask.device)[mask]
            vectors[mask] = self.token_features(input_ids.to(mask.device)[mask], selected_word_ids).to(like.dtype)
        return vectors

    def _check_precomputed_layers(self, input_ids, attention_mask, elmo_hidden_states):
        # Feeding stored layers skips the biLM, which is only the same model when the biLM does not train.
        if input_ids is not None and self.token_features is None:
            raise ValueError("pass either input_ids or elmo_hidden_states, not both")
        if not self.config.freeze_elmo:
            raise ValueError("elmo_hidden_states (precomputed biLM layers) need a frozen biLM (config.freeze_elmo)")
        if attention_mask is None:
            raise ValueError("elmo_hidden_states need the attention_mask that says which positions are words")
        expected = self.config.num_lstm_layers + 1
        layers = elmo_hidden_states
        if torch.is_tensor(layers):
            if layers.dim() != 4 or layers.shape[1] != expected:
                raise ValueError(
                    f"elmo_hidden_states must be (batch, {expected} layers, words, {self.config.hidden_size}), "
                    f"got shape {tuple(layers.shape)}"
                )
            layers = layers.unbind(1)
        if len(layers) != expected:
            raise ValueError(f"elmo_hidden_states must hold {expected} layers, got {len(layers)}")
        mask = attention_mask.to(device=layers[0].device).bool()
        for layer in layers:
            if tuple(layer.shape) != (*mask.shape, self.config.hidden_size):
                raise ValueError(
                    f"each precomputed layer must be (batch, words, {self.config.hidden_size}) = "
                    f"{(*mask.shape, self.config.hidden_size)} to match attention_mask, got {tuple(layer.shape)}"
                )
        if input_ids is not None and tuple(input_ids.shape) != (*mask.shape, self.config.max_characters_per_token):
            raise ValueError(
                f"input_ids must be (batch, words, {self.config.max_characters_per_token}) = "
                f"{(*mask.shape, self.config.max_characters_per_token)} to match attention_mask, "
                f"got {tuple(input_ids.shape)}"
            )
        return tuple(layers), mask

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


class ElmoTaskBiLstm(nn.LSTM):
    """The tagging head's bidirectional LSTM over padded batches: each row runs over its own words only
    (packed); positions past them are zeros. (An `nn.LSTM` itself, so saved taggers keep their weight names.)"""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int, dropout: float):
        super().__init__(input_size, hidden_size, num_layers=num_layers, bidirectional=True, batch_first=True,
                         dropout=dropout if num_layers > 1 else 0.0)

    def forward(self, inputs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(batch, words, features), (batch, words) bool -> (batch, words, 2 * hidden_size)."""
        if inputs.shape[1] == 0:  # every sentence empty: nothing to run
            return inputs.new_zeros(inputs.shape[0], 0, 2 * self.hidden_size)
        # pack_padded_sequence wants host-side lengths; an empty row runs one padding step, ignored later.
        lengths = mask.sum(dim=1).clamp(min=1).tolist()
        packed = nn.utils.rnn.pack_padded_sequence(inputs, lengths, batch_first=True, enforce_sorted=False)
        encoded, _ = super().forward(packed)
        return nn.utils.rnn.pad_packed_sequence(encoded, batch_first=True, total_length=inputs.shape[1])[0]


class ElmoForTokenClassification(_ElmoHeadMixin, ElmoPreTrainedModel):
    """ELMo with a tagging head: learned mix [; own word vectors x_k] -> dropout -> [BiLSTM] -> linear -> [CRF].

    `config.task_encoder` ("linear" / "bilstm"), `config.use_crf`, `config.task_token_features` (the head's own
    trainable word vectors: the paper's [x_k; ELMo_k]), `config.freeze_elmo` (default). One label per word, or per
    character with `config.label_characters`."""

    accepts_loss_kwargs = True

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self._build_elmo(config)
        feature_size = self.feature_size + (len(WORD_POSITIONS) if config.label_characters else 0)
        feature_size += config.projection_dim * (config.task_character_features + config.task_bigram_features)
        feature_size += config.projection_dim * len(LEXICON_ROLES) * config.task_lexicon_features
        self.encoder = None
        if config.task_encoder == "bilstm":
            self.encoder = ElmoTaskBiLstm(feature_size, config.task_encoder_hidden_size,
                                          config.task_encoder_num_layers, config.classifier_dropout)
        encoded_size = 2 * config.task_encoder_hidden_size if self.encoder is not None else feature_size
        self.classifier = nn.Linear(encoded_size, config.num_labels)
        self.crf = ElmoCrf(config.num_labels) if config.use_crf else None
        self.post_init()

    @add_start_docstrings_to_model_forward(_HEAD_INPUTS_DOCSTRING)
    def forward(
        self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None, word_ids: torch.Tensor | None = None,
        token_word_index: torch.Tensor | None = None, token_positions: torch.Tensor | None = None,
        character_input_ids: torch.Tensor | None = None, bigram_input_ids: torch.Tensor | None = None,
        lexicon_input_ids: torch.Tensor | None = None, lexicon_weights: torch.Tensor | None = None,
        lexicon_match_index: torch.Tensor | None = None,
        output_hidden_states: bool | None = None, return_dict: bool | None = None,
        num_items_in_batch: int | torch.Tensor | None = None, elmo_hidden_states: torch.Tensor | None = None, **kwargs,
    ) -> ElmoTokenClassifierOutput | tuple:
        r"""
            token_word_index, token_positions (`torch.LongTensor` of shape `(batch_size, num_characters)`):
                With `config.label_characters`: each character's word (-1 at padding) and position in it; labels,
                logits and predictions are then per character (see `elmo_word_characters`).
            character_input_ids (`torch.LongTensor` of shape `(batch_size, num_characters, max_characters_per_token)`):
                With `config.task_character_features`: the character ids of each character read as a word alone.
            bigram_input_ids (`torch.LongTensor` of shape `(batch_size, num_characters, max_characters_per_token)`):
                With `config.task_bigram_features`: the character ids of each character and the next one read as one
                word (`char_words.character_bigrams`).
            lexicon_input_ids (`torch.LongTensor` of shape `(batch_size, num_lexicon_words, max_characters_per_token)`),
            lexicon_weights (`torch.FloatTensor` of shape `(batch_size, num_lexicon_words)`),
            lexicon_match_index (`torch.LongTensor` of shape `(batch_size, num_characters, 3, num_matches)`):
                With `config.task_lexicon_features`: the dictionary words found in each sentence, their weights (0 at
                padding) and, per character, the words it begins / is inside of / ends (-1: none); see
                `elmo_word_characters.lexicon_vectors`.
            labels (`torch.LongTensor` of shape `(batch_size, num_words)`, *optional*): Tag ids in `[0, num_labels)`
                or -100 (none). Loss: the mean cross-entropy (or CRF negative log-likelihood) per labelled word.
        """
        mixed, mask, elmo_layers, return_dict = self._head_inputs(
            input_ids, attention_mask, word_ids, elmo_hidden_states, return_dict, kwargs
        )
        mixed, mask = tagged_vectors(self.config.label_characters, mixed, mask, token_word_index, token_positions)
        mixed = torch.cat([mixed] + self._character_vectors(character_input_ids, bigram_input_ids, mask, like=mixed)
                          + self._lexicon_vectors(lexicon_input_ids, lexicon_weights, lexicon_match_index, like=mixed), -1)
        logits = self.classifier(self.dropout(self.encoder(mixed, mask)) if self.encoder is not None else mixed)
        loss = None if labels is None else tagging_loss(logits, labels, mask, self.crf, num_items_in_batch)
        predictions = None
        if not self.training:
            with torch.no_grad():
                predictions = self.decode(logits, mask)
        output = ElmoTokenClassifierOutput(loss=loss, logits=logits, predictions=predictions,
                                           hidden_states=elmo_layers if output_hidden_states else None)
        return output if return_dict else output.to_tuple()

    def _character_vectors(self, character_input_ids, bigram_input_ids, mask, like) -> list[torch.Tensor]:
        """The head's own x_k of each character alone and of it with the next one, as the config asks for."""
        vectors = []
        for field, name, ids in (("task_character_features", "character_input_ids", character_input_ids),
                                 ("task_bigram_features", "bigram_input_ids", bigram_input_ids)):
            if getattr(self.config, field):
                vectors.append(self.dropout(self._own_word_vectors(ids, mask, None, like=like, name=name)))
            elif ids is not None:
                raise ValueError(f"{name} are for taggers with config.{field}")
        return vectors

    def _lexicon_vectors(self, lexicon_input_ids, lexicon_weights, lexicon_match_index, like) -> list[torch.Tensor]:
        """Each character's dictionary words by role, read by the head's own x_k, as the config asks for."""
        inputs = {"lexicon_input_ids": lexicon_input_ids, "lexicon_weights": lexicon_weights,
                  "lexicon_match_index": lexicon_match_index}
        given = [name for name, value in inputs.items() if value is not None]
        if given and not self.config.task_lexicon_features:
            raise ValueError(f"{', '.join(given)} are for taggers with config.task_lexicon_features")
        if not self.config.task_lexicon_features:
            return []
        if len(given) != len(inputs):
            raise ValueError(f"config.task_lexicon_features: pass {', '.join(inputs)} (char_words.lexicon_matches of "
                             "the hf-elmo package finds them)")
        weights = lexicon_weights.to(like.device)
        word_vectors = self._own_word_vectors(lexicon_input_ids, weights > 0, None, like=like, name="lexicon_input_ids")
        return [self.dropout(lexicon_vectors(word_vectors, weights, lexicon_match_index, like.shape[1]))]

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
            self.pre_classifier = nn.Linear(self.feature_size, config.classifier_hidden_size)
            classifier_input = config.classifier_hidden_size
        else:
            self.pre_classifier = None
            classifier_input = self.feature_size
        self.classifier = nn.Linear(classifier_input, config.num_labels)
        self.post_init()

    @add_start_docstrings_to_model_forward(_HEAD_INPUTS_DOCSTRING)
    def forward(
        self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None, word_ids: torch.Tensor | None = None,
        output_hidden_states: bool | None = None, return_dict: bool | None = None,
        num_items_in_batch: int | torch.Tensor | None = None, elmo_hidden_states: torch.Tensor | None = None, **kwargs,
    ) -> SequenceClassifierOutput | tuple:
        r"""
            labels (`torch.Tensor`, *optional*): as transformers' classification heads read them, by
                `config.problem_type` (when unset: regression if `num_labels == 1`, else single-label for integer
                labels and multi-label for floating-point ones):
                * single-label classification: class ids `(batch_size,)` in `[0, num_labels)`, or -100 to leave a
                  sentence out of the mean cross-entropy loss;
                * regression: targets `(batch_size,)` or `(batch_size, num_labels)`, mean squared error;
                * multi-label classification: 0/1 targets `(batch_size, num_labels)`, mean binary cross-entropy.
        """
        mixed, mask, elmo_layers, return_dict = self._head_inputs(
            input_ids, attention_mask, word_ids, elmo_hidden_states, return_dict, kwargs
        )
        weights = mask.unsqueeze(-1).to(mixed.dtype)
        pooled = (mixed * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)  # (B, F)
        if self.pre_classifier is not None:
            pooled = self.dropout(F.relu(self.pre_classifier(pooled)))
        logits = self.classifier(pooled)

        loss = None if labels is None else classification_loss(logits, labels, self.config.problem_type, num_items_in_batch)

        hidden_states = elmo_layers if output_hidden_states else None
        output = SequenceClassifierOutput(loss=loss, logits=logits, hidden_states=hidden_states)
        return output if return_dict else output.to_tuple()


__all__ = [
    "ElmoModelOutput",
    "ElmoHighwayLayer",
    "ElmoHighway",
    "ElmoCharacterEncoder",
    "ElmoTokenCache",
    "ElmoBiLstmLayer",
    "ElmoBiLstm",
    "ElmoScalarMix",
    "ElmoWeightShapeError",
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
