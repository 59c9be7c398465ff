"""When an inference copy of weights is out of date."""

from __future__ import annotations

from typing import NamedTuple

import torch


class TensorState(NamedTuple):
    """What `weights_key` records of one tensor."""

    address: int
    version: int
    dtype: torch.dtype
    device: torch.device


def weights_key(tensors) -> tuple[TensorState, ...]:
    """Changes when one of `tensors` is replaced, updated in place through autograd-visible operations (its version
    counter), or changes dtype or device. Fused optimisers write without bumping version counters; they run in
    training mode, and `ElmoKernels` drops every copy when the model goes back to training (`clear`)."""
    return tuple(TensorState(t.data_ptr(), t._version, t.dtype, t.device) for t in tensors)
