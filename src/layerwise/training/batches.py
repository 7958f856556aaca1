"""Batches as a pure function of (seed, batch number), so that a resumed run draws exactly the batches a straight
run would, with no sampler state to save."""

from __future__ import annotations

import functools
import logging

import numpy as np

from layerwise.errors import UsageError

logger = logging.getLogger(__name__)

__all__ = ["batch_indices", "check_in_batch_examples", "length_grouped_batch_indices", "steps_per_epoch"]


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


def length_grouped_batch_indices(lengths: np.ndarray, batch_size: int, seed: int, batch: int, *,
                                 group: int = 64) -> np.ndarray:
    """Example indices (batch_size,) of batch number ``batch``, drawn so that a batch holds examples of similar
    ``lengths`` (less padding: a batch costs its longest example).

    Epoch e shuffles the n examples with ``default_rng([seed, e])`` exactly as :func:`batch_indices` (same epochs,
    same dropped tail), cuts the order into windows of ``group`` batches, sorts each window by length (stable) and
    slices it into batches, then visits the epoch's batches in an order shuffled with ``default_rng([seed, e, 1])``.
    Every epoch is still a random partition of the same examples; only which examples share a batch changes.
    """
    n = len(lengths)
    per_epoch = steps_per_epoch(n, batch_size)
    epoch, pos = divmod(batch, per_epoch)
    batches = _grouped_epoch(tuple(np.asarray(lengths).tolist()), batch_size, seed, epoch, group)
    return batches[pos]


@functools.lru_cache(maxsize=2)
def _grouped_epoch(lengths: tuple, batch_size: int, seed: int, epoch: int, group: int) -> np.ndarray:
    """(steps_per_epoch, batch_size) the batches of one epoch (computed once per epoch, not per step)."""
    n = len(lengths)
    per_epoch = steps_per_epoch(n, batch_size)
    kept = np.random.default_rng([seed, epoch]).permutation(n)[: per_epoch * batch_size]
    size = np.asarray(lengths)[kept]
    window = group * batch_size
    for start in range(0, len(kept), window):
        order = np.argsort(size[start:start + window], kind="stable")
        kept[start:start + window] = kept[start:start + window][order]
    batches = kept.reshape(per_epoch, batch_size)
    return batches[np.random.default_rng([seed, epoch, 1]).permutation(per_epoch)]


def steps_per_epoch(n: int, batch_size: int) -> int:
    """Full batches in one pass over ``n`` examples (at least 1)."""
    if n < 1 or batch_size < 1:
        raise ValueError(f"need at least one example and a positive batch size, got n={n}, batch_size={batch_size}")
    return max(1, n // batch_size)
