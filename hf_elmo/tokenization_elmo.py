"""Character tokenizer for ELMo: text -> words -> (words, 50) character ids.

Words become ids with one of two schemes:

* ``char_scheme="bytes"`` (default): the AllenNLP / bilm-tf byte scheme,
  ``[BOW] + utf8_bytes[:48] + [EOW] + [PAD]...`` with every id shifted by +1 so that 0 marks a padded word
  position. Needs no vocabulary file.
* ``char_scheme="dictionary"``: ELMoForManyLangs models. Each character is looked up in a character
  vocabulary (``char_vocab.json``; unknown characters -> ``<oov>``); a word is cut to 48 characters and written
  ``[<eow>, chars..., <bow>, <pad>...]`` (begin/end swapped exactly as the original code does it). The
  vocabulary stores the model's ids, which are the original ids + 1 so that 0 still marks padding. With a word
  vocabulary (``word_vocab.json``) the tokenizer also returns ``word_ids``, one per word (unknown -> ``<oov>``).

Raw text is split into words as follows:

* whitespace and punctuation separate words (``tokenizers``' BERT pre-tokenizer), so English
  text splits the usual way;
* a run of CJK characters is segmented with jieba when it is installed (``segmenter="auto"`` or
  ``"jieba"``), otherwise each CJK character becomes its own word (``segmenter="chars"``);
* ``segmenter="whitespace"`` splits on whitespace only.

Edge cases: an empty string is a sentence of zero words (the model still runs ``<S> </S>``);
an empty batch is a `ValueError`; a word longer than 48 UTF-8 bytes is cut to its first 48 bytes
(a multi-byte character may be cut, as in the references); emoji and other 4-byte characters are
ordinary bytes; in raw text, control characters (C0/C1, e.g. NUL, BEL, DEL) separate words like
whitespace, while pre-split words keep them as bytes; a surrogate pair written as two code points
is joined into its character and lone surrogates (not encodable as UTF-8) are dropped.
"""

from __future__ import annotations

import json
import logging
import os
import re
import uuid
from collections.abc import Sequence

from tokenizers.pre_tokenizers import BertPreTokenizer
from transformers import BatchEncoding, PreTrainedTokenizerBase
from transformers.utils import TensorType

from .field_types import BOOLEAN, INTEGER, MAPPING, TEXT, load_json_file, one_of, optional, type_problems

BEGINNING_OF_WORD_CHARACTER = 258
END_OF_WORD_CHARACTER = 259
PADDING_CHARACTER = 260

_CJK_RUN = re.compile(
    "([\u2e80-\u2fdf\u3005\u3007\u3021-\u3029\u3038-\u303b\u3400-\u4dbf\u4e00-\u9fff"
    "\uf900-\ufaff\U00020000-\U0002ffff\U00030000-\U0003134f]+)"
)
logger = logging.getLogger(__name__)

_SEGMENTERS = ("auto", "jieba", "chars", "whitespace")
_SURROGATE = re.compile("[\ud800-\udfff]")
# C0 and C1 control characters other than tab, newline, vertical tab, form feed, carriage return and NEL.
_CONTROL = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f]")


def _without_surrogates(text: str) -> str:
    """Join surrogate pairs into their character and drop lone surrogates, which UTF-8 cannot encode."""
    if _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "ignore")
_CHAR_SCHEMES = ("bytes", "dictionary")

VOCAB_FILES_NAMES = {"char_vocab_file": "char_vocab.json", "word_vocab_file": "word_vocab.json"}
# Special entries of the dictionary scheme's vocabularies (ELMoForManyLangs' names).
DICTIONARY_CHAR_SPECIALS = ("<bos>", "<eos>", "<oov>", "<pad>", "<bow>", "<eow>")
DICTIONARY_WORD_SPECIALS = ("<oov>", "<pad>")


def _load_vocabulary(path: str | os.PathLike, what: str) -> dict[str, int]:
    vocab = load_json_file(path, f"{what} vocabulary file")
    return _check_vocabulary(vocab, f"{what} vocabulary {path}")


