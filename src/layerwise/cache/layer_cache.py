"""``LayerCache``: layer stacks stored on disk under a key, so that no sentence is encoded twice.

The on-disk layout is described in :mod:`layerwise.cache`.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from layerwise.cache._format import KEY_FILE, SHARD_GLOB, TMP_PREFIX, CacheCorruptError, text_sha256
from layerwise.cache._keys import canonical_json_value, key_digest, key_json, write_key_file
from layerwise.cache._layout import Layout, assemble, check_computed, merge_layout
from layerwise.cache._shards import (
    ShardInfo,
    quarantine,
    read_header,
    read_rows,
    shards_oldest_first,
    unlink_quietly,
    write_shard,
)
from layerwise.layers import LayerStack

__all__ = ["LayerCache"]

logger = logging.getLogger(__name__)


class LayerCache:
    """Disk cache of :class:`~layerwise.layers.LayerStack` rows, keyed by text and by ``key``.

    Parameters
    ----------
    directory : str or os.PathLike
        Root directory of the cache; several keys can share it (each gets a subdirectory).
    key : Mapping[str, object]
        JSON-serialisable description of everything that changes the output: model name or path,
        weights sha256 or revision, ``max_length``, dtype, pooling kinds, ... Two keys that differ in
        any field never share entries. :data:`CACHE_FORMAT_VERSION` is added by the cache.

    Examples
    --------
    >>> cache = LayerCache("~/.cache/layerwise", {"model": "bert-base-uncased", "revision": "86b5e09",
    ...                                           "max_length": 128, "dtype": "float32"})
    >>> stack = cache.get_or_compute(texts, encoder.encode_layers)  # doctest: +SKIP
    """

    def __init__(self, directory: str | os.PathLike, key: Mapping[str, object]):
        if not isinstance(key, Mapping):
            raise TypeError(f"key must be a mapping of str to JSON values, got {type(key).__name__}")
        if not key:
            raise ValueError(
                "key is empty: it must name everything that changes the output "
                "(model name/path, weights sha256 or revision, max_length, dtype, ...)"
            )
        self._key = canonical_json_value(dict(key), "key")
        self._key_json = key_json(self._key)
        self._path = Path(directory).expanduser() / key_digest(self._key_json)
        #: {"distinct", "stored", "computed"} text counts of the last get_or_compute call (None before any)
        self.last_stats: dict[str, int] | None = None

    @property
    def path(self) -> Path:
        """Directory holding this key's shards (may not exist until the first write)."""
        return self._path

    @property
    def key(self) -> dict[str, object]:
        """A copy of the key (without the format version)."""
        return json.loads(json.dumps(self._key))

    def __repr__(self) -> str:
        return f"LayerCache(path={str(self._path)!r}, key={self._key!r})"

    def __len__(self) -> int:
        """Number of distinct texts stored for this key (damaged shards found on the way are moved aside)."""
        return len(self._build_index()[0])

    def clear(self) -> None:
        """Delete every shard (and moved-aside damaged shard) of this key, then its directory."""
        if not self._path.is_dir():
            return
        n = 0
        for pattern in (SHARD_GLOB, SHARD_GLOB + ".corrupt", TMP_PREFIX + "*", KEY_FILE):
            for p in self._path.glob(pattern):
                unlink_quietly(p)
                n += 1
        try:
            self._path.rmdir()
        except OSError:
            logger.warning("cleared layer cache %s but left the directory: it holds other files", self._path)
        logger.info("cleared layer cache %s (%d files)", self._path, n)

    def get_or_compute(
        self,
        texts: Sequence[str],
        compute: Callable[[list[str]], LayerStack],
        *,
        chunk_size: int = 4096,
    ) -> LayerStack:
        """Layer stacks of ``texts``, computing and storing only the texts not stored yet.

        Parameters
        ----------
        texts : sequence of str, length n
            Sentences; duplicates are allowed and each gets its own row.
        compute : callable (list of str, length m) -> LayerStack with m rows
            Encodes texts. Called once per chunk of at most ``chunk_size`` missing texts (each
            distinct missing text once, in first-seen order); each chunk's result is written to disk
            before the next chunk is computed, so an interrupted run keeps what it finished.
        chunk_size : int
            Maximum number of rows per shard and per ``compute`` call.

        Returns
        -------
        LayerStack
            ``mean`` and ``cls`` of shape (n, L+1, d), ``pooler`` of shape (n, d) or None; row ``i``
            belongs to ``texts[i]``.
        """
        texts = _checked_texts(texts)
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
            raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}")

        unique_texts, unique_hashes, inverse = _distinct(texts)
        parts, layout = self._load_stored(unique_hashes)  # [(distinct rows, stack)]
        found = np.zeros(len(unique_hashes), dtype=bool)
        for rows, _ in parts:
            found[rows] = True
        missing = np.flatnonzero(~found)
        self.last_stats = {
            "distinct": len(unique_hashes),
            "stored": len(unique_hashes) - len(missing),
            "computed": len(missing),
        }
        logger.info(
            "layer cache %s: %d of %d distinct texts stored, %d to compute",
            self._path, self.last_stats["stored"], len(unique_hashes), len(missing),
        )

        for start in range(0, len(missing), chunk_size):
            rows = missing[start : start + chunk_size]
            chunk = [unique_texts[r] for r in rows]
            stack = compute(chunk)
            layout = check_computed(stack, len(chunk), layout)
            self._write_shard([unique_hashes[r] for r in rows], stack)
            parts.append((rows, stack))

        unique = assemble(parts, len(unique_hashes), layout)
        if len(unique) == len(texts):  # no duplicates: inverse is the identity
            return unique
        return unique.take(inverse)

    # -- reading ---------------------------------------------------------------------------------

    def _build_index(self) -> tuple[dict[str, tuple[ShardInfo, int]], Layout | None]:
        """Map text sha256 -> (shard, row) from shard headers; the first shard holding a text wins.

        Shards with a damaged header are moved aside. Shards are visited oldest first so the
        winner does not change as new shards arrive.
        """
        index: dict[str, tuple[ShardInfo, int]] = {}
        layout: Layout | None = None
        if not self._path.is_dir():
            return index, layout
        self._check_key_file()
        for p in shards_oldest_first(self._path):
            try:
                info = read_header(p)
            except CacheCorruptError as e:
                quarantine(p, str(e))
                continue
            except FileNotFoundError:
                continue
            seen = Layout(info.has_pooler, info.n_states, info.dim, info.dtype, str(p))
            layout = merge_layout(layout, seen)
            for row, h in enumerate(info.hashes):
                index.setdefault(h, (info, row))
        return index, layout

    def _load_stored(
        self, hashes: list[str]
    ) -> tuple[list[tuple[np.ndarray, LayerStack]], Layout | None]:
        """Rows of ``hashes`` already stored, as (positions in ``hashes``, stack) parts.

        A shard whose tensors fail verification is moved aside and the index rebuilt, so its texts
        come from another shard holding them or are reported missing.
        """
        parts: list[tuple[np.ndarray, LayerStack]] = []
        done: set[str] = set()
        while True:
            index, layout = self._build_index()
            wanted: dict[Path, tuple[ShardInfo, list[int], list[int]]] = {}
            for pos, h in enumerate(hashes):
                if h in done or h not in index:
                    continue
                info, row = index[h]
                entry = wanted.setdefault(info.path, (info, [], []))
                entry[1].append(pos)
                entry[2].append(row)
            damaged = False
            for info, positions, rows in wanted.values():
                try:
                    stack = read_rows(info, rows)
                except CacheCorruptError as e:
                    quarantine(info.path, str(e), n_texts=len(info.hashes))
                    damaged = True
                    continue
                except FileNotFoundError:  # moved aside by another process meanwhile
                    damaged = True
                    continue
                parts.append((np.asarray(positions, dtype=np.int64), stack))
                done.update(hashes[p] for p in positions)
            if not damaged:
                return parts, layout

    def _check_key_file(self) -> None:
        key_file = self._path / KEY_FILE
        try:
            stored = json.loads(key_file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return
        except (OSError, ValueError) as e:
            logger.warning("layer cache key file %s is unreadable (%s); rewriting it", key_file, e)
            write_key_file(self._path, self._key_json)
            return
        ours = json.loads(self._key_json)
        if stored != ours:
            raise CacheCorruptError(
                f"layer cache directory {self._path} belongs to another key: {key_file} holds "
                f"{stored!r}, expected {ours!r}. Delete {self._path} or use another cache directory."
            )

    # -- writing ---------------------------------------------------------------------------------

    def _write_shard(self, hashes: list[str], stack: LayerStack) -> Path:
        """Write one shard atomically (creating the key's directory and ``key.json`` first if needed)."""
        self._path.mkdir(parents=True, exist_ok=True)
        if not (self._path / KEY_FILE).exists():
            write_key_file(self._path, self._key_json)
        return write_shard(self._path, hashes, stack)


def _checked_texts(texts: Sequence[str]) -> list[str]:
    """``texts`` as a non-empty list of str; TypeError or ValueError naming the fix."""
    if isinstance(texts, (str, bytes)):
        raise TypeError("texts must be a sequence of strings, not a single string; wrap it: [text]")
    texts = list(texts)
    if not texts:
        raise ValueError("texts is empty")
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"texts[{i}] is {type(t).__name__}, expected str")
    return texts


def _distinct(texts: list[str]) -> tuple[list[str], list[str], np.ndarray]:
    """Distinct texts in first-seen order, their sha256 hex, and ``inverse`` of shape (n,): the distinct row of
    ``texts[i]``."""
    hash_to_row: dict[str, int] = {}
    unique_texts: list[str] = []
    inverse = np.empty(len(texts), dtype=np.int64)
    for i, t in enumerate(texts):
        h = text_sha256(t)
        row = hash_to_row.get(h)
        if row is None:
            row = hash_to_row[h] = len(unique_texts)
            unique_texts.append(t)
        inverse[i] = row
    return unique_texts, list(hash_to_row), inverse
