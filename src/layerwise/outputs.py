"""The files layerwise wrote into a user's output folder, so that it never replaces one it did not write.

A command that writes results into a folder the user names (``--output``) lists each file it writes there in a
manifest, ``.layerwise-outputs.sha256`` in that folder, in the format of ``sha256sum`` (``<sha256>  <name>`` per
line; ``sha256sum -c`` checks it). A file of that folder is the tool's when the manifest lists it with the sha256 of
its current bytes; anything else (a file of the user's, or one of the tool's that the user edited since) is never
replaced: the command refuses it in one line, before any work when it can (:func:`check_outputs` with the names
the command writes), and at the latest at the write itself (:func:`claim`). ``--overwrite`` never widens this: it
replaces only files the manifest lists.

A write is recorded in two steps around the atomic write of the file (``files.write_atomic``): first the new
bytes' sha256 is added beside the old one (a kill after this step leaves the old file, still listed), then the old
sha256 is dropped. So a kill at any point leaves every file whole and listed, and the next run replaces it.

Only the folder's own files are covered (not its subfolders: checkpoints, stores and exports there are folders with
their own marker checks). Writes are routed here by :func:`guarded`, which ``layerwise.reports``' writers consult:
inside ``with guarded(folder):`` every ``write_json``/``write_text``/``write_bytes``/figure into ``folder`` is
claimed first.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator

from layerwise.errors import UsageError
from layerwise.files import write_atomic

__all__ = ["MANIFEST", "ForeignFileError", "OutputManifest", "check_outputs", "claim", "guarded", "guarded_folder",
           "sha256_file"]

MANIFEST = ".layerwise-outputs.sha256"

_GUARDED: list[Path] = []  # folders whose writes are claimed (a stack: ``guarded`` pushes and pops)
_GUARD_LOCK = threading.Lock()


class ForeignFileError(UsageError):
    """A file in an output folder that layerwise did not write (or that was edited since) would be replaced."""


def sha256_file(path: str | os.PathLike) -> str:
    """The sha256 of a file's bytes (read in blocks)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class OutputManifest:
    """The manifest of one output folder: file name -> the sha256 values of the bytes layerwise wrote there."""

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)
        self.path = self.folder / MANIFEST

    def read(self) -> dict[str, set[str]]:
        """The listed files; a manifest that is not in the ``sha256sum`` format is refused in one line."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"{self.path} cannot be read ({exc}); it lists the files layerwise wrote in "
                             f"{self.folder}: restore it, or choose another output folder") from None
        entries: dict[str, set[str]] = {}
        for number, line in enumerate(text.splitlines(), 1):
            sha, sep, name = line.partition("  ")
            if not sep or len(sha) != 64 or not name or "/" in name or any(c not in "0123456789abcdef" for c in sha):
                raise UsageError(f"{self.path}:{number} is not a '<sha256>  <name>' line; the file lists what "
                                 f"layerwise wrote in {self.folder}: restore it, or choose another output folder")
            entries.setdefault(name, set()).add(sha)
        return entries

    def _write(self, entries: dict[str, set[str]]) -> None:
        lines = [f"{sha}  {name}\n" for name in sorted(entries) for sha in sorted(entries[name])]
        write_atomic(self.path, "".join(lines).encode("utf-8"))

    def foreign(self, name: str, entries: dict[str, set[str]] | None = None) -> bool:
        """True when ``name`` exists in the folder and is not a file the manifest lists with its current bytes."""
        path = self.folder / name
        if not os.path.lexists(path):
            return False
        listed = (self.read() if entries is None else entries).get(name)
        return not (listed and path.is_file() and not path.is_symlink() and sha256_file(path) in listed)

    def refuse(self, name: str) -> ForeignFileError:
        return ForeignFileError(
            f"{self.folder / name} exists and was not written by layerwise (or was changed since: it is not listed "
            f"with its current bytes in {MANIFEST}); it is never replaced: move it away, or choose another output "
            "folder")

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """An advisory lock on the folder itself while the manifest is read and rewritten (no extra file)."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not on the platforms layerwise runs on
            yield
            return
        fd = os.open(self.folder, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    @contextmanager
    def claim(self, name: str, data: bytes) -> Iterator[None]:
        """Refuse ``name`` if it is foreign; list the sha256 of ``data`` for it, then (after the block: the write)
        keep only that one. A failed write leaves the listing of the file that is still there."""
        with self.claim_sha256(name, hashlib.sha256(data).hexdigest()):
            yield

    @contextmanager
    def claim_sha256(self, name: str, new: str) -> Iterator[None]:
        """:meth:`claim` for bytes known by their sha256 (a file streamed to a temporary sibling, then renamed to
        ``name`` in the block: :func:`sha256_file` of the temporary file)."""
        if name == MANIFEST or "/" in name:
            raise UsageError(f"{self.folder / name}: layerwise does not write this name; choose another")
        self.folder.mkdir(parents=True, exist_ok=True)
        with self._locked():
            entries = self.read()
            if self.foreign(name, entries):
                raise self.refuse(name)
            entries.setdefault(name, set()).add(new)
            self._write(entries)
        yield
        with self._locked():
            entries = self.read()
            entries[name] = {new}
            self._write(entries)


def check_outputs(folder: str | os.PathLike, patterns: Iterable[str]) -> None:
    """Refuse, before any work, a file of ``folder`` whose name matches one of ``patterns`` (the names a command
    writes, as shell patterns) and that layerwise did not write there."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        return
    manifest = OutputManifest(folder)
    entries = manifest.read()
    patterns = tuple(patterns)
    for path in sorted(folder.iterdir()):
        name = path.name
        if path.is_dir() and not path.is_symlink():
            continue  # subfolders are checked by their writers (marker files)
        if name != MANIFEST and any(fnmatch.fnmatchcase(name, p) for p in patterns) and manifest.foreign(name, entries):
            raise manifest.refuse(name)


@contextmanager
def guarded(folder: str | os.PathLike) -> Iterator[Path]:
    """Within the block, every write of ``layerwise.reports`` into ``folder`` (its own files) is claimed first."""
    path = Path(folder).expanduser().resolve()
    with _GUARD_LOCK:
        _GUARDED.append(path)
    try:
        yield path
    finally:
        with _GUARD_LOCK:
            _GUARDED.remove(path)


def guarded_folder(path: str | os.PathLike) -> Path | None:
    """The guarded folder ``path`` is a file of (directly), or None."""
    parent = Path(path).expanduser().parent.resolve()  # the file itself may be a link: not followed
    with _GUARD_LOCK:
        return parent if parent in _GUARDED else None


@contextmanager
def claim(path: str | os.PathLike, data: bytes) -> Iterator[None]:
    """Claim ``path`` in its folder's manifest when the folder is guarded (see :func:`guarded`); else nothing."""
    folder = guarded_folder(path)
    if folder is None:
        yield
        return
    with OutputManifest(folder).claim(Path(path).name, data):
        yield
