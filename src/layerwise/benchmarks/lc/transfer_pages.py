"""The ``transfer`` page from the results store: Table 4 per model, the last run's cost, the shortcut check."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from layerwise.benchmarks.lc.transfer_check import CheckResult
from layerwise.benchmarks.lc.transfer_report import ALPHA, p_cell, render_transfer_markdown
from layerwise.benchmarks.lc.transfer_run import PAGE, TaskRun, TransferRun, describe_protocol
from layerwise.benchmarks.store import ResultsStore
from layerwise.data.senteval import display_name
from layerwise.evaluation.significance import BOOTSTRAP_TEST
from layerwise.methods.lc.transfer import TransferProtocol, screen_agreement
from layerwise.methods.lc.transfer_significance import correct_digest
from layerwise.reports import fmt, sample_std

__all__ = ["render_transfer_page", "transfer_runs"]


def transfer_runs(store: ResultsStore, requested: dict[str, list[str]], keep=None) -> dict[str, TransferRun]:
    """model -> its TransferRun from the store's task parts (requested tasks in order; latest key per task).

    ``keep(part) -> bool`` selects the parts under the page's settings (default: every task part)."""
    tasks: dict[str, dict[str, TaskRun]] = {}
    for part in store.parts(PAGE):
        if part.payload.get("kind") != "transfer-task" or (keep is not None and not keep(part)):
            continue
        t = TaskRun.from_part(part)
        have = tasks.setdefault(t.model.name, {}).get(t.task)
        if have is None or (t.runs and have.runs and t.runs[-1]["started"] > have.runs[-1]["started"]):
            tasks[t.model.name][t.task] = t
    out = {}
    for model, found in tasks.items():
        order = [x for x in requested.get(model, []) if x in found] + [x for x in found if x not in requested.get(model, [])]
        first = found[order[0]]

        r = first.result
        protocol = describe_protocol(TransferProtocol(n_outer=r.n_outer, n_inner=r.n_inner, shortlist=r.shortlist,
                                                      seed=r.seed, ridge_alpha=r.ridge_alpha,
                                                      screen_dim=r.screen_dim))
        out[model] = TransferRun(first.model, protocol, {x: found[x] for x in order}, first.environment)
    return out


def _named(store: ResultsStore, prefix: str) -> dict[str, dict]:
    return {p.name: p.payload for p in store.parts(PAGE) if p.name.startswith(prefix)}


def render_transfer_page(store: ResultsStore, requested: dict[str, list[str]], env: dict,
                         keep=None, exact=None) -> tuple[str, dict]:
    """The page's markdown and its JSON summary, from the store alone (``keep``: see :func:`transfer_runs`;
    ``exact(part)``: the parts run with the paper's exact protocol, shown in a section of their own)."""
    runs = transfer_runs(store, requested, keep)
    exact_runs = transfer_runs(store, {}, exact) if exact is not None else {}
    last = {p["model"]: p for p in _named(store, "last-run-").values()}
    checks = [CheckResult.from_dict(d) for d in _named(store, "check-").values()]
    lines = ["# Transfer tasks: layer combination (BERT-LC) as classifier features", "",
             f"- rendered by `{env['command']}`; date {env['date']}; each model's section names the command, date "
             "and machine of the runs that computed it",
             "- data: SentEval files of ../shared/data, all of each task's files pooled (SST-2 includes its "
             "67,349 phrase-level training rows; CR is 3,771 rows, the 4 empty lines dropped). MPQA is not in the "
             "shared data and is not run.",
             "- LC + MLP: its head is the checkpoint's pooler (dense + tanh over CLS), whose weights come from "
             "pre-training; the sentence-transformers fine-tuning that made these models used mean pooling and "
             "never trained that head, so LC + MLP here feeds the combination through a head never trained for "
             "these tasks or for sentence similarity (each model's header names it the same way).",
             "- times: wall-clock seconds on the 2-core machine. Each task's table row gives the load average when its "
             "run started and when it last saved; runs made while other jobs shared the cores are slower than an idle "
             "machine would be.", ""]
    for model, run in runs.items():
        body = render_transfer_markdown(run, title="Table 4 layout").split("\n", 1)[1].replace("\n## ", "\n### ")
        lines += [f"## {model}", ""]
        missing = [display_name(t) for t in requested.get(model, []) if t not in run.tasks]
        partial = [f"{display_name(t)} ({len(v.result.splits)} of {v.result.n_outer} outer splits)"
                   for t, v in run.tasks.items() if len(v.result.splits) < v.result.n_outer]
        if missing or partial:
            lines += ["**Incomplete run**: " + "; ".join(
                ([f"not run yet: {', '.join(missing)}"] if missing else [])
                + ([f"partial: {', '.join(partial)}"] if partial else []))
                + ". The same command resumes it (finished outer splits are kept).", ""]
        if model in last:
            lines += render_last_run(last[model])
        lines += [body]
    for check in checks:
        lines += render_check(check)
    if exact is not None:
        lines += render_exact(exact_runs, runs, _named(store, "exact-test-"))
    doc = {"kind": "transfer-page", "schema": 1, "environment": env,
           "models": {m: r.to_dict() for m, r in runs.items()}, "last_run": last, "check": [c.to_dict() for c in checks]}
    return "\n".join(lines) + "\n", doc


