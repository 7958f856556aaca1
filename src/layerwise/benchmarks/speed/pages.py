"""The speed benchmarks as results pages: ``layerwise results run search-speed`` (or ``encoding``, ``encoding-mpnet``,
``encode-engines``, ``ddp``) measures, stores the run as one part, and renders ``docs/results/<name>.md`` and its JSON.

A speed page's ``run`` always measures again (its numbers are of the code as it is; the part of the same settings is
replaced), with the benchmark's defaults; ``--option KEY=VALUE`` passes ``--KEY VALUE`` to the benchmark (``true``: the
bare flag, e.g. ``--option skip_real=true``). Each page declares the source paths it measures, so
``layerwise results list`` marks it stale when they change after the commit it ran on. ``render`` reads the stored
part only. The benchmarks also run alone (``python -m layerwise.benchmarks.speed.bench_search_speed ...``), writing
their page where ``--output`` says, without the store.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from layerwise.benchmarks.page_parts import latest_by_name, run_record
from layerwise.benchmarks.registry import PageContext, ResultsPage, register
from layerwise.benchmarks.speed import bench_ddp, bench_encode, bench_encode_engines, bench_search_speed
from layerwise.benchmarks.store import Part
from layerwise.reports import write_json, write_text

__all__ = ["SPEED_PAGES", "SpeedPage", "option_argv"]

PART = "run"  # a speed page has one part: its last run


@dataclass(frozen=True)
class SpeedPage:
    """A speed benchmark module (``main(argv)`` writing a page and its JSON, ``render(result)``) as a results page."""

    name: str
    module: ModuleType
    title: str
    models: tuple[str, ...]
    data: tuple[str, ...]
    measures: tuple[str, ...]  # the source paths its numbers depend on (not its rendering: render reads the store)
    argv: tuple[str, ...] = ()  # fixed arguments (another model, say)

    def run(self, ctx: PageContext) -> None:
        with tempfile.TemporaryDirectory(prefix=f"layerwise-{self.name}-") as tmp:
            out = Path(tmp) / f"{self.name}.md"
            self.module.main([*self.argv, *option_argv(ctx.options), "--output", str(out)])
            result = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
        key = {"benchmark": self.name, "parameters": result["parameters"]}
        ctx.store.save(Part(self.name, PART, key, result, True, [run_record(ctx.command)]))

    def render(self, ctx: PageContext) -> list[Path]:
        part = latest_by_name(ctx.store.parts(self.name)).get(PART)
        if part is None:
            raise ValueError(f"no stored run of the {self.name} page in {ctx.store.root}; measure it with "
                             f"`layerwise results run {self.name}`")
        return [write_text(ctx.output / f"{self.name}.md", self.module.render(part.payload)),
                write_json(ctx.output / f"{self.name}.json", part.payload)]

    def page(self) -> ResultsPage:
        return ResultsPage(name=self.name, method="speed", title=self.title, models=self.models, data=self.data,
                           grid={}, settings={"benchmark": self.module.__name__, "argv": list(self.argv)},
                           run=self.run, render=self.render, measures=self.measures)


def option_argv(options: dict) -> list[str]:
    """``{"skip_real": True, "repeats": 5}`` -> ``["--skip-real", "--repeats", "5"]`` (``False``: left out)."""
    argv: list[str] = []
    for key, value in options.items():
        flag = "--" + str(key).replace("_", "-")
        if value is True:
            argv.append(flag)
        elif value is not False and value is not None:
            argv += [flag, str(value)]
    return argv


_SPEED = "src/layerwise/benchmarks/speed"
SPEED_PAGES = (
    SpeedPage("search-speed", bench_search_speed, "Layer-subset search: speed and exactness against Method 2",
              ("all-MiniLM-L6-v2",), ("synthetic", "stsb"),
              ("src/layerwise/methods/lc/search.py", "src/layerwise/methods/lc/_subset_gram.py",
               "src/layerwise/evaluation/metrics.py", f"{_SPEED}/bench_search_speed.py")),
    SpeedPage("encoding", bench_encode, "Encoding every hidden state against sentence-transformers, and the cache",
              ("all-MiniLM-L6-v2",), ("stsb",),
              ("src/layerwise/encoders", "src/layerwise/cache", f"{_SPEED}/bench_encode.py")),
    SpeedPage("encoding-mpnet", bench_encode, "Encoding every hidden state against sentence-transformers (MPNet)",
              ("all-mpnet-base-v2",), ("stsb",),
              ("src/layerwise/encoders", "src/layerwise/cache", f"{_SPEED}/bench_encode.py"),
              argv=("--model", "all-mpnet-base-v2", "--n-sentences", "500")),
    SpeedPage("encode-engines", bench_encode_engines, "Corpus encoding: one process against Ray Data",
              ("all-MiniLM-L6-v2",), ("stsb",),
              ("src/layerwise/encode", "src/layerwise/encoders", f"{_SPEED}/bench_encode_engines.py")),
    SpeedPage("ddp", bench_ddp, "Training under torchrun: one process against two DDP processes",
              ("all-MiniLM-L6-v2",), ("stsb",),
              ("src/layerwise/training", "src/layerwise/methods/truncated", "src/layerwise/encoders",
               f"{_SPEED}/bench_ddp.py")),
)

PAGES = tuple(register(p.page()) for p in SPEED_PAGES)
