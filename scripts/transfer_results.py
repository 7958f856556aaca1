"""Write docs/results/transfer.md: BERT-LC on the SentEval transfer tasks (the paper's Table-4 layout).

Runs ``layerwise.methods.lc.transfer_run.run_transfer_tasks`` for all-MiniLM-L6-v2 on the seven tasks in the shared
data and for all-mpnet-base-v2 on ``--mpnet-tasks``, then measures what the fast subset choice costs: on
``--check-task`` (default CR, MiniLM) every subset gets the full SAGA inner cross-validation for the first
``--check-splits`` outer splits, and the ridge choice (and ridge top-k + SAGA) is compared with that exhaustive
choice on inner and test accuracy.

Everything is resumable: per-task results live under ``--runs`` and are reused when the settings match; the
exhaustive check saves each outer split as it finishes.

    python scripts/transfer_results.py                       # everything (see docs/results/transfer.md for times)
    python scripts/transfer_results.py --skip-mpnet --skip-check --output /tmp/t.md
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "scripts"))

from _provenance import command_line, git_state  # noqa: E402
from layerwise.data.senteval import display_name, load_transfer  # noqa: E402
from layerwise.encoders.layer_encoder import LayerEncoder  # noqa: E402
from layerwise.methods.lc.transfer import (  # noqa: E402
    all_subsets,
    choose_subset,
    default_max_layers,
    inner_splits,
    outer_splits,
    subset_accuracy,
)
from layerwise.reports import environment, write_json, write_text  # noqa: E402
from layerwise.methods.lc.transfer_run import encode_task, render_transfer_markdown, run_history, run_transfer_tasks  # noqa: E402

SEVEN = ["mr", "cr", "subj", "sst2", "sst5", "trec", "mrpc"]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data"))
    p.add_argument("--tasks", nargs="+", default=SEVEN)
    p.add_argument("--mpnet-tasks", nargs="+", default=["cr", "trec", "subj"])
    p.add_argument("--mpnet-screen-dim", type=int, default=128,
                   help="all-mpnet-base-v2 (d = 768) is screened on its top 128 principal directions (1/6 of d); the "
                        "check measures the same fraction of d on all-MiniLM-L6-v2")
    p.add_argument("--skip-mpnet", action="store_true")
    p.add_argument("--skip-minilm", action="store_true", help="run all-mpnet-base-v2 only (e.g. beside a MiniLM run)")
    p.add_argument("--render-only", action="store_true",
                   help="compute nothing: write the page from the per-task files under --runs (finished or not)")
    p.add_argument("--skip-check", action="store_true")
    p.add_argument("--check-task", default="cr")
    p.add_argument("--check-splits", type=int, default=3)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--runs", default=str(REPO / "docs" / "results" / "state" / "transfer"),
                   help="per-task state files (kept in the repo so that a run resumes on any machine)")
    p.add_argument("--output", default=str(REPO / "docs" / "results" / "transfer.md"))
    return p.parse_args(argv)


def shortcut_check(args, path: Path) -> dict:
    """Exhaustive SAGA inner CV of every subset vs the ridge screen (and ridge top-k + SAGA), per outer split."""
    state = json.loads(path.read_text()) if path.is_file() else {"splits": []}
    encoder = LayerEncoder("all-MiniLM-L6-v2", show_progress=False)
    data, _ = encode_task(encoder, load_transfer(args.check_task, data_dir=args.data_dir), head=False)
    subsets = all_subsets(data.n_states, default_max_layers(data.n_states))
    state.update(task=args.check_task, model=encoder.identity.to_dict(), n_subsets=len(subsets))
    for k, (td, te) in enumerate(outer_splits(data.labels, n_splits=args.check_splits, seed=0)):
        if k < len(state["splits"]):
            continue
        splits = inner_splits(data.labels[td], n_splits=10, seed=k)
        t0 = time.perf_counter()
        choose_subset(data, td, splits, subsets, shortlist=1, seed=k)
        ridge_seconds = time.perf_counter() - t0
        pdim = round(data.first.dim * args.mpnet_screen_dim / 768)
        projected = tuple(choose_subset(data, td, splits, subsets, shortlist=1, seed=k, screen_dim=pdim)[0])
        t0 = time.perf_counter()
        _, _, screen, saga = choose_subset(data, td, splits, subsets, shortlist=None, seed=k, n_jobs=args.jobs)
        exhaustive_seconds = time.perf_counter() - t0
        order = [subsets[i] for i in np.argsort(-screen, kind="stable")]
        key = lambda s: ",".join(map(str, s))  # noqa: E731
        saga_of = {s: saga[key(s)] for s in subsets}
        choice = {}
        for top in (1, 3, 10, len(subsets)):
            cand = order[:top]
            choice[str(top)] = max(cand, key=lambda s: saga_of[s]) if top > 1 else cand[0]
        choice[f"projected{pdim}"] = projected
        saga_of.setdefault(projected, saga[key(projected)])
        test = {}
        for s in set(choice.values()):
            test[key(s)] = 100 * subset_accuracy(data, td, te, s, seed=k)
        best = choice[str(len(subsets))]
        from scipy.stats import spearmanr

        state["splits"].append({
            "seed": k, "ridge_seconds": ridge_seconds, "exhaustive_seconds": exhaustive_seconds,
            "choice": {t: list(s) for t, s in choice.items()},
            "inner_saga": {t: saga_of[s] for t, s in choice.items()},
            "test": {t: test[key(s)] for t, s in choice.items()},
            "rank_of_exhaustive_choice_in_screen": order.index(best) + 1,
            "spearman_screen_vs_saga": float(spearmanr(screen, [saga_of[s] for s in subsets]).statistic),
        })
        write_json(path, state)
        print(f"check split {k}: ridge {choice['1']} vs exhaustive {best}; ridge {ridge_seconds:.1f}s, "
              f"exhaustive {exhaustive_seconds:.1f}s", flush=True)
    return state


def last_run_record(out: dict, model: str) -> dict:
    """What one invocation of this script cost for ``model``: wall time, and per task the encoding, protocol and
    layer-cache counts (``computed`` = sentences encoded by this run, ``stored`` = found in the cache)."""
    res = out["models"][model]
    return {"wall_seconds": out["wall_seconds"][model], "environment": out["environment"],
            "layerwise_home": os.environ.get("LAYERWISE_HOME", "(default)"), "git": out.get("git"),
            "tasks": {t: {"encode_seconds": v["encode_seconds"], "protocol_seconds": v["protocol_seconds"],
                          "cache": v.get("cache"), "outer_splits": len(v["result"]["splits"])}
                      for t, v in res["tasks"].items()}}


def render_last_run(rec: dict) -> list[str]:
    env = rec["environment"]
    tasks = rec["tasks"]
    computed = sum((v.get("cache") or {}).get("computed", 0) for v in tasks.values())
    stored = sum((v.get("cache") or {}).get("stored", 0) for v in tasks.values())
    return [f"**Last run of this script for the model**: {rec['wall_seconds'] / 60:.1f} min wall-clock for "
            f"{', '.join(display_name(t) for t in tasks)} (model loading, encoding and protocol), started "
            f"{env['date']} at load average {env['machine'].get('load_average_1_5_15')}; command "
            f"`{env['command']}` with LAYERWISE_HOME={rec.get('layerwise_home')}. Sentences encoded by that run: "
            f"{computed:,}; found in the layer cache: {stored:,} (a sentence shared by two tasks is encoded once).", ""]


def render_check(check: dict) -> list[str]:
    sp = check["splits"]
    n = check["n_subsets"]
    tops = list(sp[0]["choice"])
    label = {t: ("ridge screen alone (default)" if t == "1" else "exhaustive SAGA (reference)" if t == str(n)
                 else f"ridge screen on the top {t[9:]} principal directions (the fraction of d used for all-mpnet-base-v2)"
                 if t.startswith("projected") else f"ridge top {t}, then SAGA") for t in tops}
    lines = [f"## What the fast subset choice costs ({display_name(check['task'])}, {check['model']['name']}, "
             f"first {len(sp)} outer splits)", "",
             f"Every one of the {n} subsets got the full SAGA inner cross-validation (10 splits), the slow "
             "reference; the ridge screen's choice and 'ridge top k, then SAGA' are compared with it.", "",
             "| subset choice | same subset as exhaustive | inner SAGA accuracy x100 | test accuracy x100 |",
             "|---|---|---|---|"]
    for t in tops:
        same = sum(s["choice"][t] == s["choice"][str(n)] for s in sp)
        inner = np.mean([s["inner_saga"][t] for s in sp])
        test = np.mean([s["test"][t] for s in sp])
        lines.append(f"| {label[t]} | {same}/{len(sp)} | {inner:.2f} | {test:.2f} |")
    ranks = [s["rank_of_exhaustive_choice_in_screen"] for s in sp]
    rho = [s["spearman_screen_vs_saga"] for s in sp]
    lines += ["", f"- rank of the exhaustive choice in the ridge screen's order: {ranks}; Spearman between the ridge "
              f"screen and SAGA inner accuracy over all subsets: {', '.join(f'{r:.3f}' for r in rho)}",
              f"- time per outer split: ridge screen {np.mean([s['ridge_seconds'] for s in sp]):.1f} s, exhaustive "
              f"SAGA {np.mean([s['exhaustive_seconds'] for s in sp]):.1f} s ({len(sp)} splits, "
              f"{n * 10} SAGA fits each, 2 threads)",
              f"- accuracy cost of the default (ridge alone) against exhaustive: "
              f"{np.mean([s['test'][str(n)] - s['test']['1'] for s in sp]):+.2f} test points (exhaustive minus ridge), "
              f"{np.mean([s['inner_saga'][str(n)] - s['inner_saga']['1'] for s in sp]):+.2f} inner points", ""]
    return lines


def collect(runs: Path, model: str, tasks: list[str]) -> dict | None:
    """The per-task state files of a model as ``run_transfer_tasks`` returns them (partial tasks included)."""
    found = {}
    for t in tasks:
        f = runs / model / f"transfer-{model}-{t}.json"
        if f.is_file():
            found[t] = json.loads(f.read_text())
    if not found:
        return None
    any_state = next(iter(found.values()))
    out = {"kind": "transfer", "model": any_state["model"], "protocol": any_state["protocol"],
           "environment": any_state["environment"], "tasks": {}}
    for t, st in found.items():
        r = st["result"]
        out["tasks"][t] = {"result": r, "n_examples": st["n_examples"], "encode_seconds": st["encode_seconds"],
                           "first_encode_seconds": st.get("first_encode_seconds", st["encode_seconds"]),
                           "protocol_seconds": st["protocol_seconds"], "complete": st.get("complete", False),
                           "runs": run_history(st),
                           "head": st.get("head", "trained pooler head" if "lc_mlp" in r["summary"] else "not run")}
    return out


def main(argv=None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    runs = Path(args.runs)
    cmd = command_line()
    if args.render_only:
        out = {"environment": environment(cmd), "git": git_state(), "models": {}, "render_only": True,
               "requested": {"all-MiniLM-L6-v2": args.tasks, "all-mpnet-base-v2": args.mpnet_tasks}}
        for model, tasks in (("all-MiniLM-L6-v2", args.tasks), ("all-mpnet-base-v2", args.mpnet_tasks)):
            got = collect(runs, model, tasks)
            if got is not None:
                out["models"][model] = got
        for model in out["models"]:
            record = runs / model / "last-run.json"
            if record.is_file():
                out["models"][model]["last_run"] = json.loads(record.read_text())
        check = runs / f"check-{args.check_task}.json"
        if check.is_file():
            out["check"] = json.loads(check.read_text())
        write_json(Path(args.output).with_suffix(".json"), out)
        write_text(args.output, render(out))
        print(render(out))
        return 0
    out = {"environment": environment(cmd), "git": git_state(), "models": {}, "wall_seconds": {}}
    plan = [] if args.skip_minilm else [("all-MiniLM-L6-v2", args.tasks, None)]
    if not args.skip_mpnet:
        plan.append(("all-mpnet-base-v2", args.mpnet_tasks, args.mpnet_screen_dim))
    for model, tasks, screen_dim in plan:
        t0 = time.perf_counter()
        out["models"][model] = run_transfer_tasks(model, tasks, output=runs / model, data_dir=args.data_dir,
                                                  n_jobs=args.jobs, screen_dim=screen_dim, command=cmd)
        out["wall_seconds"][model] = time.perf_counter() - t0
        write_json(runs / model / "last-run.json", last_run_record(out, model))
        write_json(Path(args.output).with_suffix(".json"), out)
    if not args.skip_check:
        out["check"] = shortcut_check(args, runs / f"check-{args.check_task}.json")
    write_json(Path(args.output).with_suffix(".json"), out)
    text = render(out)
    write_text(args.output, text)
    print(text)
    return 0


def render(out: dict) -> str:
    env = out["environment"]
    lines = ["# Transfer tasks: layer combination (BERT-LC) as classifier features", "",
             f"- command: `{env['command']}`; date {env['date']}; {env['machine']['cpu_count']} CPUs, "
             f"{env['machine']['platform']}; git commit `{(out.get('git') or {}).get('commit', 'unknown')[:12]}`",
             "- data: SentEval files of ../shared/data, all of each task's files pooled (SST-2 includes its "
             "67,349 phrase-level training rows; CR is 3,771 rows, the 4 empty lines dropped). MPQA is not in the "
             "shared data and is not run.",
             "- LC + MLP: both checkpoints hold pooler weights (dense + tanh) from their pre-training; the "
             "sentence-transformers fine-tuning that made these models used mean pooling and never trained that "
             "head, so LC + MLP here feeds the combination through a stale head.",
             "- times: wall-clock seconds on the 2-core machine. Each task's table row gives the load average when its "
             "run started and when it last saved; runs made while other jobs shared the cores are slower than an idle "
             "machine would be.", ""]
    for model, res in out["models"].items():
        md = render_transfer_markdown(res, title="Table 4 layout")
        body = md.split("\n", 1)[1].replace("\n## ", "\n### ")
        lines += [f"## {model}", ""]
        wanted = out.get("requested", {}).get(model, [])
        missing = [display_name(t) for t in wanted if t not in res["tasks"]]
        partial = [f"{display_name(t)} ({len(v['result']['splits'])} of {v['result']['n_outer']} outer splits)"
                   for t, v in res["tasks"].items() if len(v["result"]["splits"]) < v["result"]["n_outer"]]
        if missing or partial:
            lines += ["**Incomplete run**: " + "; ".join(
                ([f"not run yet: {', '.join(missing)}"] if missing else [])
                + ([f"partial: {', '.join(partial)}"] if partial else []))
                + ". The same command resumes it (finished outer splits are kept).", ""]
        if "last_run" in res:
            lines += render_last_run(res["last_run"])
        lines += [body]
    if "check" in out:
        lines += render_check(out["check"])
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
