"""Markdown, JSON and a figure for a Latte-Mix run."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from layerwise.benchmarks.lattemix.results import LatteMixResult
from layerwise.methods.lattemix.config import LatteMixConfig
from layerwise.reports import fmt, sample_std, save_figure, write_json, write_text

__all__ = ["METHOD_NAMES", "format_cell", "method_table", "render_markdown", "write_outputs"]

METHOD_NAMES = {
    "cls": "CLS", "mean": "mean pooling", "mean_no_special": "mean pooling (no special tokens)", "max": "max pooling",
    "categorical/cosine": "Latte-Mix: categorical VAE, cosine", "categorical/js": "Latte-Mix: categorical VAE, -JS",
    "categorical/l2": "Latte-Mix: categorical VAE, -L2",
    "normal/l2": "Normal VAE, -L2 of Gaussian mixtures", "normal/cosine": "Normal VAE, cosine of Gaussian mixtures",
    "ae/cosine": "autoencoder, cosine of mean codes",
}


def method_table(result: LatteMixResult) -> dict[str, dict[str, tuple[float, float | None]]]:
    """method -> dataset -> (mean, std over seeds; None for deterministic baselines and a single seed)."""
    rows: dict[str, dict[str, tuple[float, float | None]]] = {}
    for method, per in result.baselines.items():
        rows[method] = {d: (v, None) for d, v in per.items()}
    for kind, run in result.runs.items():
        for metric, per in run.scores.items():
            rows[f"{kind}/{metric}"] = {d: (float(np.mean(v)), sample_std(v)) for d, v in per.items()}
    return rows


def format_cell(cell: tuple[float, float | None]) -> str:
    """``mean ± std`` for trained rows, the plain value for deterministic baselines."""
    return fmt(*cell) if cell[1] is not None else fmt(cell[0])


def _config_words(kind: str, c: LatteMixConfig) -> str:
    size = f"C={c.n_classes}, G={c.n_groups}, tau={c.tau}" if kind == "categorical" else f"D={c.latent_dim}"
    kl = "" if c.kl_threshold is None or kind == "ae" else f", KL threshold {c.kl_threshold}"
    return size + f", depth {c.depth} (decoder {c.decoder_layers}), beta {c.beta} (warm-up {c.beta_warmup_steps} " \
        f"steps){kl}"


def render_markdown(result: LatteMixResult) -> str:
    m, env, text = result.model, result.environment, result.training_text
    datasets = list(result.data)
    rows = method_table(result)
    lines = [
        f"# Latte-Mix zero-shot STS: {m.name}, hidden state {result.layer}", "",
        f"- model: `{m.name}` ({m.hf_id or m.path}), weights sha256 `{m.weights_sha256[:16]}…`; "
        f"token vectors of hidden state {result.layer} (0 = embedding output, {m.n_layers} = last)",
        "- data: " + "; ".join(f"`{k}` {v.split} ({v.n_pairs} pairs)" for k, v in result.data.items())
        + f"; aggregation `{result.aggregation}`",
        f"- training text (no labels): {text.n_sentences} sentences, "
        f"{'?' if text.n_tokens is None else text.n_tokens} tokens; {text.note}; "
        f"{text.excluded_as_evaluation_sentences} sentences dropped because they are evaluation sentences",
        f"- command: `{env.get('command', '')}`; date {env.get('date', '')}; "
        + ", ".join(f"{k} {v}" for k, v in env.get("versions", {}).items()),
        "",
        "Spearman x100; trained models: " + (f"mean ± sample std (ddof 1) over seeds {result.seeds}."
                                             if len(result.seeds) > 1 else f"seed {result.seeds}, no spread."),
        "",
        "| method | " + " | ".join(datasets) + " |",
        "|---|" + "---|" * len(datasets),
    ]
    for method, per in rows.items():
        lines.append(f"| {METHOD_NAMES.get(method, method)} | " + " | ".join(format_cell(per[d]) for d in datasets)
                     + " |")
    lines += ["", "| model | config | train s per seed | final loss | final KL |", "|---|---|---|---|---|"]
    for kind, run in result.runs.items():
        lines.append(f"| {kind} | {_config_words(kind, run.model_config)} | {np.mean(run.train_seconds):.1f} | "
                     f"{np.mean(run.final_loss):.2f} | {np.mean(run.final_kl):.3f} |")
    lines.append("")
    return "\n".join(lines)


def _plot(result: LatteMixResult, path: Path) -> Path:
    """Grouped bars: one group per data set, one bar per method (error bars: std over seeds)."""
    from matplotlib.figure import Figure

    rows = method_table(result)
    datasets = list(result.data)
    methods = list(rows)
    fig = Figure(figsize=(max(6, 1.6 * len(datasets) + 3), 4), dpi=120)
    ax = fig.subplots()
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
    ax.set_title(f"Latte-Mix vs pooling: {result.model.name}, hidden state {result.layer}", fontsize=10)
    ax.legend(fontsize=6, loc="lower right")
    ax.grid(axis="y", alpha=0.3)
    return save_figure(fig, path)


def write_outputs(result: LatteMixResult, output) -> dict[str, Path]:
    """Write ``lattemix-<model>-layer<state>.json`` (:meth:`LatteMixResult.to_dict`), ``.md`` and ``.png``."""
    out = Path(output)
    stem = f"lattemix-{Path(result.model.name).name}-layer{result.layer}"
    return {
        "json": write_json(out / f"{stem}.json", result.to_dict()),
        "markdown": write_text(out / f"{stem}.md", render_markdown(result)),
        "plot": _plot(result, out / f"{stem}.png"),
    }
