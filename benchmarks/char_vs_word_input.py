"""MSRA NER (character tags): the frozen shipped biLM fed one character a word vs jieba words expanded back
to characters (+ B/M/E/S position), same linear head and budget. Prints seqeval F1 for each input.

    PYTHONPATH=. OMP_NUM_THREADS=1 python benchmarks/char_vs_word_input.py --train 3000 --test 600
"""

from __future__ import annotations

import argparse
import random
import time

import torch
from seqeval.metrics import f1_score

import hf_elmo
from hf_elmo.finetuning.character_words import WORD_POSITIONS, words_and_positions
from hf_elmo.integrations.embedder import Embedder
from hf_elmo.pretraining.chinese_corpora import bmes_to_bio, msra_official_split


def features(embedder, chunks, word_input):
    rows = []
    inputs, mappings = [], []
    for chars, _ in chunks:
        if word_input:
            words, word_index, positions = words_and_positions(chars)
        else:
            words, word_index, positions = list(chars), list(range(len(chars))), ["S"] * len(chars)
        inputs.append(words)
        mappings.append((word_index, positions))
    for layers, (word_index, positions) in zip(embedder.embed(inputs, layers="all", return_tensors="pt"), mappings):
        per_token = layers.permute(1, 0, 2).reshape(layers.size(1), -1)[word_index]
        position = torch.nn.functional.one_hot(
            torch.tensor([WORD_POSITIONS.index(p) for p in positions]), len(WORD_POSITIONS)
        ).float()
        rows.append(torch.cat([per_token, position], dim=-1))
    return rows


def run(embedder, train, test, word_input, labels, epochs, seed):
    started = time.time()
    train_x, test_x = features(embedder, train, word_input), features(embedder, test, word_input)
    label2id = {label: i for i, label in enumerate(labels)}
    x = torch.cat(train_x)
    y = torch.tensor([label2id[t] for _, tags in train for t in bmes_to_bio(tags)])
    torch.manual_seed(seed)
    head = torch.nn.Linear(x.size(1), len(labels))
    optimizer = torch.optim.Adam(head.parameters(), lr=1e-3)
    for _ in range(epochs):
        order = torch.randperm(len(x))
        for begin in range(0, len(x), 256):
            batch = order[begin : begin + 256]
            loss = torch.nn.functional.cross_entropy(head(x[batch]), y[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    with torch.no_grad():
        predicted = [[labels[i] for i in head(row).argmax(-1).tolist()] for row in test_x]
    gold = [bmes_to_bio(tags) for _, tags in test]
    return f1_score(gold, predicted), time.time() - started


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--train", type=int, default=3000)
    parser.add_argument("--test", type=int, default=600)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    split = msra_official_split()
    generator = random.Random(args.seed)
    train = generator.sample(split["train"], args.train)
    test = generator.sample(split["test"], args.test)
    labels = sorted({t for _, tags in train for t in bmes_to_bio(tags)} | {t for _, tags in test for t in bmes_to_bio(tags)})
    embedder = Embedder(hf_elmo.DEFAULT_MODEL, device="cpu", progress=False)
    for name, word_input in (("characters", False), ("jieba words + B/M/E/S", True)):
        f1, seconds = run(embedder, train, test, word_input, labels, args.epochs, args.seed)
        print(f"{name}: test F1 {100 * f1:.2f} ({seconds:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
