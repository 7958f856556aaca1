"""The on-disk format's constants, its error and its two hashes (see :mod:`layerwise.cache` for the layout)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

import numpy as np

__all__ = [
    "CACHE_FORMAT_VERSION",
    "DTYPES",
    "DTYPE_NAMES",
    "KEY_FILE",
    "SHA256_HEX",
    "SHARD_GLOB",
    "TMP_PREFIX",
    "CacheCorruptError",
    "checksum",
    "text_sha256",
]

CACHE_FORMAT_VERSION = 1
"""Version of the on-disk layout; part of every key, so a new version never reads old shards."""

SHARD_GLOB = "shard-*.safetensors"
TMP_PREFIX = ".tmp-"
KEY_FILE = "key.json"
SHA256_HEX = re.compile(r"[0-9a-f]{64}")
# safetensors dtype name <-> numpy dtype, for the floating dtypes a layer stack may hold.
DTYPES = {"F16": np.dtype(np.float16), "F32": np.dtype(np.float32), "F64": np.dtype(np.float64)}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}


class CacheCorruptError(RuntimeError):
    """A cache file cannot be trusted.

    Damaged shards are handled inside :class:`LayerCache` (moved aside and recomputed); this error
    reaches the caller only when the cache directory itself does not belong to the key in use.
    """


CacheCorruptError.__module__ = "layerwise.cache"  # its public home, as shown in tracebacks and docs


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def checksum(tensors: Mapping[str, np.ndarray]) -> str:
    """sha256 of the raw little-endian bytes of ``mean``, ``cls`` and (if present) ``pooler``."""
    h = hashlib.sha256()
    for name in ("mean", "cls", "pooler"):
        arr = tensors.get(name)
        if arr is None:
            continue
        arr = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<"))
        h.update(memoryview(arr).cast("B"))
    return h.hexdigest()
