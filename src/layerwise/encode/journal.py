"""The resume journal of ``layerwise encode``: every finished chunk kept beside OUTPUT until OUTPUT is whole.

While :func:`~layerwise.encode.corpus.encode_corpus` runs, each chunk it encodes is saved into a hidden work folder
beside OUTPUT; a run that stops (Ctrl-C, a kill, a crash) leaves it, and the same command run again reads the chunks
it finds there instead of encoding them, writes OUTPUT as a straight run would (a straight run writes the very
float32 arrays it saves, so a ``.npy`` output and its ids are byte-identical, a Parquet output holds equal values)
and then removes the work folder. Memory stays bounded by one chunk: chunks are read back one at a time, in order,
into the streaming writers of :mod:`layerwise.encode.writers`.

Layout (format 2) of the work folder ``.NAME.partial-<digest>/`` beside OUTPUT = ``NAME``::

    layerwise-encode-partial.json   the manifest: format, version, the key, dim; it marks the folder as this module's
    chunk-000000.npy                float32 (rows, dim): corpus rows 0 .. chunk_size - 1 (the last chunk may be shorter)
    chunk-000000.ids.txt            their ids, one per line (written first; the .npy's rename finishes the chunk)
    chunk-000000.sha256             sha256 of the chunk's .npy bytes then its ids bytes (written before the .npy)

The **key**, whose digest names the folder, holds everything that changes the vectors or the rows: the corpus's row
count and checksum (:func:`~layerwise.encode.readers.check_corpus`: every row's id and text, so the file's content
and the columns read), the embedder's ``output_key()`` (a pooling spec: the encoder's cache key, i.e. weights,
tokenizer and config sha256, max length and dtype, and the pooling; an exported folder: the sha256 of its files),
the dimension and the chunk size. Another key is another folder, so a chunk computed under other settings is never
read. Each file is written atomically (a temporary sibling, then a rename), and a saved chunk is used only when its
checksum matches its bytes (a flipped byte that still loads is caught), its ids equal the corpus's ids of that chunk
and its vectors load (``allow_pickle=False``, no unpickling) as finite float32 of the expected shape; a damaged or
truncated chunk is encoded again, with a warning.

Only what this module writes is ever removed: its manifest, chunk and temporary files, by name, then the folder if
that left it empty (a foreign file keeps the folder, with a warning). A folder of the work folder's name without the
manifest is refused, never used or removed. When OUTPUT is complete, the work folders that interrupted runs under
other settings left for the same OUTPUT (those with the manifest) are removed too: OUTPUT now holds other vectors.

**Both kinds of embedder use the journal**, a pooling spec too, although its chunks also go through the layer
cache: one resume mechanism instead of one per kind; a resumed spec run reads back (rows, d) vectors instead of
(rows, L+1, d) layer stacks to pool again; and resume does not depend on the layer cache being on. The layer cache
is used as before (it serves later commands and other poolings of the same texts). ``resume=False`` (the CLI's
``--no-cache``) switches the journal off. An embedder without ``output_key()`` cannot be keyed, so it runs without.
"""

from __future__ import annotations

import glob
import hashlib
import io
import json
import logging
import re
from pathlib import Path

import numpy as np

from layerwise.encode.readers import CorpusScan
from layerwise.errors import UsageError
from layerwise.keys import key_digest
from layerwise.reports import write_bytes, write_json

logger = logging.getLogger(__name__)

__all__ = ["JOURNAL_VERSION", "MANIFEST", "ChunkJournal", "open_journal", "work_folders"]

MANIFEST = "layerwise-encode-partial.json"
JOURNAL_VERSION = 2  # 2: every chunk has its sha256
_FORMAT = "layerwise-encode-partial"
_NAME = rf"(?:chunk-\d+\.(?:npy|ids\.txt|sha256)|{re.escape(MANIFEST)})"
_OWN_FILE = re.compile(rf"{_NAME}|\.{_NAME}\.\w+\.tmp")  # what this module writes (temporaries: reports.write_bytes)


def work_folders(output: str | Path) -> list[Path]:
    """Every ``.NAME.partial-*`` entry beside ``output`` (any key; not all need be this module's)."""
    output = Path(output)
    return sorted(output.parent.glob(f".{glob.escape(output.name)}.partial-*"))


def open_journal(output: Path, embedder, corpus: CorpusScan, chunk_size: int, *, resume: bool = True):
    """The :class:`ChunkJournal` of this run (created or found), or one that keeps nothing when ``resume`` is off
    or ``embedder`` has no ``output_key()``."""
    output_key = getattr(embedder, "output_key", None)
    if not resume or output_key is None:
        if resume:
            logger.info("%s has no output_key(): an interrupted run starts over", type(embedder).__name__)
        return _NoJournal()
    key = {"corpus": {"n": corpus.n, "sha256": corpus.sha256}, "embedder": output_key(), "dim": int(embedder.dim),
           "chunk_size": int(chunk_size)}
    return ChunkJournal(output, key, dim=int(embedder.dim)).open()


class _NoJournal:
    """Keeps nothing: every chunk is encoded."""

    def load(self, index: int, ids: list[str]) -> None:
        return None

    def save(self, index: int, ids: list[str], vectors: np.ndarray) -> np.ndarray:
        return vectors

    def finish(self) -> None:
        pass


