"""Shard files: listing, reading and checking a header, reading rows, writing atomically, setting damaged ones aside.

The format is described in :mod:`layerwise.cache`. Every reader raises :class:`CacheCorruptError` for a damaged
shard and lets ``FileNotFoundError`` through (another process may have moved the shard aside meanwhile).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from safetensors import SafetensorError, safe_open
from safetensors.numpy import save_file

from layerwise.cache._format import (
    CACHE_FORMAT_VERSION,
    DTYPES,
    SHA256_HEX,
    SHARD_GLOB,
    TMP_PREFIX,
    CacheCorruptError,
    checksum,
)
from layerwise.layers import LayerStack

__all__ = [
    "ShardInfo",
    "fsync_dir",
    "quarantine",
    "read_header",
    "read_rows",
    "shards_oldest_first",
    "unlink_quietly",
    "write_shard",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ShardInfo:
    """What a shard's header says about it (read without loading tensors)."""

    path: Path
    hashes: tuple[str, ...]  # (n,) sha256 hex of each row's text
    checksum: str
    has_pooler: bool
    n_states: int  # L + 1
    dim: int  # d
    dtype: np.dtype


def shards_oldest_first(directory: Path) -> list[Path]:
    """The shards in ``directory`` by modification time (then name); ones removed meanwhile are skipped."""
    paths = []
    for p in directory.glob(SHARD_GLOB):
        try:
            paths.append((p.stat().st_mtime_ns, p.name, p))
        except FileNotFoundError:  # moved aside by another process meanwhile
            continue
    return [p for _, _, p in sorted(paths)]


def _read_raw_header(path: Path) -> tuple[dict, set[str], dict, dict]:
    """(metadata, tensor names, shapes, dtype names) of a shard; CacheCorruptError if unreadable."""
    try:
        with safe_open(str(path), framework="np") as f:
            meta = f.metadata() or {}
            names = set(f.keys())
            shapes = {k: tuple(f.get_slice(k).get_shape()) for k in names}
            dtypes = {k: f.get_slice(k).get_dtype() for k in names}
    except FileNotFoundError:
        raise
    except Exception as e:  # safetensors raises its own error type for every kind of bad header
        raise CacheCorruptError(f"unreadable header: {e}") from e
    return meta, names, shapes, dtypes


def read_header(path: Path) -> ShardInfo:
    """Parse and check a shard's header without loading its tensors; raise CacheCorruptError."""
    meta, names, shapes, dtypes = _read_raw_header(path)
    version = meta.get("format_version")
    if version != str(CACHE_FORMAT_VERSION):
        raise CacheCorruptError(f"format version {version!r}, expected {CACHE_FORMAT_VERSION}")
    try:
        hashes = json.loads(meta["text_sha256"])
        digest = meta["checksum"]
        has_pooler = {"true": True, "false": False}[meta["has_pooler"]]
    except (KeyError, ValueError) as e:
        raise CacheCorruptError(f"bad metadata: {e!r}") from None
    if not isinstance(hashes, list) or not all(isinstance(h, str) and SHA256_HEX.fullmatch(h) for h in hashes):
        raise CacheCorruptError("text_sha256 is not a list of sha256 hex digests")
    if not isinstance(digest, str) or not SHA256_HEX.fullmatch(digest):
        raise CacheCorruptError("checksum is not a sha256 hex digest")

    expected = {"mean", "cls", "pooler"} if has_pooler else {"mean", "cls"}
    if names != expected:
        raise CacheCorruptError(f"tensors {sorted(names)}, expected {sorted(expected)}")
    n = len(hashes)
    mean = shapes["mean"]
    if len(mean) != 3 or mean[0] != n:
        raise CacheCorruptError(f"mean has shape {mean}, expected ({n}, L+1, d) for {n} texts")
    if shapes["cls"] != mean:
        raise CacheCorruptError(f"cls has shape {shapes['cls']}, expected {mean}")
    if has_pooler and shapes["pooler"] != (n, mean[2]):
        raise CacheCorruptError(f"pooler has shape {shapes['pooler']}, expected {(n, mean[2])}")
    if len(set(dtypes.values())) != 1 or dtypes["mean"] not in DTYPES:
        raise CacheCorruptError(f"dtypes {dtypes}, expected one of {sorted(DTYPES)} for all tensors")
    return ShardInfo(
        path=path,
        hashes=tuple(hashes),
        checksum=digest,
        has_pooler=has_pooler,
        n_states=mean[1],
        dim=mean[2],
        dtype=DTYPES[dtypes["mean"]],
    )


