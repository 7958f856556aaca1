"""The BERT-LC results pages: ``lc-sts``, ``transfer`` and ``ablations``, each declared once with run + render.

``run`` computes the parts the store lacks (through the same code as ``layerwise search``/``transfer``/``ablate``,
so their keys are the same); ``render`` writes the page from the store alone. Page switches (``ctx.options``):
``models`` (lc-sts, ablations), ``datasets``, ``combined_splits`` (lc-sts: the data sets also run over all
their splits combined), ``settings``, ``max_length``, ``dtype`` (lc-sts), ``skip_mpnet`` and
``skip_check``, ``tasks`` (transfer: run only these of the plan's tasks), ``exact_tasks`` (transfer: tasks also run with the paper's exact protocol, 10-fold inner CV and
exhaustive SAGA, on all-MiniLM-L6-v2), ``exact_outer`` (transfer: compute only the first that many of those runs'
outer splits this time; a later run continues them), ``jobs``.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from layerwise.benchmarks.lc import sts_page
from layerwise.benchmarks.lc.ablation_report import render_ablation_markdown, write_ablation_outputs
from layerwise.benchmarks.lc.ablation_run import AblationConfig, AblationPart, AblationResult, run_ablations
from layerwise.benchmarks.lc.run import SearchConfig, STSRun, run_search
from layerwise.benchmarks.lc.transfer_check import ShortcutCheck, run_shortcut_check
from layerwise.benchmarks.lc.transfer_pages import render_transfer_page, transfer_runs
from layerwise.benchmarks.lc.transfer_run import DEFAULT_TASKS, TransferRunConfig, run_transfer_tasks
from layerwise.benchmarks.lc.transfer_run import PAGE as PAGE_TRANSFER
from layerwise.benchmarks.lc.transfer_speed import PAGE as SPEED_PAGE
from layerwise.benchmarks.lc.transfer_speed import SpeedConfig, render_transfer_speed, run_transfer_speed
from layerwise.benchmarks.page_parts import run_record
from layerwise.benchmarks.registry import PageContext, ResultsPage, register
from layerwise.benchmarks.store import Part, ResultsStore, model_key
from layerwise.data import available_sts, load_sts
from layerwise.data.checksum import content_checksum
from layerwise.data.senteval import canonical_task, load_transfer
from layerwise.encoders.layer_encoder import LayerEncoder, ModelIdentity
from layerwise.methods.lc.transfer import TransferProtocol
from layerwise.methods.lc.transfer_significance import correct_digest, protocol_significance
from layerwise.reports import environment, git_state, write_json, write_text

logger = logging.getLogger(__name__)

__all__ = ["LC_STS", "SEARCH_SETTINGS", "sts_part_key", "ABLATIONS", "TRANSFER"]

MODELS = ("all-MiniLM-L6-v2", "all-mpnet-base-v2")
SEARCH_SETTINGS = {"n_splits": 5, "dev_size": 350, "seed": 0, "max_layers": None, "head": True, "bootstrap": 2000,
                   "max_pooling": True}
#: Data sets also run with the paper's protocol over every split combined ("we first combine all of its data
#: subsets, shuffle it"): STS-B train+dev+test, SICK-R train+trial+test; the default rows use the test split.
COMBINED_SPLITS = ("stsb", "sickr")
#: The paper's exact transfer protocol: 10-fold inner cross-validation, SAGA over every allowed subset.
EXACT_TRANSFER = TransferProtocol(inner="kfold", shortlist=None)
TRANSFER_PLAN = (("all-MiniLM-L6-v2", DEFAULT_TASKS, None), ("all-mpnet-base-v2", ("cr", "trec", "subj"), 128))
TRANSFER_BOOTSTRAP = 2000  # resamples of the paired bootstrap of LC against each baseline
ABLATION_STS = ("stsb", "sickr", "sts12", "sts13", "sts14", "sts15", "sts16")


# ---------------------------------------------------------------------------------------------- lc-sts

def sts_part_key(identity: ModelIdentity, encoder: dict, data_info: dict, aggregation: str, settings: dict) -> dict:
    """Every setting that changes an lc-sts row: model, max length, dtype, data (name, split, checksum), protocol."""
    return {"model": model_key(identity), "max_length": encoder["max_length"], "dtype": encoder["dtype"],
            "data": data_info, "aggregation": aggregation, "protocol": dict(settings)}


def _sts_settings(ctx: PageContext) -> tuple[dict, dict]:
    """(protocol settings, encoder settings) of an lc-sts run: the page's, overridden by ``options``
    ``settings`` (a dict) and ``max_length`` / ``dtype``."""
    unknown = set(ctx.options.get("settings", {})) - set(SEARCH_SETTINGS)
    if unknown:
        raise ValueError(f"unknown lc-sts setting(s) {sorted(unknown)}; valid: {', '.join(SEARCH_SETTINGS)}")
    encoder = {"max_length": int(ctx.options.get("max_length", 256)), "dtype": ctx.options.get("dtype", "float32")}
    return {**SEARCH_SETTINGS, **ctx.options.get("settings", {})}, encoder


def _lc_sts_run(ctx: PageContext) -> None:
    _check_options("lc-sts", ctx)
    settings, enc = _sts_settings(ctx)
    datasets = ctx.options.get("datasets") or [d for d in sts_page.ROW_ORDER if d in available_sts(ctx.data_dir)]
    combined = ctx.options.get("combined_splits", list(COMBINED_SPLITS))
    for model in ctx.options.get("models") or MODELS:
        identity = LayerEncoder(model, **enc).identity
        for dataset, split in [(d, s) for d in datasets for s in (None, "all") if s is None or d in combined]:
            data = load_sts(dataset, data_dir=ctx.data_dir, split=split)
            info = {"name": data.name, "split": data.split, "checksum": content_checksum(data)}
            for aggregation in sts_page.aggregations_for(dataset):
                key = sts_part_key(identity, enc, info, aggregation, settings)
                if ctx.store.load("lc-sts", sts_part_name(model, dataset, split, aggregation), key) is None:
                    _lc_sts_row(ctx, (model, dataset, split, aggregation), settings, enc, key)


def sts_part_name(model: str, dataset: str, split: str | None, aggregation: str) -> str:
    """An lc-sts part's name: model, data set (``-allsplits`` for the combined-splits protocol), aggregation."""
    return f"{Path(model).name}-{dataset}{'-allsplits' if split == 'all' else ''}-{aggregation}"