class ChunkJournal:
    """The finished chunks of one run (see the module docstring): :meth:`open`, ``load``/``save``, :meth:`finish`."""

    def __init__(self, output: str | Path, key: dict, *, dim: int):
        self.output, self.dim = Path(output), int(dim)
        self.key = json.loads(json.dumps(key, sort_keys=True))  # as the manifest holds it (lists, not tuples)
        self.folder = self.output.parent / f".{self.output.name}.partial-{key_digest(self.key)}"

    def open(self) -> "ChunkJournal":
        """Create the work folder, or take up the one an interrupted run with this key left; refuse a foreign one."""
        manifest = _read_manifest(self.folder)
        taken = self.folder.is_symlink() or self.folder.exists()
        empty = taken and self.folder.is_dir() and not self.folder.is_symlink() and not any(self.folder.iterdir())
        if manifest is None and taken and not empty:  # (empty: a kill between mkdir and the manifest's write)
            raise UsageError(f"{self.folder} exists but `layerwise encode` did not write it (no {MANIFEST}); it is "
                             f"never used or removed: move it away to encode {self.output}")
        if manifest is not None and (manifest.get("version") != JOURNAL_VERSION or manifest.get("key") != self.key):
            logger.warning("%s holds chunks of another format or key; starting afresh", self.folder)
            _remove_own(self.folder, keep_folder=True)
            manifest = None
        if manifest is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            write_json(self.folder / MANIFEST, {"format": _FORMAT, "version": JOURNAL_VERSION, "output": self.output.name,
                                                "dim": self.dim, "key": self.key})
        else:
            done = len(list(self.folder.glob("chunk-*.npy")))
            logger.info("resuming: %d finished chunk(s) of an interrupted run are read from %s", done, self.folder)
        others = [f for f in work_folders(self.output) if f != self.folder and _read_manifest(f) is not None]
        if others:
            logger.warning("not used (other settings): %s; removed once %s is complete", ", ".join(map(str, others)),
                           self.output)
        return self

    def _paths(self, index: int) -> tuple[Path, Path, Path]:
        stem = self.folder / f"chunk-{index:06d}"
        return stem.with_suffix(".npy"), stem.with_suffix(".ids.txt"), stem.with_suffix(".sha256")

    def load(self, index: int, ids: list[str]) -> np.ndarray | None:
        """Chunk ``index``'s vectors (len(ids), dim) float32 if it was saved whole with these ``ids``, else None."""
        vectors_path, ids_path, sum_path = self._paths(index)
        if not vectors_path.is_file():
            return None
        try:
            raw, raw_ids = vectors_path.read_bytes(), ids_path.read_bytes()
            intact = sum_path.read_text(encoding="ascii").strip() == _checksum(raw, raw_ids)
            same_ids = raw_ids == _ids_bytes(ids)
            vectors = np.load(io.BytesIO(raw), allow_pickle=False) if intact else None
        except (OSError, ValueError, EOFError) as exc:
            reason = f"{type(exc).__name__}: {exc}"
        else:
            if not intact:
                reason = f"its bytes do not match {sum_path.name}"
            elif not same_ids:
                reason = "its ids differ from the corpus's"
            elif vectors.dtype != np.float32 or vectors.shape != (len(ids), self.dim):
                reason = f"{vectors.dtype} {vectors.shape} where float32 {(len(ids), self.dim)} is expected"
            elif not np.isfinite(vectors).all():
                reason = "it holds NaN or inf"
            else:
                return vectors
        logger.warning("chunk %d in %s is damaged (%s); encoding it again", index, self.folder, reason)
        for path in (vectors_path, ids_path, sum_path):
            path.unlink(missing_ok=True)
        return None

    def save(self, index: int, ids: list[str], vectors: np.ndarray) -> np.ndarray:
        """Save chunk ``index`` atomically; returns the float32 (len(ids), dim) array saved (what OUTPUT gets)."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.shape != (len(ids), self.dim):
            raise ValueError(f"the embedder returned vectors of shape {vectors.shape} for {len(ids)} texts; expected "
                             f"({len(ids)}, {self.dim})")
        vectors_path, ids_path, sum_path = self._paths(index)
        buffer = io.BytesIO()
        np.save(buffer, vectors, allow_pickle=False)
        raw_ids = _ids_bytes(ids)
        write_bytes(ids_path, raw_ids)
        write_bytes(sum_path, (_checksum(buffer.getvalue(), raw_ids) + "\n").encode("ascii"))
        write_bytes(vectors_path, buffer.getvalue())  # last: its rename finishes the chunk
        return vectors

    def finish(self) -> None:
        """After OUTPUT is written: remove this work folder and the other keys' ones for OUTPUT (ours only)."""
        for folder in work_folders(self.output):
            if folder == self.folder or _read_manifest(folder) is not None:
                _remove_own(folder)


def _ids_bytes(ids: list[str]) -> bytes:
    return "".join(f"{i}\n" for i in ids).encode("utf-8", "surrogatepass")


def _checksum(vectors: bytes, ids: bytes) -> str:
    return hashlib.sha256(vectors + b"\0" + ids).hexdigest()


def _read_manifest(folder: Path) -> dict | None:
    """The manifest of ``folder`` if it is a real folder holding this module's manifest, else None."""
    path = folder / MANIFEST
    if folder.is_symlink() or not folder.is_dir() or path.is_symlink() or not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) and manifest.get("format") == _FORMAT else None


def _remove_own(folder: Path, *, keep_folder: bool = False) -> None:
    """Remove the files this module writes in ``folder`` (the manifest last), then the folder if that emptied it."""
    own = [p for p in folder.iterdir() if _OWN_FILE.fullmatch(p.name) and p.is_file() and not p.is_symlink()]
    for path in sorted(own, key=lambda p: p.name == MANIFEST):
        path.unlink()
    if keep_folder:
        return
    left = sorted(p.name for p in folder.iterdir())
    if left:
        logger.warning("left %s in place: it holds files layerwise did not write (%s)", folder, ", ".join(left))
    else:
        folder.rmdir()
