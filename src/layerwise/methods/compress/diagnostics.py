"""What a fitted compression's candidates say about its students before anyone trusts them: a student whose dev
Spearman is below the untrained cut of its depth (the same layers, no training) failed to train (as
all-mpnet-base-v2's depth-9 student did at a learning rate of 1e-3 on ``docs/results/compress.md``, where too high a
rate is the likeliest cause).

``layerwise compress`` prints :func:`failed_student_lines` after the fit and writes them into its report; the results
page names the same students (``benchmarks.compress.students_report``)::

    est.fit(corpus, dev)
    for student, cut in failed_students(est.candidates_):
        print(student.name, student.dev, "below", cut.dev)
"""

from __future__ import annotations

from layerwise.methods.compress.build import STUDENTS
from layerwise.methods.compress.frontier import Candidate

__all__ = ["failed_student_lines", "failed_students"]


def failed_students(candidates: list[Candidate]) -> list[tuple[Candidate, Candidate]]:
    """Each student (torch) among ``candidates`` that scores below the untrained cut of its depth on dev, with that
    cut, deepest first (a student whose depth has no plain cut among ``candidates`` is not judged)."""
    cuts = {c.depth: c for c in candidates if c.recipe == "cut" and c.backend == "torch"}
    return [(c, cuts[c.depth]) for c in sorted(candidates, key=lambda c: -c.depth)
            if c.recipe in STUDENTS and c.backend == "torch" and c.depth in cuts and c.dev < cuts[c.depth].dev]


def failed_student_lines(candidates: list[Candidate], lr: float) -> list[str]:
    """One warning per failed student (:func:`failed_students`), naming the fix: a lower learning rate."""
    return [f"warning: {c.recipe}-l{c.depth} failed to train: dev Spearman {c.dev:.2f}, below the untrained cut at "
            f"its depth ({cut.dev:.2f}); its candidates are measured as they are. Train again with a lower learning "
            f"rate (this run: --lr {lr:g}; try {lr / 10:g}) in a new --output folder"
            for c, cut in failed_students(candidates)]
