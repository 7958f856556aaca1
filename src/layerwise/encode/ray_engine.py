"""``encode_corpus_ray``: a corpus -> a folder of Parquet shards, on Ray Data with a pool of actors holding the model.

The corpus is checked first, in this process, by the same reader as the local path
(:func:`~layerwise.encode.readers.scan_corpus`), and the embedder is built once here to validate the options and
record the model's identity. The rows are then read in chunks of ``rows_per_block`` (one Ray block each; by
default about four per actor, so the pool shares the work), put in the object store one at a time (this process
holds one chunk), with columns ``row`` (the corpus row from 0), ``id`` and ``text``. ``map_batches`` runs them
through a fixed pool of ``actors`` actors (``ActorPoolStrategy(size=...)``), each of which builds its embedder ONCE
from a small picklable :class:`~layerwise.encode.embedders.EmbedderConfig`; ``write_parquet`` writes the shards into a
temporary sibling of OUTPUT that is renamed into place with its manifest when complete
(:mod:`layerwise.encode.shards` says what the folder holds and loads it in corpus order). Each vector equals the
local path's (:func:`~layerwise.encode.corpus.encode_corpus`) to float rounding: a text's vector does not depend on
the other texts of its batch.

Ray is started (a local instance with this machine's CPUs, or ``ray.init(address=...)`` for a cluster) only when it
is not already initialised, and shut down only when it was started here. On a cluster OUTPUT must be a path that
every node can write (a shared filesystem), and layerwise must be installed on every node.
"""

from __future__ import annotations

import logging
import os
import re
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from layerwise.encode.corpus import EncodeResult
from layerwise.encode.embedders import EmbedderConfig
from layerwise.encode.readers import CorpusSource, iter_corpus, scan_corpus
from layerwise.encode.shards import check_output_folder, is_shard_folder, write_manifest
from layerwise.encode.writers import output_lock
from layerwise.errors import LayerwiseError, UsageError
from layerwise.files import atomic_folder
from layerwise.finite import check_finite

logger = logging.getLogger(__name__)

__all__ = ["MAX_ROWS_PER_BLOCK", "RayEncodeConfig", "encode_corpus_ray", "require_ray", "user_error_in"]

MAX_ROWS_PER_BLOCK = 4096  # the local path's default chunk: what one process holds of the corpus at a time


@dataclass(frozen=True)
class RayEncodeConfig:
    """Where and how wide the Ray run is."""

    address: str | None = None  # a Ray cluster ("auto", "ray://host:10001", "host:6379"); None: a local instance
    actors: int | None = None  # actors holding the model; None: one per GPU, or one per CPU less one (see actor_count)
    cpus_per_actor: float = 1.0  # CPUs reserved per actor (fractions allowed); also its torch thread count (>= 1)
    gpus_per_actor: float = 0.0  # GPUs per actor; > 0 runs the model on "cuda"
    rows_per_block: int | None = None  # corpus rows per Ray block (what an actor receives; one shard each); None:
    # about 4 blocks per actor (so the pool shares the work), at most MAX_ROWS_PER_BLOCK
    rows_per_batch: int = 256  # rows per map_batches call of an actor (its embedder batches them by batch_size)

    def __post_init__(self) -> None:
        if self.actors is not None and int(self.actors) < 1:
            raise UsageError(f"actors must be at least 1, got {self.actors}")
        if not self.cpus_per_actor > 0:
            raise UsageError(f"cpus_per_actor must be positive, got {self.cpus_per_actor}")
        if self.gpus_per_actor < 0:
            raise UsageError(f"gpus_per_actor must be 0 or more, got {self.gpus_per_actor}")
        for name in ("rows_per_block", "rows_per_batch"):
            if getattr(self, name) is not None and int(getattr(self, name)) < 1:
                raise UsageError(f"{name} must be at least 1, got {getattr(self, name)}")


def require_ray():
    """``ray`` (with Ray Data), or a one-line error with the install hint."""
    try:
        import ray
        import ray.data  # noqa: F401 - Ray Data is a separate extra of ray
    except ImportError:
        raise UsageError('--engine ray needs Ray Data, which is not installed: pip install "layerwise[ray]" (or pip '
                         'install "ray[data]"), or use --engine local') from None
    return ray


