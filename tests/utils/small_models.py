"""The tests' small models: the tiny configuration most tests build, and small random ElmoModels with clips that
are really active, shared by the biLSTM, character-encoder, token-cache and int8 tests
(tests/models/test_elmo_lstm.py, test_elmo_char_encoder.py, test_elmo_token_cache.py, test_quantization.py)."""

from __future__ import annotations

import torch

from hf_elmo.configuration_elmo import ElmoConfig
from hf_elmo.modeling_elmo import ElmoModel
from hf_elmo.tokenization_elmo import ElmoTokenizer

CELL_CLIP, PROJ_CLIP = 0.5, 0.3


def tiny_config_kwargs(**overrides) -> dict:
    """The smallest model the tests build, milliseconds a call (the byte scheme still needs 262 character ids)."""
    return {**dict(char_embedding_dim=4, char_cnn_filters=[[1, 4], [2, 8]], num_highway_layers=1, projection_dim=8,
                   lstm_cell_dim=16, num_lstm_layers=2), **overrides}


def tiny_config(**overrides) -> ElmoConfig:
    return ElmoConfig(**tiny_config_kwargs(**overrides))


def small_model(skip: bool = True, clip: bool = True, layers: int = 2, dtype=torch.float32, seed: int = 0) -> ElmoModel:
    torch.manual_seed(seed)
    config = ElmoConfig(
        char_embedding_dim=4, char_cnn_filters=[[1, 4], [2, 8], [3, 8]], num_highway_layers=1, projection_dim=8,
        lstm_cell_dim=16, num_lstm_layers=layers, use_skip_connections=skip,
        cell_clip=CELL_CLIP if clip else None, proj_clip=PROJ_CLIP if clip else None,
    )
    model = ElmoModel(config).to(dtype).eval()
    with torch.no_grad():  # with clips: large enough weights that both clips are often active
        for layer in model.bilstm.layers:
            for parameter in layer.parameters():
                parameter.normal_(0.0, 0.6 if clip else 0.25)
    return model


def max_diff(a, b):
    return max(float((x - y).abs().max()) for x, y in zip(a, b))


def encode(sentences):
    return ElmoTokenizer(segmenter="whitespace")(sentences, is_split_into_words=True, padding=True, return_tensors="pt")


def cached_model(words):
    model = small_model()
    tokenizer = ElmoTokenizer()
    model.build_token_cache(torch.tensor([tokenizer.word_to_char_ids(w) for w in words]))
    return model


def count_cnn_tokens(model, monkeypatch):
    """Count the tokens this model's character CNN encodes (patched on the instance only)."""
    counter = {"tokens": 0}
    original = model.char_encoder.encode

    def counting(char_ids, word_ids=None):
        counter["tokens"] += char_ids.shape[0]
        return original(char_ids, word_ids)

    monkeypatch.setattr(model.char_encoder, "encode", counting)
    return counter
