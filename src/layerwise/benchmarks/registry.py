"""The registry of results pages: every page in ``docs/results/`` is declared once, by its
benchmark (``benchmarks/<paper>/pages.py``; :mod:`layerwise.benchmarks.catalog` imports them all).

A :class:`ResultsPage` names what the page covers (method, models, data, grid, settings) and two functions:
``run`` computes the parts that the store lacks (resumable: each part is saved as soon as it is done) and
``render`` writes the page (markdown, figures, a JSON summary) from the store alone, never computing anything.
``layerwise results run NAME`` / ``layerwise results render NAME`` call them. ``measures`` names the source paths
whose code the page's numbers depend on: ``layerwise results list`` marks the page stale when one of them changed
after the commit its parts were computed on. ``renders`` names the modules that only write the page from its store:
every render runs them again, so a change there leaves the stored numbers as they are and marks nothing stale; a
module of the page's benchmark package may say so itself instead (``RENDER_ONLY = True``,
:func:`~layerwise.benchmarks.measured_code.render_only_modules`), so that a new one needs no change to the page's
declaration (which its run reads, and whose change would mark every stored part stale).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from layerwise.benchmarks.measured_code import library_imports, render_only_modules
from layerwise.benchmarks.page_parts import code_line, latest_by_name
from layerwise.benchmarks.store import Part, ResultsStore
from layerwise.reports import write_text

__all__ = ["FOOTER", "PAGES", "SHARED_SOURCES", "PageContext", "ResultsPage", "register", "render_page"]

#: The conventions every results page shares, stated once at the foot of each page by :func:`render_page`.
FOOTER = (
    "---",
    "",
    "*Conventions of every results page.* A spread written ± is the sample standard deviation (ddof = 1) of the "
    "runs the table names (seeds, dev/test splits or outer folds); a single run has no spread. Where a page tests "
    "a difference, it names the test and the level beside the table.",
)

#: The shared floors every page's numbers go through (encoding, caching, pooling, evaluation, data, training).
SHARED_SOURCES = ("src/layerwise/encoders", "src/layerwise/cache", "src/layerwise/layers.py", "src/layerwise/pooling.py",
                  "src/layerwise/evaluation", "src/layerwise/data", "src/layerwise/training", "src/layerwise/modules",
                  "src/layerwise/losses")


@dataclass(frozen=True)
class PageContext:
    """What a page's ``run`` and ``render`` receive."""

    store: ResultsStore  # where parts are read and written
    output: Path  # folder the page is rendered into (docs/results)
    data_dir: str | None = None  # the data folder (None: $LAYERWISE_DATA)
    command: tuple[str, ...] = ()  # the command line, recorded in every part
    options: dict = field(default_factory=dict)  # page-specific switches (skip a model, limit a grid...)


@dataclass(frozen=True)
class ResultsPage:
    name: str  # file name of the page without .md, and the CLI name
    method: str  # the methods/ package it reports on (its benchmark lives in benchmarks/<method>/)
    title: str
    models: tuple[str, ...]  # built-in model names the page covers
    data: tuple[str, ...]  # data sets (names as the loaders take them)
    grid: dict  # what is swept (objectives, poolers, seeds, layers...)
    settings: dict  # protocol settings shared by every part (part keys add model and data identity)
    run: Callable[[PageContext], None]
    render: Callable[[PageContext], list[Path]]
    # source paths (relative to the checkout) the numbers depend on; () = the method's package, its benchmark
    # package and the shared floors (:meth:`sources`)
    measures: tuple[str, ...] = ()
    # modules under those paths that only write the page from its store (read by render alone, which every
    # ``results render`` runs again): left out of ``sources`` (git pathspecs ``:(exclude)PATH``), with the modules
    # there that declare ``RENDER_ONLY = True``
    renders: tuple[str, ...] = ()
    # the stored parts the page's render reads, of all its store holds; None: the newest part of each name
    # (:func:`~layerwise.benchmarks.page_parts.latest_by_name`). Freshness judges these and prune keeps them.
    shows: Callable[[list[Part]], list[Part]] | None = None

    def shown_parts(self, parts: list[Part]) -> list[Part]:
        """The parts of ``parts`` (the page's store) that its render reads (:attr:`shows`)."""
        return list(self.shows(parts)) if self.shows is not None else list(latest_by_name(parts, quiet=True).values())

    def sources(self) -> tuple[str, ...]:
        """The paths whose change after a page's run makes it stale (git pathspecs): :attr:`measures`, or by
        default the method's and benchmark's packages, the shared floors, and the library modules of other
        packages that those two import (:func:`~layerwise.benchmarks.measured_code.library_imports`)."""
        measured = self.measures
        if not measured:
            own = (f"src/layerwise/methods/{self.method}", f"src/layerwise/benchmarks/{self.method}")
            imported = [path for path in library_imports(own, SHARED_SOURCES) if not path.startswith(tuple(p + "/" for p in own))]
            measured = (*own, *SHARED_SOURCES, *imported)
        left_out = dict.fromkeys((*self.renders, *render_only_modules(tuple(measured))))  # each once, in order
        return (*measured, *(f":(exclude){path}" for path in left_out))


PAGES: dict[str, ResultsPage] = {}


def render_page(page: ResultsPage, ctx: PageContext) -> list[Path]:
    """``page.render(ctx)``, then appended to each markdown page it wrote: the commits its shown parts were
    computed at (:func:`~layerwise.benchmarks.page_parts.code_line`) and the shared :data:`FOOTER`."""
    paths = page.render(ctx)
    code = code_line(page.name, page.shown_parts(ctx.store.parts(page.name)))
    for path in paths:
        if Path(path).suffix == ".md":
            text = Path(path).read_text(encoding="utf-8").rstrip("\n")
            write_text(path, text + "\n\n" + code + "\n\n" + "\n".join(FOOTER) + "\n")
    return paths


def register(page: ResultsPage) -> ResultsPage:
    if page.name in PAGES:
        raise ValueError(f"results page {page.name!r} is declared twice")
    PAGES[page.name] = page
    return page
