"""The cache key: its canonical JSON (which names the key's directory) and the ``key.json`` written beside the shards."""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from layerwise.cache._format import CACHE_FORMAT_VERSION, KEY_FILE, TMP_PREFIX
from layerwise.cache._shards import unlink_quietly

__all__ = ["canonical_json_value", "key_digest", "key_json", "write_key_file"]


def key_json(key: object) -> str:
    """Canonical JSON of a canonical ``key`` (see :func:`canonical_json_value`) with the format version."""
    return json.dumps(
        {"format_version": CACHE_FORMAT_VERSION, "key": key},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )


def key_digest(key_json_text: str) -> str:
    """Name of the key's directory: the first 16 hex digits of the sha256 of its canonical JSON."""
    return hashlib.sha256(key_json_text.encode("utf-8")).hexdigest()[:16]


def canonical_json_value(value: object, where: str) -> object:
    """``value`` as plain JSON types, or TypeError naming the offending field."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where} is {value}; cache key values must be finite")
        return value
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(f"{where} has a non-string field name {k!r}; cache key field names must be str")
            out[k] = canonical_json_value(v, f"{where}[{k!r}]")
        return out
    if isinstance(value, (list, tuple)):
        return [canonical_json_value(v, f"{where}[{i}]") for i, v in enumerate(value)]
    hint = " (pass str(path))" if isinstance(value, os.PathLike) else ""
    raise TypeError(
        f"{where} is a {type(value).__name__}; cache key values must be JSON types "
        f"(str, int, float, bool, None, list, dict){hint}"
    )


def write_key_file(directory: Path, key_json_text: str) -> None:
    """Write ``directory/key.json`` (indented, for humans) atomically: temp file, fsync, ``os.replace``."""
    text = json.dumps(json.loads(key_json_text), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=TMP_PREFIX, suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, directory / KEY_FILE)
    except BaseException:
        unlink_quietly(Path(tmp))
        raise
