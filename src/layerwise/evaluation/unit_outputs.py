"""Per-unit outputs kept for a paired test, as compact text for a results part.

A paired test (:mod:`layerwise.evaluation.significance`) needs each system's output on every unit it was scored on:
the predicted similarity of each sentence pair, or whether each example was classified correctly. Stored in a
JSON part they are base64 text: correctness packed eight to a byte, similarities as little-endian float32 (the
ranks a Spearman correlation reads are those of the rounded values; STS cosines differ far above float32's 1e-7).
"""

from __future__ import annotations

import base64

import numpy as np

__all__ = ["pack_correct", "pack_scores", "unpack_correct", "unpack_scores"]


def pack_correct(correct: np.ndarray) -> str:
    """A boolean vector (n,) as base64 text (its length is the split's ``n_test``)."""
    return base64.b64encode(np.packbits(np.asarray(correct, dtype=bool)).tobytes()).decode("ascii")


def unpack_correct(text: str, n: int) -> np.ndarray:
    """The boolean vector (n,) that :func:`pack_correct` wrote."""
    bits = np.unpackbits(np.frombuffer(base64.b64decode(text), dtype=np.uint8))
    if len(bits) < n or bits[n:].any():
        raise ValueError(f"packed correctness of {len(bits)} bits does not hold {n} test examples")
    return bits[:n].astype(bool)


def pack_scores(scores: np.ndarray) -> str:
    """Scores (n,) (predicted similarities) as base64 text of little-endian float32."""
    x = np.asarray(scores, dtype=np.float64)
    if x.ndim != 1 or not np.isfinite(x).all():
        raise ValueError(f"scores to pack must be a finite vector (n,), got shape {x.shape}")
    return base64.b64encode(x.astype("<f4").tobytes()).decode("ascii")


def unpack_scores(text: str, n: int | None = None) -> np.ndarray:
    """The float64 vector (n,) of the float32 values :func:`pack_scores` wrote; ``n`` checks the length."""
    x = np.frombuffer(base64.b64decode(text), dtype="<f4").astype(np.float64)
    if n is not None and len(x) != n:
        raise ValueError(f"packed scores hold {len(x)} values, expected {n}")
    return x
