"""Exact search over all subsets of hidden states (BERT-LC layer combination).

For a pair of sentences with per-layer mean vectors ``a_l, b_l`` (l = 0..L) and a subset ``D`` of hidden
states, BERT-LC embeds each sentence as the mean of its chosen layers' vectors, and the similarity is

    cos(D) = <sum_{l in D} a_l, sum_{m in D} b_m> / (|sum_D a_l| |sum_D b_m|)

(the 1/|D| factors cancel). With the per-pair Gram matrices ``G_ab[l, m] = <a_l, b_m>`` (and ``G_aa``,
``G_bb``) every term is a quadratic form ``S_xy(D) = x_D^T G_xy x_D`` of the subset's indicator ``x_D``.
Each subset therefore costs O(n) work for the n pairs instead of O(n |D| d): the subsets' forms are built in tiles
from a table of one half of the states and one small matrix product per subset of the other half
(:mod:`layerwise.methods.lc._subset_gram`), and each tile's cosines are ranked against the gold scores exactly,
ties included (:class:`layerwise.evaluation.metrics.GoldOrderCorrelator`). The result equals averaging the chosen
layers' vectors and taking cosine (:func:`naive_subset_scores`, the paper's "Method 2", is the reference the tests
compare with).
"""

from __future__ import annotations

import logging
import os
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from math import comb

import numpy as np
from threadpoolctl import threadpool_limits

from layerwise._progress import progress
from layerwise.evaluation.metrics import AGGREGATIONS, GoldOrderCorrelator, aggregate_correlation, cosine_rows
from layerwise.evaluation.sts import check_gold
from layerwise.methods.lc._subset_gram import SubsetGram, Tile, popcount

logger = logging.getLogger(__name__)

__all__ = [
    "LayerSubsetSearch",
    "count_subsets",
    "naive_subset_scores",
    "subset_cosine",
]

DEFAULT_MAX_LAYERS_LARGE = 8  # subset size cap for models with more than 13 hidden states


def count_subsets(n_states: int, max_layers: int | None = None) -> int:
    """Number of non-empty subsets of ``n_states`` hidden states with at most ``max_layers`` members."""
    k = n_states if max_layers is None else min(max_layers, n_states)
    return sum(comb(n_states, s) for s in range(1, k + 1))


def _check_stacks(a: np.ndarray, b: np.ndarray, gold: np.ndarray) -> tuple[np.ndarray, ...]:
    a = np.asarray(a)
    b = np.asarray(b)
    gold = np.asarray(gold, dtype=np.float64)
    if a.ndim != 3 or a.shape != b.shape:
        raise ValueError(
            f"expected per-layer vectors of shape (n, L+1, d) for both sides, got {a.shape} and {b.shape}"
        )
    if gold.shape != (a.shape[0],):
        raise ValueError(
            f"gold has {gold.shape[0] if gold.ndim else 0} scores but there are {a.shape[0]} pairs"
        )
    if a.shape[0] < 2:
        raise ValueError(f"a subset search needs at least 2 pairs, got {a.shape[0]}")
    return a, b, check_gold(gold)


def subset_cosine(a: np.ndarray, b: np.ndarray, layers) -> np.ndarray:
    """Cosine of the mean of the chosen layers' vectors: ``a, b`` (n, L+1, d) -> (n,)."""
    idx = list(layers)
    return cosine_rows(a[:, idx, :].astype(np.float64).mean(1), b[:, idx, :].astype(np.float64).mean(1))


def _all_subsets(n_states: int, max_layers: int) -> list[tuple[int, ...]]:
    from itertools import combinations

    return [c for s in range(1, max_layers + 1) for c in combinations(range(n_states), s)]


def naive_subset_scores(
    a: np.ndarray,
    b: np.ndarray,
    gold: np.ndarray,
    *,
    max_layers: int | None = None,
    groups: np.ndarray | None = None,
    aggregation: str = "all",
) -> dict[tuple[int, ...], float]:
    """The paper's "Method 2", plainly: for each subset average its layers, take cosine, then Spearman.

    Slow by design; it is the reference that :class:`LayerSubsetSearch` is tested and timed against.
    Returns subset -> Spearman x 100, the scale of ``LayerSubsetSearch.scores_``.
    """
    a, b, gold = _check_stacks(a, b, gold)
    k = a.shape[1] if max_layers is None else max_layers
    out = {}
    for sub in _all_subsets(a.shape[1], k):
        out[sub] = 100.0 * aggregate_correlation(subset_cosine(a, b, sub), gold, groups, aggregation)
    return out


