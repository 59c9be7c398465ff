"""The small random ElmoModel of the model tests (tests/models/test_modeling_elmo.py, test_elmo_scalar_mix.py):
every path carries signal (non-zero LSTM biases, mixes that are not the plain average)."""

import torch

from hf_elmo import ElmoConfig, ElmoModel, ElmoTokenizer
from small_models import tiny_config_kwargs

SENTENCES = [
    "the quick brown fox jumps over the lazy dog".split(),
    "hello world".split(),
    "a b c d e".split(),
    ["x"],
]


def make_model(seed=0, **overrides):
    torch.manual_seed(seed)
    model = ElmoModel(ElmoConfig(**tiny_config_kwargs(**overrides))).eval()
    # Non-zero LSTM biases and mix weights so that every path carries signal.
    with torch.no_grad():
        for layer in model.bilstm.layers:
            layer.bias.normal_(std=0.5)
        for mix in model.scalar_mixes:
            mix.scalar_parameters.normal_()
            mix.gamma.fill_(0.7)
    return model


def encode(sentences):
    return ElmoTokenizer()(sentences, is_split_into_words=True, padding=True, return_tensors="pt")


def run(model, sentences, **kwargs):
    with torch.no_grad():
        return model(**encode(sentences), **kwargs)
