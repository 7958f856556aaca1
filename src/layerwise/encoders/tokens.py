"""Token-level vectors of chosen hidden states, for methods that look inside a sentence (Latte-Mix)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["TokenStack"]


@dataclass(frozen=True)
class TokenStack:
    """Ragged token vectors of ``n`` sentences.

    Attributes
    ----------
    vectors : ndarray of shape (total_tokens, S, d)
        Token vectors of the ``S`` hidden states in ``layers`` (padding removed).
    special : ndarray of shape (total_tokens,), bool
        True for special tokens ([CLS], [SEP], <s>, </s>).
    offsets : ndarray of shape (n + 1,)
        Sentence ``i`` owns rows ``offsets[i]:offsets[i + 1]``.
    layers : tuple of int
        The hidden states kept (0 = embedding output).
    """

    vectors: np.ndarray
    special: np.ndarray
    offsets: np.ndarray
    layers: tuple[int, ...]

    def __post_init__(self) -> None:
        if self.vectors.ndim != 3 or self.vectors.shape[1] != len(self.layers):
            raise ValueError(
                f"vectors must have shape (total_tokens, {len(self.layers)}, d), got {self.vectors.shape}"
            )
        if self.special.shape != (self.vectors.shape[0],) or self.offsets[-1] != self.vectors.shape[0]:
            raise ValueError("special mask and offsets must cover every token row exactly")

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def layer_index(self, layer: int) -> int:
        """Position of hidden state ``layer`` in ``vectors``' second axis."""
        try:
            return self.layers.index(layer)
        except ValueError:
            raise ValueError(f"hidden state {layer} was not kept; kept: {self.layers}") from None

    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def sentence_ids(self) -> np.ndarray:
        """(total_tokens,) index of the sentence each token row belongs to."""
        return np.repeat(np.arange(len(self)), self.lengths())

    def token_vectors(self, layer: int, *, include_special: bool = True) -> np.ndarray:
        """All token vectors of one hidden state, (m, d) (for training token-level models)."""
        v = self.vectors[:, self.layer_index(layer)]
        return v if include_special else v[~self.special]

    def pool(self, layer: int, how: str = "mean", *, include_special: bool = True) -> np.ndarray:
        """Sentence vectors (n, d) by ``mean``, ``max`` or ``cls`` (first token) of one hidden state."""
        v = self.vectors[:, self.layer_index(layer)].astype(np.float64)
        if how == "cls":
            return v[self.offsets[:-1]].astype(np.float32)
        keep = np.ones(len(v), bool) if include_special else ~self.special
        ids = self.sentence_ids()[keep]
        v = v[keep]
        n, d = len(self), v.shape[1]
        counts = np.bincount(ids, minlength=n)
        if (counts == 0).any():
            raise ValueError("a sentence has no tokens left to pool (only special tokens?)")
        if how == "mean":
            out = np.zeros((n, d))
            np.add.at(out, ids, v)
            return (out / counts[:, None]).astype(np.float32)
        if how == "max":
            out = np.full((n, d), -np.inf)
            np.maximum.at(out, ids, v)
            return out.astype(np.float32)
        raise ValueError(f"unknown pooling {how!r}; valid: 'mean', 'max', 'cls'")
