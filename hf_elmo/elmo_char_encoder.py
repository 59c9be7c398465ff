"""ELMo layer 0: character ids -> context-insensitive token vectors (character CNN -> highway -> projection)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .configuration_elmo import ElmoConfig
from .elmo_token_cache import ElmoTokenCache
from .matrix_products import Linear, linear


class ElmoHighwayLayer(Linear):
    """One highway layer's linear map, `size` -> `[transform; carry]` (2 * size)."""

    def __init__(self, size: int):
        super().__init__(size, 2 * size)


class ElmoHighway(nn.Module):
    """Highway layers (TensorFlow convention): ``x <- g * relu(x W_t + b_t) + (1 - g) * x``, ``g = sigmoid(x W_c + b_c)``.

    Each layer is one linear map producing ``[transform; carry]`` side by side.
    """

    def __init__(self, size: int, num_layers: int):
        super().__init__()
        self.layers = nn.ModuleList([ElmoHighwayLayer(size) for _ in range(num_layers)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            transform, carry = layer(x).chunk(2, dim=-1)
            gate = torch.sigmoid(carry)
            x = gate * F.relu(transform) + (1 - gate) * x
        return x


class ElmoCharacterEncoder(nn.Module):
    """Context-insensitive token representation (ELMo layer 0).

    char ids `(num_tokens, max_characters_per_token)` -> embedding -> one Conv1d per filter width ->
    max over positions -> activation -> highway -> linear projection -> `(num_tokens, projection_dim)`.
    An optional word embedding (ELMoForManyLangs models) is concatenated before the projection.

    With `config.token_cache_size > 0` the encoder holds a token-embedding cache (buffers saved with
    the model, see `ElmoModel.build_token_cache`): in eval mode, tokens whose character ids are in the
    cache take their stored vector and skip the CNN; all other tokens are computed as usual.
    """

    # Tokens go through the convolutions in chunks of `convolution_chunk_size` and through the highway and
    # projection in chunks of `chunk_size`: the window products hold positions x filters values per token, and
    # results that outgrow the cache run several times slower; larger highway chunks only raised peak memory
    # (benchmarks/RESULTS.md, "Kernel choices").
    convolution_chunk_size = 128
    chunk_size = 256

    def __init__(self, config: ElmoConfig, with_token_cache: bool = True):
        super().__init__()
        self.char_embedding = nn.Embedding(config.char_vocab_size, config.char_embedding_dim, padding_idx=0)
        self.convolutions = nn.ModuleList(
            [nn.Conv1d(config.char_embedding_dim, count, width) for width, count in config.char_cnn_filters]
        )
        self.activation = torch.tanh if config.char_cnn_activation == "tanh" else F.relu
        num_filters = config.num_char_filters
        self.highway = ElmoHighway(num_filters, config.num_highway_layers)
        self.word_embedding = (
            nn.Embedding(config.word_vocab_size, config.word_embedding_dim) if config.word_vocab_size else None
        )
        self.projection = Linear(num_filters + (config.word_embedding_dim if config.word_vocab_size else 0), config.projection_dim)
        self.token_cache: ElmoTokenCache | None = None
        cache_size = getattr(config, "token_cache_size", 0) if with_token_cache else 0
        if cache_size:
            self.token_cache = ElmoTokenCache(cache_size, config.max_characters_per_token, config.projection_dim)

    def forward(self, char_ids: torch.Tensor, word_ids: torch.Tensor | None = None) -> torch.Tensor:
        """`char_ids` (N, max_characters_per_token) -> (N, projection_dim).

        Each distinct token of the call is encoded once: every sentence's `<S>` and `</S>` and every
        repeated word share one row of the CNN and highway work (sorting the ids costs ~1 ms per 700).
        """
        if self.word_embedding is not None:
            if word_ids is None:
                raise ValueError("this model has a word embedding: pass `word_ids` along with `input_ids`")
            return self.encode(char_ids, word_ids)  # the same characters may carry different word ids
        distinct, inverse = torch.unique(char_ids, dim=0, return_inverse=True)
        if self._can_use_token_cache():
            return self.token_cache.lookup(distinct, self.encode)[inverse]
        return self.encode(distinct)[inverse]

    def _can_use_token_cache(self) -> bool:
        if self.token_cache is None or self.training or self.word_embedding is not None:
            return False
        if torch.is_grad_enabled() and any(p.requires_grad for p in self.parameters()):
            return False  # cached vectors carry no gradient to the CNN
        return self.token_cache.is_valid_for(self)

    def encode(self, char_ids: torch.Tensor, word_ids: torch.Tensor | None = None) -> torch.Tensor:
        """Run the character CNN, highway and projection (no cache)."""
        if char_ids.shape[0] > self.chunk_size:
            pieces = [
                self.encode(char_ids[i : i + self.chunk_size], None if word_ids is None else word_ids[i : i + self.chunk_size])
                for i in range(0, char_ids.shape[0], self.chunk_size)
            ]
            return torch.cat(pieces)
        char_ids = self._drop_constant_tail(char_ids)
        step = self.convolution_chunk_size
        features = torch.cat([self._character_features(char_ids[i : i + step]) for i in range(0, len(char_ids), step)])
        tokens = self.highway(self.activation(features))
        if self.word_embedding is not None:
            tokens = torch.cat([self.word_embedding(word_ids), tokens], dim=-1)
        return self.projection(tokens)

    def _character_features(self, char_ids: torch.Tensor) -> torch.Tensor:
        """(N, positions) char ids -> (N, num_filters): every filter's max over positions, before the activation."""
        chars = self.char_embedding(char_ids)  # (N, positions, d_char)
        return torch.cat([self._convolve_and_pool(chars, conv) for conv in self.convolutions], dim=-1)

    def _drop_constant_tail(self, char_ids: torch.Tensor) -> torch.Tensor:
        """Cut the trailing columns in which every row just repeats its own last character id.

        Past column L (after which each row only repeats its final id, the padding character), every
        convolution window of a row has the same content and so the same value. Keeping
        L + widest-filter columns keeps every distinct window, and one of those constant windows
        wherever the full width had one, so the max over positions is unchanged exactly. Words are
        short, so this typically halves the convolution work.
        """
        width = char_ids.shape[1]
        varying = (char_ids != char_ids[:, -1:]).any(dim=0).nonzero()
        last_varying = int(varying[-1]) + 1 if varying.numel() else 0
        keep = min(width, last_varying + max(conv.kernel_size[0] for conv in self.convolutions))
        return char_ids[:, :keep]

    @staticmethod
    def _convolve_and_pool(chars: torch.Tensor, conv: nn.Conv1d) -> torch.Tensor:
        """`Conv1d` + max over positions as one matrix product over all windows (faster than the
        convolution kernel for these thin 16-channel inputs); max-pooling before the activation is
        equivalent for the monotone relu/tanh and cheaper, and the bias is added after the max, which
        is exact because rounding is monotone."""
        width = conv.kernel_size[0]
        num_tokens, positions, channels = chars.shape
        windows = chars.unfold(1, width, 1).reshape(num_tokens, positions - width + 1, channels * width)
        weight = conv.weight.reshape(conv.out_channels, channels * width)  # (out, [channel][offset])
        return linear(windows, weight).amax(dim=1) + conv.bias


__all__ = ["ElmoCharacterEncoder", "ElmoHighway", "ElmoHighwayLayer"]
