"""Shared classification evaluation: seeded stratified outer/inner splits and the paper's logistic regression.

Used by the BERT-LC transfer protocol (``methods/lc/transfer.py``) and its ablations; any probe that trains a
linear classifier on fixed sentence vectors can use it.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

__all__ = ["CLASSIFIER", "INNER_KINDS", "fit_logreg", "inner_kfold", "inner_splits", "logreg_accuracy",
           "logreg_correct", "outer_splits", "parallel_map"]

# scikit-learn LogisticRegression arguments of the paper's classifier. C = 10 is our reading of the
# paper's "regularization parameter 10" (scikit-learn's C is the inverse of the penalty strength).
CLASSIFIER = {"solver": "saga", "tol": 0.01, "max_iter": 200, "C": 10.0}


def _stratify(labels: np.ndarray, test_fraction: float) -> np.ndarray | None:
    """Labels to stratify on, or None when a class is too small for a stratified split."""
    counts = np.bincount(labels)
    counts = counts[counts > 0]
    n_test = math.ceil(test_fraction * len(labels))
    if counts.min() < 2 or n_test < len(counts) or len(labels) - n_test < len(counts):
        return None
    return labels


def check_n_splits(n_splits, which: str) -> None:
    """A one-line error unless ``n_splits`` is a whole number >= 1."""
    if isinstance(n_splits, bool) or not isinstance(n_splits, (int, np.integer)) or n_splits < 1:
        raise ValueError(f"{which} splits must be a whole number of at least 1, got {n_splits!r}; e.g. 10")


def outer_splits(labels: np.ndarray, *, n_splits: int, test_fraction: float = 0.15, seed: int = 0):
    """``(train_dev, test)`` index arrays of ``n_splits`` seeded stratified splits (split k: ``seed + k``)."""
    from sklearn.model_selection import train_test_split

    check_n_splits(n_splits, "outer")
    labels = np.asarray(labels)
    idx = np.arange(len(labels))
    out = []
    for k in range(n_splits):
        tr, te = train_test_split(idx, test_size=test_fraction, random_state=seed + k,
                                  stratify=_stratify(labels, test_fraction))
        out.append((np.sort(tr), np.sort(te)))
    return out


def inner_splits(labels: np.ndarray, *, n_splits: int, dev_fraction: float = 0.18, seed: int = 0):
    """``n_splits`` seeded stratified 82/18 splits of positions ``0 .. len(labels)-1``: list of (train, dev)."""
    from sklearn.model_selection import ShuffleSplit, StratifiedShuffleSplit

    check_n_splits(n_splits, "inner")
    labels = np.asarray(labels)
    strat = _stratify(labels, dev_fraction)
    if strat is None:
        splitter = ShuffleSplit(n_splits=n_splits, test_size=dev_fraction, random_state=seed)
        it = splitter.split(labels)
    else:
        splitter = StratifiedShuffleSplit(n_splits=n_splits, test_size=dev_fraction, random_state=seed)
        it = splitter.split(np.zeros(len(labels)), labels)
    return [(np.sort(a), np.sort(b)) for a, b in it]


def inner_kfold(labels: np.ndarray, *, n_splits: int, seed: int = 0):
    """``n_splits``-fold cross-validation of positions ``0 .. len(labels)-1``, shuffled with ``seed`` and stratified
    where every class has ``n_splits`` members (else plain folds): list of (train, dev); each position is in exactly
    one dev fold. The BERT-LC paper's "10-fold inner cross-validation"."""
    from sklearn.model_selection import KFold, StratifiedKFold

    check_n_splits(n_splits, "inner")
    labels = np.asarray(labels)
    if n_splits < 2 or n_splits > len(labels):
        raise ValueError(f"k-fold inner cross-validation needs 2 <= folds <= {len(labels)} rows, got {n_splits}")
    counts = np.bincount(labels)
    if counts[counts > 0].min() >= n_splits:
        it = StratifiedKFold(n_splits=n_splits, shuffle=True, random_state=seed).split(np.zeros(len(labels)), labels)
    else:
        it = KFold(n_splits=n_splits, shuffle=True, random_state=seed).split(labels)
    return [(np.sort(a), np.sort(b)) for a, b in it]


#: The inner splits a protocol may use: seeded 82/18 shuffles (the default) or k-fold cross-validation.
INNER_KINDS = {"shuffle": inner_splits, "kfold": inner_kfold}


# ----------------------------------------------------------------------------------------------
# The classifier


def fit_logreg(x: np.ndarray, y: np.ndarray, *, seed: int = 0, **overrides):
    """The paper's classifier fitted on ``x`` (n, p), ``y`` (n,): scikit-learn's LogisticRegression (SAGA).

    A training part with a single class cannot be fitted by scikit-learn; a constant predictor of that
    class is returned instead (it happens only with tiny training sets in the limited-data ablation).
    """
    from sklearn.dummy import DummyClassifier
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    if len(np.unique(y)) < 2:
        return DummyClassifier(strategy="most_frequent").fit(x, y)
    params = {**CLASSIFIER, **overrides}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # SAGA at tol 0.01 / 200 iterations, as the paper
        return LogisticRegression(random_state=seed, **params).fit(x, y)


def logreg_accuracy(x_train, y_train, x_test, y_test, *, seed: int = 0) -> float:
    """Test accuracy (0..1) of :func:`fit_logreg` trained on the training part."""
    return float(fit_logreg(x_train, y_train, seed=seed).score(x_test, y_test))


def logreg_correct(x_train, y_train, x_test, y_test, *, seed: int = 0) -> np.ndarray:
    """Whether :func:`fit_logreg` trained on the training part classifies each test example correctly: (n_test,)
    booleans, whose mean is :func:`logreg_accuracy`."""
    return fit_logreg(x_train, y_train, seed=seed).predict(x_test) == np.asarray(y_test)


def parallel_map(jobs: list, n_jobs: int) -> list:
    """Run zero-argument callables, in threads when n_jobs > 1 (SAGA releases the GIL)."""
    if n_jobs <= 1 or len(jobs) <= 1:
        return [job() for job in jobs]
    from joblib import Parallel, delayed

    return Parallel(n_jobs=n_jobs, prefer="threads")(delayed(job)() for job in jobs)

