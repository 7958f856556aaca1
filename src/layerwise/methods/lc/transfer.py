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
see ``benchmarks/lc/transfer_check.py`` (run with the ``transfer`` results page, shown on it).

Pair tasks (MRPC) use SentEval's features ``[u, v, |u - v|, u * v]`` of the two sentences' combinations;
those are not linear in the layers, so their Gram matrices are computed per subset (slower, same result).
Either way the sums over all of a task's rows are kept in the ``RidgeScreen`` between outer splits, so each
outer split pays only for the rows it leaves out.
"""

from __future__ import annotations

import itertools
import logging
import time
from dataclasses import asdict, dataclass, field
from functools import partial

import numpy as np

from layerwise._progress import progress
from layerwise.evaluation.classification import (
    CLASSIFIER,
    INNER_KINDS,
    fit_logreg,
    inner_splits,
    logreg_accuracy,
    logreg_correct,
    outer_splits,
    parallel_map,
)
from layerwise.evaluation.unit_outputs import pack_correct
from layerwise.layers import LayerStack
from layerwise.methods.lc.features import TransferFeatures, pair_features
from layerwise.methods.lc.screen import DEFAULT_RIDGE_ALPHA, RidgeScreen
from layerwise.methods.lc.transfer_significance import lc_significance
from layerwise.pooling import named_selections, random_layers

logger = logging.getLogger(__name__)

__all__ = [
    "CLASSIFIER",
    "TransferFeatures",
    "RidgeScreen",
    "all_subsets",
    "compare_on_test",
    "default_max_layers",
    "fit_logreg",
    "logreg_accuracy",
    "outer_splits",
    "inner_splits",
    "pair_features",
    "relative_error_reduction",
    "run_transfer",
    "screen_agreement",
    "TransferProtocol",
    "TransferSplit",
    "TransferResult",
]



def default_max_layers(n_states: int) -> int:
    """The paper's subset-size cap for classifiers: 4 for models with at most 13 hidden states, else 3."""
    return 4 if n_states <= 13 else 3


def all_subsets(n_states: int, max_layers: int) -> list[tuple[int, ...]]:
    """Every non-empty subset of ``range(n_states)`` with at most ``max_layers`` members, by size then lexically."""
    if not 1 <= max_layers:
        raise ValueError(f"max_layers must be at least 1, got {max_layers}")
    return [c for k in range(1, min(max_layers, n_states) + 1) for c in itertools.combinations(range(n_states), k)]


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
    correct: dict[str, str] = field(default_factory=dict)  # method -> packed correctness of each test example


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
    ridge_alpha: float = DEFAULT_RIDGE_ALPHA  # files written before this field existed used the default
    splits: list[TransferSplit] = field(default_factory=list)
    significance: dict[str, dict] = field(default_factory=dict)  # baseline -> paired bootstrap of LC against it

    @property
    def methods(self) -> list[str]:
        return list(self.splits[0].test) if self.splits else []

    def summary(self) -> dict[str, dict[str, float]]:
        """method -> mean and sample std (ddof 1; 0 for one split) of test accuracy x100 over outer splits."""
        out = {}
        for m in self.methods:
            v = np.array([s.test[m] for s in self.splits])
            out[m] = {"mean": float(v.mean()), "std": float(v.std(ddof=1)) if len(v) > 1 else 0.0}
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
                  seed: int, n_jobs: int = 1, screen: RidgeScreen | None = None):
    """LC's choice on the training rows ``rows``: (layers, inner accuracy x100, screen x100, shortlist scores).

    ``screen``: the ``RidgeScreen`` of ``data`` to use (its alpha, projection and token pooling ``kind``, "mean"
    or "cls", which the shortlist's features use too; default: ``RidgeScreen(data)``, mean pooling); pass the same
    one to successive calls to reuse its sums over all rows. With this module's logger at INFO, a bar over the
    shortlist's SAGA fits (subsets x inner splits; the exhaustive protocol's ~10^3 fits run for an hour on a large
    task).
    """
    if screen is None:
        screen = RidgeScreen(data)
    kind = screen.kind
    screen = screen.scores(rows, splits, subsets).mean(1) * 100
    order = np.argsort(-screen, kind="stable")
    k = len(subsets) if shortlist is None else min(int(shortlist), len(subsets))
    if k <= 1:
        best = int(order[0])
        return subsets[best], float(screen[best]), screen, {}
    cand = [subsets[i] for i in order[:k]]
    y = data.labels[rows]
    feats = {s: data.features(s, kind, rows=rows) for s in cand}
    jobs = [(s, tr, dev) for s in cand for tr, dev in splits]
    with progress(total=len(jobs), desc=f"SAGA fits ({len(cand)} subsets x {len(splits)} inner splits)", unit="fit",
                  leave=False, disable=not logger.isEnabledFor(logging.INFO)) as bar:

        def fit(s, tr, dev) -> float:
            accuracy = logreg_accuracy(feats[s][tr], y[tr], feats[s][dev], y[dev], seed=seed)
            bar.update(1)
            return accuracy

        accs = parallel_map([partial(fit, s, tr, dev) for s, tr, dev in jobs], n_jobs)
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


