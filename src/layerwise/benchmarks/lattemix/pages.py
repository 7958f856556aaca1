"""The ``lattemix`` results page: declared once, run part by part, rendered from the store alone.

``ctx.options`` (optional): ``page`` = :class:`PageConfig` fields to override (e.g. ``{"models":
["all-MiniLM-L6-v2"], "run_sweep": False}``).
"""

from __future__ import annotations

import logging
from dataclasses import fields
from pathlib import Path

from layerwise.benchmarks.lattemix.experiment import PAGE_NAME, run_curve, run_main, run_sweep
from layerwise.benchmarks.lattemix.grid import FirstPCResult, LayerPoint, MainResult, PageConfig, SweepRow, variant_name
from layerwise.benchmarks.lattemix.page_report import (
    MAIN_BASELINE,
    SWEEP_BASELINE,
    SWEEP_TESTED,
    PageParts,
    draw_layers,
    render_markdown,
    summary,
)
from layerwise.benchmarks.page_parts import latest_by_name, provenance_lines, save_png
from layerwise.benchmarks.registry import PageContext, ResultsPage, register
from layerwise.benchmarks.significance_parts import STSComparison, load_gold
from layerwise.benchmarks.store import Part, ResultsStore
from layerwise.evaluation.significance import SignificanceResult
from layerwise.reports import write_json, write_text

logger = logging.getLogger(__name__)

__all__ = ["PAGE", "load_page_parts", "page_config", "page_tests", "render", "run"]

NAME = PAGE_NAME


def page_config(options: dict | None = None) -> PageConfig:
    bad = sorted(set(options or {}) - {"page"})
    if bad:
        raise ValueError(f"unknown lattemix page options {bad}; valid: page")
    over = dict((options or {}).get("page", {}))
    known = {f.name for f in fields(PageConfig)}
    bad = sorted(set(over) - known)
    if bad:
        raise ValueError(f"unknown lattemix page settings {bad}; valid: {', '.join(sorted(known))}")
    return PageConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in over.items()})


def run(ctx: PageContext) -> None:
    """Main table of every model, then the per-layer curve and the sweep of the first model: what the store lacks."""
    page = page_config(ctx.options)
    for model in page.models:
        done = run_main(page, ctx.store, model, data_dir=ctx.data_dir, command=ctx.command)
        logger.info("%s main table: %s", model, "computed" if done else "reused from the store")
    if page.curve:
        run_curve(page, ctx.store, page.models[0], data_dir=ctx.data_dir, command=ctx.command)
    if page.run_sweep:
        run_sweep(page, ctx.store, page.models[0], data_dir=ctx.data_dir, command=ctx.command)


def load_page_parts(ctx: PageContext):
    page = page_config(ctx.options)
    stored = latest_by_name(ctx.store.parts(NAME))
    first = Path(page.models[0]).name
    used = [stored[n] for n in (f"main-{Path(m).name}" for m in page.models) if n in stored]
    main = [MainResult.from_payload(p.payload) for p in used]
    layers = sorted((p for n, p in stored.items() if n.startswith(f"layer-{first}-")
                     and n.removeprefix(f"layer-{first}-").isdigit()), key=lambda p: p.key["layer"])
    sweep = [stored[n] for n in (f"sweep-{first}-{variant_name(v, c)}" for v, c in page.sweep) if n in stored]
    seed_from = layers or sweep
    pc = [stored[f"pc-{first}"]] if page.first_pc and f"pc-{first}" in stored else []
    parts = PageParts(main=main, layers=[LayerPoint(**p.payload) for p in layers],
                      sweep=[SweepRow(**p.payload) for p in sweep], small_sets=list(page.small_sets),
                      curve_seed=seed_from[0].key["seeds"][0] if seed_from else None,
                      provenance=provenance_lines(used + layers + sweep + pc),
                      first_pc=FirstPCResult(**pc[0].payload) if pc else None)
    parts.tests = page_tests(ctx.store, parts, used, sweep, pc)
    return parts


