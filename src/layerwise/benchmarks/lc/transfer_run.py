"""End-to-end transfer runs behind ``layerwise transfer`` and the ``transfer`` results page.

Each task is one part of a :class:`~layerwise.benchmarks.store.ResultsStore` (page ``transfer``), keyed on
the model identity (weights, tokenizer, config hashes), max length, dtype, the task's data checksum, every
protocol option and whether LC + MLP runs. The part is saved (``complete=False``) after every outer split, so
running the same command again continues where an interrupted run stopped; a finished task is reused without
encoding anything; a run with any setting changed computes afresh and leaves the other part in place.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from layerwise._progress import progress
from layerwise.benchmarks.schema import check_schema, stamp
from layerwise.benchmarks.store import Part, ResultsStore, model_key
from layerwise.data.checksum import content_checksum
from layerwise.data.senteval import TransferData, canonical_task, load_transfer
from layerwise.encoders.layer_encoder import LayerEncoder, ModelIdentity
from layerwise.encoders.registry import DEFAULT_MODEL
from layerwise.evaluation.classification import CLASSIFIER
from layerwise.methods.lc.transfer import TransferFeatures, TransferProtocol, TransferResult, run_transfer
from layerwise.reports import environment

logger = logging.getLogger(__name__)

__all__ = ["PAGE", "TRANSFER_SCHEMA", "TaskRun", "TransferRun", "TransferRunConfig", "describe_protocol",
           "encode_task", "run_transfer_tasks", "task_key"]

PAGE = "transfer"  # the store page every transfer part lives under
TRANSFER_SCHEMA = 1
DEFAULT_TASKS = ("mr", "cr", "subj", "sst2", "sst5", "trec", "mrpc")


@dataclass(frozen=True)
class TransferRunConfig:
    """What ``run_transfer_tasks`` runs: the model, the tasks, the protocol and how (threads, data folder)."""

    model: str = DEFAULT_MODEL  # built-in name or a local folder
    tasks: tuple[str, ...] = DEFAULT_TASKS
    protocol: TransferProtocol = TransferProtocol()
    head: bool = True  # also LC + MLP when the checkpoint has a trained pooler head
    n_jobs: int = 2  # parallel classifier fits (threads); does not change the numbers
    # stop each task once it holds this many outer splits (a partial part, continued by a later run without it);
    # None: all of the protocol's n_outer. Which splits exist, not their numbers: not in a part's key
    max_splits: int | None = None
    data_dir: str | None = None  # None: $LAYERWISE_DATA
    encoder_options: dict = field(default_factory=dict)  # LayerEncoder keywords (max_length, dtype, ...)

    def to_dict(self) -> dict:
        return {**asdict(self), "tasks": list(self.tasks), "protocol": self.protocol.to_dict()}

    @classmethod
    def from_dict(cls, d: dict) -> "TransferRunConfig":
        return cls(**{**d, "tasks": tuple(d["tasks"]), "protocol": TransferProtocol.from_dict(d["protocol"])})


@dataclass
class TaskRun:
    """One task of a transfer run, as stored: the protocol result and how it was computed."""

    task: str
    model: ModelIdentity
    result: TransferResult
    n_examples: int
    encode_seconds: float  # this invocation's encoding (0 when the task was reused)
    first_encode_seconds: float  # encoding by the run that started the task
    protocol_seconds: float  # summed over the invocations that computed splits
    head: str  # LC + MLP status
    environment: dict  # of the last invocation that computed splits
    runs: list[dict] = field(default_factory=list)  # who computed which splits, load average at start and save
    complete: bool = True
    data_checksum: str | None = None
    cache: dict | None = None  # layer-cache counts of this invocation's encoding
    migrated_from: str | None = None  # the old state file this part was converted from

    def payload(self) -> dict:
        d = {k: getattr(self, k) for k in ("task", "n_examples", "encode_seconds", "first_encode_seconds",
                                           "protocol_seconds", "head", "environment", "data_checksum", "cache")}
        d.update(model=self.model.to_dict(), result=self.result.to_dict())
        if self.migrated_from:
            d["migrated_from"] = self.migrated_from
        return stamp("transfer-task", TRANSFER_SCHEMA, d)

    @classmethod
    def from_part(cls, part: Part) -> "TaskRun":
        d = part.payload
        check_schema(d, "transfer-task", TRANSFER_SCHEMA, where=f"store part {part.page}/{part.name}")
        return cls(task=d["task"], model=ModelIdentity.from_dict(d["model"]),
                   result=TransferResult.from_dict(d["result"]), n_examples=d["n_examples"],
                   encode_seconds=d["encode_seconds"], first_encode_seconds=d["first_encode_seconds"],
                   protocol_seconds=d["protocol_seconds"], head=d["head"], environment=d["environment"],
                   runs=list(part.runs), complete=part.complete, data_checksum=d.get("data_checksum"),
                   cache=d.get("cache"), migrated_from=d.get("migrated_from"))


@dataclass
class TransferRun:
    """A model's transfer results over several tasks (what ``layerwise transfer`` prints and writes)."""

    model: ModelIdentity
    protocol: dict  # describe_protocol(): the protocol in words and numbers
    tasks: dict[str, TaskRun]
    environment: dict  # of this invocation
    encoder: dict = field(default_factory=dict)  # max_length, dtype, batch_size
    # the tasks this invocation computed splits of (the others were found finished in the store); not written out
    computed: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        tasks = {}
        for name, t in self.tasks.items():
            tasks[name] = {**t.payload(), "runs": t.runs, "complete": t.complete}
            for k in ("kind", "schema", "model"):
                tasks[name].pop(k)
        return stamp("transfer", TRANSFER_SCHEMA, {"model": self.model.to_dict(), "encoder": self.encoder,
                                                   "protocol": self.protocol, "environment": self.environment,
                                                   "tasks": tasks})

    @classmethod
    def from_dict(cls, d: dict) -> "TransferRun":
        check_schema(d, "transfer", TRANSFER_SCHEMA)
        model = ModelIdentity.from_dict(d["model"])
        tasks = {}
        for name, t in d["tasks"].items():
            body = stamp("transfer-task", TRANSFER_SCHEMA, {**t, "model": d["model"]})
            part = Part(PAGE, name, {}, body, bool(t.get("complete", True)), list(t.get("runs", [])))
            tasks[name] = TaskRun.from_part(part)
        return cls(model, d["protocol"], tasks, d["environment"], d.get("encoder", {}))


