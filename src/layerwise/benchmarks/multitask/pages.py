"""The ``multitask`` results page: declared once, run part by part, rendered from the store alone.

``ctx.options`` (all optional): ``experiments`` (names, see :func:`~layerwise.methods.multitask.config.get_experiment`),
``seeds``, ``model``, ``overrides`` (MultitaskConfig fields applied to every experiment: ``epochs``, ``limit``...)
and ``checkpoints`` (folder of the trained models; large, not in the repository). ``device`` ("cuda") is where the
runs train, and ``shard="i/n"`` trains only every n-th run from the i-th (:mod:`layerwise.benchmarks.sharding`), so
n processes share the page; the best experiment's extra seeds are known only once every first seed is stored, so a
sharded page is run twice (the second pass trains them).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, fields
from pathlib import Path

from layerwise.benchmarks.multitask.experiment import (
    PAGE_NAME,
    TRAINING_DATA,
    run_parts,
    stored_gold,
    stored_results,
    training_data_part,
)
from layerwise.benchmarks.multitask.findings import CLAIMS, best_by_dev
from layerwise.benchmarks.multitask.report import MultitaskPage, draw_layer_weights, render_markdown, summary
from layerwise.benchmarks.multitask.significance import ExperimentTests
from layerwise.benchmarks.page_parts import latest_by_name, provenance_lines, run_time_row, save_png
from layerwise.benchmarks.registry import PageContext, ResultsPage, register
from layerwise.benchmarks.sharding import check_device, check_shard, in_shard
from layerwise.encoders.registry import DEFAULT_MODEL
from layerwise.methods.multitask.config import EXPERIMENTS, MultitaskConfig, get_experiment
from layerwise.methods.multitask.run import RunControl
from layerwise.reports import write_json, write_text

logger = logging.getLogger(__name__)

__all__ = ["PAGE", "PageConfig", "claim_tests", "page_config", "render", "run"]

NAME = PAGE_NAME
BEST = "best"  # in PageConfig.more_seeds_for: the experiment with the best dev overall score
TITLE = "Multi-task fine-tuning: SST, Quora paraphrase and STS heads on one encoder, with a layer mix per task"


@dataclass(frozen=True)
class PageConfig:
    experiments: tuple[str, ...] = (*EXPERIMENTS, "BASELINE+MIX", "STS_PARA_HEAD_MOD+MIX", "NLI_TRIPLET+MIX",
                                    "BASELINE+SUBSET", "STS_PARA_HEAD_MOD+SUBSET")  # the nine, then layer-wise rows
    seeds: tuple[int, ...] = (0,)  # every experiment
    more_seeds: tuple[int, ...] = (1,)  # also for the experiments in more_seeds_for
    more_seeds_for: tuple[str, ...] = ("BASELINE", "BASELINE+MIX", BEST)  # BEST: the best dev overall at `seeds`
    model: str = DEFAULT_MODEL
    # MultitaskConfig fields for every experiment. The library's default: 10 epochs over all the training data (the
    # report does not state its epoch count); sized for a 2-core CPU here: 1 epoch over a seeded sample of at most
    # 4,000 training examples per task (also when the runs train on a GPU: --option device=cuda).
    overrides: tuple[tuple[str, object], ...] = (("epochs", 1), ("limit", 4000))
    checkpoints: str = "runs/multitask"  # trained model folders (large; not in the repo; one per setting)
    # the report's protocols where this library's default differs, at ``seeds``, trained after everything else
    # (never counted for the best experiment): SST_TO_STS with the encoder frozen after PARA and STS, and the NLI
    # contrastive objective at temperature 1.0 (Eq. 3 as written), FREEZE_SST on the cosine STS head and |u - v|
    # PARA features (the heads of the report's later experiments; FREEZE_SST keeps BASELINE's linear STS head)
    paper_protocols: tuple[str, ...] = ("SST_TO_STS+FROZEN", "NLI_CONTRASTIVE+TAU1", "FREEZE_SST+HEADMOD")
    device: str | None = None  # where the runs train ("cuda", "cuda:1"; None: cpu); part of no result's key
    shard: str | None = None  # "i/n": train only runs i, i+n, i+2n... of the page (n processes share it)

    def configs(self) -> list[MultitaskConfig]:
        return [get_experiment(name, **dict(self.overrides)) for name in self.experiments]

    def paper_configs(self) -> list[MultitaskConfig]:
        return [get_experiment(name, **dict(self.overrides)) for name in self.paper_protocols]

    def run_order(self) -> list[MultitaskConfig]:
        """:meth:`configs` in the order they are trained: BASELINE and BASELINE+MIX first (the layer-mix question
        needs both, and a cut-off run then leaves that comparison on the page), the rest in page order."""
        first = [n for n in ("BASELINE", "BASELINE+MIX") if n in self.experiments]
        names = first + [n for n in self.experiments if n not in first]
        return [get_experiment(name, **dict(self.overrides)) for name in names]

    def extra(self, best: str | None) -> list[MultitaskConfig]:
        """The experiments run with ``more_seeds`` too (``BEST`` resolved to ``best``; left out while unknown)."""
        names = [best if n == BEST else n for n in self.more_seeds_for]
        return [get_experiment(n, **dict(self.overrides)) for n in dict.fromkeys(names) if n in self.experiments]


def page_config(options: dict | None = None) -> PageConfig:
    """The page's settings with ``options`` overrides; unknown ones are refused with the valid ones named."""
    options = dict(options or {})
    known = {f.name for f in fields(PageConfig)}
    bad = sorted(set(options) - known)
    if bad:
        raise ValueError(f"unknown multitask page options {bad}; valid: {', '.join(sorted(known))}")
    over = {**dict(PageConfig.overrides), **dict(options.get("overrides", {}))}
    valid = {f.name for f in fields(MultitaskConfig)} - {"name"}
    if set(over) - valid:
        raise ValueError(f"unknown MultitaskConfig overrides {sorted(set(over) - valid)}; valid: {sorted(valid)}")
    options["overrides"] = tuple(sorted(over.items()))
    options = {k: tuple(v) if isinstance(v, list) else v for k, v in options.items()}
    page = PageConfig(**options)
    check_shard(NAME, page.shard)
    check_device(NAME, page.device)
    page.configs(), page.paper_configs()  # unknown experiment names fail here, before any work
    stray = [n for n in page.more_seeds_for if n != BEST and n not in page.experiments]
    if stray and "more_seeds_for" in options:  # the default list is cut to the page's experiments (extra())
        raise ValueError(f"more_seeds_for names {stray}, which are not among the page's experiments; valid: "
                         f"{', '.join(page.experiments)} or {BEST!r}")
    return page


