"""The ``tmft`` results page: declared once, run part by part into the store, rendered from the store alone.

``ctx.options`` (all optional) override :class:`TMFTPageConfig` fields, e.g. ``--option epochs=1
--option minilm_depths='[0,6]'`` or ``--option train=false`` (the analyses only); ``overrides`` holds
:class:`TMFTConfig` fields applied to every run (``batch_size``, ``lr``, ``max_length``, ``train_limit``, ``ws``,
``mlm``).

Order of work (so that a cut-off run leaves a useful partial page): the frontier and throughput of every model (minutes),
then TMFT seed 0 at every depth of the first model, LC-TMFT on the subset the first model's full-depth frontier chose
on dev, the WS and MLM pre-steps, the other seeds, the epoch check (1 and 10 epochs at two depths), the first model's
TMFT on SICK-R (the paper's second data set: trained on its train split, kept by trial, tested on test; seed 0 at
every depth, with the untrained frontier on SICK-R beside it), the second model's
depths (about 4x the first model's time per layer on CPU, so 1 epoch each), and last the paper's settings for the first
model (10 epochs, 5 seeds, every depth: about 13 h on 2 CPU cores, 10 min on an H100 in 8 shards). ``--option device=cuda`` trains
there; ``--option shard=i/n`` trains every n-th run from the i-th, so n processes (or machines) share one grid, each
saving its own parts into the store.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from layerwise.benchmarks.page_parts import provenance_lines, run_time_row, save_png
from layerwise.benchmarks.registry import PageContext, ResultsPage, register
from layerwise.benchmarks.sharding import check_device, check_shard, in_shard
from layerwise.benchmarks.truncated.analysis import Frontier, Throughput
from layerwise.benchmarks.truncated.experiment import (
    PAGE_NAME,
    SpeedSettings,
    frontier_part,
    frontier_part_name,
    result_from_payload,
    run_part_name,
    run_runs,
    stored,
    stored_gold,
    throughput_part,
)
from layerwise.benchmarks.truncated.figures import draw_cost, draw_layers, draw_speed
from layerwise.benchmarks.truncated.page_model import TMFTPage
from layerwise.benchmarks.truncated.report import render_markdown, summary
from layerwise.errors import UsageError
from layerwise.methods.truncated.config import PRE_STEPS, MLMConfig, TMFTConfig, WSConfig
from layerwise.reports import write_json, write_text

logger = logging.getLogger(__name__)

__all__ = ["PAGE", "TMFTPageConfig", "estimate_seconds", "page_config", "render", "run"]

TITLE = "Truncated model fine-tuning (TMFT): STS-B quality, size and speed per depth"


@dataclass(frozen=True)
class TMFTPageConfig:
    """The page's grid. Every TMFT run is a :class:`TMFTConfig` built by :meth:`configs`."""

    minilm: str = "all-MiniLM-L6-v2"  # the first model: every depth, every pre-step, several seeds
    minilm_depths: tuple[int, ...] = (0, 1, 2, 3, 4, 5, 6)
    pre_steps: tuple[str, ...] = PRE_STEPS  # for the first model
    seeds: tuple[int, ...] = (0, 1, 2)  # TMFT (pre-step none) of the first model
    pre_step_seeds: tuple[int, ...] = (0,)  # WS + TMFT and MLM + TMFT
    mpnet: str | None = "all-mpnet-base-v2"  # the second model: TMFT only; None: left out
    mpnet_depths: tuple[int, ...] = (0, 3, 6, 9, 12)
    mpnet_seeds: tuple[int, ...] = (0,)
    epochs: int = 3  # fewer than the paper's 10 (CPU time); the epoch check below tests the ranking
    mpnet_epochs: int = 1  # the second model's runs cost about 4x per layer: 1 epoch (the check covers 1 epoch too)
    check_depths: tuple[int, ...] = (3, 6)  # first model, TMFT seed 0, at each of check_epochs too
    check_epochs: tuple[int, ...] = (1, 10)
    # the first model's TMFT on SICK-R (train, checkpoint by trial, scored on test), beside its untrained frontier
    # there: the paper's second data set; empty: left out
    sickr_depths: tuple[int, ...] = (0, 1, 2, 3, 4, 5, 6)
    sickr_seeds: tuple[int, ...] = (0,)
    lc_tmft: bool = True  # TMFT on the subset chosen by the first model's full-depth frontier
    lc_seeds: tuple[int, ...] = (0,)
    overrides: tuple[tuple[str, object], ...] = ()  # TMFTConfig fields for every run
    throughput_sentences: int = 1000  # distinct STS-B test sentences timed
    throughput_batch_size: int = 32
    throughput_repeats: int = 3
    # the paper's settings for the first model's TMFT: paper_epochs and every seed of paper_seeds at paper_depths,
    # trained after everything else (about 13 h on a 2-core CPU at the 3-epoch runs' per-epoch times; sized for a GPU: --option device=cuda)
    paper_epochs: int = 10
    paper_seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    paper_depths: tuple[int, ...] = (6, 3, 5, 4, 2, 1, 0)  # in the order they train: the epoch check's depths first
    train: bool = True  # False: only the frontier and throughput parts (minutes), no TMFT run
    device: str | None = None  # where the TMFT runs train ("cuda", "cuda:1"); part of no result's key
    shard: str | None = None  # "i/n": train only runs i, i+n, i+2n... of the grid (n processes or machines share it)
    checkpoints: str = "runs/tmft"  # checkpoints and kept models (large; not in the repo; one per setting)

    def models(self) -> list[tuple[str, tuple[int, ...]]]:
        out = [(self.minilm, self.minilm_depths)]
        return out + ([(self.mpnet, self.mpnet_depths)] if self.mpnet else [])

    def base(self, model: str, layers, pre_step: str, seed: int, epochs: int | None = None) -> TMFTConfig:
        over = dict(self.overrides)
        if isinstance(over.get("ws"), dict):
            over["ws"] = WSConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in over["ws"].items()})
        if isinstance(over.get("mlm"), dict):
            over["mlm"] = MLMConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in over["mlm"].items()})
        return TMFTConfig(model=model, layers=tuple(layers), pre_step=pre_step, seed=seed,
                          epochs=self.epochs if epochs is None else epochs, **over)

    def configs(self, lc_layers: tuple[int, ...] | None = None) -> list[TMFTConfig]:
        """Every TMFT run in the order it is computed; ``lc_layers`` (the frontier's choice) adds LC-TMFT."""
        m, out = self.minilm, []
        out += [self.base(m, (d,), "none", self.seeds[0]) for d in self.minilm_depths]
        if self.lc_tmft and lc_layers is not None:
            out += [self.base(m, lc_layers, "none", s) for s in self.lc_seeds]
        out += [self.base(m, (d,), p, s) for p in self.pre_steps if p != "none" for s in self.pre_step_seeds
                for d in self.minilm_depths]
        out += [self.base(m, (d,), "none", s) for s in self.seeds[1:] for d in self.minilm_depths]
        out += [self.base(m, (d,), "none", self.seeds[0], e) for e in self.check_epochs if e != self.epochs
                for d in self.check_depths]
        out += [replace(self.base(m, (d,), "none", s), dataset="sickr") for s in self.sickr_seeds
                for d in self.sickr_depths]
        if self.mpnet:  # the costliest runs on CPU (about 4x the first model's time per layer)
            out += [self.base(self.mpnet, (d,), "none", s, self.mpnet_epochs) for s in self.mpnet_seeds
                    for d in self.mpnet_depths]
        out += [self.base(m, (d,), "none", s, self.paper_epochs) for d in self.paper_depths for s in self.paper_seeds]
        return list(dict.fromkeys(out))

    def shard_of(self, configs: list[TMFTConfig]) -> list[TMFTConfig]:
        """The runs this process trains where ``shard`` is "i/n" (else all): every n-th group from the i-th, a group
        being one run, or every MLM + TMFT run of one seed (they share one MLM-adapted encoder, trained once)."""

        def group(c: TMFTConfig):
            return ("mlm", c.model, c.seed) if c.pre_step == "mlm" else c

        return in_shard(configs, self.shard, group)


