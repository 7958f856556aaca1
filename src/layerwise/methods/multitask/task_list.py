"""A user's task list for multi-task fine-tuning: :class:`Task` (what one task is) and how its data is read.

A task names its kind, its data, its head and the hidden state (or learned layer mix) its head reads:

    kind                  data (a file read by ``layerwise.data.readers``, or in memory)    heads (first: default)
    classification        one text and a label: ``text,label``; TransferData; (texts, labels)   linear, prototypes,
                                                                                                transformer
    pair_classification   two texts and a label: ``sentence1,sentence2,label``; TransferData     linear
                          with ``sentences2``; (texts1, texts2, labels)
    pair_regression       two texts and a score: ``sentence1,sentence2,score``; STSData;       linear, cosine
                          (texts1, texts2, scores)
    nli                   NLI pre-finetuning of the encoder before the other tasks (no head to predict with); the
                          "head" is the objective on the sentence embeddings: regression (``sentence1,sentence2,
                          label`` with entailment / neutral / contradiction labels), contrastive or triplet
                          (``anchor,positive,negative``; TripletData; (anchors, positives, negatives))

Files are CSV, TSV, JSON lines or Parquet; ``columns`` maps the names above to the file's own column names.
``layer`` is a hidden-state index (0 the embedding output, L the last layer; negative counts from the end) or
``"mix"`` (a softmax mix of every hidden state, learned with the task). Labels are kept as they are in the data and
given back by ``predict``; scores are mapped to [0, 1] by the training data's range and back by ``predict``.

:func:`prepare_tasks` checks a list (errors name ``tasks[i].field``) and reads it into a
:class:`~layerwise.methods.multitask.data.TaskSet`; :func:`read_task_file` reads a list from JSON or TOML.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from layerwise.data.readers import DataFileError, data_label, read_labeled, read_pairs, read_triplets
from layerwise.errors import UsageError
from layerwise.losses.nli import NLI_LABEL_SCORES, NLI_OBJECTIVES
from layerwise.methods.multitask.data import LabelledPairs, LabelledSentences, TaskSet, TaskSpec, TaskSplits
from layerwise.modules.heads import PAIR_FEATURES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10: the tomli package (the `toml` extra), if installed
    try:
        import tomli as tomllib
    except ImportError:
        tomllib = None

__all__ = ["COLUMNS", "HEADS", "TASK_KINDS", "PreparedTask", "Task", "prepare_tasks", "read_task_file"]

TASK_KINDS = ("classification", "pair_classification", "pair_regression", "nli")
HEADS = {"classification": ("linear", "prototypes", "transformer"), "pair_classification": ("linear",),
         "pair_regression": ("linear", "cosine"), "nli": NLI_OBJECTIVES}
_PAIR_LABELS = ("sentence1", "sentence2", "label")
COLUMNS = {"classification": ("text", "label"), "pair_classification": _PAIR_LABELS,
           "pair_regression": ("sentence1", "sentence2", "score"), "nli": _PAIR_LABELS}
_TRIPLET_COLUMNS = ("anchor", "positive", "negative")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_RESERVED = ("nli", "tasks")  # names of training phases (folders)


@dataclass(frozen=True)
class Task:
    """One task of :class:`~layerwise.methods.multitask.estimator.MultitaskModel` (see the module docstring)."""

    name: str  # names the task in predict / score and its head's folder: letters, digits, _ . -
    kind: str  # one of TASK_KINDS
    data: Any  # training data: a file path (str or Path) or in-memory data of the kind
    head: str | None = None  # one of HEADS[kind] (None: the first); for "nli" the objective
    layer: int | str = -1  # the hidden state the head reads (-1: the last layer), or "mix" (a learned layer mix)
    dev: Any = None  # dev data like ``data`` (dev scores, best-epoch selection); None: the last epoch is kept
    columns: Mapping[str, str] | None = None  # the files' column names, e.g. {"text": "review", "label": "stars"}
    features: str = "concat"  # pair heads' input: "concat" [u; v], "abs_diff" [u; v; |u-v|], "cos" [u; v; cos]
    prototypes: int = 10  # head "prototypes": training sentences per label whose similarity the head reads
    transformer_layers: int = 1  # head "transformer": its transformer layers over the last layer's token states

    @property
    def objective(self) -> str | None:
        """The NLI objective (kind "nli"), else None."""
        return (self.head or NLI_OBJECTIVES[0]) if self.kind == "nli" else None


@dataclass(frozen=True)
class PreparedTask:
    """What the estimator keeps of a task after ``fit``: enough to rebuild its head and to predict."""

    name: str
    kind: str
    head: str
    layer: int | str  # a hidden-state index in 0..L, or "mix"
    features: str
    label_names: list | None  # classification kinds: class index -> the label as in the data
    score_range: tuple[float, float] | None  # pair_regression: (lo, hi) of the training scores
    source: str  # the data's plain label (a file's name, or "in-memory")
    dev_source: str | None

    @property
    def spec(self) -> TaskSpec:
        n = len(self.label_names) if self.label_names is not None else 0
        return TaskSpec(self.kind, n, tuple(self.score_range) if self.score_range else (0.0, 1.0))

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: dict) -> "PreparedTask":
        data = dict(data)
        if data.get("score_range") is not None:
            data["score_range"] = tuple(data["score_range"])
        return cls(**data)


def _where(i: int, field: str) -> str:
    return f"tasks[{i}].{field}"


def _check_task(i: int, task) -> None:
    if not isinstance(task, Task):
        raise UsageError(f"tasks[{i}] is {type(task).__name__}, not a Task; build each with "
                         "layerwise.Task(name, kind, data, ...)")
    if not isinstance(task.name, str) or not _NAME.match(task.name) or task.name in _RESERVED:
        raise UsageError(f"{_where(i, 'name')}={task.name!r} is invalid: use letters, digits, '_', '.' or '-' "
                         f"(not {' or '.join(map(repr, _RESERVED))})")
    if task.kind not in TASK_KINDS:
        raise UsageError(f"{_where(i, 'kind')}={task.kind!r} is invalid: use one of {', '.join(TASK_KINDS)}")
    if task.head is not None and task.head not in HEADS[task.kind]:
        raise UsageError(f"{_where(i, 'head')}={task.head!r} is invalid for kind {task.kind!r}: use one of "
                         f"{', '.join(HEADS[task.kind])} (or None: {HEADS[task.kind][0]})")
    layer = task.layer
    if layer != "mix" and (isinstance(layer, bool) or not isinstance(layer, (int, np.integer))):
        raise UsageError(f"{_where(i, 'layer')}={layer!r} is invalid: use a hidden-state index (0 the embedding "
                         "output, L the last layer; -1 counts from the end) or 'mix'")
    if (task.kind == "nli" or task.head == "transformer") and layer != -1:
        what = "an nli task trains the last layer's mean" if task.kind == "nli" else \
            "the transformer head reads the last layer's token states"
        raise UsageError(f"{_where(i, 'layer')}={layer!r} is invalid: {what}; leave layer at -1")
    if task.features not in PAIR_FEATURES:
        raise UsageError(f"{_where(i, 'features')}={task.features!r} is invalid: use one of {', '.join(PAIR_FEATURES)}")
    for field_name in ("prototypes", "transformer_layers"):
        value = getattr(task, field_name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UsageError(f"{_where(i, field_name)}={value!r} is invalid: use an integer >= 1")
    allowed = _column_names(task)
    if task.columns is not None:
        if not isinstance(task.columns, Mapping) or not all(isinstance(v, str) for v in task.columns.values()):
            raise UsageError(f"{_where(i, 'columns')}={task.columns!r} is invalid: use a mapping of column roles to "
                             f"the file's column names, roles {', '.join(allowed)}")
        unknown = sorted(set(task.columns) - set(allowed))
        if unknown:
            raise UsageError(f"{_where(i, 'columns')} has unknown roles {unknown} for a {task.kind} task"
                             f"{' (' + task.objective + ')' if task.kind == 'nli' else ''}: use {', '.join(allowed)}")
    if task.kind == "nli" and task.dev is not None:
        raise UsageError(f"{_where(i, 'dev')} is set, but an nli task has no dev score (it pre-finetunes the "
                         "encoder); leave dev=None")


def _column_names(task: Task) -> tuple[str, ...]:
    return _TRIPLET_COLUMNS if task.objective in ("contrastive", "triplet") else COLUMNS[task.kind]


def _is_path(data) -> bool:
    return isinstance(data, (str, os.PathLike))


def _label(data) -> str:
    """A plain name of the data: the file's (``data_label``), an in-memory set's own name, or "in-memory"."""
    if _is_path(data):
        return data_label(data)
    return getattr(data, "name", None) or "in-memory"


def _columns(task: Task) -> dict:
    return {role: (task.columns or {}).get(role, role) for role in _column_names(task)}


def _sequences(i: int, field: str, data, n: int, what: str, *, texts: int) -> list:
    """``data`` as a tuple/list of ``n`` equally long sequences, the first ``texts`` of them strings."""
    if not isinstance(data, (tuple, list)) or len(data) != n or isinstance(data[0], str):
        raise UsageError(f"{_where(i, field)} is {type(data).__name__}: give a file path or {what}")
    cols = [list(c) for c in data]
    if len({len(c) for c in cols}) != 1:
        raise UsageError(f"{_where(i, field)}: the {n} sequences differ in length ({[len(c) for c in cols]}); "
                         f"give {what} of equal length")
    for c in cols[:texts]:
        bad = next((j for j, t in enumerate(c) if not isinstance(t, str)), None)
        if bad is not None:
            raise UsageError(f"{_where(i, field)}: item {bad} of a text column is {type(c[bad]).__name__}, not str")
    return cols


def _read(i: int, field: str, task: Task, data) -> tuple[list, list | None]:
    """The raw columns of one split (texts, or texts1 and texts2, then labels or scores; or the triplets' three
    texts) and the label names in the data's own order (None: not given, sorted later)."""
    c = _columns(task)
    try:
        return _read_columns(i, field, task, data, c)
    except DataFileError as exc:  # the reader's column argument is a role of ``columns`` here
        role = _ROLES.get(exc.argument, exc.argument) if task.kind != "classification" else exc.argument
        argument = None if exc.argument is None else f"tasks[{i}].columns[{role!r}]"
        raise DataFileError(f"{_where(i, field)}: {exc.template}", argument=argument) from None


