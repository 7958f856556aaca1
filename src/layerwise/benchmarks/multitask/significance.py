"""Paired tests of the findings: an experiment's test scores against its reference experiment's, from the per-example
test outputs each stored run keeps (:func:`~layerwise.methods.multitask.run.pack_test_outputs`).

Per score, the statistic is the difference of the two experiments' test scores (x100), each the mean over its seeds
(every seed of one against every seed of the other: :func:`~layerwise.evaluation.significance.compare_scores`):

- SST acc and PARA acc: accuracy from each example's correctness, the test examples resampled;
- STS Pearson: Pearson's r with the gold scores (stored once per test checksum), the test pairs resampled;
- overall = (SST acc + PARA acc + (STS Pearson + 1) / 2) / 3: the same combination of the three resampled scores,
  each task's units drawn independently (:func:`~layerwise.evaluation.significance.compare_combined`), so its
  difference is ``dSST / 3 + dPARA / 3 + dSTS / 6``.

Each task has its own resamples (seeds ``SEED``, ``SEED + 1``, ``SEED + 2`` for SST, PARA, STS), shared by every
experiment, so a reference is scored once. A score is "not tested" (None) where a run of either side was stored
before its outputs were kept, the two sides were scored on different test units (checksums), or the STS gold is
not stored.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from layerwise.benchmarks.significance_parts import N_RESAMPLES, SEED
from layerwise.evaluation.significance import (
    BootstrapScores,
    SignificanceResult,
    bootstrap_scores,
    compare_combined,
    compare_scores,
)
from layerwise.methods.multitask.run import ExperimentResult, unpack_test_output

__all__ = ["OVERALL_WEIGHTS", "SCORE_TASKS", "ExperimentTests"]

#: score -> (task, metric of the paired test, the seed offset of that task's resamples)
SCORE_TASKS = {"sst_acc": ("sst", "accuracy", 0), "para_acc": ("para", "accuracy", 1),
               "sts_pearson": ("sts", "pearson", 2)}
#: the overall score's weight on each x100 score: (S + P + (R + 100) / 2) / 3
OVERALL_WEIGHTS = {"sst_acc": 1 / 3, "para_acc": 1 / 3, "sts_pearson": 1 / 6}


class ExperimentTests:
    """Paired tests between experiments' stored runs; ``gold(checksum)`` gives the STS test gold (or None).

    ``runs``: experiment name -> its stored runs (seeds). Each experiment's scores are drawn once per score."""

    def __init__(self, runs: dict[str, list[ExperimentResult]], gold: Callable[[str], np.ndarray | None], *,
                 n_resamples: int = N_RESAMPLES, seed: int = SEED):
        self.runs, self.gold = runs, gold
        self.n_resamples, self.seed = n_resamples, seed
        self._scores: dict[tuple[str, str], BootstrapScores] = {}

    def _entries(self, name: str, task: str) -> list[dict] | None:
        entries = [r.test_outputs.get(task) for r in self.runs.get(name, [])]
        return entries if entries and all(e is not None for e in entries) else None

    def _checksum(self, name: str, task: str) -> str | None:
        entries = self._entries(name, task)
        sums = {e["checksum"] for e in entries or []}
        return sums.pop() if len(sums) == 1 else None

    def scores(self, name: str, score: str) -> BootstrapScores | None:
        """``name``'s ``score`` (x100) on each of its seeds, observed and on every resample; None: not testable."""
        if (name, score) not in self._scores:
            task, metric, offset = SCORE_TASKS[score]
            checksum = self._checksum(name, task)
            gold = None if checksum is None or metric == "accuracy" else self.gold(checksum)
            if checksum is None or (metric != "accuracy" and gold is None):
                return None
            outputs = np.stack([unpack_test_output(e) for e in self._entries(name, task)]).astype(np.float64)
            self._scores[(name, score)] = bootstrap_scores(
                outputs, [np.arange(outputs.shape[1])] * len(outputs), metric=metric, gold=gold,
                n_resamples=self.n_resamples, seed=self.seed + offset)
        return self._scores[(name, score)]

    def test(self, name: str, reference: str, score: str) -> SignificanceResult | None:
        """``name``'s mean ``score`` minus ``reference``'s (``"overall"``: the combined statistic), tested; None
        where a side has no outputs, the sides read different test units, or the STS gold is missing."""
        if score == "overall":
            parts = [(self.test(name, reference, s), s) for s in OVERALL_WEIGHTS]
            if any(p is None for p, _ in parts):
                return None
            return compare_combined([(self.scores(name, s), self.scores(reference, s), OVERALL_WEIGHTS[s])
                                     for s in OVERALL_WEIGHTS])
        task = SCORE_TASKS[score][0]
        if self._checksum(name, task) is None or self._checksum(name, task) != self._checksum(reference, task):
            return None
        a, b = self.scores(name, score), self.scores(reference, score)
        return None if a is None or b is None else compare_scores(a, b)

    def claim_tests(self, experiment: str, reference: str, scores) -> dict[str, SignificanceResult | None]:
        """score -> its test, for the ``scores`` a claim targets and ``"overall"``."""
        return {s: self.test(experiment, reference, s) for s in dict.fromkeys((*scores, "overall"))}
