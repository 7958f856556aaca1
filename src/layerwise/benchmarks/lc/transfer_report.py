"""Markdown and JSON of a :class:`~layerwise.benchmarks.lc.transfer_run.TransferRun` (the paper's Table-4 layout)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from layerwise.benchmarks.lc.transfer_run import TaskRun, TransferRun
from layerwise.data.senteval import display_name
from layerwise.evaluation.significance import BOOTSTRAP_TEST
from layerwise.reports import fmt, write_json, write_text

#: The significance level the page reports.
ALPHA = 0.01

__all__ = ["ALPHA", "TRANSFER_LABELS", "p_cell", "render_transfer_markdown", "write_transfer_outputs"]

TRANSFER_LABELS = {
    "cls": "CLS (last layer)",
    "last": "mean, last layer",
    "last_four": "mean, last four",
    "random": "mean, random subset",
    "lc": "**LC**",
    "lc_mlp": "LC + MLP (pooler head)",
}

#: Head statuses as results files recorded them -> what the head is (named once, in each model's header).
_HEAD_NAMES = {"trained pooler head": "pooler head from pre-training (in the checkpoint)"}


def head_name(status: str) -> str:
    """What LC + MLP's head is, from a stored status (older parts wrote "trained pooler head" for a checkpoint that
    holds pooler weights; those weights come from pre-training, not from training for this task or similarity)."""
    return _HEAD_NAMES.get(status, status)


def _header(run: TransferRun, title: str | None) -> list[str]:
    m, p, env = run.model, run.protocol, run.environment
    machine = env.get("machine", {})
    first = next(iter(run.tasks.values()))
    return [f"# {title or 'Transfer tasks with layer combination'}: {m.name}", "",
            f"- model: `{m.name}` ({m.hf_id or m.path}), {m.n_layers} layers, hidden states "
            f"0..{m.n_layers} (0 = embedding output), weights sha256 `{m.weights_sha256[:16]}…`",
            f"- protocol: {p['name']}; {p['n_outer']} outer splits (seeds {p['outer_seeds'][0]}..{p['outer_seeds'][-1]}),"
            f" {p['n_inner']} inner splits; subsets of at most {first.result.max_layers} hidden states",
            f"- classifier: scikit-learn LogisticRegression(solver={p['classifier']['solver']}, "
            f"tol={p['classifier']['tol']}, max_iter={p['classifier']['max_iter']}, C={p['classifier']['C']:g}); "
            f"{p['classifier']['note']}",
            f"- subset choice: {p['selection']}",
            "- LC + MLP head: " + "; ".join(sorted({head_name(t.head) for t in run.tasks.values()})),
            f"- command: `{env.get('command', '')}`",
            f"- date: {env.get('date', '')}; machine: {machine.get('platform', '')}, "
            f"{machine.get('cpu_count', '')} CPUs; versions: "
            + ", ".join(f"{k} {v}" for k, v in env.get("versions", {}).items())]


def _accuracy_tables(tasks: dict[str, TaskRun]) -> list[str]:
    names = list(tasks)
    summaries = {t: tasks[t].result.summary() for t in names}
    head = "| " + " | ".join(map(display_name, names)) + " | avg |"
    rule = "|---|" + "---|" * (len(names) + 1)
    lines = ["", "## Test accuracy x100 (mean ± std over outer splits)", "", "| method " + head, rule]
    methods = list(dict.fromkeys(mm for s in summaries.values() for mm in s))
    for method in methods:
        got = [summaries[t].get(method) for t in names]
        cells = [fmt(s["mean"], s["std"]) if s else "n/a" for s in got]
        vals = [s["mean"] if s else np.nan for s in got]
        avg = f"{np.mean(vals):.2f}" if not np.isnan(vals).any() else "n/a"
        lines.append(f"| {TRANSFER_LABELS.get(method, method)} | " + " | ".join(cells) + f" | {avg} |")
    lines += ["", "## Relative error reduction of LC, (A_LC − A_B) / (1 − A_B) x100, on the mean accuracies", "",
              "| baseline B " + head, rule]
    reductions = {t: tasks[t].result.relative_error_reductions("lc") for t in names}
    for b in [x for x in methods if x != "lc"]:
        vals = [reductions[t].get(b, np.nan) for t in names]
        # n/a: a task without this baseline, or whose baseline made no error (the reduction is undefined)
        cells = ["n/a" if np.isnan(v) else f"{v:+.2f}" for v in vals]
        avg = "n/a" if np.isnan(vals).all() else f"{np.nanmean(vals):+.2f}"
        lines.append(f"| {TRANSFER_LABELS.get(b, b)} | " + " | ".join(cells) + f" | {avg} |")
    return lines + _significance_table(tasks, [x for x in methods if x != "lc"], head, rule)


def _significance_table(tasks: dict[str, TaskRun], baselines: list[str], head: str, rule: str) -> list[str]:
    """p of LC − B by the paired bootstrap over test examples, and whether it is below ALPHA, per task."""
    tested = [t.result.significance for t in tasks.values() if t.result.significance]
    resamples = sorted({v["n_resamples"] for s in tested for v in s.values()})
    lines = ["", f"### Is LC different from B? {BOOTSTRAP_TEST} test over test examples, p (yes: p < {ALPHA})", "",
             "The statistic is the mean over the outer splits of LC's test accuracy minus B's; one resample draws the "
             "task's examples with replacement "
             + (f"({' or '.join(map(str, resamples))} resamples) " if resamples else "")
             + "and every split keeps the drawn examples of its test part. *not tested*: the task's part was computed "
             "before per-example predictions were kept; `layerwise results run transfer` recomputes it.", "",
             "| baseline B " + head, rule]
    for b in baselines:
        cells = []
        for t in tasks.values():
            test = t.result.significance.get(b)
            cells.append(p_cell(test))
        lines.append(f"| {TRANSFER_LABELS.get(b, b)} | " + " | ".join(cells) + " | |")
    return lines


def p_cell(test: dict | None) -> str:
    """A table cell of one paired test: its p-value and whether it is below ALPHA, or *not tested*."""
    return "not tested" if test is None else f"{test['p_value']:.4f} ({'yes' if test['p_value'] < ALPHA else 'no'})"


def _history(task: TaskRun) -> str:
    """The table cell of a task's run history (which invocation computed which splits, and the load then)."""
    def one(r):
        start, end = r.get("load_at_start"), r.get("load_at_save")
        return (f"{(r.get('started') or '?')[11:16]}, splits {r['splits'][0]}-{r['splits'][1] - 1}: "
                f"{start[0] if start else '?'} → {end[0] if end else '?'}")
    return "; ".join(one(r) for r in task.runs) or "not recorded"


