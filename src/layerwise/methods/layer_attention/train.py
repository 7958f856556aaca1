"""Contrastive training of an encoder plus layer pooler (or the pooler alone on a frozen encoder).

A thin adapter over the one training loop (``layerwise.training``): AdamW with a group per module (pooler at
``pooler_lr``, encoder at ``lr``), linear warm-up then linear decay, clipping, gradient accumulation, STS dev
evaluation every ``eval_every`` steps keeping ``best/``, checkpoints in ``last/`` and exact resume.
Batch ``b`` (``b = step * grad_accumulation + micro``) is a pure function of (seed, b): see :func:`batch_indices`.
Under DDP (``torchrun``) each process encodes its rows of the batch and the embeddings of every process are gathered
(with their gradients) before the loss, so the in-batch negatives are those of the whole batch, as in one process.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from layerwise.data.checksum import content_checksum
from layerwise.data.nli import snli_triplets as nli_triplets  # kept here under its earlier name
from layerwise.encoders.trainable import SentenceModel
from layerwise.evaluation.sts import sts_scores
from layerwise.losses.contrastive import OBJECTIVES, objective_loss
from layerwise.training import TrainingConfig, TrainingRun, TrainingTask, tensors_sha256, train
from layerwise.training.batches import batch_indices, check_in_batch_examples
from layerwise.training.distributed import gather_rows, shard

__all__ = ["OBJECTIVES", "ContrastiveConfig", "ContrastiveTask", "batch_indices", "nli_triplets", "run_history",
           "train_contrastive"]


@dataclass(frozen=True)
class ContrastiveConfig:
    objective: str = "unsup"  # "unsup" (sentences), "sup_hard_neg" (triplets), "in_batch" (pairs)
    steps: int = 500  # optimisation steps
    batch_size: int = 64  # examples per micro-batch (in-batch negatives come from it)
    lr: float = 3e-5  # encoder learning rate (SimCSE's for base models)
    pooler_lr: float = 1e-3  # pooler learning rate (a fresh module)
    warmup_steps: int = 50  # linear warm-up, then linear decay to 0 at `steps`
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0  # gradient clipping (0: none)
    temperature: float = 0.05  # tau of the contrastive softmax
    freeze_encoder: bool = False  # train the pooler only (the encoder still gives dropout noise)
    eval_every: int = 100  # steps between STS dev evaluations and checkpoints (0: only at the end)
    seed: int = 0
    grad_accumulation: int = 1  # micro-batches per optimisation step

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise ValueError(f"unknown objective {self.objective!r}; valid: {', '.join(OBJECTIVES)}")
        if self.batch_size < 2:
            raise ValueError(f"batch_size={self.batch_size} is invalid: use >= 2 (in-batch negatives need a batch)")
        for name in ("lr", "pooler_lr", "temperature"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}={getattr(self, name)!r} is invalid: use a number > 0")
        self.training_config()  # validates steps, warmup_steps, eval_every, grad_accumulation ...

    def training_config(self) -> TrainingConfig:
        """The loop settings of this config."""
        return TrainingConfig(steps=self.steps, warmup_steps=self.warmup_steps, decay="linear",
                              weight_decay=self.weight_decay, max_grad_norm=self.max_grad_norm,
                              grad_accumulation=self.grad_accumulation, eval_every=self.eval_every, seed=self.seed)




def example_views(objective: str, batch: list) -> list[list[str]]:
    """The texts each objective compares: unsup [s, s] (two dropout passes), in_batch [a, p], sup_hard_neg [a, p, n]."""
    if objective == "unsup":
        return [list(batch), list(batch)]
    return [list(col) for col in zip(*batch)]


def run_history(run: TrainingRun, config) -> dict:
    """The history dict the contrastive trainers return (``TrainingRun`` fields plus the config)."""
    return {"step": run.step, "loss": run.loss, "dev": run.dev, "best_dev": run.best_dev, "seconds": run.seconds,
            "train_seconds": run.train_seconds, "steps_this_run": run.steps_this_run, "config": asdict(config)}


class ContrastiveTask(TrainingTask):
    """Encoder + pooler on texts: one forward over all views of a batch, split, then the objective's loss."""

    def __init__(self, model: SentenceModel, examples: list, config: ContrastiveConfig, dev=None):
        self.module, self.examples, self.config, self.dev = model, examples, config, dev
        self.description = f"training ({config.objective})"

    def param_groups(self) -> list[dict]:
        for p in self.module.encoder.parameters():
            p.requires_grad_(not self.config.freeze_encoder)
        groups = [{"name": "pooler", "params": list(self.module.pooler.parameters()), "lr": self.config.pooler_lr}]
        if not self.config.freeze_encoder:
            groups.append({"name": "encoder", "params": list(self.module.encoder.parameters()), "lr": self.config.lr})
        return groups

    def loss(self, step: int, micro: int) -> dict:
        c = self.config
        batch = batch_indices(len(self.examples), c.batch_size, c.seed, step * c.grad_accumulation + micro)
        idx = shard(batch)  # this process's rows; the in-batch negatives are gathered from every process
        views = example_views(c.objective, [self.examples[i] for i in idx])
        z = self.module([t for v in views for t in v])  # one forward: independent dropout masks per copy
        parts = [gather_rows(part, len(batch)) for part in z.split(len(idx))]  # each (batch_size, d)
        return {"loss": objective_loss(c.objective, parts, c.temperature)}

    def evaluate(self) -> float | None:
        if self.dev is None:
            return None
        e1 = self.module.encode(list(self.dev.sentences1))
        e2 = self.module.encode(list(self.dev.sentences2))
        return float(sts_scores(e1, e2, self.dev.scores)["spearman"])

    def fingerprint(self) -> dict:
        m = self.module
        model = {"weights_sha256": tensors_sha256(m.state_dict()), "model_type": m.encoder.config.model_type,
                 "pooler": m.pooler.get_config_dict(), "max_length": m.max_length}
        return {"model": model, "data": content_checksum(self.examples),
                "dev": content_checksum(self.dev) if self.dev is not None else None, "settings": asdict(self.config)}


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

    ``output_dir/last`` is written at every evaluation and at the end (model, optimiser, RNG, history, fingerprint);
    ``output_dir/best`` holds the model with the best dev Spearman (when ``dev``, an STSData, is given). An existing
    run needs ``resume=True`` (continue; refused if model, data or settings differ); to start again, clear it first
    with ``layerwise.training.prepare_output(output_dir, resume=False, overwrite=True)`` (removes only its outputs).
    ``max_steps_this_run`` stops early (as an interruption would) without changing the schedule.
    Returns the history {"step", "loss", "dev", "best_dev", "seconds", "train_seconds", "steps_this_run", "config"}.
    """
    check_in_batch_examples(len(examples), config.batch_size, objective=config.objective)
    task = ContrastiveTask(model, examples, config, dev)
    run = train(task, config.training_config(), output_dir=output_dir, resume=resume, show_progress=show_progress,
                max_steps_this_run=max_steps_this_run)
    return run_history(run, config)
