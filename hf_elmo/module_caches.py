"""Modules that keep caches (inference copies of weights, scratch buffers) which copies must not carry."""

from __future__ import annotations

from torch import nn


class ModuleWithCaches(nn.Module):
    """A module holding caches that are rebuilt on demand: copies (copy.deepcopy, pickle, torch.save) start
    without them. `_caches` names the attributes; each subclass says why its own are caches."""

    _caches: tuple[str, ...] = ()

    def __getstate__(self):
        state = super().__getstate__().copy()
        for name in self._caches:
            state[name] = None
        return state