def _lc_sts_row(ctx: PageContext, which: tuple, settings: dict, enc: dict, key: dict) -> None:
    model, dataset, split, aggregation = which
    t0 = time.perf_counter()
    config = SearchConfig(model=model, dataset=dataset, split=split, aggregation=aggregation,
                          data_dir=ctx.data_dir, encoder_options=enc, **settings)
    result = run_search(config)
    result.seconds["wall"] = time.perf_counter() - t0
    result.environment = environment(list(ctx.command) or None)
    row = result.to_dict()
    row["params"] = {"model": model, "dataset": dataset, "split": split or "default", "aggregation": aggregation,
                     **{k: settings[k] for k in ("n_splits", "dev_size", "seed")}}
    name = sts_part_name(model, dataset, split, aggregation)
    load = [round(x, 2) for x in os.getloadavg()]
    ctx.store.save(Part("lc-sts", name, key, row, True, [run_entry(row["environment"], load)]))


def run_entry(env: dict, load_at_save: list[float] | None = None) -> dict:
    """One run-history entry of a part: when, by which command, load average at start and at save."""
    return {"started": env["date"], "command": env["command"],
            "load_at_start": env["machine"].get("load_average_1_5_15"), "load_at_save": load_at_save}


_OPTIONS = {"lc-sts": {"models", "datasets", "settings", "max_length", "dtype", "combined_splits"},
            "transfer": {"skip_mpnet", "skip_check", "jobs", "exact_tasks", "exact_outer", "tasks"}, "ablations": {"models", "jobs"},
            SPEED_PAGE: {"model", "tasks", "engines", "jobs"}}


def _check_options(page: str, ctx: PageContext) -> None:
    unknown = sorted(set(ctx.options) - _OPTIONS[page])
    if unknown:
        raise ValueError(f"unknown option(s) {unknown} for results page {page!r}; valid: "
                         f"{', '.join(sorted(_OPTIONS[page]))}")


