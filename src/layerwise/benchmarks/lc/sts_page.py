"""The ``lc-sts`` page: BERT-LC on every STS data set, per model (tables, chosen subsets, plots, observations).

Rows are ``run_search`` results (one per model x data set x aggregation) as stored in the results store; every
number in the markdown, including the observations, is computed from them. STS12-16 are run with the three
aggregations ``all``, ``wmean`` and ``mean``; STS-B (test split) and SICK-R (SemEval-2014 test split) with ``all``.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from layerwise.benchmarks.lc.run import STSRun
from layerwise.benchmarks.lc.sts_observations import (
    AGGREGATION_ORDER,
    COLUMNS,
    DISPLAY,
    MULTI_SUBSET,
    ROW_ORDER,
    lc_minus_last,
    observations,
    row_label,
    signed,
)
from layerwise.reports import fmt, plot_per_layer, write_text

__all__ = ["AGGREGATION_ORDER", "ROW_ORDER", "STSPageDoc", "aggregations_for", "render", "write_outputs",
           "write_plots"]


@dataclass
class STSPageDoc:
    """What the page shows: its rows (one ``run_search`` result per model x data set x aggregation)."""

    rows: list[STSRun]
    environment: dict  # of the render
    parameters: dict  # n_splits, dev_size, seed, data_dir

    def to_dict(self) -> dict:
        return {"kind": "lc-sts", "schema": 1, "environment": self.environment, "parameters": self.parameters,
                "rows": [r.to_dict() for r in self.rows]}

def by_model(rows: list[STSRun]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for row in rows:
        out.setdefault(row.model.name, []).append(row)
    return out


def rel(path: Path, start: Path) -> str:
    return Path(os.path.relpath(path, start)).as_posix()


def plot_path(paths: dict[str, Path], model: str, dataset: str) -> Path:
    return paths["plots"] / f"{Path(model).name}-{dataset}.png"


def aggregations_for(dataset: str) -> tuple[str, ...]:
    return AGGREGATION_ORDER if dataset in MULTI_SUBSET else ("all",)


# ----------------------------------------------------------------------------------------------
# Markdown


def results_table(rows: list[STSRun]) -> list[str]:
    head = list(COLUMNS.values()) + ["LC − last (splits LC > last)"]
    lines = ["| data set | " + " | ".join(head) + " |", "|---|" + "---|" * len(head)]
    for row in rows:
        summ = row.lc.summary("spearman")
        best = max(summ, key=lambda m: summ[m]["mean"])
        cells = []
        for method in COLUMNS:
            if method not in summ:
                cells.append("n/a")
                continue
            cell = fmt(summ[method]["mean"], summ[method]["std"])
            cells.append(f"**{cell}**" if method == best else cell)
        diff = lc_minus_last(row)
        cells.append(f"{signed(diff.mean(), diff.std())} ({int((diff > 0).sum())}/{len(diff)})")
        lines.append(f"| {row_label(row)} | " + " | ".join(cells) + " |")
    return lines


def subsets_table(rows: list[STSRun]) -> list[str]:
    seeds = [s.seed for s in rows[0].lc.splits]
    lines = ["| data set | " + " | ".join(f"seed {s}" for s in seeds)
             + " | mean dev Spearman of chosen | encode s (distinct texts encoded) | protocol s |",
             "|---|" + "---|" * (len(seeds) + 3)]
    for row in rows:
        splits = row.lc.splits
        chosen = " | ".join("(" + ", ".join(str(l) for l in s.layers) + ")" for s in splits)
        dev = np.mean([s.dev_spearman for s in splits])
        sec = row.seconds
        lines.append(f"| {row_label(row)} | {chosen} | {dev:.2f} | {sec['encode']:.1f} ({_encoded(row)}) | "
                     f"{sec['protocol']:.1f} |")
    return lines


def _encoded(row: STSRun) -> str:
    cache = row.cache
    if not cache:
        return "cache use not recorded"
    if cache["computed"] == 0:
        return f"none: all {cache['distinct']} read from the cache"
    rate = cache["computed"] / row.seconds["encode"]
    return f"{cache['computed']} of {cache['distinct']}, {rate:.0f} texts/s"


def per_layer_table(rows: list[STSRun]) -> list[str]:
    n = len(rows[0].per_layer["mean"])
    lines = ["| data set | " + " | ".join(str(l) for l in range(n)) + " |", "|---|" + "---|" * n]
    for row in rows:
        vals = row.per_layer["mean"]
        best = int(np.nanargmax(vals))
        cells = [f"**{v:.2f}**" if l == best else f"{v:.2f}" for l, v in enumerate(vals)]
        lines.append(f"| {row_label(row)} | " + " | ".join(cells) + " |")
    return lines


def model_line(row: STSRun) -> str:
    m = row.model
    pooler = ("pooler weights in the checkpoint" if m.pooler_trained else
              "**pooler randomly initialised** (no weights in the checkpoint)") if m.has_pooler else "no pooler"
    return (f"`{m.name}`" + (f" ({m.hf_id})" if m.hf_id else "")
            + f", {m.model_type}, L = {m.n_layers} layers (hidden states 0..{m.n_layers}), "
            f"d = {m.hidden_size}, {pooler}, weights sha256 `{m.weights_sha256[:16]}…`; "
            f"encoder max_length {row.encoder['max_length']}, {row.encoder['dtype']}")


def render(doc: STSPageDoc, paths: dict[str, Path]) -> str:
    """The page's markdown: header and protocol, data, one section per model, observations."""
    rows = sorted(doc.rows, key=lambda r: (r.model.name, ROW_ORDER.index(r.data.name),
                                           AGGREGATION_ORDER.index(r.data.aggregation)))
    models = list(dict.fromkeys(r.model.name for r in doc.rows))
    groups = by_model(rows)
    md = _page_header(doc, rows) + _data_table(rows)
    for model in models:
        md += _model_section(model, groups[model], doc.parameters, paths)
    md += ["", "## Observations", "", "Computed from the numbers above.", ""]
    for model in models:
        md += [f"**{model}**", "", *observations(groups[model]), ""]
    return "\n".join(md)


