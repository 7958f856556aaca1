"""Contrastive training of an encoder plus layer pooler (or the pooler alone on a frozen encoder).

AdamW, linear warm-up then linear decay, gradient clipping, seeded batches, evaluation on an STS dev set every
``eval_every`` steps keeping the best checkpoint, and resuming from the last checkpoint at the same step.
Batches are a pure function of (seed, step), and the RNG state (dropout) is saved, so a resumed run continues
exactly where a straight run would be.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from layerwise.losses.contrastive import InBatchLoss, SupervisedHardNegativeLoss, UnsupervisedSimCSELoss
from layerwise.encoders.trainable import SentenceModel

logger = logging.getLogger(__name__)

__all__ = ["OBJECTIVES", "ContrastiveConfig", "nli_triplets", "train_contrastive"]

OBJECTIVES = ("unsup", "sup_hard_neg", "in_batch")


@dataclass(frozen=True)
class ContrastiveConfig:
    objective: str = "unsup"  # "unsup" (sentences), "sup_hard_neg" (triplets), "in_batch" (pairs)
    steps: int = 500  # optimisation steps
    batch_size: int = 64  # examples per step
    lr: float = 3e-5  # encoder learning rate (SimCSE's for base models)
    pooler_lr: float = 1e-3  # pooler learning rate (a fresh module)
    warmup_steps: int = 50  # linear warm-up, then linear decay to 0 at `steps`
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0  # gradient clipping
    temperature: float = 0.05  # tau of the contrastive softmax
    freeze_encoder: bool = False  # train the pooler only (the encoder still gives dropout noise)
    eval_every: int = 100  # steps between STS dev evaluations (0: only at the end)
    seed: int = 0

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise ValueError(f"unknown objective {self.objective!r}; valid: {', '.join(OBJECTIVES)}")
        if self.steps < 1 or self.batch_size < 2:
            raise ValueError("steps must be >= 1 and batch_size >= 2 (in-batch negatives need a batch)")


def nli_triplets(data_dir=None) -> list[tuple[str, str, str]]:
    """(premise, entailment, contradiction) for every SNLI dev/test premise that has both (first of each).

    About 5.9k triplets from the SNLI dev and test sets available here, not the 275k of SimCSE's NLI file:
    results trained on them must say so.
    """
    from layerwise.data import load_snli

    pairs = load_snli(data_dir, "all")
    ent: dict[str, str] = {}
    con: dict[str, str] = {}
    for p, h, label in zip(pairs.premises, pairs.hypotheses, pairs.labels):
        if label == "entailment":
            ent.setdefault(p, h)
        elif label == "contradiction":
            con.setdefault(p, h)
    return [(p, ent[p], con[p]) for p in ent if p in con]


def _batch_indices(n: int, batch_size: int, seed: int, step: int) -> np.ndarray:
    per_epoch = max(1, n // batch_size)
    epoch, pos = divmod(step, per_epoch)
    perm = np.random.default_rng([seed, epoch]).permutation(n)
    return perm[pos * batch_size : (pos + 1) * batch_size]


def _loss(model: SentenceModel, objective: str, batch, tau: float) -> torch.Tensor:
    if objective == "unsup":
        texts = list(batch)
        z = model(texts + texts)  # one forward: two independent dropout masks per sentence
        return UnsupervisedSimCSELoss(tau)(z[: len(texts)], z[len(texts) :])
    if objective == "in_batch":
        a, b = zip(*batch)
        z = model(list(a) + list(b))
        return InBatchLoss(tau)(z[: len(a)], z[len(a) :])
    a, p, n = zip(*batch)
    z = model(list(a) + list(p) + list(n))
    k = len(a)
    return SupervisedHardNegativeLoss(tau)(z[:k], z[k : 2 * k], z[2 * k :])


def _dev_score(model: SentenceModel, dev) -> float:
    from layerwise.evaluation.sts import sts_scores

    e1 = model.encode(list(dev.sentences1))
    e2 = model.encode(list(dev.sentences2))
    return sts_scores(e1, e2, dev.scores)["spearman"]


def train_contrastive(
    model: SentenceModel,
    examples: list,
    config: ContrastiveConfig,
    output_dir: str | Path,
    *,
    dev=None,
    resume: bool = False,
    show_progress: bool | None = None,
    max_steps_this_run: int | None = None,
) -> dict:
    """Train on ``examples`` (sentences, pairs or triplets for the objective); write checkpoints under ``output_dir``.

    ``output_dir/last`` is written at every evaluation and at the end (model, optimiser, scheduler, RNG, history);
    ``output_dir/best`` holds the model with the best dev Spearman (when ``dev``, an STSData, is given).
    ``max_steps_this_run`` stops early (as an interruption would) without changing the schedule.
    Returns the history {"step", "loss", "dev"}.
    """
    if not examples:
        raise ValueError("no training examples")
    out = Path(output_dir)
    torch.manual_seed(config.seed)
    for p in model.encoder.parameters():
        p.requires_grad_(not config.freeze_encoder)
    groups = [{"params": list(model.pooler.parameters()), "lr": config.pooler_lr}]
    if not config.freeze_encoder:
        groups.append({"params": list(model.encoder.parameters()), "lr": config.lr})
    opt = torch.optim.AdamW(groups, weight_decay=config.weight_decay)

    def schedule(step: int) -> float:
        if step < config.warmup_steps:
            return (step + 1) / config.warmup_steps
        return max(0.0, (config.steps - step) / max(1, config.steps - config.warmup_steps))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
    history = {"step": [], "loss": [], "dev": [], "config": asdict(config)}
    start, best = 0, -float("inf")
    if resume and (out / "last" / "trainer_state.pt").is_file():
        state = torch.load(out / "last" / "trainer_state.pt", weights_only=False)
        if state["config"] != asdict(config):
            raise ValueError(f"cannot resume: {out / 'last'} was trained with a different config")
        loaded = SentenceModel.load(out / "last")
        model.encoder.load_state_dict(loaded.encoder.state_dict())
        model.pooler.load_state_dict(loaded.pooler.state_dict())
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        torch.set_rng_state(state["torch_rng"])
        start, best, history = state["step"], state["best"], state["history"]
        logger.info("resuming from step %d (%s)", start, out / "last")
    stop = config.steps if max_steps_this_run is None else min(config.steps, start + max_steps_this_run)

    def checkpoint(step: int) -> None:
        model.save(out / "last")
        torch.save({"step": step, "best": best, "history": history, "config": asdict(config),
                    "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
                    "torch_rng": torch.get_rng_state()}, out / "last" / "trainer_state.pt")

    show = logger.isEnabledFor(logging.INFO) if show_progress is None else show_progress
    model.train()
    t0 = time.perf_counter()
    train_seconds = 0.0
    with tqdm(total=config.steps, initial=start, desc=f"training ({config.objective})", unit="step",
              disable=not show) as bar:
        for step in range(start, stop):
            t_step = time.perf_counter()
            idx = _batch_indices(len(examples), config.batch_size, config.seed, step)
            loss = _loss(model, config.objective, [examples[i] for i in idx], config.temperature)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_([p for g in groups for p in g["params"]], config.max_grad_norm)
            opt.step()
            sched.step()
            train_seconds += time.perf_counter() - t_step  # optimisation only, evaluations excluded
            history["step"].append(step + 1)
            history["loss"].append(float(loss.detach()))
            bar.update(1)
            bar.set_postfix(loss=f"{history['loss'][-1]:.3f}")
            done = step + 1
            if (config.eval_every and done % config.eval_every == 0) or done == config.steps:
                if dev is not None:
                    score = _dev_score(model, dev)
                    history["dev"].append((done, score))
                    if score > best:
                        best = score
                        model.save(out / "best")
                checkpoint(done)
    if stop < config.steps:  # cut short: keep what was done (the last step always checkpoints above)
        checkpoint(stop)
    history["seconds"] = time.perf_counter() - t0  # this run, evaluations and checkpoints included
    history["train_seconds"] = train_seconds  # this run's optimisation steps only (throughput)
    history["steps_this_run"] = stop - start
    history["best_dev"] = best if dev is not None else None
    return history
