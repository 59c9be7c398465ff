"""Batching for ELMo heads: word-level examples -> padded `(batch, words, 50)` character ids.

Labels are one per word (ELMo reads whole words, so there is no sub-word alignment): token labels are
padded with -100, sentence labels are stacked.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..models.elmo.tokenization_elmo import ElmoTokenizer


@dataclass
class ElmoDataCollator:
    """Pads a list of examples into tensors for [`ElmoForTokenClassification`] / [`ElmoForSequenceClassification`].

    Each example is a mapping with one of
      * `"input_ids"`: character ids of its words, shape `(words, max_characters_per_token)`;
      * `"words"`: a list of words (encoded with `tokenizer`);
      * `"text"`: a raw string (split into words by `tokenizer`);
    or `"elmo_hidden_states"`: the frozen biLM's layers for its words, shape `(layers, words, 2P)` (see
    `hf_elmo.finetuning.precomputed_layers.precompute_elmo_layers`), possibly along with one of the above (for heads with their
    own word vectors, `config.task_token_features`), and optionally `"labels"`: a list of tag ids, one per
    word (token classification), or one class id (sequence classification).

    Returns `input_ids` (batch, max_words, max_characters_per_token) and/or `elmo_hidden_states`
    (batch, layers, max_words, 2P), zero-padded, `attention_mask` (batch, max_words) and `labels`
    ((batch, max_words) padded with `label_pad_token_id`, or (batch,)). For models with a word embedding
    (ELMoForManyLangs), also `word_ids` (batch, max_words): looked up by a tokenizer with a word vocabulary
    for `"words"` / `"text"` examples, or taken from the examples' own `"word_ids"` (one per word) along
    with their `"input_ids"`.

    With `Trainer`, set `TrainingArguments(remove_unused_columns=False)` for `"words"` / `"text"` examples:
    otherwise `Trainer` drops those columns before they reach the collator (they are not `forward` arguments).

    Args:
        tokenizer: needed for `"words"` / `"text"` examples.
        label_pad_token_id: label of padding positions (ignored by the loss).
        max_words: cut longer sentences (and their labels) to this many words.
    """

    tokenizer: ElmoTokenizer | None = None
    label_pad_token_id: int = -100
    max_words: int | None = None
    _cache: dict[str, list[int]] = field(default_factory=dict, init=False, repr=False)

    def _char_ids(self, word: str) -> list[int]:
        ids = self._cache.get(word)
        if ids is None:
            ids = self._cache[word] = self.tokenizer.word_to_char_ids(word)
        return ids

    def _example_ids(self, index: int, example: Mapping[str, Any]) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(character ids (words, width), word ids (words,) or None) of one example."""
        if "input_ids" in example:
            ids = torch.as_tensor(example["input_ids"], dtype=torch.long)
            if tuple(ids.shape) == (0,):  # a text without words, as the tokenizer encodes it (tok(""))
                ids = ids.reshape(0, self.tokenizer.max_characters_per_token if self.tokenizer is not None else 0)
            if ids.dim() != 2:
                raise ValueError(
                    f"example {index}: input_ids must be (words, characters), got shape {tuple(ids.shape)}"
                )
            if example.get("word_ids") is None:
                return ids, None
            word_ids = torch.as_tensor(example["word_ids"], dtype=torch.long)
            if tuple(word_ids.shape) != (ids.shape[0],):
                raise ValueError(
                    f"example {index}: word_ids must hold one id per word ({ids.shape[0]}), "
                    f"got shape {tuple(word_ids.shape)}"
                )
            return ids, word_ids
        if "words" not in example and "text" not in example:
            raise ValueError(f"example {index} has none of 'input_ids', 'words', 'text' (keys: {sorted(example)})")
        if self.tokenizer is None:
            raise ValueError("examples given as words or text need ElmoDataCollator(tokenizer=...)")
        if "words" in example:
            words = example["words"]
            if isinstance(words, str) or not all(isinstance(word, str) for word in words):
                raise TypeError(f"example {index}: 'words' must be a list of strings")
        else:
            words = self.tokenizer.tokenize(example["text"])
        width = self.tokenizer.max_characters_per_token
        word_ids = None
        if self.tokenizer.word_vocab is not None:
            word_ids = torch.tensor([self.tokenizer.word_to_id(word) for word in words], dtype=torch.long)
        if not words:
            return torch.zeros(0, width, dtype=torch.long), word_ids
        return torch.tensor([self._char_ids(word) for word in words], dtype=torch.long), word_ids

    def __call__(self, examples: Sequence[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
        if len(examples) == 0:
            raise ValueError("cannot collate an empty list of examples")
        precomputed = ["elmo_hidden_states" in example for example in examples]
        if any(precomputed):
            if not all(precomputed):
                raise ValueError("some examples have elmo_hidden_states and some do not")
            return self._collate_precomputed(examples)
        encoded = [self._example_ids(i, example) for i, example in enumerate(examples)]
        if self.tokenizer is not None:
            self.tokenizer.warn_if_mostly_unknown()  # of the words it encoded here
        full_lengths = [ids.shape[0] for ids, _ in encoded]
        num_words = max(full_lengths) if self.max_words is None else min(max(full_lengths), self.max_words)
        attention_mask = torch.zeros(len(examples), num_words, dtype=torch.long)
        for row, length in enumerate(full_lengths):
            attention_mask[row, : min(length, num_words)] = 1
        batch = {"attention_mask": attention_mask, **self._pad_ids(encoded, num_words)}
        return self._with_labels(batch, examples, full_lengths, num_words)

    def _collate_precomputed(self, examples: Sequence[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
        layers = [torch.as_tensor(example["elmo_hidden_states"]) for example in examples]
        shapes = {(item.dim(), item.shape[0], item.shape[-1]) for item in layers}
        if len(shapes) != 1 or next(iter(shapes))[0] != 3:
            raise ValueError(
                "elmo_hidden_states of every example must be (layers, words, dim) with the same layers and dim, "
                f"got shapes {sorted({tuple(item.shape) for item in layers})}"
            )
        full_lengths = [item.shape[1] for item in layers]
        if self.max_words is not None:
            layers = [item[:, : self.max_words] for item in layers]
        num_layers, dim = layers[0].shape[0], layers[0].shape[2]
        num_words = max(item.shape[1] for item in layers)
        hidden = layers[0].new_zeros(len(examples), num_layers, num_words, dim)
        attention_mask = torch.zeros(len(examples), num_words, dtype=torch.long)
        for row, item in enumerate(layers):
            hidden[row, :, : item.shape[1]] = item
            attention_mask[row, : item.shape[1]] = 1
        batch = {"elmo_hidden_states": hidden, "attention_mask": attention_mask}
        word_keys = [any(key in example for key in ("input_ids", "words", "text")) for example in examples]
        if any(word_keys):
            if not all(word_keys):
                raise ValueError("some precomputed examples carry their words (or input_ids) and some do not")
            batch.update(self._padded_ids_matching(examples, full_lengths, num_words))
        return self._with_labels(batch, examples, full_lengths, num_words)

    def _padded_ids_matching(self, examples, full_lengths: list[int], num_words: int) -> dict[str, torch.Tensor]:
        encoded = [self._example_ids(i, example) for i, example in enumerate(examples)]
        for row, ((ids, _), length) in enumerate(zip(encoded, full_lengths)):
            if ids.shape[0] != length:
                raise ValueError(f"example {row}: {ids.shape[0]} words but {length} precomputed biLM positions")
        return self._pad_ids(encoded, num_words)

    def _pad_ids(self, encoded: list[tuple[torch.Tensor, torch.Tensor | None]], num_words: int) -> dict[str, torch.Tensor]:
        """(character ids (words, width), word ids or None) per example -> `input_ids` (batch, num_words, width),
        cut and zero-padded, and `word_ids` (batch, num_words) when the examples have them."""
        # A sentence without words has any width: (0, 0) when no tokenizer tells it.
        widths = {ids.shape[1] for ids, _ in encoded if ids.shape[0]} or {encoded[0][0].shape[1]}
        if len(widths) != 1:
            raise ValueError(f"examples have different characters-per-word widths {sorted(widths)}")
        width = widths.pop()
        batch = {"input_ids": _padded([ids.reshape(-1, width) for ids, _ in encoded], num_words, 0, width)}
        with_word_ids = [word_ids is not None for _, word_ids in encoded]
        if any(with_word_ids):
            if not all(with_word_ids):
                raise ValueError("some examples have word_ids and some do not")
            # Padded positions are masked out; the tokenizer pads with its `<pad>` word, so does this.
            pad = self.tokenizer.word_to_id("<pad>") if self.tokenizer is not None and self.tokenizer.word_vocab else 0
            batch["word_ids"] = _padded([word_ids for _, word_ids in encoded], num_words, pad)
        return batch

    def _with_labels(self, batch: dict, examples, full_lengths: list[int], num_words: int) -> dict[str, torch.Tensor]:
        full_lengths, num_words, unit = self._positions_labelled(batch, examples, full_lengths, num_words)
        raw = [example_label(example) for example in examples]
        has_labels = [label is not None for label in raw]
        if any(has_labels):
            if not all(has_labels):
                raise ValueError("some examples have labels and some do not")
            batch["labels"] = self._labels(raw, full_lengths, num_words, unit)
        return batch

    def _positions_labelled(self, batch: dict, examples, full_lengths: list[int], num_words: int):
        """(each example's labelled positions, the batch's, what a position is): here its words."""
        placed = sorted({key for example in examples for key in CHARACTER_KEYS if key in example})
        if placed:
            raise ValueError(f"examples with {', '.join(placed)} label characters placed in their words: batch them "
                             "with ElmoCharacterTaggingCollator (for ElmoForCharacterTagging)")
        return full_lengths, num_words, "word"

    def _labels(self, raw: list, full_lengths: list[int], num_words: int, unit: str = "word") -> torch.Tensor:
        # One label per example: a Python or numpy number (datasets yields numpy scalars) or a 0-d tensor; an
        # integer is a class id, a floating-point number a regression target.
        scalar = [is_sentence_label(label) for label in raw]
        if all(scalar):
            values = torch.stack([torch.as_tensor(label) for label in raw])
            return values.to(torch.float32 if values.is_floating_point() else torch.long)
        if any(scalar):
            raise ValueError("mixed label kinds: some examples have one label, others one label per word")
        rows = []
        for row, (label, length) in enumerate(zip(raw, full_lengths)):
            label = torch.tensor([int(x) for x in label], dtype=torch.long)
            if len(label) != length:
                raise ValueError(f"example {row}: {length} {unit}s but {len(label)} labels (need one label per {unit})")
            rows.append(label)
        return _padded(rows, num_words, self.label_pad_token_id)


@dataclass
class ElmoCharacterTaggingCollator(ElmoDataCollator):
    """Pads examples of characters placed in their words into tensors for [`ElmoForCharacterTagging`].

    Each example is what `character_words.characters_as_words` makes of a character-labelled sentence: its `"words"`
    (or their `"input_ids"` / precomputed `"elmo_hidden_states"`, as [`ElmoDataCollator`] takes them), and per
    character `"token_word_index"` (its word), `"token_positions"` (its place in the word, `WORD_POSITIONS`),
    optionally `"characters"` (each character alone, for `config.task_character_features`) and `"labels"`.

    Returns what [`ElmoDataCollator`] returns for the words, plus `token_word_index` (batch, characters), -1 at
    padding and for characters of words cut by `max_words`, `token_positions` (batch, characters),
    `character_input_ids` (batch, characters, width) with `"characters"`, and `labels` (batch, characters).
    """

    def _positions_labelled(self, batch: dict, examples, full_lengths: list[int], num_words: int):
        placed = ["token_word_index" in example for example in examples]
        if not all(placed):
            raise ValueError(f"example {placed.index(False)} has no token_word_index: each example needs its "
                             "characters' places in their words (character_words.characters_as_words)")
        batch.update(self._character_positions(examples, full_lengths, num_words))
        if any(CHARACTERS in example for example in examples):
            batch["character_input_ids"] = self._character_ids(examples, batch["token_word_index"].shape[1])
        return ([len(example["token_word_index"]) for example in examples], batch["token_word_index"].shape[1],
                "character")

    def _character_positions(self, examples, full_lengths: list[int], num_words: int) -> dict[str, torch.Tensor]:
        """`token_word_index` (batch, characters), -1 at padding and for characters of words cut by `max_words`,
        and `token_positions` (batch, characters), 0 at padding."""
        rows, positions = [], []
        for row, (example, length) in enumerate(zip(examples, full_lengths)):
            index = torch.as_tensor(example["token_word_index"], dtype=torch.long)
            position = torch.as_tensor(example.get("token_positions", ()), dtype=torch.long)
            if index.dim() != 1 or position.shape != index.shape:
                raise ValueError(f"example {row}: token_word_index and token_positions must be lists of one id per "
                                 f"character of the same length, got {tuple(index.shape)} and {tuple(position.shape)}")
            if index.numel() and (int(index.min()) < -1 or int(index.max()) >= length):
                raise ValueError(f"example {row}: token_word_index must point at its {length} words (or be -1: none)")
            rows.append(index.masked_fill(index >= num_words, -1))
            positions.append(position)
        num_characters = max(len(index) for index in rows)
        return {"token_word_index": _padded(rows, num_characters, -1), "token_positions": _padded(positions, num_characters, 0)}

    def _character_ids(self, examples, num_characters: int) -> torch.Tensor:
        """(batch, characters, width): the character ids of each of the examples' `"characters"`, read as a word."""
        if self.tokenizer is None:
            raise ValueError("examples with 'characters' need ElmoCharacterTaggingCollator(tokenizer=...)")
        width = self.tokenizer.max_characters_per_token
        rows = []
        for row, example in enumerate(examples):
            characters = example.get(CHARACTERS)
            if characters is None or isinstance(characters, str) or len(characters) != len(example["token_word_index"]):
                raise ValueError(f"example {row}: 'characters' must be a list of one entry for each of the "
                                 f"{len(example['token_word_index'])} characters that token_word_index places "
                                 "(every example, or none)")
            ids = [self._char_ids(character) for character in characters]
            rows.append(torch.tensor(ids, dtype=torch.long) if ids else torch.zeros(0, width, dtype=torch.long))
        return _padded(rows, num_characters, 0, width)


def _padded(rows: list[torch.Tensor], num_words: int, fill: int, *trailing: int) -> torch.Tensor:
    """Per-example rows (words, *trailing) -> (batch, num_words, *trailing): cut to `num_words`, padded with `fill`."""
    padded = torch.full((len(rows), num_words, *trailing), fill, dtype=torch.long)
    for row, values in enumerate(rows):
        kept = values[:num_words]
        padded[row, : kept.shape[0]] = kept
    return padded


# The per-character strings a character example may carry beside its places in its words
# (`character_words.characters_as_words`): each character alone, read as a word.
CHARACTERS = "characters"
# What only examples of characters placed in their words carry.
CHARACTER_KEYS = ("token_word_index", "token_positions", CHARACTERS)
# Where an example keeps its label(s): `labels`, or `label` / `label_ids` (the usual column names of `datasets`),
# as transformers' collators read them.
LABEL_KEYS = ("labels", "label", "label_ids")


def example_label(example: Mapping[str, Any]):
    """An example's label(s) under the first of `LABEL_KEYS` it has, or None."""
    for key in LABEL_KEYS:
        if example.get(key) is not None:
            return example[key]
    return None


def is_sentence_label(label) -> bool:
    """One label for the whole example (a Python or numpy number, or a 0-d tensor), not one per word."""
    return isinstance(label, numbers.Number) or getattr(label, "ndim", None) == 0


__all__ = ["ElmoCharacterTaggingCollator", "ElmoDataCollator"]
