"""Exact search over all subsets of hidden states (BERT-LC layer combination).

For a pair of sentences with per-layer mean vectors ``a_l, b_l`` (l = 0..L) and a subset ``D`` of hidden
states, BERT-LC embeds each sentence as the mean of its chosen layers' vectors, and the similarity is

    cos(D) = <sum_{l in D} a_l, sum_{m in D} b_m> / (|sum_D a_l| |sum_D b_m|)

(the 1/|D| factors cancel). With the per-pair Gram matrices ``G_ab[l, m] = <a_l, b_m>`` (and ``G_aa``,
``G_bb``) every term is a quadratic form ``S_xy(D) = x_D^T G_xy x_D`` of the subset's indicator ``x_D``.
The search enumerates subsets depth-first, extending a prefix ``P`` by one state ``l > max(P)``:

    S(P + {l}) = S(P) + G[l, l] + 2 R_P[l],      R_P[l] = sum_{m in P} G[l, m],
    R_{P + {l}}[l'] = R_P[l'] + G[l', l]          (only for l' > l),

so each subset costs O(n) work for the n pairs instead of O(n |D| d). Cosines are then ranked for all
subsets at once (:func:`layerwise.evaluation.metrics.spearman_rows`). The result equals averaging the chosen
layers' vectors and taking cosine (:func:`naive_subset_scores`, the paper's "Method 2", is the reference
the tests compare with).
"""

from __future__ import annotations

import logging
import os
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from math import comb

import numpy as np
import torch

from layerwise._progress import progress
from layerwise.evaluation.metrics import AGGREGATIONS, RankCorrelator, aggregate_correlation, cosine_rows
from layerwise.evaluation.sts import check_gold

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


class _GramScorer:
    """Scores chunks of subsets from per-pair Gram matrices (see the module docstring)."""

    def __init__(self, a: np.ndarray, b: np.ndarray):
        n, k, _ = a.shape
        at = torch.as_tensor(a, dtype=torch.float64)
        bt = torch.as_tensor(b, dtype=torch.float64)
        g_ab = torch.bmm(at, bt.transpose(1, 2))  # (n, K, K)
        g_ab = 0.5 * (g_ab + g_ab.transpose(1, 2))  # x^T G x only sees the symmetric part
        g_aa = torch.bmm(at, at.transpose(1, 2))
        g_aa = 0.5 * (g_aa + g_aa.transpose(1, 2))  # exactly symmetric, like g_ab (equal sides give cos == 1.0)
        g_bb = torch.bmm(bt, bt.transpose(1, 2))
        g_bb = 0.5 * (g_bb + g_bb.transpose(1, 2))
        # G: (K, K, 3n) with the blocks [ab | aa | bb] along the last axis.
        self.G = torch.cat([g_ab, g_aa, g_bb], dim=0).permute(1, 2, 0).contiguous().numpy()
        self.n = n
        self.k = k

    def cosines(self, S: np.ndarray) -> np.ndarray:
        """Quadratic forms S (m, 3n) -> cosines (m, n)."""
        n = self.n
        den = np.sqrt(np.maximum(S[:, n : 2 * n] * S[:, 2 * n :], 1e-300))
        return S[:, :n] / den

    def iter_chunks(self, max_layers: int, chunk_size: int):
        """Yield (bits (m,) int64, S (m, 3n)) over all subsets of at most ``max_layers`` states, depth first.

        Bit ``l`` of ``bits`` is set when hidden state ``l`` is in the subset. Each chunk is a fresh array,
        so it may be scored in another thread while the next one is built.
        """
        G, K = self.G, self.k
        N = G.shape[2]
        chunk_size = max(int(chunk_size), K)
        diag = G[np.arange(K), np.arange(K)]  # (K, N)
        pow2 = np.left_shift(np.int64(1), np.arange(K, dtype=np.int64))
        buf = np.empty((chunk_size, N))
        bits = np.empty(chunk_size, dtype=np.int64)
        fill = 0
        # Stack entries: (bits of P, S_P (N,), R_P (K - start, N), start, |P|)
        stack = [(0, np.zeros(N), np.zeros((K, N)), 0, 0)]
        while stack:
            p_bits, s_p, r_p, start, size = stack.pop()
            c = K - start
            if fill + c > chunk_size:
                yield bits[:fill], buf[:fill]
                buf = np.empty((chunk_size, N))
                bits = np.empty(chunk_size, dtype=np.int64)
                fill = 0
            out = buf[fill : fill + c]  # S of the children P + {l}, l = start..K-1
            np.add(r_p, r_p, out=out)
            out += diag[start:]
            out += s_p
            bits[fill : fill + c] = p_bits | pow2[start:]
            fill += c
            if size + 1 < max_layers:
                for i in range(c - 2, -1, -1):  # children that still have states above them
                    l = start + i
                    r_child = r_p[i + 1 :] + G[l + 1 :, l]
                    stack.append((p_bits | (1 << l), out[i].copy(), r_child, l + 1, size + 1))
        if fill:
            yield bits[:fill], buf[:fill]


