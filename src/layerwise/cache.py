"""A disk cache of layer stacks, so that no sentence is encoded twice.

Layout
------
Entries for one cache key live in their own directory::

    <directory>/<sha256(canonical JSON of key + format version)[:16]>/
        key.json                      # the key, for humans (and a collision check)
        shard-<uuid>.safetensors      # up to ``chunk_size`` rows each
        shard-<uuid>.safetensors.corrupt   # damaged shards moved aside

Each shard holds the tensors ``mean`` (n, L+1, d), ``cls`` (n, L+1, d) and, when the model has a
pooler, ``pooler`` (n, d), plus safetensors metadata:

* ``format_version``: :data:`CACHE_FORMAT_VERSION`;
* ``text_sha256``: JSON list of the sha256 hex of each row's text (utf-8), row order;
* ``checksum``: sha256 of the raw little-endian bytes of ``mean``, ``cls``, ``pooler`` in that order;
* ``has_pooler``: ``"true"`` or ``"false"``.

Shards are immutable once written (temp file in the same directory, fsync, ``os.replace``), so an
interrupted run keeps every finished shard and several processes may share a directory. Building the
index reads only shard headers; tensors are read only for shards that hold requested texts. A damaged
shard is logged, moved aside and its texts recomputed; it is never used.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import tempfile
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from safetensors import safe_open
from safetensors.numpy import save_file

from layerwise.layers import LayerStack

__all__ = ["CACHE_FORMAT_VERSION", "CacheCorruptError", "LayerCache"]

logger = logging.getLogger(__name__)

CACHE_FORMAT_VERSION = 1
"""Version of the on-disk layout; part of every key, so a new version never reads old shards."""

_SHARD_GLOB = "shard-*.safetensors"
_TMP_PREFIX = ".tmp-"
_KEY_FILE = "key.json"
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
# safetensors dtype name <-> numpy dtype, for the floating dtypes a layer stack may hold.
_DTYPES = {"F16": np.dtype(np.float16), "F32": np.dtype(np.float32), "F64": np.dtype(np.float64)}
_DTYPE_NAMES = {v: k for k, v in _DTYPES.items()}


class CacheCorruptError(RuntimeError):
    """A cache file cannot be trusted.

    Damaged shards are handled inside :class:`LayerCache` (moved aside and recomputed); this error
    reaches the caller only when the cache directory itself does not belong to the key in use.
    """


@dataclass(frozen=True)
class _ShardInfo:
    """What a shard's header says about it (read without loading tensors)."""

    path: Path
    hashes: tuple[str, ...]  # (n,) sha256 hex of each row's text
    checksum: str
    has_pooler: bool
    n_states: int  # L + 1
    dim: int  # d
    dtype: np.dtype