def _check_vocabulary(vocab, source: str) -> dict[str, int]:
    if not isinstance(vocab, dict) or not all(
        isinstance(key, str) and isinstance(value, int) and not isinstance(value, bool) for key, value in vocab.items()
    ):
        raise ValueError(f"{source} must map strings to integer ids")
    return dict(vocab)


# Entries of a dictionary-scheme row that are not characters of the word.
_NON_CHARACTERS = {"<bow>", "<eow>", "<pad>", "<bos>", "<eos>"}


def _check_specials(vocab, kind: str, specials, lowest_id: int, why: str = "") -> dict[str, int]:
    """A dictionary-scheme vocabulary (`kind`: "character" or "word") with its special entries and ids from
    `lowest_id` on."""
    vocab = _check_vocabulary(vocab, f"the {kind} vocabulary")
    missing = [name for name in specials if name not in vocab]
    if missing:
        raise ValueError(f"the {kind} vocabulary lacks the special entries {missing}")
    if min(vocab.values()) < lowest_id:
        raise ValueError(f"{kind} ids must be >= {lowest_id}{why}")
    return vocab


def _load_jieba():
    try:
        import jieba
    except ImportError:
        return None
    jieba.setLogLevel(logging.WARNING)
    return jieba


# The type of every option (a loaded tokenizer_config.json is checked against it).
_OPTION_TYPES = {
    "char_vocab_file": optional(TEXT),
    "word_vocab_file": optional(TEXT),
    "max_characters_per_token": INTEGER,
    "segmenter": one_of(*_SEGMENTERS),
    "do_lower_case": BOOLEAN,
    "char_scheme": one_of(*_CHAR_SCHEMES),
    "char_vocab": optional(MAPPING),
    "word_vocab": optional(MAPPING),
}


