"""Which candidates a compression run builds, depth by depth: the original; per depth l the plain cut (mean of
hidden state l), the LC cut (the best subset of hidden states 0..l that one exact search over all subsets on the dev
pairs found) where it is a subset not listed yet, the student distilled at l (none at the full depth: it would be the
teacher itself) and, where l is one of ``every_depth``, the every-depth student's cut. Subsets are read from the one
search, never searched again per depth."""

from __future__ import annotations

import numpy as np

from layerwise.methods.compress.config import CompressConfig
from layerwise.methods.lc.search import LayerSubsetSearch

__all__ = ["best_within", "depth_specs"]


def best_within(search: LayerSubsetSearch, depth: int) -> tuple[tuple[int, ...], float]:
    """The best subset of hidden states 0..``depth`` among those ``search`` scored, and its score."""
    allowed = ~search.masks_[:, depth + 1:].any(axis=1)
    scores = np.where(allowed, np.nan_to_num(search.scores_, nan=-np.inf), -np.inf)
    i = int(np.argmax(scores))
    return tuple(int(x) for x in np.flatnonzero(search.masks_[i])), float(search.scores_[i])


def depth_specs(search: LayerSubsetSearch, config: CompressConfig, n_layers: int, *,
                descending: bool = False) -> list[tuple[int | None, list[tuple[str, tuple[int, ...]]]]]:
    """``(depth, [(recipe, hidden states), ...])`` for each of ``config.depths``, shallowest first (or deepest
    first: a run that may stop descending), after ``(None, [("original", (L,))])``. An LC cut equal to a subset listed
    at an earlier depth of that order is not listed again."""
    L = n_layers
    groups: list[tuple[int | None, list[tuple[str, tuple[int, ...]]]]] = [(None, [("original", (L,))])]
    seen = {(L,)}
    for l in sorted(config.depths, reverse=descending):
        specs = []
        if l < L:
            specs.append(("cut", (l,)))
            seen.add((l,))
        subset, _ = best_within(search, l)
        if subset not in seen:
            specs.append(("lc-cut", subset))
            seen.add(subset)
        if l < L:
            specs.append(("distilled", (l,)))
        if l in config.every_depth:
            specs.append(("every-depth", (l,)))
        groups.append((l, specs))
    return groups
