"""Mixing the biLM's L + 1 layers into one vector per word: the paper's equation 1."""

from __future__ import annotations

import torch
from torch import nn


class ElmoScalarMix(nn.Module):
    """``gamma * sum_j softmax(w)_j * layer_j`` with w initialised to 0 and gamma to 1 (the paper's eq. 1).

    With `layer_norm`, each layer is first normalised by one mean and variance over all of its
    unmasked elements in the batch (AllenNLP's definition, not a per-token LayerNorm).
    """

    def __init__(self, num_layers: int, layer_norm: bool = False, trainable: bool = True):
        super().__init__()
        self.layer_norm = layer_norm
        self.scalar_parameters = nn.Parameter(torch.zeros(num_layers), requires_grad=trainable)
        self.gamma = nn.Parameter(torch.ones(1), requires_grad=trainable)

    def forward(self, layers: list[torch.Tensor] | tuple[torch.Tensor, ...], mask: torch.Tensor | None = None):
        if len(layers) != self.scalar_parameters.numel():
            raise ValueError(f"expected {self.scalar_parameters.numel()} layers, got {len(layers)}")
        weights = torch.softmax(self.scalar_parameters, dim=0)
        if self.layer_norm:
            if mask is None:
                raise ValueError("layer-normalised mixing needs the word mask")
            layers = [_masked_layer_norm(layer, mask) for layer in layers]
        mixed = sum(weight * layer for weight, layer in zip(weights, layers))
        return self.gamma * mixed


def _masked_layer_norm(layer: torch.Tensor, mask: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    mask = mask.unsqueeze(-1).to(layer.dtype)
    count = mask.sum() * layer.shape[-1]
    mean = (layer * mask).sum() / count
    variance = (((layer - mean) * mask) ** 2).sum() / count
    return (layer - mean) / torch.sqrt(variance + eps)


__all__ = ["ElmoScalarMix"]
