"""What every STS loader shares: the data set names, the :class:`STSData` container and where each set's folder is."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from layerwise.data._files import find_dir, index_array

__all__ = ["DATA_ENV_VAR", "DISPLAY", "FOLDERS", "STSData", "STS_DATASETS", "dataset_dir", "find_sts_root"]

#: Environment variable naming the data directory when no ``data_dir`` is passed.
DATA_ENV_VAR = "LAYERWISE_DATA"

#: Canonical data set names, in reporting order.
STS_DATASETS: tuple[str, ...] = ("stsb", "sts12", "sts13", "sts14", "sts15", "sts16", "sickr")

FOLDERS = {
    "stsb": "STSB",
    "sts12": "STS12",
    "sts13": "STS13",
    "sts14": "STS14",
    "sts15": "STS15",
    "sts16": "STS16",
    "sickr": "SICK",
}
DISPLAY = {"stsb": "STS-B", "sickr": "SICK-R", **{f"sts{y}": f"STS{y}" for y in range(12, 17)}}


@dataclass(frozen=True, eq=False)
class STSData:
    """Sentence pairs with gold similarity scores.

    Attributes
    ----------
    name : str
        Canonical data set name, one of :data:`STS_DATASETS`, or for a user's file the plain label
        :func:`~layerwise.data.data_label` gives (:func:`~layerwise.data.read_pairs`).
    sentences1, sentences2 : list of str, each of length n
        The two sentences of every pair, as in the files (not stripped or tokenized).
    scores : ndarray of shape (n,), float64
        Gold similarity (0-5 for STS, 1-5 for SICK-R; a user's file: its own scale, see :func:`~layerwise.data.normalize_scores`).
    subsets : ndarray of shape (n,), str
        Subset of each pair: STS12-16 the file's subset (``"MSRpar"``, ``"headlines"``, ...), STS-B the
        split (``"train"``, ``"dev"``, ``"test"``), SICK-R its SemEval-2014 set (``"TRAIN"``, ``"TRIAL"``, ``"TEST"``).
        A user's file: its label on every pair.
    split : str
        Which pairs these are, human readable (``"test"``, ``"all"``, ``"SemEval-2014 test (4927 pairs)"``;
        ``"file"`` for a user's file).
        :meth:`take` keeps it unchanged.
    source : str
        The folder or file read, or ``"builtin:stsb"`` for the copy shipped in the package.
    """

    name: str
    sentences1: list[str]
    sentences2: list[str]
    scores: np.ndarray
    subsets: np.ndarray
    split: str
    source: str

    def __post_init__(self) -> None:
        sentences1 = list(self.sentences1)
        sentences2 = list(self.sentences2)
        scores = np.asarray(self.scores, dtype=np.float64)
        subsets = np.asarray(self.subsets, dtype=str)
        n = len(sentences1)
        if scores.ndim != 1 or subsets.ndim != 1:
            raise ValueError(
                f"STSData.scores and .subsets must be 1-d of shape (n,), got {scores.shape} and {subsets.shape}"
            )
        if not (len(sentences2) == scores.shape[0] == subsets.shape[0] == n):
            raise ValueError(
                "STSData fields differ in length: "
                f"sentences1 {n}, sentences2 {len(sentences2)}, scores {scores.shape[0]}, subsets {subsets.shape[0]}"
            )
        object.__setattr__(self, "sentences1", sentences1)
        object.__setattr__(self, "sentences2", sentences2)
        object.__setattr__(self, "scores", scores)
        object.__setattr__(self, "subsets", subsets)

    def __len__(self) -> int:
        return len(self.sentences1)

    def __repr__(self) -> str:
        return (
            f"STSData(name={self.name!r}, split={self.split!r}, n={len(self)}, "
            f"subsets={self.subset_names!r}, source={self.source!r})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, STSData):
            return NotImplemented
        return (
            (self.name, self.split, self.source, self.sentences1, self.sentences2)
            == (other.name, other.split, other.source, other.sentences1, other.sentences2)
            and np.array_equal(self.scores, other.scores)
            and np.array_equal(self.subsets, other.subsets)
        )

    __hash__ = None  # type: ignore[assignment]  # holds lists and arrays

    @property
    def subset_names(self) -> list[str]:
        """Sorted unique subset names."""
        return sorted(set(self.subsets.tolist()))

    def take(self, indices: Sequence[int] | np.ndarray) -> STSData:
        """The pairs at ``indices`` (ints of shape (k,), in that order, or a boolean mask of shape (n,))."""
        idx = index_array(indices, len(self))
        return STSData(
            name=self.name,
            sentences1=[self.sentences1[i] for i in idx],
            sentences2=[self.sentences2[i] for i in idx],
            scores=self.scores[idx],
            subsets=self.subsets[idx],
            split=self.split,
            source=self.source,
        )



def find_sts_root(data_dir: Path) -> Path:
    """The ``sts/`` folder: ``data_dir/sts``, or ``data_dir`` itself when it already is that folder."""
    nested = find_dir(data_dir, "sts")
    if nested is not None:
        return nested
    if data_dir.name.lower() == "sts" or any(find_dir(data_dir, f) for f in FOLDERS.values()):
        return data_dir
    return data_dir / "sts"


def dataset_dir(key: str, root: Path | None) -> Path:
    """The folder of a data set that is not built in; FileNotFoundError with the fix when absent."""
    display, folder_name = DISPLAY[key], FOLDERS[key]
    if root is None:
        raise FileNotFoundError(
            f"{display} needs a data directory and none was given: pass data_dir=... (--data-dir on the "
            f"command line) or set {DATA_ENV_VAR} to the folder that contains sts/{folder_name}/. "
            "Only STS-B is built in."
        )
    sts_root = find_sts_root(root)
    folder = find_dir(sts_root, folder_name)
    if folder is None:
        raise FileNotFoundError(
            f"{display} not found: looked for the folder {sts_root / folder_name}. Pass data_dir=... "
            f"(--data-dir on the command line) or set {DATA_ENV_VAR} to the folder that contains "
            f"sts/{folder_name}/."
        )
    return folder
