"""The observations of the ``lc-sts`` page: sentences computed from one model's rows (no number typed by hand)."""

from __future__ import annotations

from collections import Counter

import numpy as np

from layerwise.benchmarks.lc.run import STSRun

__all__ = ["AGGREGATION_ORDER", "COLUMNS", "combined_splits", "DISPLAY", "MULTI_SUBSET", "ROW_ORDER", "lc_minus_last", "observations",
           "row_label", "signed"]

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
    "lc_max": "LC (max)",
    "lc_mlp": "LC + MLP",
}


# ----------------------------------------------------------------------------------------------
# Numbers derived from the raw results


def combined_splits(data) -> bool:
    """Whether an STSDataInfo pooled every split of its release (STS-B says "all"; SICK-R names its three parts,
    "SemEval-2014 train+trial+test", or "all" for the full release file)."""
    return data.split == "all" or "train+" in data.split or data.split.startswith("all ")


def row_label(row: STSRun) -> str:
    d = row.data.name
    name = DISPLAY[d] + (" (all splits)" if combined_splits(row.data) else "")
    return f"{name} ({row.data.aggregation})" if d in MULTI_SUBSET else name


def lc_minus_last(row: STSRun) -> np.ndarray:
    """Per-split test Spearman x100 of LC minus that of the last layer (same test pairs): (n_splits,)."""
    return np.array([s.test["lc"]["spearman"] - s.test["last"]["spearman"] for s in row.lc.splits])


def signed(x: float, std: float | None = None) -> str:
    return f"{x:+.2f}" if std is None else f"{x:+.2f} ± {std:.2f}"


def _pct(k: int, n: int) -> str:
    return f"{k}/{n} ({100 * k / n:.0f}%)"


def observations(rows: list[STSRun]) -> list[str]:
    """Sentences computed from the numbers of one model's rows."""
    n = len(rows)
    diffs = [lc_minus_last(r) for r in rows]
    means = np.array([d.mean() for d in diffs])
    labels = [row_label(r) for r in rows]
    wins = int((means > 0).sum())
    always_better = sum(bool((d > 0).all()) for d in diffs)
    always_worse = sum(bool((d < 0).all()) for d in diffs)
    out = [
        f"- LC beats the last layer (mean over splits) on {_pct(wins, n)} rows; LC − last averages "
        f"{signed(means.mean())} points over rows, from {signed(means.min())} ({labels[int(means.argmin())]}) "
        f"to {signed(means.max())} ({labels[int(means.argmax())]}). LC is better on all {len(diffs[0])} "
        f"splits in {always_better} row(s) and worse on all splits in {always_worse} row(s).",
    ]
    big = [labels[i] for i in range(n) if means[i] >= 1.0]
    out.append(
        f"- A gain of at least 1 point appears on {len(big)} row(s)" + (f": {', '.join(big)}." if big else ".")
    )
    out += _significance_observation(rows, labels)
    out += _layers_observations(rows) + _aggregation_observation(rows, means)
    out += _fixed_observations(rows, labels, means)
    return out


def _significance_observation(rows: list[STSRun], labels: list[str], alpha: float = 0.01) -> list[str]:
    """Which rows' LC − last the paired bootstrap finds significant (rows computed before the test are counted)."""
    tested = [(label, r.lc.significance["lc"]) for label, r in zip(labels, rows) if "lc" in r.lc.significance]
    untested = len(rows) - len(tested)
    if not tested:
        return [f"- No row of this model has the paired bootstrap test yet ({untested} computed before it)."]
    up = [lab for lab, t in tested if t["p_value"] < alpha and t["difference"] > 0]
    down = [lab for lab, t in tested if t["p_value"] < alpha and t["difference"] < 0]
    return [f"- LC − last is significant at p < {alpha} (paired bootstrap over pairs) on {len(up) + len(down)} of "
            f"{len(tested)} tested rows: LC higher on {len(up)}" + (f" ({', '.join(up)})" if up else "")
            + f", lower on {len(down)}" + (f" ({', '.join(down)})" if down else "")
            + (f"; {untested} row(s) were computed before the test." if untested else ".")]


