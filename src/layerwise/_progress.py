"""One progress-bar factory for the library: ``tqdm.auto`` on a terminal, rare updates anywhere else.

Written to a file or a pipe (no terminal), a bar that redraws ten times a second fills the log with one line
per update; there it prints at most every :data:`FILE_MININTERVAL` seconds.
"""

from __future__ import annotations

import sys

from tqdm.auto import tqdm

__all__ = ["FILE_MININTERVAL", "progress"]

FILE_MININTERVAL = 60.0  # seconds between updates when the bar's stream is not a terminal


def _is_tty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # closed or replaced stream
        return False


def progress(iterable=None, **kwargs) -> tqdm:
    """``tqdm(iterable, **kwargs)`` with ``mininterval`` raised to 60 s when the stream is not a TTY.

    An explicit ``mininterval`` wins; ``file`` defaults to ``sys.stderr`` as in tqdm.
    """
    if "mininterval" not in kwargs and not _is_tty(kwargs.get("file") or sys.stderr):
        kwargs["mininterval"] = FILE_MININTERVAL
    return tqdm(iterable, **kwargs)
