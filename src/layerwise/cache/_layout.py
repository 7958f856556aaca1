"""The shape every stack under one key must share: checks on stored and computed stacks, and row assembly."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from layerwise.cache._format import DTYPE_NAMES
from layerwise.layers import LayerStack

__all__ = ["Layout", "assemble", "check_computed", "merge_layout"]


@dataclass(frozen=True)
class Layout:
    """The shape every stack stored under one key must share."""

    has_pooler: bool
    n_states: int
    dim: int
    dtype: np.dtype
    source: str  # where this layout was first seen, for error messages


def merge_layout(layout: Layout | None, seen: Layout) -> Layout:
    """Check a stack's layout ``seen`` against the one already seen for this key; ValueError on a mismatch."""
    if layout is None:
        return seen
    source = seen.source
    fix = (
        "The cache key must include everything that changes the output (model, weights hash or "
        "revision, max_length, dtype, ...); if it does, the encoder is inconsistent. "
        "Call LayerCache.clear() or delete the cache directory after fixing the cause."
    )
    if seen.has_pooler != layout.has_pooler:
        raise ValueError(
            f"{source} {'has' if seen.has_pooler else 'has no'} pooler output but {layout.source} "
            f"{'has' if layout.has_pooler else 'has none'}, under the same cache key. {fix}"
        )
    if (seen.n_states, seen.dim) != (layout.n_states, layout.dim):
        raise ValueError(
            f"{source} has {seen.n_states} hidden states of size {seen.dim} but {layout.source} has "
            f"{layout.n_states} of size {layout.dim}, under the same cache key. {fix}"
        )
    if seen.dtype != layout.dtype:
        raise ValueError(
            f"{source} has dtype {seen.dtype} but {layout.source} has {layout.dtype}, under the same cache key. {fix}"
        )
    return layout


def check_computed(stack: object, n: int, layout: Layout | None) -> Layout:
    """Check what ``compute`` returned for ``n`` texts and merge its layout; TypeError or ValueError."""
    if not isinstance(stack, LayerStack):
        raise TypeError(f"compute must return a LayerStack, got {type(stack).__name__}")
    if len(stack) != n:
        raise ValueError(f"compute returned {len(stack)} rows for {n} texts; it must return one row per text")
    dtypes = {stack.mean.dtype, stack.cls.dtype} | ({stack.pooler.dtype} if stack.pooler is not None else set())
    if len(dtypes) != 1 or stack.mean.dtype not in DTYPE_NAMES:
        raise TypeError(
            f"compute returned arrays of dtype {sorted(map(str, dtypes))}; the cache stores float16, "
            "float32 or float64 (convert e.g. bfloat16 with tensor.float().numpy())"
        )
    if stack.pooler is not None and stack.pooler.shape != (n, stack.dim):
        raise ValueError(f"compute returned pooler of shape {stack.pooler.shape}, expected {(n, stack.dim)}")
    seen = Layout(stack.pooler is not None, stack.n_states, stack.dim, stack.mean.dtype, "the computed stack")
    return merge_layout(layout, seen)


def assemble(parts: list[tuple[np.ndarray, LayerStack]], n: int, layout: Layout | None) -> LayerStack:
    """Scatter (rows, stack) parts into one stack of ``n`` rows; every row is covered exactly once.

    ``parts`` hold row indices of shape (m,) and stacks of m rows; the result has ``mean`` and ``cls`` of
    shape (n, L+1, d) and ``pooler`` of shape (n, d) or None.
    """
    if layout is None:  # unreachable: n >= 1 rows were either stored or computed
        raise RuntimeError("layer cache: no rows to assemble")
    shape = (n, layout.n_states, layout.dim)
    mean = np.empty(shape, dtype=layout.dtype)
    cls = np.empty(shape, dtype=layout.dtype)
    pooler = np.empty((n, layout.dim), dtype=layout.dtype) if layout.has_pooler else None
    for rows, stack in parts:
        mean[rows] = stack.mean
        cls[rows] = stack.cls
        if pooler is not None:
            pooler[rows] = stack.pooler
    return LayerStack(mean=mean, cls=cls, pooler=pooler)
