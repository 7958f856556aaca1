"""The shape every method's estimator shares: scikit-learn's parameters, sentence-transformers' ``encode``.

Each of the five methods is one estimator (``LayerCombination``, ``LayerAttentionPooler``, ``LatteMix``,
``TruncatedFineTuner``, ``MultitaskModel``), and each follows the same contract, so that a user who knows
scikit-learn and sentence-transformers knows all five:

- ``__init__`` stores its keyword parameters and does nothing else (no model load, no validation that needs
  work): :func:`sklearn.base.clone`, ``get_params`` and ``set_params`` work, as for any scikit-learn estimator;
- ``fit(...)`` validates its data and the parameters, does the work and returns ``self``;
- what ``fit`` learned is held in attributes whose names end in ``_``; using a method that needs them before
  ``fit`` raises :class:`sklearn.exceptions.NotFittedError`;
- ``encode(sentences) -> ndarray of shape (n, d)`` as :meth:`SentenceTransformer.encode` (a single string gives
  shape ``(d,)``, an empty list ``(0, d)``), and ``get_sentence_embedding_dimension()``;
- ``save(folder)`` writes a sentence-transformers folder (``SentenceTransformer(folder)`` loads it without
  ``trust_remote_code``) and ``load(folder)`` reads it back.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Sequence

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError

from layerwise.errors import UsageError

__all__ = ["NotFittedError", "SentenceEstimator", "check_int", "check_labels", "check_number", "check_scored_pairs",
           "check_scores", "check_texts"]


def check_texts(texts, *, name: str = "sentences") -> list[str]:
    """``texts`` as a list of str, or a :class:`UsageError` naming ``name``: a bare string, a non-string item
    (the first one named by position) or an empty list is refused."""
    if isinstance(texts, (str, bytes)):
        raise UsageError(f"{name} must be a list of strings, got a single string; wrap it in a list")
    try:
        texts = list(texts)
    except TypeError:
        raise UsageError(f"{name} must be a list of strings, got {type(texts).__name__}") from None
    if not texts:
        raise UsageError(f"{name} is empty; pass at least one string")
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise UsageError(f"{name}[{i}] is {type(t).__name__}, not str; every item must be a string")
    return texts



def check_int(value, name: str, *, low: int = 1, none_ok: bool = False) -> int | None:
    """``value`` as an int of at least ``low`` (None too where ``none_ok``), or a :class:`UsageError` naming the
    parameter ``name`` (a bool is not a number here)."""
    if value is None and none_ok:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise UsageError(f"{name}={value!r} must be a whole number of at least {low}{' or None' if none_ok else ''}")
    return int(value)


def check_number(value, name: str, *, positive: bool) -> float:
    """``value`` as a finite float above 0 (``positive``) or at least 0, or a :class:`UsageError` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or not math.isfinite(value) \
            or (value <= 0 if positive else value < 0):
        raise UsageError(f"{name}={value!r} must be a finite number {'> 0' if positive else '>= 0'}")
    return float(value)


def check_scores(scores, n: int, *, name: str = "scores", what: str = "pair") -> np.ndarray:
    """``scores`` as float64 of shape (n,), every value finite, or a :class:`UsageError` naming ``name``."""
    if isinstance(scores, (str, bytes)):
        raise UsageError(f"{name} must be a list of numbers, one per {what}, got a single string")
    try:
        values = np.asarray(list(scores), dtype=np.float64)
    except (TypeError, ValueError):
        raise UsageError(f"{name} must be numbers, one per {what}; a value could not be read as a number") from None
    if values.shape != (n,):
        raise UsageError(f"{name} has {values.size} values for {n} {what}s; pass one per {what}")
    if not np.isfinite(values).all():
        raise UsageError(f"{name}[{int(np.flatnonzero(~np.isfinite(values))[0])}] is not a finite number")
    return values


def check_scored_pairs(pairs, *, name: str, min_pairs: int, forms: str = "(sentences1, sentences2, scores)",
                       purpose: str = "a Spearman correlation", fix: str = "give more") -> tuple[list, list, np.ndarray]:
    """``pairs`` given as a 3-tuple or as pairs from ``read_pairs`` (``sentences1``, ``sentences2``, ``scores``), checked:
    texts, one score per pair, finite, at least ``min_pairs`` with different scores. Returns (s1, s2, scores)."""
    if isinstance(pairs, tuple) and len(pairs) == 3:
        s1, s2, scores = pairs
    elif all(hasattr(pairs, a) for a in ("sentences1", "sentences2", "scores")):
        s1, s2, scores = pairs.sentences1, pairs.sentences2, pairs.scores
    else:
        raise UsageError(f"{name} must be {forms} or pairs from read_pairs, got {type(pairs).__name__}")
    s1, s2 = check_texts(s1, name=f"{name} sentences1"), check_texts(s2, name=f"{name} sentences2")
    if len(s1) != len(s2):
        raise UsageError(f"{name} has {len(s1)} sentences1 but {len(s2)} sentences2; pass one of each per pair")
    values = check_scores(scores, len(s1), name=f"{name} scores")
    if len(s1) < min_pairs or np.ptp(values) == 0:
        raise UsageError(f"{name} needs at least {min_pairs} pairs with different scores ({purpose}); {fix}")
    return s1, s2, values


