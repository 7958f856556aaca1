"""Contrastive objectives (SimCSE family), each a module with its formula.

All take L2-normalised cosine similarities divided by a temperature tau, and average a cross-entropy
over the batch of size N. sim(u, v) = u.v / (|u| |v|).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["OBJECTIVES", "InBatchLoss", "SupervisedHardNegativeLoss", "UnsupervisedSimCSELoss", "objective_loss"]

OBJECTIVES = ("unsup", "sup_hard_neg", "in_batch")  # the views compared: (z, z'), (a, p, n), (a, p)


def _cos_matrix(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """(N, d), (M, d) -> (N, M) cosine similarities."""
    return F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T


def _check_temperature(tau: float) -> float:
    if tau <= 0:
        raise ValueError(f"temperature must be positive, got {tau}")
    return float(tau)


class InBatchLoss(nn.Module):
    """Basic supervised in-batch loss on pairs (a_i, b_i); the other b_j of the batch are negatives:

        loss = -1/N sum_i log( exp(sim(a_i, b_i)/tau) / sum_j exp(sim(a_i, b_j)/tau) )
    """

    def __init__(self, temperature: float = 0.05):
        super().__init__()
        self.temperature = _check_temperature(temperature)

    def forward(self, anchors: torch.Tensor, positives: torch.Tensor) -> torch.Tensor:
        if anchors.shape != positives.shape or anchors.ndim != 2:
            raise ValueError(f"expected two (N, d) tensors, got {tuple(anchors.shape)} and {tuple(positives.shape)}")
        logits = _cos_matrix(anchors, positives) / self.temperature
        return F.cross_entropy(logits, torch.arange(len(anchors), device=anchors.device))


class UnsupervisedSimCSELoss(InBatchLoss):
    """Unsupervised SimCSE: the same sentence encoded twice with independent dropout masks, z_i and z_i':

        loss = -1/N sum_i log( exp(sim(z_i, z_i')/tau) / sum_j exp(sim(z_i, z_j')/tau) )

    (the in-batch loss with the second view as positives). ``forward(z, z_prime)``.
    """


class SupervisedHardNegativeLoss(nn.Module):
    """Supervised SimCSE with hard negatives: (h_i, h_i^+ entailment, h_i^- contradiction):

        loss = -1/N sum_i log( exp(sim(h_i, h_i^+)/tau)
                               / sum_j [ exp(sim(h_i, h_j^+)/tau) + exp(sim(h_i, h_j^-)/tau) ] )
    """

    def __init__(self, temperature: float = 0.05):
        super().__init__()
        self.temperature = _check_temperature(temperature)

    def forward(self, anchors: torch.Tensor, positives: torch.Tensor, negatives: torch.Tensor) -> torch.Tensor:
        if not (anchors.shape == positives.shape == negatives.shape) or anchors.ndim != 2:
            raise ValueError(
                f"expected three (N, d) tensors, got {tuple(anchors.shape)}, {tuple(positives.shape)}, "
                f"{tuple(negatives.shape)}"
            )
        logits = torch.cat([_cos_matrix(anchors, positives), _cos_matrix(anchors, negatives)], dim=1)
        return F.cross_entropy(logits / self.temperature, torch.arange(len(anchors), device=anchors.device))


_OBJECTIVE_LOSSES = {"unsup": UnsupervisedSimCSELoss, "in_batch": InBatchLoss, "sup_hard_neg": SupervisedHardNegativeLoss}


def objective_loss(objective: str, views: list[torch.Tensor], temperature: float) -> torch.Tensor:
    """The loss of ``objective`` on its views, each (N, d): unsup (z, z'), in_batch (a, p), sup_hard_neg (a, p, n)."""
    if objective not in _OBJECTIVE_LOSSES:
        raise ValueError(f"unknown objective {objective!r}; valid: {', '.join(OBJECTIVES)}")
    return _OBJECTIVE_LOSSES[objective](temperature)(*views)
