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

Modules
-------
:mod:`~layerwise.cache.layer_cache` holds :class:`LayerCache`; the private modules hold the format
constants and the error (``_format``), the key's canonical JSON and ``key.json`` (``_keys``), shard
reading, checking and writing (``_shards``) and the shape checks and row assembly (``_layout``).
"""

from layerwise.cache._format import CACHE_FORMAT_VERSION, CacheCorruptError
from layerwise.cache.layer_cache import LayerCache

__all__ = ["CACHE_FORMAT_VERSION", "CacheCorruptError", "LayerCache"]