def render_transfer_markdown(run: TransferRun, title: str | None = None) -> str:
    tasks = run.tasks
    lines = _header(run, title) + _accuracy_tables(tasks)
    lines += ["", "## Chosen subsets and time", "",
              "| task | examples | classes | subsets searched | outer splits done | chosen hidden states (splits) | "
              "encode s (first run) | protocol s | run start (UTC), splits: load avg at start → last save |",
              "|---|---|---|---|---|---|---|---|---|"]
    for t, task in tasks.items():
        r = task.result
        counts: dict[tuple, int] = {}
        for s in r.splits:
            counts[tuple(s.layers)] = counts.get(tuple(s.layers), 0) + 1
        chosen = ", ".join(f"{k} x{v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))
        lines.append(f"| {display_name(t)} | {task.n_examples} | {r.n_classes} | {len(r.subsets)} | "
                     f"{len(r.splits)} of {r.n_outer} | {chosen} | {task.first_encode_seconds:.1f} | "
                     f"{task.protocol_seconds:.1f} | {_history(task)} |")
    total = sum(t.first_encode_seconds + t.protocol_seconds for t in tasks.values())
    lines += ["", f"Total time: {total / 60:.1f} min (encoding when first run + protocol, summed over tasks; a resumed "
              "task adds up its parts; encoding is ~0 when the layer-stack cache already held the sentences). "
              "The load average is that of the 2-core machine: above ~2, other jobs shared the CPU and the times "
              "are upper bounds.", ""]
    return "\n".join(lines)


def write_transfer_outputs(run: TransferRun, output: str | Path) -> dict[str, Path]:
    """``transfer-<model>.json`` and ``.md`` in ``output``."""
    out = Path(output)
    stem = f"transfer-{Path(run.model.name).name}"
    return {"json": write_json(out / f"{stem}.json", run.to_dict()),
            "markdown": write_text(out / f"{stem}.md", render_transfer_markdown(run))}
