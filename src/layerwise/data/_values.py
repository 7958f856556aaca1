"""The values read from a user's file, checked one by one: texts, scores, labels, row counts, score variety.

Each check raises :class:`~layerwise.errors.DataFileError` naming the file, the position (``line N``/``row N``) and
the fix; where the fix is another column, the message names the reader's argument (see ``DataFileError.ARGUMENT``).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from layerwise.errors import DataFileError

__all__ = ["check_label", "check_rows", "check_score", "check_text", "check_varied", "label_order"]

ARG = DataFileError.ARGUMENT


def check_text(path: Path, where: str, what: str, value: object) -> str:
    if value is None:
        raise DataFileError(f"{path} {where}: the {what} is missing (null); fill it in or drop that row")
    if not isinstance(value, str):
        raise DataFileError(f"{path} {where}: the {what} is {type(value).__name__}, not a string; write it as "
                            "a string (or read another column)")
    if not value.strip():
        raise DataFileError(f"{path} {where}: the {what} is empty; fill it in or drop that row (empty texts "
                            "all get the same vector)")
    return value


def check_score(path: Path, where: str, arg: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise DataFileError(f"{path} {where}: the {arg} {value!r} is not a number; fix that row or pass {ARG} naming "
                            "the numeric column", argument=arg)
    try:
        number = float(value.strip() if isinstance(value, str) else value)
    except ValueError:
        raise DataFileError(f"{path} {where}: the {arg} {value!r} is not a number; fix that row or pass {ARG} naming "
                            "the numeric column", argument=arg) from None
    if not math.isfinite(number):
        raise DataFileError(f"{path} {where}: the {arg} {value!r} is not finite; give every row a finite number")
    return number


def check_label(path: Path, where: str, arg: str, value: object) -> str | int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise DataFileError(f"{path} {where}: the {arg} {value!r} is neither a string nor an integer; fix that row "
                            f"or pass {ARG} naming the label column", argument=arg)
    if isinstance(value, str) and not value.strip():
        raise DataFileError(f"{path} {where}: the {arg} is empty; give every row a label or drop it")
    return value


def check_rows(path: Path, n: int, min_rows: int, what: str) -> None:
    if n == 0:
        raise DataFileError(f"{path} holds a header but no rows of {what}; pass a file with rows")
    if n < min_rows:
        raise DataFileError(f"{path} holds {n} rows of {what} but at least {min_rows} are needed here; pass a file "
                            f"with {min_rows} or more rows")


def check_varied(path: Path, scores: np.ndarray, arg: str) -> None:
    if scores.size > 1 and scores.min() == scores.max():
        raise DataFileError(f"{path}: every {arg} is {scores[0]:g}, so a rank correlation with them is undefined; "
                            f"pass {ARG} naming the column of graded scores, or a file whose scores differ",
                            argument=arg)


def label_order(values: list[str | int]) -> list[str]:
    """Class names in index order: numerically if every label is an integer (or its digits), else as sorted strings."""
    names = {str(v) for v in values}

    def as_int(name: str) -> int | None:
        try:
            return int(name)
        except ValueError:
            return None

    if all(as_int(n) is not None for n in names):
        return sorted(names, key=lambda n: (as_int(n), n))
    return sorted(names)
