"""``MultitaskModel``: multi-task fine-tuning of one encoder on a user's own tasks, as an estimator.

    from layerwise import MultitaskModel, Task

    mt = MultitaskModel("encoder", tasks=[
        Task("sentiment", "classification", "reviews.csv", columns={"text": "review", "label": "stars"}),
        Task("similar", "pair_regression", "pairs.tsv", dev="pairs-dev.tsv", layer="mix"),
    ], epochs=2).fit()
    mt.predict("sentiment", ["great film"])          # labels as in the data
    mt.predict("similar", (["a cat"], ["a dog"]))    # scores in the data's scale
    mt.encode(texts)                                  # (n, d): the fine-tuned encoder's last-layer mean
    mt.save("out")                                    # SentenceTransformer("out") loads it; MultitaskModel.load too

``fit`` reads every task's data (:mod:`layerwise.methods.multitask.task_list`), builds a head per task on the encoder
(:class:`~layerwise.methods.multitask.model.MultitaskNetwork`) and trains the phases of
:func:`~layerwise.methods.multitask.run.train_phases` with the one training loop: an NLI task first (pre-finetuning
the encoder), then every task in the batch order of ``schedule``; the tasks named in ``freeze`` last, their heads
alone on the frozen encoder. Where tasks have dev data, the epoch with the best mean dev term (accuracy, or
(Pearson + 1) / 2) is kept. The saved folder is a sentence-transformers folder (encoder + mean pooling, built-in
modules) with the heads beside it in ``multitask/`` (the safetensors module format), so ``load`` restores
``predict``.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, fields
from pathlib import Path

import numpy as np

from layerwise.base import SentenceEstimator, check_texts
from layerwise.encoders.registry import DEFAULT_MODEL, resolve_model
from layerwise.errors import UsageError
from layerwise.export.sentence_transformers import EXPORT_MARKER, check_destination
from layerwise.files import atomic_folder
from layerwise.methods.multitask.config import SCHEDULES, MultitaskConfig
from layerwise.methods.multitask.evaluate import predict_embeddings, predict_logits, predict_pairs, task_metrics
from layerwise.methods.multitask.export import write_multitask_folder
from layerwise.methods.multitask.model import MultitaskNetwork
from layerwise.methods.multitask.run import RunControl, load_encoder, set_prototypes, train_phases
from layerwise.methods.multitask.task_list import PreparedTask, Task, prepare_tasks
from layerwise.modules import heads as head_modules
from layerwise.training import seed_everything
from layerwise.training.distributed import local_device

logger = logging.getLogger(__name__)

__all__ = ["MultitaskModel"]

HEADS_FOLDER = "multitask"  # beside the sentence-transformers modules: heads/, mixes/, shared/, the JSON files
ESTIMATOR_FILE = "estimator.json"
FORMAT_VERSION = 1


class MultitaskModel(SentenceEstimator):
    """Multi-task fine-tuning: one encoder, a head per task (see the module docstring).

    Parameters
    ----------
    model : str
        A built-in name or a local Hugging Face folder.
    tasks : list of Task
        The tasks (kind, data, head, layer read, dev data, column names): see :class:`Task`.
    epochs : int
        Epochs over the tasks' training data (the NLI task has ``nli_epochs``).
    schedule : {"task_by_task", "round_robin", "proportional"}
        Batch order within an epoch: every batch of one task after another, one batch of each in turn, or batches
        spread in proportion to the tasks' sizes.
    batch_size, lr, max_length, dropout : int, float, int, float
        Examples per step; the encoder's and heads' learning rate; tokens per sentence; the heads' dropout.
    mix_lr : float
        Learning rate of the layer mixes (tasks with ``layer="mix"``).
    shared_layers : int
        Hidden layers (ReLU + dropout) shared by every linear pair head (0: none); those heads must use the same
        ``features``.
    freeze : list of str
        Tasks trained after the others, their heads alone on the frozen encoder.
    nli_epochs, temperature, margin : int, float, float
        The NLI task's epochs and the temperature / margin of its contrastive / triplet objective.
    seed : int
        Seeds the heads' initialisation, the batch order and dropout.
    device : str or None
        Where the model trains (None: cpu).
    output_dir : str or None
        Checkpoints of each phase (``last/`` and ``best/``): a cut-off fit resumes there; None trains in memory.
    show_progress : bool or None
        Progress bars (None: when the log level is INFO).
    """

    _fitted_attributes = ("network_", "tasks_", "dev_scores_", "history_", "layer_weights_")

    def __init__(self, model: str = DEFAULT_MODEL, *, tasks=None, epochs: int = 10, schedule: str = "task_by_task",
                 batch_size: int = 32, lr: float = 2e-5, mix_lr: float = 1e-3, max_length: int = 128,
                 dropout: float = 0.1, shared_layers: int = 0, freeze=(), nli_epochs: int = 1,
                 temperature: float = 0.05, margin: float = 1.0, seed: int = 0, device: str | None = None,
                 output_dir: str | os.PathLike | None = None, show_progress: bool | None = None):
        self.model = model
        self.tasks = tasks
        self.epochs = epochs
        self.schedule = schedule
        self.batch_size = batch_size
        self.lr = lr
        self.mix_lr = mix_lr
        self.max_length = max_length
        self.dropout = dropout
        self.shared_layers = shared_layers
        self.freeze = freeze
        self.nli_epochs = nli_epochs
        self.temperature = temperature
        self.margin = margin
        self.seed = seed
        self.device = device
        self.output_dir = output_dir
        self.show_progress = show_progress

    # ------------------------------------------------------------------------------------------------ fit

    def _config(self, nli: str | None) -> MultitaskConfig:
        ints = ("epochs", "batch_size", "max_length", "shared_layers", "nli_epochs", "seed")
        for name in ints:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise UsageError(f"{name}={value!r} is invalid: use an integer")
        for name in ("lr", "mix_lr", "dropout", "temperature", "margin"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)):
                raise UsageError(f"{name}={value!r} is invalid: use a number")
        if self.schedule not in SCHEDULES:
            raise UsageError(f"schedule={self.schedule!r} is invalid: use one of {', '.join(SCHEDULES)}")
        try:
            return MultitaskConfig(name="tasks", epochs=int(self.epochs), schedule=self.schedule,
                                   batch_size=int(self.batch_size), lr=float(self.lr), mix_lr=float(self.mix_lr),
                                   max_length=int(self.max_length), dropout=float(self.dropout),
                                   shared_layers=int(self.shared_layers), nli=nli, nli_epochs=int(self.nli_epochs),
                                   temperature=float(self.temperature), margin=float(self.margin))
        except ValueError as exc:  # "MultitaskConfig.epochs=0 is invalid: use ...": the same names as here
            raise UsageError(str(exc).replace("MultitaskConfig.", "")) from None

    def _check_freeze(self, prepared: list[PreparedTask]) -> tuple[str, ...]:
        freeze = self.freeze
        if isinstance(freeze, str) or not isinstance(freeze, (list, tuple)):
            raise UsageError(f"freeze={freeze!r} is invalid: use a list of task names (or [])")
        names = [p.name for p in prepared]
        unknown = [f for f in freeze if f not in names]
        if unknown:
            raise UsageError(f"freeze names {unknown}, which are not tasks with a head; use names among {names}")
        return tuple(freeze)

    def _check_shared(self, prepared: list[PreparedTask]) -> str | None:
        """The pair features of the heads that share hidden layers (None: no sharing)."""
        if not self.shared_layers:
            return None
        pair = [(i, p) for i, p in enumerate(prepared) if p.kind != "classification" and p.head == "linear"]
        if not pair:
            raise UsageError(f"shared_layers={self.shared_layers} needs a task with a linear pair head "
                             "(pair_classification, or pair_regression with head 'linear'); set shared_layers=0")
        features = pair[0][1].features
        for _, p in pair:
            if p.features != features:
                i = next(k for k, t in enumerate(self.tasks) if t.name == p.name)
                raise UsageError(f"tasks[{i}].features={p.features!r} differs from {features!r}: the pair heads "
                                 f"that share layers (shared_layers={self.shared_layers}) read the same features")
        return features

    def _network(self, prepared: list[PreparedTask], features: str | None) -> MultitaskNetwork:
        h = head_modules
        encoder, tokenizer = load_encoder(self.model)
        d, n_heads, drop = encoder.config.hidden_size, encoder.config.num_attention_heads, float(self.dropout)
        shared = None if features is None else h.SharedHidden(h.pair_features_dim(features, d), d,
                                                              int(self.shared_layers), drop)
        width = d if shared is not None else 0
        heads = {}
        for p, task in zip(prepared, [t for t in self.tasks if t.kind != "nli"], strict=True):
            n = len(p.label_names or ())
            if p.head == "prototypes":
                heads[p.name] = h.PrototypeHead(d, task.prototypes * n, n, drop)
            elif p.head == "transformer":
                heads[p.name] = h.TransformerClassificationHead(d, n, task.transformer_layers, n_heads, drop)
            elif p.kind == "classification":
                heads[p.name] = h.ClassificationHead(d, n, drop)
            elif p.head == "cosine":
                heads[p.name] = h.CosineHead(drop)
            else:
                heads[p.name] = h.PairHead(d, p.features, drop, width, 1 if p.kind == "pair_regression" or n == 2
                                           else n)
        top = encoder.config.num_hidden_layers
        subsets = {p.name: (p.layer,) for p in prepared if p.layer != "mix" and p.layer != top}
        mixes = [p.name for p in prepared if p.layer == "mix"]
        return MultitaskNetwork(encoder, tokenizer, heads, shared=shared, subsets=subsets,
                                max_length=int(self.max_length), mix_tasks=mixes)

    def fit(self) -> "MultitaskModel":
        """Train the encoder and every task's head on the tasks' data; returns ``self``.

        Every task's data is read and checked first (errors name ``tasks[i].field``), before the model loads.
        """
        from transformers import AutoConfig

        taskset, prepared, nli = prepare_tasks(self.tasks)  # the data first: a bad file fails before any model
        config = self._config(nli)
        frozen = self._check_freeze(prepared)
        features = self._check_shared(prepared)
        n_layers = AutoConfig.from_pretrained(resolve_model(self.model).path, local_files_only=True).num_hidden_layers
        prepared = _resolve_layers(self.tasks, prepared, n_layers + 1)
        seed_everything(int(self.seed))  # before the heads are built: one seed, one initialisation
        network = self._network(prepared, features).to(local_device(self.device))
        protos = [(p.name, task.prototypes) for p, task in zip(prepared, [t for t in self.tasks if t.kind != "nli"],
                                                               strict=True) if p.head == "prototypes"]

        def set_all(net, names):  # a frozen task's prototypes are embedded once its encoder is final
            for name, n in protos:
                if name in names:
                    set_prototypes(net, taskset, n, int(self.seed), task=name)

        set_all(network, {name for name, _ in protos} - set(frozen))
        control = RunControl(resume=self.output_dir is not None, device=self.device, show_progress=self.show_progress,
                             on_freeze=lambda net: set_all(net, set(frozen)))
        try:
            summaries = train_phases(network, taskset, config, int(self.seed), self.output_dir, tasks=taskset.names,
                                     frozen=frozen, control=control)
        except ValueError as exc:  # the checkpoints of another fit (model, data or settings differ)
            if self.output_dir is None or "cannot resume" not in str(exc):
                raise
            raise UsageError(f"output_dir={os.fspath(self.output_dir)!r} holds the checkpoints of a fit with other "
                             f"settings ({str(exc).split('differs in ')[-1].split(';')[0]}): give another "
                             "output_dir (or remove that one) to fit these settings") from None
        network.eval()
        self.dev_scores_ = {p.name: task_metrics(network, p.name, p.spec, taskset.task(p.name).dev,
                                                 batch_size=int(self.batch_size))
                            for p in prepared if taskset.task(p.name).dev is not None}
        for name, metrics in self.dev_scores_.items():
            logger.info("%s dev: %s", name, ", ".join(f"{k} {v:.4f}" for k, v in metrics.items()))
        self.network_ = network
        self.tasks_ = {p.name: p for p in prepared}
        self.history_ = [asdict(s) for s in summaries]
        self.layer_weights_ = network.layer_weights()
        return self

    # ------------------------------------------------------------------------------------------------ use

    def _encode(self, texts: list[str], *, batch_size: int | None) -> np.ndarray:
        return predict_embeddings(self.network_, texts, batch_size=int(batch_size or self.batch_size))

    def _task(self, task: str) -> PreparedTask:
        self._check_fitted()
        if task not in self.tasks_:
            nli = [t.name for t in (self.tasks or ()) if isinstance(t, Task) and t.kind == "nli"]
            why = " (an nli task pre-finetunes the encoder and has no head)" if task in nli else ""
            raise UsageError(f"task={task!r} has no head{why}; predict with one of {sorted(self.tasks_)}")
        return self.tasks_[task]

    def _inputs(self, p: PreparedTask, X) -> tuple[list[str], ...]:
        if p.kind == "classification":
            return (check_texts(X, name="texts"),)
        if not isinstance(X, (tuple, list)) or len(X) != 2 or isinstance(X[0], str):
            raise UsageError(f"task {p.name!r} is a {p.kind} task: pass the pairs as (texts1, texts2), two lists "
                             "of equal length")
        first, second = check_texts(X[0], name="texts1"), check_texts(X[1], name="texts2")
        if len(first) != len(second):
            raise UsageError(f"texts1 has {len(first)} texts and texts2 {len(second)}: give one per pair")
        return first, second

    def predict(self, task: str, X) -> np.ndarray:
        """Predictions of ``task`` for ``X``: a list of texts (classification) or a pair ``(texts1, texts2)``.

        Returns
        -------
        ndarray of shape (n,)
            Labels as in the task's data (classification kinds), or scores in the data's scale (pair_regression).
        """
        p = self._task(task)
        inputs = self._inputs(p, X)
        self.network_.eval()
        bs = int(self.batch_size)
        if p.kind == "classification":
            return np.asarray(p.label_names)[predict_logits(self.network_, task, inputs[0], batch_size=bs).argmax(1)]
        out = predict_pairs(self.network_, task, *inputs, batch_size=bs)
        if p.kind == "pair_regression":
            return p.spec.unscaled(out)
        return np.asarray(p.label_names)[(out > 0).astype(np.int64) if out.ndim == 1 else out.argmax(1)]

    def score(self, task: str, X, y) -> float:
        """Accuracy of ``predict(task, X)`` against the labels ``y`` (classification kinds), or the Pearson
        correlation of the predicted scores with the scores ``y`` (pair_regression); on the scale of ``dev_scores_``
        and of the multi-task report it reproduces (accuracy in 0..1, Pearson in -1..1), not x100 as
        :meth:`LayerCombination.score <layerwise.LayerCombination.score>`."""
        pred = self.predict(task, X)
        y = np.asarray(y)
        if y.shape != pred.shape:
            raise UsageError(f"y has shape {y.shape}, expected ({len(pred)},): one label or score per example")
        if self.tasks_[task].kind != "pair_regression":
            return float(np.mean(pred == y))
        from scipy.stats import pearsonr

        return float(pearsonr(pred, y.astype(np.float64))[0]) if np.ptp(pred) > 0 else 0.0

    # ------------------------------------------------------------------------------------------------ save / load

    def save(self, folder: str | os.PathLike) -> Path:
        """Write a sentence-transformers folder (the encoder + mean pooling: ``encode``) with the heads in
        ``multitask/``; a folder this library wrote before is replaced, any other non-empty folder refused."""
        self._check_fitted()
        params = {k: v for k, v in self.get_params(deep=False).items() if k not in ("tasks", "output_dir")}
        info = {"format_version": FORMAT_VERSION, "params": params, "tasks": [p.to_dict() for p in self.tasks_.values()],
                "task_list": _task_list(self.tasks), "dev_scores": self.dev_scores_, "history": self.history_,
                "layer_weights": self.layer_weights_}

        folder = Path(folder)
        check_destination(folder, overwrite=True)  # a folder that layerwise did not write is refused
        with atomic_folder(folder, replaceable=lambda p: (p / EXPORT_MARKER).is_file()) as tmp:
            write_multitask_folder(self.network_, tmp, source={"name": os.fspath(self.model)}, overwrite=True,
                                   name=folder.name)
            self.network_.save_heads(tmp / HEADS_FOLDER)
            (tmp / HEADS_FOLDER / ESTIMATOR_FILE).write_text(json.dumps(info, indent=2, default=_jsonable) + "\n")
        return folder

    @classmethod
    def load(cls, folder: str | os.PathLike, *, device: str | None = None) -> "MultitaskModel":
        """The fitted estimator saved in ``folder`` by :meth:`save` (``encode`` and ``predict`` work), on ``device``
        (None: cpu; the device it was trained on is not restored)."""
        folder = Path(folder)
        path = folder / HEADS_FOLDER / ESTIMATOR_FILE
        if not path.is_file():
            raise UsageError(f"folder={str(folder)!r} holds no saved MultitaskModel ({HEADS_FOLDER}/{ESTIMATOR_FILE} "
                             "is missing); pass a folder written by MultitaskModel.save")
        info = json.loads(path.read_text())
        if info.get("format_version") != FORMAT_VERSION:
            raise UsageError(f"{path} has format {info.get('format_version')}, expected {FORMAT_VERSION}: save it "
                             "again with this version of layerwise")
        tasks = None if info["task_list"] is None else [Task(**t) for t in info["task_list"]]
        est = cls(**cls._saved_params(info["params"]), tasks=tasks, device=device)
        est.network_ = MultitaskNetwork.load_parts(folder, folder / HEADS_FOLDER).to(local_device(device))
        est.tasks_ = {t["name"]: PreparedTask.from_dict(t) for t in info["tasks"]}
        est.dev_scores_, est.history_, est.layer_weights_ = info["dev_scores"], info["history"], info["layer_weights"]
        return est


def _resolve_layers(tasks, prepared: list[PreparedTask], n_states: int) -> list[PreparedTask]:
    """The prepared tasks with their layer as a hidden state in 0..n_states - 1 (or "mix"), checked."""
    out = []
    head_tasks = [i for i, t in enumerate(tasks) if t.kind != "nli"]
    for i, p in zip(head_tasks, prepared, strict=True):
        layer = p.layer
        if layer != "mix":
            if not -n_states <= int(layer) < n_states:
                raise UsageError(f"tasks[{i}].layer={layer!r} is invalid: the encoder has hidden states "
                                 f"0..{n_states - 1} (0 the embedding output, {n_states - 1} the last layer; -1 "
                                 "counts from the end), or use 'mix'")
            layer = int(layer) % n_states
        out.append(PreparedTask(**{**{f.name: getattr(p, f.name) for f in fields(p)}, "layer": layer}))
    return out


def _jsonable(value):
    """Paths and numpy scalars in the saved settings as JSON values."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _task_list(tasks) -> list[dict] | None:
    """The task list as JSON (for ``load`` to give back a refittable estimator), or None when some data is in
    memory (not saved)."""
    out = []
    for t in tasks or ():
        if not all(v is None or isinstance(v, (str, os.PathLike)) for v in (t.data, t.dev)):
            return None
        d = {f.name: getattr(t, f.name) for f in fields(t)}
        d["data"] = os.fspath(t.data)
        d["dev"] = None if t.dev is None else os.fspath(t.dev)
        d["columns"] = None if t.columns is None else dict(t.columns)
        out.append(d)
    return out
