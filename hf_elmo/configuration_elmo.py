"""ELMo configuration: the architecture fields of AllenNLP / bilm-tf ``options.json``."""

from __future__ import annotations

import math

from transformers import PretrainedConfig
from transformers.utils import logging

from .field_types import BOOLEAN, INTEGER, INTEGER_LIST, INTEGER_PAIRS, NUMBER, TEXT_LIST, one_of, optional, type_problems

logger = logging.get_logger(__name__)

_CHAR_SCHEMES = ("bytes", "dictionary")

# Raw ids of the byte scheme (before its +1 shift that keeps 0 for padding).
_BEGINNING_OF_SENTENCE_BYTE = 256
_END_OF_SENTENCE_BYTE = 257
_BEGINNING_OF_WORD_BYTE = 258
_END_OF_WORD_BYTE = 259
_PADDING_BYTE = 260


def _dtype_problems(dtype) -> list[str]:
    """A `dtype` given as a string must name a torch floating-point type (or be "auto")."""
    if dtype is None or not isinstance(dtype, str) or dtype == "auto":
        return []
    import torch

    if not isinstance(getattr(torch, dtype.removeprefix("torch."), None), torch.dtype):
        return [f"dtype must name a torch dtype such as 'float32' or 'bfloat16', got {dtype!r}"]
    return []


def _byte_boundary_char_ids(boundary_character: int, max_characters_per_token: int) -> list[int]:
    """Shifted character ids of the byte scheme's `<S>` / `</S>` pseudo-word: ``[BOW, boundary, EOW, PAD...] + 1``."""
    ids = [_BEGINNING_OF_WORD_BYTE, boundary_character, _END_OF_WORD_BYTE]
    ids += [_PADDING_BYTE] * (max_characters_per_token - len(ids))
    return [i + 1 for i in ids[:max_characters_per_token]]


LSTM_IMPLEMENTATIONS = ("auto", "fast", "reference", "int8")

# The type of every field (a loaded config.json is checked against it before anything is built).
FIELD_TYPES = {
    "char_vocab_size": INTEGER,
    "char_embedding_dim": INTEGER,
    "char_cnn_filters": optional(INTEGER_PAIRS),
    "num_highway_layers": INTEGER,
    "char_cnn_activation": one_of("relu", "tanh"),
    "max_characters_per_token": INTEGER,
    "projection_dim": INTEGER,
    "lstm_cell_dim": INTEGER,
    "num_lstm_layers": INTEGER,
    "cell_clip": optional(NUMBER),
    "proj_clip": optional(NUMBER),
    "use_skip_connections": BOOLEAN,
    "lstm_forget_bias": NUMBER,
    "num_output_representations": INTEGER,
    "scalar_mix_layer_norm": BOOLEAN,
    "char_scheme": one_of(*_CHAR_SCHEMES),
    "bos_char_ids": optional(INTEGER_LIST),
    "eos_char_ids": optional(INTEGER_LIST),
    "word_vocab_size": INTEGER,
    "word_embedding_dim": INTEGER,
    "bos_word_id": optional(INTEGER),
    "eos_word_id": optional(INTEGER),
    "lm_vocab": optional(TEXT_LIST),
    "lm_softmax": one_of("full", "sampled"),
    "lm_num_sampled": INTEGER,
    "lm_dropout": NUMBER,
    "task_encoder": one_of("linear", "bilstm"),
    "task_encoder_hidden_size": INTEGER,
    "task_encoder_num_layers": INTEGER,
    "use_crf": BOOLEAN,
    "freeze_elmo": BOOLEAN,
    "task_token_features": BOOLEAN,
    "label_characters": BOOLEAN,
    "task_character_features": BOOLEAN,
    "task_bigram_features": BOOLEAN,
    "task_lexicon_features": BOOLEAN,
    "classifier_dropout": NUMBER,
    "classifier_hidden_size": INTEGER,
    "lstm_implementation": one_of(*LSTM_IMPLEMENTATIONS),
    "lstm_keep_inference_copies": BOOLEAN,
    "token_cache_size": INTEGER,
}


