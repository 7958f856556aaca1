"""Is LC's transfer accuracy different from a baseline's? Per-example correctness kept per outer split, and the
paired bootstrap over the test examples (:func:`layerwise.evaluation.significance.paired_bootstrap_accuracy`).

Each outer split keeps, per method, whether each of its test examples (in the order of its test rows) was
classified correctly, packed eight to a byte in base64 by :mod:`layerwise.evaluation.unit_outputs` (a few kB per
split even for SST-2). The outer splits' test parts are seeded shuffles that overlap; the bootstrap draws the task's examples once per resample and every split
keeps the drawn examples of its own test part, so the statistic (the mean over splits of LC's accuracy minus the
baseline's) is resampled with that overlap kept.
"""

from __future__ import annotations

import numpy as np

from layerwise.evaluation.significance import paired_bootstrap_accuracy
from layerwise.evaluation.unit_outputs import unpack_correct

__all__ = ["lc_significance"]


def lc_significance(correct: list[dict[str, str]], rows: list[np.ndarray], n_examples: int, *, n_resamples: int,
                    seed: int, method: str = "lc") -> dict[str, dict]:
    """``method`` against every other method, over the outer splits: ``correct[k]`` (method -> packed correctness
    of split k's test examples ``rows[k]``). Returns baseline -> SignificanceResult dict; {} without correctness."""
    if not correct or any(method not in c for c in correct):
        return {}
    out = {}
    for other in [m for m in correct[0] if m != method and all(m in c for c in correct)]:
        a, b = np.zeros((len(rows), n_examples)), np.zeros((len(rows), n_examples))
        for k, (c, r) in enumerate(zip(correct, rows, strict=True)):
            a[k, r], b[k, r] = unpack_correct(c[method], len(r)), unpack_correct(c[other], len(r))
        out[other] = paired_bootstrap_accuracy(a, b, rows=rows, n_resamples=n_resamples, seed=seed).to_dict()
    return out
