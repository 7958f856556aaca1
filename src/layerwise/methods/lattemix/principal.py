"""The first principal component of token (word) vectors, as Latte-Mix's Fig. 2 / Tables 8 and 10 read them.

Contextual token vectors share one dominant direction (their first principal component; in BERT-style encoders it
is reported to track word frequency more than meaning, which :func:`word_coordinates` lets one check for a given
encoder); a sentence's mean vector is pulled along it. :class:`FirstComponent` is fitted on a
corpus's token vectors (m, d) and gives, for any token vectors,

    coordinate(u) = (u - mean) . w          the "first-principal-component word embedding" (one number per token)
    remove(u)     = u - coordinate(u) w     the vector with that direction taken out (all but the top one),

with w the unit eigenvector of the largest eigenvalue of the covariance 1/m sum (u_i - mean)(u_i - mean)^T and
``share`` = that eigenvalue over the trace (the fraction of the variance on it). The covariance is accumulated in
float64 in chunks, so m may be large; its eigenvector's sign is fixed so that the largest |w_j| is positive.

:func:`word_coordinates` reads it per word (token type): the coordinate averaged over each type's occurrences, beside
how often the type occurs, which is how the component can be seen to track frequency.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["FirstComponent", "fit_first_component", "word_coordinates"]


@dataclass(frozen=True)
class FirstComponent:
    mean: np.ndarray  # (d,) float64: the fitted tokens' mean
    direction: np.ndarray  # (d,) float64, unit norm: the first principal direction
    share: float  # the fraction of the tokens' variance along ``direction``
    n_tokens: int  # tokens it was fitted on

    def coordinate(self, vectors: np.ndarray) -> np.ndarray:
        """(m, d) -> (m,): each vector's coordinate on the first principal component (centred)."""
        return (np.asarray(vectors, dtype=np.float64) - self.mean) @ self.direction

    def remove(self, vectors: np.ndarray) -> np.ndarray:
        """(m, d) -> (m, d): the vectors with their component along the first principal direction removed."""
        v = np.asarray(vectors, dtype=np.float64)
        return v - np.outer(self.coordinate(v), self.direction)


def _fix_sign(w: np.ndarray) -> np.ndarray:
    return w if w[np.argmax(np.abs(w))] > 0 else -w


def fit_first_component(vectors: np.ndarray, *, chunk: int = 65536) -> FirstComponent:
    """The first principal component of ``vectors`` (m, d), m >= 2 (see the module docstring)."""
    v = np.asarray(vectors)
    if v.ndim != 2 or len(v) < 2:
        raise ValueError(f"need at least 2 token vectors of shape (m, d), got shape {v.shape}")
    mean = v.mean(0, dtype=np.float64)
    cov = np.zeros((v.shape[1], v.shape[1]))
    for s in range(0, len(v), chunk):
        x = v[s : s + chunk].astype(np.float64) - mean
        cov += x.T @ x
    cov /= len(v)
    values, vectors_ = np.linalg.eigh(cov)  # ascending
    total = float(values.sum())
    share = float(values[-1] / total) if total > 0 else 0.0
    return FirstComponent(mean=mean, direction=_fix_sign(vectors_[:, -1]), share=share, n_tokens=len(v))


def word_coordinates(component: FirstComponent, vectors: np.ndarray, ids: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per token type of ``vectors`` (m, d), whose token ids are ``ids`` (m,): ``(types, counts, coordinates)``,
    sorted by id, each type's coordinate on ``component`` averaged over its ``count`` occurrences."""
    ids = np.asarray(ids)
    if ids.ndim != 1 or len(ids) != len(vectors):
        raise ValueError(f"need one token id per vector: {len(vectors)} vectors, ids of shape {ids.shape}")
    types, inverse, counts = np.unique(ids, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=component.coordinate(vectors), minlength=len(types))
    return types, counts, sums / counts
