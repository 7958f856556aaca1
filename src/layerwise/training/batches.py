"""Batches as a pure function of (seed, batch number), so that a resumed run draws exactly the batches a straight
run would, with no sampler state to save."""

from __future__ import annotations

import numpy as np

__all__ = ["batch_indices", "steps_per_epoch"]


def batch_indices(n: int, batch_size: int, seed: int, batch: int) -> np.ndarray:
    """Example indices (batch_size,) of batch number ``batch``: epoch e = batch // (n // batch_size) shuffles the
    n examples with ``default_rng([seed, e])`` and the batch is its next slice (the tail of an epoch is dropped)."""
    per_epoch = steps_per_epoch(n, batch_size)
    epoch, pos = divmod(batch, per_epoch)
    perm = np.random.default_rng([seed, epoch]).permutation(n)
    return perm[pos * batch_size : (pos + 1) * batch_size]


def steps_per_epoch(n: int, batch_size: int) -> int:
    """Full batches in one pass over ``n`` examples (at least 1)."""
    if n < 1 or batch_size < 1:
        raise ValueError(f"need at least one example and a positive batch size, got n={n}, batch_size={batch_size}")
    return max(1, n // batch_size)