class ElmoTokenizer(PreTrainedTokenizerBase):
    """Turns text into ELMo character ids `(batch, words, max_characters_per_token)` (and, for models with a word
    embedding, `word_ids` `(batch, words)`).

    Args:
        char_vocab_file (`str`, *optional*):
            ``char_vocab.json`` (character -> model id) for ``char_scheme="dictionary"``.
        word_vocab_file (`str`, *optional*): ``word_vocab.json`` (word -> id) of a model with a word embedding.
        max_characters_per_token (`int`, defaults to 50): ids per word, boundaries included.
        segmenter (`str`, defaults to `"auto"`):
            How runs of Chinese characters become words: `"jieba"` (needs jieba), `"chars"` (one word
            per character), `"auto"` (jieba when installed, else characters; the choice is what the tokenizer
            then reports and saves), or `"whitespace"`
            (split on whitespace only, no punctuation splitting).
        do_lower_case (`bool`, defaults to `False`): lower-case words before encoding.
        char_scheme (`str`, defaults to `"bytes"`): ``"bytes"`` or ``"dictionary"`` (see the module docstring).
        char_vocab (`dict[str, int]`, *optional*): the character vocabulary itself, instead of `char_vocab_file`.
        word_vocab (`dict[str, int]`, *optional*): the word vocabulary itself, instead of `word_vocab_file`.
    """

    vocab_files_names = VOCAB_FILES_NAMES
    model_input_names = ["input_ids", "attention_mask"]
    padding_side = "right"
    truncation_side = "right"

    def __init__(
        self,
        char_vocab_file: str | None = None,
        word_vocab_file: str | None = None,
        max_characters_per_token: int = 50,
        segmenter: str = "auto",
        do_lower_case: bool = False,
        char_scheme: str = "bytes",
        char_vocab: dict[str, int] | None = None,
        word_vocab: dict[str, int] | None = None,
        **kwargs,
    ):
        problems = type_problems(locals(), _OPTION_TYPES)
        if problems:  # e.g. "do_lower_case": "false" in a hand-edited tokenizer_config.json
            raise ValueError("Invalid ElmoTokenizer options: " + "; ".join(problems))
        if max_characters_per_token < 3:
            raise ValueError("max_characters_per_token must be >= 3")
        self.max_characters_per_token = max_characters_per_token
        self.segmenter = segmenter
        self.do_lower_case = do_lower_case
        self.char_scheme = char_scheme
        if char_vocab is None and char_vocab_file is not None:
            char_vocab = _load_vocabulary(char_vocab_file, "character")
        if word_vocab is None and word_vocab_file is not None:
            word_vocab = _load_vocabulary(word_vocab_file, "word")
        self._set_vocabularies(char_vocab, word_vocab)
        # Derived from the vocabularies, never taken from a saved config; and how a folder was found is no
        # property of the tokenizer (transformers passes these to __init__, which would save them).
        for name in ("model_input_names", "is_local", "local_files_only"):
            kwargs.pop(name, None)
        self._jieba = None
        if segmenter == "jieba":
            self._jieba = _load_jieba()
            if self._jieba is None:
                raise ImportError(
                    "this tokenizer segments Chinese with jieba (segmenter='jieba'), which is not installed here: "
                    "pip install jieba (splitting into single characters instead would change every result)"
                )
        elif segmenter == "auto":
            self._jieba = _load_jieba()
            if self._jieba is None:
                logger.warning("segmenter='auto' without jieba installed: Chinese text is split into single characters")
            # What "auto" chose is what the tokenizer is from now on, and what gets saved: a model is always used
            # with the segmentation it was trained or fine-tuned with, and a saved "jieba" refuses to load
            # where jieba is missing.
            self.segmenter = segmenter = "jieba" if self._jieba is not None else "chars"
        self._pre_tokenizer = BertPreTokenizer()
        super().__init__(
            max_characters_per_token=max_characters_per_token,
            segmenter=segmenter,
            do_lower_case=do_lower_case,
            char_scheme=char_scheme,
            **kwargs,
        )
        if self.word_vocab is not None:
            self.model_input_names = ["input_ids", "attention_mask", "word_ids"]

    def _set_vocabularies(self, char_vocab: dict[str, int] | None, word_vocab: dict[str, int] | None) -> None:
        self.char_vocab = self.word_vocab = None
        if self.char_scheme == "bytes":
            if char_vocab is not None or word_vocab is not None:
                raise ValueError("the byte scheme has no vocabularies: pass char_scheme='dictionary' to use them")
            return
        if char_vocab is None:
            raise ValueError("char_scheme='dictionary' needs a character vocabulary (char_vocab_file or char_vocab)")
        char_vocab = _check_specials(char_vocab, "character", DICTIONARY_CHAR_SPECIALS, 1, " (0 marks a padded word position)")
        self.char_vocab = char_vocab
        self._id_to_char = {index: char for char, index in char_vocab.items()}
        self._bow_id, self._eow_id = char_vocab["<bow>"], char_vocab["<eow>"]
        self._char_pad_id, self._char_oov_id = char_vocab["<pad>"], char_vocab["<oov>"]
        if word_vocab is not None:
            word_vocab = _check_specials(word_vocab, "word", DICTIONARY_WORD_SPECIALS, 0)
            self.word_vocab = word_vocab
            self._word_oov_id, self._word_pad_id = word_vocab["<oov>"], word_vocab["<pad>"]

    def __getstate__(self):
        # A module cannot be pickled (DataLoader workers started with "spawn", copy.deepcopy): keep whether
        # jieba was in use and import it again on the other side.
        state = self.__dict__.copy()
        state["_jieba"] = state["_jieba"] is not None
        return state

    def __setstate__(self, state):
        uses_jieba = state.pop("_jieba")
        self.__dict__.update(state)
        self._jieba = _load_jieba() if uses_jieba else None
        if uses_jieba and self._jieba is None:
            raise ImportError("this tokenizer segments Chinese with jieba, which is not installed here: pip install jieba")

    @property
    def chinese_segmentation(self) -> str:
        """Which Chinese segmentation raw text gets: `"jieba"`, `"chars"` or `"none"`."""
        if self.segmenter == "whitespace":
            return "none"
        return "jieba" if self._jieba is not None else "chars"

    # text -> words ------------------------------------------------------------------------

    def tokenize(self, text: str, **kwargs) -> list[str]:
        """Split raw text into words (see the module docstring for the rules)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a string, got {type(text).__name__}")
        # The Rust pre-tokenizer cannot take surrogates, and control characters should not glue words.
        text = _CONTROL.sub(" ", _without_surrogates(text))
        if self.segmenter == "whitespace":
            pieces = text.split()
        else:
            pieces = [piece for piece, _ in self._pre_tokenizer.pre_tokenize_str(text)]
        words = []
        for piece in pieces:
            if self.segmenter == "whitespace" or not _CJK_RUN.search(piece):
                words.append(piece)
                continue
            for part in _CJK_RUN.split(piece):
                if not part:
                    continue
                if _CJK_RUN.fullmatch(part):
                    words.extend(self._jieba.lcut(part) if self._jieba is not None else list(part))
                else:
                    words.append(part)
        if self.do_lower_case:
            words = [word.lower() for word in words]
        return words

    # words -> character ids ------------------------------------------------------------------

    def word_to_char_ids(self, word: str) -> list[int]:
        """The `max_characters_per_token` ids of one word (already shifted by +1)."""
        if self.do_lower_case:
            word = word.lower()
        if self.char_scheme == "dictionary":
            return self._dictionary_char_ids(word)
        data = _without_surrogates(word).encode("utf-8")[: self.max_characters_per_token - 2]
        ids = [BEGINNING_OF_WORD_CHARACTER + 1] + [byte + 1 for byte in data] + [END_OF_WORD_CHARACTER + 1]
        return ids + [PADDING_CHARACTER + 1] * (self.max_characters_per_token - len(ids))

    def _dictionary_char_ids(self, word: str) -> list[int]:
        # ELMoForManyLangs writes `<eow>` first and `<bow>` last (its variables are swapped); the model was
        # trained that way, so it is reproduced. A word spelled "<bos>"/"<eos>" becomes the sentence-boundary
        # row there too.
        if word in ("<bos>", "<eos>"):
            chars = [self.char_vocab[word]]
        else:
            chars = [self.char_vocab.get(char, self._char_oov_id) for char in self._cut(word)]
        ids = [self._eow_id] + chars + [self._bow_id]
        return ids + [self._char_pad_id] * (self.max_characters_per_token - len(ids))

    def _cut(self, word: str) -> str:
        """Words are cut to `max_characters_per_token - 2` characters before both lookups (dictionary scheme)."""
        return word[: self.max_characters_per_token - 2]

    def word_to_id(self, word: str) -> int:
        """The word-vocabulary id of one word (models with a word embedding; unknown words -> `<oov>`)."""
        if self.word_vocab is None:
            raise ValueError("this tokenizer has no word vocabulary")
        if self.do_lower_case:
            word = word.lower()
        return self.word_vocab.get(self._cut(word), self._word_oov_id)

    def batch_to_ids(self, sentences: Sequence[Sequence[str]]):
        """Pre-split sentences -> `torch.LongTensor` (batch, max_words, max_characters_per_token), zero-padded."""
        return self(list(sentences), is_split_into_words=True, padding=True, return_tensors="pt")["input_ids"]

    # the HF entry point ------------------------------------------------------------------------

    def __call__(
        self,
        text: str | Sequence[str] | Sequence[Sequence[str]],
        is_split_into_words: bool = False,
        padding: bool | str = False,
        truncation: bool | str | None = None,
        max_length: int | None = None,
        return_tensors: str | TensorType | None = None,
        return_attention_mask: bool | None = True,
        return_words: bool = False,
        **kwargs,
    ) -> BatchEncoding:
        """Encode one sentence or a batch.

        Args:
            text: a string, a list of strings (a batch), or with `is_split_into_words=True` a list of
                words (one sentence) or a list of word lists (a batch).
            padding: `True`/`"longest"` pads to the longest sentence, `"max_length"` to `max_length`.
            truncation: keep at most `max_length` words per sentence.
            return_tensors: `"pt"` (or `"np"`) for arrays of shape (batch, words, max_characters_per_token).

        Returns:
            `BatchEncoding` with `input_ids` (words x character ids per sentence), `attention_mask`
            (1 per real word), `word_ids` when the tokenizer has a word vocabulary (padded with the `<pad>` word id)
            and, with `return_words=True`, `words` (the words each position holds).
        """
        unknown = set(kwargs) - {"add_special_tokens", "verbose", "text_target", "return_token_type_ids"}
        if unknown:
            raise TypeError(f"ElmoTokenizer got unexpected arguments {sorted(unknown)}")
        if max_length is not None and (isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 0):
            raise ValueError(f"max_length must be a whole number of words >= 0, got {max_length!r}")
        sentences, batched = self._as_word_lists(text, is_split_into_words)
        if truncation and truncation != "do_not_truncate":
            limit = max_length if max_length is not None else self.model_max_length
            sentences = [words[:limit] for words in sentences]
        input_ids = [[self.word_to_char_ids(word) for word in words] for words in sentences]
        masks = [[1] * len(words) for words in sentences]
        word_ids = None
        if self.word_vocab is not None:
            word_ids = [[self.word_to_id(word) for word in words] for words in sentences]

        target = self._padded_length(input_ids, padding, max_length, return_tensors)
        if target is not None:
            pad_word = [0] * self.max_characters_per_token
            input_ids = [ids + [pad_word] * (target - len(ids)) for ids in input_ids]
            masks = [mask + [0] * (target - len(mask)) for mask in masks]
            if word_ids is not None:
                word_ids = [ids + [self._word_pad_id] * (target - len(ids)) for ids in word_ids]

        data = {"input_ids": input_ids if batched else input_ids[0]}
        if return_attention_mask is not False:
            data["attention_mask"] = masks if batched else masks[0]
        if word_ids is not None:
            data["word_ids"] = word_ids if batched else word_ids[0]
        encoding = BatchEncoding(data)
        if return_tensors is not None:
            encoding = self._to_tensors(encoding, return_tensors, batched)
        if return_words:
            encoding["words"] = sentences if batched else sentences[0]
        return encoding

    @staticmethod
    def _padded_length(input_ids: list, padding, max_length: int | None, return_tensors) -> int | None:
        """How many words every sentence is padded to, or None for no padding."""
        if padding is True or padding == "longest":
            return max(len(ids) for ids in input_ids)
        if padding == "max_length":
            if max_length is None:
                raise ValueError("padding='max_length' needs max_length")
            longest = max(len(ids) for ids in input_ids)
            if longest > max_length:
                raise ValueError(
                    f"a sentence has {longest} words, more than max_length={max_length}: pass truncation=True"
                )
            return max_length
        if padding not in (False, None, "do_not_pad"):
            raise ValueError(f"padding must be True, False, 'longest' or 'max_length', got {padding!r}")
        if return_tensors is not None and len({len(ids) for ids in input_ids}) > 1:
            raise ValueError("sentences have different numbers of words: pass padding=True to make a tensor")
        return None

    def _to_tensors(self, encoding: BatchEncoding, return_tensors, batched: bool) -> BatchEncoding:
        import numpy as np

        width = self.max_characters_per_token
        tensors = {}
        for key, value in encoding.items():
            array = np.asarray(value if batched else [value], dtype=np.int64)
            if key == "input_ids":
                array = array.reshape(array.shape[0], -1, width)
            else:
                array = array.reshape(array.shape[0], -1)
            tensors[key] = array
        if str(return_tensors) in ("pt", str(TensorType.PYTORCH)):
            import torch

            tensors = {key: torch.from_numpy(value) for key, value in tensors.items()}
        elif str(return_tensors) not in ("np", str(TensorType.NUMPY)):
            raise ValueError(f"return_tensors must be 'pt' or 'np', got {return_tensors!r}")
        return BatchEncoding(tensors)

    def _as_word_lists(self, text, is_split_into_words: bool) -> tuple[list[list[str]], bool]:
        def check_words(words) -> list[str]:
            if not all(isinstance(word, str) for word in words):
                raise TypeError("pre-split sentences must be lists of strings")
            return list(words)

        if isinstance(text, str):
            if is_split_into_words:
                raise TypeError("is_split_into_words=True needs a list of words, got a string")
            return [self.tokenize(text)], False
        if not isinstance(text, (list, tuple)):
            raise TypeError(f"text must be a string or a list, got {type(text).__name__}")
        if len(text) == 0:
            raise ValueError("empty batch: got an empty list of sentences")
        if is_split_into_words:
            if all(isinstance(item, str) for item in text):
                return [check_words(text)], False
            if all(isinstance(item, (list, tuple)) for item in text):
                return [check_words(words) for words in text], True
            raise TypeError("with is_split_into_words=True pass a list of words or a list of word lists")
        if all(isinstance(item, str) for item in text):
            return [self.tokenize(sentence) for sentence in text], True
        raise TypeError("a batch of raw text must be a list of strings (use is_split_into_words=True for word lists)")

    def decode(self, token_ids, **kwargs) -> str | list[str]:
        """Words back from character ids: one sentence `(words, max_characters_per_token)` -> a string, a batch
        `(batch, words, max_characters_per_token)` -> a list of strings (what `batch_decode` passes).

        Unknown characters come back as U+FFFD (dictionary scheme), cut bytes are replaced (byte scheme)."""
        if hasattr(token_ids, "tolist"):  # tensors and arrays
            token_ids = token_ids.tolist()
        depth, probe = 0, token_ids
        while isinstance(probe, (list, tuple)) and probe:
            depth, probe = depth + 1, probe[0]
        if depth == 3:
            return [self.decode(sentence, **kwargs) for sentence in token_ids]
        if depth == 1:
            raise ValueError(
                "decode takes the character ids of a sentence, shape (words, max_characters_per_token), or of a "
                "batch of sentences; got a flat list of ids"
            )
        words = []
        for ids in token_ids:
            ids = [int(i) for i in ids]
            if not any(ids):
                continue
            if self.char_scheme == "dictionary":
                chars = [self._id_to_char.get(i, "\ufffd") for i in ids]
                words.append("".join(c if len(c) == 1 else "\ufffd" for c in chars if c not in _NON_CHARACTERS))
            else:
                data = bytes(i - 1 for i in ids if 1 <= i <= 256)
                words.append(data.decode("utf-8", "replace"))
        return " ".join(words)

    # HF plumbing: the vocabularies of the dictionary scheme, nothing else beyond tokenizer_config.json ---

    @property
    def vocab_size(self) -> int:
        """Size of the character id space (including the padding id 0)."""
        if self.char_vocab is not None:
            return max(self.char_vocab.values()) + 1
        return 262

    def __len__(self) -> int:
        return self.vocab_size

    @property
    def pad_token_id(self) -> int:
        """0, the id of every character of a padded word position (`attention_mask` marks those positions).
        Code that pads `input_ids` with the tokenizer's pad id, like the stock pipelines' batching, then
        writes exactly the rows this tokenizer pads with."""
        return 0

    def get_vocab(self) -> dict[str, int]:
        return dict(self.char_vocab) if self.char_vocab is not None else {}

    @property
    def added_tokens_decoder(self) -> dict:
        return {}

    @property
    def added_tokens_encoder(self) -> dict:
        return {}

    def save_vocabulary(self, save_directory: str, filename_prefix: str | None = None) -> tuple[str, ...]:
        saved = []
        for key, vocab in (("char_vocab_file", self.char_vocab), ("word_vocab_file", self.word_vocab)):
            if vocab is None:
                continue
            name = (filename_prefix + "-" if filename_prefix else "") + VOCAB_FILES_NAMES[key]
            path = os.path.join(save_directory, name)
            # Written beside and renamed into place, so a killed save never leaves half a vocabulary; the name is
            # the temporary pattern of hf-elmo's file_io (its stale-temporary sweep recognises it).
            temporary = os.path.join(save_directory, f".{name}.tmp-{os.getpid()}-0-{uuid.uuid4().hex}")
            try:
                with open(temporary, "w", encoding="utf-8") as handle:
                    json.dump(vocab, handle, ensure_ascii=False, indent=0)
                os.replace(temporary, path)
            finally:
                if os.path.exists(temporary):
                    os.remove(temporary)
            saved.append(path)
        return tuple(saved)


__all__ = ["ElmoTokenizer"]
