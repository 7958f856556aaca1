"""Loaders for the SentEval transfer (classification) tasks, in SentEval's own file formats.

Every loader returns a :class:`TransferData` holding *all* of a data set's files pooled together (the
BERT-LC protocol cross-validates over the pooled examples); :attr:`TransferData.splits` says which file
or split each example came from, so a caller that wants the original train/dev/test partition can
:meth:`~TransferData.take` it.

Data-directory layout (the one of the project's shared data folder)::

    <data_dir>/senteval/MR/rt-polarity.{pos,neg}                one sentence per line (latin-1)
    <data_dir>/senteval/CR/custrev.{pos,neg}                    same layout
    <data_dir>/senteval/SUBJ/subj.{objective,subjective}        same layout
    <data_dir>/senteval/MPQA/mpqa.{pos,neg}                     same layout (not in the shared data)
    <data_dir>/senteval/SST2/sentiment-{train,dev,test}         ``sentence<TAB>label``, labels 0/1 (UTF-8)
    <data_dir>/senteval/SST5/sentiment-{train,dev,test}         ``label sentence``, labels 0-4 (UTF-8)
    <data_dir>/senteval/TREC/train_5500.label, TREC_10.label    ``COARSE:fine question`` (latin-1)
    <data_dir>/senteval/MRPC/msr_paraphrase_{train,test}.txt    tab-separated, BOM + header line (UTF-8)

``data_dir`` is the folder that contains ``senteval/``; without it ``$LAYERWISE_DATA`` is used.

Labels and order follow SentEval, so fold assignments can match it: for the one-file-per-class tasks the
examples of the positive file come first (``pos``, SUBJ ``objective``) and get label 1, then the negative
file (``neg``, SUBJ ``subjective``) with label 0. TREC's six coarse classes are indexed alphabetically
(``ABBR`` 0 ... ``NUM`` 5) as in SentEval; SST, TREC and MRPC examples are ordered train, (dev,) test.

Quirks handled (see the data folder's README):

- MR, CR, SUBJ, MPQA and TREC are read as latin-1 (``train_5500.label`` is not valid UTF-8, and SentEval
  reads all of them so); SST and MRPC as UTF-8 (SST5 has UTF-8 accents such as ``crème brûlée``).
- About 101 lines per MR file (and 113 in ``subj.subjective``) contain ``M-`` escape sequences such as
  ``ladrM-sn`` or ``M-^W``: they are SentEval's own preprocessing of non-ASCII characters and are **kept
  as they are**, so the sentences match what SentEval encodes.
- MRPC files start with a UTF-8 byte-order mark and a header line (``Quality``, ``#1 ID``, ``#2 ID``,
  ``#1 String``, ``#2 String``); both are dropped. Fields are split on tabs with no quoting (sentences
  contain ``"``).
- Lines are split on ``"\\n"`` only; trailing whitespace and ``"\\r"`` are stripped and empty lines are
  skipped. CR has four empty lines (two per file, one of them at the end of each file): ``wc -l`` and
  SentEval, which keeps them as empty "sentences", count 3775 CR examples; this loader returns 3771.
- SST-2's train file is **phrase level**: 67,349 rows, most of them sub-sentence phrases of the SST
  parse trees, as in SentEval; dev (872) and test (1821) are whole sentences.
- TREC: the label is the coarse class before ``:``; the fine class is dropped; the question is the text
  after the first space.

Row counts of the shared data: MR 10662, CR 3771, SUBJ 10000, SST-2 67349+872+1821, SST-5 8544+1101+2210,
TREC 5452+500 (6 classes), MRPC 4076+1725 pairs (2 classes).
"""

from __future__ import annotations

import difflib
import logging
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from layerwise.data._files import index_array
from layerwise.data._senteval_formats import PARSERS, numbered_lines
from layerwise.data.nli import require_dir
from layerwise.data.sts import resolve_data_dir

