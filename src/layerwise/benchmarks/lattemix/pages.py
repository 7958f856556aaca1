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
from layerwise.benchmarks.lattemix.page_report import PageParts, draw_layers, render_markdown, summary
from layerwise.benchmarks.page_parts import latest_by_name, provenance_lines, save_png
from layerwise.benchmarks.registry import PageContext, ResultsPage, register
from layerwise.reports import write_json, write_text

logger = logging.getLogger(__name__)

__all__ = ["PAGE", "load_page_parts", "page_config", "render", "run"]

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
    return PageParts(main=main, layers=[LayerPoint(**p.payload) for p in layers],
                     sweep=[SweepRow(**p.payload) for p in sweep], small_sets=list(page.small_sets),
                     curve_seed=seed_from[0].key["seeds"][0] if seed_from else None,
                     provenance=provenance_lines(used + layers + sweep + pc),
                     first_pc=FirstPCResult(**pc[0].payload) if pc else None)


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
