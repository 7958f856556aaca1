"""The user's own data files: STS pairs, labelled texts, triplets, corpora, word pairs and BEIR folders.

Formats (the suffix decides): ``.csv`` (comma), ``.tsv`` (tab), ``.jsonl`` (one JSON object a line) and ``.parquet``
(needs pyarrow: ``pip install 'layerwise[parquet]'``); a corpus may also be ``.txt``, one text a line. Text files
are UTF-8 (with or without a byte-order mark); CSV/TSV quoting is the :mod:`csv` module's; CRLF is fine (details in
:mod:`layerwise.data._tables`). Columns are named by keyword arguments whose defaults are the common names:
``sentence1, sentence2, score``; ``text, label`` (``text2`` for pairs); ``anchor, positive, negative``; ``text``;
``word1, word2, score``; BEIR's ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv``.

Everything is checked as it is read, before any model runs: a bad file raises :class:`DataFileError` (a
:class:`~layerwise.errors.UsageError`), one line naming the file, the line (text files, from 1, the header being
line 1) or row (Parquet, from 1), what is wrong and the argument to pass. Texts are kept as they are in the file
(not stripped); a text that is empty or only spaces is an error. Scores are read in the file's own scale
(:func:`normalize_scores` maps them to [0, 1] from the observed or a given range); scores that are all equal are
an error, since a rank correlation with them is undefined.

The results of a run on a file are named after it: :func:`data_label` turns the path into a plain name.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from layerwise.data._tables import (
    CORPUS_SUFFIXES,
    TABLE_SUFFIXES,
    check_file,
    columns_of,
    iter_lines,
    iter_records,
    require_pyarrow,
)
from layerwise.data._values import check_label, check_rows, check_score, check_text, check_varied, label_order
from layerwise.data.senteval import TransferData
from layerwise.data.sts import STSData
from layerwise.data.wordsim import WordSimData
from layerwise.errors import DataFileError, UsageError

__all__ = ["CORPUS_SUFFIXES", "TABLE_SUFFIXES", "BeirData", "DataFileError", "TripletData", "data_label",
           "iter_texts", "normalize_scores", "read_beir", "read_corpus", "read_labeled", "read_pairs",
           "read_triplets", "read_word_pairs", "require_pyarrow"]

ARG = DataFileError.ARGUMENT


def data_label(path: str | os.PathLike) -> str:
    """A plain name for outputs and pages: the file's stem (a folder's name) in ``[A-Za-z0-9._-]``, never empty.

    Other characters become ``_`` (runs of them one ``_``): ``"my pairs (v2).tsv"`` -> ``"my_pairs_v2"``.
    """
    p = Path(path)
    stem = p.name if p.is_dir() or not p.suffix else p.stem
    label = re.sub(r"[^A-Za-z0-9._-]+", "_", stem).strip("._-")
    return label or "data"


def normalize_scores(scores, scale: tuple[float, float] | None = None) -> np.ndarray:
    """Scores mapped linearly to [0, 1]: from ``scale=(lo, hi)`` if given, else from their observed min and max.

    Returns an ndarray of shape (n,), float64. Raises UsageError for non-finite scores, a ``scale`` with lo >= hi
    or that does not hold every score, and (without ``scale``) scores that are all equal.
    """
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    if s.size == 0:
        raise UsageError("normalize_scores got no scores; pass at least two")
    if not np.isfinite(s).all():
        raise UsageError(f"scores must be finite, got {s[~np.isfinite(s)][0]} at index "
                         f"{int(np.flatnonzero(~np.isfinite(s))[0])}; drop or fix that score")
    if scale is None:
        lo, hi = float(s.min()), float(s.max())
        if lo == hi:
            raise UsageError(f"every score is {lo}, so they have no scale to normalize by; pass scale=(lo, hi) or "
                             "scores that differ")
    else:
        try:
            lo, hi = (float(v) for v in scale)
        except (TypeError, ValueError):
            raise UsageError(f"scale must be a pair (lo, hi) of numbers, got {scale!r}") from None
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise UsageError(f"scale must be (lo, hi) with finite lo < hi, got {scale!r}")
        outside = np.flatnonzero((s < lo) | (s > hi))
        if outside.size:
            i = int(outside[0])
            raise UsageError(f"score {s[i]} at index {i} lies outside scale=({lo:g}, {hi:g}) ({outside.size} scores "
                             f"do, observed range {s.min():g} to {s.max():g}); pass the scale the scores use")
    return (s - lo) / (hi - lo)


# ----------------------------------------------------------------------------------------------
# Readers


def read_pairs(path: str | os.PathLike, *, sentence1: str = "sentence1", sentence2: str = "sentence2",
               score: str = "score", min_rows: int = 1) -> STSData:
    """Sentence pairs with a graded similarity score (STS style) from a CSV/TSV/JSONL/Parquet file.

    Returns :class:`~layerwise.data.STSData` with ``name = data_label(path)``, the sentences as in the file,
    ``scores`` float64 in the file's own scale, ``subsets`` the label on every row, ``split = "file"`` and
    ``source = str(path)``. ``min_rows``: the fewest pairs the caller's protocol needs.
    """
    p = check_file(path, TABLE_SUFFIXES, "pairs file")
    s1, s2, scores = [], [], []
    for where, row in iter_records(p, {"sentence1": sentence1, "sentence2": sentence2, "score": score}):
        s1.append(check_text(p, where, "sentence1 text", row["sentence1"]))
        s2.append(check_text(p, where, "sentence2 text", row["sentence2"]))
        scores.append(check_score(p, where, "score", row["score"]))
    check_rows(p, len(s1), min_rows, "sentence pairs")
    arr = np.asarray(scores, dtype=np.float64)
    check_varied(p, arr, "score")
    label = data_label(p)
    return STSData(name=label, sentences1=s1, sentences2=s2, scores=arr, subsets=np.full(len(s1), label),
                   split="file", source=str(path))


def read_labeled(path: str | os.PathLike, *, text: str = "text", label: str = "label", text2: str | None = None,
                 min_rows: int = 1) -> TransferData:
    """Labelled texts (classification), or labelled text pairs when ``text2`` names the second text's column.

    Labels may be strings or integers. Class indices follow :attr:`TransferData.label_names`, sorted so the order
    does not depend on the rows: numerically when every label is an integer (``"2" < "10"``), else as strings.
    Returns :class:`~layerwise.data.TransferData` with ``name = data_label(path)``, ``splits`` ``"file"`` on every
    row and ``source = str(path)``.
    """
    p = check_file(path, TABLE_SUFFIXES, "labelled file")
    fields = {"text": text, "label": label} | ({"text2": text2} if text2 is not None else {})
    texts, texts2, labels = [], [], []
    for where, row in iter_records(p, fields):
        texts.append(check_text(p, where, "text", row["text"]))
        if text2 is not None:
            texts2.append(check_text(p, where, "second text", row["text2"]))
        labels.append(check_label(p, where, "label", row["label"]))
    check_rows(p, len(texts), min_rows, "labelled texts")
    names = label_order(labels)
    index = {name: i for i, name in enumerate(names)}
    return TransferData(name=data_label(p), sentences=texts, sentences2=texts2 if text2 is not None else None,
                        labels=np.array([index[str(v)] for v in labels], dtype=np.int64), label_names=names,
                        splits=np.full(len(texts), "file"), source=str(path))


@dataclass(frozen=True, eq=False)
class TripletData:
    """Training triplets (anchor, positive, negative), or pairs (anchor, positive) when ``negatives`` is None.

    ``anchors``, ``positives`` (and ``negatives``): lists of n texts; ``name``: :func:`data_label` of the file;
    ``source``: the file read.
    """

    anchors: list[str]
    positives: list[str]
    negatives: list[str] | None = None
    name: str = "triplets"
    source: str = ""

    def __post_init__(self) -> None:
        n = len(self.anchors)
        if len(self.positives) != n or (self.negatives is not None and len(self.negatives) != n):
            raise ValueError(f"TripletData fields differ in length: anchors {n}, positives {len(self.positives)}, "
                             f"negatives {None if self.negatives is None else len(self.negatives)}")
        object.__setattr__(self, "anchors", list(self.anchors))
        object.__setattr__(self, "positives", list(self.positives))
        object.__setattr__(self, "negatives", None if self.negatives is None else list(self.negatives))

    def __len__(self) -> int:
        return len(self.anchors)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TripletData):
            return NotImplemented
        return (self.anchors, self.positives, self.negatives, self.name, self.source) == \
            (other.anchors, other.positives, other.negatives, other.name, other.source)

    __hash__ = None  # type: ignore[assignment]  # holds lists

    @property
    def has_negatives(self) -> bool:
        return self.negatives is not None


def read_triplets(path: str | os.PathLike, *, anchor: str = "anchor", positive: str = "positive",
                  negative: str | None = "negative") -> TripletData:
    """(anchor, positive, negative) texts for contrastive training, or (anchor, positive) pairs.

    ``negative``: the hard negatives' column. With the default, a file without that column gives pairs
    (``negatives`` None); a column named explicitly must be there; ``negative=None`` reads pairs only.
    """
    p = check_file(path, TABLE_SUFFIXES, "triplets file")
    fields = {"anchor": anchor, "positive": positive}
    if negative is not None:
        if negative == "negative" and negative not in columns_of(p):
            negative = None  # the default name and no such column: pairs
        else:
            fields["negative"] = negative
    anchors, positives, negatives = [], [], []
    for where, row in iter_records(p, fields):
        anchors.append(check_text(p, where, "anchor text", row["anchor"]))
        positives.append(check_text(p, where, "positive text", row["positive"]))
        if negative is not None:
            negatives.append(check_text(p, where, "negative text", row["negative"]))
    check_rows(p, len(anchors), 1, "triplets" if negative is not None else "pairs")
    return TripletData(anchors, positives, negatives if negative is not None else None, name=data_label(p),
                       source=str(path))


def iter_texts(path: str | os.PathLike, *, column: str = "text", id_column: str | None = None
               ) -> Iterator[tuple[str, str]]:
    """(id, text) of every row of a corpus file, streaming (one row or Parquet batch held at a time).

    ``.txt``: one text a line (no columns: ``column`` must stay ``"text"`` and ``id_column`` None); the id is the
    row number from 0. Other formats: the ``column`` text and the ``id_column`` value as a string (the row number
    from 0 without ``id_column``). A missing (null) id or one holding a line break raises DataFileError; ids are not
    checked for duplicates here (that would hold them all; :func:`read_corpus` does).
    """
    p = check_file(path, CORPUS_SUFFIXES, "corpus")
    if p.suffix.lower() == ".txt":
        if column != "text" or id_column is not None:
            arg = "column" if column != "text" else "id_column"
            raise DataFileError(f"{p} is a .txt corpus, one text a line with no columns, so {DataFileError.NAME} "
                                "cannot apply to it; leave it out, or write the corpus as .jsonl/.csv/.tsv/.parquet",
                                argument=arg)
        for i, (lineno, line) in enumerate(iter_lines(p)):
            yield str(i), check_text(p, f"line {lineno}", "text", line.rstrip("\n").rstrip("\r"))
        return
    fields = {"column": column} | ({"id_column": id_column} if id_column is not None else {})
    for i, (where, row) in enumerate(iter_records(p, fields)):
        text = check_text(p, where, "text", row["column"])
        if id_column is None:
            yield str(i), text
            continue
        ident = row["id_column"]
        if ident is None or (isinstance(ident, str) and not ident.strip()):
            raise DataFileError(f"{p} {where}: the id is missing; give every row an id (a row number in its place "
                                f"could equal another row's id), or pass {ARG} naming a complete id column",
                                argument="id_column")
        if isinstance(ident, bool) or not isinstance(ident, (str, int, float)):
            raise DataFileError(f"{p} {where}: the id {ident!r} is a {type(ident).__name__}; ids must be strings or "
                                "numbers")
        ident = str(ident)
        if "\n" in ident or "\r" in ident:
            raise DataFileError(f"{p} {where}: the id {ident!r} holds a line break; ids are written one per line")
        yield ident, text


def read_corpus(path: str | os.PathLike, *, column: str = "text", id_column: str | None = None) -> list[str]:
    """The texts of a corpus file in file order (see :func:`iter_texts` for formats and checks).

    ``id_column``, when given, is read and checked (present on every row, unique) though only the texts return.
    """
    texts, seen = [], {}
    for ident, text in iter_texts(path, column=column, id_column=id_column):
        if id_column is not None and ident in seen:
            raise DataFileError(f"{path}: the id {ident!r} appears on row {seen[ident] + 1} and row {len(texts) + 1} "
                                f"(counting from 1); give every row its own id or pass {ARG} naming a unique column",
                                argument="id_column")
        seen[ident] = len(texts)
        texts.append(text)
    if not texts:
        raise DataFileError(f"{path} holds a header but no texts; pass a file with rows")
    return texts


def read_word_pairs(path: str | os.PathLike, *, word1: str = "word1", word2: str = "word2",
                    score: str = "score") -> WordSimData:
    """Word pairs with a similarity score (word-similarity style) from a CSV/TSV/JSONL/Parquet file.

    Returns :class:`~layerwise.data.WordSimData` (scores float64 in the file's own scale, ``name`` the
    :func:`data_label`). For the whitespace-separated files of the word-similarity collections use
    :func:`~layerwise.data.load_wordsim`.
    """
    p = check_file(path, TABLE_SUFFIXES, "word-pairs file")
    w1, w2, scores = [], [], []
    for where, row in iter_records(p, {"word1": word1, "word2": word2, "score": score}):
        w1.append(check_text(p, where, "word1", row["word1"]))
        w2.append(check_text(p, where, "word2", row["word2"]))
        scores.append(check_score(p, where, "score", row["score"]))
    check_rows(p, len(w1), 1, "word pairs")
    arr = np.asarray(scores, dtype=np.float64)
    check_varied(p, arr, "score")
    return WordSimData(data_label(p), tuple(w1), tuple(w2), arr, str(path))


# ----------------------------------------------------------------------------------------------
# BEIR


@dataclass(frozen=True)
class BeirData:
    """A retrieval data set in the BEIR layout.

    ``corpus``: doc id -> text (``title + " " + text``, stripped, as BEIR's models encode a document);
    ``queries``: query id -> text, only the queries that have judgements (as BEIR's loader keeps them);
    ``qrels``: query id -> {doc id: relevance (int)}; ``name``: :func:`data_label` of the folder; ``split``;
    ``source``: the folder read.
    """

    corpus: dict[str, str]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    name: str = "beir"
    split: str = "test"
    source: str = ""

    def __repr__(self) -> str:
        return (f"BeirData(name={self.name!r}, split={self.split!r}, corpus={len(self.corpus)}, "
                f"queries={len(self.queries)}, source={self.source!r})")


def _beir_texts(path: Path, *, title: bool) -> dict[str, str]:
    fields = {"_id": "_id", "text": "text"} | ({"title": "title"} if title else {})
    out: dict[str, str] = {}
    for where, row in iter_records(path, fields, optional={"title"}):
        ident = row["_id"]
        if ident is None or isinstance(ident, bool) or not isinstance(ident, (str, int)) or not str(ident).strip():
            raise DataFileError(f"{path} {where}: the _id {ident!r} is not an id; give every line an \"_id\" string")
        ident = str(ident)
        if ident in out:
            raise DataFileError(f"{path} {where}: the _id {ident!r} appears twice; give every line its own _id")
        head, body = (row.get("title") or ""), row["text"]
        if not isinstance(head, str) or not isinstance(body, str):
            raise DataFileError(f"{path} {where}: title and text must be strings")
        joined = f"{head} {body}".strip()
        if not joined:
            raise DataFileError(f"{path} {where}: the text is empty; fill it in or drop that line")
        out[ident] = joined
    if not out:
        raise DataFileError(f"{path} holds no lines; BEIR's {path.name} has one JSON object per line")
    return out


def read_beir(folder: str | os.PathLike, *, split: str = "test") -> BeirData:
    """A BEIR-style folder: ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl`` (``_id``, ``text``)
    and ``qrels/<split>.tsv`` (header ``query-id corpus-id score``, integer scores).

    Judgements must name queries and documents that exist (DataFileError with the line otherwise).
    """
    root = Path(folder)
    if not root.is_dir():
        raise DataFileError(f"BEIR folder {root} {'is not a folder' if root.exists() else 'does not exist'}; pass "
                            "a folder holding corpus.jsonl, queries.jsonl and qrels/<split>.tsv")
    qrels_path = root / "qrels" / f"{split}.tsv"
    if not qrels_path.is_file():
        found = sorted(p.stem for p in (root / "qrels").glob("*.tsv")) if (root / "qrels").is_dir() else []
        hint = f"pass split= one of {', '.join(found)}" if found else "add qrels/<split>.tsv"
        raise DataFileError(f"BEIR folder {root} has no {qrels_path.relative_to(root)}; {hint}")
    corpus = _beir_texts(check_file(root / "corpus.jsonl", (".jsonl",), "BEIR corpus"), title=True)
    queries = _beir_texts(check_file(root / "queries.jsonl", (".jsonl",), "BEIR queries"), title=False)
    qrels: dict[str, dict[str, int]] = {}
    q = check_file(qrels_path, (".tsv",), "BEIR qrels")
    for where, row in iter_records(q, {"query": "query-id", "doc": "corpus-id", "score": "score"}):
        qid, did = row["query"].strip(), row["doc"].strip()
        try:
            score = int(row["score"].strip())
        except ValueError:
            raise DataFileError(f"{q} {where}: the score {row['score']!r} is not an integer; BEIR qrels hold "
                                "integer relevance") from None
        if qid not in queries:
            raise DataFileError(f"{q} {where}: query-id {qid!r} is not in queries.jsonl; fix the id or add the query")
        if did not in corpus:
            raise DataFileError(f"{q} {where}: corpus-id {did!r} is not in corpus.jsonl; fix the id or add the "
                                "document")
        qrels.setdefault(qid, {})[did] = score
    if not qrels:
        raise DataFileError(f"{q} holds a header but no judgements; pass a split with qrels")
    return BeirData(corpus=corpus, queries={qid: queries[qid] for qid in qrels}, qrels=qrels, name=data_label(root),
                    split=split, source=str(folder))
