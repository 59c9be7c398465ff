"""Random mixed-Unicode strings for comparing the exported client's tokenizer with `ElmoTokenizer`."""

from __future__ import annotations

import random
import unicodedata

from hf_elmo.convert.onnx.client_config import bert_split_tables

_POOLS = {
    "ascii": [chr(c) for c in range(32, 127)],
    "space": list(" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2007\u200b\u2028\u2029\u202f\u205f"
                  "\u3000\ufeff"),
    "control": [chr(c) for c in [*range(0, 9), *range(14, 32), *range(0x7F, 0xA0)]],
    "cjk": list("我们喝小米粥北京天安门发布了新手机价格很便宜张三在工作中文按字切分〇々〆") + ["\U00020000", "\U0002a6d6",
                                                                               "\u3400", "\u2e80", "\uf900"],
    "punctuation": list("，。！？、；：“”‘’（）《》【】…—·") + ["\u061d", "\u09fd", "\u2e43", "\u2e4f", "\u00a7", "\u00b6"],
    "emoji": ["😀", "👍🏽", "👨‍👩‍👧", "🇨🇳", "\u2764\ufe0f", "\U0001f9ea"],
    "latin": list("éèçñüÅßİıΣσςΑΩάΐﬁǅẞ") + ["e\u0301", "\u0345", "\u00b7"],
    "surrogate": ["\ud800", "\udc00", "\ud83d\ude00", "\udbff", "\ud83d", "\ude00"],
    "digits": list("0123456789٣۴०१๑１２"),
}


def differing_punctuation() -> list[str]:
    """Code points where Python's unicodedata and the tokenizers pre-tokenizer disagree about punctuation."""
    _, ranges = bert_split_tables()
    tokenizers_punctuation = {code for first, last in ranges for code in range(first, last + 1)}
    differing = []
    for code in range(0x110000):
        if 0xD800 <= code <= 0xDFFF:
            continue
        python = unicodedata.category(chr(code)).startswith("P") or chr(code) in "$+<=>^`|~"
        if python != (code in tokenizers_punctuation):
            differing.append(chr(code))
    return differing


def random_strings(count: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    pools = dict(_POOLS, differing=differing_punctuation() or ["\u061d"])
    names = list(pools)
    strings = ["", " ", "ab\ud800cd", "\ud83d\ude00", "ΟΔΟΣ ΣΑΣ Σ", "İstanbul", "a\x00b\x1fc\x85d"]
    while len(strings) < count:
        pieces = []
        for _ in range(rng.randint(0, 14)):
            name = rng.choice(names)
            if rng.random() < 0.05:
                code = rng.randrange(0x110000)
                pieces.append(chr(code))
            else:
                pieces.append(rng.choice(pools[name]) * rng.choice((1, 1, 1, 2, 3)))
        strings.append("".join(pieces))
    return strings[:count]
