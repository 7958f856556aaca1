"""The :class:`~layerwise.training.TrainingTask` s of multi-task fine-tuning, for the one training loop.

:class:`TaskPhase` trains on batches of the tasks it names, as :class:`~layerwise.methods.multitask.schedule.BatchPlan`
orders them (step s -> one task's batch), with the task's loss:

    SST   cross-entropy of the (B, C) logits with the labels
    PARA  binary cross-entropy of the (B,) logits with the 0/1 duplicate labels
    STS   mean squared error of the (B,) predictions with gold / 5 (in [0, 1])

``frozen_encoder=True`` (FREEZE_SST's second phase) trains the SST head alone: the encoder runs in eval mode under
``no_grad`` and no other weight is given to the optimizer, so everything but the SST head stays bit-identical.
Its dev score is the mean of its tasks' terms of the overall score. :class:`NLIPhase` pre-finetunes the encoder
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
from layerwise.methods.multitask.evaluate import evaluate_split, task_score
from layerwise.methods.multitask.schedule import BatchPlan
from layerwise.modules.heads import TransformerClassificationHead
from layerwise.training import TrainingTask, tensors_sha256
from layerwise.training.distributed import gather_rows, scale_mean, shard

__all__ = ["NLIPhase", "TaskPhase", "task_loss"]


def task_loss(model, task: str, batch) -> torch.Tensor:
    """The loss of one batch (LabelledSentences for SST, LabelledPairs for PARA and STS)."""
    if task == "sst":
        logits = model.sst_logits(batch.sentences)
        return F.cross_entropy(logits, torch.as_tensor(batch.labels, device=logits.device))
    out = model.pair_scores(task, batch.first, batch.second)
    target = torch.as_tensor(batch.targets, dtype=out.dtype, device=out.device)
    if task == "para":
        return F.binary_cross_entropy_with_logits(out, target)
    return F.mse_loss(out, target / 5.0)


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
            head = list(m.heads["sst"].parameters())
            for p in head:
                p.requires_grad_(True)
            return [{"name": "sst_head", "params": head, "lr": c.lr}]
        for p in m.parameters():
            p.requires_grad_(True)
        heads = [p for t in self.tasks for p in m.heads[t].parameters()]
        if m.shared is not None and {"para", "sts"} & set(self.tasks):
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
        if not self.frozen_encoder:
            return {"loss": scale_mean(task_loss(self.module, task, batch), len(idx))}
        self.module.encoder.eval()
        with torch.no_grad():
            mean, tokens, mask = self.module.encode_texts(batch.sentences)
        head = self.module.heads["sst"]
        if isinstance(head, TransformerClassificationHead):
            logits = head(tokens, mask)
        else:
            logits = head(self.module.embed("sst", mean))
        loss = F.cross_entropy(logits, torch.as_tensor(batch.labels, device=logits.device))
        return {"loss": scale_mean(loss, len(idx))}

    def evaluate(self) -> float | None:
        scores = evaluate_split(self.module, self.data, "dev", tasks=self.tasks, batch_size=self.config.batch_size)
        return float(np.mean([task_score(t, scores) for t in self.tasks]))

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
