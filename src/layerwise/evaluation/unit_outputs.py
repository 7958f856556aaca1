"""Per-unit outputs kept for a paired test, as compact text for a results part.

A paired test (:mod:`layerwise.evaluation.significance`) needs each system's output on every unit it was scored on:
the predicted similarity of each sentence pair, or whether each example was classified correctly. Stored in a
JSON part they are base64 text: correctness packed eight to a byte; similarities either exactly (float64, for a
Pearson correlation) or, for a Spearman correlation, as their dense ranks (0 for the smallest value, equal values
sharing a rank; uint16, or uint32 past 65,536 distinct values): a quarter of the size, and the same Spearman
correlation in every resample, since the ranks keep the order and the ties of the values exactly (rounding to
float32 would not: close cosines of a small model merge or swap).
"""

from __future__ import annotations

import base64

import numpy as np

__all__ = ["pack_correct", "pack_ranks", "pack_scores", "pack_small", "unpack_correct", "unpack_ranks", "unpack_scores",
           "unpack_small"]


def pack_correct(correct: np.ndarray) -> str:
    """A boolean vector (n,) as base64 text (its length is the split's ``n_test``)."""
    return base64.b64encode(np.packbits(np.asarray(correct, dtype=bool)).tobytes()).decode("ascii")


def unpack_correct(text: str, n: int) -> np.ndarray:
    """The boolean vector (n,) that :func:`pack_correct` wrote."""
    bits = np.unpackbits(np.frombuffer(base64.b64decode(text), dtype=np.uint8))
    if len(bits) < n or bits[n:].any():
        raise ValueError(f"packed correctness of {len(bits)} bits does not hold {n} test examples")
    return bits[:n].astype(bool)


def pack_small(values) -> str:
    """Integers 0..255 (n,) (e.g. each query's rank of its first relevant result, 0 for none) as base64 text."""
    x = np.asarray(values)
    if x.ndim != 1 or (len(x) and (x.min() < 0 or x.max() > 255)) or not np.array_equal(x, np.round(x)):
        raise ValueError(f"pack_small takes a vector of integers 0..255, got shape {x.shape}")
    return base64.b64encode(x.astype(np.uint8).tobytes()).decode("ascii")


def unpack_small(text: str, n: int | None = None) -> np.ndarray:
    """The integers (n,) :func:`pack_small` wrote; ``n`` checks the length."""
    x = np.frombuffer(base64.b64decode(text), dtype=np.uint8).astype(np.int64)
    if n is not None and len(x) != n:
        raise ValueError(f"packed integers hold {len(x)} values, expected {n}")
    return x


def _finite_vector(scores) -> np.ndarray:
    x = np.asarray(scores, dtype=np.float64)
    if x.ndim != 1 or not np.isfinite(x).all():
        raise ValueError(f"scores to pack must be a finite vector (n,), got shape {x.shape}")
    return x


def pack_scores(scores: np.ndarray) -> str:
    """Scores (n,) as base64 text of little-endian float64 (exact)."""
    return base64.b64encode(_finite_vector(scores).astype("<f8").tobytes()).decode("ascii")


def unpack_scores(text: str, n: int | None = None) -> np.ndarray:
    """The float64 vector (n,) :func:`pack_scores` wrote; ``n`` checks the length."""
    x = np.frombuffer(base64.b64decode(text), dtype="<f8").copy()
    if n is not None and len(x) != n:
        raise ValueError(f"packed scores hold {len(x)} values, expected {n}")
    return x


def pack_ranks(scores: np.ndarray) -> str:
    """Scores (n,) as their dense ranks, ``"u2:"`` or ``"u4:"`` + base64 of little-endian unsigned integers."""
    ranks = np.unique(_finite_vector(scores), return_inverse=True)[1].ravel()
    kind = "u2" if len(ranks) == 0 or ranks.max() < 2**16 else "u4"
    return f"{kind}:" + base64.b64encode(ranks.astype(f"<{kind}").tobytes()).decode("ascii")


def unpack_ranks(text: str, n: int | None = None) -> np.ndarray:
    """The dense ranks (n,) :func:`pack_ranks` wrote, as float64 (a Spearman correlation reads them as the scores)."""
    kind, _, body = text.partition(":")
    if kind not in ("u2", "u4"):
        raise ValueError(f"packed ranks start with 'u2:' or 'u4:', got {text[:4]!r}")
    x = np.frombuffer(base64.b64decode(body), dtype=f"<{kind}").astype(np.float64)
    if n is not None and len(x) != n:
        raise ValueError(f"packed ranks hold {len(x)} values, expected {n}")
    return x
