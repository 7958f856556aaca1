"""The file formats under :mod:`layerwise.data.readers`: CSV/TSV, JSON lines, Parquet and plain text, read streaming.

Every table is read row by row (Parquet in record batches), so a caller that does not keep the rows (``layerwise
encode``) holds one row or batch at a time. Text files are decoded line by line as UTF-8 (a byte-order mark at the
start is dropped), so an undecodable byte is reported with its line number. Positions in messages: ``line N``
counts the physical lines of a text file from 1 (a CSV/TSV header is line 1); ``row N`` counts a Parquet file's rows
from 1. CSV and TSV are told apart by the suffix (``.csv`` comma, ``.tsv`` tab) and quoted as the :mod:`csv` module
does (RFC 4180: a field holding the delimiter, a quote or a line break is quoted); CRLF line ends are fine. Header
names are stripped of surrounding spaces; blank lines (CSV/TSV/JSONL) are skipped.
"""

from __future__ import annotations

import codecs
import csv
import json
import os
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from layerwise.errors import DataFileError, UsageError

__all__ = ["CORPUS_SUFFIXES", "TABLE_SUFFIXES", "check_file", "columns_of", "iter_lines", "iter_records",
           "require_pyarrow"]

ARG = DataFileError.ARGUMENT
TABLE_SUFFIXES = (".csv", ".tsv", ".jsonl", ".parquet")  # pairs, labelled texts, triplets, word pairs
CORPUS_SUFFIXES = (".txt", *TABLE_SUFFIXES)  # a corpus may also be one text per line


def require_pyarrow(what: str):
    """``pyarrow.parquet``, or a one-line error with the install hint."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise UsageError(f"{what} needs pyarrow, which is not installed: pip install 'layerwise[parquet]' (or "
                         "pip install pyarrow), or use .txt, .jsonl, .csv or .npy") from None
    return pq


def check_file(path: str | os.PathLike, suffixes: tuple[str, ...], what: str) -> Path:
    """``path`` as a Path once it is known to be a non-empty file with one of ``suffixes``; DataFileError if not."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in suffixes:
        raise DataFileError(f"{what} {path} has suffix {suffix or '(none)'!r}; layerwise reads {', '.join(suffixes)} "
                            "here: rename the file to match its format or convert it")
    if not path.exists():
        raise DataFileError(f"{what} {path} does not exist; pass the path of an existing file")
    if not path.is_file():
        raise DataFileError(f"{what} {path} is not a file; pass the path of a {'/'.join(suffixes)} file")
    if path.stat().st_size == 0:
        raise DataFileError(f"{what} {path} is empty (holds no rows); pass a file with a header and rows")
    return path


def iter_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number from 1, line with its line end) of a UTF-8 text file; DataFileError naming the line if undecodable."""
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            if lineno == 1 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8):]
            try:
                yield lineno, raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataFileError(
                    f"{path} line {lineno} is not valid UTF-8 (byte {raw[exc.start:exc.start + 1]!r} at column "
                    f"{exc.start + 1}); save the file as UTF-8 (UTF-8 with a byte-order mark is fine too)") from None


def columns_of(path: Path) -> list[str]:
    """The column names: a CSV/TSV header, a Parquet schema, the fields of a JSONL file's first record."""
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return list(_parquet_file(path).schema_arrow.names)
    if suffix == ".jsonl":
        for _, record in _jsonl_records(path):
            return list(record)
        return []
    header, _ = _csv_header(path, _csv_rows(path))
    return header


def iter_records(path: Path, fields: Mapping[str, str], *, optional: Iterable[str] = ()
                 ) -> Iterator[tuple[str, dict[str, object]]]:
    """(position, {argument: value}) of every row; ``fields`` maps argument names to column names.

    A column missing from the file raises DataFileError whose fix names the argument, except the ``optional``
    arguments, which are None where absent. CSV/TSV values are strings; JSONL and Parquet values keep their types.
    """
    optional = set(optional)
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        yield from _parquet_records(path, fields, optional)
    elif suffix == ".jsonl":
        for where, record in _jsonl_records(path):
            for arg, column in fields.items():
                if column not in record and arg not in optional:
                    raise DataFileError(f"{path} {where} has no field {column!r} (fields: {', '.join(record)}); "
                                        f"pass {ARG} with one of them", argument=arg)
            yield where, {arg: record.get(column) for arg, column in fields.items()}
    else:
        yield from _csv_records(path, fields, optional)


# ----------------------------------------------------------------------------------------------
# JSON lines


class _DuplicateKey(Exception):
    pass


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict:
    keys = Counter(k for k, _ in pairs)
    repeated = [k for k, n in keys.items() if n > 1]
    if repeated:
        raise _DuplicateKey(repeated[0])
    return dict(pairs)