def _lc_sts_render(ctx: PageContext) -> list[Path]:
    settings, enc = _sts_settings(ctx)
    rows = [STSRun.from_dict(p.payload) for p in _current(
        [p for p in ctx.store.parts("lc-sts")
         if _same_rows(p.key["protocol"], settings) and all(p.key[k] == v for k, v in enc.items())])]
    if not rows:
        raise FileNotFoundError(f"no lc-sts parts in {ctx.store.root}; run `layerwise results run lc-sts` first")
    md = ctx.output / "lc-sts.md"
    paths = {"markdown": md, "json": md.with_suffix(".json"), "plots": md.with_suffix("")}
    data_dirs = sorted({r.data.source.rsplit("/sts/", 1)[0] for r in rows})
    doc = sts_page.STSPageDoc(rows, environment(list(ctx.command) or None),
                              {**{k: settings[k] for k in ("n_splits", "dev_size", "seed")},
                               "data_dir": ", ".join(data_dirs)})
    sts_page.write_outputs(doc, paths)
    write_json(paths["json"], doc.to_dict())
    return [md, paths["json"], paths["plots"]]


#: Settings that only add to a row (the significance test, the LC (max) column): a part computed before they existed
#: still shows its numbers, its test cells saying "not tested"; a part computed with them is newer and wins.
_ADDED_ONLY = ("bootstrap", "max_pooling")


def _same_rows(stored: dict, settings: dict) -> bool:
    return ({k: v for k, v in stored.items() if k not in _ADDED_ONLY}
            == {k: v for k, v in settings.items() if k not in _ADDED_ONLY})


def _current(parts: list[Part]) -> list[Part]:
    """One part per name: where a part is stored under several keys, the most recently run one."""
    best: dict[str, Part] = {}
    for p in parts:
        started = (p.runs[-1].get("started") or "") if p.runs else ""
        have = best.get(p.name)
        if have is None or started >= ((have.runs[-1].get("started") or "") if have.runs else ""):
            best[p.name] = p
    return list(best.values())


# ---------------------------------------------------------------------------------------------- transfer

def _transfer_run(ctx: PageContext) -> None:
    _check_options("transfer", ctx)
    exact_outer = _exact_outer(ctx)  # checked before any work
    only = ctx.options.get("tasks")
    for model, tasks, screen_dim in TRANSFER_PLAN:
        tasks = tuple(t for t in tasks if only is None or t in only)
        if (ctx.options.get("skip_mpnet") and model == "all-mpnet-base-v2") or not tasks:
            continue
        protocol = TransferProtocol(screen_dim=screen_dim, bootstrap=TRANSFER_BOOTSTRAP)
        config = TransferRunConfig(model=model, tasks=tasks, protocol=protocol,
                                   n_jobs=int(ctx.options.get("jobs", 2)), data_dir=ctx.data_dir)
        t0 = time.perf_counter()
        run = run_transfer_tasks(config, ctx.store, command=list(ctx.command) or None)
        _save_last_run(ctx.store, run, time.perf_counter() - t0)
    for task in ctx.options.get("exact_tasks", []):  # the paper's exact protocol, heavy: only where asked
        config = TransferRunConfig(model=TRANSFER_PLAN[0][0], tasks=(task,), protocol=EXACT_TRANSFER,
                                   n_jobs=int(ctx.options.get("jobs", 2)), data_dir=ctx.data_dir,
                                   max_splits=exact_outer)
        run = run_transfer_tasks(config, ctx.store, command=list(ctx.command) or None)
        _save_exact_tests(ctx, run.model.name, canonical_task(task))
    if not ctx.options.get("skip_check"):
        check = ShortcutCheck(n_jobs=int(ctx.options.get("jobs", 2)), data_dir=ctx.data_dir)
        run_shortcut_check(check, ctx.store, environment(list(ctx.command) or None))


def _exact_outer(ctx: PageContext) -> int | None:
    """The ``exact_outer`` option: compute the exact protocol's first that many outer splits per task this run
    (None: all of them)."""
    k = ctx.options.get("exact_outer")
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= EXACT_TRANSFER.n_outer):
        raise ValueError(f"exact_outer={k!r} must be a whole number in 1..{EXACT_TRANSFER.n_outer} (outer splits of "
                         "the exact protocol computed per task this run), e.g. --option exact_outer=2")
    return k


