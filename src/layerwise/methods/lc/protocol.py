"""The BERT-LC protocol (Hosseini et al., 2023): choose a layer subset on a small dev set, report on the rest.

All of a data set's pairs are pooled and shuffled with a seed; the first ``dev_size`` pairs are dev, the
rest test. The subset of hidden states with the best dev score is chosen by exact search, and its test
score is reported next to fixed baselines on the *same* test pairs; this is repeated for ``n_splits``
seeds and summarised as mean and sample standard deviation (ddof 1).

With ``bootstrap`` resamples, each compared column's difference from the last layer (mean over the splits of the
test-Spearman differences) is tested by a paired bootstrap over pairs (:mod:`layerwise.evaluation.significance`):
one resample draws the data set's pairs with replacement and every split keeps the drawn pairs of its test part,
so the splits' overlap is kept. ``max_pooling`` adds "lc_max": the elementwise max over LC's chosen states.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from layerwise.evaluation.metrics import AGGREGATIONS, cosine_rows
from layerwise.evaluation.significance import paired_bootstrap_spearman
from layerwise.evaluation.sts import check_gold, sts_scores
from layerwise.layers import LayerStack
from layerwise.methods.lc.search import LayerSubsetSearch
from layerwise.pooling import Pooling, baseline_poolings, head_pooling

logger = logging.getLogger(__name__)

__all__ = ["COMPARED", "LCProtocol", "LCSplit", "LCResult", "run_bert_lc", "split_indices"]

#: The baseline every compared column is tested against, and the columns tested (where the run has them).
BASELINE = "last"
COMPARED = ("lc", "lc_mlp", "lc_max", "first0_last")


def split_indices(n: int, *, dev_size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Shuffle ``range(n)`` with ``seed``; the first ``dev_size`` are dev, the rest test."""
    if not 2 <= dev_size <= n - 2:
        raise ValueError(
            f"dev_size must leave at least 2 pairs on each side: got dev_size={dev_size} for {n} pairs"
        )
    perm = np.random.default_rng(seed).permutation(n)
    return np.sort(perm[:dev_size]), np.sort(perm[dev_size:])


@dataclass
class LCSplit:
    seed: int
    n_dev: int
    n_test: int
    layers: tuple[int, ...]  # chosen on dev
    dev_spearman: float  # x100, of the chosen subset on dev
    test: dict[str, dict[str, float]]  # method -> {"spearman", "pearson"} (x100) on the test pairs
    poolings: dict[str, dict]  # method -> Pooling.to_dict() used on this split
    best_by_size: dict[int, dict]  # size -> {"layers", "dev_spearman"}
    search_seconds: float
    n_subsets: int


@dataclass
class LCResult:
    aggregation: str
    dev_size: int
    n_states: int
    max_layers: int
    splits: list[LCSplit] = field(default_factory=list)
    significance: dict[str, dict] = field(default_factory=dict)  # column -> SignificanceResult dict, against "last"

    @property
    def methods(self) -> list[str]:
        return list(self.splits[0].test) if self.splits else []

    def summary(self, metric: str = "spearman") -> dict[str, dict[str, float]]:
        """method -> {"mean", "std"} of the test score over splits (x100; sample std, ddof 1; 0 for one split)."""
        out = {}
        for m in self.methods:
            vals = np.array([s.test[m][metric] for s in self.splits])
            out[m] = {"mean": float(vals.mean()), "std": float(vals.std(ddof=1)) if len(vals) > 1 else 0.0}
        return out

    def to_dict(self) -> dict:
        d = asdict(self)
        d["summary"] = {"spearman": self.summary("spearman"), "pearson": self.summary("pearson")}
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "LCResult":
        """Back from :meth:`to_dict` (or its JSON: size keys as strings, tuples as lists); the summary is recomputed."""
        splits = [LCSplit(**{**s, "layers": tuple(s["layers"]),
                             "best_by_size": {int(k): v for k, v in s["best_by_size"].items()}})
                  for s in d["splits"]]
        return cls(d["aggregation"], d["dev_size"], d["n_states"], d["max_layers"], splits,
                   dict(d.get("significance") or {}))