@dataclass(frozen=True)
class _Layout:
    """The shape every stack stored under one key must share."""

    has_pooler: bool
    n_states: int
    dim: int
    dtype: np.dtype
    source: str  # where this layout was first seen, for error messages


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
        self._key = _canonical_json_value(dict(key), "key")
        self._key_json = json.dumps(
            {"format_version": CACHE_FORMAT_VERSION, "key": self._key},
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
            allow_nan=False,
        )
        digest = hashlib.sha256(self._key_json.encode("utf-8")).hexdigest()[:16]
        self._path = Path(directory).expanduser() / digest
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
        for pattern in (_SHARD_GLOB, _SHARD_GLOB + ".corrupt", _TMP_PREFIX + "*", _KEY_FILE):
            for p in self._path.glob(pattern):
                _unlink_quietly(p)
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
        if isinstance(texts, (str, bytes)):
            raise TypeError("texts must be a sequence of strings, not a single string; wrap it: [text]")
        texts = list(texts)
        if not texts:
            raise ValueError("texts is empty")
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise TypeError(f"texts[{i}] is {type(t).__name__}, expected str")
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
            raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}")

        # Distinct texts in first-seen order; `inverse[i]` is the distinct row of texts[i].
        hash_to_row: dict[str, int] = {}
        unique_texts: list[str] = []
        inverse = np.empty(len(texts), dtype=np.int64)
        for i, t in enumerate(texts):
            h = _text_sha256(t)
            row = hash_to_row.get(h)
            if row is None:
                row = hash_to_row[h] = len(unique_texts)
                unique_texts.append(t)
            inverse[i] = row
        unique_hashes = list(hash_to_row)

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
            layout = _check_computed(stack, len(chunk), layout)
            self._write_shard([unique_hashes[r] for r in rows], stack)
            parts.append((rows, stack))

        unique = _assemble(parts, len(unique_hashes), layout)
        if len(unique) == len(texts):  # no duplicates: inverse is the identity
            return unique
        return unique.take(inverse)

    # -- reading ---------------------------------------------------------------------------------

    def _build_index(self) -> tuple[dict[str, tuple[_ShardInfo, int]], _Layout | None]:
        """Map text sha256 -> (shard, row) from shard headers; the first shard holding a text wins.

        Shards with a damaged header are moved aside. Shards are visited oldest first so the
        winner does not change as new shards arrive.
        """
        index: dict[str, tuple[_ShardInfo, int]] = {}
        layout: _Layout | None = None
        if not self._path.is_dir():
            return index, layout
        self._check_key_file()
        paths = []
        for p in self._path.glob(_SHARD_GLOB):
            try:
                paths.append((p.stat().st_mtime_ns, p.name, p))
            except FileNotFoundError:  # moved aside by another process meanwhile
                continue
        for _, _, p in sorted(paths):
            try:
                info = _read_header(p)
            except CacheCorruptError as e:
                self._quarantine(p, str(e))
                continue
            except FileNotFoundError:
                continue
            layout = _merge_layout(layout, info.has_pooler, info.n_states, info.dim, info.dtype, str(p))
            for row, h in enumerate(info.hashes):
                index.setdefault(h, (info, row))
        return index, layout

    def _load_stored(
        self, hashes: list[str]
    ) -> tuple[list[tuple[np.ndarray, LayerStack]], _Layout | None]:
        """Rows of ``hashes`` already stored, as (positions in ``hashes``, stack) parts.

        A shard whose tensors fail verification is moved aside and the index rebuilt, so its texts
        come from another shard holding them or are reported missing.
        """
        parts: list[tuple[np.ndarray, LayerStack]] = []
        done: set[str] = set()
        while True:
            index, layout = self._build_index()
            wanted: dict[Path, tuple[_ShardInfo, list[int], list[int]]] = {}
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
                    stack = _read_rows(info, rows)
                except CacheCorruptError as e:
                    self._quarantine(info.path, str(e), n_texts=len(info.hashes))
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
        key_file = self._path / _KEY_FILE
        try:
            stored = json.loads(key_file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return
        except (OSError, ValueError) as e:
            logger.warning("layer cache key file %s is unreadable (%s); rewriting it", key_file, e)
            self._write_key_file()
            return
        ours = json.loads(self._key_json)
        if stored != ours:
            raise CacheCorruptError(
                f"layer cache directory {self._path} belongs to another key: {key_file} holds "
                f"{stored!r}, expected {ours!r}. Delete {self._path} or use another cache directory."
            )

    def _quarantine(self, path: Path, reason: str, *, n_texts: int | None = None) -> None:
        """Move a damaged shard aside (``*.corrupt``), or delete it if that fails."""
        what = f"its {n_texts} texts" if n_texts is not None else "its texts"
        dest = path.with_name(path.name + ".corrupt")
        try:
            os.replace(path, dest)
            action = f"moved aside to {dest.name}"
        except FileNotFoundError:
            action = "already removed by another process"
        except OSError:
            _unlink_quietly(path)
            action = "deleted"
        logger.warning(
            "layer cache shard %s is damaged (%s); %s, %s will be recomputed", path, reason, action, what
        )

    # -- writing ---------------------------------------------------------------------------------

    def _write_shard(self, hashes: list[str], stack: LayerStack) -> Path:
        """Write one shard atomically: temp file in the same directory, fsync, ``os.replace``."""
        self._path.mkdir(parents=True, exist_ok=True)
        if not (self._path / _KEY_FILE).exists():
            self._write_key_file()
        tensors = {"mean": np.ascontiguousarray(stack.mean), "cls": np.ascontiguousarray(stack.cls)}
        if stack.pooler is not None:
            tensors["pooler"] = np.ascontiguousarray(stack.pooler)
        metadata = {
            "format_version": str(CACHE_FORMAT_VERSION),
            "text_sha256": json.dumps(hashes),
            "checksum": _checksum(tensors),
            "has_pooler": "true" if stack.pooler is not None else "false",
        }
        final = self._path / f"shard-{uuid.uuid4().hex}.safetensors"
        fd, tmp = tempfile.mkstemp(dir=self._path, prefix=_TMP_PREFIX, suffix=".safetensors")
        os.close(fd)
        try:
            save_file(tensors, tmp, metadata=metadata)
            with open(tmp, "rb+") as f:
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, final)
        except BaseException:
            _unlink_quietly(Path(tmp))
            raise
        _fsync_dir(self._path)
        logger.debug("layer cache: wrote %d rows to %s", len(hashes), final)
        return final

    def _write_key_file(self) -> None:
        text = json.dumps(json.loads(self._key_json), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        fd, tmp = tempfile.mkstemp(dir=self._path, prefix=_TMP_PREFIX, suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self._path / _KEY_FILE)
        except BaseException:
            _unlink_quietly(Path(tmp))
            raise


# -- helpers -------------------------------------------------------------------------------------


def _text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _checksum(tensors: Mapping[str, np.ndarray]) -> str:
    """sha256 of the raw little-endian bytes of ``mean``, ``cls`` and (if present) ``pooler``."""
    h = hashlib.sha256()
    for name in ("mean", "cls", "pooler"):
        arr = tensors.get(name)
        if arr is None:
            continue
        arr = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<"))
        h.update(memoryview(arr).cast("B"))
    return h.hexdigest()


def _read_header(path: Path) -> _ShardInfo:
    """Parse and check a shard's header without loading its tensors; raise CacheCorruptError."""
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

    version = meta.get("format_version")
    if version != str(CACHE_FORMAT_VERSION):
        raise CacheCorruptError(f"format version {version!r}, expected {CACHE_FORMAT_VERSION}")
    try:
        hashes = json.loads(meta["text_sha256"])
        checksum = meta["checksum"]
        has_pooler = {"true": True, "false": False}[meta["has_pooler"]]
    except (KeyError, ValueError) as e:
        raise CacheCorruptError(f"bad metadata: {e!r}") from None
    if not isinstance(hashes, list) or not all(isinstance(h, str) and _SHA256_HEX.fullmatch(h) for h in hashes):
        raise CacheCorruptError("text_sha256 is not a list of sha256 hex digests")
    if not isinstance(checksum, str) or not _SHA256_HEX.fullmatch(checksum):
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
    if len(set(dtypes.values())) != 1 or dtypes["mean"] not in _DTYPES:
        raise CacheCorruptError(f"dtypes {dtypes}, expected one of {sorted(_DTYPES)} for all tensors")
    return _ShardInfo(
        path=path,
        hashes=tuple(hashes),
        checksum=checksum,
        has_pooler=has_pooler,
        n_states=mean[1],
        dim=mean[2],
        dtype=_DTYPES[dtypes["mean"]],
    )


def _read_rows(info: _ShardInfo, rows: list[int]) -> LayerStack:
    """Load a shard's tensors, verify the checksum and return ``rows`` of it (copies)."""
    try:
        with safe_open(str(info.path), framework="np") as f:
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    except FileNotFoundError:
        raise
    except Exception as e:
        raise CacheCorruptError(f"unreadable tensors: {e}") from e
    if _checksum(tensors) != info.checksum:
        raise CacheCorruptError("checksum mismatch in tensor data")
    idx = np.asarray(rows, dtype=np.int64)
    return LayerStack(
        mean=tensors["mean"][idx],
        cls=tensors["cls"][idx],
        pooler=tensors["pooler"][idx] if info.has_pooler else None,
    )


def _merge_layout(
    layout: _Layout | None, has_pooler: bool, n_states: int, dim: int, dtype: np.dtype, source: str
) -> _Layout:
    """Check a stack's layout against the one already seen for this key; ValueError on a mismatch."""
    if layout is None:
        return _Layout(has_pooler, n_states, dim, dtype, source)
    fix = (
        "The cache key must include everything that changes the output (model, weights hash or "
        "revision, max_length, dtype, ...); if it does, the encoder is inconsistent. "
        "Call LayerCache.clear() or delete the cache directory after fixing the cause."
    )
    if has_pooler != layout.has_pooler:
        raise ValueError(
            f"{source} {'has' if has_pooler else 'has no'} pooler output but {layout.source} "
            f"{'has' if layout.has_pooler else 'has none'}, under the same cache key. {fix}"
        )
    if (n_states, dim) != (layout.n_states, layout.dim):
        raise ValueError(
            f"{source} has {n_states} hidden states of size {dim} but {layout.source} has "
            f"{layout.n_states} of size {layout.dim}, under the same cache key. {fix}"
        )
    if dtype != layout.dtype:
        raise ValueError(
            f"{source} has dtype {dtype} but {layout.source} has {layout.dtype}, under the same cache key. {fix}"
        )
    return layout


def _check_computed(stack: object, n: int, layout: _Layout | None) -> _Layout:
    if not isinstance(stack, LayerStack):
        raise TypeError(f"compute must return a LayerStack, got {type(stack).__name__}")
    if len(stack) != n:
        raise ValueError(f"compute returned {len(stack)} rows for {n} texts; it must return one row per text")
    dtypes = {stack.mean.dtype, stack.cls.dtype} | ({stack.pooler.dtype} if stack.pooler is not None else set())
    if len(dtypes) != 1 or stack.mean.dtype not in _DTYPE_NAMES:
        raise TypeError(
            f"compute returned arrays of dtype {sorted(map(str, dtypes))}; the cache stores float16, "
            "float32 or float64 (convert e.g. bfloat16 with tensor.float().numpy())"
        )
    if stack.pooler is not None and stack.pooler.shape != (n, stack.dim):
        raise ValueError(f"compute returned pooler of shape {stack.pooler.shape}, expected {(n, stack.dim)}")
    return _merge_layout(
        layout, stack.pooler is not None, stack.n_states, stack.dim, stack.mean.dtype, "the computed stack"
    )


def _assemble(parts: list[tuple[np.ndarray, LayerStack]], n: int, layout: _Layout | None) -> LayerStack:
    """Scatter (rows, stack) parts into one stack of ``n`` rows; every row is covered exactly once."""
    if layout is None:  # unreachable: n >= 1 rows were either stored or computed
        raise RuntimeError("layer cache: no rows to assemble")
    shape = (n, layout.n_states, layout.dim)
    mean = np.empty(shape, dtype=layout.dtype)
    cls = np.empty(shape, dtype=layout.dtype)
    pooler = np.empty((n, layout.dim), dtype=layout.dtype) if layout.has_pooler else None
    for rows, stack in parts:
        mean[rows] = stack.mean
        cls[rows] = stack.cls
        if pooler is not None:
            pooler[rows] = stack.pooler
    return LayerStack(mean=mean, cls=cls, pooler=pooler)


def _canonical_json_value(value: object, where: str) -> object:
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
            out[k] = _canonical_json_value(v, f"{where}[{k!r}]")
        return out
    if isinstance(value, (list, tuple)):
        return [_canonical_json_value(v, f"{where}[{i}]") for i, v in enumerate(value)]
    hint = " (pass str(path))" if isinstance(value, os.PathLike) else ""
    raise TypeError(
        f"{where} is a {type(value).__name__}; cache key values must be JSON types "
        f"(str, int, float, bool, None, list, dict){hint}"
    )


def _unlink_quietly(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def _fsync_dir(path: Path) -> None:
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
