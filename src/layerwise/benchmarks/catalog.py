"""Every declared results page: the modules that declare pages, imported here, and the look-up by name."""

from __future__ import annotations

import difflib

# each import declares its pages (register(...) at import); the names are kept so that the imports are not unused
from layerwise.benchmarks import export_page
from layerwise.benchmarks.compress import pages as compress_pages
from layerwise.benchmarks.lattemix import pages as lattemix_pages
from layerwise.benchmarks.layer_attention import pages as layer_attention_pages
from layerwise.benchmarks.lc import pages as lc_pages
from layerwise.benchmarks.multitask import pages as multitask_pages
from layerwise.benchmarks.registry import PAGES, ResultsPage
from layerwise.benchmarks.speed import bench_onnx
from layerwise.benchmarks.speed import pages as speed_pages
from layerwise.benchmarks.truncated import pages as truncated_pages

__all__ = ["DECLARING_MODULES", "all_pages", "get_page"]

DECLARING_MODULES = (lc_pages, layer_attention_pages, lattemix_pages, multitask_pages, truncated_pages, compress_pages,
                     export_page, bench_onnx, speed_pages)


def get_page(name: str) -> ResultsPage:
    if name not in PAGES:
        close = difflib.get_close_matches(name, PAGES, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"no results page {name!r}.{hint} Pages: {', '.join(sorted(PAGES))}")
    return PAGES[name]


def all_pages() -> list[ResultsPage]:
    """Every declared page, by name."""
    return [PAGES[name] for name in sorted(PAGES)]
