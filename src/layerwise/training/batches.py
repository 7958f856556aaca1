"""Batches as a pure function of (seed, batch number), so that a resumed run draws exactly the batches a straight
run would, with no sampler state to save."""

from __future__ import annotations

import logging

import numpy as np

from layerwise.errors import UsageError

logger = logging.getLogger(__name__)

__all__ = ["batch_indices", "check_in_batch_examples", "steps_per_epoch"]


def check_in_batch_examples(n: int, batch_size: int, *, objective: str = "contrastive") -> None:
    """Refuse fewer than 2 examples for an in-batch objective (each example is scored against the others of its
    batch: with one, the loss is 0 at every step and nothing is learnt), and warn when every batch must hold all
    ``n`` examples because ``n`` is below ``batch_size``."""
    if n < 2:
        raise UsageError(f"{n} training example{'s' if n != 1 else ''} for the {objective} objective: an in-batch "
                         "contrastive loss compares each example with the others of its batch, so the loss is 0 at "
                         f"every step and nothing is learnt; pass at least 2 (better: at least batch_size={batch_size})")
    if n < batch_size:
        logger.warning("only %d training examples for batch_size %d: every batch holds these %d, with %d in-batch "
                       "negatives each", n, batch_size, n, n - 1)


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