def _jsonl_records(path: Path) -> Iterator[tuple[str, dict]]:
    for lineno, line in iter_lines(path):
        if not line.strip():
            continue
        try:
            obj = json.loads(line, object_pairs_hook=_no_duplicates)
        except json.JSONDecodeError as exc:
            raise DataFileError(f"{path} line {lineno} is not JSON ({exc.msg}); each line must be one JSON object") \
                from None
        except _DuplicateKey as exc:
            raise DataFileError(f"{path} line {lineno} has the field {exc.args[0]!r} twice; keep one "
                                "(a duplicate header)") from None
        if not isinstance(obj, dict):
            raise DataFileError(f"{path} line {lineno} is a JSON {type(obj).__name__}, not an object; each line must "
                                'be one JSON object such as {"text": ...}')
        yield f"line {lineno}", obj


# ----------------------------------------------------------------------------------------------
# CSV / TSV


def _csv_rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    """(first line of the row, fields) of every non-blank row, header included."""
    delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
    lines = iter_lines(path)
    current = [0]

    def text() -> Iterator[str]:
        for lineno, line in lines:
            current[0] = lineno
            yield line

    reader = csv.reader(text(), delimiter=delimiter)
    start = 1
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise DataFileError(f"{path} line {current[0]} cannot be read as {path.suffix[1:].upper()} ({exc}); "
                                "quote fields that hold the delimiter, a quote or a line break") from None
        if row and any(field.strip() for field in row):
            yield start, row
        start = current[0] + 1


def _csv_header(path: Path, rows: Iterator[tuple[int, list[str]]]) -> tuple[list[str], Iterator]:
    try:
        _, header = next(rows)
    except StopIteration:
        raise DataFileError(f"{path} is empty (holds no rows); pass a file with a header and rows") from None
    header = [name.strip() for name in header]
    _check_header(path, header)
    return header, rows


def _check_header(path: Path, header: list[str]) -> None:
    repeated = [name for name, n in Counter(header).items() if n > 1]
    if repeated:
        raise DataFileError(f"{path} has the column {repeated[0]!r} {header.count(repeated[0])} times in its header "
                            f"({', '.join(header)}); rename the duplicates so each column has one name")


def _missing(path: Path, header: list[str], fields: Mapping[str, str], optional: set[str]) -> None:
    for arg, column in fields.items():
        if column not in header and arg not in optional:
            other = [d for d in (";", "\t", ",", "|") if len(header) == 1 and d in header[0]]
            if other:  # one column whose name holds a delimiter: the file is separated by something else
                raise DataFileError(f"{path} has no column {column!r}: its header is one column, {header[0]!r}, so "
                                    f"it is probably separated by {other[0]!r}; .csv files are read comma-separated "
                                    "and .tsv tab-separated: convert the file or give it the suffix of its "
                                    "delimiter")
            raise DataFileError(f"{path} has no column {column!r} (columns: {', '.join(header)}); pass {ARG} with "
                                "one of them", argument=arg)


def _csv_records(path: Path, fields: Mapping[str, str], optional: set[str]) -> Iterator[tuple[str, dict]]:
    header, rows = _csv_header(path, _csv_rows(path))
    _missing(path, header, fields, optional)
    index = {arg: header.index(column) if column in header else None for arg, column in fields.items()}
    delimiter = "a tab" if path.suffix.lower() == ".tsv" else "a comma"
    for lineno, row in rows:
        if len(row) != len(header):
            raise DataFileError(f"{path} line {lineno} has {len(row)} fields but the header has {len(header)}; "
                                f"quote fields that hold {delimiter}, a quote or a line break")
        yield f"line {lineno}", {arg: None if i is None else row[i] for arg, i in index.items()}


# ----------------------------------------------------------------------------------------------
# Parquet


def _parquet_file(path: Path):
    pq = require_pyarrow(f"reading {path}")
    try:
        return pq.ParquetFile(str(path))
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a damaged file
        raise DataFileError(f"{path} cannot be read as Parquet ({type(exc).__name__}: {exc}); pass a Parquet file "
                            "or give the file the suffix of its format") from None


def _parquet_records(path: Path, fields: Mapping[str, str], optional: set[str]) -> Iterator[tuple[str, dict]]:
    pf = _parquet_file(path)
    header = list(pf.schema_arrow.names)
    _check_header(path, header)
    _missing(path, header, fields, optional)
    present = {arg: column for arg, column in fields.items() if column in header}
    columns = list(dict.fromkeys(present.values()))
    row = 0
    for batch in pf.iter_batches(batch_size=4096, columns=columns):
        values = {arg: batch.column(column).to_pylist() for arg, column in present.items()}
        for i in range(batch.num_rows):
            row += 1
            yield f"row {row}", {arg: values[arg][i] if arg in values else None for arg in fields}
