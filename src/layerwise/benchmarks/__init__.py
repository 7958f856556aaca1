"""The papers' benchmarks, apart from the library: reproductions, grids, results stores, pages and speed benchmarks.

- :mod:`.store`, :mod:`.registry`, :mod:`.schema`, :mod:`.page_parts`: the results machinery shared by every page
  (one resumable store keyed on every setting; the registry of pages; format stamps; page building blocks)
- :mod:`.catalog`: imports every module that declares a page; ``catalog.get_page`` / ``catalog.all_pages`` look
  them up
- one sub-package per paper, calling the methods of :mod:`layerwise.methods`: :mod:`.lc`, :mod:`.layer_attention`,
  :mod:`.lattemix`, :mod:`.truncated`, :mod:`.multitask`; :mod:`.export_page` (the export checks page)
- :mod:`.speed`: the speed and scale-out benchmarks (``python -m layerwise.benchmarks.speed.bench_encode`` ...)

The methods never import this package; ``layerwise.cli`` sits above it (``make lint`` checks the layering).
"""

from layerwise.benchmarks.registry import PAGES, PageContext, ResultsPage, register
from layerwise.benchmarks.store import STORE_FORMAT, Part, ResultsStore, key_digest

__all__ = ["PAGES", "STORE_FORMAT", "PageContext", "Part", "ResultsPage", "ResultsStore", "key_digest",
           "register"]
