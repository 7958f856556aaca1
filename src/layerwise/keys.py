"""Digests of settings: the names a run's files and folders get from every setting that changes their contents.

Shared by the methods (a training run's folder, a model's identity in a result) and the results store
(:mod:`layerwise.benchmarks.store`, whose parts are keyed the same way).
"""

from __future__ import annotations

import hashlib
import json

__all__ = ["key_digest", "keyed_name", "model_key"]


def key_digest(key: dict) -> str:
    """First 16 hex digits of the sha256 of the key's canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(key, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def keyed_name(name: str, key) -> str:
    """``<name>-<first 8 hex digits of the key's digest>``: a folder or file name of its own for every setting, so
    that a run under changed settings never meets (or overwrites) another setting's files."""
    return f"{name}-{key_digest(key)[:8]}"


def model_key(identity) -> dict:
    """The part of a key that identifies a model's outputs: weights, tokenizer files and config (a ModelIdentity)."""
    return {"name": identity.name, "weights_sha256": identity.weights_sha256,
            "tokenizer_sha256": identity.tokenizer_sha256, "config_sha256": identity.config_sha256}
