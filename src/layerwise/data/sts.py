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
import logging
import os
import re
from pathlib import Path

import numpy as np

from layerwise.data._files import find_dir
from layerwise.data._sts_common import DATA_ENV_VAR, DISPLAY, FOLDERS, STS_DATASETS, STSData, find_sts_root
from layerwise.data._sts_releases import (
    INPUT_RE,
    SICK_FULL_FILE,
    SICK_SEMEVAL_FILES,
    load_semeval,
    load_sickr,
    load_stsb,
    sick_semeval_dir,
)

logger = logging.getLogger(__name__)

__all__ = [
    "DATA_ENV_VAR",
    "STS_DATASETS",
    "sts_display_name",
    "STSData",
    "available_sts",
    "load_sts",
    "resolve_data_dir",
]


def sts_display_name(name: str) -> str:
    """The usual spelling of an STS set for tables (``"stsb"`` -> ``"STS-B"``); other names come back unchanged."""
    return DISPLAY.get(name, name)


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
    sts_root = find_sts_root(root)
    for key in STS_DATASETS[1:]:
        folder = find_dir(sts_root, FOLDERS[key])
        if folder is None:
            continue
        if key == "sickr":
            present = sick_semeval_dir(folder, SICK_SEMEVAL_FILES) is not None or (folder / SICK_FULL_FILE).is_file()
        else:
            names = {path.name for path in folder.iterdir() if path.is_file()}
            present = any(
                (match := INPUT_RE.match(name)) is not None
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
        data = load_stsb(root, split_key)
    elif key == "sickr":
        data = load_sickr(root, split_key)
    else:
        data = load_semeval(key, root)
    _check_score_range(data)
    logger.info(
        "Loaded %s (%s): %d pairs in %d subset(s) from %s",
        DISPLAY[key], data.split, len(data), len(data.subset_names), data.source,
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
            f"{DISPLAY[data.name]}'s range {lo:g}-{hi:g} ({len(bad)} such pairs); the file is damaged or not "
            f"{DISPLAY[data.name]}: restore it")


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
            f"{DISPLAY[key]} is test-only: split must be None or 'test', got {split!r}. Valid splits: ['test']."
        )
    raise ValueError(f"Unknown split {split!r} for {DISPLAY[key]}. Valid splits: {list(valid)}.")
