"""A token-embedding cache: precomputed layer-0 vectors of a vocabulary, so known words skip the character CNN."""

from __future__ import annotations

import torch
from torch import nn
from transformers.utils import logging

from .module_caches import ModuleWithCaches, weights_key

logger = logging.get_logger(__name__)


class ElmoTokenCache(ModuleWithCaches):
    """Precomputed layer-0 vectors for a vocabulary of words, keyed by their character ids.

    Buffers (saved with the model): `char_ids` (V, max_characters_per_token) int32 and `vectors`
    (V, projection_dim). Lookups hash each row, find the candidate by binary search and then compare
    the full rows, so a hit is always the same word; misses are computed by the CNN. The cache is only
    used while the encoder's weights are the ones it was built or loaded with: after any in-place
    change to them (an optimiser step) it is ignored with a warning. On first use after loading, and after
    a cast to another dtype, a few entries are recomputed and compared.
    """

    _PRIME = 2147483629  # < 2**31, so id * coefficient sums stay far inside int64

    def __init__(self, size: int, width: int, dim: int):
        super().__init__()
        self.register_buffer("char_ids", torch.zeros(size, width, dtype=torch.int32))
        self.register_buffer("vectors", torch.zeros(size, dim))
        self._index = None
        self._signature = None

    # A copy (copy.deepcopy, pickle, torch.save) has its weights at other addresses: it re-runs the first-use
    # spot check instead of taking the new addresses for changed weights.
    _caches = ("_signature", "_index")

    def _hash(self, char_ids: torch.Tensor) -> torch.Tensor:
        generator = torch.Generator().manual_seed(1234)
        coefficients = torch.randint(1, self._PRIME, (char_ids.shape[1],), generator=generator).to(char_ids.device)
        return (char_ids.long() * coefficients).sum(dim=1) % self._PRIME

    @staticmethod
    def _weights_signature(encoder: nn.Module) -> tuple:
        return weights_key(encoder.parameters())

    def is_valid_for(self, encoder: nn.Module) -> bool:
        signature = self._weights_signature(encoder)
        if self._signature == signature:
            return True
        if self._signature == ("stale",):
            return False
        recast = self._signature is not None and {state.dtype for state in signature} != {
            state.dtype for state in self._signature
        }
        if self._signature is not None and not recast:
            # Same dtype, other weight tensors or an in-place update (an optimiser step): the cached vectors
            # are stale, however close they may still be.
            logger.warning(
                "the character encoder's weights changed after the token cache was built; ignoring the cache "
                "(rebuild it with build_token_cache, or drop it with drop_token_cache)"
            )
            self._signature = ("stale",)
            return False
        # First use after building or loading, or the model was cast to another dtype: spot-check a few
        # entries against the CNN.
        sample = torch.linspace(0, self.char_ids.shape[0] - 1, min(8, self.char_ids.shape[0])).long()
        with torch.no_grad():
            fresh = encoder.encode(self.char_ids[sample].long())
        stored = self.vectors[sample].to(fresh.dtype)
        scale = max(float(stored.abs().max()), 1.0)
        # A float32 cache stays valid when the model is cast to bf16/fp16: its vectors are then rounded float32
        # results, a few units of rounding away from the low-precision CNN's. Other weights' vectors differ by
        # about their own size.
        tolerance = 1e-4 if torch.finfo(fresh.dtype).eps < 1e-6 else 8 * torch.finfo(fresh.dtype).eps
        if not float((fresh - stored).abs().max()) <= tolerance * scale:
            logger.warning(
                "the token cache was built with other character-encoder weights; ignoring it (rebuild it "
                "with build_token_cache, or drop it with drop_token_cache)"
            )
            self._signature = ("stale",)
            return False
        self._signature = signature
        return True

    def fill(self, char_ids: torch.Tensor, vectors: torch.Tensor, encoder: nn.Module) -> None:
        self.char_ids = char_ids.to(torch.int32)
        self.vectors = vectors
        self._index = None
        self._signature = self._weights_signature(encoder)

    @torch.no_grad()
    def lookup(self, char_ids: torch.Tensor, encode) -> torch.Tensor:
        if self._index is None or self._index[0].device != char_ids.device:
            keys, order = torch.sort(self._hash(self.char_ids))
            self._index = (keys, order)
        keys, order = self._index
        query = self._hash(char_ids)
        slot = torch.searchsorted(keys, query).clamp_(max=keys.numel() - 1)
        candidate = order[slot]
        hit = (keys[slot] == query) & (self.char_ids[candidate] == char_ids).all(dim=1)
        result = self.vectors.new_empty(char_ids.shape[0], self.vectors.shape[1])
        result[hit] = self.vectors[candidate[hit]]
        miss = ~hit
        if bool(miss.any()):
            result[miss] = encode(char_ids[miss]).to(result.dtype)
        return result
