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
    combined_splits,
    lc_minus_last,
    observations,
    row_label,
    signed,
)
from layerwise.benchmarks.page_parts import machine_line
from layerwise.evaluation.significance import BOOTSTRAP_TEST
from layerwise.reports import fmt, plot_per_layer, write_text

#: The significance level the page reports.
ALPHA = 0.01

__all__ = ["ALPHA", "AGGREGATION_ORDER", "ROW_ORDER", "STSPageDoc", "aggregations_for", "render", "write_outputs",
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


def plot_path(paths: dict[str, Path], model: str, data) -> Path:
    """The plot of one data set (``data``: the row's STSDataInfo; the combined-splits rows get their own file)."""
    return paths["plots"] / f"{Path(model).name}-{data.name}{'-allsplits' if combined_splits(data) else ''}.png"


def _row_order(r: STSRun) -> tuple:
    return (r.model.name, ROW_ORDER.index(r.data.name), combined_splits(r.data),
            AGGREGATION_ORDER.index(r.data.aggregation))


def aggregations_for(dataset: str) -> tuple[str, ...]:
    return AGGREGATION_ORDER if dataset in MULTI_SUBSET else ("all",)


# ----------------------------------------------------------------------------------------------
# Markdown


def _p_cell(row: STSRun, method: str = "lc") -> str:
    test = row.lc.significance.get(method)
    if test is None:
        return "not tested"
    return f"{test['p_value']:.4f} ({'yes' if test['p_value'] < ALPHA else 'no'})"


def _mark(row: STSRun, method: str, cell: str) -> str:
    """A compared column's cell, starred where its difference from the last layer is significant."""
    test = row.lc.significance.get(method)
    return cell + "\\*" if test is not None and test["p_value"] < ALPHA else cell


def results_table(rows: list[STSRun]) -> list[str]:
    head = list(COLUMNS.values()) + ["LC − last (splits LC > last)", f"p, LC vs last (p < {ALPHA})"]
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
            cells.append(_mark(row, method, f"**{cell}**" if method == best else cell))
        diff = lc_minus_last(row)
        spread = diff.std(ddof=1) if len(diff) > 1 else None
        cells.append(f"{signed(diff.mean(), spread)} ({int((diff > 0).sum())}/{len(diff)})")
        cells.append(_p_cell(row))
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
    rows = sorted(doc.rows, key=_row_order)
    models = list(dict.fromkeys(r.model.name for r in doc.rows))
    groups = by_model(rows)
    md = _page_header(doc, rows) + _data_table(rows)
    for model in models:
        md += _model_section(model, groups[model], doc.parameters, paths)
    md += ["", "## Observations", "", "Computed from the numbers above.", ""]
    for model in models:
        md += [f"**{model}**", "", *observations(groups[model]), ""]
    return "\n".join(md)


def _distinct(values) -> list[str]:
    return list(dict.fromkeys(values))


def _page_header(doc: STSPageDoc, rows: list[STSRun]) -> list[str]:
    env, p = doc.environment, doc.parameters
    dates = sorted(r.environment["date"] for r in rows)
    wall = sum(r.seconds.get("wall", 0.0) for r in rows)
    commands = _distinct(f"`{r.environment.get('command', '')}`" for r in rows)
    machines = _distinct(machine_line(r.environment) for r in rows)
    return [
        "# BERT-LC layer combination on the STS data sets",
        "",
        "- rows computed by " + "; ".join(commands) + f", {dates[0]} to {dates[-1]}, {wall / 60:.1f} min of "
        "run_search calls in total (model loading, encoding and protocol)",
        f"- rendered {env['date']} by `{env['command']}` from the stored rows",
        "- machine and versions of the rows: " + " | ".join(machines),
        f"- data directory: `{p['data_dir']}`",
        "",
        "**Protocol** (BERT-LC, Hosseini et al. 2023). For each data set all pairs are pooled and shuffled with "
        f"seeds {p['seed']}..{p['seed'] + p['n_splits'] - 1}; the first {p['dev_size']} pairs are dev, the rest "
        "test. LC is the subset of hidden states (exhaustive search over all non-empty subsets; hidden state 0 = "
        "embedding output, L = last layer) whose averaged token-mean embedding has the best dev Spearman; "
        "it is scored on the test pairs together with fixed baselines on the *same* test pairs: CLS of the last "
        "layer, the model's pooler output, and mean pooling over the hidden states last {L}, first+last {0, L}, "
        "first+last {1, L}, last four {L-3..L}, all {0..L}, and a random subset drawn with the split's seed. "
        f"Scores are Spearman x100 of cosine similarity, mean ± std over the {p['n_splits']} splits. "
        "STS12–16 are reported with three aggregations of their subsets (`all`: one Spearman over all pairs; "
        "`wmean`: size-weighted mean of per-subset Spearman; `mean`: plain mean); the subset is chosen on dev "
        "with the same aggregation. STS-B and SICK-R have one subset, so `all` only.",
        *_protocol_notes(rows),
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


def _protocol_notes(rows: list[STSRun]) -> list[str]:
    """Which pairs each row pools, what LC (max) is, and the significance test."""
    return [
        "",
        "**Which pairs.** Rows named *STS-B* and *SICK-R* pool the pairs of their test split only (STS-B test, "
        "SICK-R SemEval-2014 test), as SentEval and SimCSE report them; rows named *(all splits)* follow the "
        "paper's wording, \"we first combine all of its data subsets, shuffle it\": every split of the release "
        "(STS-B train + dev + test, SICK-R train + trial + test) is pooled before the same seeded dev/test splits. "
        "STS12–16 are test-only releases, so the two readings coincide for them.",
        "",
        "**LC (max)** pools LC's chosen hidden states by the elementwise maximum of their token-mean vectors "
        "instead of their average (the paper's max pooling of a subset; the subset is the one chosen for mean "
        "pooling, so a one-state choice gives the same number as LC).",
        "",
        f"**Significance.** Each compared column (LC, LC (max), LC + MLP, first+last {{0,L}}) is tested against "
        f"the last layer by a {BOOTSTRAP_TEST} test over pairs: {_resamples(rows)} resamples of the data set's "
        "pairs with replacement (seed = the protocol's seed); every split keeps the drawn pairs of its test part, "
        "so the statistic, the mean over the splits of the test-Spearman difference, is resampled with the "
        "splits' overlap kept; p = (1 + #resamples whose difference is at least as far from the observed one as "
        "the observed one is from 0) / (resamples + 1). `layerwise.evaluation.significance` holds the test. It "
        "conditions on each split's chosen subset (the dev search is not repeated per resample): it asks whether "
        "these LC embeddings differ from the last layer's on these test pairs, not how often the selection "
        "itself would pick a better subset. A row computed before the test existed says *not tested*; "
        "`layerwise results run lc-sts` recomputes it.",
    ]


def _resamples(rows: list[STSRun]) -> str:
    counts = sorted({t["n_resamples"] for r in rows for t in r.lc.significance.values()})
    return " or ".join(str(c) for c in counts) or "(no row tested)"


def _data_table(rows: list[STSRun]) -> list[str]:
    md = []
    seen = set()
    for r in rows:
        d = r.data
        if (d.name, d.split) in seen:
            continue
        seen.add((d.name, d.split))
        subsets = ", ".join(f"{s} {k}" for s, k in d.subsets.items())
        split = f"all splits combined ({d.split})" if combined_splits(d) and d.split != "all" else (
            "all splits combined" if combined_splits(d) else d.split)
        md.append(f"| {DISPLAY[d.name]} | {split} | {d.n_pairs} | {subsets} |")
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
        "number of splits where LC is higher. *p, LC vs last* is the paired bootstrap test of that mean difference "
        f"(see the protocol); a star (\\*) on LC, LC (max), LC + MLP or first+last {{0,L}} marks a difference from "
        f"the last layer significant at p < {ALPHA} by the same test.",
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
            png = plot_path(paths, model, r.data)
            md.append(f"- [{row_label(r)}]({rel(png, paths['markdown'].parent)})")
    return md


def write_plots(doc: STSPageDoc, paths: dict[str, Path]) -> None:
    for r in doc.rows:
        if r.data.aggregation != "all":
            continue
        summ = r.lc.summary("spearman")
        chosen = Counter(l for s in r.lc.splits for l in s.layers)
        plot_per_layer(
            r.per_layer, plot_path(paths, r.model.name, r.data),
            title=f"{r.model.name} on {DISPLAY[r.data.name]} ({r.data.split}, "
                  f"{r.data.n_pairs} pairs)\ncircles: hidden states chosen by LC (count of "
                  f"{len(r.lc.splits)} splits); dashed: test means",
            chosen=dict(chosen),
            baselines={"lc": summ["lc"]["mean"], "last": summ["last"]["mean"]},
        )


def write_outputs(doc: STSPageDoc, paths: dict[str, Path]) -> None:
    write_plots(doc, paths)
    write_text(paths["markdown"], render(doc, paths))


