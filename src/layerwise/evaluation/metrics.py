"""Similarity and correlation metrics, batched.

Spearman's rho is Pearson's r of *average* ranks (ties share the mean of the ranks they span), exactly
as :func:`scipy.stats.spearmanr` computes it; the batched version here is tested against scipy.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import rankdata

__all__ = [
    "AGGREGATIONS",
    "aggregate_correlation",
    "cosine_rows",
    "pearson",
    "spearman",
    "spearman_rows",
    "average_ranks",
    "RankCorrelator",
    "GoldOrderCorrelator",
]


#: How per-subset results of STS12-16 are combined into one number (published numbers differ by up to ~13
#: points between them): ``all`` one correlation over every pair (SimCSE, MTEB), ``wmean`` size-weighted mean of
#: per-subset correlations (SentEval), ``mean`` their plain mean.
AGGREGATIONS: tuple[str, ...] = ("all", "wmean", "mean")


def _check_pair(pred: np.ndarray, gold: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    pred = np.asarray(pred, dtype=np.float64)
    gold = np.asarray(gold, dtype=np.float64)
    if pred.ndim != 1 or gold.ndim != 1:
        raise ValueError(f"expected 1-d score arrays, got shapes {pred.shape} and {gold.shape}")
    if pred.shape != gold.shape:
        raise ValueError(
            f"predictions and gold scores differ in length: {pred.shape[0]} vs {gold.shape[0]}"
        )
    if pred.shape[0] < 2:
        raise ValueError(f"a correlation needs at least 2 pairs, got {pred.shape[0]}")
    return pred, gold


def cosine_rows(a: np.ndarray, b: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    """Cosine similarity of matching rows: ``a, b`` of shape (n, d) -> (n,)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"cosine_rows needs equal shapes, got {a.shape} and {b.shape}")
    num = np.einsum("nd,nd->n", a, b)
    # sqrt(<a,a> <b,b>) rather than |a| |b|: identical vectors then give exactly 1.0 (IEEE sqrt(x*x) == x),
    # as the Gram-matrix path of the subset search does, so true ties stay ties for rank correlation.
    den = np.sqrt(np.einsum("nd,nd->n", a, a) * np.einsum("nd,nd->n", b, b))
    return num / np.maximum(den, eps)


def pearson(pred: np.ndarray, gold: np.ndarray) -> float:
    """Pearson's r between two score vectors of shape (n,)."""
    pred, gold = _check_pair(pred, gold)
    pc = pred - pred.mean()
    gc = gold - gold.mean()
    den = np.sqrt((pc * pc).sum() * (gc * gc).sum())
    return float((pc * gc).sum() / den) if den > 0 else float("nan")


def average_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n with ties given their average rank (``scipy.stats.rankdata(method='average')``)."""
    return rankdata(x, method="average")


def spearman(pred: np.ndarray, gold: np.ndarray) -> float:
    """Spearman's rho of two score vectors of shape (n,), ties handled as scipy does."""
    pred, gold = _check_pair(pred, gold)
    return pearson(average_ranks(pred), average_ranks(gold))


