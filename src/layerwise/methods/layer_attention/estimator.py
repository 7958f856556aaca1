"""``LayerAttentionPooler``: layer-wise attention pooling (Oh et al., COLING 2022) trained with a SimCSE objective.

    LayerAttentionPooler("my-encoder", objective="in_batch", steps=200).fit(pairs)   # returns self
    vectors = pooler.encode(texts)                                                   # (n, d) float32
    pooler.save("out")                      # a sentence-transformers folder, no remote code
    LayerAttentionPooler.load("out")        # the same embeddings

The estimator is a thin shell over the method's core: the model is a
:class:`~layerwise.encoders.trainable.SentenceModel` (encoder + :class:`~layerwise.modules.poolers.LayerPooler`), the
training is :class:`~layerwise.methods.layer_attention.train.ContrastiveTask` run by the one loop
(:func:`layerwise.training.train`), and the saved folder is the trained-pooler export
(:func:`layerwise.methods.layer_attention.export.write_trained_pooler`).

Training data and the objective (checked against each other in :meth:`LayerAttentionPooler.fit`):

=================  ==================================================  =========================================
objective          ``train``                                           loss
=================  ==================================================  =========================================
``unsup``          texts: a list of str                                SimCSE: the same text twice (dropout)
``in_batch``       pairs: ``(anchor, positive)`` tuples, or a          in-batch negatives
                   ``TripletData`` without negatives
``sup_hard_neg``   triplets: ``(anchor, positive, negative)`` tuples,  in-batch + the hard negatives
                   or a ``TripletData`` with negatives
=================  ==================================================  =========================================

Checkpoints: with ``output_dir=None`` (the default) nothing is written while training and the best dev state (when
``dev`` is given) is kept in memory; with a folder, ``last/`` and ``best/`` are written there at every evaluation, an
interrupted fit continues with ``resume=True`` and a folder that holds a run is refused otherwise (only
``last/``, ``best/`` are ever written there; nothing else in it is touched).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import numpy as np
import torch

from layerwise.base import SentenceEstimator
from layerwise.encoders.folder_code import check_no_code
from layerwise.encoders.registry import DEFAULT_MODEL
from layerwise.encoders.trainable import SentenceModel
from layerwise.errors import UsageError
from layerwise.losses.contrastive import OBJECTIVES
from layerwise.methods.layer_attention.export import write_trained_pooler
from layerwise.methods.layer_attention.train import ContrastiveConfig, ContrastiveTask, run_history
from layerwise.modules.poolers import POOLER_KINDS
from layerwise.training import prepare_output, seed_everything
from layerwise.training import train as train_loop
from layerwise.training.batches import check_in_batch_examples
from layerwise.training.distributed import run_on_main

logger = logging.getLogger(__name__)

__all__ = ["LayerAttentionPooler", "training_examples"]

_DATA_OF = {"unsup": "texts (a list of str)", "in_batch": "pairs (a list of (anchor, positive) tuples)",
            "sup_hard_neg": "triplets (a list of (anchor, positive, negative) tuples)"}
_OBJECTIVE_OF = {1: "unsup", 2: "in_batch", 3: "sup_hard_neg"}


def training_examples(train, objective: str, *, batch_size: int = 2) -> list:
    """``train`` as the examples ``objective`` trains on: a list of str (``unsup``), of (a, p) tuples (``in_batch``)
    or of (a, p, n) tuples (``sup_hard_neg``); a :class:`UsageError` naming ``train`` or ``objective`` otherwise.

    ``train``: a list of str, a list of 2- or 3-tuples (lists are taken as tuples), or a ``TripletData``
    (``.anchors``, ``.positives``, ``.negatives`` or None). At least two examples (in-batch negatives; a warning
    below ``batch_size``: :func:`~layerwise.training.batches.check_in_batch_examples`).
    """
    if objective not in OBJECTIVES:
        raise UsageError(f"objective={objective!r} is unknown; valid: {', '.join(OBJECTIVES)}")
    if hasattr(train, "anchors") and hasattr(train, "positives"):  # TripletData
        columns = [train.anchors, train.positives] + ([train.negatives] if train.negatives is not None else [])
        train = list(zip(*columns))
    if isinstance(train, (str, bytes)):
        raise UsageError("train must be a list of texts, pairs or triplets, got a single string; wrap it in a list")
    try:
        train = list(train)
    except TypeError:
        raise UsageError(f"train must be a list of texts, pairs or triplets, got {type(train).__name__}") from None
    check_in_batch_examples(len(train), batch_size, objective=objective)
    first = train[0]
    width = 1 if isinstance(first, str) else len(first) if isinstance(first, (tuple, list)) else None
    if width not in _OBJECTIVE_OF:
        raise UsageError(f"train[0] is {type(first).__name__}{'' if width is None else f' of length {width}'}; pass "
                         "texts (str), pairs (a, p) or triplets (a, p, n)")
    for i, item in enumerate(train):
        ok = isinstance(item, str) if width == 1 else (
            isinstance(item, (tuple, list)) and len(item) == width and all(isinstance(t, str) for t in item))
        if not ok:
            raise UsageError(f"train[{i}] is {item!r:.80}; every example must be like train[0] "
                             f"({_DATA_OF[_OBJECTIVE_OF[width]]}, strings only)")
    given = _OBJECTIVE_OF[width]
    if given != objective:
        raise UsageError(f"objective={objective!r} trains on {_DATA_OF[objective]}, but train holds "
                         f"{_DATA_OF[given].split(' (')[0]}: pass {_DATA_OF[objective].split(' (')[0]}, or "
                         f"objective={given!r}")
    return list(train) if width == 1 else [tuple(item) for item in train]


def _check_dev(dev):
    if dev is None:
        return None
    if not all(hasattr(dev, a) for a in ("sentences1", "sentences2", "scores")):
        raise UsageError(f"dev must be scored pairs (an STSData from layerwise.data.readers.read_pairs), got "
                         f"{type(dev).__name__}")
    n = len(dev.sentences1)
    if n < 3 or len(dev.sentences2) != n or len(dev.scores) != n:
        raise UsageError(f"dev must hold at least 3 scored pairs of equal length, got {n} sentences1, "
                         f"{len(dev.sentences2)} sentences2, {len(dev.scores)} scores")
    return dev


def _device(device: str | None) -> torch.device:
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        return torch.device(device)
    except (RuntimeError, TypeError):
        raise UsageError(f"device={device!r} is not a torch device; use 'cpu', 'cuda' or 'cuda:N'") from None


class LayerAttentionPooler(SentenceEstimator):
    """An encoder with a trained pooler over every hidden state, trained contrastively (SimCSE objectives).

    Parameters
    ----------
    model : str
        Built-in model name or local Hugging Face folder (the encoder, fine-tuned unless ``freeze_encoder``).
    pooler : str
        The pooler kind, one of :data:`~layerwise.modules.poolers.POOLER_KINDS`: ``layer_attention`` (the method) or a
        baseline trained the same way (``last_cls``, ``last_mean``, ``first0_last_mean``, ``scalar_mix``, ablations).
    objective : {"unsup", "in_batch", "sup_hard_neg"}
        What :meth:`fit` trains on: texts, (anchor, positive) pairs or (anchor, positive, negative) triplets.
    steps, batch_size, lr, pooler_lr, warmup_steps, weight_decay, max_grad_norm, temperature, grad_accumulation
        Optimisation: AdamW with the encoder at ``lr`` and the pooler at ``pooler_lr``, linear warm-up over
        ``warmup_steps`` then linear decay, in-batch negatives from ``batch_size`` examples, softmax temperature.
    freeze_encoder : bool
        Train the pooler only.
    eval_every : int
        Steps between evaluations on ``fit``'s ``dev`` pairs (and checkpoints in ``output_dir``); 0: at the end only.
    max_length : int
        Tokens per text.
    seed : int
        Seeds the pooler's initialisation, dropout and the batch order: one seed, one result.
    device : str or None
        Where to train and encode (None: CUDA when available, else CPU).
    output_dir : str, path or None
        Checkpoints (``last/``, ``best/``); None writes none (see the module docstring).
    resume : bool
        Continue the run saved in ``output_dir`` (same model, data and settings) instead of refusing it.

    Attributes
    ----------
    model_ : SentenceModel
        The trained encoder + pooler (the best dev state when ``dev`` was given).
    history_ : dict
        Steps, loss per step, dev Spearman per evaluation, ``best_dev``, seconds.
    best_dev_ : float or None
        The best dev Spearman x 100 (None without ``dev``).
    n_examples_ : int
        Training examples.
    """

    _fitted_attributes = ("model_", "history_", "best_dev_", "n_examples_")

    def __init__(self, model: str = DEFAULT_MODEL, *, pooler: str = "layer_attention", objective: str = "unsup",
                 steps: int = 500, batch_size: int = 64, lr: float = 3e-5, pooler_lr: float = 1e-3,
                 warmup_steps: int = 50, weight_decay: float = 0.0, max_grad_norm: float = 1.0,
                 temperature: float = 0.05, freeze_encoder: bool = False, grad_accumulation: int = 1,
                 eval_every: int = 100, max_length: int = 32, seed: int = 0, device: str | None = None,
                 output_dir: str | os.PathLike | None = None, resume: bool = False):
        self.model = model
        self.pooler = pooler
        self.objective = objective
        self.steps = steps
        self.batch_size = batch_size
        self.lr = lr
        self.pooler_lr = pooler_lr
        self.warmup_steps = warmup_steps
        self.weight_decay = weight_decay
        self.max_grad_norm = max_grad_norm
        self.temperature = temperature
        self.freeze_encoder = freeze_encoder
        self.grad_accumulation = grad_accumulation
        self.eval_every = eval_every
        self.max_length = max_length
        self.seed = seed
        self.device = device
        self.output_dir = output_dir
        self.resume = resume

    def training_config(self) -> ContrastiveConfig:
        """The training settings, validated (a :class:`UsageError` names the parameter)."""
        if self.objective not in OBJECTIVES:
            raise UsageError(f"objective={self.objective!r} is unknown; valid: {', '.join(OBJECTIVES)}")
        if self.pooler not in POOLER_KINDS:
            raise UsageError(f"pooler={self.pooler!r} is unknown; valid: {', '.join(POOLER_KINDS)}")
        if not isinstance(self.max_length, int) or isinstance(self.max_length, bool) or self.max_length < 2:
            raise UsageError(f"max_length={self.max_length!r} is invalid: use an integer >= 2 (tokens per text)")
        try:
            return ContrastiveConfig(
                objective=self.objective, steps=self.steps, batch_size=self.batch_size, lr=self.lr,
                pooler_lr=self.pooler_lr, warmup_steps=self.warmup_steps, weight_decay=self.weight_decay,
                max_grad_norm=self.max_grad_norm, temperature=self.temperature, freeze_encoder=self.freeze_encoder,
                eval_every=self.eval_every, seed=self.seed, grad_accumulation=self.grad_accumulation)
        except (TypeError, ValueError) as e:
            raise UsageError(str(e).replace("TrainingConfig.", "")) from None

    def fit(self, train, *, dev=None, show_progress: bool | None = None) -> "LayerAttentionPooler":
        """Train the encoder and pooler on ``train`` with :attr:`objective`; returns ``self``.

        Parameters
        ----------
        train : list of str, list of tuples, or TripletData
            Texts (``unsup``), (anchor, positive) pairs (``in_batch``) or (anchor, positive, negative) triplets
            (``sup_hard_neg``); see :func:`training_examples`.
        dev : STSData or None
            Scored pairs (``read_pairs``) evaluated every ``eval_every`` steps (Spearman); the best state is kept.
        show_progress : bool or None
            A progress bar (None: when this module's logger is at INFO).
        """
        config = self.training_config()
        examples = training_examples(train, config.objective, batch_size=config.batch_size)
        dev = _check_dev(dev)
        device = _device(self.device)
        if self.output_dir is not None:  # refuse an existing run (without resume) before the model loads
            run_on_main(prepare_output, self.output_dir, resume=self.resume, overwrite=False)  # torchrun: rank 0
        elif self.resume:
            raise UsageError("resume=True needs output_dir, the folder holding the run to continue")
        seed_everything(config.seed)  # the pooler's initial weights come from torch's global RNG
        model = SentenceModel.from_pretrained(self.model, pooler=self.pooler, max_length=self.max_length).to(device)
        task = ContrastiveTask(model, examples, config, dev)
        run = train_loop(task, config.training_config(), output_dir=self.output_dir, resume=self.resume,
                    show_progress=show_progress, restore_best=dev is not None)
        if not np.isfinite(run.loss).all():
            raise UsageError(f"training diverged (loss {run.loss[-1]}): lower lr={self.lr!r} or "
                             f"pooler_lr={self.pooler_lr!r}, or raise temperature={self.temperature!r}")
        self.model_ = model.eval()
        self.history_ = run_history(run, config)
        self.best_dev_ = run.best_dev
        self.n_examples_ = len(examples)
        return self

    def _encode(self, texts: list[str], *, batch_size: int | None) -> np.ndarray:
        return self.model_.encode(texts, batch_size=int(batch_size or self.batch_size))

    def save(self, folder: str | os.PathLike, *, overwrite: bool = False) -> Path:
        """Write a sentence-transformers folder: ``Transformer`` (every hidden state) -> the trained pooler.

        The pooler is a class of the installed layerwise package named in ``modules.json``; the folder holds no code.
        Load it with :meth:`load`, or as a ``SentenceTransformer`` with :func:`layerwise.load_sentence_transformer`
        (``trust_remote_code`` stays False). ``overwrite`` replaces an earlier layerwise export only.
        """
        from layerwise.encoders.model_files import weights_sha256
        from layerwise.encoders.registry import resolve_model

        self._check_fitted()
        try:
            base = {"name": str(self.model), "weights_sha256": weights_sha256(resolve_model(self.model).path)}
        except (OSError, ValueError):  # the base encoder is gone (a loaded estimator on another machine)
            base = {"name": str(self.model), "weights_sha256": None}
        params = {k: (os.fspath(v) if isinstance(v, os.PathLike) else v) for k, v in self.get_params().items()}
        extra = {"estimator": {"class": type(self).__name__, "params": params, "best_dev": self.best_dev_,
                               "n_examples": self.n_examples_, "steps_trained": len(self.history_["loss"])}}
        return write_trained_pooler(self.model_, folder, source=base, extra=extra, overwrite=overwrite)

    @classmethod
    def load(cls, folder: str | os.PathLike, *, device: str | None = None) -> "LayerAttentionPooler":
        """A fitted estimator from a folder written by :meth:`save` (or ``layerwise export`` of a trained pooler),
        on ``device`` (None: CUDA when available, else CPU; the device it was trained on is not restored)."""
        from transformers import AutoModel, AutoTokenizer

        from layerwise.export.sentence_transformers import EXPORT_MARKER
        from layerwise.export.st_modules import LayerPoolerModule

        if not Path(folder).is_dir():
            raise UsageError(f"folder={str(folder)!r} is not a folder; pass a folder written by "
                             "LayerAttentionPooler.save")
        folder = check_no_code(folder)
        marker = folder / EXPORT_MARKER
        info = json.loads(marker.read_text()) if marker.is_file() else {}
        if not isinstance(info, dict) or info.get("kind") != "trained_pooler":
            raise UsageError(f"folder={str(folder)!r} holds no trained pooler (no {EXPORT_MARKER} of kind "
                             "trained_pooler); pass a folder written by LayerAttentionPooler.save")
        entries = json.loads((folder / "modules.json").read_text())
        pooler_path = next((e["path"] for e in entries if e.get("type", "").endswith(".LayerPoolerModule")), None)
        if pooler_path is None:
            raise UsageError(f"folder={str(folder)!r}: its modules.json names no LayerPoolerModule")
        pooler = LayerPoolerModule.load(str(folder), subfolder=pooler_path, local_files_only=True).pooler.eval()
        encoder = AutoModel.from_pretrained(folder, local_files_only=True)
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        saved = info.get("estimator", {})
        params = cls._saved_params(saved.get("params", {}))
        params.update(pooler=pooler.config.kind, max_length=int(info["max_length"]), device=device)
        est = cls(**{"model": str(folder), **params})
        model = SentenceModel(encoder, tokenizer, pooler, max_length=int(info["max_length"]))
        est.model_ = model.to(_device(est.device)).eval()
        est.history_ = {}
        est.best_dev_ = saved.get("best_dev")
        est.n_examples_ = saved.get("n_examples")
        return est
