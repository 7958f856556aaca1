"""Divergences and distances between latent distributions, batched in torch.

All categorical inputs are probability tensors of shape (..., C) along the last axis.
"""

from __future__ import annotations

import math

import torch

__all__ = [
    "categorical_l2",
    "gaussian_mixture_cosine",
    "gaussian_mixture_l2",
    "js_divergence",
    "kl_categorical_uniform",
    "kl_normal_standard",
    "log_mixture_inner",
    "thresholded_kl",
]

_EPS = 1e-12


def kl_categorical_uniform(q: torch.Tensor) -> torch.Tensor:
    """KL(q || Uniform(C)) = sum_c q_c log q_c + log C, over the last axis: (..., C) -> (...)."""
    c = q.shape[-1]
    return (q * torch.log(q.clamp_min(_EPS))).sum(-1) + math.log(c)


def kl_normal_standard(mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """KL(N(mu, diag exp(logvar)) || N(0, I)) = 1/2 sum (mu^2 + sigma^2 - log sigma^2 - 1): (..., D) -> (...)."""
    return 0.5 * (mu.pow(2) + logvar.exp() - logvar - 1.0).sum(-1)


def thresholded_kl(kl_units: torch.Tensor, threshold: float | None) -> torch.Tensor:
    """The KL term of a batch with KL thresholding: sum_g max(eps, 1/m sum_i KL_ig), a scalar.

    ``kl_units`` (m, G) holds the KL of each example's latent unit g (a categorical group, or one dimension of a
    Gaussian latent). Thresholding ("free bits", Kingma et al. 2016; the "KL thresholding" of Li et al. 2019 that
    Latte-Mix uses with eps = 0.3) stops pushing a unit's batch-mean KL below ``eps`` nats: below it the unit's
    term is the constant eps (no gradient), above it the plain KL. ``threshold=None`` is the plain batch mean of
    sum_g KL_ig.
    """
    per_unit = kl_units.mean(0)  # (G,)
    if threshold is None:
        return per_unit.sum()
    return per_unit.clamp_min(float(threshold)).sum()


def categorical_l2(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Squared L2 distance of categorical distributions summed over groups: sum_g sum_c (p_gc - q_gc)^2.

    (..., G, C), (..., G, C) -> (...): the categorical counterpart of :func:`gaussian_mixture_l2` (the L2
    distance of two mixtures of categoricals is that of their mixed probabilities).
    """
    return (p - q).pow(2).sum((-2, -1))


def js_divergence(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Jensen-Shannon divergence (natural log) over the last axis: JS = KL(p||m)/2 + KL(q||m)/2, m = (p+q)/2."""
    m = 0.5 * (p + q)

    def kl(a, b):
        return (a * (torch.log(a.clamp_min(_EPS)) - torch.log(b.clamp_min(_EPS)))).sum(-1)

    return 0.5 * kl(p, m) + 0.5 * kl(q, m)


def _log_cross_density(mu1, var1, mu2, var2) -> torch.Tensor:
    """log N(mu1_i; mu2_j, diag(var1_i + var2_j)) for all i, j: (K1, D), (K2, D) -> (K1, K2)."""
    var = var1[:, None, :] + var2[None, :, :]
    diff = mu1[:, None, :] - mu2[None, :, :]
    return -0.5 * ((diff.pow(2) / var) + torch.log(2 * math.pi * var)).sum(-1)


def log_mixture_inner(mu1, var1, mu2, var2) -> torch.Tensor:
    """log <p, q> for equal-weight diagonal Gaussian mixtures p (K1 components) and q (K2 components).

    <p, q> = integral p(z) q(z) dz = 1/(K1 K2) sum_ij N(mu1_i; mu2_j, var1_i + var2_j), computed with logsumexp.
    """
    lp = _log_cross_density(mu1, var1, mu2, var2)
    return torch.logsumexp(lp.reshape(-1), 0) - math.log(lp.numel())


def gaussian_mixture_l2(mu1, var1, mu2, var2) -> torch.Tensor:
    """Closed-form squared L2 distance between two equal-weight Gaussian mixtures with diagonal covariances.

    p = 1/K1 sum_i N(mu1_i, var1_i), q = 1/K2 sum_j N(mu2_j, var2_j):
    ||p - q||^2 = <p,p> + <q,q> - 2<p,q>  (see :func:`log_mixture_inner`).
    Inputs (K1, D), (K1, D), (K2, D), (K2, D); returns a scalar tensor.
    """
    pp = log_mixture_inner(mu1, var1, mu1, var1).exp()
    qq = log_mixture_inner(mu2, var2, mu2, var2).exp()
    pq = log_mixture_inner(mu1, var1, mu2, var2).exp()
    return pp + qq - 2 * pq


def gaussian_mixture_cosine(mu1, var1, mu2, var2) -> torch.Tensor:
    """<p,q> / sqrt(<p,p> <q,q>): the cosine of two Gaussian mixtures as functions (in [0, 1]), log-stable."""
    pp = log_mixture_inner(mu1, var1, mu1, var1)
    qq = log_mixture_inner(mu2, var2, mu2, var2)
    pq = log_mixture_inner(mu1, var1, mu2, var2)
    return torch.exp(pq - 0.5 * (pp + qq))