def check_labels(labels, n: int, *, name: str = "labels") -> np.ndarray:
    """``labels`` as an array (n,) of one kind (all str or all numbers, none missing), or a :class:`UsageError`."""
    if isinstance(labels, (str, bytes)):
        raise UsageError(f"{name} must be a list with one label per text, got a single string")
    items = list(labels)
    if len(items) != n:
        raise UsageError(f"{name} has {len(items)} values for {n} texts; pass one label per text")
    missing = next((i for i, x in enumerate(items) if x is None or (isinstance(x, float) and math.isnan(x))), None)
    if missing is not None:
        raise UsageError(f"{name}[{missing}] is missing; give every text a label")
    if len({isinstance(x, str) for x in items}) > 1:
        raise UsageError(f"{name} mixes strings and numbers; give every label the same kind")
    out = np.asarray(items)
    if out.ndim != 1:
        raise UsageError(f"{name} must be one label per text, got an array of shape {out.shape}")
    return out

# Where an estimator runs, not what it learned: a saved folder does not carry these parameters, so that a model trained
# on a GPU loads on a machine without one (each ``load`` takes ``device=`` instead; None: the estimator's default).
RUN_TIME_PARAMS = ("device",)


def restorable_params(params: dict) -> dict:
    """Parameters read back from a saved folder, less :data:`RUN_TIME_PARAMS` (see ``SentenceEstimator._saved_params``)."""
    return {k: v for k, v in params.items() if k not in RUN_TIME_PARAMS}


class SentenceEstimator(BaseEstimator):
    """Base class of the methods' estimators (see the module docstring for the contract).

    A subclass implements ``fit``, :meth:`_encode` (a list of str -> float32 array ``(n, d)``), :meth:`save`
    and the classmethod :meth:`load`, and lists in ``_fitted_attributes`` the learned attributes that
    ``fit`` sets (the first of them is what :meth:`__sklearn_is_fitted__` checks).
    """

    _fitted_attributes: tuple[str, ...] = ()

    def __sklearn_is_fitted__(self) -> bool:
        return all(hasattr(self, a) for a in self._fitted_attributes[:1])

    @classmethod
    def _saved_params(cls, params: dict) -> dict:
        """The parameters ``load`` restores from those a folder recorded: this class's own, less
        :data:`RUN_TIME_PARAMS`."""
        names = set(cls._get_param_names())
        return {k: v for k, v in restorable_params(params).items() if k in names}

    def _check_fitted(self) -> None:
        if not self.__sklearn_is_fitted__():
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet: call fit(...) first, or load a "
                                 f"saved one with {type(self).__name__}.load(folder)")

    def encode(
        self,
        sentences: str | Sequence[str],
        *,
        batch_size: int | None = None,
        normalize_embeddings: bool = False,
    ) -> np.ndarray:
        """Sentence embeddings, as :meth:`SentenceTransformer.encode`.

        Parameters
        ----------
        sentences : str or list of str
            One sentence (the result then has shape ``(d,)``) or a list of ``n``.
        batch_size : int or None
            Sentences per forward pass; ``None`` keeps the estimator's own setting.
        normalize_embeddings : bool
            Scale every vector to unit length (cosine similarity becomes a dot product).

        Returns
        -------
        ndarray of shape (n, d) or (d,), float32; an empty list gives shape (0, d)
        """
        self._check_fitted()
        single = isinstance(sentences, str)
        if not single and isinstance(sentences, (list, tuple)) and not sentences:
            return np.zeros((0, self.get_sentence_embedding_dimension()), dtype=np.float32)
        texts = check_texts([sentences] if single else sentences)
        if batch_size is not None and int(batch_size) < 1:
            raise UsageError(f"batch_size must be a positive integer, got {batch_size!r}")
        vectors = np.asarray(self._encode(texts, batch_size=batch_size), dtype=np.float32)
        if vectors.ndim != 2 or len(vectors) != len(texts):
            raise RuntimeError(f"{type(self).__name__}._encode returned shape {vectors.shape} for {len(texts)} "
                               "texts; expected (n, d)")
        if not np.isfinite(vectors).all():
            raise UsageError(f"{type(self).__name__} produced non-finite embeddings (NaN or inf): the model's "
                             "weights are damaged or training diverged; refit with a lower learning rate")
        if normalize_embeddings:
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            vectors = vectors / np.maximum(norms, 1e-12)
        return vectors[0] if single else vectors

    def get_sentence_embedding_dimension(self) -> int:
        """d, the length of the fitted estimator's sentence vectors (as :class:`SentenceTransformer`'s), read from
        the vector of one sentence (so it holds for every estimator, whatever its output)."""
        self._check_fitted()
        return int(self.encode("a").shape[0])

    def _encode(self, texts: list[str], *, batch_size: int | None) -> np.ndarray:
        raise NotImplementedError

    def save(self, folder: str | os.PathLike) -> Path:  # pragma: no cover - every subclass overrides it
        raise NotImplementedError

    @classmethod
    def load(cls, folder: str | os.PathLike) -> "SentenceEstimator":  # pragma: no cover
        raise NotImplementedError