_ROLES = {"text": "sentence1", "text2": "sentence2"}  # read_labeled's arguments for pairs -> roles of columns


def _read_columns(i: int, field: str, task: Task, data, c: dict) -> tuple[list, list | None]:
    """The raw columns and the label names in the data's order (see :func:`_read`)."""
    if task.objective in ("contrastive", "triplet"):
        if _is_path(data):
            t = read_triplets(data, anchor=c["anchor"], positive=c["positive"], negative=c["negative"])
        elif hasattr(data, "anchors"):
            t = data
        else:
            return _sequences(i, field, data, 3, "(anchors, positives, negatives)", texts=3), None
        if t.negatives is None:
            raise UsageError(f"{_where(i, field)} has no negatives: the {task.objective} objective needs "
                             "anchor, positive and negative columns")
        return [list(t.anchors), list(t.positives), list(t.negatives)], None
    if task.kind == "classification":
        if _is_path(data):
            data = read_labeled(data, text=c["text"], label=c["label"], min_rows=2)
        if hasattr(data, "label_names"):
            if data.sentences2 is not None:
                raise UsageError(f"{_where(i, field)} holds sentence pairs: use kind 'pair_classification'")
            return [list(data.sentences), [data.label_names[k] for k in data.labels]], list(data.label_names)
        return _sequences(i, field, data, 2, "(texts, labels)", texts=1), None
    if task.kind in ("pair_classification", "nli"):
        if _is_path(data):
            data = read_labeled(data, text=c["sentence1"], text2=c["sentence2"], label=c["label"],
                                min_rows=2)
        if hasattr(data, "label_names"):
            if data.sentences2 is None:
                raise UsageError(f"{_where(i, field)} holds single texts: use kind 'classification'")
            return ([list(data.sentences), list(data.sentences2), [data.label_names[k] for k in data.labels]],
                    list(data.label_names))
        return _sequences(i, field, data, 3, "(texts1, texts2, labels)", texts=2), None
    if _is_path(data):
        data = read_pairs(data, sentence1=c["sentence1"], sentence2=c["sentence2"], score=c["score"], min_rows=2)
    if hasattr(data, "scores"):
        return [list(data.sentences1), list(data.sentences2), np.asarray(data.scores, dtype=np.float64)], None
    return _sequences(i, field, data, 3, "(texts1, texts2, scores)", texts=2), None