@dataclass(frozen=True)
class TransferProtocol:
    """The settings of the transfer protocol that change its numbers (a resume key includes all of them)."""

    n_outer: int = 10  # seeded stratified 85/15 outer splits; split k uses seed + k
    n_inner: int = 10  # seeded stratified 82/18 inner splits that choose the subset (or folds, with inner="kfold")
    max_layers: int | None = None  # largest subset (None: default_max_layers)
    shortlist: int | None = 1  # subsets re-scored by SAGA after the ridge screen (None: all, exhaustive)
    seed: int = 0
    ridge_alpha: float = DEFAULT_RIDGE_ALPHA  # ridge screen penalty x mean feature variance
    screen_dim: int | None = None  # project on the top principal directions for the screen only (None: full)
    # "shuffle": seeded 82/18 inner splits; "kfold": the paper's n_inner-fold inner cross-validation. The paper's
    # exact protocol is inner="kfold", shortlist=None (exhaustive SAGA over the allowed subsets).
    inner: str = "shuffle"
    bootstrap: int = 0  # resamples of the paired bootstrap of LC against each baseline over test examples (0: none)

    def __post_init__(self) -> None:
        if self.inner not in INNER_KINDS:
            raise ValueError(f"unknown inner splits {self.inner!r}; valid: {', '.join(INNER_KINDS)}")

    def to_dict(self) -> dict:
        """The settings (a resume key); ``inner`` and ``bootstrap`` only where they are not the default, so parts
        stored before they existed keep their key."""
        d = asdict(self)
        for name, default in (("inner", "shuffle"), ("bootstrap", 0)):
            if d[name] == default:
                del d[name]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "TransferProtocol":
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


def run_transfer(
    data: TransferFeatures,
    protocol: TransferProtocol = TransferProtocol(),
    *,
    task: str = "task",
    n_jobs: int = 1,
    previous: TransferResult | None = None,
    on_split=None,
    engine: str = "fast",
    max_splits: int | None = None,
) -> TransferResult:
    """The protocol on one task. Outer splits found in ``previous`` (same settings) are reused, so a cut-off
    run continues where it stopped; ``on_split(result)`` is called after each new split (e.g. to save it).
    ``engine``: how the ridge screen computes (``RidgeScreen``'s ``engine``; the same numbers either way).
    ``max_splits``: stop once the result holds that many outer splits (the first ones, as a full run has them; a
    later call without it continues to ``n_outer``); None: all of them."""
    p = protocol
    n_states = data.n_states
    max_layers = default_max_layers(n_states) if p.max_layers is None else int(p.max_layers)
    subsets = all_subsets(n_states, max_layers)
    result = TransferResult(task=task, n_examples=len(data), n_classes=data.n_classes, n_states=n_states,
                            max_layers=max_layers, shortlist=p.shortlist, screen_dim=p.screen_dim, n_outer=p.n_outer,
                            n_inner=p.n_inner, seed=p.seed, subsets=subsets, ridge_alpha=p.ridge_alpha)
    if previous is not None and _same_settings(previous, result):
        result.splits = list(previous.splits)
    # one per task: its full-data sums are reused
    ridge = RidgeScreen(data, alpha=p.ridge_alpha, dim=p.screen_dim, engine=engine)
    if max_splits is not None and (isinstance(max_splits, bool) or not isinstance(max_splits, int) or max_splits < 1):
        raise ValueError(f"max_splits must be None or a whole number of at least 1, got {max_splits!r}")
    for k, (td, te) in enumerate(outer_splits(data.labels, n_splits=p.n_outer, seed=p.seed)):
        if max_splits is not None and k >= max(max_splits, len(result.splits)):
            break
        if k < len(result.splits):
            continue
        result.splits.append(_outer_split(data, td, te, p, subsets, seed=p.seed + k, ridge=ridge, n_jobs=n_jobs))
        new = result.splits[-1]
        logger.info("%s split %d: chose %s (inner %.2f), test lc %.2f vs last %.2f", task, k, new.layers,
                    new.inner_accuracy, new.test["lc"], new.test["last"])
        if on_split is not None:
            on_split(result)
    if p.bootstrap and len(result.splits) == p.n_outer:
        result.significance = _significance(result, data.labels, p)
    return result


