"""Embedding files written chunk by chunk, into a temporary sibling renamed into place at the end.

``.npy``: a float32 array of shape (n, d), its header then its rows appended chunk by chunk with plain writes (not
through a memory map: a full disk under a memory map kills the process with SIGBUS, where a write raises an error),
with the ids in ``<name>.ids.txt`` beside it (one per line, in row order). The free space is checked before the first
byte and the array's blocks are allocated when the file is opened (:func:`reserve`), so a full disk or a file-size
limit is said before any text is encoded; a write that still fails (the ids file on a disk filled meanwhile) removes
the temporary files and says so in one line. ``.parquet``: columns ``id`` (string) and
``embedding`` (fixed-size list of d float32), one row group per chunk (needs pyarrow). A run that stops leaves no
partial output, only a hidden ``.NAME.tmp-*`` file the next run removes.

Each file put in place is listed with its sha256 in the folder's ``.layerwise-outputs.sha256``
(:class:`layerwise.outputs.OutputManifest`, the manifest of every output folder), before the rename: ``overwrite``
replaces only a file listed there with its current bytes, never one the tool did not write (or that was changed
since), whatever its format.
"""

from __future__ import annotations

import errno
import os
import shutil
import uuid
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from layerwise.encode.readers import require_pyarrow
from layerwise.errors import UsageError
from layerwise.outputs import OutputManifest, sha256_file

__all__ = ["OUTPUT_FORMATS", "EmbeddingWriter", "check_free_space", "check_output", "check_unlocked", "ids_path",
           "lock_path", "open_writer", "output_lock", "reserve"]

OUTPUT_FORMATS = (".npy", ".parquet")


def ids_path(output: str | os.PathLike) -> Path:
    """Where the ids of a ``.npy`` output go: ``NAME.ids.txt`` beside it."""
    output = Path(output)
    return output.with_name(output.stem + ".ids.txt")


def check_output(output: str | os.PathLike, *, overwrite: bool = False,
                 inputs: Sequence[str | os.PathLike] = ()) -> Path:
    """Refuse, before any work, an output of an unknown format, one that exists (unless ``overwrite``), one that
    ``overwrite`` would replace although ``layerwise encode`` did not write it, or one whose file (or ids file) is one
    of the ``inputs`` (the corpus): no file the tool did not write is ever replaced."""
    output = Path(output)
    if output.suffix.lower() not in OUTPUT_FORMATS:
        raise UsageError(f"output {output} must end in {' or '.join(OUTPUT_FORMATS)}")
    npy = output.suffix.lower() == ".npy"
    targets = (output, ids_path(output)) if npy else (output,)
    for path in targets:
        for given in inputs:
            if _same_file(path, given):
                what = "output" if path == output else "the output's ids file"
                raise UsageError(f"{what} {path} is the input {given}: writing it would destroy the input; choose "
                                 "another output path")
    if not npy:
        require_pyarrow(f"writing {output}")
    manifest = OutputManifest(output.parent)
    for path in targets:
        if path.is_dir():
            raise UsageError(f"output {path} is a folder; pass a file path")
        if not os.path.lexists(path):
            continue
        if manifest.foreign(path.name):
            raise UsageError(f"output {path} exists and was not written by layerwise (or was changed since: it is not "
                             f"listed with its current bytes in {manifest.path}); it is never replaced, with "
                             "overwrite or without: move it away, or choose another path")
        if not overwrite:
            raise UsageError(f"output {path} exists: pass --overwrite to replace it, or choose another path")
    return output


def _same_file(a: Path, b: str | os.PathLike) -> bool:
    """Whether ``a`` and ``b`` name one file (through links and relative paths too)."""
    try:
        return Path(a).exists() and os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def lock_path(output: str | os.PathLike) -> Path:
    """The lock file of ``output`` while an encode writes it: ``.NAME.lock`` beside it."""
    output = Path(output)
    return output.parent / f".{output.name}.lock"


