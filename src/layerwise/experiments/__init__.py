"""Results: the store (one resume mechanism keyed on every setting) and the registry of results pages."""

from layerwise.experiments.registry import PAGES, PageContext, ResultsPage, get_page, register
from layerwise.experiments.store import STORE_FORMAT, Part, ResultsStore, key_digest

__all__ = ["PAGES", "STORE_FORMAT", "PageContext", "Part", "ResultsPage", "ResultsStore", "get_page", "key_digest",
           "register"]
