"""client.json: what the client shipped with an ONNX export (client.py, written as elmo_client.py) needs besides
the graph: the model's kind, labels and CRF scores, and the tokenizer's rules as data, so that it splits text exactly
as `ElmoTokenizer` does with whatever Python runs it.

The tables are read off the implementations themselves: the code points where the `tokenizers` library's
BertPreTokenizer splits (probed once per process over all of Unicode), and, for a lower-casing tokenizer, this
Python's `str.lower` (a table, and the two properties its Greek final-sigma rule reads, probed through `lower`).
"""

from __future__ import annotations

import functools
import sys

from ...models.elmo.text_elmo import _CJK_RUN, _CONTROL
from .client import FORMAT_VERSION

_PROBE_BLOCK = 0x10000


def _ranges(codes) -> list[list[int]]:
    ranges: list[list[int]] = []
    for code in sorted(codes):
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1][1] = code
        else:
            ranges.append([code, code])
    return ranges


def _code_points(first: int, end: int) -> list[int]:
    return [code for code in range(first, end) if not 0xD800 <= code <= 0xDFFF]


@functools.lru_cache(maxsize=1)
def bert_split_tables() -> tuple[list[list[int]], list[list[int]]]:
    """(whitespace, punctuation) code point ranges of `tokenizers`' BertPreTokenizer: it removes the first and
    isolates the second. Probed with "x" before every code point: a code point outside every piece is whitespace,
    a piece of its own is punctuation."""
    from tokenizers.pre_tokenizers import BertPreTokenizer

    pre_tokenizer = BertPreTokenizer()
    whitespace, punctuation = [], []
    for first in range(0, 0x110000, _PROBE_BLOCK):
        codes = _code_points(first, first + _PROBE_BLOCK)
        probe = "".join("x" + chr(code) for code in codes)
        covered_until = 0
        for _, (start, end) in pre_tokenizer.pre_tokenize_str(probe):
            whitespace += [codes[position // 2] for position in range(covered_until, start) if position % 2]
            if end - start == 1 and start % 2:
                punctuation.append(codes[start // 2])
            covered_until = end
        whitespace += [codes[position // 2] for position in range(covered_until, len(probe)) if position % 2]
    return _ranges(whitespace), _ranges(punctuation)


@functools.lru_cache(maxsize=1)
def python_whitespace() -> list[list[int]]:
    """The code points `str.split()` splits at, in this Python."""
    return _ranges(code for code in range(0x110000) if chr(code).isspace())


@functools.lru_cache(maxsize=1)
def lowercase_tables() -> dict:
    """This Python's `str.lower`: a table for every code point but U+03A3, and the case-ignorable and cased code
    points its final-sigma rule reads (found through `lower` itself: the rule is the only place they show)."""
    table, ignorable, cased = {}, [], []
    for code in _code_points(0, 0x110000):
        character = chr(code)
        lowered = character.lower()
        if lowered != character and code != 0x3A3:
            table[str(code)] = lowered
        cased_alone = (character + "\u03a3").lower()[-1] == "\u03c2"  # cased and not case-ignorable
        after_alpha = ("\u0391" + character + "\u03a3").lower()[-1] == "\u03c2"  # case-ignorable or cased
        if cased_alone:
            cased.append(code)
        elif after_alpha:
            ignorable.append(code)
    # A code point both cased and case-ignorable is skipped as ignorable: it only ever counts as ignorable.
    return {"lowercase": table, "case_ignorable": _ranges(ignorable), "cased": _ranges(cased)}


def tokenizer_options(tokenizer) -> dict:
    """The client's tokenizer section for an `ElmoTokenizer`."""
    whitespace, punctuation = bert_split_tables()
    options = {
        "max_characters_per_token": tokenizer.max_characters_per_token,
        "segmenter": tokenizer.segmenter,
        "do_lower_case": bool(tokenizer.do_lower_case),
        "char_scheme": tokenizer.char_scheme,
        "control": _CONTROL.pattern,
        "cjk_run": _CJK_RUN.pattern,
        "split_whitespace": whitespace,
        "split_punctuation": punctuation,
        "python_whitespace": python_whitespace(),
        "word_vocab": tokenizer.word_vocab is not None,
        "user_dict": None,
        "python": sys.version.split()[0],
    }
    segmenter = getattr(tokenizer, "_segmenter", None)
    if getattr(segmenter, "user_dict_text", None) is not None:
        options["user_dict"] = "jieba_user_dict.txt"
    if tokenizer.segmenter == "jieba":
        import jieba

        options["jieba"] = getattr(jieba, "__version__", None)
    if tokenizer.do_lower_case:
        options.update(lowercase_tables())
    return options


def client_config(kind: str, config, tokenizer, head: dict, source: str = "") -> dict:
    labels = None
    if kind != "encoder":
        labels = [str(config.id2label[index]) for index in range(config.num_labels)]
    return {
        "format_version": FORMAT_VERSION,
        "kind": kind,
        "source": source,
        "labels": labels,
        **head,
        "num_layers": config.num_lstm_layers + 1,
        "dim": 2 * config.projection_dim,
        "mixes": config.num_output_representations if kind == "encoder" else 0,
        "char_vocab_size": config.char_vocab_size,
        "word_vocab_size": config.word_vocab_size or 0,
        "tokenizer": tokenizer_options(tokenizer),
    }


__all__ = ["bert_split_tables", "client_config", "lowercase_tables", "python_whitespace", "tokenizer_options"]
