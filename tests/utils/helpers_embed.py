"""Tiny random ELMo models and reference outputs for the embedding API and CLI tests."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import torch

from hf_elmo import ElmoModel, ElmoTokenizer
from hf_elmo.convert.bilm_hdf5 import load_model_from_bilm
import paths
from small_models import tiny_config

FIXTURES = paths.FIXTURES / "allennlp_elmo"


SENTENCES = [
    "小米 粥 很 好喝",
    "小米 发布 了 新 手机",
    "我",
    "今天 北京 的 天气 很 好 ， 我们 去 公园 散步 吧",
    "ELMo 向量 depends on context !",
    "小米 手机 和 小米 粥",
    "a b",
]


def save_tiny_model(folder: Path, seed: int = 0) -> Path:
    """A random tiny `ElmoModel` + a `chars` tokenizer in `folder`; its learned mix is not uniform."""
    torch.manual_seed(seed)
    model = ElmoModel(tiny_config()).eval()
    with torch.no_grad():
        model.scalar_mixes[0].scalar_parameters.copy_(torch.tensor([0.5, -1.0, 2.0]))
        model.scalar_mixes[0].gamma.fill_(1.5)
    model.save_pretrained(folder)
    ElmoTokenizer(segmenter="chars").save_pretrained(folder)
    return folder


def model_layers(model: ElmoModel, words: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """`ElmoModel` run on one sentence alone: all layers (L + 1, n, 2P) and the learned mix (n, 2P)."""
    tokenizer = ElmoTokenizer(segmenter="whitespace")
    encoding = tokenizer([words], is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        output = model(**encoding)
    layers = torch.stack(output.hidden_states, dim=1)[0].numpy()
    return layers, output.elmo_representations[0][0].numpy()


def allennlp_model() -> ElmoModel:
    return load_model_from_bilm(FIXTURES / "options.json", FIXTURES / "lm_weights.hdf5")


def allennlp_top_layers() -> tuple[list[list[str]], list[np.ndarray]]:
    """The three first-batch sentences of AllenNLP's fixture and their top layers as AllenNLP computed them.

    Only batch 0 started from a zero LSTM state, so only it can be reproduced by a stateless model.
    """
    sentences = json.loads((FIXTURES / "sentences.json").read_text())
    words = [sentences[k][0].split() for k in range(3)]
    tops = []
    for k in range(3):
        with h5py.File(FIXTURES / f"lm_embeddings_{k}.hdf5", "r") as handle:
            forward, backward = handle["0"][...]
        tops.append(np.concatenate([forward, backward], axis=-1)[: len(words[k])])
    return words, tops
