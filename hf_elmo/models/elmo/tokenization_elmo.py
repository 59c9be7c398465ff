"""Character tokenizer for ELMo: text -> words (a segmenter) -> `(words, max_characters_per_token)` character ids
(a character scheme), both from `text_elmo.py`. Every position of an encoding is one word, a word's "id" is its row
of character ids, and padding adds all-zero rows (`pad`, so transformers' data collators work). An empty string is
a sentence of zero words (the model still runs ``<S> </S>``)."""

from __future__ import annotations

import numbers
import os
from collections.abc import Mapping, Sequence

import numpy as np
from transformers import BatchEncoding, PreTrainedTokenizerBase
from transformers.tokenization_utils_base import PaddingStrategy, TruncationStrategy

try:
    from transformers.tokenization_python import PythonBackend
except ImportError:  # transformers 4.x: truncate_sequences is the base's own; batches go to _batch_encode_plus

    class PreTrainedTokenizerBase(PreTrainedTokenizerBase):
        def _batch_encode_plus(self, batch_text_or_text_pairs, **kwargs):
            return self._encode_plus(list(batch_text_or_text_pairs), **kwargs)

    PythonBackend = PreTrainedTokenizerBase

from .text_elmo import (CHAR_SCHEMES, CHAR_VOCAB_FILE, CHARACTER_SCHEMES, DICTIONARY_CHAR_SPECIALS,
                        JIEBA_USER_DICT_FILE, PAD_TOKEN, PADDED_POSITION_ID, SEGMENTERS, WORD_VOCAB_FILE,
                        WordVocabulary, check_inside_model_folder, make_segmenter)

VOCAB_FILES_NAMES = {"char_vocab_file": CHAR_VOCAB_FILE, "word_vocab_file": WORD_VOCAB_FILE,
                     "user_dict": JIEBA_USER_DICT_FILE}

# The type of every option, as its description and its check (a loaded tokenizer_config.json is checked too).
_TEXT_OR_NULL = ("a string or null", lambda value: value is None or isinstance(value, str))
_MAPPING_OR_NULL = ("an object (a mapping) or null", lambda value: value is None or isinstance(value, Mapping))
_OPTION_TYPES = {"char_vocab_file": _TEXT_OR_NULL, "word_vocab_file": _TEXT_OR_NULL,
                 "max_characters_per_token": ("an integer", lambda value: _is_id(value)),
                 "segmenter": ("one of " + ", ".join(map(repr, SEGMENTERS)), lambda value: value in SEGMENTERS),
                 "do_lower_case": ("true or false", lambda value: isinstance(value, bool)),
                 "char_scheme": ("one of " + ", ".join(map(repr, CHAR_SCHEMES)), lambda value: value in CHAR_SCHEMES),
                 "char_vocab": _MAPPING_OR_NULL, "word_vocab": _MAPPING_OR_NULL}

# The keys this tokenizer writes with one value per word (padded by `pad`), and those never made tensors.
_PER_WORD_KEYS = ("input_ids", "attention_mask", "word_ids", "special_tokens_mask", "token_type_ids", "offset_mapping")
_TEXT_KEYS = ("words",)

_ONE_ROW_PER_WORD = ("ElmoTokenizer gives each word a row of max_characters_per_token character ids, not one id: "
                     "pass such rows (tokenizer.word_to_char_ids(word) is one, an encoding's input_ids one per word) "
                     "or use tokenizer.decode")


class ElmoBatchEncoding(BatchEncoding):
    """What `ElmoTokenizer` returns: `word_ids(i)` is `[0, ..., n_i - 1]` then None per padded position, as a fast
    tokenizer gives it for one token per word (to align word labels); the key `"word_ids"` holds word-vocabulary ids."""

    def word_ids(self, batch_index: int = 0) -> list[int | None]:
        # Read from the rows, which the encoding carries anyway: a word's row is never all zero, a padded one is.
        sentences = _as_lists(self["input_ids"])
        sentences = sentences if _holds_sentences(sentences) else [sentences]
        count = len(sentences)
        if not -count <= batch_index < count:
            raise IndexError(f"batch_index {batch_index} is out of range: the encoding holds {count} sentence(s)")
        words = sum(1 for row in sentences[batch_index] if any(row))
        return [*range(words), *[None] * (len(sentences[batch_index]) - words)]