def best_experiment(page: PageConfig, results) -> str | None:
    """The experiment with the best mean dev overall score over ``page.seeds`` (None until every one is stored)."""
    done = {n: [r for r in results if r.config["name"] == n and r.seed in page.seeds] for n in page.experiments}
    if any(len(v) < len(page.seeds) for v in done.values()):
        return None
    return best_by_dev(done)


def run(ctx: PageContext) -> None:
    """Train and score every (experiment, seed) the store lacks, in :func:`planned_runs` order (this shard's share
    of it where ``shard`` is set); each part is saved as soon as it is done."""
    page = page_config(ctx.options)
    training_data_part(page.model, ctx.store, command=ctx.command)
    common = dict(model=page.model, checkpoints=page.checkpoints, data_dir=ctx.data_dir, command=ctx.command,
                  control=RunControl(device=page.device))
    planned = planned_runs(page, ctx.store)
    for config, seed in in_shard(planned, page.shard):
        run_parts([config], [seed], ctx.store, **common)
    if page.shard is None:  # the best experiment's extra seeds, known once every first seed is stored
        seen = {(c.name, s) for c, s in planned}
        for config, seed in planned_runs(page, ctx.store):
            if (config.name, seed) not in seen:
                run_parts([config], [seed], ctx.store, **common)


