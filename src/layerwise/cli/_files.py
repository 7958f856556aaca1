"""Column options for the commands that read the user's own files, and the readers behind them.

Each ``add_*_columns(parser)`` adds the options naming a file's columns (defaults: the common names); each
``*_from_args(args, path)`` reads the file with :mod:`layerwise.data.readers`. The helpers combine on one parser:
an option already there (``--text-column``, ``--score-column``) is not added twice, and both readers use it.
A bad file raises :class:`~layerwise.errors.DataFileError` whose fix names the flag (``--score-column COLUMN``)
rather than the Python argument; the command line prints it as one line and exits 2.
"""

from __future__ import annotations

import argparse
import os

from layerwise.data import (
    STSData,
    TransferData,
    TripletData,
    WordSimData,
    read_corpus,
    read_labeled,
    read_pairs,
    read_triplets,
    read_word_pairs,
)
from layerwise.errors import DataFileError

__all__ = ["add_corpus_columns", "add_label_columns", "add_pair_columns", "add_triplet_columns", "add_word_columns",
           "corpus_from_args", "labeled_from_args", "pairs_from_args", "triplets_from_args", "word_pairs_from_args"]


def _add(parser: argparse.ArgumentParser, flag: str, default: str | None, help: str) -> None:
    if flag not in parser._option_string_actions:  # added already by another helper: one option serves both
        parser.add_argument(flag, default=default, metavar="COLUMN", help=help)


def _read(reader, flags: dict[str, str], path, **columns):
    try:
        return reader(path, **columns)
    except DataFileError as err:
        raise err.naming_flags(flags) from None


def add_pair_columns(parser: argparse.ArgumentParser) -> None:
    """``--sentence1-column``, ``--sentence2-column``, ``--score-column`` (sentence pairs with a graded score)."""
    _add(parser, "--sentence1-column", "sentence1", "the first sentence's column of a pairs file (default: sentence1)")
    _add(parser, "--sentence2-column", "sentence2", "the second sentence's column of a pairs file (default: sentence2)")
    _add(parser, "--score-column", "score", "the score's column (default: score; any numeric scale)")


def pairs_from_args(args: argparse.Namespace, path: str | os.PathLike, *, min_rows: int = 1) -> STSData:
    """:func:`~layerwise.data.read_pairs` with the columns of :func:`add_pair_columns`."""
    return _read(read_pairs, {"sentence1": "--sentence1-column", "sentence2": "--sentence2-column",
                              "score": "--score-column"}, path, sentence1=args.sentence1_column,
                 sentence2=args.sentence2_column, score=args.score_column, min_rows=min_rows)


def add_label_columns(parser: argparse.ArgumentParser) -> None:
    """``--text-column``, ``--label-column``, ``--text2-column`` (labelled texts or text pairs)."""
    _add(parser, "--text-column", "text", "the text's column (default: text)")
    _add(parser, "--label-column", "label", "the label's column, strings or integers (default: label)")
    _add(parser, "--text2-column", None, "the second text's column, for pair classification (default: none)")


def labeled_from_args(args: argparse.Namespace, path: str | os.PathLike, *, min_rows: int = 1) -> TransferData:
    """:func:`~layerwise.data.read_labeled` with the columns of :func:`add_label_columns`."""
    return _read(read_labeled, {"text": "--text-column", "label": "--label-column", "text2": "--text2-column"},
                 path, text=args.text_column, label=args.label_column, text2=args.text2_column, min_rows=min_rows)


def add_triplet_columns(parser: argparse.ArgumentParser) -> None:
    """``--anchor-column``, ``--positive-column``, ``--negative-column`` (triplets, or pairs without negatives)."""
    _add(parser, "--anchor-column", "anchor", "the anchor's column (default: anchor)")
    _add(parser, "--positive-column", "positive", "the positive's column (default: positive)")
    _add(parser, "--negative-column", None, "the hard negative's column (default: negative if the file has one, "
                                            "else pairs); '' reads pairs only")


def triplets_from_args(args: argparse.Namespace, path: str | os.PathLike) -> TripletData:
    """:func:`~layerwise.data.read_triplets` with the columns of :func:`add_triplet_columns`."""
    negative = args.negative_column
    flags = {"anchor": "--anchor-column", "positive": "--positive-column", "negative": "--negative-column"}
    return _read(read_triplets, flags, path, anchor=args.anchor_column, positive=args.positive_column,
                 negative="negative" if negative is None else (negative or None))


def add_corpus_columns(parser: argparse.ArgumentParser) -> None:
    """``--text-column`` (the texts of a .jsonl/.csv/.tsv/.parquet corpus; a .txt corpus is one text a line)."""
    _add(parser, "--text-column", "text", "the text's column (default: text)")


def corpus_from_args(args: argparse.Namespace, path: str | os.PathLike) -> list[str]:
    """:func:`~layerwise.data.read_corpus` with the column of :func:`add_corpus_columns`.

    For a ``.txt`` corpus the column must be left at its default: a ``--text-column`` given for one is refused.
    """
    return _read(read_corpus, {"column": "--text-column"}, path, column=args.text_column)


def add_word_columns(parser: argparse.ArgumentParser) -> None:
    """``--word1-column``, ``--word2-column``, ``--score-column`` (word pairs with a similarity score)."""
    _add(parser, "--word1-column", "word1", "the first word's column (default: word1)")
    _add(parser, "--word2-column", "word2", "the second word's column (default: word2)")
    _add(parser, "--score-column", "score", "the score's column (default: score; any numeric scale)")


def word_pairs_from_args(args: argparse.Namespace, path: str | os.PathLike) -> WordSimData:
    """:func:`~layerwise.data.read_word_pairs` with the columns of :func:`add_word_columns`."""
    return _read(read_word_pairs, {"word1": "--word1-column", "word2": "--word2-column", "score": "--score-column"},
                 path, word1=args.word1_column, word2=args.word2_column, score=args.score_column)