def _comparison(store: ResultsStore, parts: list[Part], sets: list[str]) -> STSComparison | None:
    """The comparison over ``sets`` with the gold scores the parts were scored on (None: none stored, or the parts
    read different data)."""
    sums = [p.key["data"]["eval"] for p in parts]
    gold = load_gold(store, NAME, sums[0]) if sums and all(x == sums[0] for x in sums) else None
    return STSComparison(gold, sets) if gold is not None and set(sets) <= set(gold) else None


def _seed_runs(per_set: dict) -> list[dict]:
    """set -> [per seed packed] as one run dict per seed ([] when not kept)."""
    n = min((len(v) for v in per_set.values()), default=0)
    return [{d: v[i] for d, v in per_set.items()} for i in range(n)]


def page_tests(store: ResultsStore, parts: PageParts, main_parts: list[Part], sweep_parts: list[Part],
               pc_parts: list[Part]) -> dict[tuple, SignificanceResult | None]:
    """Every comparison row against its baseline row (paired bootstrap; None: a side stored without predictions):
    ``("main", model, method)`` against mean pooling (avg over the table's sets and the row's seeds),
    ``("sweep", vary, change, metric)`` against the default row, ``("pc",)`` the first component removed against
    mean pooling without special tokens."""
    out: dict[tuple, SignificanceResult | None] = {}
    for main, part in zip(parts.main, main_parts, strict=True):
        cmp, base = _comparison(store, [part], list(main.data)), [main.baseline_predictions.get(MAIN_BASELINE, {})]
        rows = {m: [main.baseline_predictions.get(m, {})] for m in main.baselines if m != MAIN_BASELINE}
        rows |= {f"{k}/{m}": _seed_runs(run.predictions.get(m, {})) for k, run in main.runs.items() for m in run.scores}
        for method, runs in rows.items():
            out[("main", main.model["name"], method)] = cmp and cmp.test(method, runs, MAIN_BASELINE, base)
    default = next((r for r in parts.sweep if r.vary == SWEEP_BASELINE), None)
    cmp = _comparison(store, sweep_parts, parts.small_sets)
    for r in parts.sweep:
        for metric in SWEEP_TESTED:
            base = [{d: v[0] for d, v in default.predictions.get(metric, {}).items()}] if default else []
            runs = [{d: v[0] for d, v in r.predictions.get(metric, {}).items()}]
            out[("sweep", r.vary, str(r.change), metric)] = (
                cmp and default and cmp.test(f"{r.vary} {r.change} {metric}", runs, f"default {metric}", base))
    if parts.first_pc is not None:
        cmp, pred = _comparison(store, pc_parts, parts.small_sets), parts.first_pc.predictions
        out[("pc",)] = cmp and cmp.test("pc1 removed", [pred.get("mean_pc1_removed", {})], "mean", [pred.get("mean", {})])
    return out


def render(ctx: PageContext) -> list[Path]:
    """Write ``lattemix.md``, ``lattemix.json`` (summary) and ``lattemix-layers.png``."""
    parts = load_page_parts(ctx)
    out = Path(ctx.output)
    paths = [write_text(out / f"{NAME}.md", render_markdown(parts)), write_json(out / f"{NAME}.json", summary(parts))]
    if parts.layers:
        paths.append(save_png(draw_layers(parts), out / f"{NAME}-layers.png"))
    return paths


PAGE = register(ResultsPage(
    name=NAME,
    method="lattemix",
    title="Latte-Mix: zero-shot STS from mixtures of token latent distributions",
    models=PageConfig.models,
    data=(*PageConfig.sts_sets, "snli_devtest", "wiki1m_head"),
    grid={"kinds": PageConfig.kinds, "seeds": PageConfig.seeds, "layers": "every hidden state of the first model",
          "sweep": [f"{v}: {c or 'default'}" for v, c in PageConfig.sweep]},
    settings={"model_config": PageConfig.model_config.to_dict(), "train": PageConfig.train.to_dict(),
              "train_limit": PageConfig.train_limit, "layer_train_limit": PageConfig.layer_train_limit,
              "sweep_train_limit": PageConfig.sweep_train_limit, "max_length": PageConfig.max_length,
              "dtype": PageConfig.dtype, "aggregation": PageConfig.aggregation},
    run=run,
    render=render,
))
