"""Language-model training data: corpus files, the word vocabulary, a lazily read dataset, the collator.

Corpus format (bilm-tf's): UTF-8 text, one sentence per line, words separated by spaces.
Vocabulary format: one word per line, ``<S>``, ``</S>``, ``<UNK>`` first, then by decreasing frequency.
"""

from __future__ import annotations

import codecs
import os
from collections import Counter
from collections.abc import Iterable, Iterator

import numpy as np
import torch

from ..utils.io import atomic_file, atomic_write_text, check_output_path, iter_text_lines, read_input_bytes

SPECIAL_WORDS = ["<S>", "</S>", "<UNK>"]
UNK_ID = 2


def check_corpus_file(path: str | os.PathLike) -> None:
    """Raise ValueError naming `path` unless it is an existing file (not a folder)."""
    if os.path.isdir(path):
        raise ValueError(f"{os.fspath(path)} is a folder, not a corpus file")
    if not os.path.isfile(path):
        raise ValueError(f"corpus file not found: {os.fspath(path)}")


def read_corpus_lines(path: str | os.PathLike) -> Iterator[tuple[int, list[str]]]:
    """Yield (line number, words) for every non-blank line; a non-UTF-8 line raises naming file and line.
    A UTF-8 byte-order mark at the start of the file is not text."""
    check_corpus_file(path)
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as error:
                raise ValueError(f"{path}:{number}: not valid UTF-8 ({error.reason} at byte {error.start})") from None
            words = line.split()
            if words:
                yield number, words


def segment_raw_text(lines: Iterable[str], segmenter: str = "jieba") -> Iterator[str]:
    """Raw text lines -> corpus lines (words joined by spaces), e.g. for unsegmented Chinese."""
    if segmenter == "jieba":
        import logging

        import jieba

        jieba.setLogLevel(logging.WARNING)
        split = lambda text: jieba.lcut(text)  # noqa: E731
    elif segmenter == "chars":
        split = list
    elif segmenter == "whitespace":
        split = str.split
    else:
        raise ValueError(f"segmenter must be 'jieba', 'chars' or 'whitespace', got {segmenter!r}")
    for line in lines:
        words = [word for word in split(line.strip()) if word.strip()]
        if words:
            yield " ".join(words)


def build_vocabulary(
    corpus_paths: Iterable[str | os.PathLike], min_count: int = 1, max_size: int | None = None
) -> list[str]:
    """`<S>`, `</S>`, `<UNK>`, then words by decreasing count (ties alphabetical), count >= min_count.

    Raises ValueError rather than return a vocabulary of the three special words alone."""
    check_vocabulary_limits(min_count, max_size)
    corpus_paths = list(corpus_paths)
    counts: Counter[str] = Counter()
    for path in corpus_paths:
        for _, words in read_corpus_lines(path):
            counts.update(words)
    ordinary = {w: c for w, c in counts.items() if w not in SPECIAL_WORDS}
    if not ordinary:
        raise ValueError(f"cannot build a vocabulary: no words besides {', '.join(SPECIAL_WORDS)} in "
                         f"{', '.join(map(str, corpus_paths))}")
    words = sorted((w for w, c in ordinary.items() if c >= min_count), key=lambda w: (-counts[w], w))
    if not words:
        raise ValueError(
            f"cannot build a vocabulary: no word occurs at least {min_count} times (the min count); "
            f"the most frequent occurs {max(ordinary.values())} times"
        )
    if max_size is not None:
        words = words[: max_size - len(SPECIAL_WORDS)]
    return SPECIAL_WORDS + words


def build_character_vocabulary(corpus_paths: Iterable[str | os.PathLike], min_count: int = 1) -> dict[str, int]:
    """The character vocabulary of the dictionary scheme: its special entries (ids 1-6; 0 marks a padded word),
    then the characters of the corpus by decreasing count (ties by code point), count >= min_count."""
    from ..models.elmo.tokenization_elmo import DICTIONARY_CHAR_SPECIALS

    if min_count < 1:
        raise ValueError(f"the character min count must be >= 1, got {min_count}")
    counts: Counter[str] = Counter()
    for path in corpus_paths:
        for _, words in read_corpus_lines(path):
            for word in words:
                counts.update(word)
    characters = sorted((c for c, n in counts.items() if n >= min_count and c not in DICTIONARY_CHAR_SPECIALS),
                        key=lambda c: (-counts[c], c))
    if not characters:
        raise ValueError(f"cannot build a character vocabulary: no character occurs at least {min_count} times")
    return {entry: index for index, entry in enumerate(DICTIONARY_CHAR_SPECIALS + tuple(characters), start=1)}


def check_vocabulary_limits(min_count: int, max_size: int | None, names: tuple[str, str] = ("min_count", "max_size")) -> None:
    """Refuse a min count below 1 and a max size that leaves no room for a word after the three specials."""
    if min_count < 1:
        raise ValueError(f"{names[0]} must be at least 1, got {min_count}")
    if max_size is not None and max_size <= len(SPECIAL_WORDS):
        raise ValueError(
            f"{names[1]} {max_size} leaves no words: the vocabulary holds {', '.join(SPECIAL_WORDS)} first, "
            f"so it must be at least {len(SPECIAL_WORDS) + 1}"
        )


def save_vocabulary(words: list[str], path: str | os.PathLike, overwrite: bool = True) -> None:
    """Write one word a line, atomically (no file named after `path` other than `path` itself is touched)."""
    atomic_write_text(path, "".join(f"{word}\n" for word in words), overwrite=overwrite)


