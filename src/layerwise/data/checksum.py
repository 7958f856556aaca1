"""A checksum of a loaded data set's content: what a results file records and a resume key compares.

It covers what the loaders return (texts, scores, labels, subset names), not the files' bytes, so two copies of a
data set that load to the same examples get the same checksum, and an edited score or sentence changes it. Fields
that say only where the data was read from (``source``: the folder) are left out for the same reason.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json

import numpy as np

__all__ = ["content_checksum"]


_LOCATION_FIELDS = frozenset({"source"})  # where a data set was read from, not what it holds


def _canonical(value):
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _canonical(getattr(value, f.name)) for f in dataclasses.fields(value)
                if f.name not in _LOCATION_FIELDS}
    if isinstance(value, np.ndarray):
        return {"dtype": str(value.dtype), "shape": list(value.shape), "values": value.tolist()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        return value.item()
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TypeError(f"cannot checksum a value of type {type(value).__name__}")


def content_checksum(data) -> str:
    """sha256 (hex) of a loaded data set: a dataclass, array, sequence or mapping of texts and numbers."""
    text = json.dumps(_canonical(data), ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
