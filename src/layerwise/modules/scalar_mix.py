"""Softmax-weighted mix of hidden states (AllenNLP's ``ScalarMix``).

For K hidden states h_0 .. h_{K-1} (0 = embedding output, K-1 = last layer), each (..., d):

    mix(h) = gamma * sum_k softmax(w)_k * h_k

with one free real weight w_k per state and a scale gamma. The softmax keeps the mixing weights positive and
summing to one whatever sign w takes (sentence-transformers' ``WeightedLayerPooling`` divides by the raw sum,
which breaks down when weights turn negative). w = 0 and gamma = 1 at initialisation: the plain mean of all states.
"""

from __future__ import annotations

import torch
from torch import nn

from layerwise.modules.base import Module

__all__ = ["ScalarMix"]


class ScalarMix(Module):
    """``forward(h)`` with h of shape (..., K, d) -> (..., d); parameters ``weights`` (K,) and ``gamma`` ()."""

    config_keys = ("n_states",)

    def __init__(self, n_states: int):
        super().__init__()
        if int(n_states) < 1:
            raise ValueError(f"n_states must be a positive number of hidden states, got {n_states}")
        self.n_states = int(n_states)
        self.weights = nn.Parameter(torch.zeros(self.n_states))
        self.gamma = nn.Parameter(torch.ones(()))

    def mixing_weights(self) -> torch.Tensor:
        """softmax(w): (K,), positive, summing to one."""
        return torch.softmax(self.weights, dim=0)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        if h.ndim < 2 or h.shape[-2] != self.n_states:
            raise ValueError(f"ScalarMix built for K={self.n_states} states expects (..., K, d), got {tuple(h.shape)}")
        return self.gamma * torch.einsum("k,...kd->...d", self.mixing_weights().to(h.dtype), h)
