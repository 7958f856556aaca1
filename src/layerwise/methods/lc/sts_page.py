"""The ``lc-sts`` page: BERT-LC on every STS data set, per model (tables, chosen subsets, plots, observations).

Rows are ``run_search`` results (one per model x data set x aggregation) as stored in the results store; every
number in the markdown, including the observations, is computed from them. STS12-16 are run with the three
aggregations ``all``, ``wmean`` and ``mean``; STS-B (test split) and SICK-R (SemEval-2014 test split) with ``all``.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import numpy as np

from layerwise.reports import fmt, plot_per_layer, write_text

__all__ = ["AGGREGATION_ORDER", "ROW_ORDER", "aggregations_for", "render", "write_outputs", "write_plots"]

# Reporting order (the paper's): STS12-16, then STS-B and SICK-R.
ROW_ORDER = ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr")
DISPLAY = {"stsb": "STS-B", "sickr": "SICK-R", **{f"sts{y}": f"STS{y}" for y in range(12, 17)}}
MULTI_SUBSET = {f"sts{y}" for y in range(12, 17)}  # several subsets: all three aggregations
AGGREGATION_ORDER = ("all", "wmean", "mean")
# Result key -> column header, in table order (LC - last is added after these).
COLUMNS = {
    "cls": "CLS",
    "pooler": "pooler",
    "last": "last",
    "first0_last": "first+last {0,L}",
    "first1_last": "first+last {1,L}",
    "last_four": "last four",
    "all": "all",
    "random": "random",
    "lc": "LC",
    "lc_mlp": "LC + MLP",
}


# ----------------------------------------------------------------------------------------------
# Numbers derived from the raw results


def row_label(row: dict) -> str:
    d = row["params"]["dataset"]
    return f"{DISPLAY[d]} ({row['params']['aggregation']})" if d in MULTI_SUBSET else DISPLAY[d]


def lc_minus_last(row: dict) -> np.ndarray:
    """Per-split test Spearman x100 of LC minus that of the last layer (same test pairs): (n_splits,)."""
    return np.array([s["test"]["lc"]["spearman"] - s["test"]["last"]["spearman"] for s in row["lc"]["splits"]])


def by_model(rows: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for row in rows:
        out.setdefault(row["params"]["model"], []).append(row)
    return out


def rel(path: Path, start: Path) -> str:
    return Path(os.path.relpath(path, start)).as_posix()


def plot_path(paths: dict[str, Path], model: str, dataset: str) -> Path:
    return paths["plots"] / f"{Path(model).name}-{dataset}.png"


def aggregations_for(dataset: str) -> tuple[str, ...]:
    return AGGREGATION_ORDER if dataset in MULTI_SUBSET else ("all",)


# ----------------------------------------------------------------------------------------------
# Markdown


def _signed(x: float, std: float | None = None) -> str:
    return f"{x:+.2f}" if std is None else f"{x:+.2f} ± {std:.2f}"


def results_table(rows: list[dict]) -> list[str]:
    head = list(COLUMNS.values()) + ["LC − last (splits LC > last)"]
    lines = ["| data set | " + " | ".join(head) + " |", "|---|" + "---|" * len(head)]
    for row in rows:
        summ = row["lc"]["summary"]["spearman"]
        best = max(summ, key=lambda m: summ[m]["mean"])
        cells = []
        for method in COLUMNS:
            if method not in summ:
                cells.append("n/a")
                continue
            cell = fmt(summ[method]["mean"], summ[method]["std"])
            cells.append(f"**{cell}**" if method == best else cell)
        diff = lc_minus_last(row)
        cells.append(f"{_signed(diff.mean(), diff.std())} ({int((diff > 0).sum())}/{len(diff)})")
        lines.append(f"| {row_label(row)} | " + " | ".join(cells) + " |")
    return lines


def subsets_table(rows: list[dict]) -> list[str]:
    seeds = [s["seed"] for s in rows[0]["lc"]["splits"]]
    lines = ["| data set | " + " | ".join(f"seed {s}" for s in seeds)
             + " | mean dev Spearman of chosen | encode s (distinct texts encoded) | protocol s |",
             "|---|" + "---|" * (len(seeds) + 3)]
    for row in rows:
        splits = row["lc"]["splits"]
        chosen = " | ".join("(" + ", ".join(str(l) for l in s["layers"]) + ")" for s in splits)
        dev = np.mean([s["dev_spearman"] for s in splits])
        sec = row["seconds"]
        lines.append(f"| {row_label(row)} | {chosen} | {dev:.2f} | {sec['encode']:.1f} ({_encoded(row)}) | "
                     f"{sec['protocol']:.1f} |")
    return lines


def _encoded(row: dict) -> str:
    cache = row.get("cache")
    if not cache:
        return "cache use not recorded"
    if cache["computed"] == 0:
        return f"none: all {cache['distinct']} read from the cache"
    rate = cache["computed"] / row["seconds"]["encode"]
    return f"{cache['computed']} of {cache['distinct']}, {rate:.0f} texts/s"


def per_layer_table(rows: list[dict]) -> list[str]:
    n = len(rows[0]["per_layer"]["mean"])
    lines = ["| data set | " + " | ".join(str(l) for l in range(n)) + " |", "|---|" + "---|" * n]
    for row in rows:
        vals = row["per_layer"]["mean"]
        best = int(np.nanargmax(vals))
        cells = [f"**{v:.2f}**" if l == best else f"{v:.2f}" for l, v in enumerate(vals)]
        lines.append(f"| {row_label(row)} | " + " | ".join(cells) + " |")
    return lines


def _pct(k: int, n: int) -> str:
    return f"{k}/{n} ({100 * k / n:.0f}%)"


def observations(rows: list[dict]) -> list[str]:
    """Sentences computed from the numbers of one model's rows."""
    L = rows[0]["model"]["n_layers"]
    n = len(rows)
    diffs = [lc_minus_last(r) for r in rows]
    means = np.array([d.mean() for d in diffs])
    labels = [row_label(r) for r in rows]
    wins = int((means > 0).sum())
    always_better = sum(bool((d > 0).all()) for d in diffs)
    always_worse = sum(bool((d < 0).all()) for d in diffs)
    out = [
        f"- LC beats the last layer (mean over splits) on {_pct(wins, n)} rows; LC − last averages "
        f"{_signed(means.mean())} points over rows, from {_signed(means.min())} ({labels[int(means.argmin())]}) "
        f"to {_signed(means.max())} ({labels[int(means.argmax())]}). LC is better on all {len(diffs[0])} "
        f"splits in {always_better} row(s) and worse on all splits in {always_worse} row(s).",
    ]
    big = [labels[i] for i in range(n) if means[i] >= 1.0]
    out.append(
        f"- A gain of at least 1 point appears on {len(big)} row(s)" + (f": {', '.join(big)}." if big else ".")
    )
    best_counts = Counter(
        max(r["lc"]["summary"]["spearman"], key=lambda m: r["lc"]["summary"]["spearman"][m]["mean"]) for r in rows
    )
    out.append("- Best column per row (test mean): " + ", ".join(
        f"{COLUMNS.get(m, m)} {k}" for m, k in best_counts.most_common()) + ".")
    best_single = Counter(int(np.nanargmax(r["per_layer"]["mean"])) for r in rows)
    out.append(
        f"- The best single hidden state (mean pooling, all pairs) is the last one ({L}) on "
        f"{_pct(best_single.get(L, 0), n)} rows"
        + ("" if set(best_single) == {L} else "; otherwise " + ", ".join(
            f"{l} ({k}x)" for l, k in sorted(best_single.items()) if l != L)) + "."
    )
    chosen = [tuple(s["layers"]) for r in rows for s in r["lc"]["splits"]]
    counts = Counter(l for c in chosen for l in c)
    m = len(chosen)
    top = ", ".join(f"{l} in {_pct(k, m)}" for l, k in counts.most_common(4))
    sizes = np.array([len(c) for c in chosen])
    out.append(
        f"- Hidden states chosen most, over {m} chosen subsets: {top}. The last layer {L} is in "
        f"{_pct(sum(L in c for c in chosen), m)}, the embedding output 0 in {_pct(sum(0 in c for c in chosen), m)}; "
        f"subsets have {sizes.mean():.1f} states on average (range {sizes.min()}–{sizes.max()}); "
        f"{_pct(sum(c == (L,) for c in chosen), m)} are the last layer alone. "
        f"{len(set(chosen))} distinct subsets were chosen."
    )
    gap = np.array([s["dev_spearman"] - s["test"]["lc"]["spearman"] for r in rows for s in r["lc"]["splits"]])
    out.append(
        f"- The chosen subset scores {_signed(gap.mean())} points higher on its 350 dev pairs than on the test "
        f"pairs on average (selection on dev is optimistic; part of the gap is dev/test sampling noise)."
        if rows[0]["params"]["dev_size"] == 350 else
        f"- The chosen subset scores {_signed(gap.mean())} points higher on dev than on test on average."
    )
    per_agg = {}
    for r, d in zip(rows, means):
        if r["params"]["dataset"] in MULTI_SUBSET:
            per_agg.setdefault(r["params"]["aggregation"], []).append(d)
    if len(per_agg) > 1:
        out.append("- STS12–16, mean LC − last by aggregation: " + ", ".join(
            f"`{a}` {_signed(float(np.mean(v)))} (over {len(v)} data set(s))" for a, v in per_agg.items()) + ".")
    fixed = ("last", "first0_last", "first1_last", "last_four", "all")  # mean pooling, no randomness
    beaten = []
    for r, label in zip(rows, labels):
        summ = r["lc"]["summary"]["spearman"]
        best_fixed = max(fixed, key=lambda m: summ[m]["mean"])
        if summ[best_fixed]["mean"] > summ["lc"]["mean"]:
            margin = summ[best_fixed]["mean"] - summ["lc"]["mean"]
            beaten.append(f"{label} by {COLUMNS[best_fixed]} ({_signed(margin)})")
    out.append(
        f"- A fixed mean-pooling selection (last, first+last, last four, all) has a higher test mean than LC on "
        f"{_pct(len(beaten), n)} rows" + (": " + "; ".join(beaten) + "." if beaten else ".")
    )
    summaries = [r["lc"]["summary"]["spearman"] for r in rows]
    fl0 = np.array([sm["first0_last"]["mean"] - sm["last"]["mean"] for sm in summaries])
    size = f"LC − last averages {_signed(means.mean())} points and is positive on {_pct(wins, n)} rows"
    if means.mean() < 0.25 or wins <= n / 2:
        verdict = (f"{size}: LC does not help meaningfully for this model. Its last layer is fine-tuned for "
                   f"sentence similarity, and a subset chosen on {rows[0]['params']['dev_size']} dev pairs does "
                   "not reliably improve on it.")
    elif fl0.mean() >= means.mean():
        verdict = (f"{size}: a small, fairly consistent gain, but no larger than that of the fixed first+last "
                   f"{{0, L}} selection (first+last {{0,L}} − last averages {_signed(fl0.mean())}), which needs "
                   "no dev data and no search.")
    else:
        verdict = (f"{size}, more than the fixed first+last {{0, L}} selection gains "
                   f"({_signed(fl0.mean())}).")
    out.append(f"- {verdict}")
    return out