def _save_last_run(store: ResultsStore, run, wall_seconds: float) -> None:
    """What this invocation cost for a model (wall time; per task it computed, encoding, protocol, layer-cache
    counts); the page shows it. One part per model and task list, replaced by each run that computed a task (a run
    that only found stored parts leaves the record of the last one that worked)."""
    computed = {t: run.tasks[t] for t in run.computed}
    if not computed:
        return
    record = {"model": run.model.name, "wall_seconds": wall_seconds, "environment": run.environment,
              "layerwise_home": os.environ.get("LAYERWISE_HOME", "(default)"), "git": git_state(),
              "tasks": {t: {"encode_seconds": v.encode_seconds, "protocol_seconds": v.protocol_seconds,
                            "cache": v.cache, "outer_splits": len(v.result.splits)} for t, v in computed.items()}}
    key = {"model": model_key(run.model), "tasks": sorted(run.tasks)}
    store.save(Part("transfer", f"last-run-{Path(run.model.name).name}", key, record, True, [run_entry(run.environment)]))


def _default_part(part: Part) -> bool:
    """A task part under the page's settings (a folder model is kept under the default protocol)."""
    protocols = {model: TransferProtocol(screen_dim=dim).to_dict() for model, _, dim in TRANSFER_PLAN}
    want = protocols.get(part.key["model"]["name"], TransferProtocol().to_dict())
    stored = {k: v for k, v in part.key["protocol"].items() if k != "bootstrap"}  # the test only adds a table
    return stored == want and part.key["max_length"] == 256 and part.key["dtype"] == "float32"


def _exact_part(part: Part) -> bool:
    """A task part run with the paper's exact protocol."""
    return part.key["protocol"] == EXACT_TRANSFER.to_dict()


def _save_exact_tests(ctx: PageContext, model: str, task: str, *, default_part=_default_part,
                      exact_part=_exact_part) -> None:
    """The exact protocol's LC against the default protocol's LC (same outer splits) and against the exact run's
    last-layer mean: paired bootstraps over the task's examples, stored beside the two runs they tested (each run's
    outputs digested, so the page shows the tests only while those runs are the page's)."""
    exact = transfer_runs(ctx.store, {}, exact_part).get(model)
    default = transfer_runs(ctx.store, {}, default_part).get(model)
    if exact is None or default is None or task not in exact.tasks or task not in default.tasks:
        logger.info("transfer page: no default %s run of %s to test the exact protocol against", task, model)
        return
    a, b = exact.tasks[task].result, default.tasks[task].result
    if not a.splits:
        return
    labels = load_transfer(task, data_dir=ctx.data_dir).labels
    n = len(a.splits)  # an exact run cut short (exact_outer) is compared on its first outer splits
    tests = {"lc_vs_default_lc": protocol_significance(a, b, labels, n_resamples=TRANSFER_BOOTSTRAP, splits=n),
             "lc_vs_last": protocol_significance(a, a, labels, n_resamples=TRANSFER_BOOTSTRAP, method_b="last",
                                                 splits=n)}
    payload = {"model": model, "task": task, "exact": correct_digest(a), "default": correct_digest(b), "tests": tests}
    ctx.store.save(Part(PAGE_TRANSFER, f"exact-test-{Path(model).name}-{task}",
                        {"model": model, "task": task, "bootstrap": TRANSFER_BOOTSTRAP, "seed": 0},
                        payload, True, [run_record(ctx.command)]))


def _transfer_render(ctx: PageContext) -> list[Path]:
    requested = {model: list(tasks) for model, tasks, _ in TRANSFER_PLAN}
    text, doc = render_transfer_page(ctx.store, requested, environment(list(ctx.command) or None), _default_part,
                                     _exact_part)
    return [write_text(ctx.output / "transfer.md", text), write_json(ctx.output / "transfer.json", doc)]


# ---------------------------------------------------------------------------------------------- transfer-speed

def _transfer_speed_run(ctx: PageContext) -> None:
    _check_options(SPEED_PAGE, ctx)
    o = ctx.options
    config = SpeedConfig(model=o.get("model", SpeedConfig.model), tasks=tuple(o.get("tasks", DEFAULT_TASKS)),
                         engines=tuple(o.get("engines", SpeedConfig.engines)), n_jobs=int(o.get("jobs", 2)),
                         data_dir=ctx.data_dir)
    run_transfer_speed(config, ctx.store, command=list(ctx.command) or None)


def _transfer_speed_render(ctx: PageContext) -> list[Path]:
    return [write_text(ctx.output / f"{SPEED_PAGE}.md", render_transfer_speed(ctx.store))]


# ---------------------------------------------------------------------------------------------- ablations

