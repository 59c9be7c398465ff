"""Tiny ELMo models and toy tagging data shared by the head / fine-tuning tests."""

from __future__ import annotations

import random

import torch

from hf_elmo import ElmoModel, ElmoTokenizer
from small_models import tiny_config

LABELS = ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
NOT_UTF8 = b"\xff\xfe\x00abc\n"  # bytes that are not UTF-8, for the readers' error messages

# Random biLM features of the tiny configuration barely tell words apart; this still-small size learns a toy
# task in seconds.
LEARNABLE = dict(char_embedding_dim=8, char_cnn_filters=[[1, 32], [2, 32]], projection_dim=16, lstm_cell_dim=32)


def save_tiny_base(folder, seed: int = 0, **overrides) -> str:
    """A random small ElmoModel + tokenizer folder (stands in for a pretrained biLM)."""
    torch.manual_seed(seed)
    ElmoModel(tiny_config(**overrides)).save_pretrained(folder)
    ElmoTokenizer().save_pretrained(folder)
    return str(folder)


PEOPLE = [["Alice"], ["Bob"], ["Carol", "Smith"], ["Dan", "Brown"]]
PLACES = [["Paris"], ["Rome"], ["New", "York"], ["Oslo"]]
FILLER = ["the", "a", "met", "in", "went", "to", "and", "saw", "."]
# Labelled per character, as MSRA is: every entity and filler word is split into its characters.
CHINESE_PEOPLE, CHINESE_PLACES = [list("张三"), list("李四"), list("王小明")], [list("北京"), list("上海"), list("广州")]
CHINESE_FILLER = [list(word) for word in ("我们", "在", "去了", "和", "看见", "今天", "。")]


def toy_sentences(count: int, seed: int, people=PEOPLE, places=PLACES, filler=FILLER, words_per_sentence=(2, 7)):
    """Sentences with PER / LOC entities (BIO) among filler words (a filler entry that is a list: its tokens)."""
    rng = random.Random(seed)
    sentences = []
    for _ in range(count):
        words, tags = [], []
        for _ in range(rng.randint(*words_per_sentence)):
            r = rng.random()
            if r < 0.2 or r < 0.4:
                entity, kind = (rng.choice(people), "PER") if r < 0.2 else (rng.choice(places), "LOC")
                words += entity
                tags += [f"B-{kind}"] + [f"I-{kind}"] * (len(entity) - 1)
            else:
                tokens = rng.choice(filler)
                tokens = tokens if isinstance(tokens, list) else [tokens]
                words += tokens
                tags += ["O"] * len(tokens)
        sentences.append((words, tags))
    return sentences


def write_conll(path, sentences, separator="\t") -> str:
    with open(path, "w", encoding="utf-8") as handle:
        for words, tags in sentences:
            handle.write("".join(f"{w}{separator}{t}\n" for w, t in zip(words, tags)) + "\n")
    return str(path)