def model_line(row: dict) -> str:
    m = row["model"]
    pooler = ("pooler weights in the checkpoint" if m["pooler_trained"] else
              "**pooler randomly initialised** (no weights in the checkpoint)") if m["has_pooler"] else "no pooler"
    return (f"`{m['name']}`" + (f" ({m['hf_id']})" if m.get("hf_id") else "")
            + f", {m['model_type']}, L = {m['n_layers']} layers (hidden states 0..{m['n_layers']}), "
            f"d = {m['hidden_size']}, {pooler}, weights sha256 `{m['weights_sha256'][:16]}…`; "
            f"encoder max_length {row['encoder']['max_length']}, {row['encoder']['dtype']}")


def render(doc: dict, paths: dict[str, Path]) -> str:
    rows = sorted(doc["rows"], key=lambda r: (r["params"]["model"], ROW_ORDER.index(r["params"]["dataset"]),
                                              AGGREGATION_ORDER.index(r["params"]["aggregation"])))
    models = list(dict.fromkeys(r["params"]["model"] for r in doc["rows"]))
    groups = by_model(rows)
    env, p = doc["environment"], doc["parameters"]
    mach = env["machine"]
    dates = sorted(r["environment"]["date"] for r in rows)
    wall = sum(r["seconds"].get("wall", 0.0) for r in rows)
    md = [
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
    seen = set()
    for r in rows:
        d = r["data"]
        if d["name"] in seen:
            continue
        seen.add(d["name"])
        subsets = ", ".join(f"{s} {k}" for s, k in d["subsets"].items())
        md.append(f"| {DISPLAY[d['name']]} | {d['split']} | {d['n_pairs']} | {subsets} |")
    for model in models:
        mrows = groups[model]
        L = mrows[0]["model"]["n_layers"]
        md += [
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
            if r["params"]["aggregation"] == "all":
                png = plot_path(paths, model, r["params"]["dataset"])
                md.append(f"- [{DISPLAY[r['params']['dataset']]}]({rel(png, paths['markdown'].parent)})")
    md += ["", "## Observations", "", "Computed from the numbers above.", ""]
    for model in models:
        md += [f"**{model}**", "", *observations(groups[model]), ""]
    return "\n".join(md)


def write_plots(doc: dict, paths: dict[str, Path]) -> None:
    for r in doc["rows"]:
        if r["params"]["aggregation"] != "all":
            continue
        summ = r["lc"]["summary"]["spearman"]
        chosen = Counter(l for s in r["lc"]["splits"] for l in s["layers"])
        plot_per_layer(
            r["per_layer"], plot_path(paths, r["params"]["model"], r["params"]["dataset"]),
            title=f"{r['model']['name']} on {DISPLAY[r['data']['name']]} ({r['data']['split']}, "
                  f"{r['data']['n_pairs']} pairs)\ncircles: hidden states chosen by LC (count of "
                  f"{len(r['lc']['splits'])} splits); dashed: test means",
            chosen=dict(chosen),
            baselines={"lc": summ["lc"]["mean"], "last": summ["last"]["mean"]},
        )


def write_outputs(doc: dict, paths: dict[str, Path]) -> None:
    write_plots(doc, paths)
    write_text(paths["markdown"], render(doc, paths))