def actor_count(config: RayEncodeConfig, resources: dict) -> int:
    """``config.actors``, or as many as the cluster's ``resources`` hold while one CPU stays free.

    The free CPU runs Ray Data's other tasks (the Parquet writes): actors that reserve every CPU starve them.
    """
    if config.actors is not None:
        return int(config.actors)
    if config.gpus_per_actor > 0:
        return max(1, int(resources.get("GPU", 0) // config.gpus_per_actor))
    return max(1, int((resources.get("CPU", 1) - 1) // config.cpus_per_actor))


class _EmbedActor:
    """The ``map_batches`` callable class: builds the embedder once per actor, then embeds batch after batch."""

    def __init__(self, embedder: dict, threads: int):
        import torch

        torch.set_num_threads(max(1, int(threads)))
        self.embedder = EmbedderConfig.from_dict(embedder).build()

    def __call__(self, batch):
        """A pyarrow batch (row, id, text) of b rows -> (row, id, embedding: b fixed-size lists of dim float32)."""
        import numpy as np
        import pyarrow as pa

        vectors = np.ascontiguousarray(self.embedder.encode(batch.column("text").to_pylist()), dtype=np.float32)
        check_finite(vectors, f"the vectors of corpus rows from {batch.column('row')[0]} (Ray block)",
                     fix="the model's weights are damaged or its training diverged: load another copy")
        embedding = pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), vectors.shape[1])
        return pa.table({"row": batch.column("row"), "id": batch.column("id"), "embedding": embedding})


def _blocks(ray, source: CorpusSource, rows_per_block: int):
    """The corpus as a Ray Dataset of blocks (row int64, id string, text string), one chunk in memory at a time."""
    import pyarrow as pa

    refs, start = [], 0
    for ids, texts in iter_corpus(source, rows_per_block):
        rows = pa.array(range(start, start + len(ids)), pa.int64())
        refs.append(ray.put(pa.table({"row": rows, "id": pa.array(ids, pa.string()),
                                      "text": pa.array(texts, pa.string())})))
        start += len(ids)
    return ray.data.from_arrow_refs(refs)


def _start(ray, address: str | None) -> bool:
    """Connect to (or start) Ray unless it is already initialised; True when this call started it."""
    if ray.is_initialized():
        logger.info("using the Ray instance already initialised in this process")
        return False
    if address is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        ray.init(address="local", num_cpus=cpus, include_dashboard=False,
                 logging_level=logging.WARNING)
    else:
        ray.init(address=address, logging_level=logging.WARNING)
    return True


def _run(ray, source: CorpusSource, n: int, tmp: Path, embedder: EmbedderConfig, config: RayEncodeConfig) -> int:
    """Encode the ``n`` rows of ``source`` into shards in ``tmp`` with the actor pool; returns the actor count."""
    actors = actor_count(config, ray.cluster_resources())
    rows_per_block = config.rows_per_block or min(MAX_ROWS_PER_BLOCK, -(-n // (4 * actors)))
    description = EmbedderConfig.from_dict({**embedder.to_dict(),
                                            "device": "cuda" if config.gpus_per_actor > 0 else embedder.device})
    ds = _blocks(ray, source, int(rows_per_block)).map_batches(
        _EmbedActor, batch_format="pyarrow", batch_size=int(config.rows_per_batch),
        compute=ray.data.ActorPoolStrategy(size=actors),
        fn_constructor_kwargs={"embedder": description.to_dict(), "threads": config.cpus_per_actor},
        num_cpus=config.cpus_per_actor, num_gpus=config.gpus_per_actor or None)
    ds.write_parquet(str(tmp))
    return actors


def encode_corpus_ray(source: CorpusSource, output_dir: str | os.PathLike, embedder: EmbedderConfig, *,
                      config: RayEncodeConfig | None = None, overwrite: bool = False,
                      show_progress: bool | None = None, command: list[str] | None = None) -> EncodeResult:
    """Embed every text of ``source`` into Parquet shards in the folder ``output_dir`` (see the module docstring).

    ``config``: where and how wide (default :class:`RayEncodeConfig`: a local instance, one actor per CPU less one).
    Returns an :class:`~layerwise.encode.corpus.EncodeResult` whose ``output`` is the folder;
    :func:`~layerwise.encode.load_embeddings` gives back ids and vectors (n, d) in corpus order.
    """
    config = RayEncodeConfig() if config is None else config
    output = check_output_folder(output_dir, overwrite=overwrite)
    with output_lock(output):  # a second encode of this output is refused while this one runs (as the local path)
        n = scan_corpus(source)  # a bad file stops here, before Ray starts or a model loads
        ray = require_ray()
        local = EmbedderConfig.from_dict({**embedder.to_dict(), "device": "cpu"}).build()  # checks the options once
        identity, dim = local.describe(), int(local.dim)
        del local
        t0 = time.perf_counter()
        started = _start(ray, config.address)
        try:
            with _data_context(ray, logger.isEnabledFor(logging.INFO) if show_progress is None else show_progress), \
                    atomic_folder(output, replaceable=is_shard_folder) as tmp, _actor_errors(ray):
                actors = _run(ray, source, n, tmp, embedder, config)
                written = _count_rows(tmp)
                if written != n:
                    raise RuntimeError(f"Ray wrote {written} rows into {tmp}, expected {n}")
                write_manifest(tmp, {"n": n, "dim": dim, "embedder": embedder.to_dict(), "identity": identity,
                                     "engine": {"name": "ray", "actors": actors, "ray": ray.__version__},
                                     "command": command})
        finally:
            if started:
                ray.shutdown()
    return EncodeResult(str(output), None, n, dim, time.perf_counter() - t0)


#: a user error raised in an actor, as Ray's text of it: ``layerwise.finite.NonFiniteError: the vectors ...``
_RAISED = re.compile(r"^(layerwise(?:\.\w+)+Error): (.+)$", re.MULTILINE)


def user_error_in(exc: BaseException) -> BaseException | None:
    """The user error (a :class:`~layerwise.errors.LayerwiseError`) an actor raised, found in the chain of what Ray
    raised in this process (``RayTaskError(UserCodeException)`` -> ``.cause`` / ``__cause__``), or in the text of an
    actor that died in its constructor; None for anything else (a bug, or Ray's own failure)."""
    seen, todo = set(), [exc]
    while todo:
        err = todo.pop()
        if err is None or id(err) in seen:
            continue
        seen.add(id(err))
        if isinstance(err, LayerwiseError) and not type(err).__module__.startswith("ray."):
            return err
        todo += [getattr(err, "cause", None), err.__cause__, err.__context__]
    found = _RAISED.findall(str(exc))
    return UsageError(" ".join(found[-1][1].split())) if found else None


@contextmanager
def _actor_errors(ray) -> Iterator[None]:
    """A user error raised inside an actor (NaN vectors, a model that cannot load) reaches the caller as itself, in
    one line (Ray's wrapping and its remote traceback dropped); Ray Data's own logging of the failure is silenced."""
    quiet = [logging.getLogger(name) for name in ("ray.data", "ray.data._internal.execution.streaming_executor_state",
                                                  "ray.data.exceptions")]
    levels = [q.level for q in quiet]
    for q in quiet:
        q.setLevel(logging.CRITICAL)
    try:
        yield
    except ray.exceptions.RayError as exc:
        err = user_error_in(exc)
        if err is None:
            raise
        raise err.with_traceback(None) from None
    finally:
        for q, level in zip(quiet, levels):
            q.setLevel(level)


@contextmanager
def _data_context(ray, show_progress: bool) -> Iterator[None]:
    """Ray Data keeps the block order (shards in corpus order; the loader sorts on row anyway), progress bars as
    asked; the caller's settings are put back after."""
    context = ray.data.DataContext.get_current()
    saved = context.execution_options.preserve_order, context.enable_progress_bars
    context.execution_options.preserve_order, context.enable_progress_bars = True, bool(show_progress)
    try:
        yield
    finally:
        context.execution_options.preserve_order, context.enable_progress_bars = saved


def _count_rows(folder: Path) -> int:
    import pyarrow.parquet as pq

    return sum(pq.read_metadata(str(p)).num_rows for p in Path(folder).glob("*.parquet"))