class _Results:
    """Scores gathered from the tiles, with their subsets' bits. With every subset searched, subset ``bits`` goes
    straight to row ``bits - 1`` (no bits kept, no sort: 33.5 M subsets of 25 states need only their scores)."""

    def __init__(self, total: int, *, every: bool):
        self.scores = np.empty(total)
        self.bits = None if every else np.empty(total, dtype=np.int64)
        self.filled = 0

    def add(self, bits: np.ndarray, scores: np.ndarray) -> None:
        if self.bits is None:
            self.scores[bits - 1] = scores
        else:
            self.bits[self.filled : self.filled + len(bits)] = bits
            self.scores[self.filled : self.filled + len(bits)] = scores
        self.filled += len(bits)

    def in_bit_order(self) -> tuple[np.ndarray, np.ndarray]:
        """(bits, scores), bits increasing."""
        if self.bits is None:
            return np.arange(1, len(self.scores) + 1, dtype=np.int64), self.scores
        order = np.argsort(self.bits, kind="stable")
        return self.bits[order], self.scores[order]


class LayerSubsetSearch:
    """Score every non-empty subset of hidden states by the correlation of its cosine with gold scores.

    Parameters
    ----------
    max_layers : int or None
        Largest subset size searched. ``None``: every subset when the model has at most 13 hidden
        states, else subsets of at most 8.
    aggregation : {"all", "wmean", "mean"}
        How per-pair scores are turned into one number when ``groups`` are given to :meth:`fit`.
    chunk_size : int or None
        Subsets scored at once, a tile (memory ~ chunk_size * n * 48 bytes per tile in flight). ``None``: about
        2**18 / n, so that a tile stays in the cache.
    n_jobs : int or None
        Threads that score tiles (None: one per CPU).
    show_progress : bool or None
        Progress bar; ``None`` shows it when the module logger is at INFO or lower.

    Attributes (after :meth:`fit`)
    ------------------------------
    bits_ : ndarray of shape (n_subsets,), int64 — each subset searched, bit ``l`` set when hidden state ``l`` is
        in it; increasing (the order of every array here, so ties go to the subset with the smaller bits).
    masks_ : ndarray of shape (n_subsets, L+1), bool — the same subsets as a membership table (built on access).
    scores_ : ndarray of shape (n_subsets,) — Spearman x 100 of each subset (the scale of ``sts_scores``).
    best_layers_ : tuple of int — the best subset (hidden-state indices, 0 = embedding output).
    best_score_ : float — Spearman x 100 of the best subset.
    n_states_ : int
    """

    def __init__(
        self,
        *,
        max_layers: int | None = None,
        aggregation: str = "all",
        chunk_size: int | None = None,
        n_jobs: int | None = None,
        show_progress: bool | None = None,
    ):
        self.max_layers = max_layers
        self.aggregation = aggregation
        self.chunk_size = chunk_size
        self.n_jobs = n_jobs
        self.show_progress = show_progress

    def fit(self, a: np.ndarray, b: np.ndarray, gold: np.ndarray, *, groups: np.ndarray | None = None):
        """Search all subsets on pairs ``(a[i], b[i])`` with per-layer vectors of shape (n, L+1, d).

        Returns ``self``.
        """
        a, b, gold = _check_stacks(a, b, gold)
        n_states = a.shape[1]
        max_layers = self._check_params(n_states)
        cols, parts = self._correlators(gold, groups)
        total = count_subsets(n_states, max_layers)
        show = self.show_progress
        if show is None:  # a bar only where the search takes noticeable time
            show = logger.isEnabledFor(logging.INFO) and total * len(gold) > 5e7
        rows = self.chunk_size or max(16, min(1024, 2**18 // len(cols)))

        def score(tile: Tile) -> tuple[np.ndarray, np.ndarray]:
            cos = gram.cosines(gram.quadratic_forms(tile))
            sc = np.zeros(len(cos))
            for corr, part, weight in parts:
                sc += weight * corr(cos[:, part])
            return tile.bits, sc

        results = _Results(total, every=max_layers >= n_states)
        n_jobs = self.n_jobs if self.n_jobs is not None else (os.cpu_count() or 1)
        # Tiles are built here and scored in worker threads (numpy releases the GIL in its products and sorts);
        # at most 2 n_jobs tiles are in flight, so memory stays bounded whatever the number of subsets.
        # BLAS single-threaded: the tiles' small products are parallel across tiles, and BLAS threads spinning on
        # small products cost 10x on a loaded machine.
        with progress(total=total, desc="layer subsets", unit="subset", disable=not show) as bar, \
                ThreadPoolExecutor(max_workers=max(1, n_jobs)) as pool, threadpool_limits(limits=1, user_api="blas"):
            gram = SubsetGram(a, b, cols, pool)
            pending: deque = deque()

            def collect(fut) -> None:
                tile_bits, sc = fut.result()
                results.add(tile_bits, sc)
                bar.update(len(sc))

            for tile in gram.tiles(max_layers, rows):
                pending.append(pool.submit(score, tile))
                while len(pending) > 2 * max(1, n_jobs):
                    collect(pending.popleft())
            while pending:
                collect(pending.popleft())
        if results.filled != total:
            raise RuntimeError(f"the search scored {results.filled} subsets, expected {total}")
        self._store(results, n_states, max_layers)
        return self

    def _store(self, results: _Results, n_states: int, max_layers: int) -> None:
        """Set the fitted attributes, subsets in increasing ``bits``."""
        self.bits_, self.scores_ = results.in_bit_order()
        self.scores_ *= 100.0  # one scale in the public API: x100, as sts_scores
        self.n_states_ = n_states
        self.max_layers_ = max_layers
        if np.isnan(self.scores_).all():
            raise ValueError("every subset's correlation is undefined: the cosines are the same for every pair "
                             "(identical sentences, or a max_length that leaves no text); check the inputs")
        best = int(np.nanargmax(self.scores_))
        self.best_layers_ = self._layers(best)
        self.best_score_ = float(self.scores_[best])

    def _check_params(self, n_states: int) -> int:
        """The subset-size cap for ``n_states`` hidden states, after checking every setting."""
        if self.aggregation not in AGGREGATIONS:
            raise ValueError(f"unknown aggregation {self.aggregation!r}; valid: {', '.join(AGGREGATIONS)}")
        if n_states > 62:
            raise ValueError(f"at most 62 hidden states can be searched, got {n_states}")
        max_layers = self.max_layers
        if max_layers is None:
            max_layers = n_states if n_states <= 13 else DEFAULT_MAX_LAYERS_LARGE
        if not 1 <= int(max_layers):
            raise ValueError(f"max_layers must be at least 1, got {max_layers}")
        if self.chunk_size is not None and self.chunk_size < 1:
            raise ValueError(f"chunk_size must be positive, got {self.chunk_size}")
        return min(int(max_layers), n_states)

    def _correlators(self, gold: np.ndarray, groups: np.ndarray | None) -> tuple[np.ndarray, list]:
        """The pairs' order for the cosines' columns, and (correlator, its columns, weight) per group.

        Each group's pairs are contiguous and in its gold order (what :class:`GoldOrderCorrelator` reads); pairs of
        groups with fewer than 2 pairs are left out. One group of every pair for ``all``.
        """
        if groups is None or self.aggregation == "all":
            corr = GoldOrderCorrelator(gold)
            return corr.order, [(corr, slice(None), 1.0)]
        groups = np.asarray(groups)
        if groups.shape != gold.shape:
            raise ValueError(f"groups has {groups.shape[0]} entries but there are {gold.shape[0]} pairs")
        group_cols = [c for g in np.unique(groups) if len(c := np.flatnonzero(groups == g)) >= 2]
        if not group_cols:
            raise ValueError("no group has at least 2 pairs; use aggregation='all'")
        w = np.array([len(c) for c in group_cols], dtype=np.float64)
        w = w / w.sum() if self.aggregation == "wmean" else np.full(len(w), 1.0 / len(w))
        cols, parts, start = [], [], 0
        for c, wi in zip(group_cols, w):
            corr = GoldOrderCorrelator(gold[c])
            cols.append(c[corr.order])
            parts.append((corr, slice(start, start + len(c)), wi))
            start += len(c)
        return np.concatenate(cols), parts

    # -- results ---------------------------------------------------------------------------------
    def _check_fitted(self) -> None:
        if not hasattr(self, "scores_"):
            raise RuntimeError("this LayerSubsetSearch is not fitted yet: call fit(a, b, gold) first")

    def _layers(self, i: int) -> tuple[int, ...]:
        b = int(self.bits_[i])
        return tuple(l for l in range(self.n_states_) if b >> l & 1)

    @property
    def masks_(self) -> np.ndarray:
        """(n_subsets, L+1) bool: row i marks the hidden states of subset i (built from ``bits_`` on each access)."""
        self._check_fitted()
        return ((self.bits_[:, None] >> np.arange(self.n_states_, dtype=np.int64)) & 1).astype(bool)

    @property
    def subsets_(self) -> list[tuple[int, ...]]:
        """Every subset searched, in the order of ``scores_`` (hidden-state index tuples)."""
        self._check_fitted()
        return [self._layers(i) for i in range(len(self.scores_))]

    def top(self, k: int = 10) -> list[tuple[tuple[int, ...], float]]:
        """The ``k`` best subsets with their scores, best first."""
        self._check_fitted()
        k = min(int(k), len(self.scores_))
        order = np.argsort(-np.nan_to_num(self.scores_, nan=-np.inf), kind="stable")[:k]
        return [(self._layers(i), float(self.scores_[i])) for i in order]

    def best_by_size(self) -> dict[int, tuple[tuple[int, ...], float]]:
        """For each subset size, the best subset of that size and its score."""
        self._check_fitted()
        sizes = popcount(self.bits_)
        out = {}
        for s in np.unique(sizes):
            idx = np.flatnonzero(sizes == s)
            i = idx[int(np.nanargmax(self.scores_[idx]))]
            out[int(s)] = (self._layers(i), float(self.scores_[i]))
        return out

    def score_of(self, layers) -> float:
        """The score of one subset (hidden-state indices)."""
        self._check_fitted()
        want = sum(1 << int(l) for l in set(layers))
        i = int(np.searchsorted(self.bits_, want))
        if i == len(self.bits_) or self.bits_[i] != want:
            raise KeyError(f"subset {tuple(layers)} was not searched (max_layers={self.max_layers_})")
        return float(self.scores_[i])
