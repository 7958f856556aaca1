"""Is LC's transfer accuracy different from a baseline's? Per-example correctness kept per outer split, and the
paired bootstrap over the test examples (:func:`layerwise.evaluation.significance.paired_bootstrap_accuracy`).

Each outer split keeps, per method, whether each of its test examples (in the order of its test rows) was
classified correctly, packed eight to a byte in base64 by :mod:`layerwise.evaluation.unit_outputs` (a few kB per
split even for SST-2). The outer splits' test parts are seeded shuffles that overlap; the bootstrap draws the task's
examples once per resample and every split keeps the drawn examples of its own test part, so the statistic (the mean
over splits of LC's accuracy minus the baseline's) is resampled with that overlap kept.

:func:`protocol_significance` compares two runs of one task on the same outer splits (e.g. the paper's exact subset
choice against the default ridge screen): the same test, one method's correctness taken from each run.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np

from layerwise.evaluation.classification import outer_splits
from layerwise.evaluation.significance import paired_bootstrap_accuracy
from layerwise.evaluation.unit_outputs import unpack_correct

__all__ = ["correct_digest", "lc_significance", "protocol_significance"]


def _matrix(correct: list[dict[str, str]], rows: list[np.ndarray], n_examples: int, method: str) -> np.ndarray:
    """(splits, n_examples) correctness of ``method``: split k's packed outputs placed at its test rows."""
    out = np.zeros((len(rows), n_examples))
    for k, (c, r) in enumerate(zip(correct, rows, strict=True)):
        out[k, r] = unpack_correct(c[method], len(r))
    return out


def lc_significance(correct: list[dict[str, str]], rows: list[np.ndarray], n_examples: int, *, n_resamples: int,
                    seed: int, method: str = "lc") -> dict[str, dict]:
    """``method`` against every other method, over the outer splits: ``correct[k]`` (method -> packed correctness
    of split k's test examples ``rows[k]``). Returns baseline -> SignificanceResult dict; {} without correctness."""
    if not correct or any(method not in c for c in correct):
        return {}
    a = _matrix(correct, rows, n_examples, method)
    return {other: paired_bootstrap_accuracy(a, _matrix(correct, rows, n_examples, other), rows=rows,
                                             n_resamples=n_resamples, seed=seed).to_dict()
            for other in [m for m in correct[0] if m != method and all(m in c for c in correct)]}


def protocol_significance(a, b, labels: np.ndarray, *, n_resamples: int, seed: int = 0, method_a: str = "lc",
                          method_b: str = "lc", splits: int | None = None) -> dict:
    """``method_a`` of run ``a`` against ``method_b`` of run ``b``, two runs of one task on the same outer splits
    (two :class:`~layerwise.methods.lc.transfer.TransferResult`, not imported here: that module imports this one)
    (``labels``: the task's, which draw those splits): a SignificanceResult dict. ``splits``: the first that many
    outer splits of each (a run cut short after them, ``run_transfer(max_splits=...)``); None: every one of
    ``n_outer``, both runs finished. Raises ValueError, saying what differs, when the runs cannot be paired."""
    labels = np.asarray(labels)
    differ = [k for k in ("task", "n_examples", "n_outer", "seed") if getattr(a, k) != getattr(b, k)]
    if differ or a.n_examples != len(labels):
        raise ValueError(f"runs of {a.task!r} and {b.task!r} cannot be paired: they differ in "
                         f"{differ or ['the number of examples of the labels given']}; compare runs of one task "
                         "with the same outer splits")
    n = a.n_outer if splits is None else splits
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= a.n_outer:
        raise ValueError(f"splits must be None or a whole number in 1..{a.n_outer}, got {splits!r}")
    for run, method in ((a, method_a), (b, method_b)):
        if len(run.splits) < n or any(method not in s.correct for s in run.splits[:n]):
            raise ValueError(f"the {run.task} run has {len(run.splits)} of the {n} outer splits compared, or no "
                             f"per-example outputs of {method!r}; finish them with the current code first")
    rows = [te for _, te in outer_splits(labels, n_splits=a.n_outer, seed=a.seed)][:n]
    return paired_bootstrap_accuracy(_matrix([s.correct for s in a.splits[:n]], rows, len(labels), method_a),
                                     _matrix([s.correct for s in b.splits[:n]], rows, len(labels), method_b),
                                     rows=rows, n_resamples=n_resamples, seed=seed).to_dict()


def correct_digest(result) -> str:
    """A short hash of a TransferResult's per-example outputs: a stored comparison is shown only beside the runs it tested."""
    text = json.dumps([s.correct for s in result.splits], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
