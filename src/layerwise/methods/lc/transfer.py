"""The BERT-LC transfer protocol: layer combination as features for a logistic-regression classifier.

Protocol (Hosseini et al. 2023, section 4), for one task with all of its files pooled:

1. ``n_outer`` seeded, stratified outer splits: 85 % train-dev / 15 % test (split ``k`` uses ``seed + k``).
2. On train-dev, ``n_inner`` seeded, stratified 82 % / 18 % splits score every layer subset of at most
   ``max_layers`` hidden states by its mean held-out accuracy; the best subset is LC's choice.
3. The classifier is scikit-learn's ``LogisticRegression(solver="saga", tol=0.01, max_iter=200, C=10)``
   (C = 10 is our reading of the paper's "regularization parameter 10"), fitted on all of train-dev for
   every method and scored on the test part.

Scoring ~10^3 subsets x 10 inner splits with SAGA is ~10^4 fits per outer split. The fast path here scores
them all with a **closed-form ridge classifier** (one-hot targets, intercept, L2 penalty) built from Gram
blocks: for single-sentence tasks the Gram matrix of a layer mean is a sum of per-layer-pair blocks of
one Gram matrix of the concatenated layers, so every subset and every inner split costs one small
``d x d`` solve. The ``shortlist`` best subsets by that score then get the real SAGA inner cross-validation
and the best of those is chosen (``shortlist=1``: the ridge choice is taken as it is; ``shortlist=None``:
exhaustive SAGA over every subset, the slow reference). What the shortcut costs is measured, not assumed:
see the shortcut check of ``scripts/transfer_results.py`` (``--check-task``, ``--check-splits``).

Pair tasks (MRPC) use SentEval's features ``[u, v, |u - v|, u * v]`` of the two sentences' combinations;
those are not linear in the layers, so their Gram matrices are computed per subset (slower, same result).
Either way the sums over all of a task's rows are kept in the ``RidgeScreen`` between outer splits, so each
outer split pays only for the rows it leaves out.
"""

from __future__ import annotations

import itertools
import logging
import math
import time
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from layerwise.layers import LayerStack, validate_layers
from layerwise.pooling import apply_head, named_selections, random_layers

logger = logging.getLogger(__name__)

__all__ = [
    "CLASSIFIER",
    "TransferFeatures",
    "RidgeScreen",
    "all_subsets",
    "default_max_layers",
    "fit_logreg",
    "logreg_accuracy",
    "outer_splits",
    "inner_splits",
    "pair_features",
    "relative_error_reduction",
    "run_transfer",
    "TransferSplit",
    "TransferResult",
]

# scikit-learn LogisticRegression arguments of the paper's classifier. C = 10 is our reading of the
# paper's "regularization parameter 10" (scikit-learn's C is the inverse of the penalty strength).
CLASSIFIER = {"solver": "saga", "tol": 0.01, "max_iter": 200, "C": 10.0}
DEFAULT_RIDGE_ALPHA = 1e-3  # penalty relative to the mean feature variance (scale-free), see RidgeScreen


def default_max_layers(n_states: int) -> int:
    """The paper's subset-size cap for classifiers: 4 for models with at most 13 hidden states, else 3."""
    return 4 if n_states <= 13 else 3


def all_subsets(n_states: int, max_layers: int) -> list[tuple[int, ...]]:
    """Every non-empty subset of ``range(n_states)`` with at most ``max_layers`` members, by size then lexically."""
    if not 1 <= max_layers:
        raise ValueError(f"max_layers must be at least 1, got {max_layers}")
    return [c for k in range(1, min(max_layers, n_states) + 1) for c in itertools.combinations(range(n_states), k)]


