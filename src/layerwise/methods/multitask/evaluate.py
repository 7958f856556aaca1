"""Scores of a multi-task model: SST accuracy, PARA accuracy, STS Pearson / Spearman, and the report's overall

    overall = (sst_acc + para_acc + (sts_pearson + 1) / 2) / 3          (every term in [0, 1])

computed in eval mode (no dropout) over batches of texts sorted by length, original order restored. Any task of
its kind (a user's too) is scored by :func:`task_metrics` (accuracy; Pearson / Spearman) and its term of the
overall score is :func:`metric_term`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch

__all__ = ["TaskScores", "evaluate_split", "evaluate_split_outputs", "metric_term", "metrics_of_outputs",
           "overall_score", "predict_embeddings", "predict_logits", "predict_pairs", "predict_sst", "task_metrics",
           "task_outputs", "task_score"]


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
def predict_logits(model, task: str, sentences: list[str], *, batch_size: int = 64) -> np.ndarray:
    """(n, n_classes) logits of the classification task ``task``."""
    out = None
    for idx in _batches([len(s) for s in sentences], batch_size):
        logits = model.logits(task, [sentences[i] for i in idx]).float().cpu().numpy()
        out = np.empty((len(sentences), logits.shape[1]), dtype=np.float32) if out is None else out
        out[idx] = logits
    return out if out is not None else np.empty((0, 0), dtype=np.float32)


@torch.inference_mode()
def predict_embeddings(model, sentences: list[str], *, batch_size: int = 64) -> np.ndarray:
    """(n, d) float32 sentence embeddings (the last layer's token mean, what an exported folder computes), in eval
    mode."""
    was = model.training
    model.eval()
    out = np.empty((len(sentences), model.encoder.config.hidden_size), dtype=np.float32)
    try:
        for idx in _batches([len(s) for s in sentences], batch_size):
            out[idx] = model.sentence_embeddings([sentences[i] for i in idx]).float().cpu().numpy()
    finally:
        model.train(was)
    return out


def predict_sst(model, sentences: list[str], *, batch_size: int = 64) -> np.ndarray:
    """(n, n_classes) SST logits."""
    return predict_logits(model, "sst", sentences, batch_size=batch_size)


@torch.inference_mode()
def predict_pairs(model, task: str, first: list[str], second: list[str], *, batch_size: int = 64) -> np.ndarray:
    """(n,) PARA logits or STS predictions of sentence pairs ((n, C) from a pair head with C outputs)."""
    out = None
    for idx in _batches([len(a) + len(b) for a, b in zip(first, second, strict=True)], batch_size):
        pred = model.pair_scores(task, [first[i] for i in idx], [second[i] for i in idx]).float().cpu().numpy()
        out = np.empty((len(first), *pred.shape[1:]), dtype=np.float32) if out is None else out
        out[idx] = pred
    return out if out is not None else np.empty(0, dtype=np.float32)


def _correlations(pred: np.ndarray, gold: np.ndarray) -> tuple[float, float]:
    """(Pearson, Spearman) of predictions with gold scores; (0, 0) when every prediction is the same."""
    from scipy.stats import pearsonr, spearmanr

    if not np.ptp(pred) > 0:
        return 0.0, 0.0
    return float(pearsonr(pred, gold)[0]), float(spearmanr(pred, gold)[0])


def task_outputs(model, task: str, spec, split, *, batch_size: int = 64) -> np.ndarray:
    """Per-unit outputs of ``task`` on ``split``, model in eval mode: for the classification kinds whether each
    example is classified correctly (bool (n,); a one-logit pair head says "class 1" when its logit is > 0), for
    pair_regression each pair's prediction (float32 (n,)). :func:`metrics_of_outputs` scores them; a paired
    significance test reads them as they are."""
    was = model.training
    model.eval()
    try:
        if spec.kind == "classification":
            logits = predict_logits(model, task, split.sentences, batch_size=batch_size)
            return logits.argmax(1) == split.labels
        out = predict_pairs(model, task, split.first, split.second, batch_size=batch_size)
        if spec.kind == "pair_classification":
            return (out > 0) == (split.targets > 0.5) if out.ndim == 1 else out.argmax(1) == split.targets
        return out
    finally:
        model.train(was)


def metrics_of_outputs(spec, outputs: np.ndarray, split) -> dict[str, float]:
    """``{"accuracy"}`` of per-example correctness, or ``{"pearson", "spearman"}`` of pair predictions with the
    split's gold scores (pair_regression), from :func:`task_outputs`."""
    if spec.kind in ("classification", "pair_classification"):
        return {"accuracy": float(np.asarray(outputs).mean())}
    pearson, spearman = _correlations(outputs, split.targets)
    return {"pearson": pearson, "spearman": spearman}


def task_metrics(model, task: str, spec, split, *, batch_size: int = 64) -> dict[str, float]:
    """Scores of ``task`` (its :class:`~layerwise.methods.multitask.data.TaskSpec` ``spec``) on ``split`` (labelled
    sentences or pairs), model in eval mode: ``{"accuracy"}`` for the classification kinds (a one-logit pair head
    says "class 1" when its logit is > 0), ``{"pearson", "spearman"}`` with the gold scores for pair_regression."""
    return metrics_of_outputs(spec, task_outputs(model, task, spec, split, batch_size=batch_size), split)


def metric_term(metrics: dict[str, float]) -> float:
    """A task's term of the overall score, in [0, 1]: its accuracy, or (Pearson + 1) / 2."""
    return metrics["accuracy"] if "accuracy" in metrics else (metrics["pearson"] + 1.0) / 2.0


def evaluate_split_outputs(model, data, split: str, *, tasks=("sst", "para", "sts"),
                           batch_size: int = 64) -> tuple[TaskScores, dict[str, np.ndarray]]:
    """(scores on ``split`` ("dev" or "test") of a MultitaskData, task -> its per-unit outputs
    (:func:`task_outputs`: SST and PARA correctness, STS predictions)); tasks left out score nan."""
    nan = float("nan")
    outputs = {t: task_outputs(model, t, data.specs[t], getattr(data.task(t), split), batch_size=batch_size)
               for t in ("sst", "para", "sts") if t in tasks}
    got = {t: metrics_of_outputs(data.specs[t], out, getattr(data.task(t), split)) for t, out in outputs.items()}
    sts = got.get("sts", {})
    scores = TaskScores(got.get("sst", {}).get("accuracy", nan), got.get("para", {}).get("accuracy", nan),
                        sts.get("pearson", nan), sts.get("spearman", nan))
    return scores, outputs


def evaluate_split(model, data, split: str, *, tasks=("sst", "para", "sts"), batch_size: int = 64) -> TaskScores:
    """Scores on ``split`` ("dev" or "test") of a MultitaskData; tasks left out score nan."""
    return evaluate_split_outputs(model, data, split, tasks=tasks, batch_size=batch_size)[0]
