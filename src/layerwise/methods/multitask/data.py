"""The three tasks' splits and the NLI pre-finetuning data, as loaded here (what differs from the report's data).

    SST   SST-5 train / dev / test (8,544 / 1,101 / 2,210 sentences, 5 classes)      ``load_transfer("sst5")``
    PARA  Quora duplicate questions: only the BiMPM dev and test partitions (10,000 pairs each) are here, so
          training uses a seeded 90 % of dev, selection the other 10 %, and test is reported (the report trained
          on a far larger Quora train split)
    STS   STS-B train / dev / test (5,749 / 1,500 / 1,379 pairs, gold 0-5)
    NLI   SNLI dev + test pairs (SNLI train and MNLI are not available): labelled pairs for the regression
          objective, (premise, entailment, contradiction) triplets for the contrastive and triplet objectives

A task list of one's own (``MultitaskModel(tasks=[...])``) is held in a :class:`TaskSet`: any task names, each with
a :class:`TaskSpec` (its kind, classes, score range) and train / dev splits. Both containers answer the same
questions (``task(name)``, ``specs``, ``checksums()``, ``nli_pairs`` / ``nli_triplets``), so the training tasks and
the evaluation serve either.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from layerwise.data import load_sts, load_transfer
from layerwise.data.checksum import content_checksum
from layerwise.data.nli import load_snli, read_lines, require_dir, snli_triplets
from layerwise.errors import UsageError
from layerwise.losses.nli import NLI_LABEL_SCORES

__all__ = ["BUILTIN_KINDS", "DATA_NOTES", "KINDS", "LabelledPairs", "LabelledSentences", "MultitaskData", "TaskSet",
           "TaskSpec", "TaskSplits", "load_multitask_data", "load_quora_pairs"]

# what a task's head computes and its loss (see task.py):
#   classification        one text -> (B, C) logits, cross-entropy
#   pair_classification   two texts -> (B,) logit (2 classes, binary cross-entropy) or (B, C) logits (cross-entropy)
#   pair_regression       two texts -> (B,) prediction of the score mapped to [0, 1] by score_range, squared error
KINDS = ("classification", "pair_classification", "pair_regression")

DATA_NOTES = (
    "SST: SST-5 sentences (train 8,544 / dev 1,101 / test 2,210), 5 classes.",
    "PARA: Quora BiMPM dev partition split 90 / 10 (seeded) into train / selection; the test partition is reported. "
    "The report trained on the full Quora train split, which is not available here.",
    "STS: STS-B train / dev / test, gold 0-5 (heads regress gold / 5).",
    "NLI pre-finetuning: SNLI dev + test only (SNLI train and MNLI are not available here).",
)


@dataclass(frozen=True)
class LabelledSentences:
    sentences: list[str]  # (n,)
    labels: np.ndarray  # (n,) int64 class indices

    def __len__(self) -> int:
        return len(self.sentences)

    def take(self, idx) -> "LabelledSentences":
        idx = np.asarray(idx, dtype=np.int64)
        return LabelledSentences([self.sentences[i] for i in idx], self.labels[idx])


@dataclass(frozen=True)
class LabelledPairs:
    first: list[str]  # (n,)
    second: list[str]  # (n,)
    targets: np.ndarray  # (n,) float: 0/1 (PARA), gold 0-5 (STS), 1 / 0.5 / 0 (NLI regression)

    def __len__(self) -> int:
        return len(self.first)

    def take(self, idx) -> "LabelledPairs":
        idx = np.asarray(idx, dtype=np.int64)
        return LabelledPairs([self.first[i] for i in idx], [self.second[i] for i in idx], self.targets[idx])


@dataclass(frozen=True)
class TaskSplits:
    train: LabelledSentences | LabelledPairs
    dev: LabelledSentences | LabelledPairs | None  # checkpoint selection (None: a user task without dev data)
    test: LabelledSentences | LabelledPairs | None  # reported (None for a user's task)


@dataclass(frozen=True)
class TaskSpec:
    kind: str  # one of KINDS
    n_classes: int = 0  # classification kinds: classes (2 with a one-logit pair head)
    score_range: tuple[float, float] = (0.0, 5.0)  # pair_regression: (lo, hi); targets t -> (t - lo) / (hi - lo)

    def scaled(self, targets: np.ndarray) -> np.ndarray:
        """Regression targets in [0, 1] (what the head is trained to predict)."""
        lo, hi = self.score_range
        return (np.asarray(targets, dtype=np.float64) - lo) / (hi - lo)

    def unscaled(self, predictions: np.ndarray) -> np.ndarray:
        """Head predictions back in the data's own score scale."""
        lo, hi = self.score_range
        return lo + np.asarray(predictions, dtype=np.float64) * (hi - lo)