def _layers_observations(rows: list[STSRun]) -> list[str]:
    """Best columns, best single layer, which hidden states LC chooses, the dev/test gap."""
    L, n, out = rows[0].model.n_layers, len(rows), []
    best_counts = Counter(
        max(r.lc.summary("spearman"), key=lambda m: r.lc.summary("spearman")[m]["mean"]) for r in rows
    )
    out.append("- Best column per row (test mean): " + ", ".join(
        f"{COLUMNS.get(m, m)} {k}" for m, k in best_counts.most_common()) + ".")
    best_single = Counter(int(np.nanargmax(r.per_layer["mean"])) for r in rows)
    out.append(
        f"- The best single hidden state (mean pooling, all pairs) is the last one ({L}) on "
        f"{_pct(best_single.get(L, 0), n)} rows"
        + ("" if set(best_single) == {L} else "; otherwise " + ", ".join(
            f"{l} ({k}x)" for l, k in sorted(best_single.items()) if l != L)) + "."
    )
    chosen = [tuple(s.layers) for r in rows for s in r.lc.splits]
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
    gap = np.array([s.dev_spearman - s.test["lc"]["spearman"] for r in rows for s in r.lc.splits])
    out.append(
        f"- The chosen subset scores {signed(gap.mean())} points higher on its 350 dev pairs than on the test "
        f"pairs on average (selection on dev is optimistic; part of the gap is dev/test sampling noise)."
        if rows[0].protocol["dev_size"] == 350 else
        f"- The chosen subset scores {signed(gap.mean())} points higher on dev than on test on average."
    )
    return out


def _aggregation_observation(rows: list[STSRun], means: np.ndarray) -> list[str]:
    per_agg: dict[str, list[float]] = {}
    for r, d in zip(rows, means):
        if r.data.name in MULTI_SUBSET:
            per_agg.setdefault(r.data.aggregation, []).append(d)
    if len(per_agg) <= 1:
        return []
    return ["- STS12–16, mean LC − last by aggregation: " + ", ".join(
        f"`{a}` {signed(float(np.mean(v)))} (over {len(v)} data set(s))" for a, v in per_agg.items()) + "."]


def _fixed_observations(rows: list[STSRun], labels: list[str], means: np.ndarray) -> list[str]:
    """Where a fixed selection beats LC, and the verdict for the model."""
    n, wins, out = len(rows), int((means > 0).sum()), []
    fixed = ("last", "first0_last", "first1_last", "last_four", "all")  # mean pooling, no randomness
    beaten = []
    for r, label in zip(rows, labels):
        summ = r.lc.summary("spearman")
        best_fixed = max(fixed, key=lambda m: summ[m]["mean"])
        if summ[best_fixed]["mean"] > summ["lc"]["mean"]:
            margin = summ[best_fixed]["mean"] - summ["lc"]["mean"]
            beaten.append(f"{label} by {COLUMNS[best_fixed]} ({signed(margin)})")
    out.append(
        f"- A fixed mean-pooling selection (last, first+last, last four, all) has a higher test mean than LC on "
        f"{_pct(len(beaten), n)} rows" + (": " + "; ".join(beaten) + "." if beaten else ".")
    )
    summaries = [r.lc.summary("spearman") for r in rows]
    fl0 = np.array([sm["first0_last"]["mean"] - sm["last"]["mean"] for sm in summaries])
    size = f"LC − last averages {signed(means.mean())} points and is positive on {_pct(wins, n)} rows"
    if means.mean() < 0.25 or wins <= n / 2:
        verdict = (f"{size}: LC does not help meaningfully for this model. Its last layer is fine-tuned for "
                   f"sentence similarity, and a subset chosen on {rows[0].protocol['dev_size']} dev pairs does "
                   "not reliably improve on it.")
    elif fl0.mean() >= means.mean():
        verdict = (f"{size}: a small, fairly consistent gain, but no larger than that of the fixed first+last "
                   f"{{0, L}} selection (first+last {{0,L}} − last averages {signed(fl0.mean())}), which needs "
                   "no dev data and no search.")
    else:
        verdict = (f"{size}, more than the fixed first+last {{0, L}} selection gains "
                   f"({signed(fl0.mean())}).")
    out.append(f"- {verdict}")
    return out
