"""Loaders for the semantic textual similarity (STS) data sets.

Every loader returns an :class:`STSData`: sentence pairs, gold scores and the subset of each pair.

Data-directory layout (the one of the project's shared data folder)::

    <data_dir>/sts/STSB/sts-{train,dev,test}.csv                 STS Benchmark (also built in)
    <data_dir>/sts/STS12/STS.input.<subset>.txt + STS.gs.<subset>.txt
    <data_dir>/sts/STS13/...  STS14/...  STS15/...                same layout
    <data_dir>/sts/STS16/STS2016.input.<subset>.txt + STS2016.gs.<subset>.txt
    <data_dir>/sts/SICK/senteval_tokenized/SICK_{train,trial,test_annotated}.txt   SemEval-2014 split
    <data_dir>/sts/SICK/SICK.txt                                   full release (fallback)

``data_dir`` may point at the folder that contains ``sts/`` or at ``sts/`` itself. Without a
``data_dir`` the environment variable ``LAYERWISE_DATA`` is used; STS-B falls back to the copy shipped
in the package, every other set needs the data directory.

Quirks handled (see the data folder's README): STS-B is tab-separated with no quoting (some sentences
contain ``"``), rows have 7 or 9 fields and one row contains a ``\\x12`` control character; lines are
split on ``"\\n"`` only, never with :meth:`str.splitlines`, which would also break a line at control
characters such as ``\\x1c`` or ``\\x85`` inside a sentence. In STS12-16 a pair counts only where its gold
line is non-empty; ``STS.gs.ALL.txt`` (STS12) is not a subset and a gold file without an input file
(STS13 ``SMT``, not redistributable) is skipped. Files are read as UTF-8 and, if that fails, as latin-1.

SICK-R: SentEval and SimCSE report the 4927-pair SemEval-2014 test split, MTEB uses all 9927 pairs.
Those counts come from the SemEval-2014 files (``SICK_train.txt``, ``SICK_trial.txt``,
``SICK_test_annotated.txt``, SentEval's copies); the full release ``SICK.txt`` holds only 9840 of those
pairs (4906 in its ``SemEval_set == TEST``), so it is used only when the SemEval-2014 files are absent,
with a warning, and :attr:`STSData.split` says which one was read.
"""

from __future__ import annotations

import difflib
import gzip
import logging
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from layerwise.evaluation.metrics import AGGREGATIONS  # re-exported: every STS result names its aggregation

logger = logging.getLogger(__name__)

__all__ = [
    "AGGREGATIONS",
    "DATA_ENV_VAR",
    "STS_DATASETS",
    "sts_display_name",
    "STSData",
    "available_sts",
    "load_sts",
    "resolve_data_dir",
]

#: Environment variable naming the data directory when no ``data_dir`` is passed.
DATA_ENV_VAR = "LAYERWISE_DATA"

#: Canonical data set names, in reporting order.
STS_DATASETS: tuple[str, ...] = ("stsb", "sts12", "sts13", "sts14", "sts15", "sts16", "sickr")

_FOLDERS = {
    "stsb": "STSB",
    "sts12": "STS12",
    "sts13": "STS13",
    "sts14": "STS14",
    "sts15": "STS15",
    "sts16": "STS16",
    "sickr": "SICK",
}
_DISPLAY = {"stsb": "STS-B", "sickr": "SICK-R", **{f"sts{y}": f"STS{y}" for y in range(12, 17)}}


def sts_display_name(name: str) -> str:
    """The usual spelling of an STS set for tables (``"stsb"`` -> ``"STS-B"``); other names come back unchanged."""
    return _DISPLAY.get(name, name)
_SPLITS = {
    "stsb": ("train", "dev", "test", "all"),
    "sickr": ("train", "trial", "test", "all"),
    **{f"sts{y}": ("test",) for y in range(12, 17)},
}

# Normalised spelling (lower case, no spaces, "-", "_" or ".") -> canonical name.
_ALIASES = {
    "stsb": "stsb",
    "stsbenchmark": "stsb",
    "sickr": "sickr",
    "sick": "sickr",
    "sickrelatedness": "sickr",
    **{f"sts{y}": f"sts{y}" for y in range(12, 17)},
    **{f"sts20{y}": f"sts{y}" for y in range(12, 17)},
}