@dataclass(frozen=True)
class LCProtocol:
    """The settings of the dev/test protocol (all of them change its numbers)."""

    aggregation: str = "all"  # how subsets of a data set are combined into one score (evaluation.metrics)
    n_splits: int = 5  # seeded dev/test splits; split k uses seed + k
    dev_size: int = 350  # dev pairs per split
    seed: int = 0
    max_layers: int | None = None  # largest subset searched (None: LayerSubsetSearch's default)
    bootstrap: int = 0  # resamples of the paired bootstrap of each COMPARED column against "last" (0: no test)
    max_pooling: bool = False  # also "lc_max": max pooling over LC's chosen hidden states (pooling.layer_max)

    def __post_init__(self) -> None:
        if self.aggregation not in AGGREGATIONS:
            raise ValueError(f"unknown aggregation {self.aggregation!r}; valid: {', '.join(AGGREGATIONS)}")
        if self.n_splits < 1:
            raise ValueError(f"n_splits must be at least 1, got {self.n_splits}")
        if self.bootstrap < 0:
            raise ValueError(f"bootstrap must be 0 (no test) or a number of resamples, got {self.bootstrap}")


def run_bert_lc(
    stack1: LayerStack,
    stack2: LayerStack,
    gold: np.ndarray,
    protocol: LCProtocol = LCProtocol(),
    *,
    groups: np.ndarray | None = None,
    head: tuple[np.ndarray, np.ndarray] | None = None,
    show_progress: bool | None = None,
    dev_test: tuple[np.ndarray, np.ndarray] | None = None,
) -> LCResult:
    """Run the protocol on pairs ``(stack1[i], stack2[i])`` with gold scores ``gold`` (n,); ``groups`` (n,) names
    each pair's subset.

    Split ``k`` uses seed ``protocol.seed + k``; the random-subset baseline of split ``k`` is drawn with the same
    seed. ``head`` = the checkpoint's trained pooler head ``(W, b)`` adds "lc_mlp": LC's subset fed through it.
    ``dev_test`` = (dev rows, test rows) given by the caller (e.g. a dev file and a test file, stacked): one split
    on those rows (seed ``protocol.seed``) instead of ``n_splits`` seeded ones; ``dev_size`` is then unused.
    """
    gold = check_gold(gold)
    n = len(gold)
    if len(stack1) != n or len(stack2) != n:
        raise ValueError(f"{len(stack1)} and {len(stack2)} encoded sentences for {n} gold scores")
    if groups is not None and np.asarray(groups).shape != (n,):
        raise ValueError(f"groups has shape {np.asarray(groups).shape} but there are {n} pairs; pass one group per pair")
    pairs = (stack1, stack2, gold, None if groups is None else np.asarray(groups))
    result = LCResult(aggregation=protocol.aggregation, dev_size=protocol.dev_size, n_states=stack1.n_states,
                      max_layers=0)
    if dev_test is not None:
        dev, test = (np.asarray(x, dtype=np.int64) for x in dev_test)
        if len(dev) < 2 or len(test) < 2 or len(np.intersect1d(dev, test)) or max(dev.max(), test.max()) >= n:
            raise ValueError(f"dev_test must be two disjoint sets of at least 2 of the {n} pair rows, got "
                             f"{len(dev)} dev and {len(test)} test rows")
        result.dev_size = len(dev)
    cosines: list[dict[str, np.ndarray]] = []  # per split: column -> (n,) cosines, NaN off its test rows
    for k in range(1 if dev_test is not None else protocol.n_splits):
        rows = None if dev_test is None else (dev, test)
        split, result.max_layers, cos = _one_split(pairs, protocol, protocol.seed + k, head, show_progress, rows)
        result.splits.append(split)
        cosines.append(cos)
        logger.info("split %d (seed %d): chose %s, dev %.2f, test %.2f (last %.2f) in %.2fs", k, split.seed,
                    split.layers, split.dev_spearman, split.test["lc"]["spearman"], split.test["last"]["spearman"],
                    split.search_seconds)
    if protocol.bootstrap:
        result.significance = _significance(gold, pairs[3], cosines, protocol)
    return result