class ElmoTokenizer(PreTrainedTokenizerBase):
    """Text -> ELMo character ids `(batch, words, max_characters_per_token)` (and `word_ids` for a word embedding).

    `char_vocab_file` / `char_vocab`: ``char_vocab.json`` or the mapping itself, for ``char_scheme="dictionary"``
    (`word_vocab_file` / `word_vocab` the same for a model's word embedding). `segmenter`: `"jieba"`, `"chars"`
    (one word per CJK character), `"auto"` (jieba when installed, else characters; what it chose is what the
    tokenizer reports and saves) or `"whitespace"`. `user_dict`: a jieba user dictionary for this tokenizer only,
    saved beside it. `pad_token`: the name of a padded word position (its ids are all 0)."""

    vocab_files_names = VOCAB_FILES_NAMES
    model_input_names = ["input_ids", "attention_mask"]
    is_fast = False
    truncate_sequences = PythonBackend.truncate_sequences  # transformers' truncation: sides, strides, pairs

    def __init__(self, char_vocab_file: str | None = None, word_vocab_file: str | None = None,
                 max_characters_per_token: int = 50, segmenter: str = "auto", do_lower_case: bool = False,
                 char_scheme: str = "bytes", char_vocab: dict[str, int] | None = None,
                 word_vocab: dict[str, int] | None = None, user_dict: str | os.PathLike | None = None,
                 pad_token: str = PAD_TOKEN, **kwargs):
        options = locals()
        problems = [f"{name} must be {description}, got {options[name]!r}"
                    for name, (description, accepts) in _OPTION_TYPES.items() if not accepts(options[name])]
        if problems:  # e.g. "do_lower_case": "false" in a hand-edited tokenizer_config.json
            raise ValueError("Invalid ElmoTokenizer options: " + "; ".join(problems))
        if max_characters_per_token < 3:
            raise ValueError("max_characters_per_token must be >= 3")
        for path in (char_vocab_file, word_vocab_file, user_dict):
            if isinstance(path, (str, os.PathLike)):
                check_inside_model_folder(path, kwargs.get("name_or_path"))
        self.max_characters_per_token = max_characters_per_token
        self.do_lower_case = do_lower_case
        self.char_scheme = char_scheme
        scheme = CHARACTER_SCHEMES[char_scheme]
        self._characters = scheme.from_options(max_characters_per_token, char_vocab, char_vocab_file)
        self._words = WordVocabulary.from_options(self._characters, word_vocab, word_vocab_file)
        # What "auto" chose is what the tokenizer is and saves: a model is used with the segmentation it was
        # trained or fine-tuned with, and a saved "jieba" refuses to load where jieba is missing.
        self._segmenter = make_segmenter(segmenter, user_dict)
        self.segmenter = self._segmenter.name
        # Derived from the vocabularies, never taken from a saved config; and how a folder was found is no
        # property of the tokenizer (transformers passes these to __init__, which would save them).
        for name in ("model_input_names", "is_local", "local_files_only"):
            kwargs.pop(name, None)
        # Every argument is kept, as transformers keeps them. save_vocabulary writes the files and the mappings they
        # hold; save_pretrained leaves what this instance's vocab_files_names names out of tokenizer_config.json
        # (from_pretrained finds the files by the class's: the paths).
        super().__init__(char_vocab_file=char_vocab_file, word_vocab_file=word_vocab_file, user_dict=user_dict,
                         max_characters_per_token=max_characters_per_token, segmenter=self.segmenter,
                         do_lower_case=do_lower_case, char_scheme=char_scheme, char_vocab=char_vocab,
                         word_vocab=word_vocab, pad_token=PAD_TOKEN if pad_token is None else pad_token, **kwargs)
        self.vocab_files_names = {**VOCAB_FILES_NAMES, "char_vocab": CHAR_VOCAB_FILE, "word_vocab": WORD_VOCAB_FILE}
        _check_padding_side(self.padding_side)
        if self._words is not None:
            self.model_input_names = ["input_ids", "attention_mask", "word_ids"]

    @property
    def char_vocab(self) -> dict[str, int] | None:
        """The character vocabulary of the dictionary scheme (character -> model id); None for the byte scheme."""
        return self._characters.vocabulary

    @property
    def word_vocab(self) -> dict[str, int] | None:
        """The word vocabulary of a model with a word embedding, else None."""
        return None if self._words is None else self._words.vocabulary

    @property
    def chinese_segmentation(self) -> str:
        """Which Chinese segmentation raw text gets: `"jieba"`, `"chars"` or `"none"`."""
        return self._segmenter.chinese_segmentation

    def tokenize(self, text: str, **kwargs) -> list[str]:
        """Split raw text into words (the segmenter's rules, in `text_elmo.py`)."""
        return [word for word, _, _ in self.words_with_offsets(text)]

    def words_with_offsets(self, text: str) -> list[tuple[str, int, int]]:
        """Each word of `text` as `tokenize` gives it, with its `(start, end)` in `text`."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a string, got {type(text).__name__}")
        found = self._segmenter.words_with_offsets(text)
        return [(word.lower(), start, end) for word, start, end in found] if self.do_lower_case else found

    def word_to_char_ids(self, word: str) -> list[int]:
        """The `max_characters_per_token` ids of one word (as the model reads them: 0 is never one)."""
        return self._characters.word_ids(word.lower() if self.do_lower_case else word)

    def warn_if_mostly_unknown(self) -> None:
        """Warn once when most characters encoded since the last call were unknown to a dictionary-scheme model."""
        self._characters.warn_if_mostly_unknown()

    def word_to_id(self, word: str) -> int:
        """The word-vocabulary id of one word (models with a word embedding; unknown words -> `<oov>`)."""
        if self._words is None:
            raise ValueError("this tokenizer has no word vocabulary")
        return self._words.word_id(word.lower() if self.do_lower_case else word)

    def sentence_boundary_char_ids(self) -> tuple[list[int], list[int]]:
        """The rows of `<S>` and `</S>` that the model adds around each sentence (its config's bos/eos_char_ids)."""
        return self._characters.sentence_boundary_ids()

    def batch_to_ids(self, sentences: Sequence[Sequence[str]]):
        """Pre-split sentences -> `torch.LongTensor` (batch, max_words, max_characters_per_token), zero-padded."""
        return self(list(sentences), is_split_into_words=True, padding=True, return_tensors="pt")["input_ids"]

    def __call__(self, text=None, text_pair=None, *args, **kwargs) -> ElmoBatchEncoding:
        """transformers' `__call__` (`text, text_pair, ...`), counting words: a string, a list of strings (a batch) or,
        with `is_split_into_words=True`, a list of words or of word lists. A pair is read as one sentence, the words
        of `text` then those of `text_pair` (`token_type_ids` 0 then 1). Also gives `word_ids` when the tokenizer
        has a word vocabulary, with `return_words=True` the words of each position and with
        `return_offsets_mapping=True` each word's `(start, end)` in its text (`(0, len(word))` for a pre-split word)."""
        if kwargs.get("return_offsets_mapping") is False and kwargs.get("return_special_tokens_mask"):
            # How transformers' token-classification pipeline asks (offsets only from fast tokenizers); it then
            # reads one id per token, so it is told here which pipeline reads ELMo's rows.
            raise ValueError("ElmoTokenizer gives each word a row of character ids, which transformers' "
                             "'token-classification' pipeline cannot read: for entity spans use "
                             "pipeline('elmo-token-classification', ...)")
        return super().__call__(text, text_pair, *args, **kwargs)

    def num_special_tokens_to_add(self, pair: bool = False) -> int:
        return 0  # the model adds <S> and </S> itself

    def _get_padding_truncation_strategies(self, padding=False, truncation=None, max_length=None,
                                           pad_to_multiple_of=None, verbose=True, **kwargs):
        # transformers' checks, after the numbers it would slice or divide by.
        for name, value, least in (("max_length", max_length, 0), ("pad_to_multiple_of", pad_to_multiple_of, 1)):
            if value is not None and (not _is_id(value) or value < least):
                raise ValueError(f"{name} must be a whole number of words >= {least}, got {value!r}")
        strategies = super()._get_padding_truncation_strategies(padding, truncation, max_length, pad_to_multiple_of,
                                                                verbose, **kwargs)
        if strategies[0] == PaddingStrategy.DO_NOT_PAD and padding not in (False, None, PaddingStrategy.DO_NOT_PAD):
            raise ValueError(f"padding={padding!r} needs max_length (this tokenizer has no model_max_length)")
        return strategies

    def _encode_plus(self, text, text_pair=None, add_special_tokens: bool = True,
                     padding_strategy: PaddingStrategy = PaddingStrategy.DO_NOT_PAD,
                     truncation_strategy: TruncationStrategy = TruncationStrategy.DO_NOT_TRUNCATE,
                     max_length: int | None = None, stride: int = 0, is_split_into_words: bool = False,
                     pad_to_multiple_of: int | None = None, padding_side: str | None = None,
                     return_tensors: str | None = None, return_token_type_ids: bool | None = None,
                     return_attention_mask: bool | None = None, return_overflowing_tokens: bool = False,
                     return_special_tokens_mask: bool = False, return_offsets_mapping: bool = False,
                     return_length: bool = False, verbose: bool = True, split_special_tokens: bool = False,
                     return_words: bool = False, **kwargs) -> ElmoBatchEncoding:
        # add_special_tokens, split_special_tokens and sanitize_control_tokens (chat templates) change nothing: the
        # model adds <S> and </S>, and no word is special.
        kwargs.pop("sanitize_control_tokens", None)
        if kwargs:
            raise TypeError(f"ElmoTokenizer got unexpected arguments {sorted(kwargs)}")
        if text_pair is None and _holds_pairs(text, is_split_into_words):  # a batch of (text, text_pair)
            text, text_pair = [first for first, _ in text], [second for _, second in text]
        firsts, batched = _as_word_lists(text, is_split_into_words, self.words_with_offsets)
        seconds = [None] * len(firsts)
        if text_pair is not None:
            seconds, pair_batched = _as_word_lists(text_pair, is_split_into_words, self.words_with_offsets)
            if pair_batched != batched or len(seconds) != len(firsts):
                raise ValueError("text_pair must be what text is: a sentence, or a batch of as many sentences")
        if (return_overflowing_tokens and text_pair is not None
                and truncation_strategy == TruncationStrategy.LONGEST_FIRST):
            raise ValueError("Not possible to return overflowing tokens for pair of sequences with the `longest_first`. "
                             "Please select another truncation strategy than `longest_first`, for instance "
                             "`only_second` or `only_first`.")  # transformers' words
        sentences, offsets, token_types, overflowing, truncated = [], [], [], [], []
        for first, second in zip(firsts, seconds):
            kept, kept_pair, overflow = [*range(len(first))], None if second is None else [*range(len(second))], []
            excess = len(first) + len(second or ()) - (max_length or 0)
            if truncation_strategy != TruncationStrategy.DO_NOT_TRUNCATE and max_length is not None and excess > 0:
                # transformers' own truncation (sides, stride, pair strategies), of word indices.
                kept, kept_pair, overflow = self.truncate_sequences(kept, kept_pair, excess, truncation_strategy, stride)
            cut_from = second if truncation_strategy == TruncationStrategy.ONLY_SECOND else first
            chosen = [first[i] for i in kept] + [second[i] for i in kept_pair or ()]
            sentences.append([word for word, _, _ in chosen])
            offsets.append([(start, end) for _, start, end in chosen])
            token_types.append([0] * len(kept) + [1] * len(kept_pair or ()))
            overflowing.append([self.word_to_char_ids(cut_from[i][0]) for i in overflow])
            truncated.append(max(excess, 0) if overflow else 0)
        features = {"input_ids": [[self.word_to_char_ids(word) for word in words] for words in sentences]}
        for rows in features["input_ids"]:
            self._eventual_warn_about_too_long_sequence(rows, max_length, verbose)
        if return_offsets_mapping:
            features["offset_mapping"] = offsets
        if return_token_type_ids:
            features["token_type_ids"] = token_types
        if return_overflowing_tokens and not return_tensors:  # as transformers' Python tokenizers: lists only
            features.update(overflowing_tokens=overflowing, num_truncated_tokens=truncated)
        if return_attention_mask is not False:
            features["attention_mask"] = [[1] * len(words) for words in sentences]
        if self._words is not None:
            features["word_ids"] = [[self.word_to_id(word) for word in words] for words in sentences]
        if return_special_tokens_mask:
            features["special_tokens_mask"] = [[0] * len(words) for words in sentences]
        if return_length:
            features["length"] = [len(words) for words in sentences]
        self.warn_if_mostly_unknown()
        encoding = self._padded_encoding(features, batched, padding_strategy, max_length, pad_to_multiple_of,
                                         return_tensors, padding_side)
        if return_words:
            encoding["words"] = sentences if batched else sentences[0]
        return encoding

    def pad(self, encoded_inputs, padding: bool | str = True, max_length: int | None = None,
            pad_to_multiple_of: int | None = None, padding_side: str | None = None,
            return_attention_mask: bool | None = None, return_tensors: str | None = None,
            verbose: bool = True) -> ElmoBatchEncoding:
        """Pad what `__call__` returns (lists, arrays or tensors), or a list of such encodings one per sentence (what
        data collators pass), to one number of words; other keys (e.g. `label`) are kept."""
        strategy, _, max_length, _ = self._get_padding_truncation_strategies(
            padding, max_length=max_length, pad_to_multiple_of=pad_to_multiple_of, verbose=verbose)
        features, batched, input_tensors = _features_to_pad(encoded_inputs, self.max_characters_per_token)
        if return_attention_mask is not False and "attention_mask" not in features:
            features["attention_mask"] = [[1] * len(rows) for rows in features["input_ids"]]
        return self._padded_encoding(features, batched, strategy, max_length, pad_to_multiple_of,
                                     return_tensors or input_tensors, padding_side)

    def _padded_encoding(self, features: dict[str, list], batched: bool, strategy: PaddingStrategy, max_length,
                         pad_to_multiple_of, return_tensors, padding_side=None) -> ElmoBatchEncoding:
        """The encoding of `features` (key -> one value per sentence), padded as `strategy` says."""
        _check_padding_side(padding_side or self.padding_side)
        lengths = [len(rows) for rows in features["input_ids"]]
        target = {PaddingStrategy.LONGEST: max(lengths), PaddingStrategy.MAX_LENGTH: max_length}.get(strategy)
        if strategy == PaddingStrategy.MAX_LENGTH and max(lengths) > max_length:
            raise ValueError(f"a sentence has {max(lengths)} words, more than max_length={max_length}: "
                             "pass truncation=True")
        if target is None and return_tensors is not None and len(set(lengths)) > 1:
            raise ValueError("sentences have different numbers of words: pass padding=True to make a tensor")
        if target is not None:
            if pad_to_multiple_of:
                target = -(-target // pad_to_multiple_of) * pad_to_multiple_of
            # A padded position: an all-zero row, attention 0, the `<pad>` word, 1 in a special-tokens mask.
            fill = {"input_ids": [PADDED_POSITION_ID] * self.max_characters_per_token, "attention_mask": 0,
                    "word_ids": PADDED_POSITION_ID if self._words is None else self._words.pad_id,
                    "special_tokens_mask": 1, "token_type_ids": self.pad_token_type_id, "offset_mapping": (0, 0)}
            for key in _PER_WORD_KEYS:
                if key in features:
                    features[key] = [values + [fill[key]] * (target - len(values)) for values in features[key]]
        data = features if batched else {key: value[0] for key, value in features.items()}
        if return_tensors is None:
            return ElmoBatchEncoding(data)
        # Per-word values become int64 `(batch, words[, width])`, others convert as transformers does, words stay.
        if return_tensors not in ("pt", "np"):  # a TensorType is a str too
            raise ValueError(f"return_tensors must be 'pt' or 'np', got {return_tensors!r}")
        tensors = {key: value for key, value in data.items() if key not in _TEXT_KEYS}
        for key in _PER_WORD_KEYS:
            if key in data:
                array = np.asarray(data[key] if batched else [data[key]], dtype=np.int64)
                row = {"input_ids": (self.max_characters_per_token,), "offset_mapping": (2,)}.get(key, ())
                tensors[key] = array.reshape(array.shape[0], -1, *row)
        encoding = ElmoBatchEncoding(tensors, tensor_type=return_tensors)
        encoding.update({key: data[key] for key in _TEXT_KEYS if key in data})
        return encoding

    def decode(self, token_ids, **kwargs) -> str | list[str]:
        """Words back from character ids: a sentence's rows -> a string, a batch -> a list of strings (what
        `batch_decode` passes). Unknown characters come back as U+FFFD, cut bytes are replaced."""
        token_ids = _as_lists(token_ids)
        depth, probe = 0, token_ids
        while isinstance(probe, (list, tuple)) and probe:
            depth, probe = depth + 1, probe[0]
        if depth == 3:
            return [self.decode(sentence, **kwargs) for sentence in token_ids]
        if depth == 1:
            raise ValueError("decode takes the character ids of a sentence, shape (words, max_characters_per_token), "
                             "or of a batch of sentences; got a flat list of ids")
        rows = ([int(i) for i in ids] for ids in token_ids)
        return " ".join(self._characters.decode_word(ids) for ids in rows if any(ids))

    def convert_ids_to_tokens(self, ids, skip_special_tokens: bool = False) -> str | list[str]:
        """A word's "id" is its row of character ids: a row -> its word, a sentence's rows -> its words. An all-zero
        row (a padded position) is `pad_token`, left out with `skip_special_tokens=True`."""
        ids = _as_lists(ids)

        def is_row(value) -> bool:
            return isinstance(value, list) and len(value) == self.max_characters_per_token and all(map(_is_id, value))

        single = is_row(ids)
        if not single and not (isinstance(ids, list) and all(map(is_row, ids))):
            raise ValueError(_ONE_ROW_PER_WORD)
        words = [self._characters.decode_word([int(i) for i in row]) if any(row) else self.pad_token
                 for row in ([ids] if single else ids) if single or any(row) or not skip_special_tokens]
        return words[0] if single else words

    def convert_tokens_to_ids(self, tokens: str | Sequence[str]) -> list[int] | list[list[int]]:
        """A word -> its row of character ids; a list of words -> one row each (as `__call__` encodes them)."""
        if isinstance(tokens, str):
            return self.word_to_char_ids(tokens)
        if not isinstance(tokens, (list, tuple)) or not all(isinstance(token, str) for token in tokens):
            raise TypeError(f"convert_tokens_to_ids takes a word or a list of words; {_ONE_ROW_PER_WORD}")
        return [self.word_to_char_ids(token) for token in tokens]

    def _add_tokens(self, new_tokens, special_tokens: bool = False) -> int:
        raise ValueError("ElmoTokenizer has no token vocabulary to add to: every word is read by its characters, so "
                         "any word already has ids (to keep a string one word, pass pre-split words or a user_dict)")

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        return " ".join(tokens)

    @property
    def vocab_size(self) -> int:
        """Size of the character id space (including the padding id 0)."""
        return self._characters.vocab_size

    def __len__(self) -> int:
        return self.vocab_size

    @property
    def pad_token_id(self) -> int:
        """0 for every character of a padded word position, so code that pads `input_ids` with the tokenizer's pad
        id (the stock pipelines' batching) writes exactly the rows this tokenizer pads with."""
        return PADDED_POSITION_ID

    @property
    def all_special_ids(self) -> list[int]:
        return [self.pad_token_id]

    def get_vocab(self) -> dict[str, int]:
        return dict(self.char_vocab) if self.char_vocab is not None else {}

    @property
    def added_tokens_decoder(self) -> dict:
        return {}

    added_tokens_encoder = added_tokens_decoder  # no token is ever added

    def save_vocabulary(self, save_directory: str, filename_prefix: str | None = None) -> tuple[str, ...]:
        saved = self._characters.save(save_directory, filename_prefix)
        if self._words is not None:
            saved += self._words.save(save_directory, filename_prefix)
        return saved + self._segmenter.save(save_directory, filename_prefix)


def _as_word_lists(text, is_split_into_words: bool, split) -> tuple[list[list[tuple[str, int, int]]], bool]:
    """The sentences of `__call__`'s input as lists of `(word, start, end)` (`split` gives them for raw text, a
    pre-split word spans itself), and whether it was a batch."""
    if isinstance(text, str):
        if is_split_into_words:
            raise TypeError("is_split_into_words=True needs a list of words, got a string")
        return [split(text)], False
    if not isinstance(text, (list, tuple)):
        raise TypeError(f"text must be a string or a list, got {type(text).__name__}")
    if len(text) == 0:
        raise ValueError("empty batch: got an empty list of sentences")
    strings = all(isinstance(item, str) for item in text)
    if not is_split_into_words:
        if strings:
            return [split(sentence) for sentence in text], True
        raise TypeError("a batch of raw text must be a list of strings (use is_split_into_words=True for word lists)")
    if not strings and not all(isinstance(item, (list, tuple)) for item in text):
        raise TypeError("with is_split_into_words=True pass a list of words or a list of word lists")
    sentences = [list(words) for words in ([text] if strings else text)]
    if not all(isinstance(word, str) for words in sentences for word in words):
        raise TypeError("pre-split sentences must be lists of strings")
    return [[(word, 0, len(word)) for word in words] for words in sentences], not strings


def _holds_pairs(text, is_split_into_words: bool) -> bool:
    """Whether `text` is a batch of pairs, as transformers reads one: (text, pair) items, tuples of word lists."""
    item_kind, part_kind = (tuple, (list, tuple)) if is_split_into_words else ((list, tuple), str)
    return isinstance(text, (list, tuple)) and bool(text) and all(
        isinstance(item, item_kind) and len(item) == 2 and all(isinstance(part, part_kind) for part in item)
        for item in text)


def _features_to_pad(encoded_inputs, width: int) -> tuple[dict[str, list], bool, str | None]:
    """(key -> one value per sentence, per-word values as lists; whether a batch came in; "pt"/"np" or None)."""
    if isinstance(encoded_inputs, (list, tuple)):
        if not encoded_inputs:
            raise ValueError("nothing to pad: got an empty list of encodings")
        if not all(isinstance(example, Mapping) for example in encoded_inputs):
            raise TypeError("pad takes an encoding or a list of encodings (mappings holding input_ids)")
        keys = list(encoded_inputs[0])
        if any(set(example) != set(keys) for example in encoded_inputs):
            raise ValueError(f"the encodings to pad have different keys; the first has {keys}")
        features, batched = {key: [example[key] for example in encoded_inputs] for key in keys}, True
    elif isinstance(encoded_inputs, Mapping):
        features, batched = dict(encoded_inputs), None
    else:
        raise TypeError(f"pad takes an encoding or a list of encodings, got {type(encoded_inputs).__name__}")
    if "input_ids" not in features:
        raise ValueError(f"pad needs input_ids, the encodings hold {list(features)}")
    input_ids = features["input_ids"]
    probe = input_ids[0] if isinstance(input_ids, (list, tuple)) and input_ids else input_ids
    input_tensors = {"torch": "pt", "numpy": "np"}.get(type(probe).__module__.split(".")[0])
    for key in _PER_WORD_KEYS:
        if key in features:
            features[key] = _as_lists(features[key])
    if batched is None:
        batched = _holds_sentences(features["input_ids"])
        if not batched:
            features = {key: [value] for key, value in features.items()}
    for rows in features["input_ids"]:
        if not isinstance(rows, list) or any(not isinstance(row, list) or len(row) != width for row in rows):
            raise ValueError(f"input_ids must hold one row of {width} character ids per word "
                             "(what ElmoTokenizer writes)")
    for key in set(_PER_WORD_KEYS[1:]) & set(features):  # padded as the words are, so one value per word
        if len(features[key]) != len(features["input_ids"]):
            raise ValueError(f"{key} holds {len(features[key])} sentences, input_ids {len(features['input_ids'])}")
        for row, (values, rows) in enumerate(zip(features[key], features["input_ids"])):
            if not isinstance(values, list) or len(values) != len(rows):
                raise ValueError(f"row {row}: {key} must hold one value per word ({len(rows)}), got {values!r:.80}")
    return features, batched, input_tensors


def _check_padding_side(side: str) -> None:
    if side != "right":
        raise ValueError("ElmoTokenizer pads on the right only (the model reads each sentence from its first "
                         f"position), got padding_side={side!r}")


def _as_lists(value):
    """Tensors and arrays as nested lists; a list of them too (a batch of per-sentence tensors)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_as_lists(item) for item in value]
    return value


def _holds_sentences(input_ids: list) -> bool:
    """Whether `input_ids` are a batch (a list of sentences, each a list of rows) or one sentence (rows)."""
    first = input_ids[0] if input_ids else None
    return isinstance(first, list) and (not first or isinstance(first[0], list))


def _is_id(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


__all__ = ["DICTIONARY_CHAR_SPECIALS", "ElmoBatchEncoding", "ElmoTokenizer"]
