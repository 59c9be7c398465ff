"""A token-embedding cache: precomputed layer-0 vectors of a vocabulary, so known words skip the character CNN."""

from __future__ import annotations

import torch

from .weights_key import weights_key


class TokenCache:
    """Layer-0 vectors of a vocabulary of words, keyed by their character ids (inference only, never saved).

    Lookups hash each row, find the candidate by binary search and then compare the full rows, so a hit is always
    the same word; misses are computed by the CNN. The cache answers only while the character encoder's weights
    are the ones it was built from (`weights_key`); `ElmoKernels` drops it when the model goes back to training.
    """

    _PRIME = 2147483629  # < 2**31, so id * coefficient sums stay far inside int64

    def __init__(self, encoder, char_ids: torch.Tensor, vectors: torch.Tensor):
        self.char_ids = char_ids.to(torch.int32)
        self.vectors = vectors
        self.encoder = encoder
        self.key = weights_key(encoder.parameters())
        keys, order = torch.sort(self._hash(self.char_ids))
        self._index = (keys, order)

    def __len__(self) -> int:
        return self.char_ids.shape[0]

    def is_valid_for(self, encoder) -> bool:
        return self.key == weights_key(encoder.parameters())

    def _hash(self, char_ids: torch.Tensor) -> torch.Tensor:
        generator = torch.Generator().manual_seed(1234)
        coefficients = torch.randint(1, self._PRIME, (char_ids.shape[1],), generator=generator).to(char_ids.device)
        return (char_ids.long() * coefficients).sum(dim=1) % self._PRIME

    @torch.no_grad()
    def lookup(self, char_ids: torch.Tensor, encode) -> torch.Tensor:
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