BUILTIN_KINDS = {"sst": "classification", "para": "pair_classification", "sts": "pair_regression"}


@dataclass(frozen=True)
class TaskSet:
    """A user's tasks: ``splits`` and ``specs`` keyed by task name (in training order), NLI pre-finetuning data."""

    splits: dict  # name -> TaskSplits (test None)
    specs: dict  # name -> TaskSpec
    nli_pairs: LabelledPairs | None = None
    nli_triplets: list[tuple[str, str, str]] | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.splits)

    def task(self, name: str) -> TaskSplits:
        return self.splits[name]

    def checksums(self) -> dict:
        """Content checksums of every part, for resume fingerprints."""
        out = {t: content_checksum([s.train, s.dev]) if s.dev is not None else content_checksum(s.train)
               for t, s in self.splits.items()}
        out["nli_pairs"] = content_checksum(self.nli_pairs) if self.nli_pairs is not None else None
        out["nli_triplets"] = content_checksum(self.nli_triplets) if self.nli_triplets is not None else None
        return out


@dataclass(frozen=True)
class MultitaskData:
    sst: TaskSplits
    para: TaskSplits
    sts: TaskSplits
    n_classes: int  # SST classes (5)
    nli_pairs: LabelledPairs | None = None  # SNLI pairs with regression targets (NLI_REGRESSION)
    nli_triplets: list[tuple[str, str, str]] | None = None  # (premise, entailment, contradiction)

    def task(self, name: str) -> TaskSplits:
        return {"sst": self.sst, "para": self.para, "sts": self.sts}[name]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(BUILTIN_KINDS)

    @property
    def specs(self) -> dict:
        """The three tasks' :class:`TaskSpec` (STS gold 0-5 regressed as gold / 5)."""
        return {"sst": TaskSpec("classification", self.n_classes), "para": TaskSpec("pair_classification", 2),
                "sts": TaskSpec("pair_regression", score_range=(0.0, 5.0))}

    def checksums(self) -> dict:
        """Content checksums of every part read, for run keys and resume fingerprints."""
        out = {t: content_checksum([self.task(t).train, self.task(t).dev, self.task(t).test]) for t in ("sst", "para",
                                                                                                      "sts")}
        out["nli_pairs"] = content_checksum(self.nli_pairs) if self.nli_pairs is not None else None
        out["nli_triplets"] = content_checksum(self.nli_triplets) if self.nli_triplets is not None else None
        return out


def load_quora_pairs(data_dir=None, split: str = "dev") -> LabelledPairs:
    """Quora BiMPM ``dev`` or ``test`` (``label<TAB>q1<TAB>q2<TAB>pair_id``) as pairs with 0/1 targets."""

    if split not in ("dev", "test"):
        raise ValueError(f"unknown Quora split {split!r}; valid: 'dev', 'test' (no train partition is here)")
    path = require_dir(data_dir, "quora") / f"{split}.tsv"
    first, second, targets = [], [], []
    for i, line in enumerate(read_lines(path), 1):
        if not line:
            continue
        f = line.split("\t")
        if len(f) != 4 or f[0] not in ("0", "1"):
            raise ValueError(f"{path} line {i}: expected label<TAB>q1<TAB>q2<TAB>pair_id with label 0 or 1")
        first.append(f[1])
        second.append(f[2])
        targets.append(float(f[0]))
    return LabelledPairs(first, second, np.asarray(targets, dtype=np.float64))


def _limit(data, n: int | None, seed: int):
    """At most ``n`` examples: a seeded sample kept in file order (all of them when n is None or larger)."""
    if n is None or len(data) <= n:
        return data
    return data.take(np.sort(np.random.default_rng(seed).permutation(len(data))[:n]))


