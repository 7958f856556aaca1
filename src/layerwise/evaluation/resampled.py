"""Correlations in many bootstrap resamples at once, without sorting any resample.

A resample is a row of multiplicities ``c`` (n,) over the units (:func:`bootstrap_counts`); a block of them is a
(B, n) matrix. The Spearman correlation of the expanded sample (each unit repeated ``c_i`` times) is the weighted
Pearson correlation of *average ranks of the expanded sample*, and the average rank of a tie group of values with
total multiplicity ``W`` after ``W_before`` smaller values is ``W_before + (W + 1) / 2``. Sorting each score vector once gives every resample's ranks with one cumulative sum,
so no resample is sorted. The slow twin in the tests repeats the units and calls :func:`scipy.stats.spearmanr`.

Gold's side of every resample (:func:`gold_side`) is computed once and shared by every system scored on the same
resamples (:class:`layerwise.evaluation.significance.SpearmanResamples`); a system then costs one argsort, and per
chunk of resamples one cumulative sum and one dot product (:func:`spearman_with`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

__all__ = ["GoldSide", "bootstrap_counts", "gold_side", "resampled_pearson", "resampled_spearman", "spearman_with"]


def bootstrap_counts(n: int, n_resamples: int, seed: int, batch: int = 256) -> Iterator[np.ndarray]:
    """Multiplicities of ``n`` units in ``n_resamples`` resamples with replacement, in (<= batch, n) int64 blocks.

    The draws depend only on ``(n, n_resamples, seed, batch)``; the fast tests and their slow twins share them."""
    if n < 2 or n_resamples < 1:
        raise ValueError(f"a bootstrap needs at least 2 units and 1 resample, got {n} units, {n_resamples} resamples")
    rng = np.random.default_rng(seed)
    done = 0
    while done < n_resamples:
        b = min(batch, n_resamples - done)
        idx = rng.integers(0, n, size=(b, n)) + (np.arange(b) * n)[:, None]
        yield np.bincount(idx.ravel(), minlength=b * n).reshape(b, n)
        done += b


def _sorted_ranks(x: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``x``'s sort order, every resample's average rank of each unit in that order (B, n) and the resample's tie
    correction ``sum over tie groups of W^3 - W`` (B,), ``W`` a group's multiplicity in the resample."""
    order = np.argsort(x, kind="stable")
    xs = x[order]
    c = counts[:, order].astype(np.int32)  # int32 sums: exact (a resample holds < 2^31 units), several times faster
    new = np.r_[True, xs[1:] != xs[:-1]]
    if new.all():  # no equal values: each unit is its own group (a unit drawn W times is a tie of W)
        w = c.astype(np.float64)
        ranks = np.cumsum(c, axis=1) - 0.5 * w + 0.5
    else:
        wi = np.add.reduceat(c, np.flatnonzero(new), axis=1)  # (B, G) per group
        w = wi.astype(np.float64)
        ranks = (np.cumsum(wi, axis=1) - 0.5 * w + 0.5)[:, np.cumsum(new) - 1]  # W_before + (W + 1) / 2
    return order, ranks, (w * w * w - w).sum(axis=1)


@dataclass(frozen=True)
class GoldSide:
    """Gold's part of every resample's Spearman, in unit order, for resamples ``counts`` (B, n)."""

    centred: np.ndarray  # (B, n): c * (gold's average rank - mean rank); sums to 0 in every resample
    ss: np.ndarray  # (B,): the expanded sample's sum of squares of centred gold ranks, (N^3 - N - ties) / 12
    total: np.ndarray  # (B,): N, the units drawn
    half_cross_c: np.ndarray  # (B,): 0.5 * sum_i centred_i * c_i (the same for any order of the units)
    ties_if_distinct: np.ndarray  # (B,): sum_i c_i^3 - c_i, a system's tie correction when its values all differ


def gold_side(gold: np.ndarray, counts: np.ndarray) -> GoldSide:
    order, ranks, ties = _sorted_ranks(gold, counts)
    total = counts.sum(axis=1, dtype=np.int64).astype(np.float64)
    centred = np.empty(counts.shape)
    centred[:, order] = counts[:, order] * (ranks - (total[:, None] + 1.0) / 2.0)
    c = counts.astype(np.float64)
    return GoldSide(centred, (total ** 3 - total - ties) / 12.0, total, 0.5 * np.einsum("bi,bi->b", centred, c),
                     (c * c * c - c).sum(axis=1))


