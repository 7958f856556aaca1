"""A folder of Parquet shards written by ``layerwise encode --engine ray``: its checks, its manifest, its loader.

Layout of ``OUTPUT/``::

    layerwise-encode.json   the manifest: format version, n, dim, the embedder (model identity, pooling, max length
                            or exported folder), the command; its presence marks a folder this tool wrote
    *.parquet               shards with columns ``row`` (int64, the corpus row from 0), ``id`` (string) and
                            ``embedding`` (fixed-size list of dim float32); every row once, in any shard

Reading needs pyarrow only (not Ray): :func:`load_shard_folder` returns ids and vectors in corpus order (sorted on
``row``) after checking that the rows are exactly 0..n-1. An existing non-empty OUTPUT is replaced only when asked
(``overwrite``) and only when it holds the manifest: a folder the tool did not write is never touched.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from layerwise.encode.readers import require_pyarrow
from layerwise.encode.writers import OUTPUT_FORMATS
from layerwise.errors import UsageError

__all__ = ["MANIFEST", "SHARD_FORMAT_VERSION", "check_output_folder", "is_shard_folder", "load_shard_folder",
           "write_manifest"]

MANIFEST = "layerwise-encode.json"
SHARD_FORMAT_VERSION = 1


def is_shard_folder(folder: str | os.PathLike) -> bool:
    """Whether ``folder`` holds the manifest this module writes (so it was written by ``layerwise encode``)."""
    return (Path(folder) / MANIFEST).is_file()


def check_output_folder(output: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Refuse, before any work, an OUTPUT folder that would hold the shards badly or replace someone else's files."""
    output = Path(output)
    if output.suffix.lower() in OUTPUT_FORMATS:
        raise UsageError(f"output {output} ends in {output.suffix}, but with --engine ray OUTPUT is a folder of "
                         f"Parquet shards: pass a folder path such as {output.with_suffix('')}")
    if output.exists() and not output.is_dir():
        raise UsageError(f"output {output} exists and is a file; with --engine ray OUTPUT is a folder: choose "
                         "another path")
    if output.is_dir() and any(output.iterdir()):
        if not is_shard_folder(output):
            raise UsageError(f"output {output} is a non-empty folder that `layerwise encode` did not write (no "
                             f"{MANIFEST}); it is never replaced: choose another folder")
        if not overwrite:
            raise UsageError(f"output {output} exists: pass --overwrite to replace it, or choose another folder")
    require_pyarrow(f"writing {output}")
    return output


def write_manifest(folder: Path, manifest: dict) -> None:
    """Write ``manifest`` (plus the format version) as the folder's :data:`MANIFEST`."""
    body = {"format": "layerwise-encode", "version": SHARD_FORMAT_VERSION, **manifest}
    (Path(folder) / MANIFEST).write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")


def read_manifest(folder: str | os.PathLike) -> dict:
    path = Path(folder) / MANIFEST
    if not path.is_file():
        raise UsageError(f"{folder} holds no {MANIFEST}: it is not a folder written by `layerwise encode --engine "
                         "ray`; pass such a folder, or a .npy / .parquet file")
    manifest = json.loads(path.read_text(encoding="utf-8"))
    if manifest.get("version") != SHARD_FORMAT_VERSION:
        raise UsageError(f"{path} has format version {manifest.get('version')!r}; this layerwise reads version "
                         f"{SHARD_FORMAT_VERSION}: encode the corpus again")
    return manifest


def load_shard_folder(folder: str | os.PathLike) -> tuple[list[str], np.ndarray]:
    """``(ids, vectors)`` of a shard folder, in corpus order; vectors (n, dim) float32."""
    pq = require_pyarrow(f"reading {folder}")
    import pyarrow as pa

    manifest = read_manifest(folder)
    n, dim = int(manifest["n"]), int(manifest["dim"])
    shards = sorted(Path(folder).glob("*.parquet"))
    tables = [pq.read_table(str(s), columns=["row", "id", "embedding"]) for s in shards]
    table = pa.concat_tables(tables) if tables else None
    rows = np.asarray(table.column("row").to_numpy() if table is not None else [], dtype=np.int64)
    order = np.argsort(rows, kind="stable")
    if len(rows) != n or not np.array_equal(rows[order], np.arange(n)):
        raise UsageError(f"{folder}: its shards hold {len(rows)} rows, not rows 0..{n - 1} once each as its "
                         f"{MANIFEST} says; the folder is damaged: encode the corpus again")
    table = table.take(pa.array(order))
    flat = table.column("embedding").combine_chunks().flatten().to_numpy(zero_copy_only=False)
    return table.column("id").to_pylist(), np.asarray(flat, dtype=np.float32).reshape(n, dim)
