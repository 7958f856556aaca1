"""The candidates of a compression run, their Pareto front, the choice under a quality budget, and the report.

A candidate is a model (a recipe at a depth) on a backend, measured once: dev and test Spearman x100, parameters,
and throughput as a ratio to the original model timed in the same run (same sentences, batch and max length).
The front holds the candidates no other candidate beats on both dev Spearman and throughput; the choice is the
fastest candidate whose dev Spearman is at most ``budget`` points below the original's (the original itself always
qualifies, so there is always a choice).
"""

from __future__ import annotations

import logging
import os
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path

from layerwise.reports import save_figure

logger = logging.getLogger(__name__)

__all__ = ["BACKEND_MARKERS", "RECIPES", "Candidate", "CompressResult", "choose", "frontier_table", "outside_budget",
           "pareto_front", "plot_frontier", "stop_record"]

#: recipe -> what it is, in words (the report's legend)
RECIPES = {
    "original": "the full model, mean of the last hidden state",
    "cut": "the first l layers, mean of hidden state l, no training",
    "lc-cut": "the first l layers, mean of the best subset of hidden states 0..l on dev (exact search), no training",
    "distilled": "the first l layers + mean pooling, trained by MSE to the original's embeddings on the corpus",
    "every-depth": "the first l layers of one student whose mean at every depth was trained at once by MSE to the "
                   "original's embeddings (one training run for all depths)",
}


@dataclass(frozen=True)
class Candidate:
    """One measured candidate (JSON round trip: :meth:`to_dict`, :meth:`from_dict`)."""

    recipe: str  # a key of RECIPES
    depth: int  # transformer layers the model runs (hidden state max(layers))
    layers: tuple[int, ...]  # hidden states whose token means are averaged
    backend: str  # torch, onnx, onnx-int8, onnx-int8-mixed, openvino, openvino-int8
    parameters: int  # encoder parameters (pooler head excluded)
    dev: float  # Spearman x100 on the dev pairs
    tests: dict[str, float]  # test set name -> Spearman x100
    speed: dict  # seconds and original_seconds per timed pass (interleaved), sentences, batch_size, max_length
    extra: dict = field(default_factory=dict)  # the recipe's own facts (a student's training: steps, loss, MSE)

    @property
    def name(self) -> str:
        return f"{self.recipe}-l{self.depth}-{self.backend}"

    @property
    def ratio(self) -> float:
        """Throughput relative to the original model: median original pass / median candidate pass."""
        return statistics.median(self.speed["original_seconds"]) / statistics.median(self.speed["seconds"])

    @property
    def pass_ratios(self) -> list[float]:
        """The ratio of each interleaved pair of passes (original pass / candidate pass): how much ``ratio`` moves
        between passes of one run."""
        return [o / s for o, s in zip(self.speed["original_seconds"], self.speed["seconds"], strict=True)]

    def to_dict(self) -> dict:
        out = asdict(self)
        out["layers"] = list(self.layers)
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "Candidate":
        return cls(**{**data, "layers": tuple(data["layers"])})


@dataclass(frozen=True)
class CompressResult:
    """What a run measured: the original model and every candidate (the original among them)."""

    config: dict  # CompressConfig.to_dict()
    model: dict  # the original's identity (keys.model_key)
    n_layers: int  # L, the original's transformer layers
    data: dict  # CompressData.checksums(), plus the number of corpus sentences
    original: Candidate
    candidates: list[Candidate]
    # depths asked for but not built: a run that stops descending once a depth is outside the budget
    # (``stop_outside_budget``) leaves the shallower ones out
    unbuilt_depths: list[int] = field(default_factory=list)

    def to_dict(self) -> dict:
        out = asdict(self)
        out["original"] = self.original.to_dict()
        out["candidates"] = [c.to_dict() for c in self.candidates]
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "CompressResult":
        return cls(**{**data, "original": Candidate.from_dict(data["original"]),
                      "candidates": [Candidate.from_dict(c) for c in data["candidates"]]})


