"""``encode_corpus``: a corpus file -> an embedding file, chunk by chunk (bounded memory), with a progress bar.

The file is read, checked and hashed once before the model runs (:func:`~layerwise.encode.readers.check_corpus`),
then read again in chunks of ``chunk_size`` rows; each chunk is embedded, saved in the resume journal and written
at once. A run that was interrupted continues where it stopped, whichever the embedder (a pooling spec or an
exported folder): the same call again reads the finished chunks back from the journal, a work folder beside the
output keyed on the corpus, the embedder and the chunk size (:mod:`layerwise.encode.journal`), and encodes only the
rest; ``resume=False`` keeps no journal. A :class:`~layerwise.encode.embedders.SpecEmbedder`'s chunks also go
through its layer cache. The output appears only when complete (:mod:`layerwise.encode.writers`), and the journal is
then removed.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from layerwise._progress import progress
from layerwise.encode.journal import open_journal
from layerwise.encode.readers import CorpusSource, check_corpus, iter_corpus, require_pyarrow
from layerwise.encode.shards import load_shard_folder
from layerwise.encode.writers import check_output, ids_path, open_writer, output_lock
from layerwise.finite import check_finite

logger = logging.getLogger(__name__)

__all__ = ["EncodeResult", "encode_corpus", "load_embeddings"]


@dataclass
class EncodeResult:
    """What ``encode_corpus`` wrote."""

    output: str
    ids: str | None  # the ids file of a .npy output (a .parquet output holds its ids)
    n: int
    dim: int
    seconds: float


def encode_corpus(source: CorpusSource, output: str | os.PathLike, embedder, *, chunk_size: int = 4096,
                  overwrite: bool = False, show_progress: bool | None = None, resume: bool = True) -> EncodeResult:
    """Embed every text of ``source`` with ``embedder`` (``encode(texts) -> (n, d)``, ``dim``) into ``output``.

    ``resume``: keep each finished chunk in a work folder beside ``output`` until it is complete, so that the same
    call after an interrupt encodes only the missing chunks (needs ``embedder.output_key()``, as the layerwise
    embedders give). Returns an :class:`EncodeResult`; the vectors are float32 of shape (n, d), row i = the corpus's
    row i.
    """
    if int(chunk_size) < 1:
        raise ValueError(f"chunk_size must be at least 1, got {chunk_size}")
    output = check_output(output, overwrite=overwrite, inputs=(source.path,))
    with output_lock(output):  # a second encode of this output is refused while this one runs
        return _encode(source, output, embedder, int(chunk_size), show_progress, resume)


def _encode(source: CorpusSource, output: Path, embedder, chunk_size: int, show_progress, resume: bool
            ) -> EncodeResult:
    corpus = check_corpus(source)
    t0 = time.perf_counter()
    journal = open_journal(output, embedder, corpus, int(chunk_size), resume=resume)
    writer = open_writer(output, corpus.n, embedder.dim)
    show = logger.isEnabledFor(logging.INFO) if show_progress is None else show_progress
    done = 0
    try:
        with progress(total=corpus.n, desc="encoding corpus", unit="text", disable=not show) as bar:
            for index, (ids, texts) in enumerate(iter_corpus(source, int(chunk_size))):
                vectors = journal.load(index, ids)
                if vectors is None:
                    vectors = check_finite(embedder.encode(texts), f"the vectors of {_describe(embedder)} for "
                                           f"corpus rows {done}..{done + len(ids) - 1}", fix=_NAN_FIX)
                    vectors = journal.save(index, ids, vectors)
                writer.write(ids, vectors)
                bar.update(len(ids))
                done += len(ids)
        writer.close()
    except BaseException:
        writer.abort()
        raise
    journal.finish()
    npy = output.suffix.lower() == ".npy"
    return EncodeResult(str(output), str(ids_path(output)) if npy else None, corpus.n, embedder.dim,
                        time.perf_counter() - t0)


_NAN_FIX = ("the model's weights are damaged or its training diverged: load another copy of the model; nothing was "
            "written")


def _describe(embedder) -> str:
    """The model or folder behind ``embedder``, for messages."""
    about = embedder.describe() if hasattr(embedder, "describe") else {}
    if "folder" in about:
        return f"the folder {about['folder']}"
    model = about.get("model") or {}
    return str(model.get("name") or type(embedder).__name__)


def load_embeddings(output: str | os.PathLike):
    """``(ids, vectors)`` in corpus order (vectors (n, d) float32) of what ``layerwise encode`` wrote.

    ``output``: a ``.npy`` (ids beside it) or ``.parquet`` file from :func:`encode_corpus`, or the folder of Parquet
    shards from :func:`~layerwise.encode.ray_engine.encode_corpus_ray` (read with pyarrow; Ray is not needed).
    """
    output = Path(output)
    if output.is_dir():
        return load_shard_folder(output)
    if output.suffix.lower() == ".npy":
        return ids_path(output).read_text(encoding="utf-8").splitlines(), np.load(output)
    table = require_pyarrow(f"reading {output}").read_table(str(output))
    return table.column("id").to_pylist(), np.asarray(table.column("embedding").to_pylist(), dtype=np.float32)
