"""Pooler-only training on a frozen encoder from precomputed layer vectors.

With the encoder frozen, the per-layer CLS and mean vectors a pooler reads do not depend on the pooler, so they
are computed once — for training with dropout on (the unsupervised objective's two views are two independent
dropout passes), for evaluation without — and every pooler, objective and seed then trains in seconds. This is the
regime of ``ContrastiveConfig(freeze_encoder=True)`` with one difference, stated in every result that uses it: the
dropout noise is drawn once per example and view, not anew at every step.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch
from tqdm.auto import tqdm

from layerwise.losses.contrastive import InBatchLoss, SupervisedHardNegativeLoss, UnsupervisedSimCSELoss
from layerwise.encoders.trainable import SentenceModel
from layerwise.modules.poolers import LayerPooler
from layerwise.methods.layer_attention.train import ContrastiveConfig, _batch_indices

logger = logging.getLogger(__name__)

__all__ = ["LayerFeatures", "compute_features", "training_views", "train_pooler_on_features", "embed_features"]


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
    """Layer vectors of ``texts`` from ``model``'s encoder (dropout on or off), length-sorted batches, order kept."""
    if not texts:
        raise ValueError("no texts to encode")
    was = model.encoder.training
    model.encoder.train(dropout)
    torch.manual_seed(seed)
    order = np.argsort([-len(t) for t in texts], kind="stable")
    cls = mean = None
    try:
        for s in tqdm(range(0, len(texts), batch_size), desc=desc, unit="batch", disable=not show_progress):
            idx = order[s:s + batch_size]
            c, m = model.layer_vectors([texts[i] for i in idx])
            if cls is None:
                cls = torch.empty((len(texts), *c.shape[1:]), dtype=torch.float32)
                mean = torch.empty_like(cls)
            t = torch.as_tensor(idx)
            cls[t], mean[t] = c.float(), m.float()
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
    was = pooler.training
    pooler.eval()
    out = [pooler(feats.cls[s:s + batch_size], feats.mean[s:s + batch_size]) for s in range(0, len(feats), batch_size)]
    pooler.train(was)
    return torch.cat(out).float().numpy()


def _loss(pooler: LayerPooler, objective: str, views: tuple[LayerFeatures, ...], idx, tau: float) -> torch.Tensor:
    z = [pooler(v.cls[idx], v.mean[idx]) for v in views]
    if objective == "unsup":
        return UnsupervisedSimCSELoss(tau)(z[0], z[1])
    if objective == "in_batch":
        return InBatchLoss(tau)(z[0], z[1])
    return SupervisedHardNegativeLoss(tau)(z[0], z[1], z[2])


def train_pooler_on_features(
    pooler: LayerPooler,
    views: tuple[LayerFeatures, ...],
    config: ContrastiveConfig,
    *,
    dev: tuple[LayerFeatures, LayerFeatures, np.ndarray] | None = None,
    show_progress: bool = False,
) -> dict:
    """Train ``pooler`` on precomputed views with ``config`` (AdamW at ``pooler_lr``, warm-up + linear decay,
    clipping, the seed's batch order); with ``dev`` = (vectors of sentences 1, of sentences 2, gold scores),
    STS dev Spearman every ``eval_every`` steps and the best state is loaded back at the end.
    Returns the history {"step", "loss", "dev", "best_dev", "train_seconds", "config"}."""
    from layerwise.evaluation.sts import sts_scores

    if not config.freeze_encoder:
        raise ValueError("training on precomputed features needs ContrastiveConfig(freeze_encoder=True)")
    n = len(views[0])
    if any(len(v) != n for v in views):
        raise ValueError(f"views differ in length: {[len(v) for v in views]}")
    torch.manual_seed(config.seed)
    params = list(pooler.parameters())
    opt = torch.optim.AdamW(params, lr=config.pooler_lr, weight_decay=config.weight_decay) if params else None

    def schedule(step: int) -> float:
        if step < config.warmup_steps:
            return (step + 1) / config.warmup_steps
        return max(0.0, (config.steps - step) / max(1, config.steps - config.warmup_steps))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule) if opt else None
    history = {"step": [], "loss": [], "dev": [], "config": asdict(config)}
    best, best_state = -float("inf"), None
    train_seconds = 0.0

    def dev_score() -> float:
        a, b, gold = dev
        return sts_scores(embed_features(pooler, a), embed_features(pooler, b), gold)["spearman"]

    pooler.train()
    for step in tqdm(range(config.steps), desc=f"pooler ({config.objective})", unit="step", disable=not show_progress):
        t0 = time.perf_counter()
        idx = torch.as_tensor(_batch_indices(n, config.batch_size, config.seed, step))
        loss = _loss(pooler, config.objective, views, idx, config.temperature)
        if opt is not None:
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm)
            opt.step()
            sched.step()
        train_seconds += time.perf_counter() - t0
        history["step"].append(step + 1)
        history["loss"].append(float(loss.detach()))
        done = step + 1
        if dev is not None and ((config.eval_every and done % config.eval_every == 0) or done == config.steps):
            score = dev_score()
            history["dev"].append((done, score))
            if score > best:
                best = score
                best_state = {k: v.detach().clone() for k, v in pooler.state_dict().items()}
    if best_state is not None:
        pooler.load_state_dict(best_state)
    history["best_dev"] = best if dev is not None else None
    history["train_seconds"] = train_seconds
    history["steps_this_run"] = config.steps
    return history
