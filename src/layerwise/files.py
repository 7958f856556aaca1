"""Folders written all at once: content goes into a temporary sibling, which is then renamed into place.

A process killed while writing leaves the previous folder untouched (only a hidden ``.NAME.tmp-*`` sibling,
which the next write removes). Replacing an existing folder takes two renames (old aside, new in place); a kill
between them leaves the old one as ``.NAME.old-*``, which :func:`recover_folder` puts back.
"""

from __future__ import annotations

import logging
import shutil
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

logger = logging.getLogger(__name__)

__all__ = ["atomic_folder", "recover_folder", "remove_stale"]


def remove_stale(dest: str | Path) -> None:
    """Remove the temporary siblings this module leaves beside ``dest`` after a killed write (never ``dest``)."""
    dest = Path(dest)
    for pattern in (f".{dest.name}.tmp-*", f".{dest.name}.old-*"):
        for stale in dest.parent.glob(pattern):
            if stale.is_dir():
                shutil.rmtree(stale)


def recover_folder(dest: str | Path) -> Path:
    """Put back ``dest`` when a kill between the two renames of a replacement left it aside as ``.NAME.old-*``."""
    dest = Path(dest)
    if not dest.exists():
        olds = sorted(dest.parent.glob(f".{dest.name}.old-*"), key=lambda p: p.stat().st_mtime)
        if olds:
            logger.warning("restoring %s from %s (a replacement was interrupted)", dest, olds[-1])
            olds[-1].rename(dest)
    return dest


@contextmanager
def atomic_folder(dest: str | Path, *, replaceable=None) -> Iterator[Path]:
    """Yield an empty temporary folder; on success it replaces ``dest``, on error it is removed.

    ``replaceable(dest) -> bool`` says whether an existing, non-empty ``dest`` was written by the tool and may be
    replaced; when it returns False a ``FileExistsError`` is raised before anything is written.
    """
    dest = Path(dest)
    if dest.exists() and not dest.is_dir():
        raise FileExistsError(f"{dest} exists and is not a folder; choose another path")
    if dest.is_dir() and any(dest.iterdir()) and replaceable is not None and not replaceable(dest):
        raise FileExistsError(f"{dest} exists and was not written by this tool; choose another folder or remove it")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tag = uuid.uuid4().hex[:8]
    tmp = dest.parent / f".{dest.name}.tmp-{tag}"
    tmp.mkdir()
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = dest.parent / f".{dest.name}.old-{tag}"
    if dest.exists():
        dest.rename(old)
    tmp.rename(dest)
    if old.exists():
        shutil.rmtree(old)
