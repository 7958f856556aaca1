"""The STS releases' own file formats: STS Benchmark, SemEval STS 2012-2016 and SICK-R (see :mod:`layerwise.data.sts`)."""

from __future__ import annotations

import gzip
import logging
import re
from importlib import resources
from pathlib import Path

import numpy as np

from layerwise.data._files import column_indices, decode, find_dir, parse_score, read_table, read_text, split_lines
from layerwise.data._sts_common import DATA_ENV_VAR, DISPLAY, FOLDERS, STSData, dataset_dir, find_sts_root

logger = logging.getLogger("layerwise.data.sts")

__all__ = ["INPUT_RE", "SICK_FULL_FILE", "SICK_SEMEVAL_FILES", "load_semeval", "load_sickr", "load_stsb",
           "sick_semeval_dir"]

_STSB_PARTS = ("train", "dev", "test")
_STSB_BUILTIN_PACKAGE = "layerwise.data"
_STSB_BUILTIN_DIR = ("_builtin", "stsb")

# STS12-15: STS.gs.<subset>.txt; STS16: STS2016.gs.<subset>.txt.
_GOLD_RE = re.compile(r"^(?P<prefix>STS(?:\d{4})?)\.gs\.(?P<subset>.+)\.txt$")
INPUT_RE = re.compile(r"^(?P<prefix>STS(?:\d{4})?)\.input\.(?P<subset>.+)\.txt$")

# SICK-R, SemEval-2014 files: split -> file name; searched in these folders under sts/SICK.
SICK_SEMEVAL_FILES = {"train": "SICK_train.txt", "trial": "SICK_trial.txt", "test": "SICK_test_annotated.txt"}
_SICK_SEMEVAL_DIRS = ("senteval_tokenized", ".")
SICK_FULL_FILE = "SICK.txt"



# ----------------------------------------------------------------------------------------------
# STS Benchmark


def _read_builtin_stsb(part: str) -> tuple[str, str]:
    where = f"builtin:stsb/sts-{part}.csv.gz"
    resource = resources.files(_STSB_BUILTIN_PACKAGE)
    for piece in (*_STSB_BUILTIN_DIR, f"sts-{part}.csv.gz"):
        resource = resource / piece
    try:
        raw = resource.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(
            f"The built-in STS-B file {where} is missing from the installed package. Reinstall layerwise, "
            "or in a source checkout run `python scripts/build_builtin_stsb.py`; or pass data_dir=... "
            f"(--data-dir) / set {DATA_ENV_VAR} to a folder that contains sts/STSB/."
        ) from None
    return decode(gzip.decompress(raw), where), where


def _parse_stsb(text: str, where: str) -> tuple[list[str], list[str], list[float]]:
    """Rows of 7 or 9 tab-separated fields, no quoting: genre, file, year, id, score, s1, s2[, src1, src2]."""
    sentences1: list[str] = []
    sentences2: list[str] = []
    scores: list[float] = []
    for lineno, line in enumerate(split_lines(text), 1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) not in (7, 9):
            raise ValueError(
                f"{where}:{lineno}: expected 7 or 9 tab-separated fields "
                f"(genre, file, year, id, score, sentence1, sentence2[, source1, source2]), got {len(fields)}"
            )
        scores.append(parse_score(fields[4], where, lineno))
        sentences1.append(fields[5])
        sentences2.append(fields[6])
    return sentences1, sentences2, scores


