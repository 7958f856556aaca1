"""The TMFT page's three figures: per-layer curves, parameters against quality, measured speed per depth."""

from __future__ import annotations

import numpy as np

from layerwise.benchmarks.truncated.analysis import pareto_front
from layerwise.benchmarks.truncated.page_model import LABELS, TMFTPage, curves, page_models

__all__ = ["draw_cost", "draw_layers", "draw_speed"]


def draw_layers(page: TMFTPage):
    """Figure: test Spearman against depth, mean ± std shaded, one line per pre-step, the frontier dashed."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    models = page_models(page)
    fig = Figure(figsize=(5.0 * len(models), 3.6), layout="constrained")
    for ax, (model, _) in zip(fig.subplots(1, len(models), squeeze=False)[0], models, strict=True):
        for pre in ("none", "ws", "mlm"):
            gs = sorted((g for g in curves(page) if g.model == model and g.pre_step == pre), key=lambda g: g.depth)
            if gs:
                x = [g.depth for g in gs]
                m, sd = np.array([g.mean_std() for g in gs]).T
                ax.plot(x, m, marker="o", label=LABELS[pre])
                ax.fill_between(x, m - sd, m + sd, alpha=0.2)
        if model in page.frontiers:
            fr = page.frontiers[model].rows
            ax.plot([r.depth for r in fr], [r.test_spearman for r in fr], "k--", marker=".",
                    label="frontier (no training)")
        ax.set_title(model, fontsize=9)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("depth l (hidden state, 0 = embeddings)")
        ax.set_ylabel("STS-B test Spearman x100")
        ax.legend(fontsize=7)
    return fig


def draw_cost(page: TMFTPage):
    """Figure: parameters against test Spearman for every group and frontier depth; the Pareto front of the runs."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.0, 4.0), layout="constrained")
    ax = fig.subplots()
    models = dict(page_models(page))
    gs = [g for g in curves(page) if g.model in models]  # STS-B runs (those on another data set have their table)
    for model in models:
        for pre in ("none", "ws", "mlm"):
            pts = [(g.parameters / 1e6, g.mean_std()[0]) for g in gs if g.model == model and g.pre_step == pre]
            if pts:
                ax.scatter(*zip(*pts, strict=True), label=f"{model} {LABELS[pre]}", s=18)
        if model in page.frontiers:
            fr = page.frontiers[model].rows
            ax.scatter([r.parameters / 1e6 for r in fr], [r.test_spearman for r in fr], marker="x",
                       label=f"{model} frontier (no training)")
    pts = [(g.parameters / 1e6, g.mean_std()[0]) for g in gs]
    if pts:
        front = [pts[i] for i in pareto_front(pts)]
        ax.step(*zip(*front, strict=True), "k-", where="post", lw=1, label="Pareto front (runs)")
    ax.set_xlabel("parameters (millions, pooler excluded)")
    ax.set_ylabel("STS-B test Spearman x100")
    ax.legend(fontsize=6)
    return fig


def draw_speed(page: TMFTPage):
    """Figure: measured sentences/s against depth, one line per model."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.0, 3.4), layout="constrained")
    ax = fig.subplots()
    for model, t in page.throughputs.items():
        ax.plot([r.depth for r in t.rows], [r.sentences_per_second for r in t.rows], marker="o", label=model)
    ax.set_xlabel("depth l (hidden state)")
    devices = sorted({t.device for t in page.throughputs.values()})
    ax.set_ylabel(f"sentences / s ({', '.join(devices) or 'cpu'})")
    if page.throughputs:
        ax.set_yscale("log")
        ax.legend(fontsize=7)
    return fig
