"""Scores of a multi-task model: SST accuracy, PARA accuracy, STS Pearson / Spearman, and the report's overall

    overall = (sst_acc + para_acc + (sts_pearson + 1) / 2) / 3          (every term in [0, 1])

computed in eval mode (no dropout) over batches of texts sorted by length, original order restored.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch

__all__ = ["TaskScores", "evaluate_split", "overall_score", "predict_pairs", "predict_sst", "task_score"]


def overall_score(sst_acc: float, para_acc: float, sts_pearson: float) -> float:
    """The report's overall score (accuracies and Pearson as fractions, not percentages)."""
    return (sst_acc + para_acc + (sts_pearson + 1.0) / 2.0) / 3.0


def task_score(task: str, scores: "TaskScores") -> float:
    """One task's term of the overall score, in [0, 1]: accuracy, or (Pearson + 1) / 2 for STS."""
    return {"sst": scores.sst_acc, "para": scores.para_acc, "sts": (scores.sts_pearson + 1.0) / 2.0}[task]


@dataclass(frozen=True)
class TaskScores:
    sst_acc: float  # fraction of SST sentences whose arg-max class is the gold label
    para_acc: float  # fraction of Quora pairs with sigmoid(logit) > 0.5 exactly when duplicates
    sts_pearson: float  # Pearson of STS predictions with the gold scores (0 when every prediction is the same)
    sts_spearman: float  # Spearman of the same (0 likewise)

    @property
    def overall(self) -> float:
        return overall_score(self.sst_acc, self.para_acc, self.sts_pearson)

    def to_dict(self) -> dict:
        return {**asdict(self), "overall": self.overall}

    @classmethod
    def from_dict(cls, data: dict) -> "TaskScores":
        return cls(**{k: v for k, v in data.items() if k != "overall"})


def _batches(lengths: list[int], batch_size: int):
    order = np.argsort([-n for n in lengths], kind="stable")
    for start in range(0, len(order), batch_size):
        yield order[start:start + batch_size]


@torch.inference_mode()
def predict_sst(model, sentences: list[str], *, batch_size: int = 64) -> np.ndarray:
    """(n, n_classes) SST logits."""
    out = None
    for idx in _batches([len(s) for s in sentences], batch_size):
        logits = model.sst_logits([sentences[i] for i in idx]).float().cpu().numpy()
        out = np.empty((len(sentences), logits.shape[1]), dtype=np.float32) if out is None else out
        out[idx] = logits
    return out if out is not None else np.empty((0, 0), dtype=np.float32)


@torch.inference_mode()
def predict_pairs(model, task: str, first: list[str], second: list[str], *, batch_size: int = 64) -> np.ndarray:
    """(n,) PARA logits or STS predictions of sentence pairs."""
    out = np.empty(len(first), dtype=np.float32)
    for idx in _batches([len(a) + len(b) for a, b in zip(first, second, strict=True)], batch_size):
        out[idx] = model.pair_scores(task, [first[i] for i in idx], [second[i] for i in idx]).float().cpu().numpy()
    return out


def evaluate_split(model, data, split: str, *, tasks=("sst", "para", "sts"), batch_size: int = 64) -> TaskScores:
    """Scores on ``split`` ("dev" or "test") of a MultitaskData; tasks left out score nan."""
    from scipy.stats import pearsonr, spearmanr

    was = model.training
    model.eval()
    nan = float("nan")
    sst = para = pearson = spearman = nan
    try:
        if "sst" in tasks:
            d = getattr(data.sst, split)
            sst = float((predict_sst(model, d.sentences, batch_size=batch_size).argmax(1) == d.labels).mean())
        if "para" in tasks:
            d = getattr(data.para, split)
            logits = predict_pairs(model, "para", d.first, d.second, batch_size=batch_size)
            para = float(((logits > 0) == (d.targets > 0.5)).mean())
        if "sts" in tasks:
            d = getattr(data.sts, split)
            pred = predict_pairs(model, "sts", d.first, d.second, batch_size=batch_size)
            pearson = float(pearsonr(pred, d.targets)[0]) if np.ptp(pred) > 0 else 0.0
            spearman = float(spearmanr(pred, d.targets)[0]) if np.ptp(pred) > 0 else 0.0
    finally:
        model.train(was)
    return TaskScores(sst, para, pearson, spearman)
