"""Significance of a results page's rows against their baseline row, from per-unit outputs kept in the parts.

A part that keeps its outputs stores, per STS test set, the predicted similarity of every pair as its dense rank
(:func:`layerwise.evaluation.unit_outputs.pack_ranks`: the Spearman correlation of every resample is exact); the gold scores they are correlated with are stored once per
page, in a part keyed on the sets' content checksums (:func:`save_gold`, :func:`load_gold`), so ``render`` reads the
store only. :class:`STSComparison` tests a row (one or several runs, e.g. seeds) against its baseline row: the
statistic is the difference of the rows' mean Spearman (x100) over their runs and the given sets (each run scored on
each set is one evaluation), and the paired bootstrap draws the union of the sets' pairs
(:func:`layerwise.evaluation.significance.compare_scores`). A part stored before its outputs were kept renders
"not tested" (:func:`p_cell`).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence

import numpy as np

from layerwise.benchmarks.store import Part, ResultsStore
from layerwise.evaluation.retrieval import reciprocal_ranks
from layerwise.evaluation.significance import (
    BootstrapScores,
    SignificanceResult,
    SpearmanResamples,
    compare_scores,
    paired_bootstrap_accuracy,
)
from layerwise.evaluation.unit_outputs import pack_ranks, unpack_ranks, unpack_small

__all__ = ["ALPHA", "GOLD_PART", "N_RESAMPLES", "NOT_TESTED", "OUTPUTS_KEY", "SEED", "STSComparison", "load_gold", "mrr_test",
           "p_cell",
           "pack_predictions", "save_gold", "significance_note",
           "without_outputs"]

ALPHA = 0.01  # the level every page reports
N_RESAMPLES = 2000  # resamples of the paired bootstrap
SEED = 0  # its seed (the same resamples for every row of a table)
GOLD_PART = "gold-scores"
NOT_TESTED = "not tested"
#: The key entry of a part that keeps its per-unit outputs: a part stored before had no such entry, so the next
#: ``layerwise results run`` computes it again under the new key (the newer part wins; the old one stays).
OUTPUTS_KEY = "outputs"


def without_outputs(key: dict) -> dict:
    """``key`` without :data:`OUTPUTS_KEY`: the key the same part had before it kept its outputs."""
    return {k: v for k, v in key.items() if k != OUTPUTS_KEY}


def p_cell(result: SignificanceResult | None) -> str:
    """``0.0012 (yes)`` where p < ALPHA, ``0.4000 (no)`` otherwise, ``not tested`` without outputs."""
    if result is None:
        return NOT_TESTED
    return f"{result.p_value:.4f} ({'yes' if result.p_value < ALPHA else 'no'})"


def significance_note(what: str, baseline: str, statistic: str, rerun: str) -> str:
    """The sentence beside a table that names the test, its level, the baseline and how an old part is tested."""
    return (f"*p vs {baseline}*: {what} against {baseline}, paired bootstrap (two-sided) over the test pairs, "
            f"{N_RESAMPLES} resamples, seed {SEED}; the statistic is {statistic}; *yes* where p < {ALPHA}. "
            f"*{NOT_TESTED}*: a part computed before per-pair predictions were kept; `{rerun}` recomputes it.")


def _gold_key(checksums: Mapping[str, str]) -> dict:
    return {"sts": dict(sorted(checksums.items())), "what": "gold scores of the STS test sets, for the paired tests"}


def save_gold(store: ResultsStore, page: str, gold: Mapping[str, np.ndarray], checksums: Mapping[str, str],
              runs: list | None = None) -> None:
    """Store the gold scores (float64, base64) of each set under its content checksum, unless stored already."""
    key = _gold_key(checksums)
    if store.load(page, GOLD_PART, key) is None:
        payload = {name: base64.b64encode(np.asarray(g, dtype="<f8").tobytes()).decode("ascii") for name, g in sorted(gold.items())}
        store.save(Part(page, GOLD_PART, key, payload, runs=runs or []))


def load_gold(store: ResultsStore, page: str, checksums: Mapping[str, str]) -> dict[str, np.ndarray] | None:
    """The gold scores :func:`save_gold` stored for exactly these sets' checksums, or None."""
    part = store.load(page, GOLD_PART, _gold_key(checksums))
    if part is None:
        return None
    return {name: np.frombuffer(base64.b64decode(text), dtype="<f8").copy() for name, text in part.payload.items()}


def pack_predictions(predictions: Mapping[str, np.ndarray]) -> dict[str, str]:
    """{set: predicted similarities (n,)} as the part stores them: their dense ranks (a Spearman test needs no more)."""
    return {name: pack_ranks(p) for name, p in predictions.items()}


class STSComparison:
    """Rows against a baseline on the pairs of several STS test sets (their union resampled together).

    ``gold``: set -> gold scores (n_set,); ``sets``: the sets the statistic averages over (the page's columns).
    A row is a list of runs, each a dict set -> packed predictions (:func:`pack_predictions`); scores of a row
    are computed once per ``name`` (the baseline of a table is scored once)."""

    def __init__(self, gold: Mapping[str, np.ndarray], sets: Sequence[str], *, n_resamples: int = N_RESAMPLES,
                 seed: int = SEED):
        self.sets = list(sets)
        self.sizes = [len(gold[s]) for s in self.sets]
        self.offsets = np.cumsum([0, *self.sizes])
        self.gold = np.concatenate([np.asarray(gold[s], dtype=np.float64) for s in self.sets])
        self.resamples = SpearmanResamples(self.gold, n_resamples=n_resamples, seed=seed)  # shared by every row
        self._scores: dict[str, BootstrapScores] = {}

    def has_outputs(self, runs: Sequence[Mapping[str, str]]) -> bool:
        return bool(runs) and all(all(s in r for s in self.sets) for r in runs)

    def scores(self, name: str, runs: Sequence[Mapping[str, str]]) -> BootstrapScores:
        """One row's scores on every resample: evaluation (run, set) reads that set's pairs."""
        if name not in self._scores:
            outputs, rows = [], []
            for run in runs:
                for s, size, start in zip(self.sets, self.sizes, self.offsets):
                    x = np.zeros(len(self.gold))
                    x[start:start + size] = unpack_ranks(run[s], size)
                    outputs.append(x)
                    rows.append(np.arange(start, start + size))
            self._scores[name] = self.resamples.scores(np.stack(outputs), rows)
        return self._scores[name]

    def test(self, name: str, runs: Sequence[Mapping[str, str]], baseline: str,
             baseline_runs: Sequence[Mapping[str, str]]) -> SignificanceResult | None:
        """``name``'s mean Spearman minus ``baseline``'s, tested; None where either lacks outputs."""
        if not (self.has_outputs(runs) and self.has_outputs(baseline_runs)):
            return None
        return compare_scores(self.scores(name, runs), self.scores(baseline, baseline_runs))


def mrr_test(hits: str | None, baseline_hits: str | None, n_queries: int) -> SignificanceResult | None:
    """MRR@10 (x100) of one search minus a baseline search over the same queries, paired bootstrap over the
    queries (each query's reciprocal rank is its unit); ``hits``: the packed first relevant ranks a search row
    keeps. None where either row was stored without them."""
    if hits is None or baseline_hits is None:
        return None
    return paired_bootstrap_accuracy(reciprocal_ranks(unpack_small(hits, n_queries)),
                                     reciprocal_ranks(unpack_small(baseline_hits, n_queries)),
                                     n_resamples=N_RESAMPLES, seed=SEED)