def describe_protocol(protocol: TransferProtocol) -> dict:
    """The protocol in words and numbers, as results files and pages show it."""
    p = protocol
    choice = ("top subset only (the ridge choice)" if p.shortlist == 1 else
              "every subset (exhaustive)" if p.shortlist is None else f"top {p.shortlist} subsets")
    projected = (f"; vectors projected on their top {p.screen_dim} principal directions for the screen only"
                 if p.screen_dim else "")
    return {
        "name": "BERT-LC transfer (Hosseini et al. 2023): all splits pooled; stratified outer 85/15 splits; "
                + ("inner stratified 82/18 splits" if p.inner == "shuffle" else f"{p.n_inner}-fold inner "
                   "cross-validation") + " choose the subset; logistic regression",
        "inner": p.inner,
        "n_outer": p.n_outer, "n_inner": p.n_inner, "seed": p.seed,
        "outer_seeds": [p.seed + k for k in range(p.n_outer)],
        "classifier": {"sklearn": "LogisticRegression", **CLASSIFIER,
                       "note": "C = 10 is our reading of the paper's 'regularization parameter 10'"},
        "selection": f"closed-form ridge screen of every subset (alpha {p.ridge_alpha:g} x mean feature variance"
                     f"{projected}), then SAGA inner CV on the {choice}",
        "shortlist": p.shortlist, "ridge_alpha": p.ridge_alpha, "screen_dim": p.screen_dim,
    }


def task_key(identity: ModelIdentity, encoder: dict, data_checksum: str, task: str, protocol: TransferProtocol,
             head: bool) -> dict:
    """Every setting that changes a task's numbers: model, max length, dtype, data, protocol, classifier, head."""
    return {"model": model_key(identity), "max_length": encoder["max_length"], "dtype": encoder["dtype"],
            "data": {"task": task, "checksum": data_checksum}, "protocol": protocol.to_dict(),
            "classifier": dict(CLASSIFIER), "head": bool(head)}


def part_name(identity: ModelIdentity, task: str, protocol: TransferProtocol | None = None) -> str:
    """A task part's name; the paper's exact protocol (k-fold inner CV, exhaustive SAGA) is a part of its own beside
    the default one, so neither supersedes the other."""
    exact = protocol is not None and protocol.inner == "kfold" and protocol.shortlist is None
    return f"{Path(identity.name).name}-{task}" + ("-exact" if exact else "")


