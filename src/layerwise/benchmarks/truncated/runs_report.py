"""The outputs of ``layerwise tmft``: a table of its runs (markdown and JSON) and a per-layer figure.

Runs of the same (model, pre-step, layers, epochs) are grouped over seeds (mean ± sample std).
"""

from __future__ import annotations

import numpy as np

from layerwise.benchmarks.truncated.page_model import LABELS, Group, group_results
from layerwise.methods.truncated.run import TMFTResult

__all__ = ["draw_runs", "runs_markdown", "runs_summary"]


def runs_summary(results: list[TMFTResult], environment: dict) -> dict:
    return {"environment": environment, "runs": [r.to_dict() for r in results],
            "groups": [{"model": g.model, "pre_step": g.pre_step, "layers": list(g.layers), "epochs": g.epochs,
                        "seeds": [r.config["seed"] for r in g.results], "parameters": g.parameters,
                        "test_spearman": g.mean_std()[0], "test_spearman_std": g.mean_std()[1],
                        "dev_spearman": g.mean_std("dev_spearman")[0]} for g in group_results(results)]}


def runs_markdown(results: list[TMFTResult], command: str) -> str:
    lines = ["# TMFT runs", "", "Test Spearman x100 (STS-B; another set is named after the model) of the checkpoint "
             "with the best dev Spearman; mean ± sample std "
             "over seeds (number of seeds). Hidden state 0 is the embedding output.", "",
             "| model | method | layers | epochs | parameters | share of full | dev | test | test Pearson |",
             "|---|---|---|---|---|---|---|---|---|"]
    for g in group_results(results):
        method = LABELS[g.pre_step] if len(g.layers) == 1 else f"LC-{LABELS[g.pre_step]}"
        share = g.parameters / g.results[0].full_parameters
        lines.append(f"| {g.model} | {method} | {','.join(map(str, g.layers))} | {g.epochs} | {g.parameters:,} | "
                     f"{share:.0%} | {g.cell('dev_spearman')} | {g.cell()} | {g.cell('test_pearson')} |")
    lines += ["", "Saved models (sentence-transformers folders):", ""]
    lines += [f"- `{r.config['pre_step']}` L{','.join(map(str, r.config['layers']))} seed {r.config['seed']}: "
              f"`{r.saved_model}`" for r in results]
    return "\n".join(lines + ["", f"Command: `{command}`", ""])


def draw_runs(results: list[TMFTResult]):
    """Figure: test Spearman against depth per (model, pre-step), mean ± std shaded (single-layer runs)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.0, 3.6), layout="constrained")
    ax = fig.subplots()
    lines: dict[tuple, list[Group]] = {}
    for g in group_results(results):
        if len(g.layers) == 1:
            lines.setdefault((g.model, g.pre_step, g.epochs), []).append(g)
    for (model, pre, epochs), gs in lines.items():
        gs = sorted(gs, key=lambda g: g.depth)
        x = [g.depth for g in gs]
        m, sd = np.array([g.mean_std() for g in gs]).T
        ax.plot(x, m, marker="o", label=f"{model} {LABELS[pre]} ({epochs} ep)")
        ax.fill_between(x, m - sd, m + sd, alpha=0.2)
    ax.set_xlabel("depth l (hidden state, 0 = embeddings)")
    ax.set_ylabel("test Spearman x100")
    if lines:
        ax.legend(fontsize=7)
    return fig
