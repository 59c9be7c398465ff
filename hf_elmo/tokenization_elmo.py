"""Character tokenizer for ELMo: text -> words -> (words, 50) character ids.

Words become ids with the AllenNLP / bilm-tf byte scheme: ``[BOW] + utf8_bytes[:48] + [EOW] + [PAD]...``
with every id shifted by +1 so that 0 marks a padded word position.

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

import logging
import re
from collections.abc import Sequence

from tokenizers.pre_tokenizers import BertPreTokenizer
from transformers import BatchEncoding, PreTrainedTokenizerBase
from transformers.utils import TensorType

BEGINNING_OF_WORD_CHARACTER = 258
END_OF_WORD_CHARACTER = 259
PADDING_CHARACTER = 260

_CJK_RUN = re.compile(
    "([\u2e80-\u2fdf\u3005\u3007\u3021-\u3029\u3038-\u303b\u3400-\u4dbf\u4e00-\u9fff"
    "\uf900-\ufaff\U00020000-\U0002ffff\U00030000-\U0003134f]+)"
)
_SEGMENTERS = ("auto", "jieba", "chars", "whitespace")
_SURROGATE = re.compile("[\ud800-\udfff]")
# C0 and C1 control characters other than tab, newline, vertical tab, form feed, carriage return and NEL.
_CONTROL = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f]")


def _without_surrogates(text: str) -> str:
    """Join surrogate pairs into their character and drop lone surrogates, which UTF-8 cannot encode."""
    if _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "ignore")


def _load_jieba():
    try:
        import jieba
    except ImportError:
        return None
    jieba.setLogLevel(logging.WARNING)
    return jieba


class ElmoTokenizer(PreTrainedTokenizerBase):
    """Turns text into ELMo character ids `(batch, words, max_characters_per_token)`.

    Args:
        max_characters_per_token (`int`, defaults to 50): ids per word, boundaries included.
        segmenter (`str`, defaults to `"auto"`):
            How runs of Chinese characters become words: `"jieba"` (needs jieba), `"chars"` (one word
            per character), `"auto"` (jieba when installed, else characters), or `"whitespace"`
            (split on whitespace only, no punctuation splitting).
        do_lower_case (`bool`, defaults to `False`): lower-case words before encoding.
    """

    vocab_files_names: dict[str, str] = {}
    model_input_names = ["input_ids", "attention_mask"]
    padding_side = "right"
    truncation_side = "right"

    def __init__(
        self,
        max_characters_per_token: int = 50,
        segmenter: str = "auto",
        do_lower_case: bool = False,
        **kwargs,
    ):
        if segmenter not in _SEGMENTERS:
            raise ValueError(f"segmenter must be one of {_SEGMENTERS}, got {segmenter!r}")
        if max_characters_per_token < 3:
            raise ValueError("max_characters_per_token must be >= 3")
        self.max_characters_per_token = max_characters_per_token
        self.segmenter = segmenter
        self.do_lower_case = do_lower_case
        self._jieba = None
        if segmenter == "jieba":
            self._jieba = _load_jieba()
            if self._jieba is None:
                raise ImportError("segmenter='jieba' needs jieba: pip install jieba")
        elif segmenter == "auto":
            self._jieba = _load_jieba()
        self._pre_tokenizer = BertPreTokenizer()
        super().__init__(
            max_characters_per_token=max_characters_per_token,
            segmenter=segmenter,
            do_lower_case=do_lower_case,
            **kwargs,
        )

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
        data = _without_surrogates(word).encode("utf-8")[: self.max_characters_per_token - 2]
        ids = [BEGINNING_OF_WORD_CHARACTER + 1] + [byte + 1 for byte in data] + [END_OF_WORD_CHARACTER + 1]
        return ids + [PADDING_CHARACTER + 1] * (self.max_characters_per_token - len(ids))

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
            (1 per real word) and, with `return_words=True`, `words` (the words each position holds).
        """
        unknown = set(kwargs) - {"add_special_tokens", "verbose", "text_target", "return_token_type_ids"}
        if unknown:
            raise TypeError(f"ElmoTokenizer got unexpected arguments {sorted(unknown)}")
        sentences, batched = self._as_word_lists(text, is_split_into_words)
        if truncation and truncation != "do_not_truncate":
            limit = max_length if max_length is not None else self.model_max_length
            sentences = [words[:limit] for words in sentences]
        input_ids = [[self.word_to_char_ids(word) for word in words] for words in sentences]
        masks = [[1] * len(words) for words in sentences]

        if padding is True or padding == "longest":
            target = max(len(ids) for ids in input_ids)
        elif padding == "max_length":
            if max_length is None:
                raise ValueError("padding='max_length' needs max_length")
            target = max_length
            longest = max(len(ids) for ids in input_ids)
            if longest > target:
                raise ValueError(
                    f"a sentence has {longest} words, more than max_length={max_length}: pass truncation=True"
                )
        elif padding in (False, None, "do_not_pad"):
            target = None
        else:
            raise ValueError(f"padding must be True, False, 'longest' or 'max_length', got {padding!r}")
        if target is not None:
            pad_word = [0] * self.max_characters_per_token
            input_ids = [ids + [pad_word] * (target - len(ids)) for ids in input_ids]
            masks = [mask + [0] * (target - len(mask)) for mask in masks]
        elif return_tensors is not None and len({len(ids) for ids in input_ids}) > 1:
            raise ValueError("sentences have different numbers of words: pass padding=True to make a tensor")

        data = {"input_ids": input_ids if batched else input_ids[0]}
        if return_attention_mask is not False:
            data["attention_mask"] = masks if batched else masks[0]
        encoding = BatchEncoding(data)
        if return_tensors is not None:
            encoding = self._to_tensors(encoding, return_tensors, batched)
        if return_words:
            encoding["words"] = sentences if batched else sentences[0]
        return encoding

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

    def decode(self, token_ids, **kwargs) -> str:
        """Words back from character ids (one sentence, `(words, max_characters_per_token)`)."""
        words = []
        for ids in token_ids:
            ids = [int(i) for i in ids]
            if not any(ids):
                continue
            data = bytes(i - 1 for i in ids if 1 <= i <= 256)
            words.append(data.decode("utf-8", "replace"))
        return " ".join(words)

    # HF plumbing: nothing to save beyond tokenizer_config.json ----------------------------------

    @property
    def vocab_size(self) -> int:
        return 262

    def __len__(self) -> int:
        return self.vocab_size

    def get_vocab(self) -> dict[str, int]:
        return {}

    @property
    def added_tokens_decoder(self) -> dict:
        return {}

    @property
    def added_tokens_encoder(self) -> dict:
        return {}

    def save_vocabulary(self, save_directory: str, filename_prefix: str | None = None) -> tuple[str, ...]:
        return ()


__all__ = ["ElmoTokenizer"]
