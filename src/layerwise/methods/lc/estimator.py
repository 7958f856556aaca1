"""``LayerCombination``: BERT-LC as an estimator, fitted on the user's own STS pairs or labeled texts.

Two ways to fit, told apart by what is passed (never guessed from the values):

- ``fit(sentences1, sentences2, scores)``: STS pairs. Every subset of hidden states (up to ``max_layers``) is
  scored exactly by the Spearman correlation of its cosine with ``scores`` (:class:`LayerSubsetSearch` on the
  layer stacks of :class:`~layerwise.LayerEncoder`), and the best subset is kept.
- ``fit(texts, labels)`` (or ``fit(texts1, texts2, labels=labels)`` for pair classification): the BERT-LC transfer
  protocol's choice (:func:`~layerwise.methods.lc.transfer.choose_subset`): ``n_inner`` seeded stratified 82/18
  splits score every subset by held-out accuracy (the closed-form ridge screen, then SAGA logistic regression on
  the ``shortlist`` best), and the paper's classifier is fitted on all the texts with the chosen subset
  (:meth:`LayerCombination.predict`).

Either way the embedding is the BERT-LC pooling :func:`layerwise.pooling.layer_mean` of the chosen hidden states,
and :meth:`LayerCombination.save` writes it as a sentence-transformers folder with built-in modules only (the encoder
cut above the highest state used, :func:`layerwise.methods.lc.export.export_layer_subset`).
"""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path
from typing import Sequence

import numpy as np

from layerwise.base import SentenceEstimator, check_int, check_texts
from layerwise.encoders.layer_encoder import LayerEncoder
from layerwise.encoders.registry import DEFAULT_MODEL
from layerwise.errors import UsageError
from layerwise.evaluation.classification import INNER_KINDS, fit_logreg
from layerwise.evaluation.metrics import spearman
from layerwise.layers import LayerStack
from layerwise.methods.lc.export import SubsetExport, export_layer_subset
from layerwise.methods.lc.fit_arguments import fit_arguments
from layerwise.methods.lc.saved import read_fitted, write_learned
from layerwise.methods.lc.screen import DEFAULT_RIDGE_ALPHA, RidgeScreen
from layerwise.methods.lc.search import LayerSubsetSearch
from layerwise.methods.lc.transfer import (
    TransferFeatures,
    all_subsets,
    choose_subset,
    default_max_layers,
    pair_features,
)
from layerwise.pooling import layer_mean

logger = logging.getLogger(__name__)

__all__ = ["LC_POOLINGS", "LayerCombination"]

LC_POOLINGS = ("mean", "cls")  # token pooling of each hidden state (layer_mean kinds)