class LayerSubsetSearch:
    """Score every non-empty subset of hidden states by the correlation of its cosine with gold scores.

    Parameters
    ----------
    max_layers : int or None
        Largest subset size searched. ``None``: every subset when the model has at most 13 hidden
        states, else subsets of at most 8.
    aggregation : {"all", "wmean", "mean"}
        How per-pair scores are turned into one number when ``groups`` are given to :meth:`fit`.
    chunk_size : int
        Subsets scored at once (memory ~ chunk_size * n * 24 bytes per chunk in flight).
    n_jobs : int or None
        Threads that rank chunks while the next one is enumerated (None: one per CPU).
    show_progress : bool or None
        Progress bar; ``None`` shows it when the module logger is at INFO or lower.

    Attributes (after :meth:`fit`)
    ------------------------------
    masks_ : ndarray of shape (n_subsets, L+1), bool — membership of each subset searched.
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
        chunk_size: int = 2048,
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
        correlators = self._correlators(gold, groups)
        total = count_subsets(n_states, max_layers)
        show = self.show_progress
        if show is None:  # a bar only where the search takes noticeable time
            show = logger.isEnabledFor(logging.INFO) and total * len(gold) > 5e7
        scorer = _GramScorer(a, b)

        def score(bits: np.ndarray, S: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            cos = scorer.cosines(S)
            sc = np.zeros(len(cos))
            for corr, cols, weight in correlators:
                sc += weight * corr(cos if cols is None else cos[:, cols])
            return bits, sc

        n_jobs = self.n_jobs if self.n_jobs is not None else (os.cpu_count() or 1)
        all_bits, all_scores = [], []
        # The depth-first enumeration runs here while up to n_jobs chunks are ranked in worker threads
        # (numpy releases the GIL in its sorts and array arithmetic).
        with progress(total=total, desc="layer subsets", unit="subset", disable=not show) as bar, \
                ThreadPoolExecutor(max_workers=max(1, n_jobs)) as pool:
            pending: deque = deque()

            def collect(fut) -> None:
                bits, sc = fut.result()
                all_bits.append(bits)
                all_scores.append(sc)
                bar.update(len(sc))

            for bits, S in scorer.iter_chunks(max_layers, self.chunk_size):
                pending.append(pool.submit(score, bits, S))
                while len(pending) > max(1, n_jobs):
                    collect(pending.popleft())
            while pending:
                collect(pending.popleft())
        bits = np.concatenate(all_bits)
        self.masks_ = ((bits[:, None] >> np.arange(n_states, dtype=np.int64)) & 1).astype(bool)
        self.scores_ = 100.0 * np.concatenate(all_scores)  # one scale in the public API: x100, as sts_scores
        self.n_states_ = n_states
        self.max_layers_ = max_layers
        if np.isnan(self.scores_).all():
            raise ValueError("every subset's correlation is undefined: the cosines are the same for every pair "
                             "(identical sentences, or a max_length that leaves no text); check the inputs")
        best = int(np.nanargmax(self.scores_))
        self.best_layers_ = self._layers(best)
        self.best_score_ = float(self.scores_[best])
        return self

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
        if self.chunk_size < 1:
            raise ValueError(f"chunk_size must be positive, got {self.chunk_size}")
        return min(int(max_layers), n_states)

    def _correlators(self, gold: np.ndarray, groups: np.ndarray | None) -> list:
        """(RankCorrelator, pair columns or None, weight) per group; one over all pairs for ``all``."""
        if groups is None or self.aggregation == "all":
            return [(RankCorrelator(gold), None, 1.0)]
        groups = np.asarray(groups)
        if groups.shape != gold.shape:
            raise ValueError(f"groups has {groups.shape[0]} entries but there are {gold.shape[0]} pairs")
        group_cols = [c for g in np.unique(groups) if len(c := np.flatnonzero(groups == g)) >= 2]
        if not group_cols:
            raise ValueError("no group has at least 2 pairs; use aggregation='all'")
        w = np.array([len(c) for c in group_cols], dtype=np.float64)
        w = w / w.sum() if self.aggregation == "wmean" else np.full(len(w), 1.0 / len(w))
        return [(RankCorrelator(gold[c]), c, wi) for c, wi in zip(group_cols, w)]

    # -- results ---------------------------------------------------------------------------------
    def _check_fitted(self) -> None:
        if not hasattr(self, "scores_"):
            raise RuntimeError("this LayerSubsetSearch is not fitted yet: call fit(a, b, gold) first")

    def _layers(self, i: int) -> tuple[int, ...]:
        return tuple(int(x) for x in np.flatnonzero(self.masks_[i]))

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
        sizes = self.masks_.sum(axis=1)
        out = {}
        for s in np.unique(sizes):
            idx = np.flatnonzero(sizes == s)
            i = idx[int(np.nanargmax(self.scores_[idx]))]
            out[int(s)] = (self._layers(i), float(self.scores_[i]))
        return out

    def score_of(self, layers) -> float:
        """The score of one subset (hidden-state indices)."""
        self._check_fitted()
        want = np.zeros(self.n_states_, dtype=bool)
        want[list(layers)] = True
        hit = np.flatnonzero((self.masks_ == want).all(axis=1))
        if len(hit) == 0:
            raise KeyError(f"subset {tuple(layers)} was not searched (max_layers={self.max_layers_})")
        return float(self.scores_[hit[0]])
