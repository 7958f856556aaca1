"""``TruncatedFineTuner``: truncated model fine-tuning (TMFT) on your own pairs, as a scikit-learn estimator.

The encoder is cut at hidden state ``depth`` (its layers above are removed, so the model is smaller and faster) and
fine-tuned on scored sentence pairs: the cosine of the two mean-pooled sentence vectors is regressed on the score
scaled to [0, 1] (Rep, Dukić, Šnajder, 2024). An optional pre-step first fine-tunes on word pairs with similarity
scores (``pre_step="wordsim"``) or adapts the full encoder to a corpus with masked-language modelling
(``pre_step="mlm"``); its data is yours, given to :meth:`TruncatedFineTuner.fit`.

    >>> tmft = TruncatedFineTuner("encoder", depth=4, epochs=3)        # parameters only: clone() works
    >>> tmft.fit(train.sentences1, train.sentences2, train.scores, dev=dev)
    >>> tmft.dev_score_, tmft.n_layers_                                # best dev Spearman x100, layers kept
    >>> tmft.encode(["A man plays a guitar."]).shape                   # (1, d)
    >>> tmft.save("my-tmft")                                           # SentenceTransformer("my-tmft") loads it

The training is :func:`layerwise.methods.truncated.run.fine_tune` (the same code as the paper runs of
``layerwise tmft`` on STS-B), through the one training loop, so with ``output_dir`` a cut-off ``fit`` resumes from
its checkpoints.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import replace
from pathlib import Path

import numpy as np

from layerwise.base import SentenceEstimator, check_int, check_number, check_scored_pairs, check_scores, check_texts
from layerwise.data.checksum import content_checksum
from layerwise.data.readers import normalize_scores
from layerwise.encoders.model_files import weights_sha256
from layerwise.encoders.registry import DEFAULT_MODEL, resolve_model
from layerwise.errors import UsageError
from layerwise.export.sentence_transformers import EXPORT_MARKER
from layerwise.keys import keyed_name
from layerwise.methods.truncated.config import MLMConfig, TMFTConfig, WSConfig
from layerwise.methods.truncated.export import write_truncated
from layerwise.methods.truncated.model import TruncatedModel
from layerwise.methods.truncated.run import TMFTData, fine_tune, mlm_folder, split_word_pairs
from layerwise.methods.truncated.tasks import PairSet
from layerwise.training.distributed import run_on_main

logger = logging.getLogger(__name__)

__all__ = ["PRE_STEPS", "TruncatedFineTuner"]

#: ``pre_step`` values -> the run's names (``TMFTConfig.pre_step``).
PRE_STEPS = {None: "none", "wordsim": "ws", "mlm": "mlm"}
_TUPLE_PARAMS = ("layers", "wordsim_split", "score_scale")  # JSON lists read back as tuples
_WS, _MLM = WSConfig(), MLMConfig()


class TruncatedFineTuner(SentenceEstimator):
    """An encoder cut at hidden state ``depth``, mean-pooled and fine-tuned on scored sentence pairs (TMFT).

    Parameters
    ----------
    model : str
        A built-in name or a local Hugging Face encoder folder.
    depth : int
        The hidden state kept as the output (0 = embedding output .. L = the last layer): layers ``depth + 1 .. L``
        are removed from the model, so it has ``depth`` transformer layers.
    layers : tuple of int or None
        Hidden states whose token means are averaged into the sentence vector (LC-TMFT, a layer combination); all
        in ``0 .. depth``, ``depth`` among them. None: ``(depth,)``, TMFT proper.
    pre_step : None, "wordsim" or "mlm"
        Before the pair fine-tuning: none; fine-tuning of the truncated model on word pairs with similarity scores
        (``fit(..., word_pairs=...)``); masked-language-model adaptation of the full encoder to a corpus
        (``fit(..., corpus=...)``).
    epochs, batch_size, lr : int, int, float
        Passes over the training pairs, pairs per step, AdamW learning rate (linear warm-up and decay).
    weight_decay, max_grad_norm : float
        AdamW weight decay; gradient-norm clipping (0: none).
    max_length : int
        Tokens per sentence (longer ones are cut).
    seed : int
        Seeds the batches, the dropout, the word-pair split and the MLM masks.
    wordsim_epochs, wordsim_batch_size, wordsim_lr : int, int, float
        The word-similarity pre-step's training (the paper: 50 epochs).
    wordsim_split : tuple of 3 floats
        Fractions of the word pairs for training, choosing the best epoch (dev) and the reported test score.
    mlm_epochs, mlm_batch_size, mlm_grad_accumulation, mlm_lr, mlm_probability : int, int, int, float, float
        The MLM pre-step: passes over the corpus, sentences per micro-batch, micro-batches per step, learning rate,
        share of the tokens masked (of which 80 % [MASK], 10 % a random token, 10 % kept).
    score_scale : (low, high) or None
        The scale of the training pairs' scores, mapped to [0, 1]; None: read from the scores (their minimum and
        maximum, :func:`layerwise.data.readers.normalize_scores`). Word pairs are always read on their own range.
    output_dir : str or None
        A folder for the checkpoints of every stage (a cut-off ``fit`` with the same settings and data resumes from
        them) and the kept model (``model_path_``); None: trained in memory, nothing written.
    device : str or None
        Where the model trains and encodes (None: cpu).
    show_progress : bool or None
        Progress bars (None: when the logger is at INFO).

    Attributes
    ----------
    model_ : TruncatedModel
        The fine-tuned truncated encoder with its pooling (a torch module: ``model_.encoder`` is the Hugging Face
        model, ``depth`` layers).
    layers_ : tuple of int
        The hidden states averaged into the sentence vector.
    n_layers_ : int
        Transformer layers the fine-tuned encoder has (= ``depth``).
    n_parameters_ : int
        Its parameters (the pooler head excluded, as the paper counts them).
    dev_score_ : float or None
        Best Spearman x100 on ``dev`` over the epochs (the epoch kept); None without ``dev`` (the last epoch kept).
    history_ : dict
        The pair fine-tuning: ``step`` and ``loss`` per optimisation step, ``dev`` as ``[step, Spearman x100]`` per
        epoch.
    pre_step_ : dict or None
        What the pre-step did and scored (word pairs: dev and test Spearman x100 of its split; MLM: sentences,
        steps, final loss); None without one.
    source_ : dict
        The starting model: ``name`` and ``weights_sha256``.
    model_path_ : Path or None
        The kept model as a sentence-transformers folder under ``output_dir`` (the folder it was loaded from, after
        :meth:`load`); None when ``output_dir`` is None.
    """

    _fitted_attributes = ("model_", "layers_", "n_layers_", "n_parameters_", "dev_score_", "history_", "pre_step_",
                          "source_", "model_path_")

    def __init__(self, model: str = DEFAULT_MODEL, *, depth: int = 6, layers=None, pre_step: str | None = None,
                 epochs: int = 10, batch_size: int = 32, lr: float = 2e-5, weight_decay: float = 0.01,
                 max_grad_norm: float = 1.0, max_length: int = 128, seed: int = 0,
                 wordsim_epochs: int = _WS.epochs, wordsim_batch_size: int = _WS.batch_size,
                 wordsim_lr: float = _WS.lr, wordsim_split: tuple[float, float, float] = _WS.split,
                 mlm_epochs: int = _MLM.epochs, mlm_batch_size: int = _MLM.batch_size,
                 mlm_grad_accumulation: int = _MLM.grad_accumulation, mlm_lr: float = _MLM.lr,
                 mlm_probability: float = _MLM.mlm_probability, score_scale=None, output_dir=None,
                 device: str | None = None, show_progress: bool | None = None):
        self.model = model
        self.depth = depth
        self.layers = layers
        self.pre_step = pre_step
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.max_grad_norm = max_grad_norm
        self.max_length = max_length
        self.seed = seed
        self.wordsim_epochs = wordsim_epochs
        self.wordsim_batch_size = wordsim_batch_size
        self.wordsim_lr = wordsim_lr
        self.wordsim_split = wordsim_split
        self.mlm_epochs = mlm_epochs
        self.mlm_batch_size = mlm_batch_size
        self.mlm_grad_accumulation = mlm_grad_accumulation
        self.mlm_lr = mlm_lr
        self.mlm_probability = mlm_probability
        self.score_scale = score_scale
        self.output_dir = output_dir
        self.device = device
        self.show_progress = show_progress

    # ----------------------------------------------------------------------------------------------- fit
    def fit(self, sentences1, sentences2, scores, *, dev=None, word_pairs=None, corpus=None) -> "TruncatedFineTuner":
        """Fine-tune on scored pairs (after the pre-step, if any); returns ``self``.

        Parameters
        ----------
        sentences1, sentences2 : list of str, length n
            The training pairs.
        scores : array-like of shape (n,)
            Their similarity scores on any scale (``score_scale``, or read from the scores), mapped to [0, 1].
        dev : pairs or None
            Scored pairs whose Spearman picks the epoch kept: an object with ``sentences1``, ``sentences2``,
            ``scores`` (e.g. :func:`layerwise.data.readers.read_pairs`) or a tuple ``(sentences1, sentences2,
            scores)``. None: the last epoch is kept.
        word_pairs : word pairs or None
            For ``pre_step="wordsim"`` only (and needed there): an object with ``words1``, ``words2``, ``scores``
            (:func:`layerwise.data.readers.read_word_pairs`) or a tuple ``(words1, words2, scores)``; split
            ``wordsim_split``.
        corpus : list of str or None
            For ``pre_step="mlm"`` only (and needed there): unlabeled sentences
            (:func:`layerwise.data.readers.read_corpus`).
        """
        config = self._config()
        scale = None if self.score_scale is None else tuple(float(x) for x in self.score_scale)
        train = self._pair_set(sentences1, sentences2, scores, "sentences1", "sentences2", "scores", "train", scale)
        dev_set = None if dev is None else self._dev_set(dev)
        word_sets = self._word_sets(word_pairs, config)
        texts = self._corpus(corpus, config)
        n_layers = self._check_model(config)
        folder = None
        checksums = {"train": content_checksum(train), "dev": content_checksum(dev_set) if dev_set else None,
                     "word_pairs": content_checksum(list(word_sets)) if word_sets else None,
                     "corpus": content_checksum(texts) if texts is not None else None}
        if self.output_dir is not None:
            key = {"config": config.to_dict(), "data": checksums}
            folder = Path(self.output_dir) / keyed_name(config.name, key)
        mlm = None if self.output_dir is None or texts is None else mlm_folder(config, self.output_dir,
                                                                               checksums["corpus"])
        fit = fine_tune(config, TMFTData(train, dev_set, word_sets, texts), folder=folder, mlm_folder=mlm,
                        show_progress=self.show_progress, device=self.device)
        self.model_ = fit.model
        self.layers_ = tuple(fit.model.layers)
        self.n_layers_ = int(fit.model.encoder.config.num_hidden_layers)
        self.n_parameters_ = fit.model.n_parameters()
        self.dev_score_ = None if fit.run.best_dev is None else float(fit.run.best_dev)
        self.history_ = {"step": list(fit.run.step), "loss": [float(x) for x in fit.run.loss],
                         "dev": [[int(s), float(v)] for s, v in fit.run.dev]}
        self.pre_step_ = fit.pre_step
        self.source_ = {"name": str(self.model), "weights_sha256": weights_sha256(resolve_model(self.model).path)}
        self.model_path_ = None
        if folder is not None:
            self.model_path_ = Path(run_on_main(self.save, folder / "model"))
        logger.info("TMFT at depth %d (%d of %d layers): dev Spearman %s", self.depth, self.n_layers_, n_layers,
                    "n/a" if self.dev_score_ is None else f"{self.dev_score_:.2f}")
        return self

    def _config(self) -> TMFTConfig:
        """The run's settings from the parameters, each checked under its own name."""
        if self.pre_step not in PRE_STEPS:
            raise UsageError(f"pre_step={self.pre_step!r} is not a pre-step; use None, 'wordsim' or 'mlm'")
        depth = check_int(self.depth, "depth", low=0)
        layers = (depth,) if self.layers is None else self.layers
        if isinstance(layers, (int, str)) or not all(isinstance(k, int) and not isinstance(k, bool) for k in layers) \
                or not layers:
            raise UsageError(f"layers={self.layers!r} must be None or a tuple of hidden states, e.g. (0, {depth})")
        if max(layers) != depth or min(layers) < 0:
            raise UsageError(f"layers={tuple(layers)!r} must lie in 0..depth with depth={depth} among them (the "
                             f"encoder is cut at depth); pass depth={max(layers)} or add {depth} to layers")
        for name, low in (("epochs", 1), ("batch_size", 2), ("max_length", 2), ("seed", 0), ("wordsim_epochs", 1),
                          ("wordsim_batch_size", 2), ("mlm_epochs", 1), ("mlm_batch_size", 1),
                          ("mlm_grad_accumulation", 1)):
            check_int(getattr(self, name), name, low=low)
        for name in ("lr", "wordsim_lr", "mlm_lr"):
            check_number(getattr(self, name), name, positive=True)
        for name in ("weight_decay", "max_grad_norm"):
            check_number(getattr(self, name), name, positive=False)
        if not 0 < check_number(self.mlm_probability, "mlm_probability", positive=True) < 1:
            raise UsageError(f"mlm_probability={self.mlm_probability!r} must be between 0 and 1 (the paper: 0.15)")
        split = self.wordsim_split
        try:
            split = tuple(float(x) for x in split)
        except (TypeError, ValueError):
            split = ()
        if len(split) != 3 or min(split) <= 0 or abs(sum(split) - 1) > 1e-9:
            raise UsageError(f"wordsim_split={self.wordsim_split!r} must be three positive fractions (train, dev, "
                             "test) summing to 1, e.g. (0.7, 0.15, 0.15)")
        if self.score_scale is not None:
            try:
                low, high = (float(x) for x in self.score_scale)
            except (TypeError, ValueError):
                low = high = float("nan")
            if not low < high:
                raise UsageError(f"score_scale={self.score_scale!r} must be None or (low, high) with low < high, "
                                 "e.g. (0, 5)")
        ws = replace(_WS, sets=(), split=split, epochs=self.wordsim_epochs, batch_size=self.wordsim_batch_size,
                     lr=float(self.wordsim_lr))
        mlm = replace(_MLM, sources=(), epochs=self.mlm_epochs, batch_size=self.mlm_batch_size,
                      grad_accumulation=self.mlm_grad_accumulation, lr=float(self.mlm_lr),
                      mlm_probability=float(self.mlm_probability), limit=None)
        return TMFTConfig(model=str(self.model), layers=tuple(layers), pre_step=PRE_STEPS[self.pre_step],
                          epochs=self.epochs, batch_size=self.batch_size, lr=float(self.lr),
                          weight_decay=float(self.weight_decay), max_grad_norm=float(self.max_grad_norm),
                          max_length=self.max_length, seed=self.seed, ws=ws, mlm=mlm)

    def _check_model(self, config: TMFTConfig) -> int:
        """The model's number of layers; ``depth`` must be one of its hidden states (read from its config only)."""
        path = resolve_model(str(self.model)).path
        try:
            n_layers = int(json.loads((path / "config.json").read_text())["num_hidden_layers"])
        except (OSError, ValueError, KeyError) as exc:
            raise UsageError(f"model={self.model!r}: {path} has no readable config.json with num_hidden_layers "
                             f"({exc}); pass a Hugging Face encoder folder") from None
        if self.depth > n_layers:
            raise UsageError(f"depth={self.depth} is not a hidden state of {self.model!r}: it has {n_layers} layers "
                             f"(hidden states 0..{n_layers}); pass depth between 0 and {n_layers}")
        return n_layers

    def _scaled(self, scores, n: int, name: str, scale: tuple[float, float] | None) -> np.ndarray:
        values = check_scores(scores, n, name=name)
        if scale is not None and (values.min() < scale[0] or values.max() > scale[1]):
            raise UsageError(f"{name} range from {values.min():g} to {values.max():g}, outside score_scale={scale}; "
                             "pass the scale the scores are on")
        try:
            return np.asarray(normalize_scores(values, scale), dtype=np.float64)
        except UsageError as exc:
            raise UsageError(f"{name}: {exc}") from None

    def _pair_set(self, texts1, texts2, scores, n1: str, n2: str, ns: str, label: str,
                  scale: tuple[float, float] | None = None) -> PairSet:
        texts1, texts2 = check_texts(texts1, name=n1), check_texts(texts2, name=n2)
        if len(texts1) != len(texts2):
            raise UsageError(f"{n1} has {len(texts1)} texts but {n2} has {len(texts2)}; pass one per pair")
        if len(texts1) < 2:
            raise UsageError(f"{n1} has {len(texts1)} pair; fine-tuning needs at least 2")
        return PairSet(tuple(texts1), tuple(texts2), self._scaled(scores, len(texts1), ns, scale), label)

    def _dev_set(self, dev) -> PairSet:
        s1, s2, values = check_scored_pairs(dev, name="dev", min_pairs=2,
                                            forms="None, (sentences1, sentences2, scores)",
                                            purpose="a Spearman correlation picks the epoch kept",
                                            fix="give more dev pairs, or dev=None")
        return PairSet(tuple(s1), tuple(s2), values, "dev")

    def _word_sets(self, word_pairs, config: TMFTConfig) -> tuple[PairSet, PairSet, PairSet] | None:
        if self.pre_step != "wordsim":
            if word_pairs is not None:
                raise UsageError(f"word_pairs is given but pre_step={self.pre_step!r}: word pairs are the data of "
                                 "pre_step='wordsim'; set it, or drop word_pairs")
            return None
        if word_pairs is None:
            raise UsageError("pre_step='wordsim' needs word pairs: pass fit(..., word_pairs=(words1, words2, "
                             "scores)) or read_word_pairs(path)")
        if isinstance(word_pairs, tuple) and len(word_pairs) == 3:
            w1, w2, scores = word_pairs
        elif all(hasattr(word_pairs, a) for a in ("words1", "words2", "scores")):
            w1, w2, scores = word_pairs.words1, word_pairs.words2, word_pairs.scores
        else:
            raise UsageError(f"word_pairs must be (words1, words2, scores) or read_word_pairs(path), got "
                             f"{type(word_pairs).__name__}")
        pairs = self._pair_set(w1, w2, scores, "word_pairs words1", "word_pairs words2", "word_pairs scores",
                               "wordsim")
        try:
            return split_word_pairs(pairs.texts1, pairs.texts2, pairs.targets, config.ws.split, config.seed)
        except ValueError as exc:
            raise UsageError(f"word_pairs: {exc}") from None

    def _corpus(self, corpus, config: TMFTConfig) -> list[str] | None:
        if self.pre_step != "mlm":
            if corpus is not None:
                raise UsageError(f"corpus is given but pre_step={self.pre_step!r}: a corpus is the data of "
                                 "pre_step='mlm'; set it, or drop corpus")
            return None
        if corpus is None:
            raise UsageError("pre_step='mlm' needs a corpus: pass fit(..., corpus=[sentence, ...]) or "
                             "read_corpus(path)")
        return list(dict.fromkeys(check_texts(corpus, name="corpus")))

    # ------------------------------------------------------------------------------------ encode, save, load
    def _encode(self, texts: list[str], *, batch_size: int | None) -> np.ndarray:
        return self.model_.encode(texts, batch_size=batch_size or self.batch_size)

    def save(self, folder: str | os.PathLike) -> Path:
        """Write a sentence-transformers folder: the truncated encoder (``depth`` layers) + mean pooling, built-in
        modules only (``SentenceTransformer(folder)`` loads it without ``trust_remote_code``), with the parameters
        and what ``fit`` learned in ``layerwise_export.json``. Replaces a folder this package wrote, refuses others."""
        self._check_fitted()
        params = {k: list(v) if isinstance(v, tuple) else v for k, v in self.get_params(deep=False).items()}
        params["output_dir"] = None if self.output_dir is None else str(self.output_dir)
        fitted = {"dev_score": self.dev_score_, "history": self.history_, "pre_step": self.pre_step_}
        scores = {} if self.dev_score_ is None else {"dev Spearman x100 (the epoch kept)": f"{self.dev_score_:.2f}"}
        return write_truncated(self.model_, folder, source=self.source_, scores=scores,
                               extra={"estimator": params, "fitted": fitted}, overwrite=True)

    @classmethod
    def load(cls, folder: str | os.PathLike, *, device: str | None = None) -> "TruncatedFineTuner":
        """The fitted estimator saved in ``folder`` by :meth:`save` (the same embeddings), on ``device`` (None:
        cpu)."""
        folder = Path(folder)
        marker = folder / EXPORT_MARKER
        info = json.loads(marker.read_text()) if marker.is_file() else {}
        if "estimator" not in info:
            raise UsageError(f"folder={str(folder)!r} holds no saved TruncatedFineTuner ({EXPORT_MARKER} with its "
                             "parameters missing); pass a folder written by TruncatedFineTuner.save")
        known = cls._get_param_names()
        params = {k: tuple(v) if k in _TUPLE_PARAMS and isinstance(v, list) else v
                  for k, v in info["estimator"].items() if k in known}
        est = cls(**{**params, "device": device})  # where it runs is the caller's, not the saved estimator's
        est.model_ = TruncatedModel.load(folder)
        if est.device is not None:
            est.model_.to(est.device)
        est.layers_ = tuple(est.model_.layers)
        est.n_layers_ = int(est.model_.encoder.config.num_hidden_layers)
        est.n_parameters_ = est.model_.n_parameters()
        fitted = info.get("fitted", {})
        est.dev_score_ = fitted.get("dev_score")
        est.history_ = fitted.get("history", {})
        est.pre_step_ = fitted.get("pre_step")
        est.source_ = info.get("source", {})
        est.model_path_ = folder
        return est
