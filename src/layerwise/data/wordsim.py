"""Word-similarity data sets: pairs of words with a human similarity score (RG-65, WS-353, SimLex-999, ...).

The files here follow the format of Faruqui's eval-word-vectors collection: one pair a line, ``word1 word2 score``,
tab- or space-separated; some have CRLF line ends (WS-353, SimVerb) and comment lines starting with ``#`` (gensim's
copies). Other releases of the same kind (SimVerb-3500: ``word1 word2 POS score relation``) have more columns: the
score is the first number after the two words. Duplicated pairs (WS-353 lists "money cash" twice) are kept as they come.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from layerwise.data.sts import resolve_data_dir

__all__ = ["DEFAULT_WORDSIM", "WORDSIM_FILES", "WordSimData", "available_wordsim", "load_wordsim", "read_wordsim_file"]

_FARUQUI = "wordsim/faruqui_eval-word-vectors"
WORDSIM_FILES = {  # name -> path under the data folder
    "rg65": f"{_FARUQUI}/EN-RG-65.txt",
    "ws353": f"{_FARUQUI}/EN-WS-353-ALL.txt",
    "ws353-sim": f"{_FARUQUI}/EN-WS-353-SIM.txt",
    "ws353-rel": f"{_FARUQUI}/EN-WS-353-REL.txt",
    "simlex999": f"{_FARUQUI}/EN-SIMLEX-999.txt",
    "men": f"{_FARUQUI}/EN-MEN-TR-3k.txt",
    "mc30": f"{_FARUQUI}/EN-MC-30.txt",
    "rw": f"{_FARUQUI}/EN-RW-STANFORD.txt",
    "mturk287": f"{_FARUQUI}/EN-MTurk-287.txt",
    "mturk771": f"{_FARUQUI}/EN-MTurk-771.txt",
    "verb143": f"{_FARUQUI}/EN-VERB-143.txt",
    "yp130": f"{_FARUQUI}/EN-YP-130.txt",
    # the TMFT paper's fourth set; its release file (word1 word2 POS score relation, CRLF). Not in the shared data
    # folder of these machines: put SimVerb-3500.txt there to use it (available_wordsim lists it only then)
    "simverb3500": "wordsim/simverb/SimVerb-3500.txt",
}
DEFAULT_WORDSIM = ("rg65", "ws353", "simlex999")  # the paper's sets that are here (SimVerb-3500 is not)


@dataclass(frozen=True)
class WordSimData:
    """``n`` word pairs with gold similarity scores (the file's own scale)."""

    name: str
    words1: tuple[str, ...]
    words2: tuple[str, ...]
    scores: np.ndarray  # (n,) float64
    source: str  # the file read

    def __len__(self) -> int:
        return len(self.words1)

    def take(self, idx) -> "WordSimData":
        idx = np.asarray(idx, dtype=int)
        return WordSimData(self.name, tuple(self.words1[i] for i in idx), tuple(self.words2[i] for i in idx),
                           self.scores[idx], self.source)


def _score(fields: list[str]) -> float | None:
    for f in fields[2:]:
        try:
            value = float(f)
        except ValueError:
            continue
        return value
    return None


def read_wordsim_file(path: str | os.PathLike, name: str | None = None) -> WordSimData:
    """Read one word-similarity file (see the module docstring for the formats accepted)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"word-similarity file {path} does not exist")
    w1, w2, scores = [], [], []
    text = path.read_bytes().decode("utf-8-sig", errors="strict")
    for lineno, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split("\t") if "\t" in line else line.split()
        fields = [f.strip() for f in fields]
        score = _score(fields) if len(fields) >= 3 else None
        if score is None or not fields[0] or not fields[1]:
            raise ValueError(f"{path}:{lineno}: expected 'word1 word2 score' (tab or space separated), got {line!r}")
        if not np.isfinite(score):
            raise ValueError(f"{path}:{lineno}: score {score} is not a finite number")
        w1.append(fields[0])
        w2.append(fields[1])
        scores.append(score)
    if not w1:
        raise ValueError(f"{path} holds no word pairs")
    return WordSimData(name or path.stem, tuple(w1), tuple(w2), np.asarray(scores, dtype=np.float64), str(path))


def load_wordsim(name_or_path: str | os.PathLike, data_dir: str | os.PathLike | None = None) -> WordSimData:
    """A named set from the data folder (:data:`WORDSIM_FILES`) or any file of that format."""
    key = str(name_or_path).lower()
    if key in WORDSIM_FILES:
        root = resolve_data_dir(data_dir)
        if root is None:
            raise FileNotFoundError(f"word-similarity set {key!r} needs the data folder: pass --data-dir / data_dir= "
                                    "or set LAYERWISE_DATA")
        path = root / WORDSIM_FILES[key]
        if not path.is_file():
            raise FileNotFoundError(f"word-similarity set {key!r} is not in the data folder: {path} does not exist; "
                                    f"add the file there, or pass its path instead of the name")
        return read_wordsim_file(path, name=key)
    path = Path(name_or_path)
    if path.is_file():
        return read_wordsim_file(path)
    raise ValueError(f"unknown word-similarity set {name_or_path!r}: give one of {', '.join(WORDSIM_FILES)} or a "
                     "file path")


def available_wordsim(data_dir: str | os.PathLike | None = None) -> list[str]:
    root = resolve_data_dir(data_dir)
    return [] if root is None else [k for k, rel in WORDSIM_FILES.items() if (root / rel).is_file()]