logger = logging.getLogger(__name__)

__all__ = ["TRANSFER_TASKS", "TransferData", "available_transfer", "canonical_task", "display_name", "load_transfer"]

#: Canonical task names, in reporting order.
TRANSFER_TASKS: tuple[str, ...] = ("mr", "cr", "subj", "mpqa", "sst2", "sst5", "trec", "mrpc")

_SENTEVAL_DIR = "senteval"


@dataclass(frozen=True)
class _TaskSpec:
    display: str
    folder: str
    # (file name, split, label of every line or None when the label is on the line), in load order
    files: tuple[tuple[str, str, str | None], ...]
    label_names: tuple[str, ...]  # index -> original label
    fmt: str  # "lines", "sst2", "sst5", "trec" or "mrpc"
    encoding: str  # "latin-1", or "utf-8" (a byte-order mark dropped, latin-1 if not valid UTF-8)


def _binary(display: str, folder: str, pos: str, neg: str, pos_name: str, neg_name: str) -> _TaskSpec:
    return _TaskSpec(
        display, folder, ((pos, "all", pos_name), (neg, "all", neg_name)), (neg_name, pos_name), "lines", "latin-1"
    )


_SST_FILES = tuple((f"sentiment-{part}", part, None) for part in ("train", "dev", "test"))
_SPECS: dict[str, _TaskSpec] = {
    "mr": _binary("MR", "MR", "rt-polarity.pos", "rt-polarity.neg", "pos", "neg"),
    "cr": _binary("CR", "CR", "custrev.pos", "custrev.neg", "pos", "neg"),
    "subj": _binary("SUBJ", "SUBJ", "subj.objective", "subj.subjective", "objective", "subjective"),
    "mpqa": _binary("MPQA", "MPQA", "mpqa.pos", "mpqa.neg", "pos", "neg"),
    "sst2": _TaskSpec("SST-2", "SST2", _SST_FILES, ("0", "1"), "sst2", "utf-8"),
    "sst5": _TaskSpec("SST-5", "SST5", _SST_FILES, ("0", "1", "2", "3", "4"), "sst5", "utf-8"),
    "trec": _TaskSpec(
        "TREC", "TREC", (("train_5500.label", "train", None), ("TREC_10.label", "test", None)),
        ("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM"), "trec", "latin-1",
    ),
    "mrpc": _TaskSpec(
        "MRPC", "MRPC", (("msr_paraphrase_train.txt", "train", None), ("msr_paraphrase_test.txt", "test", None)),
        ("0", "1"), "mrpc", "utf-8",
    ),
}


