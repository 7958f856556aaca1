"""Sentence similarity from token posteriors: the mixture p(z|m) = 1/K sum_i q(z|u_i) over a sentence's tokens."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch.nn import functional as F

from layerwise.encoders.tokens import TokenStack
from layerwise.methods.lattemix.divergences import (
    categorical_l2,
    gaussian_mixture_cosine,
    gaussian_mixture_l2,
    js_divergence,
)
from layerwise.methods.lattemix.models import TokenLatentModel

__all__ = ["Mixtures", "SIMILARITIES", "sentence_mixtures", "pair_similarity"]

# similarity measures available for each model kind
SIMILARITIES = {"categorical": ("cosine", "js", "l2"), "normal": ("l2", "cosine"), "ae": ("cosine",)}


@dataclass
class Mixtures:
    """Per-sentence mixtures of token posteriors.

    categorical: ``probs`` (n, G, C), each group a distribution (mean of token posteriors).
    normal: the components themselves, ``mu``/``var`` (total_tokens, D) with ``offsets`` (n + 1,).
    ae: ``probs`` holds the mean code (n, 1, D) (no distribution; cosine only).
    """

    kind: str
    probs: np.ndarray | None = None
    mu: np.ndarray | None = None
    var: np.ndarray | None = None
    offsets: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.probs) if self.probs is not None else len(self.offsets) - 1

    def take(self, idx: np.ndarray) -> "Mixtures":
        """The mixtures of sentences ``idx``, in that order."""
        if self.kind != "normal":
            return Mixtures(self.kind, probs=self.probs[idx])
        lengths = np.diff(self.offsets)[idx]
        rows = np.concatenate([np.arange(self.offsets[i], self.offsets[i + 1]) for i in idx])
        return Mixtures(self.kind, mu=self.mu[rows], var=self.var[rows],
                        offsets=np.concatenate([[0], np.cumsum(lengths)]))


@torch.inference_mode()
def sentence_mixtures(
    model: TokenLatentModel,
    tokens: TokenStack,
    layer: int,
    *,
    include_special: bool = False,
    batch_size: int = 8192,
) -> Mixtures:
    """Mixture of each sentence's token posteriors (masked mean; special tokens excluded unless asked)."""
    v = tokens.vectors[:, tokens.layer_index(layer)]
    keep = np.ones(len(v), bool) if include_special else ~tokens.special
    ids = tokens.sentence_ids()[keep]
    n = len(tokens)
    counts = np.bincount(ids, minlength=n)
    if (counts == 0).any():
        bad = int(np.flatnonzero(counts == 0)[0])
        raise ValueError(f"sentence {bad} has no tokens left (only special tokens?): use include_special=True")
    rows = torch.from_numpy(np.ascontiguousarray(v[keep], dtype=np.float32))
    kind = model.config.kind
    parts = [model.posterior(rows[s : s + batch_size]) for s in range(0, len(rows), batch_size)]
    if kind == "normal":
        mu = torch.cat([p[0] for p in parts]).double().numpy()
        var = torch.cat([p[1] for p in parts]).double().numpy()
        return Mixtures(kind, mu=mu, var=var, offsets=np.concatenate([[0], np.cumsum(counts)]))
    post = torch.cat(parts).double()
    post = post.reshape(len(post), -1, post.shape[-1])  # (m, G, C) or (m, 1, D)
    out = torch.zeros((n,) + tuple(post.shape[1:]), dtype=torch.float64)
    out.index_add_(0, torch.from_numpy(ids), post)
    out /= torch.from_numpy(counts).double()[:, None, None]
    return Mixtures(kind, probs=out.numpy())


def pair_similarity(m1: Mixtures, m2: Mixtures, metric: str) -> np.ndarray:
    """Similarity of mixture i of ``m1`` with mixture i of ``m2``: (n,). Higher = more similar.

    categorical: ``cosine`` of the flattened mixtures, ``js`` = minus the Jensen-Shannon divergence summed
    over groups, or ``l2`` = minus the squared L2 distance of the mixtures summed over groups; normal: ``l2`` = minus the closed-form squared L2 distance of the Gaussian mixtures, or
    ``cosine`` = their normalised inner product; ae: ``cosine`` of mean codes.
    """
    if m1.kind != m2.kind:
        raise ValueError(f"mixtures of different kinds: {m1.kind} vs {m2.kind}")
    valid = SIMILARITIES[m1.kind]
    if metric not in valid:
        raise ValueError(f"unknown similarity {metric!r} for a {m1.kind} model; valid: {', '.join(valid)}")
    if len(m1) != len(m2):
        raise ValueError(f"{len(m1)} mixtures on one side and {len(m2)} on the other")
    if m1.kind != "normal":
        p, q = torch.from_numpy(m1.probs), torch.from_numpy(m2.probs)
        if metric == "cosine":
            return F.cosine_similarity(p.flatten(1), q.flatten(1), dim=1).numpy()
        if metric == "l2":
            return (-categorical_l2(p, q)).numpy()
        return (-js_divergence(p, q).sum(-1)).numpy()
    fn = gaussian_mixture_l2 if metric == "l2" else gaussian_mixture_cosine
    out = np.empty(len(m1))
    for i in range(len(m1)):
        a = slice(m1.offsets[i], m1.offsets[i + 1])
        b = slice(m2.offsets[i], m2.offsets[i + 1])
        val = fn(torch.from_numpy(m1.mu[a]), torch.from_numpy(m1.var[a]),
                 torch.from_numpy(m2.mu[b]), torch.from_numpy(m2.var[b]))
        out[i] = -float(val) if metric == "l2" else float(val)
    return out
