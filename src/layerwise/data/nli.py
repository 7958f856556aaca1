"""SNLI (SentEval format) and unlabeled sentence files: training text for unsupervised models.

Layout under the data folder: ``nli/snli_devtest/{s1,s2,labels}.{dev,test}`` (one sentence or label per line)
and ``unlabeled/wiki1m_head/wiki1m_for_simcse.txt`` (one sentence per line; its last line is cut off and dropped).
SNLI train is not available on these machines: anything trained on these files says so.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from layerwise.data.sts import resolve_data_dir

logger = logging.getLogger(__name__)

__all__ = ["NLIPairs", "load_snli", "load_sentences", "load_wiki_head", "read_lines", "require_dir", "snli_sentences",
           "snli_triplets"]

SNLI_LABELS = ("entailment", "neutral", "contradiction")


@dataclass(frozen=True)
class NLIPairs:
    premises: list[str]
    hypotheses: list[str]
    labels: list[str]  # "entailment", "neutral" or "contradiction"
    split: str
    source: str

    def __len__(self) -> int:
        return len(self.labels)


def require_dir(data_dir, *parts: str) -> Path:
    """``data_dir/parts...`` (``data_dir`` defaults to $LAYERWISE_DATA); a one-line error naming the fix if absent."""
    root = resolve_data_dir(data_dir)
    if root is None:
        raise FileNotFoundError(
            f"no data folder given: pass data_dir (CLI --data-dir) or set LAYERWISE_DATA to the folder holding "
            f"{'/'.join(parts)}"
        )
    folder = root.joinpath(*parts)
    if not folder.exists():
        raise FileNotFoundError(f"{folder} does not exist: the data folder {root} has no {'/'.join(parts)}")
    return folder


def read_lines(path: Path) -> list[str]:
    """Stripped lines of a text file (UTF-8 with or without BOM, else latin-1 with a warning; no empty last line)."""
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        logger.warning("%s is not valid UTF-8; reading it as latin-1", path)
        text = raw.decode("latin-1")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [ln.rstrip("\r").strip() for ln in lines]


def load_snli(data_dir=None, split: str = "all") -> NLIPairs:
    """SNLI dev and/or test pairs (``split`` in ``dev``, ``test``, ``all``)."""
    if split not in ("dev", "test", "all"):
        raise ValueError(f"unknown SNLI split {split!r}; valid: 'dev', 'test', 'all' (SNLI train is not available)")
    folder = require_dir(data_dir, "nli", "snli_devtest")
    prem, hyp, lab = [], [], []
    for part in ("dev", "test") if split == "all" else (split,):
        s1 = read_lines(folder / f"s1.{part}")
        s2 = read_lines(folder / f"s2.{part}")
        labels = read_lines(folder / f"labels.{part}")
        if not len(s1) == len(s2) == len(labels):
            raise ValueError(
                f"SNLI {part} files differ in length: s1 {len(s1)}, s2 {len(s2)}, labels {len(labels)} in {folder}"
            )
        bad = sorted(set(labels) - set(SNLI_LABELS))
        if bad:
            raise ValueError(f"unexpected SNLI labels {bad} in {folder / f'labels.{part}'}")
        prem += s1
        hyp += s2
        lab += labels
    return NLIPairs(prem, hyp, lab, split=split, source=str(folder))


def snli_sentences(data_dir=None) -> list[str]:
    """Unique SNLI dev+test sentences (premises and hypotheses), first-seen order."""
    pairs = load_snli(data_dir, "all")
    return [s for s in dict.fromkeys(pairs.premises + pairs.hypotheses) if s]


def load_sentences(path: str | os.PathLike, *, drop_last: bool = False) -> list[str]:
    """One sentence per line (empty lines skipped); ``drop_last`` drops a final line that was cut off."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"sentence file {path} does not exist")
    lines = read_lines(path)
    if drop_last and lines:
        lines = lines[:-1]
    out = [ln for ln in lines if ln]
    if not out:
        raise ValueError(f"{path} holds no sentences")
    return out


def load_wiki_head(data_dir=None) -> list[str]:
    """The head of SimCSE's wiki1m sentence file (its last line is cut off mid-sentence and dropped)."""
    folder = require_dir(data_dir, "unlabeled", "wiki1m_head")
    return load_sentences(folder / "wiki1m_for_simcse.txt", drop_last=True)


def snli_triplets(data_dir=None) -> list[tuple[str, str, str]]:
    """(premise, entailment, contradiction) for every SNLI dev/test premise that has both (first of each).

    About 5.9k triplets from the SNLI dev and test sets available here, not the 275k of SimCSE's NLI file:
    results trained on them must say so.
    """
    pairs = load_snli(data_dir, "all")
    ent: dict[str, str] = {}
    con: dict[str, str] = {}
    for p, h, label in zip(pairs.premises, pairs.hypotheses, pairs.labels, strict=True):
        if label == "entailment":
            ent.setdefault(p, h)
        elif label == "contradiction":
            con.setdefault(p, h)
    return [(p, ent[p], con[p]) for p in ent if p in con]
