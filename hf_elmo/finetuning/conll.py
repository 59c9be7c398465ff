"""Word-level tagged data: CoNLL-style files, JSON lines, `datasets` rows -> checked sentences and label ids.

* A CoNLL line holds a word and a tag: tab-separated (the word is the first field, the tag the last) or
  whitespace-separated (first and last column, so CoNLL-2003's 4 columns work). A blank line ends a
  sentence; ``-DOCSTART-`` lines separate documents. A line with a single field, an empty file, or a file
  without sentences is an error naming file and line.
* ``.jsonl`` files hold one ``{"words": [...], "tags": [...]}`` object a line; counts must match.
* Labels come from the training set (``O`` first). A dev/test label never seen in training is an error by
  default; ``unseen_label="O"`` maps it to ``O`` with a warning instead (the gold entity then disappears
  from the evaluation, so scores on such data are not comparable).
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..utils.io import read_input_bytes

logger = logging.getLogger(__name__)


class DataError(ValueError):
    """Bad training or evaluation data; the message names the file and line (or the example)."""


# Files ---------------------------------------------------------------------------------------

_NEWLINE = re.compile(rb"\r\n|\r|\n")  # the line ends Python's text mode knows


def not_utf8_error(path: str, data: bytes) -> DataError:
    """A `DataError` naming the file, line and byte where `data`, the bytes of `path`, stop being UTF-8."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as error:
        before = data[: error.start]
        line = len(_NEWLINE.findall(before)) + 1
        column = error.start - max(before.rfind(b"\n"), before.rfind(b"\r"))
        return DataError(
            f"{path}:{line}: not UTF-8 text (byte 0x{data[error.start]:02x} at column {column}: {error.reason}); "
            "convert the file to UTF-8"
        )
    return DataError(f"{path}: not UTF-8 text")


def read_text_lines(path: str | os.PathLike) -> list[str]:
    """The lines of a UTF-8 text file (`-` = standard input), line ends removed, blank lines kept.

    Lines end at `\\n`, `\\r\\n` or `\\r` (as in Python's text mode); a leading byte-order mark is dropped.
    A missing or unreadable file, or bytes that are not UTF-8, raise `DataError` naming the file (and line).
    """
    path = os.fspath(path)
    try:
        data = read_input_bytes(path, "text")
    except ValueError as error:
        raise DataError(str(error)) from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise not_utf8_error("<stdin>" if path == "-" else path, data) from None
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines[-1] == "":
        lines.pop()  # the line end of the last line (or an empty file)
    return lines


# Data ----------------------------------------------------------------------------------------


@dataclass
class TaggedSentence:
    """Words with one tag each, and where they came from (for error messages)."""

    words: list[str]
    tags: list[str]
    source: str = "<data>"
    lines: list[int] | None = None  # file line of each word
    index: int = 0  # sentence number within its source

    def where(self, position: int) -> str:
        if self.lines is not None:
            return f"{self.source}:{self.lines[position]}"
        return f"{self.source}: sentence {self.index + 1}, word {position + 1}"


def read_conll(path: str | os.PathLike) -> list[TaggedSentence]:
    """Read a CoNLL-style file (see the module docstring); raises `DataError` naming file:line on bad input."""
    path = os.fspath(path)
    if path.endswith(".jsonl"):
        return read_jsonl(path)
    sentences: list[TaggedSentence] = []
    words: list[str] = []
    tags: list[str] = []
    lines: list[int] = []

    def flush():
        if words:
            sentences.append(TaggedSentence(list(words), list(tags), path, list(lines), len(sentences)))
            words.clear(), tags.clear(), lines.clear()

    for number, line in enumerate(read_text_lines(path), start=1):
        if not line.strip():
            flush()
            continue
        if line.startswith("-DOCSTART-"):
            flush()
            continue
        fields = line.split("\t") if "\t" in line else line.split()
        if len(fields) < 2 or not fields[0].strip() or not fields[-1].strip():
            raise DataError(f"{path}:{number}: expected 'word<TAB>tag' or 'word tag', got {line!r}")
        tag = fields[-1].strip()
        if any(ch.isspace() for ch in tag):
            raise DataError(f"{path}:{number}: tag {tag!r} contains whitespace")
        words.append(fields[0])
        tags.append(tag)
        lines.append(number)
    flush()
    if not sentences:
        raise DataError(f"{path}: no sentences found (empty file?)")
    return sentences


