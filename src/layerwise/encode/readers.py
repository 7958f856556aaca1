"""Corpus files read in chunks for ``layerwise encode``, through the shared reader :func:`layerwise.data.iter_texts`.

The formats and their checks are :mod:`layerwise.data.readers`' (one text per line ``.txt``, ``.jsonl``, ``.csv``,
``.tsv``, ``.parquet``; read streaming, so memory stays bounded by the chunk). :func:`scan_corpus` reads the whole
file once before any encoding: a bad row (invalid JSON, a missing column, an empty text, a missing id or one with a
line break) stops the run there, with the file, line (row for Parquet) and fix named. An id is the row's
``id_column`` value (as a string) or its row number from 0. The same pass hashes every row's id and text
(:func:`check_corpus`): a checksum of what the rows hold (not of the file's bytes, so the text and id columns chosen
count and unread columns do not), computed streaming, which is what a resume key needs of a corpus too large to hold.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Iterator

from layerwise.data.readers import CORPUS_SUFFIXES, iter_texts, require_pyarrow
from layerwise.errors import DataFileError

__all__ = ["CORPUS_FORMATS", "CorpusScan", "CorpusSource", "check_corpus", "iter_corpus",
           "require_pyarrow", "scan_corpus"]

#: suffix -> format of the corpora ``layerwise encode`` reads (those of :func:`layerwise.data.iter_texts`)
CORPUS_FORMATS = {suffix: {".txt": "text", ".tsv": "csv"}.get(suffix, suffix[1:]) for suffix in CORPUS_SUFFIXES}


@dataclass(frozen=True)
class CorpusSource:
    """Where the texts are: a file and, for JSONL/CSV/Parquet, which field holds the text and which the id."""

    path: str
    column: str = "text"  # the text field (JSONL, CSV, Parquet); a .txt corpus has none (refused unless "text")
    id_column: str | None = None  # the id field; None: the row number from 0 (refused for .txt)


def _checked(source: CorpusSource) -> Iterator[tuple[str, str]]:
    return iter_texts(source.path, column=source.column, id_column=source.id_column)


@dataclass(frozen=True)
class CorpusScan:
    """What one checking pass over a corpus found."""

    n: int  # rows
    sha256: str  # of every row's id and text in order (each length-prefixed, UTF-8): what the rows hold


def check_corpus(source: CorpusSource) -> CorpusScan:
    """Read every row once, check it (see the module docstring) and hash it; raises UsageError on a bad row."""
    h, n = hashlib.sha256(), 0
    for ident, text in _checked(source):  # surrogatepass: JSON allows lone surrogates
        ident_bytes, text_bytes = (v.encode("utf-8", "surrogatepass") for v in (ident, text))
        h.update(f"{len(ident_bytes)}:{len(text_bytes)}:".encode())
        h.update(ident_bytes)
        h.update(text_bytes)
        n += 1
    if n == 0:
        raise DataFileError(f"corpus {source.path} holds no rows; nothing to encode")
    return CorpusScan(n, h.hexdigest())


def scan_corpus(source: CorpusSource) -> int:
    """Read every row once and check it (see the module docstring); returns the number of rows."""
    return check_corpus(source).n


def iter_corpus(source: CorpusSource, chunk_size: int) -> Iterator[tuple[list[str], list[str]]]:
    """``(ids, texts)`` chunks of at most ``chunk_size`` rows, in file order."""
    ids: list[str] = []
    texts: list[str] = []
    for ident, text in _checked(source):
        ids.append(ident)
        texts.append(text)
        if len(texts) == chunk_size:
            yield ids, texts
            ids, texts = [], []
    if texts:
        yield ids, texts