def page_config(options: dict | None = None) -> TMFTPageConfig:
    """The page's settings with ``options`` overrides; unknown ones are refused with the valid ones named."""
    options = dict(options or {})
    known = {f.name for f in fields(TMFTPageConfig)}
    bad = sorted(set(options) - known)
    if bad:
        raise ValueError(f"unknown tmft page options {bad}; valid: {', '.join(sorted(known))}")
    over = dict(options.get("overrides", {}))
    valid = {f.name for f in fields(TMFTConfig)} - {"model", "layers", "pre_step", "seed", "epochs"}
    if set(over) - valid:
        raise ValueError(f"unknown TMFTConfig overrides {sorted(set(over) - valid)}; valid: {sorted(valid)}")
    options["overrides"] = tuple(sorted(over.items()))
    options = {k: tuple(v) if isinstance(v, list) else v for k, v in options.items()}
    if isinstance(options.get("check_epochs"), int):
        options["check_epochs"] = (options["check_epochs"],)
    page = TMFTPageConfig(**options)
    bad_steps = [p for p in page.pre_steps if p not in PRE_STEPS]
    epochs = (page.epochs, page.mpnet_epochs, *page.check_epochs)
    if bad_steps or not page.seeds or min(epochs) < 1:
        raise ValueError(f"tmft page: pre_steps {page.pre_steps} must be among {PRE_STEPS}, seeds non-empty and "
                         f"every epoch count >= 1 (got seeds {page.seeds}, epochs {page.epochs}, mpnet_epochs "
                         f"{page.mpnet_epochs}, check_epochs {page.check_epochs})")
    check_shard(PAGE_NAME, page.shard)
    check_device(PAGE_NAME, page.device)
    if page.paper_epochs < 1 or not page.paper_seeds:
        raise ValueError(f"tmft page: paper_epochs must be >= 1 and paper_seeds non-empty (got {page.paper_epochs}, "
                         f"{page.paper_seeds})")
    page.configs((0,))  # every TMFTConfig checked here, before any work
    return page