class RankCorrelator:
    """Spearman's rho of many prediction rows against one fixed gold vector, exactly and fast.

    A row without tied predictions has ranks that are a permutation of 1..n, so rho is a dot product of the
    sorted order with the centred gold ranks. Sorting uses order-preserving int64 keys whose low bits carry
    the column index (one value-only sort instead of an argsort). Truncating a key's low bits can only merge
    values that are equal or within ~1e-13 of each other; every row where two truncated keys collide (a tie
    or a near tie), or that holds a NaN, is re-ranked exactly with average ranks as scipy does. The result is
    therefore equal to ``scipy.stats.spearmanr(row, gold)`` for every row.
    """

    def __init__(self, gold: np.ndarray):
        gold = np.asarray(gold, dtype=np.float64)
        if gold.ndim != 1:
            raise ValueError(f"gold must have shape (n,), got {gold.shape}")
        n = len(gold)
        if n < 2:
            raise ValueError(f"a correlation needs at least 2 pairs, got {n}")
        g = average_ranks(gold)
        self.n = n
        self.gc = g - g.mean()
        self.g_norm = float(np.sqrt((self.gc * self.gc).sum()))
        self.bits = max(1, (n - 1).bit_length())
        self.pos = np.arange(n, dtype=np.float64) - (n - 1) / 2.0  # centred rank of sorted position p
        self.r_norm = float(np.sqrt(n * (n * n - 1) / 12.0))

    def __call__(self, pred: np.ndarray) -> np.ndarray:
        """Rho of each row of ``pred`` (m, n) -> (m,)."""
        pred = np.asarray(pred, dtype=np.float64)
        if pred.ndim != 2 or pred.shape[1] != self.n:
            raise ValueError(f"pred must have shape (m, {self.n}) to match gold, got {pred.shape}")
        m, n = pred.shape
        if m == 0:
            return np.zeros(0)
        if self.g_norm == 0:
            return np.full(m, np.nan)
        x = pred + 0.0  # a copy, with -0.0 turned into +0.0 (equal values must get equal keys)
        keys = x.view(np.int64)
        keys ^= (keys >> 63) & np.int64(0x7FFFFFFFFFFFFFFF)  # float order == signed int order
        keys >>= self.bits
        keys <<= self.bits
        keys |= np.arange(n, dtype=np.int64)
        keys.sort(axis=1)
        order = keys & np.int64((1 << self.bits) - 1)
        rho = (self.gc[order] @ self.pos) / (self.r_norm * self.g_norm)
        keys >>= self.bits
        suspect = (keys[:, 1:] == keys[:, :-1]).any(axis=1) | np.isnan(pred).any(axis=1)
        if suspect.any():
            rows = pred[suspect]
            r = rankdata(rows, method="average", axis=1)
            rc = r - r.mean(axis=1, keepdims=True)
            den = np.sqrt((rc * rc).sum(axis=1)) * self.g_norm
            with np.errstate(invalid="ignore", divide="ignore"):
                rho[suspect] = (rc @ self.gc) / den
        return rho


