"""Pooler-only training on a frozen encoder from precomputed layer vectors.

With the encoder frozen, the per-layer CLS and mean vectors a pooler reads do not depend on the pooler, so they
are computed once — for training with dropout on (the unsupervised objective's two views are two independent
dropout passes), for evaluation without — and every pooler, objective and seed then trains in seconds. This is the
regime of ``ContrastiveConfig(freeze_encoder=True)`` with one difference, stated in every result that uses it: the
dropout noise is drawn once per example and view, not anew at every step.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from layerwise._progress import progress
from layerwise.encoders.trainable import SentenceModel
from layerwise.evaluation.sts import sts_scores
from layerwise.losses.contrastive import objective_loss
from layerwise.methods.layer_attention.train import ContrastiveConfig, batch_indices, run_history
from layerwise.modules.poolers import LayerPooler, state_weights
from layerwise.training import TrainingTask, tensors_sha256, train
from layerwise.training.batches import check_in_batch_examples
from layerwise.training.distributed import gather_rows, shard

logger = logging.getLogger(__name__)

__all__ = ["FrozenPoolerTask", "LayerFeatures", "compute_features", "embed_features", "embed_features_with_weights",
           "train_pooler_on_features", "training_views"]


@dataclass(frozen=True)
class LayerFeatures:
    """Per-layer CLS and masked-mean vectors of n texts, each a float32 tensor (n, K, d)."""

    cls: torch.Tensor
    mean: torch.Tensor

    def __len__(self) -> int:
        return self.cls.shape[0]

    def take(self, idx) -> "LayerFeatures":
        idx = torch.as_tensor(np.asarray(idx), dtype=torch.long)
        return LayerFeatures(self.cls[idx], self.mean[idx])


@torch.no_grad()
def compute_features(model: SentenceModel, texts: list[str], *, dropout: bool, seed: int = 0, batch_size: int = 128,
                     show_progress: bool = False, desc: str = "layer vectors") -> LayerFeatures:
    """Layer vectors of ``texts`` from ``model``'s encoder (dropout on or off), batches sorted by token length,
    order kept. torch's global RNG is seeded with ``seed`` first (the dropout noise)."""
    if not texts:
        raise ValueError("no texts to encode")
    was = model.encoder.training
    model.encoder.train(dropout)
    torch.manual_seed(seed)
    cls = mean = None
    try:
        with progress(total=len(texts), desc=desc, unit="sent", disable=not show_progress) as bar:
            for idx, c, m in model.batched_layer_vectors(list(texts), batch_size=batch_size):
                if cls is None:
                    cls = torch.empty((len(texts), *c.shape[1:]), dtype=torch.float32)
                    mean = torch.empty_like(cls)
                t = torch.as_tensor(idx)
                cls[t], mean[t] = c.float().cpu(), m.float().cpu()
                bar.update(len(idx))
    finally:
        model.encoder.train(was)
    return LayerFeatures(cls, mean)


def training_views(model: SentenceModel, objective: str, examples: list, *, seed: int = 0,
                   show_progress: bool = False) -> tuple[LayerFeatures, ...]:
    """The views each objective compares, with dropout: unsup (sentence, sentence) as two independent passes;
    in_batch (anchor, positive); sup_hard_neg (anchor, positive, hard negative)."""
    if objective == "unsup":
        texts = list(examples)
        return tuple(compute_features(model, texts, dropout=True, seed=seed + v, show_progress=show_progress,
                                      desc=f"view {v + 1}/2") for v in range(2))
    cols = list(zip(*examples))
    if objective == "in_batch":
        cols = cols[:2]
    return tuple(compute_features(model, list(c), dropout=True, seed=seed + v, show_progress=show_progress,
                                  desc=f"view {v + 1}/{len(cols)}") for v, c in enumerate(cols))


@torch.no_grad()
def embed_features(pooler: LayerPooler, feats: LayerFeatures, *, batch_size: int = 4096) -> np.ndarray:
    """Pooler outputs (n, d) for precomputed layer vectors, in eval mode."""
    return _embed(pooler, feats, batch_size, weights=False)[0]