_STSB_PARTS = ("train", "dev", "test")
_STSB_BUILTIN_PACKAGE = "layerwise.data"
_STSB_BUILTIN_DIR = ("_builtin", "stsb")

# STS12-15: STS.gs.<subset>.txt; STS16: STS2016.gs.<subset>.txt.
_GOLD_RE = re.compile(r"^(?P<prefix>STS(?:\d{4})?)\.gs\.(?P<subset>.+)\.txt$")
_INPUT_RE = re.compile(r"^(?P<prefix>STS(?:\d{4})?)\.input\.(?P<subset>.+)\.txt$")

# SICK-R, SemEval-2014 files: split -> file name; searched in these folders under sts/SICK.
_SICK_SEMEVAL_FILES = {"train": "SICK_train.txt", "trial": "SICK_trial.txt", "test": "SICK_test_annotated.txt"}
_SICK_SEMEVAL_DIRS = ("senteval_tokenized", ".")
_SICK_FULL_FILE = "SICK.txt"


@dataclass(frozen=True, eq=False)
class STSData:
    """Sentence pairs with gold similarity scores.

    Attributes
    ----------
    name : str
        Canonical data set name, one of :data:`STS_DATASETS`.
    sentences1, sentences2 : list of str, each of length n
        The two sentences of every pair, as in the files (not stripped or tokenized).
    scores : ndarray of shape (n,), float64
        Gold similarity (0-5 for STS, 1-5 for SICK-R).
    subsets : ndarray of shape (n,), str
        Subset of each pair: STS12-16 the file's subset (``"MSRpar"``, ``"headlines"``, ...), STS-B the
        split (``"train"``, ``"dev"``, ``"test"``), SICK-R its SemEval-2014 set (``"TRAIN"``, ``"TRIAL"``, ``"TEST"``).
    split : str
        Which pairs these are, human readable (``"test"``, ``"all"``, ``"SemEval-2014 test (4927 pairs)"``).
        :meth:`take` keeps it unchanged.
    source : str
        The folder or file read, or ``"builtin:stsb"`` for the copy shipped in the package.
    """

    name: str
    sentences1: list[str]
    sentences2: list[str]
    scores: np.ndarray
    subsets: np.ndarray
    split: str
    source: str

    def __post_init__(self) -> None:
        sentences1 = list(self.sentences1)
        sentences2 = list(self.sentences2)
        scores = np.asarray(self.scores, dtype=np.float64)
        subsets = np.asarray(self.subsets, dtype=str)
        n = len(sentences1)
        if scores.ndim != 1 or subsets.ndim != 1:
            raise ValueError(
                f"STSData.scores and .subsets must be 1-d of shape (n,), got {scores.shape} and {subsets.shape}"
            )
        if not (len(sentences2) == scores.shape[0] == subsets.shape[0] == n):
            raise ValueError(
                "STSData fields differ in length: "
                f"sentences1 {n}, sentences2 {len(sentences2)}, scores {scores.shape[0]}, subsets {subsets.shape[0]}"
            )
        object.__setattr__(self, "sentences1", sentences1)
        object.__setattr__(self, "sentences2", sentences2)
        object.__setattr__(self, "scores", scores)
        object.__setattr__(self, "subsets", subsets)

    def __len__(self) -> int:
        return len(self.sentences1)

    def __repr__(self) -> str:
        return (
            f"STSData(name={self.name!r}, split={self.split!r}, n={len(self)}, "
            f"subsets={self.subset_names!r}, source={self.source!r})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, STSData):
            return NotImplemented
        return (
            (self.name, self.split, self.source, self.sentences1, self.sentences2)
            == (other.name, other.split, other.source, other.sentences1, other.sentences2)
            and np.array_equal(self.scores, other.scores)
            and np.array_equal(self.subsets, other.subsets)
        )

    __hash__ = None  # type: ignore[assignment]  # holds lists and arrays

    @property
    def subset_names(self) -> list[str]:
        """Sorted unique subset names."""
        return sorted(set(self.subsets.tolist()))

    def take(self, indices: Sequence[int] | np.ndarray) -> STSData:
        """The pairs at ``indices`` (ints of shape (k,), in that order, or a boolean mask of shape (n,))."""
        idx = _index_array(indices, len(self))
        return STSData(
            name=self.name,
            sentences1=[self.sentences1[i] for i in idx],
            sentences2=[self.sentences2[i] for i in idx],
            scores=self.scores[idx],
            subsets=self.subsets[idx],
            split=self.split,
            source=self.source,
        )


def _index_array(indices: Sequence[int] | np.ndarray, n: int) -> np.ndarray:
    """Integer indices of shape (k,) from ints or a boolean mask of shape (n,), range-checked."""
    idx = np.asarray(indices)
    if idx.dtype == np.bool_:
        if idx.shape != (n,):
            raise ValueError(f"a boolean mask must have shape ({n},), got {idx.shape}")
        idx = np.flatnonzero(idx)
    elif idx.size == 0:
        idx = idx.astype(np.intp)
    elif not np.issubdtype(idx.dtype, np.integer):
        raise TypeError(f"indices must be integers or a boolean mask, got dtype {idx.dtype}")
    if idx.ndim != 1:
        raise ValueError(f"indices must be 1-d, got shape {idx.shape}")
    if idx.size and (idx.min() < -n or idx.max() >= n):
        raise IndexError(f"indices must lie in [-{n}, {n}), got min {idx.min()} and max {idx.max()}")
    return idx


# ----------------------------------------------------------------------------------------------
# Public functions


def resolve_data_dir(data_dir: str | os.PathLike[str] | None = None) -> Path | None:
    """The data directory: ``data_dir`` if given, else ``$LAYERWISE_DATA``, else ``None``.

    An empty string counts as not given. A path that is given but does not exist raises
    :class:`FileNotFoundError` naming it and where it came from.
    """
    if data_dir is not None and str(data_dir) != "":
        path, origin = Path(data_dir).expanduser(), "the data_dir argument"
    else:
        env = os.environ.get(DATA_ENV_VAR, "").strip()
        if not env:
            return None
        path, origin = Path(env).expanduser(), f"the environment variable {DATA_ENV_VAR}"
    if not path.exists():
        raise FileNotFoundError(
            f"Data directory {path} (from {origin}) does not exist. Pass an existing folder that contains "
            f"sts/ (data_dir=... or --data-dir on the command line), or set {DATA_ENV_VAR} to it."
        )
    if not path.is_dir():
        raise NotADirectoryError(
            f"Data directory {path} (from {origin}) is a file; pass the folder that contains sts/ instead."
        )
    return path


def available_sts(data_dir: str | os.PathLike[str] | None = None) -> list[str]:
    """Names from :data:`STS_DATASETS` that can be loaded from ``data_dir`` (``"stsb"`` always: it is built in)."""
    root = resolve_data_dir(data_dir)
    found = ["stsb"]
    if root is None:
        return found
    sts_root = _sts_root(root)
    for key in STS_DATASETS[1:]:
        folder = _find_dir(sts_root, _FOLDERS[key])
        if folder is None:
            continue
        if key == "sickr":
            present = _sick_semeval_dir(folder, _SICK_SEMEVAL_FILES) is not None or (folder / _SICK_FULL_FILE).is_file()
        else:
            names = {path.name for path in folder.iterdir() if path.is_file()}
            present = any(
                (match := _INPUT_RE.match(name)) is not None
                and f"{match['prefix']}.gs.{match['subset']}.txt" in names
                for name in names
            )
        if present:
            found.append(key)
    return found


def load_sts(
    name: str,
    *,
    data_dir: str | os.PathLike[str] | None = None,
    split: str | None = None,
) -> STSData:
    """Load one STS data set.

    Parameters
    ----------
    name : str
        One of :data:`STS_DATASETS`, case-insensitive; aliases such as ``"STS-B"``, ``"STSBenchmark"``,
        ``"STS2012"`` and ``"SICK-R"`` are accepted.
    data_dir : path, optional
        Folder that contains ``sts/`` (or the ``sts/`` folder itself); defaults to ``$LAYERWISE_DATA``.
        STS-B without a data directory, or with one that has no ``sts/STSB``, uses the built-in copy.
    split : str, optional
        ``stsb``: ``"train"``, ``"dev"``, ``"test"`` (default) or ``"all"``; ``sts12``-``sts16``: ``None`` or
        ``"test"`` (they are test-only); ``sickr``: ``"test"`` (default, the 4927-pair SemEval-2014 test
        set of SentEval/SimCSE), ``"train"``, ``"trial"`` or ``"all"`` (9927 pairs, as MTEB).

    Returns
    -------
    STSData
        ``n`` pairs with scores of shape (n,) and the subset of each pair.
    """
    key = _canonical_name(name)
    split_key = _check_split(key, split)
    root = resolve_data_dir(data_dir)
    if key == "stsb":
        data = _load_stsb(root, split_key)
    elif key == "sickr":
        data = _load_sickr(root, split_key)
    else:
        data = _load_semeval(key, root)
    _check_score_range(data)
    logger.info(
        "Loaded %s (%s): %d pairs in %d subset(s) from %s",
        _DISPLAY[key], data.split, len(data), len(data.subset_names), data.source,
    )
    return data


#: The range of each set's gold scores (STS 0-5; SICK-R relatedness 1-5); a score outside it means a damaged file.
SCORE_RANGES = {**{k: (0.0, 5.0) for k in STS_DATASETS}, "sickr": (1.0, 5.0)}


def _check_score_range(data: STSData) -> None:
    lo, hi = SCORE_RANGES[data.name]
    bad = np.flatnonzero((data.scores < lo) | (data.scores > hi))
    if len(bad):
        i = int(bad[0])
        raise ValueError(
            f"{data.source}: gold score {data.scores[i]:g} of pair {i} (subset {str(data.subsets[i])!r}: "
            f"{data.sentences1[i][:40]!r}) is outside "
            f"{_DISPLAY[data.name]}'s range {lo:g}-{hi:g} ({len(bad)} such pairs); the file is damaged or not "
            f"{_DISPLAY[data.name]}: restore it")


# ----------------------------------------------------------------------------------------------
# Names, splits, folders


def _canonical_name(name: str) -> str:
    if not isinstance(name, str):
        raise TypeError(f"an STS data set name must be a str, got {type(name).__name__}")
    key = re.sub(r"[\s_.\-]", "", name).lower()
    if key in _ALIASES:
        return _ALIASES[key]
    close = difflib.get_close_matches(key, list(_ALIASES), n=1, cutoff=0.6)
    hint = f" Did you mean {_ALIASES[close[0]]!r}?" if close else ""
    raise ValueError(
        f"Unknown STS data set {name!r}.{hint} Valid names: {', '.join(STS_DATASETS)} "
        "(case-insensitive; aliases such as 'sts-b', 'STSBenchmark', 'sts2012', 'sick-r' also work)."
    )


def _check_split(key: str, split: str | None) -> str:
    valid = _SPLITS[key]
    if split is None:
        return "test"
    if not isinstance(split, str):
        raise TypeError(f"split must be a str or None, got {type(split).__name__}")
    normalized = split.strip().lower()
    if normalized in valid:
        return normalized
    if valid == ("test",):
        raise ValueError(
            f"{_DISPLAY[key]} is test-only: split must be None or 'test', got {split!r}. Valid splits: ['test']."
        )
    raise ValueError(f"Unknown split {split!r} for {_DISPLAY[key]}. Valid splits: {list(valid)}.")


def _find_dir(parent: Path, name: str) -> Path | None:
    """``parent / name`` if it is a folder, else a folder whose name matches ignoring case, else None."""
    exact = parent / name
    if exact.is_dir():
        return exact
    if not parent.is_dir():
        return None
    for child in sorted(parent.iterdir()):
        if child.name.lower() == name.lower() and child.is_dir():
            return child
    return None


def _sts_root(data_dir: Path) -> Path:
    """The ``sts/`` folder: ``data_dir/sts``, or ``data_dir`` itself when it already is that folder."""
    nested = _find_dir(data_dir, "sts")
    if nested is not None:
        return nested
    if data_dir.name.lower() == "sts" or any(_find_dir(data_dir, f) for f in _FOLDERS.values()):
        return data_dir
    return data_dir / "sts"


def _dataset_dir(key: str, root: Path | None) -> Path:
    """The folder of a data set that is not built in; FileNotFoundError with the fix when absent."""
    display, folder_name = _DISPLAY[key], _FOLDERS[key]
    if root is None:
        raise FileNotFoundError(
            f"{display} needs a data directory and none was given: pass data_dir=... (--data-dir on the "
            f"command line) or set {DATA_ENV_VAR} to the folder that contains sts/{folder_name}/. "
            "Only STS-B is built in."
        )
    sts_root = _sts_root(root)
    folder = _find_dir(sts_root, folder_name)
    if folder is None:
        raise FileNotFoundError(
            f"{display} not found: looked for the folder {sts_root / folder_name}. Pass data_dir=... "
            f"(--data-dir on the command line) or set {DATA_ENV_VAR} to the folder that contains "
            f"sts/{folder_name}/."
        )
    return folder


# ----------------------------------------------------------------------------------------------
# Reading text


def _decode(raw: bytes, where: str) -> str:
    """UTF-8 (a byte-order mark is dropped), else latin-1, which decodes any bytes."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        logger.warning("%s is not valid UTF-8 (byte %d); reading it as latin-1", where, err.start)
        return raw.decode("latin-1")


def _read_text(path: Path) -> str:
    return _decode(path.read_bytes(), str(path))


def _lines(text: str) -> list[str]:
    """Lines split on ``"\\n"`` only, a trailing ``"\\r"`` removed, no empty last line after a final newline."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _parse_score(text: str, where: str, lineno: int) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise ValueError(f"{where}:{lineno}: score {text!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{where}:{lineno}: score {text!r} is not finite")
    return value


def _read_table(text: str, where: str) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """A tab-separated table with a header line, no quoting: (header, [(line number, fields)])."""
    lines = _lines(text)
    if not lines:
        raise ValueError(f"{where} is empty; expected a tab-separated header line")
    header = [column.strip() for column in lines[0].split("\t")]
    rows = [(lineno, line.split("\t")) for lineno, line in enumerate(lines[1:], 2) if line.strip()]
    for lineno, fields in rows:
        if len(fields) != len(header):
            raise ValueError(
                f"{where}:{lineno}: {len(fields)} tab-separated fields, but the header has {len(header)}"
            )
    return header, rows


def _column_indices(header: list[str], names: Sequence[str], where: str) -> list[int]:
    missing = [name for name in names if name not in header]
    if missing:
        raise ValueError(f"{where} has no column(s) {missing}; its header is {header}")
    return [header.index(name) for name in names]


# ----------------------------------------------------------------------------------------------
# STS Benchmark


def _read_builtin_stsb(part: str) -> tuple[str, str]:
    where = f"builtin:stsb/sts-{part}.csv.gz"
    resource = resources.files(_STSB_BUILTIN_PACKAGE)
    for piece in (*_STSB_BUILTIN_DIR, f"sts-{part}.csv.gz"):
        resource = resource / piece
    try:
        raw = resource.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(
            f"The built-in STS-B file {where} is missing from the installed package. Reinstall layerwise, "
            "or in a source checkout run `python scripts/build_builtin_stsb.py`; or pass data_dir=... "
            f"(--data-dir) / set {DATA_ENV_VAR} to a folder that contains sts/STSB/."
        ) from None
    return _decode(gzip.decompress(raw), where), where


def _parse_stsb(text: str, where: str) -> tuple[list[str], list[str], list[float]]:
    """Rows of 7 or 9 tab-separated fields, no quoting: genre, file, year, id, score, s1, s2[, src1, src2]."""
    sentences1: list[str] = []
    sentences2: list[str] = []
    scores: list[float] = []
    for lineno, line in enumerate(_lines(text), 1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) not in (7, 9):
            raise ValueError(
                f"{where}:{lineno}: expected 7 or 9 tab-separated fields "
                f"(genre, file, year, id, score, sentence1, sentence2[, source1, source2]), got {len(fields)}"
            )
        scores.append(_parse_score(fields[4], where, lineno))
        sentences1.append(fields[5])
        sentences2.append(fields[6])
    return sentences1, sentences2, scores


def _load_stsb(root: Path | None, split: str) -> STSData:
    folder = None if root is None else _find_dir(_sts_root(root), _FOLDERS["stsb"])
    if root is not None and folder is None:
        logger.info("No sts/STSB folder under %s; using the built-in STS-B copy", root)
    parts = _STSB_PARTS if split == "all" else (split,)
    sentences1: list[str] = []
    sentences2: list[str] = []
    scores: list[float] = []
    subsets: list[str] = []
    for part in parts:
        if folder is None:
            text, where = _read_builtin_stsb(part)
        else:
            path = folder / f"sts-{part}.csv"
            if not path.is_file():
                raise FileNotFoundError(
                    f"STS-B {part} split not found: {path} does not exist. Put sts-{part}.csv there, or "
                    "remove the STSB folder from the data directory to use the built-in copy."
                )
            text, where = _read_text(path), str(path)
        part_s1, part_s2, part_scores = _parse_stsb(text, where)
        if not part_s1:
            raise ValueError(f"{where} has no STS-B pairs")
        sentences1 += part_s1
        sentences2 += part_s2
        scores += part_scores
        subsets += [part] * len(part_s1)
    return STSData(
        name="stsb",
        sentences1=sentences1,
        sentences2=sentences2,
        scores=np.asarray(scores, dtype=np.float64),
        subsets=np.asarray(subsets, dtype=str),
        split=split,
        source="builtin:stsb" if folder is None else str(folder),
    )


# ----------------------------------------------------------------------------------------------
# SemEval STS 2012-2016


def _semeval_subsets(folder: Path) -> list[tuple[str, Path, Path]]:
    """(subset, input file, gold file) for every subset that has both files, sorted by file name."""
    found = []
    paths = sorted(path for path in folder.iterdir() if path.is_file())
    names = {path.name for path in paths}
    for path in paths:
        match = _GOLD_RE.match(path.name)
        if match is None:
            continue
        prefix, subset = match["prefix"], match["subset"]
        if subset.upper() == "ALL":
            logger.debug("Ignoring %s: the concatenation of all subsets, not a subset", path)
            continue
        input_name = f"{prefix}.input.{subset}.txt"
        if input_name not in names:
            logger.info("Skipping subset %r: gold file %s has no input file %s", subset, path, input_name)
            continue
        found.append((subset, folder / input_name, path))
    for path in paths:
        match = _INPUT_RE.match(path.name)
        if match is not None and f"{match['prefix']}.gs.{match['subset']}.txt" not in names:
            logger.info("Skipping subset %r: input file %s has no gold file", match["subset"], path)
    return found


def _parse_semeval(input_path: Path, gold_path: Path) -> tuple[list[str], list[str], list[float]]:
    """Pairs whose gold line is non-empty; inputs have 2 fields (STS16: 4, the last two are sources)."""
    inputs = _lines(_read_text(input_path))
    golds = _lines(_read_text(gold_path))
    extra = [i for i, gold in enumerate(golds[len(inputs):], len(inputs) + 1) if gold.strip()]
    if extra:
        raise ValueError(
            f"{gold_path} has scores on lines {extra[:5]} but {input_path} has only {len(inputs)} lines; "
            "the two files must align line by line"
        )
    if len(golds) < len(inputs):
        logger.warning(
            "%s has %d lines but %s has %d; pairs without a gold line are not counted",
            gold_path, len(golds), input_path, len(inputs),
        )
    sentences1: list[str] = []
    sentences2: list[str] = []
    scores: list[float] = []
    for lineno, (gold, line) in enumerate(zip(golds, inputs), 1):
        if not gold.strip():
            continue
        fields = line.split("\t")
        if len(fields) not in (2, 4):
            raise ValueError(
                f"{input_path}:{lineno}: expected 2 tab-separated fields (sentence1, sentence2; STS16 adds "
                f"two source fields), got {len(fields)}"
            )
        scores.append(_parse_score(gold, str(gold_path), lineno))
        sentences1.append(fields[0])
        sentences2.append(fields[1])
    return sentences1, sentences2, scores


def _load_semeval(key: str, root: Path | None) -> STSData:
    folder = _dataset_dir(key, root)
    sentences1: list[str] = []
    sentences2: list[str] = []
    scores: list[float] = []
    subsets: list[str] = []
    for subset, input_path, gold_path in _semeval_subsets(folder):
        part_s1, part_s2, part_scores = _parse_semeval(input_path, gold_path)
        logger.debug("%s %s: %d pairs with a gold score", _DISPLAY[key], subset, len(part_s1))
        sentences1 += part_s1
        sentences2 += part_s2
        scores += part_scores
        subsets += [subset] * len(part_s1)
    if not sentences1:
        raise ValueError(
            f"{folder} holds no {_DISPLAY[key]} pairs: expected STS.input.<subset>.txt with "
            "STS.gs.<subset>.txt (STS16: STS2016.input/gs.<subset>.txt) whose gold lines are not all empty"
        )
    return STSData(
        name=key,
        sentences1=sentences1,
        sentences2=sentences2,
        scores=np.asarray(scores, dtype=np.float64),
        subsets=np.asarray(subsets, dtype=str),
        split="test",
        source=str(folder),
    )


# ----------------------------------------------------------------------------------------------
# SICK-R


def _sick_semeval_dir(folder: Path, files: dict[str, str]) -> Path | None:
    """The first folder of :data:`_SICK_SEMEVAL_DIRS` under ``folder`` holding all of ``files``."""
    for sub in _SICK_SEMEVAL_DIRS:
        candidate = folder if sub == "." else folder / sub
        if all((candidate / name).is_file() for name in files.values()):
            return candidate
    return None


def _load_sickr(root: Path | None, split: str) -> STSData:
    folder = _dataset_dir("sickr", root)
    parts = tuple(_SICK_SEMEVAL_FILES) if split == "all" else (split,)
    files = {part: _SICK_SEMEVAL_FILES[part] for part in parts}
    semeval_dir = _sick_semeval_dir(folder, files)
    columns = ("sentence_A", "sentence_B", "relatedness_score")
    sentences1: list[str] = []
    sentences2: list[str] = []
    scores: list[float] = []
    subsets: list[str] = []

    def add(fields: list[str], indices: list[int], where: str, lineno: int, subset: str) -> None:
        sentences1.append(fields[indices[0]])
        sentences2.append(fields[indices[1]])
        scores.append(_parse_score(fields[indices[2]], where, lineno))
        subsets.append(subset)

    if semeval_dir is not None:
        for part, file_name in files.items():
            path = semeval_dir / file_name
            header, rows = _read_table(_read_text(path), str(path))
            indices = _column_indices(header, columns, str(path))
            for lineno, fields in rows:
                add(fields, indices, str(path), lineno, part.upper())
        source = str(semeval_dir)
        what = "train+trial+test" if split == "all" else split
        split_text = f"SemEval-2014 {what} ({len(sentences1)} pairs)"
    else:
        path = folder / _SICK_FULL_FILE
        if not path.is_file():
            raise FileNotFoundError(
                f"SICK-R not found in {folder}: expected the SemEval-2014 files "
                f"{', '.join(files.values())} in {folder / _SICK_SEMEVAL_DIRS[0]} (or {folder}), "
                f"or the full release {path}."
            )
        header, rows = _read_table(_read_text(path), str(path))
        indices = _column_indices(header, (*columns, "SemEval_set"), str(path))
        for lineno, fields in rows:
            subset = fields[indices[3]].strip()
            if split == "all" or subset.lower() == split:
                add(fields, indices, str(path), lineno, subset)
        source = str(path)
        what = "all" if split == "all" else f"SemEval_set {split.upper()}"
        split_text = f"SICK full release, {what} ({len(sentences1)} pairs)"
        logger.warning(
            "Read SICK-R from the full release %s (%s). That release lacks some SemEval-2014 pairs (9840 "
            "pairs, 4906 in TEST), so results are not comparable with SentEval/SimCSE (4927 test pairs) or "
            "MTEB (all 9927 pairs); put %s in %s for comparable numbers.",
            path, split_text, ", ".join(_SICK_SEMEVAL_FILES.values()), folder / _SICK_SEMEVAL_DIRS[0],
        )
    if not sentences1:
        raise ValueError(f"{source} holds no SICK-R pairs for split {split!r}")
    return STSData(
        name="sickr",
        sentences1=sentences1,
        sentences2=sentences2,
        scores=np.asarray(scores, dtype=np.float64),
        subsets=np.asarray(subsets, dtype=str),
        split=split_text,
        source=source,
    )
