"""ELMo layer 0 on hf-elmo's kernels: `bilm_elmo.ElmoCharacterEncoder`'s numbers, computed faster.

- Each distinct token of a call is encoded once: every sentence's `<S>` and `</S>` and every repeated word share
  one row of the CNN and highway work.
- The trailing columns in which every row only repeats its padding id are cut before the convolutions (exact:
  those windows all have the same value).
- Each convolution + max over positions is one matrix product over all windows, on oneDNN's kernels for CPU
  float32 (matrix_products.py); the bias is added after the max (exact, rounding is monotone).
- Tokens go through the convolutions in chunks of `CONVOLUTION_CHUNK_SIZE` and through the highway and
  projection in chunks of `CHUNK_SIZE`: results that outgrow the cache ran several times slower
  (benchmarks/README.md).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .matrix_products import linear

CONVOLUTION_CHUNK_SIZE = 128
CHUNK_SIZE = 256


def encode_tokens(encoder, char_ids: torch.Tensor, word_ids: torch.Tensor | None = None, token_cache=None) -> torch.Tensor:
    """`char_ids` (N, max_characters_per_token) -> (N, projection_dim), as `encoder(char_ids, word_ids)`."""
    if encoder.word_embedding is not None:
        return encode(encoder, char_ids, word_ids)  # the same characters may carry different word ids
    distinct, inverse = torch.unique(char_ids, dim=0, return_inverse=True)
    if token_cache is not None:
        return token_cache.lookup(distinct, lambda ids: encode(encoder, ids))[inverse]
    return encode(encoder, distinct)[inverse]


def encode(encoder, char_ids: torch.Tensor, word_ids: torch.Tensor | None = None) -> torch.Tensor:
    """The character CNN, highway and projection of every row (no cache, no deduplication)."""
    if char_ids.shape[0] > CHUNK_SIZE:
        pieces = [
            encode(encoder, char_ids[i : i + CHUNK_SIZE], None if word_ids is None else word_ids[i : i + CHUNK_SIZE])
            for i in range(0, char_ids.shape[0], CHUNK_SIZE)
        ]
        return torch.cat(pieces)
    char_ids = _drop_constant_tail(char_ids, max(conv.kernel_size[0] for conv in encoder.convolutions))
    features = torch.cat([
        _character_features(encoder, char_ids[i : i + CONVOLUTION_CHUNK_SIZE])
        for i in range(0, len(char_ids), CONVOLUTION_CHUNK_SIZE)
    ])
    tokens = torch.tanh(features) if encoder.config.char_cnn_activation == "tanh" else F.relu(features)
    for layer in encoder.highway.layers:
        transform, carry = linear(tokens, layer.weight, layer.bias).chunk(2, dim=-1)
        gate = torch.sigmoid(carry)
        tokens = gate * F.relu(transform) + (1 - gate) * tokens
    if encoder.word_embedding is not None:
        tokens = torch.cat([encoder.word_embedding(word_ids), tokens], dim=-1)
    return linear(tokens, encoder.projection.weight, encoder.projection.bias)


def _character_features(encoder, char_ids: torch.Tensor) -> torch.Tensor:
    """(N, positions) char ids -> (N, num_filters): every filter's max over positions, before the activation."""
    chars = encoder.char_embedding(char_ids)  # (N, positions, d_char)
    pooled = []
    for conv in encoder.convolutions:
        width = conv.kernel_size[0]
        num_tokens, positions, channels = chars.shape
        windows = chars.unfold(1, width, 1).reshape(num_tokens, positions - width + 1, channels * width)
        weight = conv.weight.reshape(conv.out_channels, channels * width)  # (out, [channel][offset])
        pooled.append(linear(windows, weight).amax(dim=1) + conv.bias)
    return torch.cat(pooled, dim=-1)


def _drop_constant_tail(char_ids: torch.Tensor, widest_filter: int) -> torch.Tensor:
    """Cut the trailing columns in which every row just repeats its own last character id: past the last column
    that varies, every window of a row has the same content, so keeping that column plus the widest filter keeps
    every distinct window and the max over positions exactly."""
    width = char_ids.shape[1]
    varying = (char_ids != char_ids[:, -1:]).any(dim=0).nonzero()
    last_varying = int(varying[-1]) + 1 if varying.numel() else 0
    return char_ids[:, : min(width, last_varying + widest_filter)]