def read_rows(info: ShardInfo, rows: Sequence[int]) -> LayerStack:
    """Load a shard's tensors, verify the checksum and return ``rows`` of it (copies)."""
    try:
        with safe_open(str(info.path), framework="np") as f:
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    except FileNotFoundError:
        raise
    except Exception as e:
        raise CacheCorruptError(f"unreadable tensors: {e}") from e
    if checksum(tensors) != info.checksum:
        raise CacheCorruptError("checksum mismatch in tensor data")
    idx = np.asarray(rows, dtype=np.int64)
    return LayerStack(
        mean=tensors["mean"][idx],
        cls=tensors["cls"][idx],
        pooler=tensors["pooler"][idx] if info.has_pooler else None,
    )


def write_shard(directory: Path, hashes: list[str], stack: LayerStack) -> Path:
    """Write one shard into an existing ``directory`` atomically: temp file in it, fsync, ``os.replace``."""
    tensors = {"mean": np.ascontiguousarray(stack.mean), "cls": np.ascontiguousarray(stack.cls)}
    if stack.pooler is not None:
        tensors["pooler"] = np.ascontiguousarray(stack.pooler)
    metadata = {
        "format_version": str(CACHE_FORMAT_VERSION),
        "text_sha256": json.dumps(hashes),
        "checksum": checksum(tensors),
        "has_pooler": "true" if stack.pooler is not None else "false",
    }
    final = directory / f"shard-{uuid.uuid4().hex}.safetensors"
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=TMP_PREFIX, suffix=".safetensors")
    os.close(fd)
    try:
        save_file(tensors, tmp, metadata=metadata)
        with open(tmp, "rb+") as f:
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
    except BaseException as exc:
        unlink_quietly(Path(tmp))
        if isinstance(exc, (OSError, SafetensorError)):  # a full disk: safetensors reports it as its own error
            raise _write_failed(exc, final) from None
        raise
    fsync_dir(directory)
    logger.debug("layer cache: wrote %d rows to %s", len(hashes), final)
    return final


def _write_failed(exc: BaseException, path: Path) -> OSError:
    """A shard that could not be written (a full disk, a file-size limit, a read-only cache) in one line."""
    reason = " ".join((getattr(exc, "strerror", None) or str(exc)).split())
    return OSError(f"writing the layer cache shard {path} failed ({reason}); nothing was left behind and the shards "
                   "written before are kept: free some space or put the layer cache on another disk (cache_dir, "
                   "--cache-dir), then run the same command again")


def quarantine(path: Path, reason: str, *, n_texts: int | None = None) -> None:
    """Move a damaged shard aside (``*.corrupt``), or delete it if that fails."""
    what = f"its {n_texts} texts" if n_texts is not None else "its texts"
    dest = path.with_name(path.name + ".corrupt")
    try:
        os.replace(path, dest)
        action = f"moved aside to {dest.name}"
    except FileNotFoundError:
        action = "already removed by another process"
    except OSError:
        unlink_quietly(path)
        action = "deleted"
    logger.warning(
        "layer cache shard %s is damaged (%s); %s, %s will be recomputed", path, reason, action, what
    )


def unlink_quietly(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def fsync_dir(path: Path) -> None:
    """Persist a rename (POSIX); a no-op where directories cannot be opened (Windows)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