def _labels(i: int, field: str, raw: list, names: list | None, own: list | None = None) -> tuple[np.ndarray, list]:
    """Class indices of ``raw`` labels and the label names: those of the training data when ``names`` is given, else
    the data's ``own`` order (a file's), else sorted."""
    if names is None and own is not None:
        names = list(own)
        if len(names) < 2:
            raise UsageError(f"{_where(i, field)} has a single label {names!r}: a classification needs two or more")
    if names is None:
        try:
            names = sorted(set(raw))
        except TypeError:
            raise UsageError(f"{_where(i, field)}: labels of mixed types cannot be ordered; use one type") from None
        if len(names) < 2:
            raise UsageError(f"{_where(i, field)} has a single label {names!r}: a classification needs two or more")
        names = [n.item() if isinstance(n, np.generic) else n for n in names]
    index = {n: k for k, n in enumerate(names)}
    unknown = sorted({str(x) for x in raw if x not in index})
    if unknown:
        raise UsageError(f"{_where(i, field)} has labels {unknown[:5]} that the training data lacks "
                         f"(it has {names})")
    return np.asarray([index[x] for x in raw], dtype=np.int64), names


def _split(i: int, field: str, task: Task, data, names, score_range):
    """One split as labelled sentences or pairs (and the label names / score range it set)."""
    cols, own = _read(i, field, task, data)
    if len(cols[0]) < 2:
        raise UsageError(f"{_where(i, field)} has {len(cols[0])} example(s): give at least 2")
    if task.kind == "classification":
        labels, names = _labels(i, field, cols[1], names, own)
        return LabelledSentences(cols[0], labels), names, None
    if task.kind == "pair_classification":
        labels, names = _labels(i, field, cols[2], names, own)
        return LabelledPairs(cols[0], cols[1], labels.astype(np.float64)), names, None
    scores = np.asarray(cols[2], dtype=np.float64)
    if not np.isfinite(scores).all():
        raise UsageError(f"{_where(i, field)} has non-finite scores; give numbers")
    if score_range is None:
        score_range = (float(scores.min()), float(scores.max()))
        if not score_range[1] > score_range[0]:
            raise UsageError(f"{_where(i, field)} has one score for every pair ({score_range[0]}): a regression "
                             "needs different scores")
    return LabelledPairs(cols[0], cols[1], scores), None, score_range