@torch.no_grad()
def embed_features_with_weights(pooler: LayerPooler, feats: LayerFeatures, *,
                                batch_size: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    """(pooler outputs (n, d), the weight each hidden state got in that same pass (n, K), summing to 1 per text:
    :func:`~layerwise.modules.poolers.state_weights`) for an attention pooler, in eval mode."""
    emb, weights = _embed(pooler, feats, batch_size, weights=True)
    if weights is None:
        raise ValueError(f"pooler kind {pooler.config.kind!r} has no attention weights")
    return emb, weights


def _embed(pooler: LayerPooler, feats: LayerFeatures, batch_size: int, *, weights: bool):
    was = pooler.training
    pooler.eval()
    device = next(pooler.parameters(), feats.cls).device
    out, att = [], []
    try:
        for s in range(0, len(feats), batch_size):
            h, a = pooler.forward_with_attention(feats.cls[s:s + batch_size].to(device),
                                                 feats.mean[s:s + batch_size].to(device))
            out.append(h.float().cpu())
            if weights and a is not None:
                att.append(state_weights(a).float().cpu())
    finally:
        pooler.train(was)
    return torch.cat(out).numpy(), (torch.cat(att).numpy() if att else None)


class FrozenPoolerTask(TrainingTask):
    """The pooler alone on precomputed views: batch b of a step is ``batch_indices(n, batch_size, seed, b)``."""

    def __init__(self, pooler: LayerPooler, views: tuple[LayerFeatures, ...], config: ContrastiveConfig, dev=None):
        self.module, self.views, self.config, self.dev = pooler, views, config, dev
        self.description = f"pooler ({config.objective})"

    def param_groups(self) -> list[dict]:
        return [{"name": "pooler", "params": list(self.module.parameters()), "lr": self.config.pooler_lr}]

    def loss(self, step: int, micro: int) -> dict:
        c = self.config
        batch = batch_indices(len(self.views[0]), c.batch_size, c.seed, step * c.grad_accumulation + micro)
        idx = torch.as_tensor(shard(batch))  # this process's rows; the negatives are gathered from every process
        device = next(self.module.parameters(), self.views[0].cls).device
        z = [gather_rows(self.module(v.cls[idx].to(device), v.mean[idx].to(device)), len(batch)) for v in self.views]
        return {"loss": objective_loss(c.objective, z, c.temperature)}

    def evaluate(self) -> float | None:
        if self.dev is None:
            return None
        a, b, gold = self.dev
        return float(sts_scores(embed_features(self.module, a), embed_features(self.module, b), gold)["spearman"])

    def fingerprint(self) -> dict:
        def features(parts) -> str:
            return tensors_sha256({f"{i}.{k}": getattr(f, k) for i, f in enumerate(parts) for k in ("cls", "mean")})

        dev = None if self.dev is None else features(self.dev[:2]) + ":" + tensors_sha256(
            {"gold": torch.as_tensor(np.asarray(self.dev[2], dtype=np.float64))})
        model = {"weights_sha256": tensors_sha256(self.module.state_dict()), "pooler": self.module.get_config_dict()}
        return {"model": model, "data": features(self.views), "dev": dev, "settings": asdict(self.config)}


def train_pooler_on_features(
    pooler: LayerPooler,
    views: tuple[LayerFeatures, ...],
    config: ContrastiveConfig,
    *,
    dev: tuple[LayerFeatures, LayerFeatures, np.ndarray] | None = None,
    show_progress: bool = False,
    output_dir: str | Path | None = None,
    resume: bool = False,
    overwrite: bool = False,
) -> dict:
    """Train ``pooler`` on precomputed views with ``config`` (AdamW at ``pooler_lr``, warm-up + linear decay,
    clipping, the seed's batch order); with ``dev`` = (vectors of sentences 1, of sentences 2, gold scores),
    STS dev Spearman every ``eval_every`` steps and the best state is loaded back at the end.
    With ``output_dir``: checkpoints ``last/`` and ``best/`` (pooler module format) and ``resume``/``overwrite``.
    Returns the history {"step", "loss", "dev", "best_dev", "seconds", "train_seconds", "steps_this_run", "config"}."""
    if not config.freeze_encoder:
        raise ValueError("training on precomputed features needs ContrastiveConfig(freeze_encoder=True)")
    n = len(views[0])
    if any(len(v) != n for v in views):
        raise ValueError(f"views differ in length: {[len(v) for v in views]}")
    check_in_batch_examples(n, config.batch_size, objective=config.objective)
    task = FrozenPoolerTask(pooler, views, config, dev)
    run = train(task, config.training_config(), output_dir=output_dir, resume=resume, overwrite=overwrite,
                show_progress=show_progress, restore_best=True)
    return run_history(run, config)