def _ablations_run(ctx: PageContext) -> None:
    _check_options("ablations", ctx)
    sts = tuple(d for d in ABLATION_STS if d in available_sts(ctx.data_dir))
    for model in ctx.options.get("models") or ("all-MiniLM-L6-v2",):
        config = AblationConfig(model=model, sts=sts, n_jobs=int(ctx.options.get("jobs", 2)), data_dir=ctx.data_dir)
        run_ablations(config, ctx.store, command=list(ctx.command) or None)


def ablation_results(store: ResultsStore) -> list[AblationResult]:
    """One AblationResult per model from the store's ``ablations`` parts (latest key per part)."""
    by_model: dict[str, AblationResult] = {}
    for part in sorted(_current(store.parts("ablations")), key=lambda p: p.runs[-1].get("started") or ""):
        p = AblationPart.from_payload(part.payload, where=f"ablations/{part.name}")
        identity = ModelIdentity.from_dict(p.model)
        res = by_model.setdefault(identity.name, AblationResult(identity, {}, p.environment))
        res.settings[p.kind] = p.settings
        res.environment = p.environment or res.environment
        res.block(p.kind)[p.name] = p
    for res in by_model.values():
        for kind in ("sts", "transfer", "limited"):
            block = res.block(kind)
            order = {"sts": ABLATION_STS, "transfer": AblationConfig.tasks,
                     "limited": AblationConfig.limited_tasks}[kind]
            res.__dict__[kind] = dict(sorted(block.items(), key=lambda kv: _order(kv[1], order)))
    return list(by_model.values())


def _order(p: AblationPart, order: tuple[str, ...]):
    return (order.index(p.name) if p.name in order else len(order), p.finished or "")


def _ablations_render(ctx: PageContext) -> list[Path]:
    out = ctx.output / "ablations.md"
    figures = out.with_suffix("")
    pages, written = [], [out]
    for result in ablation_results(ctx.store):
        paths = write_ablation_outputs(result, figures)
        rel = {k: f"{figures.name}/{Path(v).name}" for k, v in paths.items() if str(v).endswith(".png")}
        pages.append(render_ablation_markdown(result, rel).replace("\n## ", "\n### ")
                     .replace("# BERT-LC", "## BERT-LC", 1))
        written += list(paths.values())
    head = ["# BERT-LC ablations", "",
            "How many layers to combine, which layers matter, and how layer combination behaves with little "
            "training data (Hosseini et al. 2023, appendices D-E). Produced by `layerwise results run ablations` "
            f"from the parts in `{ctx.store.root}/ablations/`; raw numbers in `{figures.name}/*.json`.", ""]
    write_text(out, "\n".join(head) + "\n" + "\n".join(pages))
    return written


LC_STS = register(ResultsPage(
    name="lc-sts", method="lc", title="BERT-LC layer combination on the STS data sets", models=MODELS,
    data=sts_page.ROW_ORDER, grid={"aggregation": list(sts_page.AGGREGATION_ORDER)}, settings=SEARCH_SETTINGS,
    run=_lc_sts_run, render=_lc_sts_render))
TRANSFER = register(ResultsPage(
    name="transfer", method="lc", title="Transfer tasks: layer combination (BERT-LC) as classifier features",
    models=MODELS, data=DEFAULT_TASKS, grid={"plan": [list(x[:2]) for x in TRANSFER_PLAN]},
    settings={"protocol": TransferProtocol().to_dict(), "mpnet_screen_dim": 128},
    run=_transfer_run, render=_transfer_render))
TRANSFER_SPEED = register(ResultsPage(
    name=SPEED_PAGE, method="speed", title="Transfer protocol: speed against the earlier code, same results",
    models=("all-MiniLM-L6-v2",), data=DEFAULT_TASKS, grid={"engines": ["fast", "reference"]},
    settings={"protocol": TransferProtocol().to_dict()}, run=_transfer_speed_run, render=_transfer_speed_render,
    measures=("src/layerwise/methods/lc/transfer.py", "src/layerwise/methods/lc/screen.py",
              "src/layerwise/methods/lc/features.py", "src/layerwise/evaluation/classification.py",
              "src/layerwise/benchmarks/lc/transfer_run.py", "src/layerwise/benchmarks/lc/transfer_speed.py")))
ABLATIONS = register(ResultsPage(
    name="ablations", method="lc", title="BERT-LC ablations", models=("all-MiniLM-L6-v2",),
    data=ABLATION_STS + ("mr", "cr", "subj", "trec"), grid={"parts": ["sts", "transfer", "limited"]},
    settings=AblationConfig().settings(), run=_ablations_run, render=_ablations_render))
