"""Modules that keep caches (inference copies of weights, scratch buffers) which copies must not carry, and the key
that says when such a copy of weights is out of date."""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook


def _count_optimizer_step(optimizer, args, kwargs) -> None:
    # Fused optimisers (transformers' default AdamW among them) write the new values without bumping the tensors'
    # version counters: an (address, version) key alone would go on serving copies of the old weights.
    for group in optimizer.param_groups:
        for parameter in group["params"]:
            parameter._elmo_optimizer_steps = getattr(parameter, "_elmo_optimizer_steps", 0) + 1


register_optimizer_step_post_hook(_count_optimizer_step)


class TensorState(NamedTuple):
    """What `weights_key` records of one tensor."""

    address: int
    version: int
    optimizer_steps: int
    dtype: torch.dtype
    device: torch.device


def weights_key(tensors) -> tuple[TensorState, ...]:
    """Identifies the values of `tensors` for copies made of them: changes when one is replaced, updated in place
    (its version counter) or stepped by a torch optimiser (fused ones included), or changes dtype or device."""
    return tuple(TensorState(t.data_ptr(), t._version, getattr(t, "_elmo_optimizer_steps", 0), t.dtype, t.device)
                 for t in tensors)


class ModuleWithCaches(nn.Module):
    """A module holding caches that are rebuilt on demand: copies (copy.deepcopy, pickle, torch.save) start
    without them. `_caches` names the attributes; each subclass says why its own are caches."""

    _caches: tuple[str, ...] = ()

    def __getstate__(self):
        state = super().__getstate__().copy()
        for name in self._caches:
            state[name] = None
        return state


__all__ = ["ModuleWithCaches", "TensorState", "weights_key"]
