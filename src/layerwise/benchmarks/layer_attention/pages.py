"""The ``layer-attention`` results page: declared once, run part by part, rendered from the store alone.

``ctx.options`` (all optional): ``grid`` = :class:`GridConfig` fields to override (tuples as lists are fine),
``train_encoder`` = False to leave missing encoder-trained runs listed as not run instead of training them.
"""

from __future__ import annotations

import logging
from dataclasses import fields
from pathlib import Path

from layerwise.benchmarks.layer_attention.attention_length import draw_length_figure
from layerwise.benchmarks.layer_attention.experiment import (
    PAGE_NAME,
    UNTOUCHED_SEARCH,
    run_encoder_runs,
    run_frozen_grid,
)
from layerwise.benchmarks.layer_attention.grid import GridConfig, RetrievalSettings, RunResult, run_name
from layerwise.benchmarks.layer_attention.report import (
    REFERENCE,
    PageRuns,
    draw_figure,
    render_markdown,
    summary,
)
from layerwise.benchmarks.page_parts import latest_by_name, part_cpus, provenance_lines, save_png
from layerwise.benchmarks.registry import PageContext, ResultsPage, register
from layerwise.benchmarks.significance_parts import STSComparison, load_gold
from layerwise.benchmarks.store import Part, ResultsStore
from layerwise.evaluation.significance import SignificanceResult
from layerwise.reports import write_json, write_text

logger = logging.getLogger(__name__)

__all__ = ["PAGE", "grid_config", "load_page_runs", "pooler_tests", "render", "run"]

NAME = PAGE_NAME
OPTIONS = ("grid", "train_encoder")


def grid_config(options: dict | None = None) -> GridConfig:
    """The page's grid with ``options["grid"]`` overrides; unknown fields are refused with the valid ones named."""
    bad = sorted(set(options or {}) - set(OPTIONS))
    if bad:
        raise ValueError(f"unknown layer-attention page options {bad}; valid: {', '.join(OPTIONS)}")
    over = dict((options or {}).get("grid", {}))
    known = {f.name for f in fields(GridConfig)}
    bad = sorted(set(over) - known)
    if bad:
        raise ValueError(f"unknown layer-attention grid settings {bad}; valid: {', '.join(sorted(known))}")
    if isinstance(over.get("retrieval"), dict):
        over["retrieval"] = RetrievalSettings(**{k: tuple(v) if isinstance(v, list) else v
                                                 for k, v in over["retrieval"].items()})
    over = {k: tuple(v) if isinstance(v, list) else v for k, v in over.items()}
    return GridConfig(**over)


def run(ctx: PageContext) -> None:
    """Compute every run of the grid that the store lacks (frozen grid first, then the encoder-trained runs)."""
    config = grid_config(ctx.options)
    if "frozen" in config.regimes:
        n = run_frozen_grid(config, ctx.store, data_dir=ctx.data_dir, command=ctx.command)
        logger.info("frozen grid: %d run(s) computed, the others reused from the store", n)
    if "encoder" in config.regimes:
        left = run_encoder_runs(config, ctx.store, data_dir=ctx.data_dir, command=ctx.command,
                                train=bool(ctx.options.get("train_encoder", True)))
        if left:
            logger.info("encoder-trained runs not run: %s", ", ".join(left))


def load_page_runs(ctx: PageContext):
    """The stored runs the page shows (one per grid cell), in grid order, with provenance and what is missing."""
    config = grid_config(ctx.options)
    parts = latest_by_name(ctx.store.parts(NAME))
    runs, used, not_run = [], [], {"frozen": [], "encoder": []}
    for regime in config.regimes:
        for obj, pooler, seed in config.runs(regime):
            part = parts.get(run_name(regime, obj, pooler, seed))
            if part is None:
                not_run[regime].append(f"{obj} / {pooler} / seed {seed}")
                continue
            runs.append(RunResult.from_payload(part.payload))
            used.append(part)
    model = used[0].key["model"]["name"] if used else config.model
    search = parts.get(UNTOUCHED_SEARCH) if "frozen" in config.regimes else None
    sets = list(runs[0].sts) if runs else []
    return PageRuns(config, model, runs, provenance_lines(used + ([search] if search else [])), not_run,
                    untouched_search=search.payload["rows"] if search else [],
                    tests=pooler_tests(ctx.store, runs, used, sets), machines=[part_cpus(p) for p in used])


def pooler_tests(store: ResultsStore, runs: list[RunResult], parts: list[Part],
                 sets: list[str]) -> dict[tuple[str, str, str], SignificanceResult | None]:
    """(regime, objective, pooler) -> the paired bootstrap of the pooler's average STS (mean over its seeds and the
    ``sets``) minus :data:`REFERENCE`'s of the same regime and objective; None where a side's runs (or the
    gold scores of their test sets) were stored without per-pair predictions. ``parts[i]`` holds ``runs[i]``."""
    cells: dict[tuple[str, str], list[tuple[RunResult, Part]]] = {}
    for run, part in zip(runs, parts, strict=True):
        cells.setdefault((run.regime, run.objective), []).append((run, part))
    out: dict[tuple[str, str, str], SignificanceResult | None] = {}
    for (regime, obj), members in cells.items():
        checksums = [p.key["data"]["sts"] for _, p in members]
        gold = load_gold(store, NAME, checksums[0]) if all(c == checksums[0] for c in checksums) else None
        comparison = STSComparison(gold, sets) if gold is not None and set(sets) <= set(gold) else None
        reference = [r.predictions for r, _ in members if r.pooler == REFERENCE]
        for pooler in dict.fromkeys(r.pooler for r, _ in members if r.pooler != REFERENCE):
            rows = [r.predictions for r, _ in members if r.pooler == pooler]
            out[(regime, obj, pooler)] = (comparison.test(pooler, rows, REFERENCE, reference)
                                          if comparison is not None else None)
    return out


def render(ctx: PageContext) -> list[Path]:
    """Write ``layer-attention.md``, ``layer-attention.json`` (summary), the frozen-grid figure and, once measured,
    the attention weights by sentence length (``layer-attention-length.png``)."""
    page = load_page_runs(ctx)
    out = Path(ctx.output)
    paths = [write_text(out / f"{NAME}.md", render_markdown(page)), write_json(out / f"{NAME}.json", summary(page))]
    if page.regime("frozen"):
        paths.append(save_png(draw_figure(page), out / f"{NAME}-frozen.png"))
    length = draw_length_figure(page.runs, page.config.objectives)
    if length is not None:
        paths.append(save_png(length, out / f"{NAME}-length.png"))
    return paths


PAGE = register(ResultsPage(
    name=NAME,
    method="layer_attention",
    title="Layer-wise attention pooling vs pooling baselines",
    models=(GridConfig.model,),
    data=("stsb", "sickr", "sts12", "sts13", "sts14", "sts15", "sts16", "stsb-dev", "wiki1m_head", "snli_devtest",
          "quora"),
    grid={"regimes": GridConfig.regimes, "objectives": GridConfig.objectives, "poolers": GridConfig.poolers,
          "frozen_seeds": GridConfig.frozen_seeds, "encoder_poolers": GridConfig.encoder_poolers,
          "encoder_seeds": GridConfig.encoder_seeds},
    settings={"steps": GridConfig.steps, "batch_size": GridConfig.batch_size, "max_length": GridConfig.max_length,
              "dtype": GridConfig.dtype, "retrieval": "Quora dev, exact + IVF, first seed of each searched pooler"},
    run=run,
    render=render,
))
