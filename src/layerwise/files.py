"""Files and folders written all at once: content goes into a temporary sibling, which is then renamed into place.

A process killed while writing leaves the previous folder untouched (only a hidden ``.NAME.tmp-*`` sibling,
which the next write removes). Replacing an existing folder takes two renames (old aside, new in place); a kill
between them leaves the old one as ``.NAME.old-*``, which :func:`recover_folder` puts back.
"""

from __future__ import annotations

import errno
import glob
import logging
import os
import shutil
import tempfile
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

logger = logging.getLogger(__name__)

__all__ = ["atomic_folder", "recover_folder", "remove_stale", "write_atomic", "write_failure"]


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
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if write_failure(exc):
            raise _write_failed(exc, dest, kept="the previous folder is unchanged") from None
        raise
    old = dest.parent / f".{dest.name}.old-{tag}"
    if dest.exists():
        dest.rename(old)
    tmp.rename(dest)
    if old.exists():
        shutil.rmtree(old)


def write_atomic(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically: a hidden ``.NAME.*.tmp`` sibling, fsynced, then renamed onto ``path``.

    A failed or killed write (a full disk included) leaves the previous file as it was; the temporary file is removed
    on any error this process sees, and one a killed process left (its name holds the writer's process id) by the
    next write of the same path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_dead_temporaries(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; results are for everyone to read
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if write_failure(exc):
            raise _write_failed(exc, path, kept="the previous file is unchanged") from None
        raise
    return path


def write_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is a write that failed for want of room: a full disk, a quota, a file-size limit; also as
    safetensors reports it (``SafetensorError: ... I/O error``, under ``save_pretrained`` too)."""
    if isinstance(exc, OSError):
        return exc.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
    return type(exc).__name__ == "SafetensorError" and "I/O error" in str(exc)


def _write_failed(exc: BaseException, path: Path, *, kept: str) -> OSError:
    """A full disk (or quota, or file-size limit) as one line naming the file, what was kept and the fix."""
    reason = " ".join(str(getattr(exc, "strerror", None) or exc).split())
    error = OSError(f"writing {path} failed ({reason}); {kept} and no temporary file is left: free some space or "
                    "choose another folder, then run the same command again")
    error.errno = getattr(exc, "errno", None)  # (set after: OSError(errno, text) would print as "[Errno 28] text")
    return error


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _remove_dead_temporaries(path: Path) -> None:
    """Remove ``.NAME.<pid>.*.tmp`` siblings of ``path`` whose writer process no longer runs (killed mid-write)."""
    for tmp in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        pid = tmp.name[len(path.name) + 2:].split(".", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            tmp.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True