def _page_header(doc: STSPageDoc, rows: list[STSRun]) -> list[str]:
    env, p = doc.environment, doc.parameters
    mach = env["machine"]
    dates = sorted(r.environment["date"] for r in rows)
    wall = sum(r.seconds.get("wall", 0.0) for r in rows)
    return [
        "# BERT-LC layer combination on the STS data sets",
        "",
        f"- command: `{env['command']}`",
        f"- rendered {env['date']}; rows computed {dates[0]} to {dates[-1]}, {wall / 60:.1f} min of "
        f"run_search calls in total (model loading, encoding and protocol)",
        f"- machine: {mach['platform']}, {mach['processor']}, {mach['cpu_count']} CPUs, "
        f"{mach['torch_threads']} torch threads",
        "- versions: " + ", ".join(f"{k} {v}" for k, v in env["versions"].items()),
        f"- data directory: `{p['data_dir']}`",
        "",
        "**Protocol** (BERT-LC, Hosseini et al. 2023). For each data set all pairs are pooled and shuffled with "
        f"seeds {p['seed']}..{p['seed'] + p['n_splits'] - 1}; the first {p['dev_size']} pairs are dev, the rest "
        "test. LC is the subset of hidden states (exhaustive search over all non-empty subsets; hidden state 0 = "
        "embedding output, L = last layer) whose averaged token-mean embedding has the best dev Spearman; "
        "it is scored on the test pairs together with fixed baselines on the *same* test pairs: CLS of the last "
        "layer, the model's pooler output, and mean pooling over the hidden states last {L}, first+last {0, L}, "
        "first+last {1, L}, last four {L-3..L}, all {0..L}, and a random subset drawn with the split's seed. "
        f"Scores are Spearman x100 of cosine similarity, mean ± std (ddof 0) over the {p['n_splits']} splits. "
        "STS12–16 are reported with three aggregations of their subsets (`all`: one Spearman over all pairs; "
        "`wmean`: size-weighted mean of per-subset Spearman; `mean`: plain mean); the subset is chosen on dev "
        "with the same aggregation. STS-B and SICK-R have one subset, so `all` only.",
        "",
        "Both models are sentence-transformers fine-tunes, trained with mean pooling of the last layer for "
        "sentence similarity, unlike the raw pre-trained BERT that is the paper's main subject; the last layer "
        "is therefore a strong baseline here. The pooler output is the checkpoint's dense+tanh head over CLS, "
        "which sentence-transformers does not use. **LC + MLP** feeds LC's chosen combination through that same "
        "head (dense + tanh), the paper's 'LC + MLP'; both checkpoints hold its weights, but they come from "
        "pre-training and were never trained for sentence similarity.",
        "",
        "## Data",
        "",
        "| data set | split | pairs | subsets (pairs) |",
        "|---|---|---|---|",
    ]