def render_last_run(rec: dict) -> list[str]:
    env = rec["environment"]
    tasks = rec["tasks"]
    computed = sum((v.get("cache") or {}).get("computed", 0) for v in tasks.values())
    stored = sum((v.get("cache") or {}).get("stored", 0) for v in tasks.values())
    return [f"**Last run for the model**: {rec['wall_seconds'] / 60:.1f} min wall-clock for "
            f"{', '.join(display_name(t) for t in tasks)} (model loading, encoding and protocol), started "
            f"{env['date']} at load average {env['machine'].get('load_average_1_5_15')}; command "
            f"`{env['command']}` with LAYERWISE_HOME={rec.get('layerwise_home')}. Sentences encoded by that run: "
            f"{computed:,}; found in the layer cache: {stored:,} (a sentence shared by two tasks is encoded once).", ""]


def _exact_tests(stored: dict[str, dict], model: str, task: str, exact: TaskRun, default: TaskRun | None) -> dict:
    """The stored tests of this exact run against this default run ({} when either run changed since)."""
    for d in stored.values():
        if (d["model"], d["task"]) == (model, task) and default is not None and d["exact"] == correct_digest(
                exact.result) and d["default"] == correct_digest(default.result):
            return d["tests"]
    return {}


def render_exact(exact: dict[str, TransferRun], default: dict[str, TransferRun],
                 tests: dict[str, dict] | None = None) -> list[str]:
    """The paper's exact protocol beside the default, per task, with the ridge screen's agreement with it and
    the paired tests of the exact LC against the default LC and the exact last-layer mean (``tests``: the stored
    ``exact-test-*`` payloads by name)."""
    lines = ["## The paper's exact protocol: k-fold inner cross-validation, exhaustive SAGA", "",
             "The default above chooses LC's subset by a closed-form ridge screen over seeded 82/18 inner splits; "
             "the paper scores every allowed subset by SAGA logistic regression in 10-fold inner cross-validation. "
             "Here that exact choice is run per task (`--option exact_tasks='[\"cr\"]'`; `--option exact_outer=k` "
             "computes only its first k outer splits, where all ten cost too many CPU hours here: the default "
             "columns and the tests are then on those same k splits); *screen agrees* counts "
             "the outer splits where the ridge screen's best subset, scored on the same folds, is also SAGA's best, "
             "and *SAGA points lost* is the mean inner SAGA accuracy given up by taking the screen's choice. "
             f"*p* columns: {BOOTSTRAP_TEST} test over the task's test examples on the same outer splits (as in the "
             f"tables above; yes: p < {ALPHA}), the exact protocol's LC against the default's LC and against the "
             "exact run's last-layer mean. *time, machine*: the exact protocol's wall time summed over the runs "
             "that computed its splits, and the machine of the last of them (its CPU count, and its GPU where it had "
             "one: the protocol itself runs on the CPU, in as many threads as the command's `jobs`).", ""]
    rows = [(model, task, t) for model, run in exact.items() for task, t in run.tasks.items()]
    if not rows:
        n = len(next(iter(default.values())).tasks) if default else 0
        return lines + [f"Not run yet on this machine: about 10^3 SAGA fits per outer split and 10^4 per task for "
                        f"all-MiniLM-L6-v2 (98 subsets x 10 folds x 10 outer splits; {n} tasks on the default "
                        "protocol above). `layerwise results run transfer --option exact_tasks='[\"cr\", "
                        "\"trec\"]'` computes it, resumably.", ""]
    lines += ["| model | task | outer splits | inner folds | LC, exact | LC, default | p, exact vs default LC | "
              "last, exact | p, LC vs last (exact) | screen agrees | SAGA points lost | time, machine |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for model, task, t in rows:
        base = default.get(model).tasks.get(task) if model in default else None
        k = len(t.result.splits)  # the default run on the same first k outer splits (all of them when finished)
        same = base.result.splits[:k] if base else []
        agree = screen_agreement(t.result)
        tested = _exact_tests(tests or {}, model, task, t, base)
        lines.append(f"| {Path(model).name} | {display_name(task)} | {k} of {t.result.n_outer} | "
                     f"{t.result.n_inner} | {_spread(t.result.splits, 'lc')} | "
                     + (_spread(same, "lc") if k and len(same) == k else "n/a")
                     + f" | {p_cell(tested.get('lc_vs_default_lc'))} | {_spread(t.result.splits, 'last')} | "
                     + f"{p_cell(tested.get('lc_vs_last'))} | "
                     + (f"{agree['agree']}/{agree['splits']} | {agree['saga_gap']:.2f}" if agree else "n/a | n/a")
                     + f" | {_time_and_machine(t)} |")
    return lines + [""]


def _time_and_machine(t: TaskRun) -> str:
    """'4.3 min, 16 CPUs, NVIDIA H100 80GB HBM3': the protocol's summed wall time and the last run's machine."""
    machine = t.environment.get("machine", {})
    where = [f"{machine['cpu_count']} CPUs"] if machine.get("cpu_count") else []
    where += [machine["gpu"]] if machine.get("gpu") else []
    return ", ".join([f"{t.protocol_seconds / 60:.1f} min", *where])


def _spread(splits, method: str) -> str:
    """Mean test accuracy of ``method`` over ``splits`` with its sample spread (none for one split)."""
    values = [split.test[method] for split in splits]
    return fmt(float(np.mean(values)), sample_std(values)) if values else "n/a"


def render_check(check: CheckResult) -> list[str]:
    sp, n = check.splits, check.n_subsets
    ref = str(n)
    tops = list(sp[0].choice)
    label = {t: ("ridge screen alone (default)" if t == "1" else "exhaustive SAGA (reference)" if t == ref
                 else f"ridge screen on the top {t[9:]} principal directions (the fraction of d used for "
                 "all-mpnet-base-v2)" if t.startswith("projected") else f"ridge top {t}, then SAGA") for t in tops}
    lines = [f"## What the fast subset choice costs ({display_name(check.task)}, {check.model.name}, "
             f"first {len(sp)} outer splits)", "",
             f"Every one of the {n} subsets got the full SAGA inner cross-validation (10 splits), the slow "
             "reference; the ridge screen's choice and 'ridge top k, then SAGA' are compared with it.", "",
             "| subset choice | same subset as exhaustive | inner SAGA accuracy x100 | test accuracy x100 |",
             "|---|---|---|---|"]
    for t in tops:
        same = sum(s.choice[t] == s.choice[ref] for s in sp)
        inner = np.mean([s.inner_saga[t] for s in sp])
        test = np.mean([s.test[t] for s in sp])
        lines.append(f"| {label[t]} | {same}/{len(sp)} | {inner:.2f} | {test:.2f} |")
    ranks = [s.rank_of_exhaustive_choice_in_screen for s in sp]
    rho = [s.spearman_screen_vs_saga for s in sp]
    lines += ["", f"- rank of the exhaustive choice in the ridge screen's order: {ranks}; Spearman between the ridge "
              f"screen and SAGA inner accuracy over all subsets: {', '.join(f'{r:.3f}' for r in rho)}",
              f"- time per outer split: ridge screen {np.mean([s.ridge_seconds for s in sp]):.1f} s, exhaustive "
              f"SAGA {np.mean([s.exhaustive_seconds for s in sp]):.1f} s ({len(sp)} splits, "
              f"{n * 10} SAGA fits each, 2 threads)",
              f"- accuracy cost of the default (ridge alone) against exhaustive: "
              f"{np.mean([s.test[ref] - s.test['1'] for s in sp]):+.2f} test points (exhaustive minus ridge), "
              f"{np.mean([s.inner_saga[ref] - s.inner_saga['1'] for s in sp]):+.2f} inner points", ""]
    return lines
