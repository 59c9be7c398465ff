# Copyright 2026 The hf-elmo authors. Licensed under the Apache License, Version 2.0.
"""ELMo configuration: the architecture fields of AllenNLP / bilm-tf ``options.json``, and the heads' fields."""

import functools
import math
from typing import Literal

from huggingface_hub.dataclasses import strict
from huggingface_hub.errors import StrictDataclassError

try:
    from transformers import PreTrainedConfig
except ImportError:  # transformers 4.x: configs become dataclasses as on 5.x (fields, then __post_init__(**other keys))
    import dataclasses
    import types
    import typing

    from transformers import PretrainedConfig

    def strict(cls, hub_strict=strict):  # huggingface_hub<1.0 reads `X | Y` only as typing.Union
        for f in dataclasses.fields(cls):
            f.type = typing.Union[typing.get_args(f.type)] if isinstance(f.type, types.UnionType) else f.type
        return hub_strict(cls)

    class PreTrainedConfig(PretrainedConfig):
        def __init_subclass__(cls):
            dataclasses.dataclass(cls, init=False, repr=False, eq=False)

        def __init__(self, **kwargs):
            self.__dict__.update(id2label=kwargs.get("id2label"), dtype=None)  # read before PretrainedConfig sets them
            for f in dataclasses.fields(self):
                setattr(self, f.name, kwargs.pop(f.name, f.default))
            self.__post_init__(**kwargs)

        def __post_init__(self, **kwargs):
            PretrainedConfig.__init__(self, **dataclasses.asdict(self), **kwargs)

        def validate_architecture(self):
            pass

from .text_elmo import BEGINNING_OF_SENTENCE_BYTE, END_OF_SENTENCE_BYTE, byte_boundary_char_ids

#: Fields of the task heads (pretraining softmax, taggers, classifier): a config.json of the encoder alone
#: (`architectures: ["ElmoModel"]`) leaves them out, a head's writes those that differ from the defaults.
HEAD_FIELDS = ("lm_vocab", "lm_softmax", "lm_num_sampled", "lm_dropout", "task_encoder", "task_encoder_hidden_size",
               "task_encoder_num_layers", "use_crf", "freeze_elmo", "task_token_features", "task_character_features",
               "classifier_dropout", "classifier_hidden_size")

# Keys older hf-elmo versions wrote: how the model computed (now chosen at load time, never saved) or tagger
# features that left the package. They are dropped when read; a feature that was switched on is refused.
_RUNTIME_KEYS = ("lstm_implementation", "lstm_keep_inference_copies", "token_cache_size")
_REMOVED_FEATURES = {"label_characters": "character-labelled tagging is its own class now, ElmoForCharacterTagging",
                     "task_bigram_features": "the bigram features were removed (see benchmarks/NER_EXPERIMENTS.md)",
                     "task_lexicon_features": "the lexicon features were removed (see benchmarks/NER_EXPERIMENTS.md)"}

# Bounds checked before anything is built: a config.json asking for a million layers or a billion-wide cell would
# otherwise allocate for minutes before running out of memory.
MAX_LAYERS, MAX_PARAMETERS = 64, 4_000_000_000