def pareto_front(candidates: list[Candidate]) -> list[Candidate]:
    """The candidates that no other one dominates (at least as good on dev Spearman and throughput, better on one),
    fastest first."""
    def dominates(a: Candidate, b: Candidate) -> bool:
        return a.dev >= b.dev and a.ratio >= b.ratio and (a.dev > b.dev or a.ratio > b.ratio)

    front = [c for c in candidates if not any(dominates(o, c) for o in candidates if o is not c)]
    return sorted(front, key=lambda c: (-c.ratio, -c.dev))


def outside_budget(candidates: list[Candidate], original_dev: float, budget: float, depth: int) -> bool:
    """Whether no candidate that runs at most ``depth`` layers is within ``budget`` points of the original's dev
    Spearman: where a run that builds its depths deepest first stops (``stop_outside_budget``), since the
    shallower depths' candidates are cut from, or trained as, still smaller models."""
    return not any(c.depth <= depth and c.dev >= original_dev - budget for c in candidates)


def stop_record(candidates: list[Candidate], budget: float, depth: int) -> dict | None:
    """Where and why a descent stops after ``depth`` (:func:`outside_budget` on ``candidates``, the torch original
    among them): ``{"depth", "budget", "original_dev", "best", "best_layers", "best_dev"}`` (the best candidate of at
    most ``depth`` layers), logged; None when it goes on."""
    original = next(c for c in candidates if c.recipe == "original" and c.backend == "torch")
    if not outside_budget(candidates, original.dev, budget, depth):
        return None
    best = max((c for c in candidates if c.depth <= depth), key=lambda c: c.dev)
    logger.info("depth %d: no candidate of at most %d layers within %g of the original's dev Spearman %.2f (best %s "
                "%.2f); the shallower depths are not built", depth, depth, budget, original.dev, best.name, best.dev)
    return {"depth": depth, "budget": budget, "original_dev": original.dev, "best": best.name,
            "best_layers": list(best.layers), "best_dev": best.dev}


def choose(candidates: list[Candidate], original_dev: float, budget: float) -> Candidate:
    """The fastest candidate with dev Spearman >= ``original_dev - budget`` (ties: the better dev score)."""
    within = [c for c in candidates if c.dev >= original_dev - budget]
    if not within:
        raise ValueError(f"no candidate within {budget} points of the original's dev Spearman {original_dev:.2f}")
    return max(within, key=lambda c: (c.ratio, c.dev))


def frontier_table(candidates: list[Candidate], chosen: Candidate | None = None) -> list[str]:
    """A markdown table of every candidate, fastest first: front members and the choice marked."""
    tests = sorted({t for c in candidates for t in c.tests})
    front = {c.name for c in pareto_front(candidates)}
    head = ["| candidate | recipe | depth | hidden states | backend | parameters | throughput ratio | dev Spearman "
            + "".join(f"| {t} " for t in tests) + "| Pareto front |",
            "|---" * (8 + len(tests)) + "|---|"]
    rows = []
    for c in sorted(candidates, key=lambda c: (-c.ratio, -c.dev)):
        mark = "chosen" if chosen is not None and c.name == chosen.name else ("yes" if c.name in front else "")
        rows.append(f"| {c.name} | {c.recipe} | {c.depth} | {','.join(map(str, c.layers))} | {c.backend} | "
                    f"{c.parameters / 1e6:.2f} M | {c.ratio:.2f}x | {c.dev:.2f} "
                    + "".join(f"| {c.tests[t]:.2f} " if t in c.tests else "| - " for t in tests) + f"| {mark} |")
    return head + rows


#: backend -> its marker in the frontier plot (colour gives the recipe); an unknown backend is drawn as "X"
BACKEND_MARKERS = {"torch": "o", "onnx": "s", "onnx-int8": "^", "onnx-int8-mixed": "P", "openvino": "D",
                   "openvino-int8": "v"}