def _outer_split(data: TransferFeatures, td: np.ndarray, te: np.ndarray, p: TransferProtocol, subsets, *, seed: int,
                 ridge: RidgeScreen, n_jobs: int) -> TransferSplit:
    """One outer split: the subset chosen on the training part's inner splits, then every method tested."""
    t0 = time.perf_counter()
    splits = INNER_KINDS[p.inner](data.labels[td], n_splits=p.n_inner, seed=seed)
    layers, inner, screen, short = choose_subset(data, td, splits, subsets, shortlist=p.shortlist, seed=seed,
                                                 n_jobs=n_jobs, screen=ridge)
    t1 = time.perf_counter()
    methods = {**baseline_layers(data.n_states, seed=seed), "lc": ("mean", tuple(layers))}
    jobs, names = [], []
    for name, (kind, ls) in methods.items():
        names.append(name)
        jobs.append(partial(subset_correct, data, td, te, ls, kind=kind, seed=seed))
    if data.head is not None:
        names.append("lc_mlp")
        jobs.append(partial(subset_correct, data, td, te, tuple(layers), head=True, seed=seed))
    correct = parallel_map(jobs, n_jobs)
    poolings = {n: list(methods[n][1]) if n in methods else list(layers) for n in names}
    return TransferSplit(
        seed=seed, n_train=len(td), n_test=len(te), layers=tuple(int(x) for x in layers),
        inner_accuracy=inner, screen=[round(float(v), 4) for v in screen], shortlist=short,
        test={n: 100 * float(c.mean()) for n, c in zip(names, correct, strict=True)}, poolings=poolings,
        seconds={"screen_and_shortlist": t1 - t0, "test": time.perf_counter() - t1},
        correct={n: pack_correct(c) for n, c in zip(names, correct, strict=True)},
    )


def _significance(result: TransferResult, labels: np.ndarray, p: TransferProtocol) -> dict[str, dict]:
    """LC against each baseline over the outer splits' test examples (the same splits run_transfer drew)."""
    rows = [te for _, te in outer_splits(labels, n_splits=p.n_outer, seed=p.seed)]
    return lc_significance([s.correct for s in result.splits], rows, len(labels), n_resamples=p.bootstrap,
                           seed=p.seed)


def compare_on_test(train: TransferFeatures, test: TransferFeatures, layers, *, kind: str = "mean", seed: int = 0,
                    n_jobs: int = 1) -> dict[str, float]:
    """Test accuracy x100 of LC's ``layers`` and of the paper's baselines (:func:`baseline_layers`, the random subset
    drawn with ``seed``), each classifier fitted on all of ``train``: method -> accuracy. ``kind``: LC's token
    pooling. The two parts must share their classes (``test.labels`` indexing ``train``'s classes)."""
    if test.n_classes != train.n_classes or test.is_pair != train.is_pair:
        raise ValueError(f"train and test differ in classes ({train.n_classes} vs {test.n_classes}) or in being "
                         "pairs; give both the same classes and the same kind of example")
    both = TransferFeatures(
        first=LayerStack.concatenate([train.first, test.first]), labels=np.concatenate([train.labels, test.labels]),
        n_classes=train.n_classes,
        second=LayerStack.concatenate([train.second, test.second]) if train.is_pair else None)
    rows_train, rows_test = np.arange(len(train)), np.arange(len(train), len(both))
    methods = {**baseline_layers(train.n_states, seed=seed), "lc": (kind, tuple(layers))}
    jobs = [partial(subset_accuracy, both, rows_train, rows_test, ls, kind=k, seed=seed) for k, ls in methods.values()]
    return {name: 100 * acc for name, acc in zip(methods, parallel_map(jobs, n_jobs), strict=True)}


def subset_accuracy(data: TransferFeatures, train, test, layers, *, kind: str = "mean", head: bool = False,
                    seed: int = 0) -> float:
    """Test accuracy (0..1) of the paper's classifier on the combination of ``layers``, trained on rows ``train``."""
    return float(subset_correct(data, train, test, layers, kind=kind, head=head, seed=seed).mean())


def subset_correct(data: TransferFeatures, train, test, layers, *, kind: str = "mean", head: bool = False,
                   seed: int = 0) -> np.ndarray:
    """Whether the paper's classifier on the combination of ``layers``, trained on rows ``train``, classifies each
    test row correctly: (len(test),) booleans."""
    x_tr = data.features(layers, kind, head=head, rows=train)
    x_te = data.features(layers, kind, head=head, rows=test)
    return logreg_correct(x_tr, data.labels[train], x_te, data.labels[test], seed=seed)


def screen_agreement(result: TransferResult) -> dict | None:
    """How the ridge screen's choice compares with exhaustive SAGA on the splits of a run that scored every subset
    with SAGA (``shortlist=None``): ``{"splits", "agree", "saga_gap"}`` = splits compared, splits where the screen's
    best subset is SAGA's best, and the mean SAGA inner accuracy (x100) lost by taking the screen's choice;
    ``None`` when no split scored every subset."""
    full = [s for s in result.splits if len(s.shortlist) == len(result.subsets)]
    if not full:
        return None
    agree, gaps = 0, []
    for s in full:
        ridge_choice = _key(result.subsets[int(np.argmax(s.screen))])  # argmax: the first best, as choose_subset
        agree += ridge_choice == _key(s.layers)
        gaps.append(s.shortlist[_key(s.layers)] - s.shortlist[ridge_choice])
    return {"splits": len(full), "agree": agree, "saga_gap": float(np.mean(gaps))}


def _same_settings(a: TransferResult, b: TransferResult) -> bool:
    keys = ("task", "n_examples", "n_classes", "n_states", "max_layers", "shortlist", "screen_dim", "n_outer", "n_inner",
            "seed", "classifier", "ridge_alpha")
    return all(getattr(a, k) == getattr(b, k) for k in keys) and list(a.subsets) == list(b.subsets)