def pair_features(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """SentEval's pair features ``[u, v, |u - v|, u * v]``: (n, 4d) from two (n, d) arrays."""
    if u.shape != v.shape:
        raise ValueError(f"pair_features needs equal shapes, got {u.shape} and {v.shape}")
    return np.concatenate([u, v, np.abs(u - v), u * v], axis=1)


def relative_error_reduction(acc_method: float, acc_baseline: float) -> float:
    """(A_M - A_B) / (1 - A_B) for accuracies in [0, 1]: the share of the baseline's errors the method removes.

    Negative when the method is worse; undefined (nan) when the baseline makes no errors.
    """
    if not (0.0 <= acc_method <= 1.0 and 0.0 <= acc_baseline <= 1.0):
        raise ValueError(f"accuracies must lie in [0, 1], got {acc_method} and {acc_baseline}")
    if acc_baseline == 1.0:
        return float("nan")
    return (acc_method - acc_baseline) / (1.0 - acc_baseline)


# ----------------------------------------------------------------------------------------------
# Features


@dataclass(frozen=True)
class TransferFeatures:
    """Per-layer vectors of one task's examples and their labels.

    ``first`` (and, for pair tasks, ``second``) are layer stacks of n examples; ``labels`` (n,) ints in
    ``0 .. n_classes - 1``. ``head`` is the checkpoint's trained pooler head ``(weight, bias)`` for LC + MLP,
    or None.
    """

    first: LayerStack
    labels: np.ndarray
    n_classes: int
    second: LayerStack | None = None
    head: tuple[np.ndarray, np.ndarray] | None = None

    def __post_init__(self) -> None:
        labels = np.asarray(self.labels, dtype=np.int64)
        object.__setattr__(self, "labels", labels)
        n = len(self.first)
        if n == 0:
            raise ValueError("TransferFeatures needs at least one example")
        if labels.shape != (n,):
            raise ValueError(f"{labels.shape[0] if labels.ndim else 0} labels for {n} encoded examples")
        if self.second is not None and (len(self.second) != n or self.second.mean.shape != self.first.mean.shape):
            raise ValueError(f"second stack of shape {self.second.mean.shape} does not match {self.first.mean.shape}")
        if labels.min() < 0 or labels.max() >= self.n_classes:
            raise ValueError(f"labels must lie in [0, {self.n_classes}), got {labels.min()}..{labels.max()}")

    def __len__(self) -> int:
        return len(self.first)

    @property
    def n_states(self) -> int:
        return self.first.n_states

    @property
    def is_pair(self) -> bool:
        return self.second is not None

    def take(self, idx) -> "TransferFeatures":
        idx = np.asarray(idx, dtype=np.int64)
        return TransferFeatures(
            first=self.first.take(idx), labels=self.labels[idx], n_classes=self.n_classes,
            second=None if self.second is None else self.second.take(idx), head=self.head,
        )

    def features(self, layers, kind: str = "mean", *, head: bool = False, rows=None) -> np.ndarray:
        """Classifier input of the combination of ``layers`` (``kind`` "mean" or "cls") for ``rows`` (default
        all): (n_rows, d), or (n_rows, 4d) for pair tasks. ``head=True`` feeds it through the pooler head (LC + MLP).
        """
        layers = list(validate_layers(layers, self.n_states))
        if head and self.head is None:
            raise ValueError("this model has no trained pooler head: LC + MLP is not available")
        if kind not in ("mean", "cls"):
            raise ValueError(f"unknown kind {kind!r}; valid: 'mean', 'cls'")
        rows = np.arange(len(self)) if rows is None else np.asarray(rows, dtype=np.int64)

        def one(stack: LayerStack) -> np.ndarray:
            src = stack.mean if kind == "mean" else stack.cls
            x = src[np.ix_(rows, layers)].mean(axis=1)
            return apply_head(x, *self.head) if head else x

        u = one(self.first)
        return u if self.second is None else pair_features(u, one(self.second))


# ----------------------------------------------------------------------------------------------
# Splits


def _stratify(labels: np.ndarray, test_fraction: float) -> np.ndarray | None:
    """Labels to stratify on, or None when a class is too small for a stratified split."""
    counts = np.bincount(labels)
    counts = counts[counts > 0]
    n_test = math.ceil(test_fraction * len(labels))
    if counts.min() < 2 or n_test < len(counts) or len(labels) - n_test < len(counts):
        return None
    return labels


def _check_n_splits(n_splits, which: str) -> None:
    if isinstance(n_splits, bool) or not isinstance(n_splits, (int, np.integer)) or n_splits < 1:
        raise ValueError(f"{which} splits must be a whole number of at least 1, got {n_splits!r}; e.g. 10")


def outer_splits(labels: np.ndarray, *, n_splits: int, test_fraction: float = 0.15, seed: int = 0):
    """``(train_dev, test)`` index arrays of ``n_splits`` seeded stratified splits (split k: ``seed + k``)."""
    from sklearn.model_selection import train_test_split

    _check_n_splits(n_splits, "outer")
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
    _check_n_splits(n_splits, "inner")
    from sklearn.model_selection import ShuffleSplit, StratifiedShuffleSplit

    labels = np.asarray(labels)
    strat = _stratify(labels, dev_fraction)
    if strat is None:
        splitter = ShuffleSplit(n_splits=n_splits, test_size=dev_fraction, random_state=seed)
        it = splitter.split(labels)
    else:
        splitter = StratifiedShuffleSplit(n_splits=n_splits, test_size=dev_fraction, random_state=seed)
        it = splitter.split(np.zeros(len(labels)), labels)
    return [(np.sort(a), np.sort(b)) for a, b in it]


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


def _parallel(jobs: list, n_jobs: int) -> list:
    """Run zero-argument callables, in threads when n_jobs > 1 (SAGA releases the GIL)."""
    if n_jobs <= 1 or len(jobs) <= 1:
        return [job() for job in jobs]
    from joblib import Parallel, delayed

    return Parallel(n_jobs=n_jobs, prefer="threads")(delayed(job)() for job in jobs)


# ----------------------------------------------------------------------------------------------
# Closed-form ridge screen


class RidgeScreen:
    """Held-out accuracy of a closed-form ridge classifier for every layer subset and every split.

    For a subset S the features are ``x_S = mean_{l in S} x_l`` (single-sentence tasks) or
    ``pair_features`` of the two sentences' ``x_S`` (pair tasks). The classifier regresses one-hot labels
    with an intercept: ``W = (X_c^T X_c + a I)^{-1} X_c^T Y_c`` on centred training features, predicting the
    arg-max column. The penalty is scale-free: ``a = alpha * trace(X_c^T X_c) / p`` (p features).

    Single-sentence tasks never build ``x_S``: the Gram matrix of the concatenated layers ``[x_0 .. x_L]``
    is computed once per part (train-dev, and the held-out part of each split, subtracted to get the
    training part), and ``X_S^T X_S`` is a weighted sum of its per-layer-pair blocks. Pair tasks build
    their features per subset. Either way the sums over *all* rows are kept (up to ``cache_bytes``), so a
    later call on a large part of the data (the next outer split's train-dev) costs only the rows left out.
    Gram matrices are float64 ``x.T @ x`` in numpy, which BLAS computes as a symmetric rank-k update.
    The slow twin the tests compare with is scikit-learn's ``Ridge`` on explicitly built features.
    """

    def __init__(self, data: TransferFeatures, *, alpha: float = DEFAULT_RIDGE_ALPHA, kind: str = "mean",
                 dim: int | None = None, chunk_bytes: float = 6e8, cache_bytes: float = 3e9):
        if dim is not None and (int(dim) < 1 or data.is_pair):
            raise ValueError(f"screen dim must be a positive int for single-sentence tasks (got {dim}; "
                             f"pair task: {data.is_pair}); use dim=None for the full vectors")
        if not (math.isfinite(alpha) and alpha > 0):
            raise ValueError(f"ridge alpha must be a finite number above 0, got {alpha}; e.g. 1e-3 (the default)")
        self.dim = None if dim is None else int(dim)
        self.data = data
        self.alpha = float(alpha)
        self.kind = kind
        self.chunk_bytes = chunk_bytes
        self.cache_bytes = cache_bytes
        self._full: dict = {}  # key -> sums over every row of the task (see _part_stats)
        self._cached_bytes = 0
        self._onehot = np.eye(data.n_classes)[data.labels]

    @staticmethod
    def _stats(x: np.ndarray, y: np.ndarray) -> tuple:
        x = np.ascontiguousarray(x, dtype=np.float64)
        return x.T @ x, x.sum(0), x.T @ y, y.sum(0), x.shape[0]

    def _part_stats(self, key, build, rows: np.ndarray) -> tuple:
        """Sums (Gram, feature sums, X^T Y, label sums, n) over ``rows`` of the features ``build(rows)``.

        When ``rows`` is most of the task, the sums over all rows are computed once (kept under ``key``) and
        the rows left out subtracted: exact up to float64 rounding, and much cheaper across outer splits.
        """
        n_all = len(self.data)
        rest = np.setdiff1d(np.arange(n_all), rows)
        if len(rest) >= len(rows) or len(np.unique(rows)) != len(rows):
            return self._stats(build(rows), self._onehot[rows])
        full = self._full.get(key)
        if full is None:
            full = self._stats(build(np.arange(n_all)), self._onehot)
            size = full[0].nbytes
            if self._cached_bytes + size <= self.cache_bytes:
                self._full[key] = full
                self._cached_bytes += size
        if not len(rest):
            return full
        return tuple(a - b for a, b in zip(full, self._stats(build(rest), self._onehot[rest])))

    def scores(self, rows: np.ndarray, splits: Sequence[tuple[np.ndarray, np.ndarray]],
               subsets: Sequence[tuple[int, ...]]) -> np.ndarray:
        """Accuracy (0..1) of shape (len(subsets), len(splits)); split positions index into ``rows``."""
        rows = np.asarray(rows, dtype=np.int64)
        if self.data.is_pair:
            return self._pair_scores(rows, splits, subsets)
        data = self.data
        y = self._onehot[rows]
        labels = torch.from_numpy(data.labels[rows])
        src = data.first.mean if self.kind == "mean" else data.first.cls
        n_states, d = src.shape[1], src.shape[2]
        x_all = np.asarray(src[rows], dtype=np.float64)  # (n, K, d)
        if self.dim is not None and self.dim < d:
            x_all = x_all @ self.basis(torch.from_numpy(x_all)).numpy()
            d = self.dim
            total = self._stats(x_all.reshape(len(rows), -1), y)
        else:
            total = self._part_stats(None, lambda r: src[r].reshape(len(r), -1), rows)
        flat = x_all.reshape(len(rows), n_states * d)
        flat_t = torch.from_numpy(flat)
        member = torch.zeros(len(subsets), n_states, dtype=torch.float64)
        for i, sub in enumerate(subsets):
            member[i, list(sub)] = 1.0
        member /= member.sum(1, keepdim=True)  # row i: the averaging weights of subset i
        coef = _pair_coefficients(member)
        out = np.zeros((len(subsets), len(splits)))
        chunk = max(1, int(self.chunk_bytes // (8 * d * d * 3)))
        for j, (_, dev) in enumerate(splits):
            held = self._stats(flat[dev], y[dev])
            g, sx, xy, ys, n = (torch.from_numpy(np.asarray(a - b)) for a, b in zip(total, held))
            blocks = _symmetric_blocks(g.view(n_states, d, n_states, d))
            x_dev, y_dev = flat_t[dev], labels[dev]
            for c0 in range(0, len(subsets), chunk):
                m = member[c0:c0 + chunk]
                gs = (coef[c0:c0 + chunk] @ blocks).view(len(m), d, d)
                ss = m @ sx.view(n_states, d)
                xys = torch.einsum("bk,kdc->bdc", m, xy.view(n_states, d, -1))
                w, b = self.solve(gs, ss, xys, ys, int(n))
                # x_S w = sum_k m_k x_k w: every subset's predictions from one product with the layer-wise weights
                wk = (m[:, :, None, None] * w[:, None, :, :]).permute(1, 2, 0, 3).reshape(n_states * d, -1)
                pred = ((x_dev @ wk).view(len(dev), len(m), -1) + b[None]).argmax(2)
                out[c0:c0 + len(m), j] = (pred == y_dev[:, None]).double().mean(0).numpy()
        return out

    def _pair_scores(self, rows, splits, subsets) -> np.ndarray:
        """Pair tasks: ``[u, v, |u - v|, u * v]`` is not linear in the layers, so each subset's features are built."""
        y = self._onehot[rows]
        labels = torch.from_numpy(self.data.labels[rows])
        out = np.zeros((len(subsets), len(splits)))
        for i, s in enumerate(subsets):
            def build(r, s=s):
                return self.data.features(s, self.kind, rows=r)

            total = self._part_stats(("pair", tuple(s)), build, rows)
            x = np.asarray(build(rows), dtype=np.float64)
            p = x.shape[1]
            g = np.empty((len(splits), p, p))
            sx, xy = np.empty((len(splits), p)), np.empty((len(splits), p, y.shape[1]))
            ys, n = np.empty((len(splits), y.shape[1])), np.empty(len(splits))
            for j, (_, dev) in enumerate(splits):  # training part = train-dev minus the held-out part
                held = self._stats(x[dev], y[dev])
                np.subtract(total[0], held[0], out=g[j])
                sx[j], xy[j], ys[j], n[j] = (a - b for a, b in zip(total[1:], held[1:]))
            w, b = self.solve(*(torch.from_numpy(a) for a in (g, sx, xy, ys, n)))
            x_t = torch.from_numpy(x)
            for j, (_, dev) in enumerate(splits):
                pred = (x_t[dev] @ w[j] + b[j]).argmax(1)
                out[i, j] = float((pred == labels[dev]).double().mean())
        return out

    def basis(self, x_all: torch.Tensor) -> torch.Tensor:
        """(d, dim): the top principal directions of the training rows' vectors pooled over every hidden state.

        Projecting every layer with one basis keeps a subset's mean the mean of the projections, so the Gram-block
        trick still holds; the screen then solves dim x dim systems instead of d x d (an approximation, used for
        large models only when asked, see ``dim``).
        """
        v = x_all.reshape(-1, x_all.shape[-1]).numpy()
        v = v - v.mean(0)
        _, vecs = torch.linalg.eigh(torch.from_numpy(v.T @ v))
        return vecs[:, -self.dim:].flip(1)

    def solve(self, g, s, xy, ys, n) -> tuple[torch.Tensor, torch.Tensor]:
        """Ridge weights (B, p, C) and intercepts (B, C) of B problems from their training sums:
        Gram ``g`` (B, p, p, overwritten), feature sums ``s`` (B, p), ``xy`` = X^T Y (B, p, C), label sums ``ys``
        ((C,) or (B, C)) and row counts ``n`` (a number or (B,))."""
        n = torch.as_tensor(n, dtype=torch.float64).reshape(-1, 1)
        ys = ys.reshape(-1, ys.shape[-1])
        mu, ybar = s / n, ys / n  # (B, p), (B or 1, C)
        g.sub_(n[:, :, None] * mu[:, :, None] * mu[:, None, :])  # centred Gram, in place
        xyc = xy - n[:, :, None] * mu[:, :, None] * ybar[:, None, :]
        p = g.shape[-1]
        a = (self.alpha * torch.diagonal(g, dim1=1, dim2=2).sum(1) / p).clamp_min(1e-12)
        torch.diagonal(g, dim1=1, dim2=2).add_(a[:, None])
        chol, info = torch.linalg.cholesky_ex(g)
        w = torch.cholesky_solve(xyc, chol)
        for i in torch.nonzero(info).flatten().tolist():  # not positive definite in floating point: least squares
            w[i] = torch.linalg.lstsq(g[i], xyc[i]).solution
        return w, ybar - torch.einsum("bp,bpc->bc", mu, w)


def _pair_coefficients(weights: torch.Tensor) -> torch.Tensor:
    """(B, P) coefficients w_a w_b of the layer pairs a <= b: a subset's Gram is their weighted sum of
    ``_symmetric_blocks`` (the a < b block holds both G_ab and G_ba)."""
    k = weights.shape[1]
    return torch.stack([weights[:, a] * weights[:, b] for a in range(k) for b in range(a, k)], 1)


def _symmetric_blocks(g4: torch.Tensor) -> torch.Tensor:
    """(P, d * d): G_aa for a == b and G_ab + G_ab^T for a < b, flattened, in the order of ``_pair_coefficients``."""
    k, d = g4.shape[0], g4.shape[1]
    out = torch.empty(k * (k + 1) // 2, d, d, dtype=g4.dtype)
    i = 0
    for a in range(k):
        for b in range(a, k):
            out[i] = g4[a, :, a, :] if a == b else g4[a, :, b, :] + g4[a, :, b, :].T
            i += 1
    return out.view(len(out), d * d)


# ----------------------------------------------------------------------------------------------
# The protocol


@dataclass
class TransferSplit:
    seed: int
    n_train: int
    n_test: int
    layers: tuple[int, ...]  # LC's choice
    inner_accuracy: float  # x100, mean over inner splits of the chosen subset (SAGA if it was shortlisted)
    screen: list[float]  # x100, ridge inner accuracy of every subset (aligned with TransferResult.subsets)
    shortlist: dict[str, float]  # "l0,l1,..." -> SAGA inner accuracy x100 of each shortlisted subset
    test: dict[str, float]  # method -> test accuracy x100
    poolings: dict[str, list[int]]  # method -> hidden states used
    seconds: dict[str, float]  # "screen", "shortlist", "test"


@dataclass
class TransferResult:
    task: str
    n_examples: int
    n_classes: int
    n_states: int
    max_layers: int
    shortlist: int | None
    screen_dim: int | None
    n_outer: int
    n_inner: int
    seed: int
    subsets: list[tuple[int, ...]]
    classifier: dict = field(default_factory=lambda: dict(CLASSIFIER))
    splits: list[TransferSplit] = field(default_factory=list)

    @property
    def methods(self) -> list[str]:
        return list(self.splits[0].test) if self.splits else []

    def summary(self) -> dict[str, dict[str, float]]:
        """method -> mean and std (ddof 0) of test accuracy x100 over outer splits."""
        out = {}
        for m in self.methods:
            v = np.array([s.test[m] for s in self.splits])
            out[m] = {"mean": float(v.mean()), "std": float(v.std())}
        return out

    def relative_error_reductions(self, method: str = "lc") -> dict[str, float]:
        """baseline -> (A_method - A_baseline) / (1 - A_baseline) x100, on the mean accuracies."""
        summ = self.summary()
        a = summ[method]["mean"] / 100
        return {b: 100 * relative_error_reduction(a, v["mean"] / 100) for b, v in summ.items() if b != method}

    def to_dict(self) -> dict:
        d = asdict(self)
        d["summary"] = self.summary()
        if "lc" in self.methods:
            d["relative_error_reduction"] = self.relative_error_reductions("lc")
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "TransferResult":
        d = {"screen_dim": None, **{k: v for k, v in d.items() if k in cls.__dataclass_fields__}}
        d["subsets"] = [tuple(s) for s in d["subsets"]]
        d["splits"] = [TransferSplit(**{**s, "layers": tuple(s["layers"])}) for s in d["splits"]]
        return cls(**d)


def _key(layers) -> str:
    return ",".join(str(x) for x in layers)


def choose_subset(data: TransferFeatures, rows: np.ndarray, splits, subsets, *, shortlist: int | None,
                  seed: int, n_jobs: int = 1, ridge_alpha: float = DEFAULT_RIDGE_ALPHA, screen_dim: int | None = None,
                  screen: RidgeScreen | None = None):
    """LC's choice on the training rows ``rows``: (layers, inner accuracy x100, screen x100, shortlist scores).

    Pass the same ``screen`` (a ``RidgeScreen`` of ``data``) to successive calls to reuse its sums over all rows.
    """
    if screen is None:
        screen = RidgeScreen(data, alpha=ridge_alpha, dim=screen_dim)
    screen = screen.scores(rows, splits, subsets).mean(1) * 100
    order = np.argsort(-screen, kind="stable")
    k = len(subsets) if shortlist is None else min(int(shortlist), len(subsets))
    if k <= 1:
        best = int(order[0])
        return subsets[best], float(screen[best]), screen, {}
    cand = [subsets[i] for i in order[:k]]
    y = data.labels[rows]
    feats = {s: data.features(s, rows=rows) for s in cand}
    jobs = [(s, tr, dev) for s in cand for tr, dev in splits]
    accs = _parallel([
        (lambda s=s, tr=tr, dev=dev: logreg_accuracy(feats[s][tr], y[tr], feats[s][dev], y[dev], seed=seed))
        for s, tr, dev in jobs], n_jobs)
    per = {s: 100 * float(np.mean(accs[i * len(splits):(i + 1) * len(splits)])) for i, s in enumerate(cand)}
    best = max(cand, key=lambda s: per[s])  # max keeps the first (best-screened) on ties
    return best, per[best], screen, {_key(s): v for s, v in per.items()}


def baseline_layers(n_states: int, *, seed: int) -> dict[str, tuple[str, tuple[int, ...]]]:
    """The paper's Table-4 baselines: method -> (kind, hidden states)."""
    sel = named_selections(n_states)
    L = n_states - 1
    return {
        "cls": ("cls", (L,)),
        "last": ("mean", sel["last"]),
        "last_four": ("mean", sel["last_four"]),
        "random": ("mean", random_layers(n_states, seed=seed)),
    }


def run_transfer(
    data: TransferFeatures,
    *,
    task: str = "task",
    n_outer: int = 10,
    n_inner: int = 10,
    max_layers: int | None = None,
    shortlist: int | None = 1,
    seed: int = 0,
    n_jobs: int = 1,
    ridge_alpha: float = DEFAULT_RIDGE_ALPHA,
    screen_dim: int | None = None,
    previous: TransferResult | None = None,
    on_split=None,
    progress=None,
) -> TransferResult:
    """The protocol on one task. Outer splits found in ``previous`` (same settings) are reused, so a cut-off
    run continues where it stopped; ``on_split(result)`` is called after each new split (e.g. to save it)."""
    n_states = data.n_states
    max_layers = default_max_layers(n_states) if max_layers is None else int(max_layers)
    subsets = all_subsets(n_states, max_layers)
    result = TransferResult(task=task, n_examples=len(data), n_classes=data.n_classes, n_states=n_states,
                            max_layers=max_layers, shortlist=shortlist, screen_dim=screen_dim, n_outer=n_outer,
                            n_inner=n_inner,
                            seed=seed, subsets=subsets)
    if previous is not None and _same_settings(previous, result):
        result.splits = list(previous.splits)
    ridge = RidgeScreen(data, alpha=ridge_alpha, dim=screen_dim)  # one per task: its full-data sums are reused
    for k, (td, te) in enumerate(outer_splits(data.labels, n_splits=n_outer, seed=seed)):
        if k < len(result.splits):
            if progress is not None:
                progress.update(1)
            continue
        split_seed = seed + k
        t0 = time.perf_counter()
        splits = inner_splits(data.labels[td], n_splits=n_inner, seed=split_seed)
        layers, inner, screen, short = choose_subset(data, td, splits, subsets, shortlist=shortlist, seed=split_seed,
                                                     n_jobs=n_jobs, screen=ridge)
        t1 = time.perf_counter()
        methods = {**baseline_layers(n_states, seed=split_seed), "lc": ("mean", tuple(layers))}
        jobs, names = [], []
        for name, (kind, ls) in methods.items():
            names.append(name)
            jobs.append(lambda kind=kind, ls=ls: subset_accuracy(data, td, te, ls, kind=kind, seed=split_seed))
        if data.head is not None:
            names.append("lc_mlp")
            jobs.append(lambda: subset_accuracy(data, td, te, tuple(layers), head=True, seed=split_seed))
        accs = _parallel(jobs, n_jobs)
        poolings = {n: list(methods[n][1]) if n in methods else list(layers) for n in names}
        result.splits.append(TransferSplit(
            seed=split_seed, n_train=len(td), n_test=len(te), layers=tuple(int(x) for x in layers),
            inner_accuracy=inner, screen=[round(float(v), 4) for v in screen], shortlist=short,
            test={n: 100 * a for n, a in zip(names, accs)}, poolings=poolings,
            seconds={"screen_and_shortlist": t1 - t0, "test": time.perf_counter() - t1},
        ))
        logger.info("%s split %d: chose %s (inner %.2f), test lc %.2f vs last %.2f", task, k, layers, inner,
                    result.splits[-1].test["lc"], result.splits[-1].test["last"])
        if on_split is not None:
            on_split(result)
        if progress is not None:
            progress.update(1)
    return result


def subset_accuracy(data: TransferFeatures, train, test, layers, *, kind: str = "mean", head: bool = False,
                    seed: int = 0) -> float:
    """Test accuracy (0..1) of the paper's classifier on the combination of ``layers``, trained on rows ``train``."""
    x_tr = data.features(layers, kind, head=head, rows=train)
    x_te = data.features(layers, kind, head=head, rows=test)
    return logreg_accuracy(x_tr, data.labels[train], x_te, data.labels[test], seed=seed)


def _same_settings(a: TransferResult, b: TransferResult) -> bool:
    keys = ("task", "n_examples", "n_classes", "n_states", "max_layers", "shortlist", "screen_dim", "n_outer", "n_inner",
            "seed", "classifier")
    return all(getattr(a, k) == getattr(b, k) for k in keys) and list(a.subsets) == list(b.subsets)