def plot_frontier(candidates: list[Candidate], path: str | os.PathLike, *, title: str,
                  chosen: Candidate | None = None) -> Path:
    """Dev Spearman against throughput ratio, a colour per recipe and a marker per backend, the Pareto front as a
    line whose members are numbered and named beside the plot (the others are in the report's table: naming every
    point in the plot overprints the fp32 cluster near 1x and the front's dense stretch); a PNG."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    front = sorted(pareto_front(candidates), key=lambda c: c.ratio)
    fig = Figure(figsize=(9, max(4.8, 2.6 + 0.16 * len(front))), dpi=120, layout="constrained")
    ax = fig.subplots()
    colours = {recipe: f"C{i}" for i, recipe in enumerate(RECIPES)}
    for c in candidates:
        ax.scatter([c.ratio], [c.dev], s=26, color=colours.get(c.recipe, "grey"),
                   marker=BACKEND_MARKERS.get(c.backend, "X"), alpha=0.85)
    ax.plot([c.ratio for c in front], [c.dev for c in front], "k--", linewidth=0.8)
    for i, c in enumerate(front, 1):  # above and below the line by turns, so that neighbours do not overprint
        ax.annotate(str(i), (c.ratio, c.dev), xytext=(3, 4 if i % 2 else -10), textcoords="offset points",
                    fontsize=7, fontweight="bold")
    if chosen is not None:
        ax.scatter([chosen.ratio], [chosen.dev], s=140, facecolors="none", edgecolors="red")
    blank = {"linestyle": "", "marker": ""}
    handles = [Line2D([], [], color=colours[r], marker="o", linestyle="", label=r)
               for r in RECIPES if any(c.recipe == r for c in candidates)]
    handles += [Line2D([], [], color="black", marker=m, linestyle="", fillstyle="none", label=b)
                for b, m in BACKEND_MARKERS.items() if any(c.backend == b for c in candidates)]
    if chosen is not None:
        handles.append(Line2D([], [], color="red", marker="o", fillstyle="none", linestyle="", markersize=10,
                              label="chosen"))
    handles.append(Line2D([], [], color="black", linestyle="--", linewidth=0.8, label="Pareto front:"))
    handles += [Line2D([], [], label=f"{i} {c.name}", **blank) for i, c in enumerate(front, 1)]
    ax.set_xlabel("throughput relative to the original (x)")
    ax.set_ylabel("dev Spearman x100")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(handles=handles, fontsize=6.5, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    return save_figure(fig, path, tight=False)  # the constrained layout keeps room for the legend


def report_lines(report: dict, *, title: str) -> list[str]:
    """The markdown of a run's report: the choice, the frontier table and how each recipe and ratio is made.
    ``report``: ``{"chosen", "original", "candidates", "budget"}`` as :meth:`Compressor.report` gives it."""
    chosen, original = Candidate.from_dict(report["chosen"]), Candidate.from_dict(report["original"])
    candidates = [Candidate.from_dict(c) for c in report["candidates"]]
    s = chosen.speed
    return [
        f"# {title}", "",
        f"Chosen with a budget of {report['budget']:g} points of dev Spearman: **{chosen.name}** ({chosen.recipe}, "
        f"{chosen.depth} layers, hidden states {','.join(map(str, chosen.layers))}): dev Spearman {chosen.dev:.2f} "
        f"against the original's {original.dev:.2f}, {chosen.ratio:.2f}x its throughput, "
        f"{chosen.parameters / 1e6:.2f} M parameters against {original.parameters / 1e6:.2f} M.", "",
        *_unbuilt_lines(report.get("unbuilt_depths") or [], report["budget"]),
        "## Candidates", "", *frontier_table(candidates, chosen), "",
        "Spearman x100 of the cosine of the two sentence vectors against the gold scores. Throughput ratio: the "
        "original model's median pass over its candidate's, the two timed in one run, passes interleaved "
        f"({s['sentences']} corpus sentences, batch {s['batch_size']}, max length {s['max_length']} tokens, "
        f"{len(s['seconds'])} timed passes each, {s['threads']} torch threads); the original timed against itself "
        f"({original.ratio:.2f}x) shows how noisy the timing was. Recipes:", "",
        *[f"- {name}: {what}" for name, what in RECIPES.items()], "",
    ]


def _unbuilt_lines(unbuilt: list[int], budget: float) -> list[str]:
    """The report's note on the depths a run left out (``stop_outside_budget``), or nothing."""
    if not unbuilt:
        return []
    return [f"Depths not built: {', '.join(map(str, sorted(unbuilt)))} (`stop_outside_budget`: the depths were built "
            "deepest first, and the run stopped after the first one at which no candidate of at most that many "
            f"layers was within {budget:g} points of the original on dev); the choice is among the depths built.", ""]
