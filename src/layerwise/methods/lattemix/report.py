"""Markdown, JSON and a figure for a Latte-Mix run."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from layerwise.reports import fmt, write_json, write_text

__all__ = ["method_table", "render_markdown", "write_outputs"]

METHOD_NAMES = {
    "cls": "CLS", "mean": "mean pooling", "mean_no_special": "mean pooling (no special tokens)", "max": "max pooling",
    "categorical/cosine": "Latte-Mix: categorical VAE, cosine", "categorical/js": "Latte-Mix: categorical VAE, -JS",
    "normal/l2": "Normal VAE, -L2 of Gaussian mixtures", "normal/cosine": "Normal VAE, cosine of Gaussian mixtures",
    "ae/cosine": "autoencoder, cosine of mean codes",
}


def method_table(result: dict) -> dict[str, dict[str, tuple[float, float | None]]]:
    """method -> dataset -> (mean, std over seeds or None for deterministic baselines)."""
    rows: dict[str, dict[str, tuple[float, float | None]]] = {}
    for method, per in result["baselines"].items():
        rows[method] = {d: (v, None) for d, v in per.items()}
    for kind, run in result["runs"].items():
        for metric, per in run["scores"].items():
            rows[f"{kind}/{metric}"] = {d: (float(np.mean(v)), float(np.std(v))) for d, v in per.items()}
    return rows


def render_markdown(result: dict) -> str:
    m = result["model"]
    env = result.get("environment", {})
    datasets = list(result["data"])
    rows = method_table(result)
    lines = [
        f"# Latte-Mix zero-shot STS: {m['name']}, hidden state {result['layer']}", "",
        f"- model: `{m['name']}` ({m.get('hf_id') or m['path']}), weights sha256 `{m['weights_sha256'][:16]}…`; "
        f"token vectors of hidden state {result['layer']} (0 = embedding output, {m['n_layers']} = last)",
        "- data: " + "; ".join(f"`{k}` {v['split']} ({v['n_pairs']} pairs)" for k, v in result["data"].items())
        + f"; aggregation `{result['aggregation']}`",
        f"- training text (no labels): {result['training_text']['n_sentences']} sentences, "
        f"{result['training_text'].get('n_tokens', '?')} tokens; {result['training_text']['note']}; "
        f"{result['training_text']['excluded_as_evaluation_sentences']} sentences dropped because they are evaluation sentences",
        f"- command: `{env.get('command', '')}`; date {env.get('date', '')}; "
        + ", ".join(f"{k} {v}" for k, v in env.get("versions", {}).items()),
        "",
        "Spearman x100; trained models: mean ± std over seeds " + str(next(iter(result["runs"].values()))["seeds"]
                                                                   if result["runs"] else []) + ".",
        "",
        "| method | " + " | ".join(datasets) + " |",
        "|---|" + "---|" * len(datasets),
    ]
    for method, per in rows.items():
        lines.append(f"| {METHOD_NAMES.get(method, method)} | "
                     + " | ".join(fmt(*per[d]) if per[d][1] is not None else fmt(per[d][0]) for d in datasets) + " |")
    lines += ["", "| model | config | train s per seed | final loss | final KL |", "|---|---|---|---|---|"]
    for kind, run in result["runs"].items():
        c = run["config"]
        desc = (f"C={c['n_classes']}, G={c['n_groups']}, tau={c['tau']}" if kind == "categorical"
                else f"D={c['latent_dim']}") + f", depth {c['depth']}, beta {c['beta']} (warm-up {c['beta_warmup_steps']} steps)"
        lines.append(f"| {kind} | {desc} | {np.mean(run['train_seconds']):.1f} | {np.mean(run['final_loss']):.2f} | "
                     f"{np.mean(run['final_kl']):.3f} |")
    lines.append("")
    return "\n".join(lines)


def _plot(result: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = method_table(result)
    datasets = list(result["data"])
    methods = list(rows)
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(datasets) + 3), 4), dpi=120)
    width = 0.8 / len(methods)
    for i, meth in enumerate(methods):
        vals = [rows[meth][d][0] for d in datasets]
        errs = [rows[meth][d][1] or 0.0 for d in datasets]
        ax.bar(np.arange(len(datasets)) + i * width, vals, width, yerr=errs, label=METHOD_NAMES.get(meth, meth))
    ax.set_xticks(np.arange(len(datasets)) + 0.4 - width / 2)
    ax.set_xticklabels(datasets)
    ax.set_ylabel("Spearman x 100")
    lo = min(rows[m][d][0] for m in methods for d in datasets)
    ax.set_ylim(max(0, lo - 10), None)
    ax.set_title(f"Latte-Mix vs pooling: {result['model']['name']}, hidden state {result['layer']}", fontsize=10)
    ax.legend(fontsize=6, loc="lower right")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def write_outputs(result: dict, output) -> dict[str, Path]:
    out = Path(output)
    stem = f"lattemix-{Path(result['model']['name']).name}-layer{result['layer']}"
    return {
        "json": write_json(out / f"{stem}.json", result),
        "markdown": write_text(out / f"{stem}.md", render_markdown(result)),
        "plot": _plot(result, out / f"{stem}.png"),
    }