def load_stsb(root: Path | None, split: str) -> STSData:
    folder = None if root is None else find_dir(find_sts_root(root), FOLDERS["stsb"])
    if root is not None and folder is None:
        logger.info("No sts/STSB folder under %s; using the built-in STS-B copy", root)
    parts = _STSB_PARTS if split == "all" else (split,)
    sentences1: list[str] = []
    sentences2: list[str] = []
    scores: list[float] = []
    subsets: list[str] = []
    for part in parts:
        if folder is None:
            text, where = _read_builtin_stsb(part)
        else:
            path = folder / f"sts-{part}.csv"
            if not path.is_file():
                raise FileNotFoundError(
                    f"STS-B {part} split not found: {path} does not exist. Put sts-{part}.csv there, or "
                    "remove the STSB folder from the data directory to use the built-in copy."
                )
            text, where = read_text(path), str(path)
        part_s1, part_s2, part_scores = _parse_stsb(text, where)
        if not part_s1:
            raise ValueError(f"{where} has no STS-B pairs")
        sentences1 += part_s1
        sentences2 += part_s2
        scores += part_scores
        subsets += [part] * len(part_s1)
    return STSData(
        name="stsb",
        sentences1=sentences1,
        sentences2=sentences2,
        scores=np.asarray(scores, dtype=np.float64),
        subsets=np.asarray(subsets, dtype=str),
        split=split,
        source="builtin:stsb" if folder is None else str(folder),
    )


# ----------------------------------------------------------------------------------------------
# SemEval STS 2012-2016


def _semeval_subsets(folder: Path) -> list[tuple[str, Path, Path]]:
    """(subset, input file, gold file) for every subset that has both files, sorted by file name."""
    found = []
    paths = sorted(path for path in folder.iterdir() if path.is_file())
    names = {path.name for path in paths}
    for path in paths:
        match = _GOLD_RE.match(path.name)
        if match is None:
            continue
        prefix, subset = match["prefix"], match["subset"]
        if subset.upper() == "ALL":
            logger.debug("Ignoring %s: the concatenation of all subsets, not a subset", path)
            continue
        input_name = f"{prefix}.input.{subset}.txt"
        if input_name not in names:
            logger.info("Skipping subset %r: gold file %s has no input file %s", subset, path, input_name)
            continue
        found.append((subset, folder / input_name, path))
    for path in paths:
        match = INPUT_RE.match(path.name)
        if match is not None and f"{match['prefix']}.gs.{match['subset']}.txt" not in names:
            logger.info("Skipping subset %r: input file %s has no gold file", match["subset"], path)
    return found


def _parse_semeval(input_path: Path, gold_path: Path) -> tuple[list[str], list[str], list[float]]:
    """Pairs whose gold line is non-empty; inputs have 2 fields (STS16: 4, the last two are sources)."""
    inputs = split_lines(read_text(input_path))
    golds = split_lines(read_text(gold_path))
    extra = [i for i, gold in enumerate(golds[len(inputs):], len(inputs) + 1) if gold.strip()]
    if extra:
        raise ValueError(
            f"{gold_path} has scores on lines {extra[:5]} but {input_path} has only {len(inputs)} lines; "
            "the two files must align line by line"
        )
    if len(golds) < len(inputs):
        logger.warning(
            "%s has %d lines but %s has %d; pairs without a gold line are not counted",
            gold_path, len(golds), input_path, len(inputs),
        )
    sentences1: list[str] = []
    sentences2: list[str] = []
    scores: list[float] = []
    for lineno, (gold, line) in enumerate(zip(golds, inputs), 1):
        if not gold.strip():
            continue
        fields = line.split("\t")
        if len(fields) not in (2, 4):
            raise ValueError(
                f"{input_path}:{lineno}: expected 2 tab-separated fields (sentence1, sentence2; STS16 adds "
                f"two source fields), got {len(fields)}"
            )
        scores.append(parse_score(gold, str(gold_path), lineno))
        sentences1.append(fields[0])
        sentences2.append(fields[1])
    return sentences1, sentences2, scores