class GoldOrderCorrelator:
    """Spearman's rho of many rows of cosines against one gold vector, the rows' columns in the gold's order.

    The caller arranges each row's columns by :attr:`order` (``argsort(gold)``, stable) once, upstream (the subset
    search permutes the pairs before building anything). Each value ``x`` becomes the key ``bits(x + 3.0)``: for
    ``x`` in [-1, 1] a positive double, whose bit pattern orders as the number does, so the keys sort as doubles
    (a value-only SIMD sort, no argsort). Its low :attr:`bits` bits are replaced by twice the gold's average rank
    of that column (an integer, non-decreasing along the columns), so after the sort the low bits give, in
    predicted order, the gold ranks themselves, and without ties in the row

        rho = sum_p (2p - (n - 1)) * code_p / (4 * |r| * |g|)

    an exact integer dot product (``|r|``, ``|g|``: the norms of the centred rank vectors). Dropping the low bits
    can only merge values within 2**bits ulps of 3.0 (about 1e-12) of each other; a row where two truncated keys
    are equal (a tie or a near tie), or that holds a value outside about (-2, 5) (NaN and infinities included),
    is ranked again exactly with average ranks, as :func:`scipy.stats.spearmanr` does. Every row's result is
    therefore scipy's, and equal correlations come out as equal doubles.
    """

    _LOW = np.float64(1.0).view(np.int64)  # keys of finite values in range lie in [bits(1.0), bits(8.0))
    _HIGH = np.float64(8.0).view(np.int64)

    def __init__(self, gold: np.ndarray):
        gold = np.asarray(gold, dtype=np.float64)
        if gold.ndim != 1 or len(gold) < 2:
            raise ValueError(f"gold must have shape (n,) with n >= 2, got {gold.shape}")
        n = len(gold)
        self.n = n
        self.order = np.argsort(gold, kind="stable")
        ranks = average_ranks(gold)[self.order]
        self.code = np.rint(2.0 * ranks).astype(np.int64)  # (n,) twice the average rank: an integer
        self.gc = ranks - ranks.mean()  # (n,) centred gold ranks, in gold order
        self.bits = int(2 * n).bit_length()
        self.mask = np.int64((1 << self.bits) - 1)
        self.pos2 = 2 * np.arange(n, dtype=np.int64) - (n - 1)  # (n,) twice the centred rank of sorted position p
        self.g_norm = float(np.sqrt((self.gc * self.gc).sum()))
        self.scale = 4.0 * float(np.sqrt(n * (n * n - 1) / 12.0)) * self.g_norm

    def __call__(self, pred: np.ndarray) -> np.ndarray:
        """Rho of each row of ``pred`` (m, n), columns in gold order -> (m,). ``pred`` is not changed."""
        pred = np.asarray(pred, dtype=np.float64)
        if pred.ndim != 2 or pred.shape[1] != self.n:
            raise ValueError(f"pred must have shape (m, {self.n}) to match gold, got {pred.shape}")
        if len(pred) == 0:
            return np.zeros(0)
        if self.g_norm == 0:
            return np.full(len(pred), np.nan)
        keys = np.add(pred, 3.0).view(np.int64)  # (m, n) a new array
        keys &= ~self.mask
        keys |= self.code
        keys.view(np.float64).sort(axis=1)
        suspect = ((keys[:, 1:] ^ keys[:, :-1]) <= self.mask).any(axis=1)  # equal above the low bits
        for end in (keys[:, 0], keys[:, -1]):
            suspect |= (end < self._LOW) | (end >= self._HIGH)
        keys &= self.mask
        rho = (keys @ self.pos2) / self.scale
        if suspect.any():
            r = rankdata(pred[suspect], method="average", axis=1)
            rc = r - r.mean(axis=1, keepdims=True)
            with np.errstate(invalid="ignore", divide="ignore"):
                rho[suspect] = (rc @ self.gc) / (np.sqrt((rc * rc).sum(axis=1)) * self.g_norm)
        return rho


def spearman_rows(pred: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Spearman's rho of every row of ``pred`` (m, n) against one gold vector (n,) -> (m,).

    Equal to ``[scipy.stats.spearmanr(row, gold)[0] for row in pred]``; see :class:`RankCorrelator`.
    """
    gold = np.asarray(gold, dtype=np.float64)
    pred = np.asarray(pred, dtype=np.float64)
    if pred.ndim != 2:
        raise ValueError(f"pred must have shape (m, n), got {pred.shape}")
    if gold.shape != (pred.shape[1],):
        raise ValueError(f"gold has shape {gold.shape}, expected ({pred.shape[1]},) to match pred's rows")
    return RankCorrelator(gold)(pred)


def aggregate_correlation(
    pred: np.ndarray,
    gold: np.ndarray,
    groups: np.ndarray | None = None,
    aggregation: str = "all",
    metric=spearman,
) -> float:
    """Correlation of ``pred`` (n,) with ``gold`` (n,), aggregated over ``groups`` (n,).

    ``all``: one correlation over every pair; ``wmean``: per-group correlation weighted by group size
    (SentEval); ``mean``: plain mean of per-group correlations.
    """
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"unknown aggregation {aggregation!r}; valid: {', '.join(AGGREGATIONS)}")
    if aggregation == "all" or groups is None:
        return metric(pred, gold)
    groups = np.asarray(groups)
    vals, weights = [], []
    for g in np.unique(groups):
        sel = groups == g
        if sel.sum() < 2:
            continue
        vals.append(metric(pred[sel], gold[sel]))
        weights.append(sel.sum())
    if not vals:
        raise ValueError("no group has at least 2 pairs; use aggregation='all'")
    if aggregation == "mean":
        return float(np.mean(vals))
    return float(np.average(vals, weights=weights))