def planned_runs(page: PageConfig, store) -> list[tuple[MultitaskConfig, int]]:
    """Every (experiment, seed) of the page in the order it is trained: every experiment at ``seeds``
    (:meth:`PageConfig.run_order`), the extra seeds (the best experiment's only once every first seed is stored),
    then the report's protocols. Stored runs are listed too (run_parts reuses them), so that every shard
    partitions the same list."""
    out = [(c, s) for c in page.run_order() for s in page.seeds]
    more = [s for s in page.more_seeds if s not in page.seeds]
    out += [(c, s) for c in page.extra(best_experiment(page, _first_results(page, store))) for s in more]
    return out + [(c, s) for c in page.paper_configs() for s in page.seeds]


def _first_results(page: PageConfig, store):
    return stored_results(store, list(page.experiments), page.seeds)[0]


def load_page(ctx: PageContext):
    page = page_config(ctx.options)
    results, used, missing = stored_results(ctx.store, list(page.experiments), page.seeds)
    more = [s for s in page.more_seeds if s not in page.seeds]
    best = best_experiment(page, results)
    if more:
        extra = stored_results(ctx.store, [c.name for c in page.extra(best)], more)
        results, used, missing = results + extra[0], used + extra[1], missing + extra[2]
        if best is None and BEST in page.more_seeds_for:
            missing.append(f"seeds {more} of the best experiment (chosen once every experiment has seeds {page.seeds})")
    paper = stored_results(ctx.store, list(page.paper_protocols), page.seeds)
    results, used, missing = results + paper[0], used + paper[1], missing + paper[2]
    order = [*page.experiments, *page.paper_protocols]
    results.sort(key=lambda r: (order.index(r.config["name"]), r.seed))
    model = results[0].model if results else page.model
    times = {p.name: run_time_row(p, p.payload.get("timing", {})) for p in used}
    devices = sorted({p.payload.get("timing", {}).get("device", "cpu") for p in used})
    declared = latest_by_name(ctx.store.parts(NAME)).get(TRAINING_DATA)
    return MultitaskPage(TITLE, model, results, provenance_lines(used), missing, times, devices,
                         None if declared is None else declared.payload["files"], claim_tests(ctx.store, results))


def claim_tests(store, results, claims=CLAIMS) -> dict:
    """(experiment, reference) -> score -> the paired test of each claim whose two experiments are stored (the
    targeted scores and overall; None: not tested), from the runs' test outputs and the stored STS gold."""
    runs: dict[str, list] = {}
    for r in results:
        runs.setdefault(r.config["name"], []).append(r)
    tests = ExperimentTests(runs, lambda checksum: stored_gold(store, checksum))
    return {(c.experiment, c.reference): tests.claim_tests(c.experiment, c.reference, c.scores)
            for c in claims if c.experiment in runs and c.reference in runs}


def render(ctx: PageContext) -> list[Path]:
    """Write ``multitask.md``, ``multitask.json`` (summary) and ``multitask-layers.png`` (when +MIX rows exist)."""
    page = load_page(ctx)
    out = Path(ctx.output)
    paths = [write_text(out / f"{NAME}.md", render_markdown(page)), write_json(out / f"{NAME}.json", summary(page))]
    if any(r.layer_weights for r in page.results):
        paths.append(save_png(draw_layer_weights(page), out / f"{NAME}-layers.png"))
    return paths


PAGE = register(ResultsPage(
    name=NAME,
    method="multitask",
    title=TITLE,
    models=(PageConfig.model,),
    data=("sst5", "quora", "stsb", "snli_devtest"),
    grid={"experiments": PageConfig.experiments, "seeds": PageConfig.seeds, "more_seeds": PageConfig.more_seeds,
          "more_seeds_for": PageConfig.more_seeds_for, "overrides": dict(PageConfig.overrides),
          "paper_protocols": PageConfig.paper_protocols},
    settings={"config": MultitaskConfig().to_dict(), "checkpoint": "best dev overall score, evaluated every epoch"},
    run=run,
    render=render,
))
