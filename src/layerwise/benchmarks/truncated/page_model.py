"""What the TMFT page holds (:class:`TMFTPage`, read from the store by ``pages.py``) and how its runs group: over
seeds by (model, pre-step, layers, epochs), the per-layer curves at each model's main epoch count, the page's models.
``report.py`` renders it; ``figures.py`` draws it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from layerwise.benchmarks.truncated.analysis import Frontier, Throughput
from layerwise.methods.truncated.run import TMFTResult

__all__ = ["LABELS", "Group", "TMFTPage", "curves", "epochs_of", "find", "group_results", "groups", "page_models"]

LABELS = {"none": "TMFT", "ws": "WS + TMFT", "mlm": "MLM + TMFT"}


@dataclass
class TMFTPage:
    title: str
    settings: dict  # the TMFTPageConfig as a dict
    results: list[TMFTResult]
    frontiers: dict[str, Frontier]  # model name -> frontier
    throughputs: dict[str, Throughput]
    lc_layers: tuple[int, ...] | None  # the first model's dev-chosen subset (LC-TMFT), None before its frontier
    missing: list[str] = field(default_factory=list)
    provenance: list[str] = field(default_factory=list)
    wall_seconds: dict[str, float] = field(default_factory=dict)  # part name -> wall seconds it took
    speed_load: dict[str, list | None] = field(default_factory=dict)  # model -> load average when timed (1, 5, 15 min)
    run_loads: dict[str, tuple] = field(default_factory=dict)  # part name -> run_time_row
    devices: list[str] = field(default_factory=list)  # where the TMFT runs shown trained ("cpu", "cuda"...)
    estimates: dict[str, list] = field(default_factory=dict)  # model -> estimated seconds per run not stored yet
    gold: dict = field(default_factory=dict)  # data checksum -> gold test scores (the paired tests read them)
    # the first model's frontier on another data set, by the name its runs group under ("all-MiniLM-L6-v2 on sickr")
    other_frontiers: dict[str, Frontier] = field(default_factory=dict)
    run_devices: dict[str, str] = field(default_factory=dict)  # run part name -> the device it trained on


@dataclass(frozen=True)
class Group:
    """The seeds of one (model, pre-step, layers, epochs)."""

    model: str
    pre_step: str
    layers: tuple[int, ...]
    epochs: int
    results: tuple[TMFTResult, ...]

    @property
    def depth(self) -> int:
        return max(self.layers)

    def mean_std(self, attr: str = "test_spearman") -> tuple[float, float]:
        a = np.asarray([getattr(r, attr) for r in self.results], dtype=float)
        return float(a.mean()), float(a.std(ddof=1)) if len(a) > 1 else 0.0

    def cell(self, attr: str = "test_spearman") -> str:
        m, s = self.mean_std(attr)
        return f"{m:.2f}" if len(self.results) == 1 else f"{m:.2f} ± {s:.2f} ({len(self.results)})"

    @property
    def parameters(self) -> int:
        return self.results[0].parameters


def group_results(results: list[TMFTResult]) -> list[Group]:
    """Results grouped over seeds by (model, pre-step, layers, epochs), in the order they first appear; a run on
    another data set than STS-B names it after the model ("all-MiniLM-L6-v2 on sickr")."""
    out: dict[tuple, list[TMFTResult]] = {}
    for r in results:
        c = r.config
        on = "" if c.get("dataset", "stsb") == "stsb" else f" on {c['dataset']}"
        out.setdefault((Path(c["model"]).name + on, c["pre_step"], tuple(c["layers"]), int(c["epochs"])), []).append(r)
    return [Group(*k, tuple(v)) for k, v in out.items()]


def groups(page: TMFTPage) -> list[Group]:
    return group_results(page.results)


def epochs_of(settings: dict, model: str) -> int:
    """The main epoch count of ``model``'s runs: ``mpnet_epochs`` for the second model, else ``epochs``."""
    second = settings.get("mpnet")
    if second and Path(second).name == Path(model).name and settings.get("mpnet_epochs"):
        return int(settings["mpnet_epochs"])
    return int(settings["epochs"])


def curves(page: TMFTPage) -> list[Group]:
    """Single-layer groups at each model's main epoch count (the per-layer curves)."""
    return [g for g in groups(page) if len(g.layers) == 1 and g.epochs == epochs_of(page.settings, g.model)]


def find(gs: list[Group], model: str, pre: str, layers: tuple[int, ...], epochs: int) -> Group | None:
    return next((g for g in gs if (g.model, g.pre_step, g.layers, g.epochs) == (model, pre, layers, epochs)), None)


def page_models(page: TMFTPage) -> list[tuple[str, list[int]]]:
    s = page.settings
    out = [(Path(s["minilm"]).name, list(s["minilm_depths"]))]
    return out + ([(Path(s["mpnet"]).name, list(s["mpnet_depths"]))] if s["mpnet"] else [])