def _character_tagger_problems(config: "ElmoConfig") -> list[str]:
    """What is wrong with the options that give each character of a `label_characters` tagger the head's own x_k of
    its words (itself, itself and the next character, its dictionary words)."""
    problems = []
    for name in ("task_character_features", "task_lexicon_features"):
        if getattr(config, name) and not (config.label_characters and config.task_token_features):
            problems.append(f"{name} needs label_characters and task_token_features")
        if getattr(config, name) and config.word_embedding_dim:
            problems.append(f"{name} needs a biLM without a word embedding (word_embedding_dim 0)")
    if config.task_bigram_features and not config.task_character_features:
        problems.append("task_bigram_features needs task_character_features")
    return problems


class ElmoConfig(PretrainedConfig):
    r"""
    Configuration of an ELMo bidirectional language model (Peters et al., 2018).

    The defaults describe the standard ``2x4096_512_2048cnn_2xhighway`` English model.

    Args:
        char_vocab_size (`int`, defaults to 262):
            Rows of the character embedding table. Row 0 is the all-zero padding row.
        char_embedding_dim (`int`, defaults to 16): Size of a character embedding.
        char_cnn_filters (`list[list[int]]`): ``[width, number_of_filters]`` per convolution.
        num_highway_layers (`int`, defaults to 2): Highway layers after the character CNN.
        char_cnn_activation (`str`, defaults to `"relu"`): ``"relu"`` or ``"tanh"`` after max-pooling.
        max_characters_per_token (`int`, defaults to 50): Character ids per word, boundaries included.
        projection_dim (`int`, defaults to 512):
            Size P of the token representation and of each LSTM direction's output.
        lstm_cell_dim (`int`, defaults to 4096): Size C of the LSTM memory cell.
        num_lstm_layers (`int`, defaults to 2): LSTM layers L per direction.
        cell_clip (`float`, *optional*, defaults to 3.0): Memory-cell clip; `None` or 0 disables it.
        proj_clip (`float`, *optional*, defaults to 3.0): Projected-output clip; `None` or 0 disables it.
        use_skip_connections (`bool`, defaults to `True`): Residual connections on LSTM layers >= 1.
        lstm_forget_bias (`float`, defaults to 1.0):
            Constant added to the forget gate at run time, as TensorFlow's ``LSTMCell`` does. Keeping it
            out of the stored bias lets bilm-tf weights round-trip bit for bit.
        num_output_representations (`int`, defaults to 1): Number of learned ELMo mixes to return.
        scalar_mix_layer_norm (`bool`, defaults to `False`):
            Normalise each layer (one mean/variance over all unmasked elements) before mixing. `ElmoModel`
            includes the `<S>`/`</S>` positions in those statistics, as AllenNLP does; the task heads use
            the words only.
        char_scheme (`str`, defaults to `"bytes"`):
            How words become character ids: ``"bytes"`` is the AllenNLP / bilm-tf UTF-8 byte scheme;
            ``"dictionary"`` looks characters up in the tokenizer's character vocabulary (ELMoForManyLangs).
        bos_char_ids (`list[int]`, *optional*):
            The `max_characters_per_token` character ids of the `<S>` pseudo-word the model puts before every
            sentence. Defaults to the byte scheme's row; required for ``char_scheme="dictionary"``.
        eos_char_ids (`list[int]`, *optional*): Same for the `</S>` pseudo-word after every sentence.
        word_vocab_size (`int`, defaults to 0): Size of an optional word embedding table (0 = none).
        word_embedding_dim (`int`, defaults to 0): Size of the optional word embedding.
        bos_word_id (`int`, *optional*): Word id of `<S>`; required with a word embedding.
        eos_word_id (`int`, *optional*): Word id of `</S>`; required with a word embedding.
        lm_vocab (`list[str]`, *optional*):
            Word vocabulary of the language-model head (pretraining only): `<S>`, `</S>`, `<UNK>` first, then
            words by decreasing frequency. The inputs stay characters; this only names the softmax rows.
        lm_softmax (`str`, defaults to `"full"`): ``"full"`` or ``"sampled"`` softmax for pretraining.
        lm_num_sampled (`int`, defaults to 8192): Negative samples per batch for the sampled softmax.
        lm_dropout (`float`, defaults to 0.1): Dropout used while pretraining.
        task_encoder (`str`, defaults to `"linear"`):
            Token-classification head over the learned ELMo mix: `"linear"` (one linear layer) or `"bilstm"`
            (a bidirectional LSTM, then a linear layer; the paper's NER setup).
        task_encoder_hidden_size (`int`, defaults to 200): Size of each direction of the task BiLSTM.
        task_encoder_num_layers (`int`, defaults to 1): Layers of the task BiLSTM.
        use_crf (`bool`, defaults to `False`): Put a linear-chain CRF (Viterbi decoding) on top of the tag scores.
        freeze_elmo (`bool`, defaults to `True`):
            Keep the biLM fixed while a task head trains (the paper's default); only the mix and the head learn.
        task_token_features (`bool`, defaults to `False`):
            Give the task head its own context-free word vectors x_k (a trainable character CNN shaped like the
            biLM's layer 0, started from a copy of it when a pretrained biLM is loaded) and feed [x_k; ELMo_k] to
            the task encoder: the paper's way of adding ELMo to a task model (section 3.3), in which only the
            biLM stays frozen.
        label_characters (`bool`, defaults to `False`):
            The tagging head labels characters while the biLM reads the words they form: each character gets its
            word's vectors plus its position in the word (single, begin, middle, end), passed per character as
            `token_word_index` and `token_positions` (the package's `char_words` makes them). For character-labelled
            data (MSRA and most Chinese NER sets) with a biLM pretrained on segmented words.
        task_character_features (`bool`, defaults to `False`):
            With `label_characters` and `task_token_features`: each character also gets the head's own vector x_k
            of the character alone (read as a one-character word by the same trainable character CNN), passed as
            `character_input_ids`; the word's vectors and the position in the word cannot tell the characters of
            one word apart, this can.
        task_bigram_features (`bool`, defaults to `False`):
            With `task_character_features`: each character also gets the head's x_k of itself and the next character
            read as one word (the last character: of itself alone), passed as `bigram_input_ids`; a bigram feature
            from the pretrained character CNN that does not depend on where jieba cut the sentence.
        task_lexicon_features (`bool`, defaults to `False`):
            With `label_characters` and `task_token_features`: each character also gets the head's x_k of the
            dictionary words it begins, is inside of and ends, weighted by dictionary counts over all its words
            (SoftLexicon); `lexicon_input_ids`, `lexicon_weights`, `lexicon_match_index` (`char_words.lexicon_matches`).
        classifier_dropout (`float`, defaults to 0.5): Dropout on the ELMo mix and inside the task heads.
        classifier_hidden_size (`int`, defaults to 256):
            Hidden layer of the sequence-classification MLP (0 = a single linear layer).
        lstm_implementation (`str`, defaults to `"auto"`):
            How the biLSTM recurrence is computed (see elmo_lstm.py): `"auto"` (the fast path; oneDNN's packed
            products for CPU float32 inference where available), `"fast"` (never oneDNN), `"reference"` (the
            straightforward per-step loop) or `"int8"` (int8 weights, inference only, not exact; set by
            `quantize_lstm_int8`). All but int8 give the same numbers up to float32 rounding.
        lstm_keep_inference_copies (`bool`, defaults to `True`):
            Keep the inference copies of the LSTM weights (oneDNN-packed, int8) and the input-product buffer
            between calls: fastest, at the memory of one more copy of the per-step weights; `False` makes them
            for each call.
    """

    model_type = "elmo"

    def __init__(
        self,
        char_vocab_size: int = 262,
        char_embedding_dim: int = 16,
        char_cnn_filters: list[list[int]] | None = None,
        num_highway_layers: int = 2,
        char_cnn_activation: str = "relu",
        max_characters_per_token: int = 50,
        projection_dim: int = 512,
        lstm_cell_dim: int = 4096,
        num_lstm_layers: int = 2,
        cell_clip: float | None = 3.0,
        proj_clip: float | None = 3.0,
        use_skip_connections: bool = True,
        lstm_forget_bias: float = 1.0,
        num_output_representations: int = 1,
        scalar_mix_layer_norm: bool = False,
        char_scheme: str = "bytes",
        bos_char_ids: list[int] | None = None,
        eos_char_ids: list[int] | None = None,
        word_vocab_size: int = 0,
        word_embedding_dim: int = 0,
        bos_word_id: int | None = None,
        eos_word_id: int | None = None,
        lm_vocab: list[str] | None = None,
        lm_softmax: str = "full",
        lm_num_sampled: int = 8192,
        lm_dropout: float = 0.1,
        task_encoder: str = "linear",
        task_encoder_hidden_size: int = 200,
        task_encoder_num_layers: int = 1,
        use_crf: bool = False,
        freeze_elmo: bool = True,
        task_token_features: bool = False,
        label_characters: bool = False,
        task_character_features: bool = False,
        task_bigram_features: bool = False,
        task_lexicon_features: bool = False,
        classifier_dropout: float = 0.5,
        classifier_hidden_size: int = 256,
        lstm_implementation: str = "auto",
        lstm_keep_inference_copies: bool = True,
        **kwargs,
    ):
        given = {**locals(), **kwargs}
        problems = type_problems(given, FIELD_TYPES) + _dtype_problems(kwargs.get("dtype", kwargs.get("torch_dtype")))
        if problems:
            raise ValueError("Invalid ElmoConfig: " + "; ".join(problems))
        if char_cnn_filters is None:
            char_cnn_filters = [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]]
        self.char_vocab_size = char_vocab_size
        self.char_embedding_dim = char_embedding_dim
        self.char_cnn_filters = [list(f) if isinstance(f, (list, tuple)) else f for f in char_cnn_filters]
        self.num_highway_layers = num_highway_layers
        self.char_cnn_activation = char_cnn_activation
        self.max_characters_per_token = max_characters_per_token
        self.projection_dim = projection_dim
        self.lstm_cell_dim = lstm_cell_dim
        self.num_lstm_layers = num_lstm_layers
        self.cell_clip = cell_clip or None
        self.proj_clip = proj_clip or None
        self.use_skip_connections = use_skip_connections
        self.lstm_forget_bias = lstm_forget_bias
        self.num_output_representations = num_output_representations
        self.scalar_mix_layer_norm = scalar_mix_layer_norm
        self.char_scheme = char_scheme
        if char_scheme == "bytes":
            if bos_char_ids is None:
                bos_char_ids = _byte_boundary_char_ids(_BEGINNING_OF_SENTENCE_BYTE, max_characters_per_token)
            if eos_char_ids is None:
                eos_char_ids = _byte_boundary_char_ids(_END_OF_SENTENCE_BYTE, max_characters_per_token)
        self.bos_char_ids = None if bos_char_ids is None else [int(i) for i in bos_char_ids]
        self.eos_char_ids = None if eos_char_ids is None else [int(i) for i in eos_char_ids]
        self.word_vocab_size = word_vocab_size
        self.word_embedding_dim = word_embedding_dim
        self.bos_word_id = bos_word_id
        self.eos_word_id = eos_word_id
        self.lm_vocab = list(lm_vocab) if lm_vocab else None
        self.lm_softmax = lm_softmax
        self.lm_num_sampled = lm_num_sampled
        self.lm_dropout = lm_dropout
        self.task_encoder = task_encoder
        self.task_encoder_hidden_size = task_encoder_hidden_size
        self.task_encoder_num_layers = task_encoder_num_layers
        self.use_crf = use_crf
        self.freeze_elmo = freeze_elmo
        self.task_token_features = task_token_features
        self.label_characters = label_characters
        self.task_character_features = task_character_features
        self.task_bigram_features = task_bigram_features
        self.task_lexicon_features = task_lexicon_features
        self.classifier_dropout = classifier_dropout
        self.classifier_hidden_size = classifier_hidden_size
        self.lstm_implementation = lstm_implementation
        self.lstm_keep_inference_copies = lstm_keep_inference_copies
        # The tokenizer pads with character id 0 (a padded word is all zeros): say so, as transformers compares
        # the two (Trainer's processing_class) and otherwise warns and rewrites the config.
        kwargs.setdefault("pad_token_id", 0)
        super().__init__(**kwargs)
        self._validate()

    @classmethod
    def get_config_dict(cls, pretrained_model_name_or_path, **kwargs):
        config_dict, kwargs = super().get_config_dict(pretrained_model_name_or_path, **kwargs)
        if not isinstance(config_dict, dict):
            raise ValueError(
                f"the config.json of {pretrained_model_name_or_path} holds a JSON {type(config_dict).__name__}, "
                "not the object of settings a model config is"
            )
        model_type = config_dict.get("model_type")
        if model_type is not None and model_type != cls.model_type:
            # Without this, transformers only warns and then fails on some unrelated attribute.
            raise ValueError(
                f"{pretrained_model_name_or_path} holds a {model_type!r} model, not an ELMo model (model_type "
                f"'{cls.model_type}'): load it with its own class or an Auto class such as AutoModel"
            )
        return config_dict, kwargs

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

    def _validate(self) -> None:
        type_errors = type_problems(self.__dict__, FIELD_TYPES)
        if type_errors:  # the checks below need numbers (attributes can be changed after creation)
            raise ValueError("Invalid ElmoConfig: " + "; ".join(type_errors))
        self.char_cnn_filters = [[int(width), int(count)] for width, count in self.char_cnn_filters]

        problems = [
            f"{name} must be a non-negative number or null, got {getattr(self, name)}"
            for name in ("cell_clip", "proj_clip")
            if getattr(self, name) is not None and not getattr(self, name) >= 0
        ]
        for name in ("char_vocab_size", "char_embedding_dim", "projection_dim", "lstm_cell_dim", "num_lstm_layers"):
            if getattr(self, name) <= 0:
                problems.append(f"{name} must be positive, got {getattr(self, name)}")
        if self.num_highway_layers < 0:
            problems.append(f"num_highway_layers must be >= 0, got {self.num_highway_layers}")
        if not self.char_cnn_filters:
            problems.append("char_cnn_filters is empty")
        for width, count in self.char_cnn_filters:
            if width <= 0 or count <= 0:
                problems.append(f"char_cnn_filters entry [{width}, {count}] must have positive width and count")
            elif width > self.max_characters_per_token:
                problems.append(
                    f"char_cnn_filters width {width} exceeds max_characters_per_token {self.max_characters_per_token}"
                )
        problems.extend(self._input_layer_problems())
        if self.max_characters_per_token < 3:
            problems.append("max_characters_per_token must be >= 3 (begin-of-word, a character, end-of-word)")
        if self.char_scheme == "bytes" and self.char_vocab_size < 262:
            problems.append(f"the byte scheme needs char_vocab_size >= 262, got {self.char_vocab_size}")
        if self.num_output_representations < 0:
            problems.append("num_output_representations must be >= 0")
        if self.lm_softmax == "sampled" and self.lm_num_sampled < 1:
            problems.append(f"lm_num_sampled must be >= 1 for the sampled softmax, got {self.lm_num_sampled}")
        if self.lm_vocab and list(self.lm_vocab[:3]) != ["<S>", "</S>", "<UNK>"]:
            problems.append("lm_vocab must start with '<S>', '</S>', '<UNK>'")
        if self.task_encoder_hidden_size <= 0 or self.task_encoder_num_layers <= 0:
            problems.append("task_encoder_hidden_size and task_encoder_num_layers must be positive")
        for name in ("classifier_dropout", "lm_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:  # `not` also catches nan
                problems.append(f"{name} must be in [0, 1), got {getattr(self, name)}")
        if not math.isfinite(self.lstm_forget_bias):
            problems.append(f"lstm_forget_bias must be a finite number, got {self.lstm_forget_bias}")
        if self.classifier_hidden_size < 0:
            problems.append(f"classifier_hidden_size must be >= 0, got {self.classifier_hidden_size}")
        problems.extend(_character_tagger_problems(self))
        if problems:
            raise ValueError("Invalid ElmoConfig: " + "; ".join(problems))

    def _input_layer_problems(self) -> list[str]:
        """What is wrong with the character scheme, the boundary rows and the optional word embedding."""
        problems = []
        for name in ("bos_char_ids", "eos_char_ids"):
            ids = getattr(self, name)
            if ids is None:
                problems.append(f"{name} is required for char_scheme={self.char_scheme!r}")
            elif len(ids) != self.max_characters_per_token:
                problems.append(
                    f"{name} must hold max_characters_per_token={self.max_characters_per_token} ids, got {len(ids)}"
                )
            elif not all(0 < i < self.char_vocab_size for i in ids):
                # 0 would make the boundary look like a padded word position.
                problems.append(f"{name} must be character ids in [1, {self.char_vocab_size - 1}], got {ids}")
        if self.word_vocab_size < 0 or self.word_embedding_dim < 0:
            problems.append("word_vocab_size and word_embedding_dim must be >= 0")
        elif bool(self.word_vocab_size) != bool(self.word_embedding_dim):
            problems.append(
                "word_vocab_size and word_embedding_dim must both be positive (word embedding) or both 0 (none), "
                f"got {self.word_vocab_size} and {self.word_embedding_dim}"
            )
        elif self.word_vocab_size:
            for name in ("bos_word_id", "eos_word_id"):
                value = getattr(self, name)
                if not isinstance(value, int) or not 0 <= value < self.word_vocab_size:
                    problems.append(f"{name} must be a word id in [0, {self.word_vocab_size - 1}], got {value!r}")
        return problems

__all__ = ["ElmoConfig"]
