"""The tests' small models: the tiny configuration most tests build, and small random ElmoModels with clips that
are really active, shared by the tests of the plain model and of its kernels (tests/models/test_kernels_*.py,
test_modeling_elmo_implementations.py)."""

from __future__ import annotations

import torch

from hf_elmo.models.elmo.configuration_elmo import ElmoConfig
from hf_elmo.models.elmo.modeling_elmo import ElmoModel
from hf_elmo.models.elmo.tokenization_elmo import ElmoTokenizer
from hf_elmo.utils.transformers_versions import TRANSFORMERS_MAJOR

CELL_CLIP, PROJ_CLIP = 0.5, 0.3

#: What transformers' size-mismatch RuntimeError of `from_pretrained` says: 5.x names the option that ignores it,
#: 4.x gives torch's `load_state_dict` message.
SIZE_MISMATCH = "ignore_mismatched_sizes" if TRANSFORMERS_MAJOR >= 5 else "size mismatch for"


def tiny_config_kwargs(**overrides) -> dict:
    """The smallest model the tests build, milliseconds a call (the byte scheme still needs 262 character ids)."""
    return {**dict(char_embedding_dim=4, char_cnn_filters=[[1, 4], [2, 8]], num_highway_layers=1, projection_dim=8,
                   lstm_cell_dim=16, num_lstm_layers=2), **overrides}


def tiny_config(**overrides) -> ElmoConfig:
    return ElmoConfig(**tiny_config_kwargs(**overrides))


def small_model(skip: bool = True, clip: bool = True, layers: int = 2, dtype=torch.float32, seed: int = 0,
                implementation: str = "auto") -> ElmoModel:
    """A small random ElmoModel in eval mode running on `implementation` ("reference": bilm_elmo.py's PyTorch)."""
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
    model.set_lstm_implementation(implementation)
    return model


def max_diff(a, b):
    return max(float((x - y).abs().max()) for x, y in zip(a, b))


def encode(sentences):
    return ElmoTokenizer(segmenter="whitespace")(sentences, is_split_into_words=True, padding=True, return_tensors="pt")


def cached_model(words):
    """`small_model` with a token cache of `words` (and `<S>`, `</S>`)."""
    from hf_elmo.kernels import build_token_cache

    model = small_model()
    tokenizer = ElmoTokenizer()
    build_token_cache(model, torch.tensor([tokenizer.word_to_char_ids(w) for w in words]))
    return model


def count_cnn_tokens(monkeypatch):
    """Count the tokens the kernels' character CNN encodes from now on (layer 0 on the kernels goes through
    `hf_elmo.kernels.character_encoder.encode`; the plain path does not count)."""
    import hf_elmo.kernels.character_encoder as character_encoder

    counter = {"tokens": 0}
    original = character_encoder.encode

    def counting(encoder, char_ids, word_ids=None):
        counter["tokens"] += char_ids.shape[0]
        return original(encoder, char_ids, word_ids)

    monkeypatch.setattr(character_encoder, "encode", counting)
    return counter