@strict
class ElmoConfig(PreTrainedConfig):
    r"""
    Configuration of an ELMo bidirectional language model (Peters et al., 2018). The defaults describe the standard
    ``2x4096_512_2048cnn_2xhighway`` English model. Each field is described beside it (P is `projection_dim`, C
    `lstm_cell_dim`, L `num_lstm_layers`); the task heads' fields follow the encoder's.
    """

    model_type = "elmo"
    # The character embedding is the input embedding: `vocab_size` is its number of rows, as in other models.
    attribute_map = {"num_hidden_layers": "num_lstm_layers", "vocab_size": "char_vocab_size"}
    # Layers and masks stay out of the predictions `Trainer` gathers for evaluation.
    keys_to_ignore_at_inference = ["hidden_states", "mask", "mixes", "final_state"]

    char_vocab_size: int = 262  # rows of the character embedding table; row 0 is padding
    char_embedding_dim: int = 16
    char_cnn_filters: list[list[int]] | None = None  # [width, number_of_filters] per convolution
    num_highway_layers: int = 2  # after the character CNN
    char_cnn_activation: Literal["relu", "tanh"] = "relu"  # after max-pooling
    max_characters_per_token: int = 50  # character ids per word, boundaries included
    projection_dim: int = 512  # P, the size of the token representation and of each direction's output
    lstm_cell_dim: int = 4096  # C, the size of the LSTM memory cell
    num_lstm_layers: int = 2  # L, LSTM layers per direction (`num_hidden_layers` is an alias)
    cell_clip: float | int | None = 3.0  # memory-cell clip; None or 0 disables it
    proj_clip: float | int | None = 3.0  # projected-output clip; None or 0 disables it
    use_skip_connections: bool = True  # residual connections on LSTM layers >= 1
    # Added to the forget gate at run time, as TensorFlow's `LSTMCell` does; keeping it out of the stored bias lets
    # bilm-tf weights round-trip bit for bit.
    lstm_forget_bias: float | int = 1.0
    num_output_representations: int = 1  # learned ELMo mixes `ElmoModel` returns
    # What `ElmoModel` returns as `last_hidden_state` (and so transformers' feature-extraction pipeline): a layer's
    # index among the L+1 (0 the token layer, -1 the top biLSTM layer), "average" (the mean of the L+1 layers,
    # ELMoForManyLangs' default output) or "mix" (the first learned mix).
    feature_layer: int | Literal["average", "mix"] = -1
    # Normalise each layer (one mean/variance over all unmasked elements) before mixing; `ElmoModel` includes the
    # `<S>`/`</S>` positions, as AllenNLP does.
    scalar_mix_layer_norm: bool = False
    # "bytes" (AllenNLP / bilm-tf UTF-8 bytes) or "dictionary" (the tokenizer's character vocabulary, as
    # ELMoForManyLangs).
    char_scheme: Literal["bytes", "dictionary"] = "bytes"
    # The `max_characters_per_token` character ids of the `<S>` / `</S>` pseudo-words the model puts around every
    # sentence; the byte scheme's by default, required for char_scheme="dictionary".
    bos_char_ids: list[int] | None = None
    eos_char_ids: list[int] | None = None
    word_vocab_size: int = 0  # an optional word embedding (0 = none)
    word_embedding_dim: int = 0
    bos_word_id: int | None = None  # word ids of `<S>` and `</S>`; required with a word embedding
    eos_word_id: int | None = None
    # ELMo's layers are its output: returned unless asked otherwise (a standard transformers field, default False).
    output_hidden_states: bool | None = True
    # The tokenizer pads with character id 0 (a padded word is all zeros); transformers compares the two.
    pad_token_id: int | None = 0
    # Word vocabulary of the pretraining softmax: `<S>`, `</S>`, `<UNK>` first, then by decreasing frequency.
    lm_vocab: list[str] | None = None
    lm_softmax: Literal["full", "sampled"] = "full"  # the pretraining softmax
    lm_num_sampled: int = 8192  # negative samples per batch for the sampled softmax
    lm_dropout: float | int = 0.1  # dropout while pretraining
    # The tagger over the mix: "linear" or "bilstm" (a bidirectional LSTM of task_encoder_hidden_size x
    # task_encoder_num_layers, then a linear layer: the paper's NER model).
    task_encoder: Literal["linear", "bilstm"] = "linear"
    task_encoder_hidden_size: int = 200
    task_encoder_num_layers: int = 1
    use_crf: bool = False  # a linear-chain CRF (Viterbi decoding) over the tag scores
    freeze_elmo: bool = True  # keep the biLM fixed while a head trains (the paper's default)
    # The head's own trainable context-free word vectors x_k (a character CNN shaped like layer 0, started from a copy
    # of it), fed as [x_k; ELMo_k] (section 3.3).
    task_token_features: bool = False
    # `ElmoForCharacterTagging` with task_token_features: each character also gets the head's x_k of it read alone.
    task_character_features: bool = False
    classifier_dropout: float | int = 0.5  # dropout on the mix and inside the heads
    classifier_hidden_size: int = 256  # hidden layer of the sentence classifier (0 = none)

    def __post_init__(self, **kwargs):
        for key in _RUNTIME_KEYS:
            kwargs.pop(key, None)
        for key, why in _REMOVED_FEATURES.items():
            if kwargs.pop(key, False):
                raise ValueError(f"Invalid ElmoConfig: {key} is no longer supported: {why}")
        # transformers' own __post_init__ fails with a bare TypeError / AttributeError on these.
        problems = _label_problems(self.id2label, kwargs.get("num_labels"))
        dtype = kwargs.get("dtype", kwargs.get("torch_dtype", self.dtype))
        if isinstance(dtype, str) and dtype != "auto" and not _names_a_torch_dtype(dtype):
            problems.append(f"dtype must name a torch dtype such as 'float32' or 'bfloat16', got {dtype!r}")
        if problems:
            raise ValueError("Invalid ElmoConfig: " + "; ".join(problems))
        if self.char_cnn_filters is None:
            self.char_cnn_filters = [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]]
        self.cell_clip, self.proj_clip = self.cell_clip or None, self.proj_clip or None
        if self.char_scheme == "bytes" and self.max_characters_per_token >= 3:
            if self.bos_char_ids is None:
                self.bos_char_ids = byte_boundary_char_ids(BEGINNING_OF_SENTENCE_BYTE, self.max_characters_per_token)
            if self.eos_char_ids is None:
                self.eos_char_ids = byte_boundary_char_ids(END_OF_SENTENCE_BYTE, self.max_characters_per_token)
        super().__post_init__(**kwargs)
        self.check_values()

    @property
    def hidden_size(self) -> int:
        """Width of every ELMo layer: forward and backward outputs side by side (2P)."""
        return 2 * self.projection_dim

    @property
    def lm_vocab_size(self) -> int:
        return len(self.lm_vocab) if self.lm_vocab else 0

    @property
    def num_char_filters(self) -> int:
        return sum(n for _, n in self.char_cnn_filters)

    def to_diff_dict(self) -> dict:
        values = super().to_diff_dict()
        encoder_only = list(self.architectures or ()) == ["ElmoModel"]
        defaults = type(self)()
        if values.get("output_hidden_states") is True:
            del values["output_hidden_states"]
        for name in HEAD_FIELDS:
            if name in values and (encoder_only or values[name] == getattr(defaults, name)):
                del values[name]
        return values

    def validate_architecture(self):
        """Part of `@strict`'s validation (on `validate()` and before saving)."""
        super().validate_architecture()
        self.check_values()

    def check_values(self) -> None:
        """ValueError naming every field whose value is out of range (the types `@strict` checks itself); run on
        creation, by the models before they build anything, and before saving."""
        problems = _label_problems(self.id2label, None)
        for name in ("cell_clip", "proj_clip"):
            if getattr(self, name) is not None and not getattr(self, name) >= 0:
                problems.append(f"{name} must be a non-negative number or null, got {getattr(self, name)}")
        for name in ("char_vocab_size", "char_embedding_dim", "projection_dim", "lstm_cell_dim", "num_lstm_layers",
                     "task_encoder_hidden_size", "task_encoder_num_layers"):
            if getattr(self, name) <= 0:
                problems.append(f"{name} must be positive, got {getattr(self, name)}")
        for name in ("num_highway_layers", "num_output_representations", "classifier_hidden_size", "lm_num_sampled"):
            if getattr(self, name) < 0:
                problems.append(f"{name} must be >= 0, got {getattr(self, name)}")
        for name in ("num_lstm_layers", "num_highway_layers", "num_output_representations", "task_encoder_num_layers"):
            if getattr(self, name) > MAX_LAYERS:
                problems.append(f"{name} must be at most {MAX_LAYERS}, got {getattr(self, name)}")
        if not self.char_cnn_filters:
            problems.append("char_cnn_filters is empty")
        for width, count in self.char_cnn_filters:
            if width <= 0 or count <= 0:
                problems.append(f"char_cnn_filters entry [{width}, {count}] must have positive width and count")
            elif width > self.max_characters_per_token:
                problems.append(f"char_cnn_filters width {width} exceeds max_characters_per_token "
                                f"{self.max_characters_per_token}")
        if self.max_characters_per_token < 3:
            problems.append("max_characters_per_token must be >= 3 (begin-of-word, a character, end-of-word)")
        if self.char_scheme == "bytes" and self.char_vocab_size < 262:
            problems.append(f"the byte scheme needs char_vocab_size >= 262, got {self.char_vocab_size}")
        if self.lm_softmax == "sampled" and self.lm_num_sampled < 1:
            problems.append(f"lm_num_sampled must be >= 1 for the sampled softmax, got {self.lm_num_sampled}")
        if self.lm_vocab and list(self.lm_vocab[:3]) != ["<S>", "</S>", "<UNK>"]:
            problems.append("lm_vocab must start with '<S>', '</S>', '<UNK>'")
        for name in ("classifier_dropout", "lm_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:  # `not` also catches nan
                problems.append(f"{name} must be in [0, 1), got {getattr(self, name)}")
        if not math.isfinite(self.lstm_forget_bias):
            problems.append(f"lstm_forget_bias must be a finite number, got {self.lstm_forget_bias}")
        layers = self.num_lstm_layers + 1
        if isinstance(self.feature_layer, int) and not -layers <= self.feature_layer < layers:
            problems.append(f"feature_layer must be a layer index in [{-layers}, {layers - 1}], 'average' or 'mix', "
                            f"got {self.feature_layer}")
        if self.feature_layer == "mix" and self.num_output_representations < 1:
            problems.append("feature_layer='mix' needs a learned mix (num_output_representations >= 1)")
        if self.task_character_features and not self.task_token_features:
            problems.append("task_character_features needs task_token_features")
        problems.extend(self._input_layer_problems())
        if not problems and self.num_parameters_estimate() > MAX_PARAMETERS:
            problems.append(f"this architecture has about {self.num_parameters_estimate():,} weights, more than the "
                            f"{MAX_PARAMETERS:,} hf-elmo builds (check lstm_cell_dim, projection_dim, "
                            "char_cnn_filters)")
        if problems:
            raise ValueError("Invalid ElmoConfig: " + "; ".join(problems))

    def num_parameters_estimate(self) -> int:
        """The encoder's weights (and the pretraining softmax's), from the sizes alone."""
        filters = self.num_char_filters
        cnn = self.char_vocab_size * self.char_embedding_dim + sum(count * (width * self.char_embedding_dim + 1)
                                                                   for width, count in self.char_cnn_filters)
        highway = self.num_highway_layers * 2 * filters * (filters + 1)
        projection = (filters + self.word_embedding_dim + 1) * self.projection_dim
        cell, width = self.lstm_cell_dim, self.projection_dim
        lstm = self.num_lstm_layers * 2 * (4 * cell * (2 * width + 1) + width * cell)
        words = self.word_vocab_size * self.word_embedding_dim + self.lm_vocab_size * (width + 1)
        return cnn + highway + projection + lstm + words

    def _input_layer_problems(self) -> list[str]:
        """What is wrong with the boundary rows and the optional word embedding."""
        problems = []
        for name in ("bos_char_ids", "eos_char_ids"):
            ids = getattr(self, name)
            if ids is None:
                problems.append(f"{name} is required for char_scheme={self.char_scheme!r}")
            elif len(ids) != self.max_characters_per_token:
                problems.append(f"{name} must hold max_characters_per_token={self.max_characters_per_token} ids, "
                                f"got {len(ids)}")
            elif not all(0 < i < self.char_vocab_size for i in ids):
                # 0 would make the boundary look like a padded word position.
                problems.append(f"{name} must be character ids in [1, {self.char_vocab_size - 1}], got {ids}")
        if self.word_vocab_size < 0 or self.word_embedding_dim < 0:
            problems.append("word_vocab_size and word_embedding_dim must be >= 0")
        elif bool(self.word_vocab_size) != bool(self.word_embedding_dim):
            problems.append("word_vocab_size and word_embedding_dim must both be positive (word embedding) or both 0 "
                            f"(none), got {self.word_vocab_size} and {self.word_embedding_dim}")
        elif self.word_vocab_size:
            for name in ("bos_word_id", "eos_word_id"):
                value = getattr(self, name)
                if value is None or not 0 <= value < self.word_vocab_size:
                    problems.append(f"{name} must be a word id in [0, {self.word_vocab_size - 1}], got {value!r}")
        return problems

    @classmethod
    def get_config_dict(cls, pretrained_model_name_or_path, **kwargs):
        config_dict, kwargs = super().get_config_dict(pretrained_model_name_or_path, **kwargs)
        if not isinstance(config_dict, dict):
            raise ValueError(f"the config.json of {pretrained_model_name_or_path} holds a JSON "
                             f"{type(config_dict).__name__}, not the object of settings a model config is")
        model_type = config_dict.get("model_type")
        if model_type is not None and model_type != cls.model_type:
            # Without this, transformers only warns and then fails on some unrelated attribute.
            raise ValueError(f"{pretrained_model_name_or_path} holds a {model_type!r} model, not an ELMo model "
                             f"(model_type '{cls.model_type}'): load it with its own class or an Auto class")
        return config_dict, kwargs


def _label_problems(id2label, num_labels) -> list[str]:
    problems = []
    if id2label is not None and not isinstance(id2label, dict):
        problems.append(f"id2label must be an object {{id: label}}, got {id2label!r}")
    if num_labels is not None and (type(num_labels) is not int or num_labels < 1):
        problems.append(f"num_labels must be a positive integer, got {num_labels!r}")
    return problems


def _names_a_torch_dtype(name: str) -> bool:
    import torch

    return isinstance(getattr(torch, name.removeprefix("torch."), None), torch.dtype)


def _value_errors(init):
    """`@strict`'s type errors as the ValueError every other bad value of the config is (one line, naming the field),
    so that callers reading a config.json or options.json report them as they report the rest."""

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        try:
            init(self, *args, **kwargs)
        except StrictDataclassError as error:
            raise ValueError("Invalid ElmoConfig: " + " ".join(str(error).split())) from error

    return __init__


ElmoConfig.__init__ = _value_errors(ElmoConfig.__init__)

__all__ = ["ElmoConfig"]
