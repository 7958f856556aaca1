"""What the BERT-LC transfer protocol classifies: per-layer vectors of a task's examples, and their features.

A leaf shared by the protocol (:mod:`.transfer`) and its ridge screen (:mod:`.screen`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from layerwise.layers import LayerStack, validate_layers
from layerwise.pooling import apply_head

__all__ = ["TransferFeatures", "pair_features"]


def pair_features(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """SentEval's pair features ``[u, v, |u - v|, u * v]``: (n, 4d) from two (n, d) arrays."""
    if u.shape != v.shape:
        raise ValueError(f"pair_features needs equal shapes, got {u.shape} and {v.shape}")
    return np.concatenate([u, v, np.abs(u - v), u * v], axis=1)


@dataclass(frozen=True)
class TransferFeatures:
    """Per-layer vectors of one task's examples and their labels.

    ``first`` (and, for pair tasks, ``second``) are layer stacks of n examples; ``labels`` (n,) ints in
    ``0 .. n_classes - 1``. ``head`` is the checkpoint's trained pooler head ``(weight, bias)`` for LC + MLP,
    or None.
    """

    first: LayerStack
    labels: np.ndarray
    n_classes: int
    second: LayerStack | None = None
    head: tuple[np.ndarray, np.ndarray] | None = None

    def __post_init__(self) -> None:
        labels = np.asarray(self.labels, dtype=np.int64)
        object.__setattr__(self, "labels", labels)
        n = len(self.first)
        if n == 0:
            raise ValueError("TransferFeatures needs at least one example")
        if labels.shape != (n,):
            raise ValueError(f"{labels.shape[0] if labels.ndim else 0} labels for {n} encoded examples")
        if self.second is not None and (len(self.second) != n or self.second.mean.shape != self.first.mean.shape):
            raise ValueError(f"second stack of shape {self.second.mean.shape} does not match {self.first.mean.shape}")
        if labels.min() < 0 or labels.max() >= self.n_classes:
            raise ValueError(f"labels must lie in [0, {self.n_classes}), got {labels.min()}..{labels.max()}")

    def __len__(self) -> int:
        return len(self.first)

    @property
    def n_states(self) -> int:
        return self.first.n_states

    @property
    def is_pair(self) -> bool:
        return self.second is not None

    def take(self, idx) -> "TransferFeatures":
        idx = np.asarray(idx, dtype=np.int64)
        return TransferFeatures(
            first=self.first.take(idx), labels=self.labels[idx], n_classes=self.n_classes,
            second=None if self.second is None else self.second.take(idx), head=self.head,
        )

    def features(self, layers, kind: str = "mean", *, head: bool = False, rows=None) -> np.ndarray:
        """Classifier input of the combination of ``layers`` (``kind`` "mean" or "cls") for ``rows`` (default
        all): (n_rows, d), or (n_rows, 4d) for pair tasks. ``head=True`` feeds it through the pooler head (LC + MLP).
        """
        layers = list(validate_layers(layers, self.n_states))
        if head and self.head is None:
            raise ValueError("this model has no trained pooler head: LC + MLP is not available")
        if kind not in ("mean", "cls"):
            raise ValueError(f"unknown kind {kind!r}; valid: 'mean', 'cls'")
        rows = np.arange(len(self)) if rows is None else np.asarray(rows, dtype=np.int64)

        def one(stack: LayerStack) -> np.ndarray:
            src = stack.mean if kind == "mean" else stack.cls
            x = src[np.ix_(rows, layers)].mean(axis=1)
            return apply_head(x, *self.head) if head else x

        u = one(self.first)
        return u if self.second is None else pair_features(u, one(self.second))
