"""What the fast subset choice of the transfer protocol costs: ridge screen against exhaustive SAGA, per split.

On one task and the first ``n_splits`` outer splits, every subset gets the full SAGA inner cross-validation (the
slow reference) and the ridge screen's choice, "ridge top k, then SAGA", and the screen on a projection with the
fraction of d used for all-mpnet-base-v2 are compared with it on inner and test accuracy. The result is a part
``check-<task>`` of the ``transfer`` page, saved after every split (``complete=False`` until the last).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from layerwise.benchmarks.lc.transfer_run import PAGE, encode_task
from layerwise.benchmarks.store import Part, ResultsStore, model_key
from layerwise.data.checksum import content_checksum
from layerwise.data.senteval import load_transfer
from layerwise.encoders.layer_encoder import LayerEncoder, ModelIdentity
from layerwise.evaluation.classification import inner_splits, outer_splits
from layerwise.methods.lc.screen import RidgeScreen
from layerwise.methods.lc.transfer import all_subsets, choose_subset, default_max_layers, subset_accuracy

logger = logging.getLogger(__name__)

__all__ = ["CheckResult", "CheckSplit", "ShortcutCheck", "check_key", "run_shortcut_check"]


@dataclass(frozen=True)
class ShortcutCheck:
    model: str = "all-MiniLM-L6-v2"
    task: str = "cr"
    n_splits: int = 3  # outer splits checked
    n_inner: int = 10
    mpnet_screen_dim: int = 128  # the projected screen keeps this fraction of 768 dimensions
    n_jobs: int = 2
    data_dir: str | None = None


@dataclass
class CheckSplit:
    """One outer split of the check. Choices are named "1" (ridge alone), "3", "10" (ridge top k, then SAGA),
    the number of subsets (exhaustive SAGA, the reference) and "projected<dim>" (screen on a projection)."""

    seed: int
    ridge_seconds: float
    exhaustive_seconds: float
    choice: dict[str, list[int]]  # name -> chosen hidden states
    inner_saga: dict[str, float]  # name -> SAGA inner accuracy x100 of its choice
    test: dict[str, float]  # name -> test accuracy x100 of its choice
    rank_of_exhaustive_choice_in_screen: int
    spearman_screen_vs_saga: float  # over all subsets


@dataclass
class CheckResult:
    task: str
    model: ModelIdentity
    n_subsets: int
    splits: list[CheckSplit] = field(default_factory=list)
    migrated_from: str | None = None

    def to_dict(self) -> dict:
        d = {"task": self.task, "model": self.model.to_dict(), "n_subsets": self.n_subsets,
             "splits": [asdict(s) for s in self.splits]}
        return d if self.migrated_from is None else {**d, "migrated_from": self.migrated_from}

    @classmethod
    def from_dict(cls, d: dict) -> "CheckResult":
        return cls(d["task"], ModelIdentity.from_dict(d["model"]), d["n_subsets"],
                   [CheckSplit(**s) for s in d["splits"]], d.get("migrated_from"))


def check_key(identity, checksum: str, check: ShortcutCheck) -> dict:
    return {"model": model_key(identity), "max_length": 256, "dtype": "float32",
            "data": {"task": check.task, "checksum": checksum}, "n_inner": check.n_inner, "seed": 0,
            "ridge_alpha": 1e-3, "mpnet_screen_dim": check.mpnet_screen_dim}


def run_shortcut_check(check: ShortcutCheck, store: ResultsStore, env: dict) -> CheckResult:
    """The check, resumed from and saved to ``store`` after every outer split."""
    encoder = LayerEncoder(check.model, show_progress=False)
    data = load_transfer(check.task, data_dir=check.data_dir)
    key = check_key(encoder.identity, content_checksum(data), check)
    name = f"check-{check.task}"
    stored = store.load(PAGE, name, key)
    if stored is not None and len(stored.payload["splits"]) >= check.n_splits:
        return CheckResult.from_dict(stored.payload)
    runs = list(stored.runs) if stored else []
    features, _ = encode_task(encoder, data, head=False)
    subsets = all_subsets(features.n_states, default_max_layers(features.n_states))
    state = CheckResult(check.task, encoder.identity, len(subsets),
                        CheckResult.from_dict(stored.payload).splits if stored else [])
    start = len(state.splits)
    for k, (td, te) in enumerate(outer_splits(features.labels, n_splits=check.n_splits, seed=0)):
        if k < len(state.splits):
            continue
        state.splits.append(_one_split(features, td, te, subsets, k, check))
        run = {"started": env["date"], "command": env["command"], "source": env.get("source"),
               "load_at_start": env["machine"].get("load_average_1_5_15"),
               "load_at_save": [round(x, 2) for x in os.getloadavg()], "splits": [start, k + 1]}
        store.save(Part(PAGE, name, key, state.to_dict(), k + 1 >= check.n_splits, runs + [run]))
    return state


def _one_split(data, td, te, subsets, k: int, check: ShortcutCheck) -> CheckSplit:
    from scipy.stats import spearmanr

    splits = inner_splits(data.labels[td], n_splits=check.n_inner, seed=k)
    t0 = time.perf_counter()
    choose_subset(data, td, splits, subsets, shortlist=1, seed=k)
    ridge_seconds = time.perf_counter() - t0
    pdim = round(data.first.dim * check.mpnet_screen_dim / 768)
    projected = tuple(choose_subset(data, td, splits, subsets, shortlist=1, seed=k,
                                     screen=RidgeScreen(data, dim=pdim))[0])
    t0 = time.perf_counter()
    _, _, screen, saga = choose_subset(data, td, splits, subsets, shortlist=None, seed=k, n_jobs=check.n_jobs)
    exhaustive_seconds = time.perf_counter() - t0
    order = [subsets[i] for i in np.argsort(-screen, kind="stable")]
    key = lambda s: ",".join(map(str, s))  # noqa: E731
    saga_of = {s: saga[key(s)] for s in subsets}
    choice = {}
    for top in (1, 3, 10, len(subsets)):
        cand = order[:top]
        choice[str(top)] = max(cand, key=lambda s: saga_of[s]) if top > 1 else cand[0]
    choice[f"projected{pdim}"] = projected
    test = {key(s): 100 * subset_accuracy(data, td, te, s, seed=k) for s in set(choice.values())}
    best = choice[str(len(subsets))]
    logger.info("check split %d: ridge %s vs exhaustive %s; ridge %.1fs, exhaustive %.1fs", k, choice["1"], best,
                ridge_seconds, exhaustive_seconds)
    return CheckSplit(seed=k, ridge_seconds=ridge_seconds, exhaustive_seconds=exhaustive_seconds,
                      choice={t: list(s) for t, s in choice.items()},
                      inner_saga={t: float(saga_of[s]) for t, s in choice.items()},
                      test={t: float(test[key(s)]) for t, s in choice.items()},
                      rank_of_exhaustive_choice_in_screen=order.index(best) + 1,
                      spearman_screen_vs_saga=float(spearmanr(screen, [saga_of[s] for s in subsets]).statistic))
