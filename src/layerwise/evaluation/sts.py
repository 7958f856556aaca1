"""STS evaluation: correlation of cosine similarity with gold scores, per pooling and per layer."""

from __future__ import annotations

import numpy as np

from layerwise.evaluation.metrics import AGGREGATIONS, aggregate_correlation, cosine_rows, pearson, spearman
from layerwise.layers import LayerStack

__all__ = ["sts_scores", "per_layer_scores", "check_gold", "AGGREGATIONS"]


def check_gold(gold, *, n: int | None = None) -> np.ndarray:
    """Gold scores as float64 of shape (n,), refused when a correlation with them would be meaningless.

    Raises ValueError naming the first NaN or infinite score, or when every score is the same (a correlation
    with a constant is undefined).
    """
    gold = np.asarray(gold, dtype=np.float64)
    if gold.ndim != 1:
        raise ValueError(f"gold scores must have shape (n,), got {gold.shape}")
    if n is not None and len(gold) != n:
        raise ValueError(f"{n} embedding pairs but {len(gold)} gold scores; pass one gold score per pair")
    bad = np.flatnonzero(~np.isfinite(gold))
    if len(bad):
        raise ValueError(f"gold score {bad[0]} is {gold[bad[0]]} ({len(bad)} non-finite in all); "
                         "drop those pairs or fix their scores")
    if len(gold) and np.all(gold == gold[0]):
        raise ValueError(f"all {len(gold)} gold scores are {gold[0]}: a correlation with a constant is undefined; "
                         "pass pairs with differing gold scores")
    return gold


def sts_scores(
    emb1: np.ndarray,
    emb2: np.ndarray,
    gold: np.ndarray,
    *,
    groups: np.ndarray | None = None,
    aggregation: str = "all",
) -> dict[str, float]:
    """Spearman and Pearson (x100) of cosine(emb1[i], emb2[i]) against ``gold``.

    ``emb1, emb2``: (n, d); ``gold``: (n,); ``groups``: (n,) subset of each pair, used by the
    ``wmean`` and ``mean`` aggregations (``all`` pools every pair into one correlation).
    Gold scores that are NaN, infinite or all equal raise ValueError (see :func:`check_gold`).
    """
    emb1 = np.asarray(emb1)
    emb2 = np.asarray(emb2)
    if emb1.ndim != 2 or emb1.shape != emb2.shape:
        raise ValueError(f"expected two (n, d) embedding arrays of equal shape, got {emb1.shape} and {emb2.shape}")
    gold = check_gold(gold, n=len(emb1))
    cos = cosine_rows(emb1, emb2)
    return {
        "spearman": 100 * aggregate_correlation(cos, gold, groups, aggregation, spearman),
        "pearson": 100 * aggregate_correlation(cos, gold, groups, aggregation, pearson),
    }


def per_layer_scores(
    stack1: LayerStack,
    stack2: LayerStack,
    gold: np.ndarray,
    *,
    groups: np.ndarray | None = None,
    aggregation: str = "all",
) -> dict[str, list[float]]:
    """Spearman (x100) of each hidden state alone, for mean and CLS pooling: {"mean": [L+1], "cls": [L+1]}."""
    if stack1.mean.shape != stack2.mean.shape:
        raise ValueError(f"stacks differ in shape: {stack1.mean.shape} vs {stack2.mean.shape}")
    out: dict[str, list[float]] = {}
    for kind, a, b in (("mean", stack1.mean, stack2.mean), ("cls", stack1.cls, stack2.cls)):
        out[kind] = [
            sts_scores(a[:, l], b[:, l], gold, groups=groups, aggregation=aggregation)["spearman"]
            for l in range(stack1.n_states)
        ]
    return out