def run(ctx: PageContext) -> None:
    """Compute every part the store lacks, in the order of the module docstring; each saved when done. A shard
    (``--option shard=i/n``) only trains its runs: the frontier and throughput belong to the unsharded run."""
    page = page_config(ctx.options)
    if page.shard is not None:
        if page.train:
            run_runs(page.shard_of(page.configs(_stored_lc(ctx.store, page))), ctx.store,
                     checkpoints=Path(page.checkpoints), data_dir=ctx.data_dir, command=ctx.command,
                     device=page.device)
        return
    max_length = page.base(page.minilm, (0,), "none", 0).max_length
    frontiers = {}
    for model, depths in page.models():
        frontiers[model] = frontier_part(model, ctx.store, data_dir=ctx.data_dir, max_length=max_length,
                                         command=ctx.command)
        speed = SpeedSettings(page.throughput_sentences, page.throughput_batch_size, page.throughput_repeats,
                              max_length)
        throughput_part(model, depths, ctx.store, data_dir=ctx.data_dir, settings=speed, command=ctx.command)
    if page.sickr_depths:
        frontier_part(page.minilm, ctx.store, data_dir=ctx.data_dir, max_length=max_length, command=ctx.command,
                      dataset="sickr")
    if not page.train:
        return
    lc = frontiers[page.minilm].rows[-1].layers
    run_runs(page.configs(lc), ctx.store, checkpoints=Path(page.checkpoints), data_dir=ctx.data_dir,
             command=ctx.command, device=page.device)


def _stored_lc(store, page: TMFTPageConfig) -> tuple[int, ...]:
    """The LC-TMFT subset from the stored frontier of the first model (a shard computes no frontier)."""
    part = stored(store).get(f"frontier-{Path(page.minilm).name}")
    if part is None:
        raise UsageError(f"tmft page: shard={page.shard!r} needs the frontier of {page.minilm} in the store; run "
                         "`layerwise results run tmft --option train=false` once without a shard first")
    return tuple(Frontier.from_dict(part.payload).rows[-1].layers)