def read_jsonl(path: str | os.PathLike) -> list[TaggedSentence]:
    """One `{"words": [...], "tags": [...]}` object a line (`tokens` / `ner_tags` are accepted too)."""
    path = os.fspath(path)
    sentences = []
    for number, line in enumerate(read_text_lines(path), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as error:
            raise DataError(f"{path}:{number}: invalid JSON ({error.msg})") from None
        except RecursionError:
            raise DataError(f"{path}:{number}: the JSON is nested too deeply to read") from None
        words = item.get("words", item.get("tokens")) if isinstance(item, dict) else None
        tags = item.get("tags", item.get("ner_tags")) if isinstance(item, dict) else None
        if not isinstance(words, list) or not isinstance(tags, list):
            raise DataError(f"{path}:{number}: expected an object with 'words' and 'tags' lists")
        if len(words) != len(tags):
            raise DataError(f"{path}:{number}: {len(words)} words but {len(tags)} tags")
        if not all(isinstance(x, str) and x for x in words + tags):
            raise DataError(f"{path}:{number}: words and tags must be non-empty strings")
        sentences.append(TaggedSentence(words, tags, path, [number] * len(words), len(sentences)))
    if not sentences:
        raise DataError(f"{path}: no sentences found (empty file?)")
    return sentences


def sentences_from_pairs(
    pairs: Iterable[tuple[Sequence[str], Sequence[str]]], source: str = "<data>"
) -> list[TaggedSentence]:
    """(words, tags) pairs -> checked `TaggedSentence`s (counts must match; empty sentences are dropped)."""
    sentences = []
    for index, (words, tags) in enumerate(pairs):
        if len(words) != len(tags):
            raise DataError(f"{source}: sentence {index + 1} has {len(words)} words but {len(tags)} tags")
        if words:
            sentences.append(TaggedSentence(list(words), list(tags), source, None, index))
    if not sentences:
        raise DataError(f"{source}: no sentences")
    return sentences


def sentences_from_dataset(
    dataset, words_column: str = "tokens", tags_column: str = "ner_tags", source: str = "dataset"
):
    """Rows of a `datasets.Dataset` (or any iterable of dicts) -> `TaggedSentence`s.

    Integer tags are named through the dataset's `ClassLabel` feature (`features[tags_column].feature.names`).
    """
    names = None
    features = getattr(dataset, "features", None)
    if features is not None and tags_column in features:
        feature = getattr(features[tags_column], "feature", None)
        names = getattr(feature, "names", None)
    pairs = []
    for index, row in enumerate(dataset):
        if words_column not in row or tags_column not in row:
            raise DataError(f"{source}: row {index} lacks column {words_column!r} or {tags_column!r}")
        tags = list(row[tags_column])
        if tags and not isinstance(tags[0], str):
            if names is None:
                raise DataError(f"{source}: integer tags in {tags_column!r} but no ClassLabel names to decode them")
            tags = [names[int(t)] for t in tags]
        pairs.append((list(row[words_column]), tags))
    return sentences_from_pairs(pairs, source)


def load_hub_dataset(
    name: str, config_name: str | None, words_column: str, tags_column: str
) -> dict[str, list[TaggedSentence]]:
    """train / validation / test splits of a `datasets` dataset (a local path or a cached Hub name)."""
    try:
        import datasets
    except ImportError:
        raise SystemExit("--dataset needs the `datasets` package: pip install datasets") from None
    loaded = datasets.load_dataset(name, config_name)
    splits = {}
    for split, key in (("train", "train"), ("dev", "validation"), ("test", "test")):
        if key in loaded:
            splits[split] = sentences_from_dataset(loaded[key], words_column, tags_column, f"{name}[{key}]")
    if "train" not in splits:
        raise DataError(f"dataset {name!r} has no 'train' split (splits: {list(loaded)})")
    return splits


def label_list(sentences: Sequence[TaggedSentence]) -> list[str]:
    """Sorted tag set of the training data, `O` first."""
    tags = {tag for sentence in sentences for tag in sentence.tags}
    return sorted(tags, key=lambda tag: (tag != "O", tag.partition("-")[2], tag))


def encode_tags(
    sentences: Sequence[TaggedSentence], label2id: dict[str, int], unseen_label: str = "error", split: str = "data"
) -> list[dict]:
    """`TaggedSentence`s -> examples `{"words", "labels"}` for [`ElmoDataCollator`].

    `unseen_label="error"` (default) raises on a tag the model does not know; `"O"` maps it to `O` and warns.
    """
    if unseen_label not in ("error", "O"):
        raise ValueError(f"unseen_label must be 'error' or 'O', got {unseen_label!r}")
    unseen: Counter = Counter()
    examples = []
    for sentence in sentences:
        ids = []
        for position, tag in enumerate(sentence.tags):
            label = label2id.get(tag)
            if label is None:
                if unseen_label == "error":
                    known = ", ".join(label2id)
                    raise DataError(
                        f"{sentence.where(position)}: label {tag!r} does not occur in the training data "
                        f"(known labels: {known}); pass --unseen-label O to map unseen labels to O"
                    )
                if "O" not in label2id:
                    raise DataError(f"{sentence.where(position)}: label {tag!r} is unseen and there is no 'O' label")
                unseen[tag] += 1
                label = label2id["O"]
            ids.append(label)
        examples.append({"words": sentence.words, "labels": ids})
    if unseen:
        logger.warning("%s: mapped labels unseen in training to O: %s", split, dict(unseen))
    return examples


_MIN_EXAMPLES_FOR_LABEL_RULE = 20


def check_classification_labels(
    pairs: Sequence[tuple[str | Sequence[str], str]], source: str = "the training data"
) -> None:
    """Refuse training pairs that cannot be meant as classification data (`DataError`).

    * a single label: nothing to learn;
    * from 20 examples on, more distinct labels than half the examples (fewer than two examples per label on
      average) or than distinct texts. This is what a ``word<TAB>tag`` (CoNLL) file read as ``label<TAB>text`` looks like: every
      word becomes a class, and the few tags are the "texts".
    """
    labels: dict[str, None] = {}
    for _, label in pairs:
        labels.setdefault(label, None)
    if len(labels) == 1:
        raise DataError(
            f"{source}: only one label ({next(iter(labels))!r}) in {len(pairs)} examples; a classifier needs at "
            "least two"
        )
    texts = {text if isinstance(text, str) else tuple(text) for text, _ in pairs}
    # Only from 20 examples on: a handful of hand-written examples may well have a label each.
    if len(pairs) >= _MIN_EXAMPLES_FOR_LABEL_RULE and (len(labels) > len(pairs) / 2 or len(labels) > len(texts)):
        text, label = pairs[0]
        raise DataError(
            f"{source}: {len(labels)} distinct labels for {len(pairs)} examples ({len(texts)} distinct texts; the "
            f"first example gives label {label!r} to text {text!r}): this does not look like a label<TAB>text "
            "file, and a classifier needs at least two examples per label on average. A word<TAB>tag (CoNLL) file "
            "is for tagging: `hf-elmo finetune train`"
        )


def check_tagging_labels(sentences: Sequence[TaggedSentence], source: str = "the training data") -> None:
    """Refuse training sentences that cannot be meant as tagging data (`DataError`): from 20 words on, more
    distinct tags than half the words or than distinct words. This is what a ``label<TAB>text`` file read as
    ``word<TAB>tag`` looks like: every text becomes a tag of one of the few labels."""
    words = [word for sentence in sentences for word in sentence.words]
    tags = {tag for sentence in sentences for tag in sentence.tags}
    if len(words) >= _MIN_EXAMPLES_FOR_LABEL_RULE and (len(tags) > len(words) / 2 or len(tags) > len(set(words))):
        first = next(sentence for sentence in sentences if sentence.words)
        raise DataError(
            f"{source}: {len(tags)} distinct tags for {len(words)} words ({len(set(words))} distinct words; the "
            f"first word, {first.words[0]!r}, has the tag {first.tags[0]!r}): this does not look like a "
            "word<TAB>tag (CoNLL) file. A label<TAB>text file is for classification: "
            "`hf-elmo finetune train-classifier`"
        )


def read_classification_file(path: str) -> list[tuple[str, str]]:
    """`label<TAB>text` per line (blank lines are skipped); `DataError` naming file and line on bad input."""
    pairs = []
    for number, line in enumerate(read_text_lines(path), start=1):
        if not line.strip():
            continue
        label, sep, text = line.partition("\t")
        if not sep or not label.strip() or not text.strip():
            raise DataError(f"{path}:{number}: expected 'label<TAB>text', got {line!r}")
        pairs.append((text, label.strip()))
    if not pairs:
        raise DataError(f"{path}: no examples found (empty file?)")
    return pairs


__all__ = [
    "DataError",
    "TaggedSentence",
    "read_text_lines",
    "not_utf8_error",
    "read_conll",
    "read_jsonl",
    "sentences_from_pairs",
    "sentences_from_dataset",
    "load_hub_dataset",
    "label_list",
    "encode_tags",
]