@contextmanager
def output_lock(output: str | os.PathLike) -> Iterator[None]:
    """Hold the lock of ``output`` (an advisory ``flock`` on ``.NAME.lock``) while writing it: a second encode of the
    same output is refused in one line instead of removing the first one's temporary files. The lock file is removed
    when the lock is released. Without ``fcntl`` (Windows) nothing is locked."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not on the platforms layerwise runs on
        yield
        return
    path = lock_path(output)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            same = os.path.exists(path) and os.stat(path).st_ino == os.fstat(fd).st_ino
        except OSError:
            same = False
        if not same:
            raise UsageError(f"output {output} is being written by another `layerwise encode` right now (it holds "
                             f"{path.name}); wait for it to finish, or choose another output path")
        os.write(fd, f"{os.getpid()}\n".encode())
        try:
            yield
        finally:
            path.unlink(missing_ok=True)
    finally:
        os.close(fd)


def check_unlocked(output: str | os.PathLike) -> None:
    """Refuse now, before a model loads, an ``output`` that another encode is writing (see :func:`output_lock`)."""
    with output_lock(output):
        pass


def check_free_space(folder: str | os.PathLike, needed: int, what: str) -> None:
    """Refuse, before writing, when ``folder``'s file system has less than ``needed`` bytes free."""
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return  # unknown: the writes themselves will say
    if free < needed:
        raise UsageError(f"{what} needs about {needed / 1e6:,.1f} MB but {folder} has {free / 1e6:,.1f} MB free; free "
                         "some space or choose an output on another disk")


def _write_failed(exc: OSError, output: Path) -> OSError:
    """A write error as one line naming the output; the caller has removed the temporary files."""
    reason = exc.strerror or str(exc)
    error = OSError(f"writing {output} failed ({reason}); nothing was left behind: free some space or choose "
                    "another output, then run the same command again")
    error.errno = exc.errno  # (set after: OSError(errno, text) would print as "[Errno 28] text")
    return error


def reserve(fd: int, size: int) -> None:
    """Allocate the blocks of the first ``size`` bytes of the open file ``fd`` now, so that a disk that is full (or a
    file-size limit) fails here, before any text is encoded, rather than after hours; later writes of those bytes
    cannot run out of space. ``os.posix_fallocate`` where the file system supports it, else zeros written (and the
    position put back). The .npy is never written through a memory map, where a full disk is a SIGBUS, not an error.
    """
    if size <= 0:
        return
    try:
        os.posix_fallocate(fd, 0, size)
        return
    except AttributeError:  # pragma: no cover - platforms without posix_fallocate (macOS)
        pass
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            raise
    start, zeros = os.lseek(fd, 0, os.SEEK_CUR), bytes(1 << 20)
    end = os.lseek(fd, 0, os.SEEK_END)
    while end < size:
        end += os.write(fd, zeros[: min(len(zeros), size - end)])
    os.fsync(fd)
    os.lseek(fd, start, os.SEEK_SET)


class EmbeddingWriter:
    """``write(ids, vectors)`` chunks in order, then ``close()`` (renames into place) or ``abort()``."""

    def __init__(self, output: str | os.PathLike, n: int, dim: int):
        self.output, self.n, self.dim, self.rows = Path(output), int(n), int(dim), 0
        for stale in self.output.parent.glob(f".{self.output.name}.tmp-*"):
            stale.unlink()
        self.tmp = self.output.parent / f".{self.output.name}.tmp-{uuid.uuid4().hex[:8]}"
        self.output.parent.mkdir(parents=True, exist_ok=True)
        check_free_space(self.output.parent, self.n * self.dim * 4 + (1 << 20), f"writing {self.output}")

    def write(self, ids: list[str], vectors: np.ndarray) -> None:
        raise NotImplementedError

    def _finish(self, *also: tuple[Path, Path]) -> None:
        """Put the temporary file (and each ``(temporary, final)`` of ``also``) in place, each listed in the
        folder's manifest first (a file there that the tool did not write is refused, nothing replaced)."""
        if self.rows != self.n:
            raise RuntimeError(f"wrote {self.rows} rows, expected {self.n}")
        manifest = OutputManifest(self.output.parent)
        with ExitStack() as claims:
            for tmp, final in (*also, (self.tmp, self.output)):
                claims.enter_context(manifest.claim_sha256(final.name, sha256_file(tmp)))
            for tmp, final in (*also, (self.tmp, self.output)):
                os.replace(tmp, final)

    def abort(self) -> None:
        self.tmp.unlink(missing_ok=True)


