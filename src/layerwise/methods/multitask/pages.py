"""The ``multitask`` results page: declared once, run part by part, rendered from the store alone.

``ctx.options`` (all optional): ``experiments`` (names, see :func:`~layerwise.methods.multitask.config.get_experiment`),
``seeds``, ``model``, ``overrides`` (MultitaskConfig fields applied to every experiment: ``epochs``, ``limit``...)
and ``checkpoints`` (folder of the trained models; large, not in the repository).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, fields
from pathlib import Path

from layerwise.encoders.registry import DEFAULT_MODEL
from layerwise.experiments.page_parts import provenance_lines, save_png
from layerwise.experiments.registry import PageContext, ResultsPage, register
from layerwise.methods.multitask.config import EXPERIMENTS, MultitaskConfig, get_experiment
from layerwise.methods.multitask.experiment import PAGE_NAME

logger = logging.getLogger(__name__)

__all__ = ["PAGE", "PageConfig", "page_config", "render", "run"]

NAME = PAGE_NAME
TITLE = "Multi-task fine-tuning: SST, Quora paraphrase and STS heads on one encoder, with a layer mix per task"


@dataclass(frozen=True)
class PageConfig:
    experiments: tuple[str, ...] = (*EXPERIMENTS, "BASELINE+MIX", "STS_PARA_HEAD_MOD+MIX", "NLI_TRIPLET+MIX",
                                    "BASELINE+SUBSET", "STS_PARA_HEAD_MOD+SUBSET")  # the nine, then layer-wise rows
    seeds: tuple[int, ...] = (0,)
    model: str = DEFAULT_MODEL
    overrides: tuple[tuple[str, object], ...] = ()  # MultitaskConfig fields for every experiment (the report's: none)
    checkpoints: str = "runs/multitask"  # trained model folders (large; not in the repo, not keyed)

    def configs(self) -> list[MultitaskConfig]:
        return [get_experiment(name, **dict(self.overrides)) for name in self.experiments]


def page_config(options: dict | None = None) -> PageConfig:
    """The page's settings with ``options`` overrides; unknown ones are refused with the valid ones named."""
    options = dict(options or {})
    known = {f.name for f in fields(PageConfig)}
    bad = sorted(set(options) - known)
    if bad:
        raise ValueError(f"unknown multitask page options {bad}; valid: {', '.join(sorted(known))}")
    over = dict(options.get("overrides", {}))
    valid = {f.name for f in fields(MultitaskConfig)} - {"name"}
    if set(over) - valid:
        raise ValueError(f"unknown MultitaskConfig overrides {sorted(set(over) - valid)}; valid: {sorted(valid)}")
    options["overrides"] = tuple(sorted(over.items()))
    options = {k: tuple(v) if isinstance(v, list) else v for k, v in options.items()}
    page = PageConfig(**options)
    page.configs()  # unknown experiment names fail here, before any work
    return page


def run(ctx: PageContext) -> None:
    """Train and score every (experiment, seed) the store lacks; each part is saved as soon as it is done."""
    from layerwise.methods.multitask.experiment import run_parts

    page = page_config(ctx.options)
    run_parts(page.configs(), page.seeds, ctx.store, model=page.model, checkpoints=page.checkpoints,
              data_dir=ctx.data_dir, command=ctx.command)


def load_page(ctx: PageContext):
    from layerwise.methods.multitask.experiment import stored_results
    from layerwise.methods.multitask.report import MultitaskPage

    page = page_config(ctx.options)
    results, used, missing = stored_results(ctx.store, list(page.experiments), page.seeds)
    model = results[0].model if results else page.model
    return MultitaskPage(TITLE, model, results, provenance_lines(used), missing)


def render(ctx: PageContext) -> list[Path]:
    """Write ``multitask.md``, ``multitask.json`` (summary) and ``multitask-layers.png`` (when +MIX rows exist)."""
    from layerwise.methods.multitask.report import draw_layer_weights, render_markdown, summary
    from layerwise.reports import write_json, write_text

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
    grid={"experiments": PageConfig.experiments, "seeds": PageConfig.seeds},
    settings={"config": MultitaskConfig().to_dict(), "checkpoint": "best dev overall score, evaluated every epoch"},
    run=run,
    render=render,
))