def load_semeval(key: str, root: Path | None) -> STSData:
    folder = dataset_dir(key, root)
    sentences1: list[str] = []
    sentences2: list[str] = []
    scores: list[float] = []
    subsets: list[str] = []
    for subset, input_path, gold_path in _semeval_subsets(folder):
        part_s1, part_s2, part_scores = _parse_semeval(input_path, gold_path)
        logger.debug("%s %s: %d pairs with a gold score", DISPLAY[key], subset, len(part_s1))
        sentences1 += part_s1
        sentences2 += part_s2
        scores += part_scores
        subsets += [subset] * len(part_s1)
    if not sentences1:
        raise ValueError(
            f"{folder} holds no {DISPLAY[key]} pairs: expected STS.input.<subset>.txt with "
            "STS.gs.<subset>.txt (STS16: STS2016.input/gs.<subset>.txt) whose gold lines are not all empty"
        )
    return STSData(
        name=key,
        sentences1=sentences1,
        sentences2=sentences2,
        scores=np.asarray(scores, dtype=np.float64),
        subsets=np.asarray(subsets, dtype=str),
        split="test",
        source=str(folder),
    )


# ----------------------------------------------------------------------------------------------
# SICK-R


def sick_semeval_dir(folder: Path, files: dict[str, str]) -> Path | None:
    """The first folder of :data:`_SICK_SEMEVAL_DIRS` under ``folder`` holding all of ``files``."""
    for sub in _SICK_SEMEVAL_DIRS:
        candidate = folder if sub == "." else folder / sub
        if all((candidate / name).is_file() for name in files.values()):
            return candidate
    return None


def load_sickr(root: Path | None, split: str) -> STSData:
    folder = dataset_dir("sickr", root)
    parts = tuple(SICK_SEMEVAL_FILES) if split == "all" else (split,)
    files = {part: SICK_SEMEVAL_FILES[part] for part in parts}
    semeval_dir = sick_semeval_dir(folder, files)
    columns = ("sentence_A", "sentence_B", "relatedness_score")
    sentences1: list[str] = []
    sentences2: list[str] = []
    scores: list[float] = []
    subsets: list[str] = []

    def add(fields: list[str], indices: list[int], where: str, lineno: int, subset: str) -> None:
        sentences1.append(fields[indices[0]])
        sentences2.append(fields[indices[1]])
        scores.append(parse_score(fields[indices[2]], where, lineno))
        subsets.append(subset)

    if semeval_dir is not None:
        for part, file_name in files.items():
            path = semeval_dir / file_name
            header, rows = read_table(read_text(path), str(path))
            indices = column_indices(header, columns, str(path))
            for lineno, fields in rows:
                add(fields, indices, str(path), lineno, part.upper())
        source = str(semeval_dir)
        what = "train+trial+test" if split == "all" else split
        split_text = f"SemEval-2014 {what} ({len(sentences1)} pairs)"
    else:
        path = folder / SICK_FULL_FILE
        if not path.is_file():
            raise FileNotFoundError(
                f"SICK-R not found in {folder}: expected the SemEval-2014 files "
                f"{', '.join(files.values())} in {folder / _SICK_SEMEVAL_DIRS[0]} (or {folder}), "
                f"or the full release {path}."
            )
        header, rows = read_table(read_text(path), str(path))
        indices = column_indices(header, (*columns, "SemEval_set"), str(path))
        for lineno, fields in rows:
            subset = fields[indices[3]].strip()
            if split == "all" or subset.lower() == split:
                add(fields, indices, str(path), lineno, subset)
        source = str(path)
        what = "all" if split == "all" else f"SemEval_set {split.upper()}"
        split_text = f"SICK full release, {what} ({len(sentences1)} pairs)"
        logger.warning(
            "Read SICK-R from the full release %s (%s). That release lacks some SemEval-2014 pairs (9840 "
            "pairs, 4906 in TEST), so results are not comparable with SentEval/SimCSE (4927 test pairs) or "
            "MTEB (all 9927 pairs); put %s in %s for comparable numbers.",
            path, split_text, ", ".join(SICK_SEMEVAL_FILES.values()), folder / _SICK_SEMEVAL_DIRS[0],
        )
    if not sentences1:
        raise ValueError(f"{source} holds no SICK-R pairs for split {split!r}")
    return STSData(name="sickr", sentences1=sentences1, sentences2=sentences2, scores=np.asarray(scores, dtype=np.float64),
                   subsets=np.asarray(subsets, dtype=str), split=split_text, source=source)
