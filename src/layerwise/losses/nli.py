"""NLI pre-finetuning objectives of "BERTology" (Lee, CS224N): regression, contrastive (Eq. 3), triplet (Eq. 4).

Embeddings are (N, d); sim(u, v) = u.v / (|u| |v|).

    regression    loss = 1/N sum_i (cos(u_i, v_i) - y_i)^2,  y = 1.0 entailment, 0.5 neutral, 0.0 contradiction
    contrastive   loss = -1/N sum_i log( exp(sim(h_i, h_i^+)/tau)
                                         / sum_j [exp(sim(h_i, h_j^+)/tau) + exp(sim(h_i, h_j^-)/tau)] )
                  (in-batch negatives plus each premise's contradiction as a hard negative: supervised SimCSE, so
                  this is :class:`~layerwise.losses.contrastive.SupervisedHardNegativeLoss`)
    triplet       loss = 1/N sum_i max(0, |a_i - p_i| - |a_i - n_i| + margin), Euclidean distance, margin 1
                  (torch's ``TripletMarginLoss``, which adds eps = 1e-6 inside the distance)
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from layerwise.losses.contrastive import SupervisedHardNegativeLoss

__all__ = ["NLI_LABEL_SCORES", "NLI_OBJECTIVES", "NLIRegressionLoss", "NLITripletLoss", "nli_loss"]

NLI_OBJECTIVES = ("regression", "contrastive", "triplet")
NLI_LABEL_SCORES = {"entailment": 1.0, "neutral": 0.5, "contradiction": 0.0}


class NLIRegressionLoss(nn.Module):
    """``forward(u, v, targets)``: mean squared error of cos(u_i, v_i) against targets (N,) in [0, 1]."""

    def forward(self, u: torch.Tensor, v: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        if u.shape != v.shape or u.ndim != 2 or targets.shape != u.shape[:1]:
            raise ValueError(f"expected (N, d), (N, d), (N,), got {tuple(u.shape)}, {tuple(v.shape)}, "
                             f"{tuple(targets.shape)}")
        return F.mse_loss(F.cosine_similarity(u, v, dim=-1), targets.to(u.dtype))


class NLITripletLoss(nn.TripletMarginLoss):
    """Euclidean triplet loss with margin 1 (Eq. 4): ``forward(anchors, positives, negatives)``, each (N, d)."""

    def __init__(self, margin: float = 1.0):
        if margin <= 0:
            raise ValueError(f"margin must be positive, got {margin}")
        super().__init__(margin=float(margin), p=2.0)


def nli_loss(objective: str, views: list[torch.Tensor], *, temperature: float = 0.05, margin: float = 1.0,
             targets: torch.Tensor | None = None) -> torch.Tensor:
    """The loss of ``objective``: regression on views (u, v) with ``targets``; contrastive and triplet on (a, p, n)."""
    if objective == "regression":
        if targets is None:
            raise ValueError("the regression objective needs targets (N,) in [0, 1]")
        return NLIRegressionLoss()(*views, targets)
    if objective == "contrastive":
        return SupervisedHardNegativeLoss(temperature)(*views)
    if objective == "triplet":
        return NLITripletLoss(margin)(*views)
    raise ValueError(f"unknown NLI objective {objective!r}; valid: {', '.join(NLI_OBJECTIVES)}")