def encode_task(encoder: LayerEncoder, data: TransferData, *, head: bool = True) -> tuple[TransferFeatures, float]:
    """Layer stacks of a task's sentences (pair tasks: both sides in one pass). Returns (features, seconds).

    ``head=True`` attaches the checkpoint's pooler head for LC + MLP when it has trained weights.
    """
    if len(data) == 0:
        raise ValueError(f"transfer task {data.name!r} has no examples")
    t0 = time.perf_counter()
    texts = list(data.sentences) + (list(data.sentences2) if data.is_pair else [])
    stack = encoder.encode(texts)
    seconds = time.perf_counter() - t0
    n = len(data)
    first = stack.take(np.arange(n)) if data.is_pair else stack
    second = stack.take(np.arange(n, 2 * n)) if data.is_pair else None
    pooler_head = None
    if head and encoder.identity.pooler_trained:
        w, b, _ = encoder.pooler_head()
        pooler_head = (w, b)
    return TransferFeatures(first=first, labels=data.labels, n_classes=data.n_classes, second=second,
                            head=pooler_head), seconds


def encoder_settings(encoder: LayerEncoder) -> dict:
    return {"max_length": encoder.max_length, "dtype": encoder.dtype, "batch_size": encoder.batch_size}


def run_transfer_tasks(config: TransferRunConfig, store: ResultsStore, *,
                       command: list[str] | None = None) -> TransferRun:
    """The transfer protocol on each task of ``config``; each task is a part of ``store`` (resumed, reused)."""
    if not config.tasks:
        raise ValueError("no transfer tasks given; name at least one of mr cr subj sst2 sst5 trec mrpc")
    tasks = [canonical_task(t) for t in config.tasks]  # fail early on an unknown name
    loaded = {t: load_transfer(t, data_dir=config.data_dir) for t in tasks}  # ... and on a missing task
    encoder = LayerEncoder(config.model, **config.encoder_options)
    env = environment(command)
    out = TransferRun(encoder.identity, describe_protocol(config.protocol), {}, env, encoder_settings(encoder))
    for task, data in loaded.items():
        out.tasks[task], computed = _run_task(encoder, data, config, store, env)
        out.computed += (task,) if computed else ()
    return out


def _run_task(encoder: LayerEncoder, data: TransferData, config: TransferRunConfig, store: ResultsStore,
              env: dict) -> tuple[TaskRun, bool]:
    """One task: reuse a finished part, continue an unfinished one, or compute it; saved after every split.
    Returns the task and whether this invocation computed any of it (False: a finished part, reused)."""
    checksum = content_checksum(data)
    key = task_key(encoder.identity, encoder_settings(encoder), checksum, data.name, config.protocol, config.head)
    name = part_name(encoder.identity, data.name, config.protocol)
    stored = store.load(PAGE, name, key)
    previous = TaskRun.from_part(stored) if stored is not None else None
    if previous is not None and previous.complete:
        logger.info("%s: finished under the same settings in %s, reused", data.name, store.path(PAGE, name, key))
        return previous, False
    features, enc_seconds = encode_task(encoder, data, head=config.head)
    head = encoder.head_status() if config.head else "not requested (--no-head)"
    task = TaskRun(data.name, encoder.identity, None, len(data), enc_seconds,
                   previous.first_encode_seconds if previous else enc_seconds,
                   previous.protocol_seconds if previous else 0.0, head, env,
                   list(previous.runs) if previous else [], False, checksum,
                   None if encoder.cache is None else encoder.cache.last_stats)
    n_before, prior_seconds, t0 = len(previous.result.splits) if previous else 0, task.protocol_seconds, time.perf_counter()
    history = list(task.runs)

    def save(result: TransferResult, done: bool = False) -> None:
        seconds = time.perf_counter() - t0
        new = len(result.splits) > n_before
        task.result, task.complete, task.protocol_seconds = result, done, prior_seconds + (seconds if new else 0.0)
        task.runs = history + ([{"started": env["date"], "command": env["command"], "source": env.get("source"),
                                 "load_at_start": env["machine"].get("load_average_1_5_15"),
                                 "load_at_save": [round(x, 2) for x in os.getloadavg()],
                                 "splits": [n_before, len(result.splits)], "protocol_seconds": seconds}]
                               if new else [])
        if not new and previous is not None:
            task.environment = previous.environment
        store.save(Part(PAGE, name, key, task.payload(), done, task.runs))

    show = logger.isEnabledFor(logging.INFO)
    with progress(total=config.protocol.n_outer, initial=n_before, desc=f"{data.name} outer splits", unit="split",
                  disable=not show) as bar:
        result = run_transfer(features, config.protocol, task=data.name, n_jobs=config.n_jobs,
                              previous=previous.result if previous else None,
                              on_split=lambda r: (save(r), bar.update(1)), max_splits=config.max_splits)
    save(result, done=len(result.splits) == config.protocol.n_outer)
    return task, True
