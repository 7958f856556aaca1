"""Paired significance tests: is system A's score different from system B's on the same units?

Both tests resample the *units* that the two systems share (sentence pairs for a Spearman correlation with the same
gold scores, examples for an accuracy), so each resample keeps the pairing of A and B on a unit
(Efron & Tibshirani 1993; Koehn 2004; Berg-Kirkpatrick et al. 2012).

The statistic may span several evaluations of the same data (the dev/test splits of a protocol): ``rows[k]`` are
the units scored in evaluation ``k`` and ``a[k]``, ``b[k]`` the systems' outputs there (a system may differ per
split, e.g. a subset chosen on that split's dev part); the statistic is the mean over evaluations of
``score(a[k]) - score(b[k])`` on ``rows[k]``. One resample draws, with replacement, as many units as there are in
the union of the ``rows`` and every evaluation keeps the drawn units of its own rows with their multiplicities, so
the overlap between evaluations is kept as it is.

p-value (two-sided): under the null hypothesis the difference is 0; the bootstrap distribution of ``d*`` is
centred on the observed difference ``d``, so the test counts resamples that move as far from ``d`` as ``d`` is from 0:
``p = (1 + #{|d*_b - d| >= |d|}) / (B + 1)`` (``>=`` up to 1e-9 of the scale: see ``_p_value``).

The per-resample correlations (one cumulative sum per system, no resample sorted) are in
:mod:`layerwise.evaluation.resampled`.

Systems compared across stored runs (a results page's row against its baseline row, each averaged over its own
seeds): :func:`bootstrap_scores` gives one system's score on each of its evaluations in every resample, and
:func:`compare_scores` tests the difference of two systems' mean scores, ``mean_k score(a_k) - mean_m score(b_m)``
(the difference of the seed means the page shows; with the same evaluations on both sides it is the statistic of
:func:`paired_bootstrap_spearman`). The resamples depend only on ``(n units, n_resamples, seed)``, so a baseline's
scores are drawn once and compared with every row of a table. :func:`compare_combined` tests a weighted sum of such
differences over several disjoint sets of units (the tasks of a multi-task score), each resampled independently
(a stratified bootstrap: each set keeps its size in every resample).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from layerwise.evaluation.resampled import (
    GoldSide,
    bootstrap_counts,
    gold_side,
    resampled_pearson,
    resampled_spearman,
    spearman_with,
)

__all__ = [
    "BOOTSTRAP_TEST",
    "BootstrapScores",
    "SignificanceResult",
    "SpearmanResamples",
    "bootstrap_counts",
    "bootstrap_scores",
    "compare_combined",
    "compare_scores",
    "paired_bootstrap_accuracy",
    "paired_bootstrap_spearman",
    "resampled_pearson",
    "resampled_spearman",
]

#: The test's name as pages print it.
BOOTSTRAP_TEST = "paired bootstrap (two-sided)"


@dataclass(frozen=True)
class SignificanceResult:
    """One paired test of ``a`` against ``b``."""

    test: str  # BOOTSTRAP_TEST
    metric: str  # "spearman" or "accuracy"
    difference: float  # observed statistic: mean over evaluations of score(a) - score(b) (x100 for Spearman)
    p_value: float
    n_resamples: int
    seed: int
    n_units: int  # units resampled (pairs or examples): the union of the evaluations' rows

    def significant(self, alpha: float = 0.01) -> bool:
        return self.p_value < alpha

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "SignificanceResult":
        return cls(**d)


def _evaluations(a, b, rows, n: int) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """(a (K, n), b (K, n), rows: K index arrays) with shapes checked; ``rows=None`` is one evaluation of all."""
    a, b = np.atleast_2d(np.asarray(a, dtype=np.float64)), np.atleast_2d(np.asarray(b, dtype=np.float64))
    rows = [np.arange(n)] if rows is None else [np.asarray(r, dtype=np.int64) for r in rows]
    if len(a) == 1 and len(b) == 1:  # one system output (n,) read by every evaluation
        a, b = np.repeat(a, len(rows), axis=0), np.repeat(b, len(rows), axis=0)
    if a.shape != (len(rows), n) or b.shape != (len(rows), n):
        raise ValueError(f"a and b must have shape ({n},) or (len(rows), {n}) = ({len(rows)}, {n}); "
                         f"got {a.shape} and {b.shape}")
    for r in rows:
        if len(r) < 2 or r.min() < 0 or r.max() >= n:
            raise ValueError(f"every evaluation needs at least 2 row indices in 0..{n - 1}")
    return a, b, rows


def _cells(rows: list[np.ndarray], groups: np.ndarray | None, aggregation: str) -> list[list[np.ndarray]]:
    """Per evaluation, the row sets whose Spearman is aggregated (one set for ``all``, one per group otherwise)."""
    if aggregation == "all" or groups is None:
        return [[r] for r in rows]
    if aggregation not in ("wmean", "mean"):
        raise ValueError(f"unknown aggregation {aggregation!r}; valid: all, wmean, mean")
    groups = np.asarray(groups)
    return [[r[groups[r] == g] for g in np.unique(groups[r])] for r in rows]


def _p_value(observed: float, resampled: np.ndarray) -> float:
    """Two-sided p: resamples at least as far from ``observed`` as it is from 0; NaN counts as far (conservative).

    "As far" allows 1e-9 of the statistic's scale: a discrete statistic (an accuracy) lands exactly on the boundary
    in many resamples, and the same difference summed in another order must not fall on the other side of it."""
    tol = 1e-9 * max(1.0, abs(observed))
    far = int(np.sum(~(np.abs(resampled - observed) < abs(observed) - tol)))
    return (1 + far) / (len(resampled) + 1)


def _run(stat, n: int, n_resamples: int, seed: int) -> tuple[float, float]:
    """(observed statistic, p-value): ``stat(counts (B, n)) -> (B,)`` on all-ones and on the resamples."""
    observed = float(stat(np.ones((1, n), dtype=np.int64))[0])
    return observed, _p_value(observed, np.concatenate([stat(c) for c in bootstrap_counts(n, n_resamples, seed)]))


def paired_bootstrap_spearman(gold: np.ndarray, a: np.ndarray, b: np.ndarray, *, rows: Sequence | None = None,
                              groups: np.ndarray | None = None, aggregation: str = "all",
                              n_resamples: int = 10_000, seed: int = 0) -> SignificanceResult:
    """Test the difference of Spearman correlations (x100) of two systems' scores ``a``, ``b`` with ``gold`` (n,).

    ``a``, ``b``: (n,) (the same output in every evaluation), or (K, n) with ``rows`` K index arrays (evaluation k reads ``a[k][rows[k]]``).
    ``groups`` (n,) with ``aggregation`` ``wmean``/``mean`` aggregates per-group correlations as
    ``evaluation.metrics`` does (``wmean`` weights by each group's units in the resample)."""
    gold = np.asarray(gold, dtype=np.float64)
    a, b, rows = _evaluations(a, b, rows, len(gold))
    units = np.unique(np.concatenate(rows))
    where = np.full(len(gold), -1)
    where[units] = np.arange(len(units))
    cells = [[where[c] for c in cs] for cs in _cells(rows, groups, aggregation)]
    g, a, b = gold[units], a[:, units], b[:, units]

    def stat(counts: np.ndarray) -> np.ndarray:
        total = np.zeros(len(counts))
        for k, cs in enumerate(cells):
            sizes = np.stack([counts[:, c].sum(axis=1) for c in cs], axis=1).astype(np.float64)  # (B, groups)
            weights = sizes / sizes.sum(axis=1, keepdims=True) if aggregation == "wmean" else np.full(
                sizes.shape, 1.0 / len(cs))
            diff = np.stack([resampled_spearman(a[k, c], g[c], counts[:, c])
                             - resampled_spearman(b[k, c], g[c], counts[:, c]) for c in cs], axis=1)
            total += (weights * diff).sum(axis=1)
        return 100.0 * total / len(cells)

    observed, p = _run(stat, len(units), n_resamples, seed)
    return SignificanceResult(BOOTSTRAP_TEST, "spearman", observed, p, n_resamples, seed, len(units))


def paired_bootstrap_accuracy(correct_a: np.ndarray, correct_b: np.ndarray, *, rows: Sequence | None = None,
                              n_resamples: int = 10_000, seed: int = 0) -> SignificanceResult:
    """Test the difference of accuracies (x100) of two classifiers from their per-example correctness (n,) or
    (K, n) with ``rows`` (e.g. the test examples of each outer split)."""
    n = np.atleast_2d(np.asarray(correct_a)).shape[-1]
    a, b, rows = _evaluations(correct_a, correct_b, rows, n)
    units = np.unique(np.concatenate(rows))
    where = np.full(n, -1)
    where[units] = np.arange(len(units))
    cells = [where[r] for r in rows]
    diff = (a - b)[:, units]

    def stat(counts: np.ndarray) -> np.ndarray:
        c = counts.astype(np.float64)
        with np.errstate(invalid="ignore"):  # a resample that draws none of a split's examples: nan, as before
            per = [(c[:, r] * diff[k, r]).sum(axis=1) / c[:, r].sum(axis=1) for k, r in enumerate(cells)]
            return 100.0 * np.mean(per, axis=0)

    observed, p = _run(stat, len(units), n_resamples, seed)
    return SignificanceResult(BOOTSTRAP_TEST, "accuracy", observed, p, n_resamples, seed, len(units))


_SCORERS = {"spearman": resampled_spearman, "pearson": resampled_pearson}


@dataclass(frozen=True)
class BootstrapScores:
    """One system's score (x100) on each of its K evaluations, observed and in every resample of the units."""

    metric: str  # "spearman", "pearson" or "accuracy"
    observed: np.ndarray  # (K,)
    resampled: np.ndarray  # (n_resamples, K)
    n_units: int
    seed: int


class SpearmanResamples:
    """The resamples of ``n`` units with ``gold`` scores (``n_resamples``, ``seed``: :func:`bootstrap_counts`'s), and
    gold's side of each evaluation's Spearman correlation in them, drawn once and shared by every system scored on
    them: a results table scores many systems on the same pairs. :meth:`scores` equals :func:`bootstrap_scores`
    with ``metric="spearman"`` (which builds one of these for one system)."""

    def __init__(self, gold: np.ndarray, *, n_resamples: int = 10_000, seed: int = 0):
        self.gold = np.asarray(gold, dtype=np.float64)
        if self.gold.ndim != 1:
            raise ValueError(f"gold must have shape (n,), got {self.gold.shape}")
        self.n_resamples, self.seed = n_resamples, seed
        self._blocks: list[np.ndarray] | None = None
        self._gold_sides: dict[bytes, list[GoldSide]] = {}

    @property
    def _counts(self) -> list[np.ndarray]:
        """The resamples' multiplicities, drawn at first use, in the smallest integer type that holds them."""
        if self._blocks is None:
            self._blocks = [c.astype(np.min_scalar_type(c.max()))
                            for c in bootstrap_counts(len(self.gold), self.n_resamples, self.seed)]
        return self._blocks

    def _sides(self, r: np.ndarray) -> list[GoldSide]:
        key = r.tobytes()
        if key not in self._gold_sides:
            self._gold_sides[key] = [gold_side(self.gold[r], c[:, r]) for c in self._counts]
        return self._gold_sides[key]

    def scores(self, outputs, rows: Sequence | None = None) -> BootstrapScores:
        """One system's Spearman (x100) on each evaluation: ``outputs`` (n,) or (K, n), ``rows`` as
        :func:`bootstrap_scores` takes them."""
        n = len(self.gold)
        a = np.atleast_2d(np.asarray(outputs, dtype=np.float64))
        a, _, rows = _evaluations(a, a, rows, n)
        ones = np.ones((1, n), dtype=np.int64)
        observed = 100.0 * np.array([resampled_spearman(a[k, r], self.gold[r], ones[:, r])[0]
                                     for k, r in enumerate(rows)])
        resampled = 100.0 * np.concatenate(
            [np.stack([spearman_with(a[k, r], self._sides(r)[i], c[:, r]) for k, r in enumerate(rows)], axis=1)
             for i, c in enumerate(self._counts)])
        return BootstrapScores("spearman", observed, resampled, n, self.seed)


def bootstrap_scores(outputs, rows: Sequence | None = None, *, metric: str, gold: np.ndarray | None = None,
                     n_resamples: int = 10_000, seed: int = 0) -> BootstrapScores:
    """A system's scores on resamples of the ``n`` units, for :func:`compare_scores`.

    ``outputs``: (n,) or (K, n), evaluation k scoring ``outputs[k][rows[k]]`` (``rows=None``: one evaluation of all
    units): predicted similarities with ``gold`` (n,) for ``spearman``/``pearson``, per-example correctness (0/1, or
    a fraction) for ``accuracy``. Every unit is resampled, whether or not an evaluation reads it, so two systems
    over the same ``n`` units with the same ``n_resamples`` and ``seed`` share their resamples."""
    if metric not in (*_SCORERS, "accuracy"):
        raise ValueError(f"unknown metric {metric!r}; valid: {', '.join((*_SCORERS, 'accuracy'))}")
    outputs = np.atleast_2d(np.asarray(outputs, dtype=np.float64))
    n = outputs.shape[1]
    if metric != "accuracy":
        gold = np.asarray(gold, dtype=np.float64)
        if gold.shape != (n,):
            raise ValueError(f"gold must have shape ({n},), got {gold.shape}")
    if metric == "spearman":
        return SpearmanResamples(gold, n_resamples=n_resamples, seed=seed).scores(outputs, rows)
    a, _, rows = _evaluations(outputs, outputs, rows, n)

    def scores(counts: np.ndarray) -> np.ndarray:  # (B, K)
        if metric == "accuracy":
            c = counts.astype(np.float64)
            with np.errstate(invalid="ignore"):
                return 100.0 * np.stack([(c[:, r] * a[k, r]).sum(axis=1) / c[:, r].sum(axis=1)
                                         for k, r in enumerate(rows)], axis=1)
        return 100.0 * np.stack([_SCORERS[metric](a[k, r], gold[r], counts[:, r]) for k, r in enumerate(rows)],
                                axis=1)

    observed = scores(np.ones((1, n), dtype=np.int64))[0]
    resampled = np.concatenate([scores(c) for c in bootstrap_counts(n, n_resamples, seed)])
    return BootstrapScores(metric, observed, resampled, n, seed)


def compare_scores(a: BootstrapScores, b: BootstrapScores) -> SignificanceResult:
    """Test ``mean_k a_k - mean_m b_m`` (the difference of the two systems' mean scores over their evaluations, e.g.
    their seeds) on the resamples both were scored on."""
    if (a.metric, a.n_units, a.seed, len(a.resampled)) != (b.metric, b.n_units, b.seed, len(b.resampled)):
        raise ValueError("the two systems were scored on different resamples or metrics: "
                         f"{(a.metric, a.n_units, a.seed, len(a.resampled))} vs "
                         f"{(b.metric, b.n_units, b.seed, len(b.resampled))}")
    observed = float(a.observed.mean() - b.observed.mean())
    p = _p_value(observed, a.resampled.mean(axis=1) - b.resampled.mean(axis=1))
    return SignificanceResult(BOOTSTRAP_TEST, a.metric, observed, p, len(a.resampled), a.seed, a.n_units)


def compare_combined(terms: Sequence[tuple[BootstrapScores, BootstrapScores, float]]) -> SignificanceResult:
    """Test ``sum_t w_t (mean_k a_t,k - mean_m b_t,m)`` for ``terms`` ``(a_t, b_t, w_t)`` over disjoint sets of
    units, e.g. a score that averages several tasks' scores, each task's units resampled on its own.

    Every term's two systems share their resamples (as :func:`compare_scores` requires), all terms have the same
    number of resamples, and the terms' seeds differ, so resample ``i`` of the combined statistic draws each set
    independently (a stratified bootstrap). ``metric`` is ``"combined"``, ``n_units`` the sum of the sets' units,
    ``seed`` the first term's."""
    if not terms:
        raise ValueError("compare_combined needs at least one (a, b, weight) term")
    for a, b, _ in terms:
        compare_scores(a, b)  # the same checks: one metric, the same resamples on both sides
    seeds = [a.seed for a, _, _ in terms]
    if len(set(seeds)) != len(seeds) or len({len(a.resampled) for a, _, _ in terms}) != 1:
        raise ValueError(f"the terms must be drawn with distinct seeds and as many resamples each; seeds {seeds}, "
                         f"resamples {[len(a.resampled) for a, _, _ in terms]}")
    observed = float(sum(w * (a.observed.mean() - b.observed.mean()) for a, b, w in terms))
    draws = sum(w * (a.resampled.mean(axis=1) - b.resampled.mean(axis=1)) for a, b, w in terms)
    a0 = terms[0][0]
    return SignificanceResult(BOOTSTRAP_TEST, "combined", observed, _p_value(observed, draws), len(a0.resampled),
                              a0.seed, sum(a.n_units for a, _, _ in terms))
