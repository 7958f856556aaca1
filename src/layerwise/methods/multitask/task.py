"""The :class:`~layerwise.training.TrainingTask` s of multi-task fine-tuning, for the one training loop.

:class:`TaskPhase` trains on batches of the tasks it names, as :class:`~layerwise.methods.multitask.schedule.BatchPlan`
orders them (step s -> one task's batch), with the loss of the task's kind (its ``TaskSpec``):

    classification (SST)          cross-entropy of the (B, C) logits with the labels
    pair_classification (PARA)    binary cross-entropy of the (B,) logits with the 0/1 labels ((B, C) logits:
                                  cross-entropy)
    pair_regression (STS)         mean squared error of the (B,) predictions with the score mapped to [0, 1]
                                  (STS: gold / 5)

``frozen_encoder=True`` (FREEZE_SST's second phase) trains the phase's heads (and their tasks' layer mixes) alone:
the encoder runs in eval mode with no gradient and no other weight is given to the optimizer, so everything else
stays bit-identical.
Its dev score is the mean of its tasks' terms of the overall score (tasks without dev data left out; none: no
dev score, the last state is kept). :class:`NLIPhase` pre-finetunes the encoder
on SNLI with one of the objectives of :mod:`layerwise.losses.nli` (no dev score: its last state is kept).

Under DDP (``torchrun``) each process takes its rows of a batch (:func:`layerwise.training.distributed.shard`):
mean losses are weighted by the process's share (``scale_mean``), the NLI contrastive loss gathers the embeddings
of every process first, so both equal the one-process loss of the whole batch.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.nn import functional as F

from layerwise.losses.nli import nli_loss
from layerwise.methods.multitask.data import BUILTIN_KINDS, TaskSpec
from layerwise.methods.multitask.evaluate import metric_term, task_metrics
from layerwise.methods.multitask.schedule import BatchPlan
from layerwise.training import TrainingTask, tensors_sha256
from layerwise.training.distributed import gather_rows, scale_mean, shard

__all__ = ["NLIPhase", "TaskPhase", "task_loss"]


def task_loss(model, task: str, batch, spec: TaskSpec | None = None) -> torch.Tensor:
    """The loss of one batch (LabelledSentences for classification, LabelledPairs for the pair kinds) of ``task``,
    by its ``spec`` (None: the built-in task of that name, SST, PARA or STS)."""
    spec = spec or TaskSpec(BUILTIN_KINDS[task])
    if spec.kind == "classification":
        logits = model.logits(task, batch.sentences)
        return F.cross_entropy(logits, torch.as_tensor(batch.labels, device=logits.device))
    out = model.pair_scores(task, batch.first, batch.second)
    if spec.kind == "pair_classification" and out.ndim == 2:
        return F.cross_entropy(out, torch.as_tensor(batch.targets, device=out.device).long())
    target = torch.as_tensor(batch.targets, dtype=out.dtype, device=out.device)
    if spec.kind == "pair_classification":
        return F.binary_cross_entropy_with_logits(out, target)
    lo, hi = spec.score_range
    return F.mse_loss(out, (target - lo) / (hi - lo))


def _model_fingerprint(model) -> dict:
    return {"weights_sha256": tensors_sha256(model.state_dict()), "model_type": model.encoder.config.model_type,
            "layers": model.layers, "subsets": {t: list(s) for t, s in model.subsets.items()},
            "max_length": model.max_length}


class TaskPhase(TrainingTask):
    """Train ``model`` on ``tasks`` of ``data`` (a MultitaskData) in the order of ``plan``; dev-selected."""

    def __init__(self, model, data, tasks: tuple[str, ...], config, plan: BatchPlan, *, frozen_encoder: bool = False,
                 name: str = "tasks"):
        self.module, self.data, self.tasks, self.config, self.plan = model, data, tuple(tasks), config, plan
        self.frozen_encoder, self.name = frozen_encoder, name
        self.description = f"multitask {config.name} ({name})"

    def param_groups(self) -> list[dict]:
        m, c = self.module, self.config
        if self.frozen_encoder:
            for p in m.parameters():
                p.requires_grad_(False)
            head = [p for t in self.tasks for p in m.heads[t].parameters()]
            mixes = [p for t in self.tasks if t in m.mixes for p in m.mixes[t].parameters()]
            for p in head + mixes:
                p.requires_grad_(True)
            groups = [{"name": f"{'_'.join(self.tasks)}_head", "params": head, "lr": c.lr}]
            return groups + ([{"name": "mixes", "params": mixes, "lr": c.mix_lr}] if mixes else [])
        for p in m.parameters():
            p.requires_grad_(True)
        heads = [p for t in self.tasks for p in m.heads[t].parameters()]
        if m.shared is not None and any(getattr(m.heads[t], "shared_size", 0) for t in self.tasks):
            heads += list(m.shared.parameters())
        groups = [{"name": "encoder", "params": list(m.encoder.parameters()), "lr": c.lr},
                  {"name": "heads", "params": heads, "lr": c.lr}]
        mixes = [p for t in self.tasks if t in m.mixes for p in m.mixes[t].parameters()]
        if mixes:
            groups.append({"name": "mixes", "params": mixes, "lr": c.mix_lr})
        return groups

    def loss(self, step: int, micro: int) -> dict:
        task, idx = self.plan.batch(step)
        batch = self.data.task(task).train.take(shard(idx))  # this process's rows (all of them in one process)
        if self.frozen_encoder:  # no dropout in the encoder; its weights need no gradient (param_groups), so none
            self.module.encoder.eval()  # is computed through it
        return {"loss": scale_mean(task_loss(self.module, task, batch, self.data.specs[task]), len(idx))}

    def evaluate(self) -> float | None:
        terms = [metric_term(task_metrics(self.module, t, self.data.specs[t], self.data.task(t).dev,
                                          batch_size=self.config.batch_size))
                 for t in self.tasks if self.data.task(t).dev is not None]
        return float(np.mean(terms)) if terms else None

    def fingerprint(self) -> dict:
        return {"model": _model_fingerprint(self.module), "data": self.data.checksums(),
                "settings": {"config": self.config.to_dict(), "phase": self.name, "tasks": list(self.tasks),
                             "frozen_encoder": self.frozen_encoder}}


class NLIPhase(TrainingTask):
    """Pre-finetune the encoder on SNLI with ``config.nli``: step s trains on batch s of a seeded per-epoch order."""

    def __init__(self, model, data, config, plan: BatchPlan):
        self.module, self.data, self.config, self.plan = model, data, config, plan
        self.description = f"NLI pre-finetuning ({config.nli})"

    def param_groups(self) -> list[dict]:
        for p in self.module.parameters():
            p.requires_grad_(False)
        for p in self.module.encoder.parameters():
            p.requires_grad_(True)
        return [{"name": "encoder", "params": list(self.module.encoder.parameters()), "lr": self.config.lr}]

    def loss(self, step: int, micro: int) -> dict:
        _, batch_idx = self.plan.batch(step)
        idx, n, c = shard(batch_idx), len(batch_idx), self.config  # this process's rows of the n-row batch
        if c.nli == "regression":
            batch = self.data.nli_pairs.take(idx)
            z = self.module.sentence_embeddings(batch.first + batch.second)
            targets = torch.as_tensor(batch.targets, dtype=z.dtype, device=z.device)
            return {"loss": scale_mean(nli_loss("regression", list(z.split(len(idx))), targets=targets), n)}
        rows = [self.data.nli_triplets[i] for i in idx]
        z = self.module.sentence_embeddings([t for col in zip(*rows, strict=True) for t in col])
        if c.nli == "contrastive":  # in-batch negatives: the views of the whole batch, gathered from every process
            views = [gather_rows(v, n) for v in z.split(len(idx))]
            return {"loss": nli_loss(c.nli, views, temperature=c.temperature, margin=c.margin)}
        return {"loss": scale_mean(nli_loss(c.nli, list(z.split(len(idx))), margin=c.margin), n)}

    def fingerprint(self) -> dict:
        return {"model": _model_fingerprint(self.module), "data": self.data.checksums(),
                "settings": {"config": self.config.to_dict(), "phase": "nli"}}
