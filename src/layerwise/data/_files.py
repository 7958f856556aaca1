"""Reading the data files: decoding, line splitting, tab-separated tables, scores, index arrays, folders.

Shared by the STS, SentEval and NLI loaders (lines are split on ``"\\n"`` only, see :mod:`layerwise.data.sts`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

logger = logging.getLogger("layerwise.data.sts")  # the loaders' messages keep their logger name

__all__ = ["column_indices", "decode", "find_dir", "index_array", "parse_score", "split_lines", "read_table", "read_text"]


def index_array(indices: Sequence[int] | np.ndarray, n: int) -> np.ndarray:
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



def find_dir(parent: Path, name: str) -> Path | None:
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


def decode(raw: bytes, where: str) -> str:
    """UTF-8 (a byte-order mark is dropped), else latin-1, which decodes any bytes."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        logger.warning("%s is not valid UTF-8 (byte %d); reading it as latin-1", where, err.start)
        return raw.decode("latin-1")


def read_text(path: Path) -> str:
    return decode(path.read_bytes(), str(path))


def split_lines(text: str) -> list[str]:
    """Lines split on ``"\\n"`` only, a trailing ``"\\r"`` removed, no empty last line after a final newline."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def parse_score(text: str, where: str, lineno: int) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise ValueError(f"{where}:{lineno}: score {text!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{where}:{lineno}: score {text!r} is not finite")
    return value


def read_table(text: str, where: str) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """A tab-separated table with a header line, no quoting: (header, [(line number, fields)])."""
    lines = split_lines(text)
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


def column_indices(header: list[str], names: Sequence[str], where: str) -> list[int]:
    missing = [name for name in names if name not in header]
    if missing:
        raise ValueError(f"{where} has no column(s) {missing}; its header is {header}")
    return [header.index(name) for name in names]