#: Resamples scored together: the (rows, n) temporaries of a chunk stay in the CPU's cache (about 3x faster here
#: than a whole block of 256 at once, which streams every step through memory).
_CHUNK = 64


def spearman_with(x: np.ndarray, gold: GoldSide, counts: np.ndarray) -> np.ndarray:
    """Spearman's rho of ``x`` (n,) with the gold scores whose :func:`gold_side` is given, per resample (B,).

    With ``x``'s order fixed, ``s`` the inclusive cumulative multiplicities and ``g`` gold's centred side, a unit
    of its own value has average rank ``s - c/2 + 1/2``, so the cross term ``sum g (rank - mean)`` is
    ``sum g s - sum g c / 2`` (``sum g`` is 0); the units of a tie group then take the group's rank instead.
    Every term is a multiple of 1/4 far below 2^53, so the sums are exact in float64 in any order (the same
    numbers as ranking each resample in full)."""
    order = np.argsort(x, kind="stable")
    xs = x[order]
    starts = np.flatnonzero(np.r_[True, xs[1:] != xs[:-1]])
    sizes = np.diff(np.r_[starts, len(x)])
    multi = sizes > 1  # x's tie groups: their units take the group's average rank
    first, last = starts[multi], starts[multi] + sizes[multi] - 1
    members = np.flatnonzero(np.repeat(multi, sizes))
    group_of_member = np.repeat(np.arange(len(first)), sizes[multi])
    cross = np.empty(len(counts))
    ties = gold.ties_if_distinct.copy()
    for lo in range(0, len(counts), _CHUNK):
        rows = slice(lo, lo + _CHUNK)
        c = counts[rows, order].astype(np.int32)
        s = np.cumsum(c, axis=1)
        g = gold.centred[rows, order]
        cross[rows] = np.einsum("bi,bi->b", g, s.astype(np.float64)) - gold.half_cross_c[rows]
        if len(members):
            upto = s[:, last]
            w = (upto - s[:, first] + c[:, first]).astype(np.float64)  # (chunk, groups): each group's multiplicity
            cm = c[:, members].astype(np.float64)
            moved = (upto - 0.5 * w + 0.5)[:, group_of_member] - (s[:, members] - 0.5 * cm + 0.5)
            cross[rows] += np.einsum("bi,bi->b", g[:, members], moved)
            ties[rows] += (w * w * w - w).sum(axis=1) - (cm * cm * cm - cm).sum(axis=1)
    total = gold.total
    with np.errstate(invalid="ignore", divide="ignore"):
        return cross / np.sqrt((total ** 3 - total - ties) / 12.0 * gold.ss)


def resampled_spearman(x: np.ndarray, gold: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Spearman's rho of ``x`` with ``gold`` (both (n,)) in each resample of ``counts`` (B, n) -> (B,).

    Equal to :func:`scipy.stats.spearmanr` of ``np.repeat(x, c)`` and ``np.repeat(gold, c)`` for each row ``c``
    (NaN where a resample holds one distinct value): the Pearson correlation of the expanded sample's average ranks,
    whose sums of squares are ``(N^3 - N - sum W^3 - W) / 12`` (the tie-corrected sum of squares of ranks 1..N)."""
    return spearman_with(np.asarray(x), gold_side(np.asarray(gold, dtype=np.float64), counts), counts)


def resampled_pearson(x: np.ndarray, gold: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Pearson's r of ``x`` with ``gold`` (both (n,)) in each resample of ``counts`` (B, n) -> (B,): the Pearson
    correlation weighted by the multiplicities, equal to :func:`scipy.stats.pearsonr` of the repeated units."""
    c = counts.astype(np.float64)
    total = c.sum(axis=1, keepdims=True)
    x, gold = np.asarray(x, dtype=np.float64), np.asarray(gold, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        dx = x[None, :] - (c * x).sum(axis=1, keepdims=True) / total
        dy = gold[None, :] - (c * gold).sum(axis=1, keepdims=True) / total
        return (c * dx * dy).sum(axis=1) / np.sqrt((c * dx * dx).sum(axis=1) * (c * dy * dy).sum(axis=1))