@dataclass(frozen=True, eq=False)
class TransferData:
    """Labelled sentences (or sentence pairs) of one transfer task, all of its files pooled.

    Attributes
    ----------
    name : str
        Canonical task name, one of :data:`TRANSFER_TASKS`, or for a user's file its plain label
        (:func:`~layerwise.data.read_labeled`, :func:`~layerwise.data.data_label`).
    sentences : list of str, length n
        The sentence of every example (MRPC: the first sentence), stripped of trailing whitespace.
    sentences2 : list of str of length n, or None
        The second sentence of every pair (MRPC); ``None`` for single-sentence tasks.
    labels : ndarray of shape (n,), int64
        Class index in ``0 .. n_classes - 1``.
    label_names : list of str, length n_classes
        Index -> original label (``"pos"``, ``"4"``, ``"HUM"``, ...). :meth:`take` keeps all of them,
        so :attr:`n_classes` does not shrink when a subset lacks a class.
    splits : ndarray of shape (n,), str
        The file or split each example came from: ``"all"`` for the one-file-per-class tasks,
        ``"train"``/``"dev"``/``"test"`` for SST, ``"train"``/``"test"`` for TREC and MRPC, ``"file"`` for a
        user's file.
    source : str
        The folder read.
    """

    name: str
    sentences: list[str]
    sentences2: list[str] | None
    labels: np.ndarray
    label_names: list[str]
    splits: np.ndarray
    source: str

    def __post_init__(self) -> None:
        sentences = list(self.sentences)
        sentences2 = None if self.sentences2 is None else list(self.sentences2)
        label_names = [str(label) for label in self.label_names]
        labels = np.asarray(self.labels)
        splits = np.asarray(self.splits, dtype=str)
        n = len(sentences)
        if labels.ndim != 1 or splits.ndim != 1:
            raise ValueError(
                f"TransferData.labels and .splits must be 1-d of shape (n,), got {labels.shape} and {splits.shape}"
            )
        if labels.size and not np.issubdtype(labels.dtype, np.integer):
            raise TypeError(f"TransferData.labels must hold integer class indices, got dtype {labels.dtype}")
        labels = labels.astype(np.int64)
        if not (labels.shape[0] == splits.shape[0] == n) or (sentences2 is not None and len(sentences2) != n):
            raise ValueError(
                "TransferData fields differ in length: "
                f"sentences {n}, sentences2 {None if sentences2 is None else len(sentences2)}, "
                f"labels {labels.shape[0]}, splits {splits.shape[0]}"
            )
        if not label_names:
            raise ValueError("TransferData.label_names must name at least one class")
        if labels.size and (labels.min() < 0 or labels.max() >= len(label_names)):
            raise ValueError(
                f"TransferData.labels must lie in [0, {len(label_names)}) (one per label name), "
                f"got min {labels.min()} and max {labels.max()}"
            )
        object.__setattr__(self, "sentences", sentences)
        object.__setattr__(self, "sentences2", sentences2)
        object.__setattr__(self, "labels", labels)
        object.__setattr__(self, "label_names", label_names)
        object.__setattr__(self, "splits", splits)

    def __len__(self) -> int:
        return len(self.sentences)

    def __repr__(self) -> str:
        return (
            f"TransferData(name={self.name!r}, n={len(self)}, n_classes={self.n_classes}, "
            f"is_pair={self.is_pair}, splits={sorted(set(self.splits.tolist()))!r}, source={self.source!r})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TransferData):
            return NotImplemented
        return (
            (self.name, self.source, self.sentences, self.sentences2, self.label_names)
            == (other.name, other.source, other.sentences, other.sentences2, other.label_names)
            and np.array_equal(self.labels, other.labels)
            and np.array_equal(self.splits, other.splits)
        )

    __hash__ = None  # type: ignore[assignment]  # holds lists and arrays

    @property
    def n_classes(self) -> int:
        """Number of classes, ``len(label_names)``."""
        return len(self.label_names)

    @property
    def is_pair(self) -> bool:
        """True for sentence-pair tasks (MRPC), whose :attr:`sentences2` is not None."""
        return self.sentences2 is not None

    def take(self, indices: Sequence[int] | np.ndarray) -> TransferData:
        """The examples at ``indices`` (ints of shape (k,), in that order, or a boolean mask of shape (n,))."""
        idx = index_array(indices, len(self))
        return TransferData(
            name=self.name,
            sentences=[self.sentences[i] for i in idx],
            sentences2=None if self.sentences2 is None else [self.sentences2[i] for i in idx],
            labels=self.labels[idx],
            label_names=self.label_names,
            splits=self.splits[idx],
            source=self.source,
        )


# ----------------------------------------------------------------------------------------------
# Public functions


def available_transfer(data_dir: str | os.PathLike[str] | None = None) -> list[str]:
    """Names from :data:`TRANSFER_TASKS` whose files are all present under ``data_dir/senteval``.

    ``data_dir`` defaults to ``$LAYERWISE_DATA``; with neither, nothing is available (``[]``).
    """
    root = resolve_data_dir(data_dir)
    if root is None:
        return []
    found = []
    for key in TRANSFER_TASKS:
        spec = _SPECS[key]
        folder = root / _SENTEVAL_DIR / spec.folder
        if all((folder / file_name).is_file() for file_name, _, _ in spec.files):
            found.append(key)
    return found


def load_transfer(name: str, *, data_dir: str | os.PathLike[str] | None = None) -> TransferData:
    """Load one SentEval transfer task, all of its files pooled.

    Parameters
    ----------
    name : str
        One of :data:`TRANSFER_TASKS`, case-insensitive; ``"SST-2"``, ``"sst_5"`` and the like also work.
    data_dir : path, optional
        Folder that contains ``senteval/``; defaults to ``$LAYERWISE_DATA``.

    Returns
    -------
    TransferData
        ``n`` examples with labels of shape (n,) and the split of each; see the module docstring for the
        formats, the quirks handled and the row counts. SST-2's train split is phrase level (67,349 rows).
    """
    key = _canonical_name(name)
    spec = _SPECS[key]
    folder = require_dir(data_dir, _SENTEVAL_DIR, spec.folder)
    label_index = {label: i for i, label in enumerate(spec.label_names)}
    pair = spec.fmt == "mrpc"
    sentences: list[str] = []
    sentences2: list[str] = []
    labels: list[int] = []
    splits: list[str] = []
    for file_name, split, file_label in spec.files:
        path = folder / file_name
        if not path.is_file():
            raise FileNotFoundError(
                f"{spec.display} file {path} does not exist; {spec.display} needs "
                f"{', '.join(f for f, _, _ in spec.files)} in {folder}"
            )
        rows = PARSERS[spec.fmt](numbered_lines(path, spec.encoding), str(path))
        if not rows:
            raise ValueError(f"{path} holds no {spec.display} examples")
        for lineno, text, text2, label in rows:
            label = file_label if file_label is not None else label
            if label not in label_index:
                raise ValueError(
                    f"{path}:{lineno}: label {label!r} is not one of the {spec.display} labels {list(spec.label_names)}"
                )
            sentences.append(text)
            if pair:
                sentences2.append(text2)
            labels.append(label_index[label])
            splits.append(split)
        logger.debug("%s: %d examples from %s", spec.display, len(rows), path)
    if key == "sst2":
        logger.info("SST-2 train is phrase level (%d rows); dev and test are whole sentences", splits.count("train"))
    data = TransferData(name=key, sentences=sentences, sentences2=sentences2 if pair else None,
                        labels=np.asarray(labels, dtype=np.int64), label_names=list(spec.label_names),
                        splits=np.asarray(splits, dtype=str), source=str(folder))
    counts = {split: splits.count(split) for split in dict.fromkeys(splits)}
    logger.info(
        "Loaded %s: %d %s in %d classes (%s) from %s",
        spec.display, len(data), "pairs" if pair else "sentences", data.n_classes,
        ", ".join(f"{split} {count}" for split, count in counts.items()), data.source,
    )
    return data


# ----------------------------------------------------------------------------------------------
# Names and indices


def canonical_task(name: str) -> str:
    """The canonical key of a task name (``"SST-2"`` -> ``"sst2"``); unknown names raise ValueError with a hint."""
    return _canonical_name(name)


def display_name(name: str) -> str:
    """The usual spelling of a task for tables (``"sst2"`` -> ``"SST-2"``); unknown names raise ValueError."""
    return _SPECS[_canonical_name(name)].display


def _canonical_name(name: str) -> str:
    if not isinstance(name, str):
        raise TypeError(f"a transfer task name must be a str, got {type(name).__name__}")
    key = re.sub(r"[\s_.\-]", "", name).lower()
    if key in _SPECS:
        return key
    close = difflib.get_close_matches(key, TRANSFER_TASKS, n=1, cutoff=0.6)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise ValueError(
        f"Unknown transfer task {name!r}.{hint} Valid names: {', '.join(TRANSFER_TASKS)} "
        "(case-insensitive; 'SST-2' and 'sst_5' also work)."
    )
