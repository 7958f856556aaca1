"""SentEval's file formats, one parser each: rows of (line number, sentence, second sentence, label)."""

from __future__ import annotations

import logging
from pathlib import Path

from layerwise.data._files import read_text, split_lines

logger = logging.getLogger("layerwise.data.senteval")  # messages keep the loader's logger name

__all__ = ["PARSERS", "numbered_lines"]

_MRPC_HEADER = ("Quality", "#1 ID", "#2 ID", "#1 String", "#2 String")

# (line number, sentence, second sentence or None, label or None when the file gives it)
_Row = tuple[int, str, "str | None", "str | None"]


def numbered_lines(path: Path, encoding: str) -> list[tuple[int, str]]:
    """(1-based line number, line without trailing whitespace) of the non-empty lines of ``path``."""
    text = path.read_bytes().decode("latin-1") if encoding == "latin-1" else read_text(path)
    numbered = [(lineno, line.rstrip()) for lineno, line in enumerate(split_lines(text), 1)]
    kept = [(lineno, line) for lineno, line in numbered if line]
    if len(kept) < len(numbered):
        logger.info("%s: skipped %d empty line(s)", path, len(numbered) - len(kept))
    return kept


def _parse_lines(lines: list[tuple[int, str]], where: str) -> list[_Row]:
    """One sentence per line; the label comes from the file."""
    return [(lineno, line.strip(), None, None) for lineno, line in lines]


def _parse_sst2(lines: list[tuple[int, str]], where: str) -> list[_Row]:
    """``sentence<TAB>label``."""
    rows = []
    for lineno, line in lines:
        sentence, tab, label = line.rpartition("\t")
        if not tab or not sentence.strip():
            raise ValueError(f"{where}:{lineno}: expected 'sentence<TAB>label' (SST-2 format), got {line!r}")
        rows.append((lineno, sentence.strip(), None, label.strip()))
    return rows


def _parse_sst5(lines: list[tuple[int, str]], where: str) -> list[_Row]:
    """``label sentence``: the label is the text before the first space."""
    rows = []
    for lineno, line in lines:
        label, _, sentence = line.strip().partition(" ")
        if not sentence.strip():
            raise ValueError(f"{where}:{lineno}: expected 'label sentence' (SST-5 format), got {line!r}")
        rows.append((lineno, sentence.strip(), None, label))
    return rows


def _parse_trec(lines: list[tuple[int, str]], where: str) -> list[_Row]:
    """``COARSE:fine question``: the coarse class is the label, the question follows the first space."""
    rows = []
    for lineno, line in lines:
        head, _, question = line.strip().partition(" ")
        coarse, colon, fine = head.partition(":")
        if not colon or not coarse or not fine or not question.strip():
            raise ValueError(f"{where}:{lineno}: expected 'COARSE:fine question' (TREC format), got {line!r}")
        rows.append((lineno, question.strip(), None, coarse))
    return rows


def _parse_mrpc(lines: list[tuple[int, str]], where: str) -> list[_Row]:
    """A header line, then ``Quality<TAB>#1 ID<TAB>#2 ID<TAB>#1 String<TAB>#2 String`` with no quoting."""
    if not lines:
        return []
    header_lineno, header_line = lines[0]
    header = tuple(column.strip() for column in header_line.split("\t"))
    if header != _MRPC_HEADER:
        raise ValueError(
            f"{where}:{header_lineno}: expected the MRPC header {chr(9).join(_MRPC_HEADER)!r}, got {header_line!r}"
        )
    rows = []
    for lineno, line in lines[1:]:
        fields = line.split("\t")
        if len(fields) != len(_MRPC_HEADER) or not fields[3].strip() or not fields[4].strip():
            raise ValueError(
                f"{where}:{lineno}: expected {len(_MRPC_HEADER)} tab-separated fields "
                f"({', '.join(_MRPC_HEADER)}) with both strings non-empty, got {len(fields)} field(s)"
            )
        rows.append((lineno, fields[3].strip(), fields[4].strip(), fields[0].strip()))
    return rows


PARSERS = {
    "lines": _parse_lines,
    "sst2": _parse_sst2,
    "sst5": _parse_sst5,
    "trec": _parse_trec,
    "mrpc": _parse_mrpc,
}