def _data_table(rows: list[STSRun]) -> list[str]:
    md = []
    seen = set()
    for r in rows:
        d = r.data
        if d.name in seen:
            continue
        seen.add(d.name)
        subsets = ", ".join(f"{s} {k}" for s, k in d.subsets.items())
        md.append(f"| {DISPLAY[d.name]} | {d.split} | {d.n_pairs} | {subsets} |")
    return md


def _model_section(model: str, mrows: list[STSRun], p: dict, paths: dict[str, Path]) -> list[str]:
    L = mrows[0].model.n_layers
    md = [
        "",
        f"## {model}",
        "",
        f"- model: {model_line(mrows[0])}",
        "",
        f"### Test Spearman x100 (mean ± std over {p['n_splits']} splits; best per row in bold)",
        "",
        f"Columns are hidden-state selections with mean pooling unless named otherwise (L = {L}). "
        "LC − last is the mean ± std of the per-split difference on the same test pairs; in brackets the "
        "number of splits where LC is higher.",
        "",
        *results_table(mrows),
        "",
        "### Subsets chosen on dev, and times",
        "",
        "Hidden-state tuples chosen on each split's dev pairs. *encode s* is the time of the library's encode "
        "call, with how many distinct texts it actually encoded: texts already in the layer-stack cache "
        "(from an earlier row, data set or run) are read, not encoded, so a row that encoded nothing shows "
        "the cache read time. *protocol s* covers the subset search and the scoring of all baselines on the "
        f"{p['n_splits']} splits.",
        "",
        *subsets_table(mrows),
        "",
        "### Per-layer Spearman x100, mean pooling of one hidden state, all pairs (best in bold)",
        "",
        *per_layer_table(mrows),
        "",
        "### Plots",
        "",
        "Per-layer Spearman (mean and CLS pooling of each hidden state, all pairs, aggregation `all`); red "
        "circles mark the hidden states chosen by LC with how many splits chose them; dashed lines are the "
        "test means of LC and of the last layer (aggregation `all`). CLS of hidden state 0 has no point: "
        "it is the embedding of the first token at position 0, the same vector for every sentence, so its "
        "cosine is constant and its Spearman undefined.",
        "",
    ]
    for r in mrows:
        if r.data.aggregation == "all":
            png = plot_path(paths, model, r.data.name)
            md.append(f"- [{DISPLAY[r.data.name]}]({rel(png, paths['markdown'].parent)})")
    return md


def write_plots(doc: STSPageDoc, paths: dict[str, Path]) -> None:
    for r in doc.rows:
        if r.data.aggregation != "all":
            continue
        summ = r.lc.summary("spearman")
        chosen = Counter(l for s in r.lc.splits for l in s.layers)
        plot_per_layer(
            r.per_layer, plot_path(paths, r.model.name, r.data.name),
            title=f"{r.model.name} on {DISPLAY[r.data.name]} ({r.data.split}, "
                  f"{r.data.n_pairs} pairs)\ncircles: hidden states chosen by LC (count of "
                  f"{len(r.lc.splits)} splits); dashed: test means",
            chosen=dict(chosen),
            baselines={"lc": summ["lc"]["mean"], "last": summ["last"]["mean"]},
        )


def write_outputs(doc: STSPageDoc, paths: dict[str, Path]) -> None:
    write_plots(doc, paths)
    write_text(paths["markdown"], render(doc, paths))


