"""Corpus files read in chunks: one text per line (``.txt``), JSON lines (``.jsonl``), CSV/TSV or Parquet.

Every reader yields ``(ids, texts)`` chunks of at most ``chunk_size`` rows, so memory stays bounded by the chunk.
:func:`scan_corpus` reads the whole file once before any encoding: a bad row (invalid JSON, a missing column, an
empty text, an id with a line break) stops the run there, with the file, row and fix named. An id is the row's
``id_column`` value (as a string) or its row number from 0. The same pass hashes every row's id and text
(:func:`check_corpus`): a checksum of what the rows hold (not of the file's bytes, so the text and id columns chosen
count and unread columns do not), computed streaming, which is what a resume key needs of a corpus too large to hold.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from layerwise.errors import UsageError

__all__ = ["CORPUS_FORMATS", "CorpusScan", "CorpusSource", "check_corpus", "corpus_format", "iter_corpus",
           "require_pyarrow", "scan_corpus"]

CORPUS_FORMATS = {".txt": "text", ".jsonl": "jsonl", ".csv": "csv", ".tsv": "csv", ".parquet": "parquet"}


@dataclass(frozen=True)
class CorpusSource:
    """Where the texts are: a file and, for JSONL/CSV/Parquet, which field holds the text and which the id."""

    path: str
    column: str = "text"  # the text field (JSONL, CSV, Parquet); ignored for .txt
    id_column: str | None = None  # the id field; None: the row number from 0


def require_pyarrow(what: str):
    """``pyarrow.parquet``, or a one-line error with the install hint."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise UsageError(f"{what} needs pyarrow, which is not installed: pip install 'layerwise[parquet]' (or "
                         "pip install pyarrow), or use .txt, .jsonl, .csv or .npy") from None
    return pq


def corpus_format(path: str | os.PathLike) -> str:
    suffix = Path(path).suffix.lower()
    if suffix not in CORPUS_FORMATS:
        raise UsageError(f"corpus {path} has suffix {suffix or '(none)'!r}; layerwise reads "
                         f"{', '.join(CORPUS_FORMATS)}: rename the file or convert it")
    return CORPUS_FORMATS[suffix]


def _rows(source: CorpusSource) -> Iterator[tuple[int, object, object]]:
    """(row number, id value or None, text value) of every row; raises UsageError on a malformed row."""
    path, fmt = Path(source.path), corpus_format(source.path)
    if not path.is_file():
        raise UsageError(f"corpus {path} does not exist or is not a file; pass an existing file")
    if fmt == "parquet":
        yield from _parquet_rows(source)
        return
    with open(path, encoding="utf-8", newline="" if fmt == "csv" else None) as fh:
        if fmt == "text":
            for i, line in enumerate(fh):
                yield i, None, line.rstrip("\n").rstrip("\r")
        elif fmt == "jsonl":
            for i, line in enumerate(fh):
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise UsageError(f"{path} line {i + 1} is not JSON ({exc.msg}); each line must be one JSON "
                                     "object") from None
                if not isinstance(obj, dict):
                    raise UsageError(f"{path} line {i + 1} is a JSON {type(obj).__name__}, not an object")
                yield i, _field(obj, source.id_column, path, i) if source.id_column else None, \
                    _field(obj, source.column, path, i)
        else:
            reader = csv.DictReader(fh, delimiter="\t" if path.suffix.lower() == ".tsv" else ",")
            for name in (source.column, source.id_column):
                if name and name not in (reader.fieldnames or []):
                    raise UsageError(f"{path} has no column {name!r} (columns: {reader.fieldnames}); pass --column / "
                                     "--id-column with one of them")
            for i, row in enumerate(reader):
                yield i, row[source.id_column] if source.id_column else None, row[source.column]


def _field(obj: dict, name: str, path: Path, i: int):
    if name not in obj:
        raise UsageError(f"{path} line {i + 1} has no field {name!r} (fields: {sorted(obj)}); pass --column / "
                         "--id-column naming the field")
    return obj[name]


def _parquet_rows(source: CorpusSource) -> Iterator[tuple[int, object, object]]:
    pq = require_pyarrow(f"reading {source.path}")
    try:
        pf = pq.ParquetFile(source.path)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a damaged file
        raise UsageError(f"{source.path} cannot be read as Parquet ({type(exc).__name__}: {exc})") from None
    names = pf.schema_arrow.names
    for name in (source.column, source.id_column):
        if name and name not in names:
            raise UsageError(f"{source.path} has no column {name!r} (columns: {names}); pass --column / "
                             "--id-column with one of them")
    columns = [c for c in (source.column, source.id_column) if c]
    i = 0
    for batch in pf.iter_batches(batch_size=4096, columns=columns):
        texts = batch.column(source.column).to_pylist()
        ids = batch.column(source.id_column).to_pylist() if source.id_column else [None] * len(texts)
        for ident, text in zip(ids, texts, strict=True):
            yield i, ident, text
            i += 1


def _checked(source: CorpusSource) -> Iterator[tuple[str, str]]:
    for i, ident, text in _rows(source):
        where = f"{source.path} row {i} (from 0)"
        if not isinstance(text, str):
            raise UsageError(f"{where}: the text is {type(text).__name__}, not a string; fix or drop that row")
        if not text.strip():
            raise UsageError(f"{where}: the text is empty; remove empty rows (they would all get the same vector)")
        ident = str(i) if ident is None else str(ident)
        if "\n" in ident or "\r" in ident:
            raise UsageError(f"{where}: the id {ident!r} holds a line break; ids are written one per line")
        yield ident, text


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
        raise UsageError(f"corpus {source.path} holds no rows; nothing to encode")
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