def _nli(i: int, task: Task):
    cols, _ = _read(i, "data", task, task.data)
    if task.objective != "regression":
        return None, list(zip(*cols, strict=True))
    unknown = sorted({str(x) for x in cols[2]} - set(NLI_LABEL_SCORES))
    if unknown:
        raise UsageError(f"tasks[{i}].data has labels {unknown[:5]}: the NLI regression objective reads "
                         f"{', '.join(NLI_LABEL_SCORES)}")
    return LabelledPairs(cols[0], cols[1], np.asarray([NLI_LABEL_SCORES[str(x)] for x in cols[2]])), None


def prepare_tasks(tasks) -> tuple[TaskSet, list[PreparedTask], str | None]:
    """Check ``tasks`` (a list of :class:`Task`) and read their data: (the TaskSet to train on, the prepared tasks
    of the head tasks, in order, the NLI objective or None). Layers are checked against the encoder later (the
    data is read before any model)."""
    if not isinstance(tasks, (list, tuple)):
        raise UsageError(f"tasks must be a list of layerwise.Task, got {type(tasks).__name__}; wrap one task in a "
                         "list")
    if not tasks:
        raise UsageError("tasks is empty: give at least one layerwise.Task")
    for i, task in enumerate(tasks):
        _check_task(i, task)
    names = [t.name for t in tasks]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise UsageError(f"tasks: names {dup} are used twice; give every task its own name")
    nli = [i for i, t in enumerate(tasks) if t.kind == "nli"]
    if len(nli) > 1:
        raise UsageError(f"tasks[{nli[1]}].kind='nli': only one nli task is allowed (tasks[{nli[0]}] is one)")
    if len(nli) == len(tasks):
        raise UsageError("tasks holds only an nli task: add a task with a head (classification, pair_classification "
                         "or pair_regression)")
    splits, specs, prepared = {}, {}, []
    nli_pairs = nli_triplets = None
    for i, task in enumerate(tasks):
        if task.kind == "nli":
            nli_pairs, nli_triplets = _nli(i, task)
            continue
        train, label_names, score_range = _split(i, "data", task, task.data, None, None)
        dev = None if task.dev is None else _split(i, "dev", task, task.dev, label_names, score_range)[0]
        if task.head == "prototypes":
            counts = np.bincount(train.labels, minlength=len(label_names))
            if counts.min() < task.prototypes:
                raise UsageError(f"tasks[{i}].prototypes={task.prototypes} is more than the training texts of some "
                                 f"label ({dict(zip(label_names, counts.tolist()))}); use at most {counts.min()}")
        layer = task.layer if task.layer == "mix" else int(task.layer)
        p = PreparedTask(task.name, task.kind, task.head or HEADS[task.kind][0], layer, task.features, label_names,
                         score_range, _label(task.data), None if task.dev is None else _label(task.dev))
        splits[task.name], specs[task.name] = TaskSplits(train, dev, None), p.spec
        prepared.append(p)
    objective = tasks[nli[0]].objective if nli else None
    return TaskSet(splits, specs, nli_pairs, nli_triplets), prepared, objective