class LayerCombination(SentenceEstimator):
    """BERT-LC (Hosseini et al., 2023): the mean of a chosen subset of hidden states' pooled vectors.

    Parameters
    ----------
    model : str or path
        A built-in name or a local Hugging Face folder (as :class:`~layerwise.LayerEncoder` takes it).
    pooling : {"mean", "cls"}
        Token pooling of each hidden state (masked token mean, or the first token).
    max_layers : int or None
        Largest subset considered. ``None``: for STS pairs every subset up to 13 hidden states, else subsets of at
        most 8 (:class:`LayerSubsetSearch`); for classification 4 up to 13 hidden states, else 3 (the paper's caps).
    n_inner : int
        Classification: inner splits that score each subset (the transfer protocol's): seeded stratified 82/18
        shuffles, or folds with ``inner="kfold"``.
    inner : {"shuffle", "kfold"}
        Classification: how those splits are drawn: ``n_inner`` seeded 82/18 shuffles (the default), or
        ``n_inner``-fold cross-validation, each text in exactly one held-out fold (the BERT-LC paper's 10-fold inner
        CV; with ``shortlist=None``, the paper's exact choice: every subset scored by the logistic regression).
    shortlist : int or None
        Classification: subsets re-scored by logistic-regression cross-validation after the ridge screen
        (1: the ridge screen's choice as it is; ``None``: every subset, exhaustive and slow).
    ridge_alpha : float
        Classification: the ridge screen's penalty, relative to the mean feature variance.
    seed : int
        Classification: seed of the inner splits and of the classifier.
    n_jobs : int
        Classification: parallel classifier fits (threads).
    batch_size, max_length, device, dtype, cache_dir, show_progress
        The encoder's settings (:class:`~layerwise.LayerEncoder`); ``cache_dir=False`` keeps no layer cache.

    Attributes
    ----------
    layers_ : tuple of int
        The chosen hidden states (0 = embedding output, L = last layer).
    score_ : float
        The chosen subset's score: Spearman x100 on the pairs (STS), or its mean held-out accuracy x100 over the
        inner splits (classification; the logistic regression's where it was shortlisted, else the ridge screen's).
    scores_ : ndarray of shape (n_subsets,)
        The score of every subset considered, aligned with the rows of ``masks_`` (STS: Spearman x100; classification:
        the ridge screen's mean held-out accuracy x100). :meth:`top` and :meth:`score_of` read them by subset.
    masks_ : ndarray of shape (n_subsets, n_states_), bool
        Which hidden states each subset holds.
    n_states_ : int
        Hidden states of the model (L + 1).
    task_ : {"sts", "classification"}
        Which form of :meth:`fit` was used.
    model_identity_ : ModelIdentity
        The encoder fitted on (name, path, weight and tokenizer hashes, layers); after :meth:`load`, the source model
        the saved folder was cut from.
    classes_ : ndarray
        Classification only: the labels, in the order of the classifier's outputs.
    classifier_ : sklearn LogisticRegression
        Classification only: the paper's classifier fitted on all the texts' chosen-subset vectors.
    is_pair_ : bool
        Classification only: whether it classifies pairs (``[u, v, |u - v|, u * v]`` of the two texts' vectors).
    """

    _fitted_attributes = ("layers_", "score_", "scores_", "masks_", "n_states_", "task_")

    def __init__(
        self,
        model: str | os.PathLike = DEFAULT_MODEL,
        *,
        pooling: str = "mean",
        max_layers: int | None = None,
        n_inner: int = 10,
        inner: str = "shuffle",
        shortlist: int | None = 1,
        ridge_alpha: float = DEFAULT_RIDGE_ALPHA,
        seed: int = 0,
        n_jobs: int = 1,
        batch_size: int = 64,
        max_length: int = 256,
        device: str = "cpu",
        dtype: str = "float32",
        cache_dir: str | os.PathLike | None | bool = None,
        show_progress: bool | None = None,
    ):
        self.model = model
        self.pooling = pooling
        self.max_layers = max_layers
        self.n_inner = n_inner
        self.inner = inner
        self.shortlist = shortlist
        self.ridge_alpha = ridge_alpha
        self.seed = seed
        self.n_jobs = n_jobs
        self.batch_size = batch_size
        self.max_length = max_length
        self.device = device
        self.dtype = dtype
        self.cache_dir = cache_dir
        self.show_progress = show_progress

    # -- fit -------------------------------------------------------------------------------------------

    def fit(self, sentences1: Sequence[str], sentences2_or_labels: Sequence, scores: Sequence[float] | None = None,
            *, labels: Sequence | None = None) -> "LayerCombination":
        """Choose the subset of hidden states; returns ``self``.

        - ``fit(sentences1, sentences2, scores)``: STS pairs with similarity scores (any scale: only their ranks
          count), searched exactly.
        - ``fit(texts, labels)``: texts with class labels (str or int), by the transfer protocol.
        - ``fit(texts1, texts2, labels=labels)``: text pairs with class labels (e.g. paraphrase or not).
        """
        form, (first, second, target) = fit_arguments(sentences1, sentences2_or_labels, scores, labels)
        self._check_params()
        for attr in ("classes_", "classifier_", "is_pair_"):  # a refit of the other form leaves nothing stale
            self.__dict__.pop(attr, None)
        if form == "sts":
            self._fit_sts(first, second, target)
        else:
            self._fit_classification(first, second, target)
        return self

    def _check_params(self) -> None:
        """Every parameter, before any model loads (UsageError naming the parameter)."""
        if self.pooling not in LC_POOLINGS:
            raise UsageError(f"pooling={self.pooling!r} is not a layer-combination pooling; pass one of "
                             f"{', '.join(map(repr, LC_POOLINGS))}")
        check_int(self.max_layers, "max_layers", none_ok=True)
        check_int(self.n_inner, "n_inner")
        if self.inner not in INNER_KINDS:
            raise UsageError(f"inner={self.inner!r} is not a kind of inner split; pass one of "
                             f"{', '.join(map(repr, INNER_KINDS))}")
        check_int(self.shortlist, "shortlist", none_ok=True)
        check_int(self.n_jobs, "n_jobs")
        check_int(self.batch_size, "batch_size")
        check_int(self.max_length, "max_length")
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) or not 0 <= self.seed < 2**32:
            raise UsageError(f"seed={self.seed!r} is not a seed; pass a whole number in 0..{2**32 - 1}")
        try:
            alpha = float(self.ridge_alpha)
        except (TypeError, ValueError):
            alpha = float("nan")
        if not (math.isfinite(alpha) and alpha > 0):
            raise UsageError(f"ridge_alpha={self.ridge_alpha!r} must be a finite number above 0, e.g. 1e-3")

    def _fit_sts(self, s1: list[str], s2: list[str], gold: np.ndarray) -> None:
        stack = self.encode_layers(s1 + s2)
        n = len(s1)
        src = stack.mean if self.pooling == "mean" else stack.cls
        search = LayerSubsetSearch(max_layers=self.max_layers, show_progress=self.show_progress)
        try:
            search.fit(src[:n], src[n:], gold)
        except ValueError as exc:  # e.g. every cosine the same: the message says what to check
            raise UsageError(str(exc)) from None
        self.model_identity_ = self._get_encoder().identity
        self.layers_ = search.best_layers_
        self.score_ = search.best_score_
        self.scores_ = search.scores_
        self.masks_ = search.masks_
        self.n_states_ = search.n_states_
        self.task_ = "sts"
        logger.info("chose hidden states %s: Spearman x100 %.2f on %d pairs (%d subsets)", self.layers_, self.score_,
                    n, len(self.scores_))

    def _fit_classification(self, texts: list[str], texts2: list[str] | None, labels: np.ndarray) -> None:
        classes, y = np.unique(labels, return_inverse=True)
        if len(classes) < 2:
            raise UsageError(f"labels holds one class only ({classes.tolist()[0]!r}); a classifier needs at least two")
        data = self._features(texts, texts2, y, len(classes))
        max_layers = default_max_layers(data.n_states) if self.max_layers is None else int(self.max_layers)
        subsets = all_subsets(data.n_states, max_layers)
        rows = np.arange(len(y))
        try:
            splits = INNER_KINDS[self.inner](y, n_splits=int(self.n_inner), seed=int(self.seed))
        except ValueError as exc:  # e.g. more folds than texts: the message names both
            raise UsageError(f"n_inner={self.n_inner!r} with inner={self.inner!r}: {exc}") from None
        screen = RidgeScreen(data, alpha=float(self.ridge_alpha), kind=self.pooling)
        layers, inner, screened, _ = choose_subset(data, rows, splits, subsets, shortlist=self.shortlist,
                                                   seed=int(self.seed), n_jobs=int(self.n_jobs), screen=screen)
        self.model_identity_ = self._get_encoder().identity
        self.layers_ = tuple(int(x) for x in layers)
        self.score_ = float(inner)
        self.scores_ = np.asarray(screened, dtype=np.float64)
        self.masks_ = np.zeros((len(subsets), data.n_states), dtype=bool)
        for i, sub in enumerate(subsets):
            self.masks_[i, list(sub)] = True
        self.n_states_ = data.n_states
        self.task_ = "classification"
        self.classes_ = classes
        self.is_pair_ = texts2 is not None
        self.classifier_ = fit_logreg(data.features(self.layers_, self.pooling), y, seed=int(self.seed))
        logger.info("chose hidden states %s: inner accuracy x100 %.2f on %d texts (%d subsets)", self.layers_,
                    self.score_, len(y), len(subsets))

    def _features(self, texts, texts2, y, n_classes) -> TransferFeatures:
        stack = self.encode_layers(list(texts) + list(texts2 or []))
        n = len(texts)
        if texts2 is None:
            return TransferFeatures(first=stack, labels=y, n_classes=n_classes)
        return TransferFeatures(first=stack.take(np.arange(n)), labels=y, n_classes=n_classes,
                                second=stack.take(np.arange(n, 2 * n)))

    # -- the encoder -----------------------------------------------------------------------------------

    def __getstate__(self) -> dict:
        """Pickled (joblib, copy) without the loaded encoder, which is rebuilt from ``model`` on the next encode."""
        state = super().__getstate__()
        state.pop("_encoder", None)
        state.pop("_encoder_key", None)
        return state

    def _encoder_settings(self) -> dict:
        return {"max_length": int(self.max_length), "batch_size": int(self.batch_size), "device": self.device,
                "dtype": self.dtype, "cache_dir": self.cache_dir, "show_progress": self.show_progress}

    def _get_encoder(self) -> LayerEncoder:
        """The :class:`LayerEncoder` of ``model`` with the current settings (built once, rebuilt when they change)."""
        key = (str(self.model), tuple(sorted((k, str(v)) for k, v in self._encoder_settings().items())))
        if getattr(self, "_encoder_key", None) != key:
            self._encoder = LayerEncoder(self.model, **self._encoder_settings())
            self._encoder_key = key
        return self._encoder

    def encode_layers(self, texts: Sequence[str]) -> LayerStack:
        """Every hidden state's pooled vectors of ``texts`` (a :class:`~layerwise.LayerStack`), through the layer
        cache: what :meth:`fit` searches and :meth:`encode` averages."""
        return self._get_encoder().encode(check_texts(texts, name="texts"))

    def _encode(self, texts: list[str], *, batch_size: int | None) -> np.ndarray:
        encoder = self._get_encoder()
        if encoder.n_states < max(self.layers_) + 1:
            raise UsageError(f"model {self.model} has {encoder.n_states} hidden states but layers_ uses hidden state "
                             f"{max(self.layers_)}; set model back to the one this LayerCombination was fitted on")
        saved = encoder.batch_size
        encoder.batch_size = int(batch_size or saved)
        try:
            stack = encoder.encode(texts)
        finally:
            encoder.batch_size = saved
        return layer_mean(stack, self.layers_, kind=self.pooling).astype(np.float32)

    # -- classification --------------------------------------------------------------------------------

    def _check_classifier(self) -> None:
        self._check_fitted()
        if self.task_ != "classification":
            raise UsageError("this LayerCombination was fitted on STS pairs and has no classifier: fit it with "
                             "fit(texts, labels) to predict classes")

    def _classifier_input(self, texts, texts2) -> np.ndarray:
        if self.is_pair_ and texts2 is None:
            raise UsageError("this LayerCombination classifies pairs: pass predict(texts1, texts2)")
        if not self.is_pair_ and texts2 is not None:
            raise UsageError("this LayerCombination classifies single texts: pass predict(texts) without texts2")
        u = self.encode(check_texts(texts, name="texts"))
        if texts2 is None:
            return u
        v = self.encode(check_texts(texts2, name="texts2"))
        if len(v) != len(u):
            raise UsageError(f"texts has {len(u)} texts but texts2 has {len(v)}; pass one pair per row")
        return pair_features(u, v)

    def predict(self, texts: Sequence[str], texts2: Sequence[str] | None = None) -> np.ndarray:
        """The classifier's labels (values of ``classes_``) for ``texts`` (and ``texts2`` for pairs)."""
        self._check_classifier()
        return self.classes_[self.classifier_.predict(self._classifier_input(texts, texts2))]

    def predict_proba(self, texts: Sequence[str], texts2: Sequence[str] | None = None) -> np.ndarray:
        """Class probabilities (n, len(classes_)), columns in the order of ``classes_``."""
        self._check_classifier()
        return self.classifier_.predict_proba(self._classifier_input(texts, texts2))

    def score(self, sentences1: Sequence[str], sentences2_or_labels: Sequence, scores: Sequence[float] | None = None,
              *, labels: Sequence | None = None) -> float:
        """The fitted model on held-out data, in the forms of :meth:`fit` and on the scale of ``score_``: Spearman x100
        of the embeddings' cosine with ``scores`` (STS pairs), or accuracy x100 of :meth:`predict` (labels)."""
        self._check_fitted()
        form, (first, second, target) = fit_arguments(sentences1, sentences2_or_labels, scores, labels)
        if form == "sts":
            a = self.encode(first, normalize_embeddings=True)
            b = self.encode(second, normalize_embeddings=True)
            return 100.0 * float(spearman((a * b).sum(1), target))
        predicted = self.predict(first, second)
        return 100.0 * float(np.mean(predicted == np.asarray(target)))

    # -- results ---------------------------------------------------------------------------------------

    def _subset(self, i: int) -> tuple[int, ...]:
        return tuple(int(x) for x in np.flatnonzero(self.masks_[i]))

    def top(self, k: int = 10) -> list[tuple[tuple[int, ...], float]]:
        """The ``k`` best subsets with their scores, best first (ties in the order of ``scores_``)."""
        self._check_fitted()
        order = np.argsort(-np.nan_to_num(self.scores_, nan=-np.inf), kind="stable")[:max(0, int(k))]
        return [(self._subset(i), float(self.scores_[i])) for i in order]

    def score_of(self, layers: Sequence[int]) -> float:
        """The score of one subset of hidden states (KeyError when it was not considered)."""
        self._check_fitted()
        want = np.zeros(self.masks_.shape[1], dtype=bool)
        want[[int(x) for x in layers]] = True
        hit = np.flatnonzero((self.masks_ == want).all(axis=1))
        if not len(hit):
            raise KeyError(f"subset {tuple(layers)} was not considered (subsets of at most "
                           f"{int(self.masks_.sum(1).max())} hidden states were)")
        return float(self.scores_[hit[0]])

    # -- save / load (methods/lc/saved.py) --------------------------------------------------------------

    def save(self, folder: str | os.PathLike, *, overwrite: bool = False) -> Path:
        """Write a sentence-transformers folder: the encoder cut above the highest chosen hidden state, then
        ``WeightedLayerPooling`` (0/1 weights) and ``Pooling``, all built-in modules (no ``trust_remote_code``).

        What else was learned (every subset's score, the classifier) is kept beside it in ``layer_combination.json``
        and ``layer_combination.npz`` for :meth:`load`. ``overwrite=True`` replaces an earlier export in ``folder``.
        """
        self._check_fitted()
        spec = SubsetExport(model=str(self.model), layers=tuple(self.layers_), pooling=self.pooling,
                            max_length=int(self.max_length), scores=self._fit_scores())
        out = export_layer_subset(spec, folder, overwrite=overwrite)
        write_learned(self, out)
        return out

    def _fit_scores(self) -> dict[str, str]:
        """What the chosen subset scored in :meth:`fit`, for the saved folder's model card (none after a load of an
        export that recorded no search: ``score_`` is NaN)."""
        if not math.isfinite(self.score_):
            return {}
        n = len(self.scores_)
        if self.task_ == "sts":
            return {"fit (the pairs the subset was chosen on; in-sample, not a test score)":
                    f"Spearman x100 {self.score_:.2f}, the best of {n} subsets"}
        return {"fit (inner splits of the texts the subset was chosen on; not a test score)":
                f"held-out accuracy x100 {self.score_:.2f}, mean over {int(self.n_inner)} splits; {n} subsets screened"}

    @classmethod
    def load(cls, folder: str | os.PathLike, **params) -> "LayerCombination":
        """A fitted LayerCombination from a folder written by :meth:`save` (or by ``export_layer_subset``: then
        ``score_`` is NaN and ``scores_`` empty, since no search is recorded). Its ``model`` is that folder (the cut
        encoder); ``params`` override the encoder settings (``device``, ``batch_size``, ``cache_dir``, ...). The
        device it was fitted on is not restored: it encodes on ``device`` (default cpu)."""
        return read_fitted(cls, folder, params)
