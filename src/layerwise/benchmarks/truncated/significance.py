"""Paired tests between groups of TMFT runs (a depth against the full depth, a pre-step against plain TMFT) from
each run's stored test predictions and the gold scores stored once per data checksum.

The statistic is the difference of the two groups' mean test Spearman (x100) over their seeds (every seed of one
group against every seed of the other: ``compare_scores``), resampling the test pairs (2000 resamples, seed 0).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from layerwise.benchmarks.significance_parts import STSComparison
from layerwise.evaluation.significance import SignificanceResult
from layerwise.methods.truncated.run import TMFTResult

__all__ = ["group_test"]


def _runs(results, name: str) -> list[dict]:
    return [{name: r.test_predictions} if r.test_predictions else {} for r in results]


def group_test(gold: Mapping[str, np.ndarray], results: tuple[TMFTResult, ...],
               baseline: tuple[TMFTResult, ...]) -> SignificanceResult | None:
    """``results``' mean test Spearman minus ``baseline``'s, tested; None where a run has no stored predictions,
    the runs read different data, or no gold scores are stored for it. ``gold``: data checksum -> gold scores."""
    data = [r.data for r in (*results, *baseline)]
    if not data or any(d != data[0] for d in data) or len(data[0]) != 1:
        return None
    (name, checksum), = data[0].items()
    if checksum not in gold:
        return None
    return STSComparison({name: gold[checksum]}, [name]).test("row", _runs(results, name), "baseline",
                                                                _runs(baseline, name))