def _significance(gold: np.ndarray, groups, cosines: list[dict[str, np.ndarray]], protocol: LCProtocol) -> dict:
    """Each compared column against the last layer, by the paired bootstrap over pairs across the splits."""
    rows = [np.flatnonzero(np.isfinite(c[BASELINE])) for c in cosines]
    base = np.nan_to_num(np.stack([c[BASELINE] for c in cosines]))
    out = {}
    for name in (m for m in COMPARED if m in cosines[0]):
        test = paired_bootstrap_spearman(gold, np.nan_to_num(np.stack([c[name] for c in cosines])), base, rows=rows,
                                         groups=groups, aggregation=protocol.aggregation,
                                         n_resamples=protocol.bootstrap, seed=protocol.seed)
        out[name] = test.to_dict()
    return out


def _one_split(pairs: tuple, protocol: LCProtocol, split_seed: int, head, show_progress,
               rows: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[LCSplit, int, dict[str, np.ndarray]]:
    """One dev/test split (``rows``, or drawn with ``split_seed``): the exact search on dev, LC and the baselines on
    test. Returns (split, max_layers, the compared columns' cosines on the test rows, NaN elsewhere)."""
    stack1, stack2, gold, groups = pairs
    agg = protocol.aggregation
    dev, test = rows if rows is not None else split_indices(len(gold), dev_size=protocol.dev_size, seed=split_seed)
    g_dev = None if groups is None else groups[dev]
    g_test = None if groups is None else groups[test]
    t0 = time.perf_counter()
    search = LayerSubsetSearch(max_layers=protocol.max_layers, aggregation=agg, show_progress=show_progress).fit(
        stack1.mean[dev], stack2.mean[dev], gold[dev], groups=g_dev)
    seconds = time.perf_counter() - t0
    methods: list[Pooling] = baseline_poolings(stack1.n_states, seed=split_seed, has_pooler=stack1.pooler is not None)
    methods.append(Pooling("lc", "mean", search.best_layers_))
    if protocol.max_pooling:
        methods.append(Pooling("lc_max", "max", search.best_layers_))
    s1, s2 = stack1.take(test), stack2.take(test)
    embedded = {p.name: (p(s1), p(s2)) for p in methods}
    poolings = {p.name: p.to_dict() for p in methods}
    if head is not None:
        layers = search.best_layers_
        embedded["lc_mlp"] = (head_pooling(s1, layers, *head), head_pooling(s2, layers, *head))
        poolings["lc_mlp"] = {"name": "lc_mlp", "kind": "head", "layers": list(layers)}
    test_scores = {m: sts_scores(e1, e2, gold[test], groups=g_test, aggregation=agg) for m, (e1, e2) in embedded.items()}
    cosines = {}
    for m in (BASELINE, *COMPARED) if protocol.bootstrap else ():
        if m in embedded:
            cosines[m] = np.full(len(gold), np.nan)
            cosines[m][test] = cosine_rows(*embedded[m])
    split = LCSplit(seed=split_seed, n_dev=len(dev), n_test=len(test), layers=search.best_layers_,
                    dev_spearman=search.best_score_, test=test_scores, poolings=poolings,
                    best_by_size={s: {"layers": list(ls), "dev_spearman": v}
                                  for s, (ls, v) in search.best_by_size().items()},
                    search_seconds=seconds, n_subsets=len(search.scores_))
    return split, search.max_layers_, cosines