def load_vocabulary(path: str | os.PathLike) -> list[str]:
    """Read a vocabulary file, checking its format (one word a line, the three specials first, no repeats)."""
    data = read_input_bytes(path, "vocabulary")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: vocabulary is not valid UTF-8 ({error.reason})") from None
    words = text.splitlines()
    for number, word in enumerate(words, start=1):
        if not word or word != word.strip() or len(word.split()) != 1:
            raise ValueError(f"{path}:{number}: expected one word per line, got {word!r}")
    if words[:3] != SPECIAL_WORDS:
        raise ValueError(f"{path}: a vocabulary must start with the lines <S>, </S>, <UNK>; got {words[:3]}")
    if len(set(words)) != len(words):
        duplicate = next(word for word, count in Counter(words).items() if count > 1)
        raise ValueError(f"{path}: word {duplicate!r} appears more than once")
    return words


class LineDataset(torch.utils.data.Dataset):
    """Sentences of a corpus file, read on demand: only the byte offsets of the lines stay in memory,
    so corpora larger than memory work and any sampler (shuffling, DDP sharding, resuming) applies.

    Long sentences are cut into pieces of at most `max_words` words. A UTF-8 byte-order mark at the start
    of the file is skipped.
    """

    def __init__(self, path: str | os.PathLike, max_words: int = 50):
        if max_words < 1:
            raise ValueError(f"max_words must be at least 1, got {max_words}")
        check_corpus_file(path)
        self.path = os.fspath(path)
        self.max_words = max_words
        offsets, pieces, lengths = [], [], []
        with open(self.path, "rb") as handle:
            position = 0
            for number, raw in enumerate(handle, start=1):
                if number == 1 and raw.startswith(codecs.BOM_UTF8):
                    raw, position = raw[len(codecs.BOM_UTF8) :], len(codecs.BOM_UTF8)
                try:
                    count = len(raw.decode("utf-8").split())
                except UnicodeDecodeError as error:
                    raise ValueError(
                        f"{self.path}:{number}: not valid UTF-8 ({error.reason} at byte {error.start})"
                    ) from None
                for piece in range((count + max_words - 1) // max_words):
                    offsets.append(position)
                    pieces.append(piece)
                    lengths.append(min(max_words, count - piece * max_words))
                position += len(raw)
        if not offsets:
            raise ValueError(f"{self.path}: the corpus is empty (no line has a word)")
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.pieces = np.asarray(pieces, dtype=np.int32)
        self.lengths = np.asarray(lengths, dtype=np.int32)  # words per item, for length-grouped batches
        self._handle = None

    def __len__(self) -> int:
        return len(self.offsets)

    def __getitem__(self, index: int) -> list[str]:
        if self._handle is None:
            self._handle = open(self.path, "rb")  # one handle per worker process
        self._handle.seek(int(self.offsets[index]))
        words = self._handle.readline().decode("utf-8").split()
        start = int(self.pieces[index]) * self.max_words
        return words[start : start + self.max_words]

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_handle"] = None
        return state


def item_lengths(dataset: torch.utils.data.Dataset) -> list[int] | None:
    """Words per item of a `LineDataset` or a `ConcatDataset` of them (None for other datasets)."""
    if isinstance(dataset, LineDataset):
        return dataset.lengths.tolist()
    if isinstance(dataset, torch.utils.data.ConcatDataset):
        parts = [item_lengths(part) for part in dataset.datasets]
        return None if any(part is None for part in parts) else [length for part in parts for length in part]
    return None


class LanguageModelCollator:
    """Sentences (lists of words) -> `input_ids` (B, W, 50), `attention_mask` (B, W), `labels` (B, W) word ids."""

    def __init__(self, tokenizer, vocabulary: list[str]):
        self.tokenizer = tokenizer
        self.word_to_id = {word: index for index, word in enumerate(vocabulary)}
        self._char_ids: dict[str, list[int]] = {}

    def __call__(self, sentences: list[list[str]]) -> dict[str, torch.Tensor]:
        width = self.tokenizer.max_characters_per_token
        longest = max(len(words) for words in sentences)
        input_ids = torch.zeros(len(sentences), longest, width, dtype=torch.long)
        labels = torch.full((len(sentences), longest), -100, dtype=torch.long)
        for row, words in enumerate(sentences):
            if words:
                ids = [self._char_ids.get(w) or self._char_ids.setdefault(w, self.tokenizer.word_to_char_ids(w)) for w in words]
                input_ids[row, : len(words)] = torch.tensor(ids)
                labels[row, : len(words)] = torch.tensor([self.word_to_id.get(w, UNK_ID) for w in words])
        attention_mask = (labels != -100).long()
        return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


def segment_corpus_file(source: str | os.PathLike, output: str | os.PathLike, segmenter: str = "jieba",
                        overwrite: bool = False) -> int:
    """Raw text (a sentence or paragraph a line) -> `output`, the words of each line split by spaces, written
    atomically; returns the number of lines written."""
    # Everything that can be checked is checked before any work, so a refused run writes nothing.
    check_output_path(output, overwrite)
    check_corpus_file(source)
    count = 0
    with atomic_file(output, overwrite=overwrite) as temporary:
        with open(temporary, "w", encoding="utf-8") as out:
            raw = (" ".join(text.split()) for _, text in iter_text_lines(source))  # \r ends a line too
            for line in segment_raw_text(raw, segmenter):
                out.write(line + "\n")
                count += 1
        if count == 0:
            raise ValueError(f"{source}: no text to segment")
    return count