class _NpyWriter(EmbeddingWriter):
    def __init__(self, output, n: int, dim: int):
        super().__init__(output, n, dim)
        self.ids_tmp = self.tmp.with_name(self.tmp.name + ".ids")
        self.file = self.ids_file = None
        try:
            self.file = open(self.tmp, "wb")  # noqa: SIM115 - closed in close/abort
            header = {"descr": np.lib.format.dtype_to_descr(np.dtype(np.float32)), "fortran_order": False,
                      "shape": (self.n, self.dim)}
            np.lib.format.write_array_header_1_0(self.file, header)  # what np.save writes for this shape
            self.file.flush()
            reserve(self.file.fileno(), self.file.tell() + self.n * self.dim * 4)
            self.ids_file = open(self.ids_tmp, "w", encoding="utf-8")  # noqa: SIM115 - closed in close/abort
        except OSError as exc:
            self.abort()
            raise _write_failed(exc, self.output) from None

    def write(self, ids, vectors) -> None:
        block = np.ascontiguousarray(vectors, dtype="<f4")
        if block.shape != (len(ids), self.dim):
            raise ValueError(f"vectors of shape {block.shape} for {len(ids)} ids; expected ({len(ids)}, {self.dim})")
        try:
            self.file.write(block.tobytes())
            self.ids_file.write("".join(f"{i}\n" for i in ids))
        except OSError as exc:
            self.abort()
            raise _write_failed(exc, self.output) from None
        self.rows += len(ids)

    def close(self) -> None:
        try:
            for f in (self.file, self.ids_file):
                f.flush()
                os.fsync(f.fileno())
                f.close()
        except OSError as exc:
            self.abort()
            raise _write_failed(exc, self.output) from None
        self._finish((self.ids_tmp, ids_path(self.output)))

    def abort(self) -> None:
        for f in (self.file, self.ids_file):
            if f is not None:
                try:
                    f.close()
                except OSError:
                    pass  # a full disk can fail the close's flush too: the files are removed below either way
        self.ids_tmp.unlink(missing_ok=True)
        super().abort()


class _ParquetWriter(EmbeddingWriter):
    def __init__(self, output, n: int, dim: int):
        super().__init__(output, n, dim)
        import pyarrow as pa

        self.pa = pa
        pq = require_pyarrow(f"writing {output}")
        self.schema = pa.schema([("id", pa.string()), ("embedding", pa.list_(pa.float32(), self.dim))])
        self.writer = pq.ParquetWriter(str(self.tmp), self.schema)

    def write(self, ids, vectors) -> None:
        pa = self.pa
        flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1))
        emb = pa.FixedSizeListArray.from_arrays(flat, self.dim)
        self.writer.write_table(pa.Table.from_arrays([pa.array(ids, pa.string()), emb], schema=self.schema))
        self.rows += len(ids)

    def close(self) -> None:
        self.writer.close()
        self._finish()

    def abort(self) -> None:
        self.writer.close()
        super().abort()


def open_writer(output: str | os.PathLike, n: int, dim: int) -> EmbeddingWriter:
    """A writer for ``output``'s format (``.npy`` or ``.parquet``) of ``n`` vectors of size ``dim``."""
    return (_ParquetWriter if Path(output).suffix.lower() == ".parquet" else _NpyWriter)(output, n, dim)
