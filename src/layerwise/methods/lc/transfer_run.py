"""End-to-end transfer runs behind ``layerwise transfer``: encode each task once, run the protocol, write results.

Results are written after every outer split (``<output>/transfer-<model>-<task>.json``); running the same
command again continues where an interrupted run stopped and reuses finished tasks.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import numpy as np

from layerwise.data.senteval import TransferData, display_name, load_transfer
from layerwise.encoders.layer_encoder import LayerEncoder
from layerwise.methods.lc.transfer import (
    CLASSIFIER,
    DEFAULT_RIDGE_ALPHA,
    TransferFeatures,
    TransferResult,
    run_transfer,
)
from layerwise.reports import environment, fmt, write_json, write_text

logger = logging.getLogger(__name__)

__all__ = ["encode_task", "run_transfer_tasks", "render_transfer_markdown", "write_transfer_outputs"]

TRANSFER_LABELS = {
    "cls": "CLS (last layer)",
    "last": "mean, last layer",
    "last_four": "mean, last four",
    "random": "mean, random subset",
    "lc": "**LC**",
    "lc_mlp": "LC + MLP (pooler head)",
}


def encode_task(encoder: LayerEncoder, data: TransferData, *, head: bool = True) -> tuple[TransferFeatures, float]:
    """Layer stacks of a task's sentences (pair tasks: both sides in one pass). Returns (features, seconds).

    ``head=True`` attaches the checkpoint's pooler head for LC + MLP when it has trained weights.
    """
    if len(data) == 0:
        raise ValueError(f"transfer task {data.name!r} has no examples")
    t0 = time.perf_counter()
    texts = list(data.sentences) + (list(data.sentences2) if data.is_pair else [])
    stack = encoder.encode(texts)
    seconds = time.perf_counter() - t0
    n = len(data)
    first = stack.take(np.arange(n)) if data.is_pair else stack
    second = stack.take(np.arange(n, 2 * n)) if data.is_pair else None
    pooler_head = None
    if head and encoder.identity.pooler_trained:
        w, b, _ = encoder.pooler_head()
        pooler_head = (w, b)
    return TransferFeatures(first=first, labels=data.labels, n_classes=data.n_classes, second=second,
                            head=pooler_head), seconds


def _state_path(output: Path, model_name: str, task: str) -> Path:
    return output / f"transfer-{Path(model_name).name}-{task}.json"


def _load_previous(path: Path) -> TransferResult | None:
    if not path.is_file():
        return None
    try:
        return TransferResult.from_dict(json.loads(path.read_text())["result"])
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ValueError(
            f"cannot resume from {path}: the file is not a transfer result ({exc}); delete it to start that task over"
        ) from exc


def run_transfer_tasks(
    model: str = "all-MiniLM-L6-v2",
    tasks=("mr", "cr", "subj", "sst2", "sst5", "trec", "mrpc"),
    *,
    output: str | Path = "runs/transfer",
    data_dir=None,
    n_outer: int = 10,
    n_inner: int = 10,
    max_layers: int | None = None,
    shortlist: int | None = 1,
    seed: int = 0,
    n_jobs: int = 2,
    ridge_alpha: float = DEFAULT_RIDGE_ALPHA,
    screen_dim: int | None = None,
    head: bool = True,
    encoder_options: dict | None = None,
    command: list[str] | None = None,
) -> dict:
    """The transfer protocol on each task; per-task results files are written (and resumed) under ``output``."""
    from tqdm.auto import tqdm

    if not tasks:
        raise ValueError("no transfer tasks given")
    loaded = {t: load_transfer(t, data_dir=data_dir) for t in tasks}  # fail early on a missing task
    encoder = LayerEncoder(model, **(encoder_options or {}))
    output = Path(output)
    env = environment(command)
    out = {"kind": "transfer", "model": encoder.identity.to_dict(),
           "encoder": {"max_length": encoder.max_length, "dtype": encoder.dtype, "batch_size": encoder.batch_size},
           "protocol": _protocol(n_outer, n_inner, shortlist, seed, ridge_alpha, screen_dim), "tasks": {},
           "environment": env}
    show = logger.isEnabledFor(logging.INFO)
    for task, data in loaded.items():
        features, enc_seconds = encode_task(encoder, data, head=head)
        path = _state_path(output, encoder.identity.name, data.name)
        previous = _load_previous(path)
        t0 = time.perf_counter()
        prior_seconds, first_encode, prior_env, prior_runs, n_before = 0.0, enc_seconds, env, [], 0
        if previous is not None and (previous.n_outer, previous.n_inner, previous.shortlist, previous.seed) == (
                n_outer, n_inner, shortlist, seed):  # its splits will be reused: so is the time they took
            prior = json.loads(path.read_text())
            prior_seconds = float(prior.get("protocol_seconds", 0.0))
            first_encode = float(prior.get("first_encode_seconds", prior.get("encode_seconds", enc_seconds)))
            prior_env, prior_runs = prior.get("environment", env), run_history(prior)
            n_before = len(previous.splits)

        def save(result: TransferResult, done: bool = False) -> None:
            new = len(result.splits) > n_before  # this invocation computed splits: it joins the history
            runs = prior_runs + ([{"started": env["date"], "command": env["command"],
                                   "load_at_start": env["machine"].get("load_average_1_5_15"),
                                   "load_at_save": [round(x, 2) for x in os.getloadavg()],
                                   "splits": [n_before, len(result.splits)],
                                   "protocol_seconds": time.perf_counter() - t0}] if new else [])
            write_json(path, {"task": data.name, "model": out["model"], "protocol": out["protocol"],
                              "environment": env if new or not prior_runs else prior_env, "n_examples": len(data),
                              "encode_seconds": enc_seconds, "first_encode_seconds": first_encode,
                              "protocol_seconds": prior_seconds + (time.perf_counter() - t0 if new else 0.0),
                              "head": encoder.head_status() if head else "not requested (--no-head)",
                              "runs": runs, "complete": done, "result": result.to_dict()})

        with tqdm(total=n_outer, desc=f"{data.name} outer splits", unit="split", disable=not show) as bar:
            result = run_transfer(features, task=data.name, n_outer=n_outer, n_inner=n_inner, max_layers=max_layers,
                                  shortlist=shortlist, seed=seed, n_jobs=n_jobs, ridge_alpha=ridge_alpha,
                                  screen_dim=screen_dim, previous=previous, on_split=save, progress=bar)
        save(result, done=True)
        saved = json.loads(path.read_text())
        out["tasks"][data.name] = {"result": result.to_dict(), "n_examples": len(data),
                                   "encode_seconds": enc_seconds, "protocol_seconds": saved["protocol_seconds"],
                                   "first_encode_seconds": first_encode, "runs": saved["runs"],
                                   "cache": None if encoder.cache is None else encoder.cache.last_stats,
                                   "head": encoder.head_status() if head else "not requested (--no-head)"}
    return out


def _protocol(n_outer, n_inner, shortlist, seed, ridge_alpha, screen_dim=None) -> dict:
    return {
        "name": "BERT-LC transfer (Hosseini et al. 2023): all splits pooled; stratified outer 85/15 splits; "
                "inner stratified 82/18 splits choose the subset; logistic regression",
        "n_outer": n_outer, "n_inner": n_inner, "seed": seed, "outer_seeds": [seed + k for k in range(n_outer)],
        "classifier": {"sklearn": "LogisticRegression", **CLASSIFIER,
                       "note": "C = 10 is our reading of the paper's 'regularization parameter 10'"},
        "selection": ("closed-form ridge screen of every subset (alpha "
                      f"{ridge_alpha:g} x mean feature variance"
                      + (f"; vectors projected on their top {screen_dim} principal directions for the screen only"
                         if screen_dim else "") + "), then SAGA inner CV on the "
                      + ("top subset only (the ridge choice)" if shortlist == 1 else
                         "every subset (exhaustive)" if shortlist is None else f"top {shortlist} subsets")),
        "shortlist": shortlist,
        "ridge_alpha": ridge_alpha,
        "screen_dim": screen_dim,
    }


def render_transfer_markdown(result: dict, title: str | None = None) -> str:
    m = result["model"]
    env = result.get("environment", {})
    tasks = result["tasks"]
    names = list(tasks)
    p = result["protocol"]
    lines = [f"# {title or 'Transfer tasks with layer combination'}: {m['name']}", "",
             f"- model: `{m['name']}` ({m.get('hf_id') or m['path']}), {m['n_layers']} layers, hidden states "
             f"0..{m['n_layers']} (0 = embedding output), weights sha256 `{m['weights_sha256'][:16]}…`",
             f"- protocol: {p['name']}; {p['n_outer']} outer splits (seeds {p['outer_seeds'][0]}..{p['outer_seeds'][-1]}),"
             f" {p['n_inner']} inner splits; subsets of at most {next(iter(tasks.values()))['result']['max_layers']} "
             "hidden states",
             f"- classifier: scikit-learn LogisticRegression(solver={p['classifier']['solver']}, tol={p['classifier']['tol']}, "
             f"max_iter={p['classifier']['max_iter']}, C={p['classifier']['C']:g}); {p['classifier']['note']}",
             f"- subset choice: {p['selection']}",
             f"- command: `{env.get('command', '')}`",
             f"- date: {env.get('date', '')}; machine: {env.get('machine', {}).get('platform', '')}, "
             f"{env.get('machine', {}).get('cpu_count', '')} CPUs; versions: "
             + ", ".join(f"{k} {v}" for k, v in env.get("versions", {}).items()),
             "", "## Test accuracy x100 (mean ± std over outer splits)", "",
             "| method | " + " | ".join(map(display_name, names)) + " | avg |", "|---|" + "---|" * (len(names) + 1)]
    methods = list(dict.fromkeys(mm for t in tasks.values() for mm in t["result"]["summary"]))
    for method in methods:
        cells, vals = [], []
        for t in names:
            s = tasks[t]["result"]["summary"].get(method)
            cells.append(fmt(s["mean"], s["std"]) if s else "n/a")
            vals.append(s["mean"] if s else np.nan)
        avg = f"{np.mean(vals):.2f}" if not np.isnan(vals).any() else "n/a"
        lines.append(f"| {TRANSFER_LABELS.get(method, method)} | " + " | ".join(cells) + f" | {avg} |")
    lines += ["", "## Relative error reduction of LC, (A_LC − A_B) / (1 − A_B) x100, on the mean accuracies", "",
              "| baseline B | " + " | ".join(map(display_name, names)) + " | avg |", "|---|" + "---|" * (len(names) + 1)]
    for b in [x for x in methods if x != "lc"]:
        vals = [tasks[t]["result"]["relative_error_reduction"].get(b, np.nan) for t in names]
        lines.append(f"| {TRANSFER_LABELS.get(b, b)} | " + " | ".join(f"{v:+.2f}" for v in vals)
                     + f" | {np.nanmean(vals):+.2f} |")
    lines += ["", "## Chosen subsets and time", "",
              "| task | examples | classes | subsets searched | outer splits done | chosen hidden states (splits) | encode s (first run) | protocol s | run start (UTC), splits: load avg at start → last save | LC + MLP head |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for t in names:
        r = tasks[t]["result"]
        counts: dict[tuple, int] = {}
        for s in r["splits"]:
            counts[tuple(s["layers"])] = counts.get(tuple(s["layers"]), 0) + 1
        chosen = ", ".join(f"{k} x{v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))
        lines.append(f"| {display_name(t)} | {tasks[t]['n_examples']} | {r['n_classes']} | {len(r['subsets'])} | "
                     f"{len(r['splits'])} of {r['n_outer']} | {chosen} | "
                     f"{_first_encode(tasks[t]):.1f} | {tasks[t]['protocol_seconds']:.1f} | {_load(tasks[t])} | "
                     f"{tasks[t]['head']} |")
    total = sum(_first_encode(t) + t["protocol_seconds"] for t in tasks.values())
    lines += ["", f"Total time: {total / 60:.1f} min (encoding when first run + protocol, summed over tasks; a resumed "
              "task adds up its parts; encoding is ~0 when the layer-stack cache already held the sentences). "
              "The load average is that of the 2-core machine: above ~2, other jobs shared the CPU and the times "
              "are upper bounds.", ""]
    return "\n".join(lines)


def run_history(state: dict) -> list[dict]:
    """The invocations that computed a task's outer splits, oldest first: start time, command, load average at
    start and at the last save, which splits, protocol seconds. Files written before the history existed give
    one entry from their environment (load at save unknown)."""
    if "runs" in state:
        return list(state["runs"])
    env = state.get("environment", {})
    return [{"started": env.get("date"), "command": env.get("command"),
             "load_at_start": env.get("machine", {}).get("load_average_1_5_15"),
             "load_at_save": state.get("load_average_at_save"),
             "splits": [0, len(state.get("result", {}).get("splits", []))],
             "protocol_seconds": state.get("protocol_seconds")}]


def _load(task: dict) -> str:
    """The table cell of a task's run history (which invocation computed which splits, and the load then)."""
    def one(r):
        start, end = r.get("load_at_start"), r.get("load_at_save")
        return (f"{(r.get('started') or '?')[11:16]}, splits {r['splits'][0]}-{r['splits'][1] - 1}: "
                f"{start[0] if start else '?'} → {end[0] if end else '?'}")
    return "; ".join(one(r) for r in task.get("runs", [])) or "not recorded"


def _first_encode(task: dict) -> float:
    return float(task.get("first_encode_seconds", task["encode_seconds"]))


def write_transfer_outputs(result: dict, output: str | Path) -> dict[str, Path]:
    out = Path(output)
    stem = f"transfer-{Path(result['model']['name']).name}"
    return {"json": write_json(out / f"{stem}.json", result),
            "markdown": write_text(out / f"{stem}.md", render_transfer_markdown(result))}
