"""The BERT-LC ablations (Hosseini et al. 2023, appendices D-E), for STS and for transfer tasks.

(a) number of layers: for each size N the best subset of N hidden states is chosen on dev and scored on test;
(b) excluding a layer: the best subset that avoids hidden state l, against the best with every layer allowed;
(c) limited data (transfer): train-dev cut to 1/2, 1/4 ... with the test part fixed, LC against last-layer mean.

The same splits as the main protocols are used (STS: ``split_indices`` with seed + k; transfer: stratified
outer splits with seed + k), so the "all layers allowed" row matches the main protocol's LC when the size
caps agree. Subset choices come from the same fast selections as the main runs: the exact Gram-based
Spearman search for STS, the closed-form ridge screen for transfer (whose accuracy cost against
exhaustive SAGA is measured in ``docs/results/transfer.md``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import partial

import numpy as np

from layerwise.evaluation.classification import inner_splits, outer_splits, parallel_map
from layerwise.evaluation.sts import check_gold, sts_scores
from layerwise.layers import LayerStack
from layerwise.methods.lc.protocol import split_indices
from layerwise.methods.lc.screen import RidgeScreen
from layerwise.methods.lc.search import LayerSubsetSearch
from layerwise.methods.lc.transfer import TransferFeatures, all_subsets, default_max_layers, subset_accuracy
from layerwise.pooling import layer_mean

logger = logging.getLogger(__name__)

__all__ = ["LIMITED_FRACTIONS", "LimitedAblation", "LimitedCell", "SizeAblation", "ablate_sts", "ablate_transfer",
           "limited_data", "seeded_splits"]

LIMITED_FRACTIONS = tuple(1 / 2**k for k in range(1, 9))  # 1/2 ... 1/256


@dataclass
class SizeAblation:
    """(a) and (b) on one data set or task: test scores x100 per split (lists over splits)."""

    best: list[float]  # the best subset of any size chosen on dev
    by_size: dict[int, list[float]]  # N -> the best subset of exactly N hidden states
    without: dict[int, list[float]]  # hidden state l -> the best subset without l
    choices: list[dict]  # per split: the chosen subsets ("best", "by_size", "without")
    max_layers: int | None = None  # largest subset searched (transfer)

    def to_dict(self) -> dict:
        d = {"best": self.best, "by_size": {str(k): v for k, v in self.by_size.items()},
             "without": {str(k): v for k, v in self.without.items()},
             "choices": [{"best": list(c["best"]), "by_size": {str(k): list(v) for k, v in c["by_size"].items()},
                          "without": {str(k): list(v) for k, v in c["without"].items()}} for c in self.choices]}
        return d if self.max_layers is None else {**d, "max_layers": self.max_layers}

    @classmethod
    def from_dict(cls, d: dict) -> "SizeAblation":
        return cls(list(d["best"]), {int(k): v for k, v in d["by_size"].items()},
                   {int(k): v for k, v in d["without"].items()}, list(d["choices"]), d.get("max_layers"))


@dataclass
class LimitedCell:
    n_train: int  # examples kept of train-dev
    lc: list[float]  # test accuracy x100 of LC, per seed
    last: list[float]  # ... of the last-layer mean
    layers: list[list[int]]  # LC's subset, per seed


@dataclass
class LimitedAblation:
    """(c) on one task: fraction of train-dev kept -> its cell."""

    cells: dict[float, LimitedCell]

    def to_dict(self) -> dict:
        return {str(f): asdict(c) for f, c in self.cells.items()}

    @classmethod
    def from_dict(cls, d: dict) -> "LimitedAblation":
        return cls({float(f): LimitedCell(**c) for f, c in d.items()})


def _by_size_and_without(masks: np.ndarray, scores: np.ndarray) -> tuple[dict, dict, tuple]:
    """From per-subset dev scores: best subset of each size, best subset avoiding each layer, best overall."""
    sizes = masks.sum(1)
    layers_of = lambda i: tuple(int(x) for x in np.flatnonzero(masks[i]))  # noqa: E731
    best = layers_of(int(np.argmax(scores)))
    by_size = {}
    for k in range(1, int(sizes.max()) + 1):
        idx = np.flatnonzero(sizes == k)
        by_size[k] = layers_of(int(idx[np.argmax(scores[idx])]))
    without = {}
    for layer in range(masks.shape[1]):
        idx = np.flatnonzero(~masks[:, layer])
        if len(idx):
            without[layer] = layers_of(int(idx[np.argmax(scores[idx])]))
    return by_size, without, best


def _test_spearman(memo: dict, t1: LayerStack, t2: LayerStack, gold: np.ndarray, groups, aggregation: str,
                   layers: tuple) -> float:
    """Test Spearman x100 of the mean of ``layers``, computed once per subset (``memo``)."""
    if layers not in memo:
        memo[layers] = sts_scores(layer_mean(t1, layers), layer_mean(t2, layers), gold, groups=groups,
                                  aggregation=aggregation)["spearman"]
    return memo[layers]


def seeded_splits(n: int, *, n_splits: int = 5, dev_size: int = 350, seed: int = 0) -> list[tuple[np.ndarray,
                                                                                            np.ndarray]]:
    """``n_splits`` (dev rows, test rows) splits of ``n`` pairs, ``dev_size`` dev pairs each, split k drawn with seed
    + k (the main STS protocol's splits)."""
    if n_splits < 1:
        raise ValueError(f"n_splits must be at least 1, got {n_splits}; e.g. 5")
    return [split_indices(n, dev_size=dev_size, seed=seed + k) for k in range(n_splits)]


def ablate_sts(
    stack1: LayerStack,
    stack2: LayerStack,
    gold: np.ndarray,
    *,
    splits: Sequence[tuple[np.ndarray, np.ndarray]],
    groups: np.ndarray | None = None,
    aggregation: str = "all",
) -> SizeAblation:
    """Ablations (a) and (b) on an STS set: test Spearman x100 per split of the dev-chosen subsets.

    Every subset is searched (no size cap up to 13 hidden states; beyond that the search's default cap).
    ``splits``: (dev rows, test rows) pairs, e.g. :func:`seeded_splits`, or one: a dev file and a test file,
    stacked. Returns a :class:`SizeAblation` (lists over splits).
    """
    gold = check_gold(gold)
    groups = None if groups is None else np.asarray(groups)
    out: dict = {"best": [], "by_size": {}, "without": {}, "choices": []}
    for dev, test in splits:
        search = LayerSubsetSearch(aggregation=aggregation, show_progress=False).fit(
            stack1.mean[dev], stack2.mean[dev], gold[dev], groups=None if groups is None else groups[dev])
        by_size, without, best = _by_size_and_without(search.masks_, search.scores_)
        g_test = None if groups is None else groups[test]
        score = partial(_test_spearman, {}, stack1.take(test), stack2.take(test), gold[test], g_test, aggregation)

        out["best"].append(score(best))
        for size, layers in by_size.items():
            out["by_size"].setdefault(size, []).append(score(layers))
        for layer, layers in without.items():
            out["without"].setdefault(layer, []).append(score(layers))
        out["choices"].append({"best": list(best), "by_size": {s: list(v) for s, v in by_size.items()},
                               "without": {s: list(v) for s, v in without.items()}})
    return SizeAblation(**out)


def ablate_transfer(
    data: TransferFeatures,
    *,
    n_outer: int = 10,
    n_inner: int = 10,
    seed: int = 0,
    max_layers: int | None = None,
    n_jobs: int = 1,
) -> SizeAblation:
    """Ablations (a) and (b) on a transfer task: test accuracy x100 per outer split of the inner-CV choices.

    ``max_layers`` None searches every subset up to 13 hidden states (else subsets of at most 4).
    """
    n_states = data.n_states
    cap = (n_states if n_states <= 13 else 4) if max_layers is None else int(max_layers)
    subsets = all_subsets(n_states, cap)
    masks = np.zeros((len(subsets), n_states), dtype=bool)
    for i, s in enumerate(subsets):
        masks[i, list(s)] = True
    out: dict = {"best": [], "by_size": {}, "without": {}, "choices": [], "max_layers": cap}
    ridge = RidgeScreen(data)  # one for every outer split: its sums over all rows are reused
    for k, (td, te) in enumerate(outer_splits(data.labels, n_splits=n_outer, seed=seed)):
        splits = inner_splits(data.labels[td], n_splits=n_inner, seed=seed + k)
        screen = ridge.scores(td, splits, subsets).mean(1)
        by_size, without, best = _by_size_and_without(masks, screen)
        unique = sorted({best, *by_size.values(), *without.values()})
        accs = parallel_map([partial(subset_accuracy, data, td, te, s, seed=seed + k) for s in unique], n_jobs)
        acc = {s: 100 * a for s, a in zip(unique, accs, strict=True)}
        out["best"].append(acc[best])
        for size, layers in by_size.items():
            out["by_size"].setdefault(size, []).append(acc[layers])
        for layer, layers in without.items():
            out["without"].setdefault(layer, []).append(acc[layers])
        out["choices"].append({"best": list(best), "by_size": {s: list(v) for s, v in by_size.items()},
                               "without": {s: list(v) for s, v in without.items()}})
    return SizeAblation(**out)


def limited_data(
    data: TransferFeatures,
    *,
    fractions: Sequence[float] = LIMITED_FRACTIONS,
    seeds: Sequence[int] = tuple(range(10)),
    n_inner: int = 10,
    max_layers: int | None = None,
    n_jobs: int = 1,
    split_seed: int = 0,
    progress=None,
) -> LimitedAblation:
    """Ablation (c): one stratified 85/15 split (``split_seed``) fixes the test part; for each seed the train-dev
    part is cut to each fraction (the first ``round(f * n)`` of that seed's permutation, so smaller sets are
    inside larger ones, at least 2 examples). LC is chosen on the cut part by the inner ridge screen; LC and
    last-layer mean are fitted with the paper's classifier on the cut part.

    Returns a :class:`LimitedAblation`: fraction -> n_train and, per seed, LC and last-layer accuracy x100, LC's subset.
    """
    seeds, fractions = list(seeds), list(fractions)
    if not seeds or not fractions:
        raise ValueError(f"limited-data ablation needs at least one seed and one fraction, got {len(seeds)} seeds "
                         f"and {len(fractions)} fractions; e.g. seeds=range(10)")
    n_states = data.n_states
    subsets = all_subsets(n_states, default_max_layers(n_states) if max_layers is None else max_layers)
    last = (n_states - 1,)
    out: dict[float, LimitedCell] = {}
    td, te = outer_splits(data.labels, n_splits=1, seed=split_seed)[0]
    for seed in seeds:
        perm = np.random.default_rng(seed).permutation(td)
        for f in fractions:
            if not 0 < f <= 1:
                raise ValueError(f"fractions must lie in (0, 1], got {f}")
            rows = np.sort(perm[:max(2, int(round(f * len(td))))])
            splits = inner_splits(data.labels[rows], n_splits=n_inner, seed=seed)
            splits = [(a, b) for a, b in splits if len(a) and len(b)]
            screen = RidgeScreen(data).scores(rows, splits, subsets).mean(1)
            lc = subsets[int(np.argmax(screen))]
            accs = [100 * a for a in parallel_map([partial(subset_accuracy, data, rows, te, s, seed=seed)
                                                   for s in (lc, last)], n_jobs)]
            cell = out.setdefault(f, LimitedCell(len(rows), [], [], []))
            cell.lc.append(accs[0])
            cell.last.append(accs[1])
            cell.layers.append(list(lc))
            if progress is not None:
                progress.update(1)
    return LimitedAblation(out)