def _head(data, n: int | None):
    return data if n is None or len(data) <= n else data.take(np.arange(n))


def _sst(data_dir, limit, eval_limit, seed) -> tuple[TaskSplits, int]:
    d = load_transfer("sst5", data_dir=data_dir)
    part = {s: LabelledSentences([d.sentences[i] for i in np.flatnonzero(d.splits == s)],
                                 d.labels[d.splits == s]) for s in ("train", "dev", "test")}
    return TaskSplits(_limit(part["train"], limit, seed), _head(part["dev"], eval_limit),
                      _head(part["test"], eval_limit)), d.n_classes


def _usable_quora(pairs: LabelledPairs, data_dir, split: str, minimum: int) -> LabelledPairs:
    """Refuse a Quora split the PARA task cannot use: fewer than ``minimum`` pairs, or no duplicate (label 1) or
    no non-duplicate (label 0) pair, which would train a constant classifier or leave a split empty."""
    where = f"Quora {split}.tsv in {require_dir(data_dir, 'quora')}"
    duplicates = int((pairs.targets > 0.5).sum())
    if len(pairs) < minimum:
        raise UsageError(f"{where} holds {len(pairs)} pairs; the PARA task needs at least {minimum} (with duplicates "
                         "and non-duplicates): restore the file")
    if duplicates in (0, len(pairs)):
        kind = "duplicate (label 1)" if duplicates == 0 else "non-duplicate (label 0)"
        raise UsageError(f"{where} has no {kind} pair among its {len(pairs)}: a duplicate classifier cannot be "
                         "trained or scored on it; restore the file")
    return pairs


def _para(data_dir, limit, eval_limit, split_seed) -> TaskSplits:
    dev = _usable_quora(load_quora_pairs(data_dir, "dev"), data_dir, "dev", 10)  # 90 / 10: both parts non-empty
    perm = np.random.default_rng(split_seed).permutation(len(dev))
    cut = int(round(0.9 * len(dev)))
    train, select = dev.take(np.sort(perm[:cut])), dev.take(np.sort(perm[cut:]))
    return TaskSplits(_limit(train, limit, split_seed), _head(select, eval_limit),
                      _head(_usable_quora(load_quora_pairs(data_dir, "test"), data_dir, "test", 2), eval_limit))


def _sts(data_dir, limit, eval_limit, seed) -> TaskSplits:
    def pairs(split):
        d = load_sts("stsb", data_dir=data_dir, split=split)
        return LabelledPairs(list(d.sentences1), list(d.sentences2), np.asarray(d.scores, dtype=np.float64))

    return TaskSplits(_limit(pairs("train"), limit, seed), _head(pairs("dev"), eval_limit),
                      _head(pairs("test"), eval_limit))


def _nli(data_dir, objective: str, limit):
    if objective == "regression":
        p = load_snli(data_dir, "all")
        pairs = LabelledPairs(list(p.premises), list(p.hypotheses),
                              np.asarray([NLI_LABEL_SCORES[x] for x in p.labels], dtype=np.float64))
        return _limit(pairs, limit, 0), None
    triplets = snli_triplets(data_dir)
    return None, triplets if limit is None else triplets[:limit]


def load_multitask_data(config, data_dir=None) -> MultitaskData:
    """Every split ``config`` (a MultitaskConfig) trains, selects and reports on; ``config.limit`` caps training sets
    (a seeded sample), ``config.eval_limit`` the dev and test sets (their first examples)."""
    sst, n_classes = _sst(data_dir, config.limit, config.eval_limit, config.split_seed)
    para = _para(data_dir, config.limit, config.eval_limit, config.split_seed)
    sts = _sts(data_dir, config.limit, config.eval_limit, config.split_seed)
    nli_pairs, triplets = _nli(data_dir, config.nli, config.limit) if config.nli else (None, None)
    if config.sst_prototypes:
        counts = np.bincount(sst.train.labels, minlength=n_classes)
        if counts.min() < config.sst_prototypes:
            raise ValueError(f"sst_prototypes={config.sst_prototypes} per label is more than the SST training "
                             f"sentences of some label ({counts.tolist()}); use at most {counts.min()}")
    return MultitaskData(sst, para, sts, n_classes, nli_pairs, triplets)