def load_page(ctx: PageContext):
    """The :class:`~layerwise.benchmarks.truncated.report.TMFTPage` from the store alone (missing parts listed)."""
    page = page_config(ctx.options)
    parts = stored(ctx.store)
    used, missing, frontiers, speeds, loads = [], [], {}, {}, {}
    for model, _ in page.models():
        name = Path(model).name
        for kind, into, cls in (("frontier", frontiers, Frontier), ("throughput", speeds, Throughput)):
            part = parts.get(f"{kind}-{name}")
            if part is None:
                missing.append(f"{kind}-{name}")
            else:
                into[name] = cls.from_dict(part.payload)
                used.append(part)
                if kind == "throughput":
                    env = part.runs[-1].get("environment", {}) if part.runs else {}
                    loads[name] = env.get("machine", {}).get("load_average_1_5_15")
    minilm = Path(page.minilm).name
    others = {}  # the first model's frontier on another data set, by the name its runs group under
    if page.sickr_depths:
        part = parts.get(frontier_part_name(page.minilm, "sickr"))
        if part is None:
            missing.append(frontier_part_name(page.minilm, "sickr"))
        else:
            others[f"{minilm} on sickr"] = Frontier.from_dict(part.payload)
            used.append(part)
    lc = frontiers[minilm].rows[-1].layers if minilm in frontiers else None
    results, done, todo = [], [], []
    for config in page.configs(lc):
        part = parts.get(run_part_name(config))
        if part is None:
            missing.append(run_part_name(config))
            todo.append(config)
            continue
        results.append(result_from_payload(part.payload))
        used.append(part)
        done.append((config, float(part.payload.get("wall_seconds", 0.0)), part.payload.get("device", "cpu")))
    estimates = {}  # model -> the estimated wall seconds of each run not stored yet (None: nothing comparable)
    for config in todo:
        estimates.setdefault(Path(config.model).name, []).append(estimate_seconds(config, done, page.device or "cpu"))
    if page.lc_tmft and lc is None:
        missing.append(f"LC-TMFT runs of {minilm} (need frontier-{minilm} for the subset)")
    seconds = {p.name: float(p.payload.get("wall_seconds", 0.0)) for p in used}
    run_loads = {p.name: run_time_row(p, p.payload) for p in used if p.name.startswith("run-")}
    run_devices = {p.name: p.payload.get("device", "cpu") for p in used if p.name.startswith("run-")}
    return TMFTPage(TITLE, asdict(page), results, frontiers, speeds, lc, missing, provenance_lines(used), seconds,
                    loads, run_loads, sorted(set(run_devices.values())), estimates,
                    gold=stored_gold(ctx.store, results), other_frontiers=others, run_devices=run_devices)


def estimate_seconds(config: TMFTConfig, done: list[tuple[TMFTConfig, float, str]], device: str = "cpu"
                     ) -> float | None:
    """About how long a run not stored yet takes on ``device`` (where this page's runs train): the median wall
    seconds per epoch of the stored runs of the same model and layers (the same pre-step, else none) on that device,
    times its epochs; ``None`` when no such run is stored there (a GPU's times say nothing of a CPU's)."""
    import numpy as np

    for same in (config.pre_step, "none"):
        rates = [wall / c.epochs for c, wall, where in done
                 if (c.model, c.layers, c.pre_step) == (config.model, config.layers, same) and where == device]
        if rates:
            return float(np.median(rates)) * config.epochs
    return None


def render(ctx: PageContext) -> list[Path]:
    """Write ``tmft.md``, ``tmft.json`` and the figures ``tmft-layers.png``, ``tmft-cost.png``, ``tmft-speed.png``."""
    page = load_page(ctx)
    out = Path(ctx.output)
    paths = [write_text(out / f"{PAGE_NAME}.md", render_markdown(page)),
             write_json(out / f"{PAGE_NAME}.json", summary(page))]
    for suffix, draw in (("layers", draw_layers), ("cost", draw_cost), ("speed", draw_speed)):
        paths.append(save_png(draw(page), out / f"{PAGE_NAME}-{suffix}.png"))
    return paths


def _page_settings() -> dict:
    c = TMFTPageConfig()
    return {"grid": {k: v for k, v in asdict(c).items() if k not in ("checkpoints", "train", "device", "shard")},
            "config": replace(TMFTConfig(), model="(per run)").to_dict(),
            "checkpoint": "best STS-B dev Spearman, evaluated every epoch"}


PAGE = register(ResultsPage(
    name=PAGE_NAME,
    method="truncated",
    title=TITLE,
    models=tuple(m for m in (TMFTPageConfig.minilm, TMFTPageConfig.mpnet) if m),
    data=("stsb", "sickr", "wordsim", "snli_devtest", "wiki1m_head"),
    grid={"minilm_depths": TMFTPageConfig.minilm_depths, "mpnet_depths": TMFTPageConfig.mpnet_depths,
          "sickr": {"depths": TMFTPageConfig.sickr_depths, "seeds": TMFTPageConfig.sickr_seeds},
          "pre_steps": TMFTPageConfig.pre_steps, "seeds": TMFTPageConfig.seeds, "epochs": TMFTPageConfig.epochs,
          "check": {"depths": TMFTPageConfig.check_depths, "epochs": TMFTPageConfig.check_epochs},
          "paper": {"depths": TMFTPageConfig.paper_depths, "seeds": TMFTPageConfig.paper_seeds,
                    "epochs": TMFTPageConfig.paper_epochs}},
    settings=_page_settings(),
    run=run,
    render=render,
))