def read_task_file(path: str | os.PathLike) -> list[Task]:
    """The task list in a JSON or TOML file: ``{"tasks": [{"name": ..., "kind": ..., "data": FILE, ...}, ...]}``
    (TOML: ``[[tasks]]`` tables), fields as :class:`Task`; relative ``data`` / ``dev`` paths are taken from the task
    file's folder. Only the structure is checked here (the data is read by ``MultitaskModel.fit``)."""
    path = Path(path)
    if not path.is_file():
        raise DataFileError(f"task file {path} does not exist; give a .json or .toml file listing the tasks")
    suffix = path.suffix.lower()
    if suffix not in (".json", ".toml"):
        raise DataFileError(f"task file {path} is not .json or .toml; write the task list in one of them")
    try:
        text = path.read_text(encoding="utf-8")
        doc = json.loads(text) if suffix == ".json" else _toml_module().loads(text)
    except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError and TOMLDecodeError are ValueErrors
        if isinstance(exc, DataFileError):
            raise
        raise DataFileError(f"task file {path} cannot be read: {' '.join(str(exc).split())}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("tasks"), list) or not doc["tasks"]:
        raise DataFileError(f"task file {path} must hold a non-empty list 'tasks' of tables (name, kind, data, ...)")
    if set(doc) != {"tasks"}:
        raise DataFileError(f"task file {path} has keys {sorted(set(doc) - {'tasks'})} besides 'tasks'; settings "
                            "such as epochs are options of the command")
    known = {f.name for f in fields(Task)}
    tasks = []
    for i, entry in enumerate(doc["tasks"]):
        if not isinstance(entry, dict):
            raise DataFileError(f"task file {path}: tasks[{i}] is not a table of Task fields")
        unknown = sorted(set(entry) - known)
        missing = [k for k in ("name", "kind", "data") if k not in entry]
        if unknown or missing:
            what = f"unknown fields {unknown}" if unknown else f"no {', '.join(missing)}"
            raise DataFileError(f"task file {path}: tasks[{i}] has {what}; fields: {', '.join(sorted(known))}")
        entry = dict(entry)
        for key in ("data", "dev"):
            if isinstance(entry.get(key), str):
                entry[key] = str(path.parent / entry[key])
            elif entry.get(key) is not None:
                raise DataFileError(f"task file {path}: tasks[{i}].{key} must be a file path (a string)")
        tasks.append(Task(**entry))
    return tasks


def _toml_module():
    if tomllib is None:
        raise DataFileError("reading a .toml task file needs Python 3.11 or the tomli package (pip install "
                            "'layerwise[toml]'); or write the task list as .json")
    return tomllib
