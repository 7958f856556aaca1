"""The one training loop: every trainer describes its model, batches and loss as a :class:`TrainingTask`.

Per optimisation step s (0-based): every group's learning rate is set to its base rate times
``lr_factor(s)`` (``schedule.py``); ``grad_accumulation`` micro-batches each add ``loss / grad_accumulation`` to
the gradients; the global gradient norm is clipped; AdamW steps. Every ``eval_every`` steps and at the end the task
is evaluated (the best score's module goes to ``OUTPUT/best``) and ``OUTPUT/last`` is checkpointed (``checkpoint.py``).

Exact resume: a task's batches are a function of (seed, step, micro-batch) or of generators it saves with
``state_tensors``; torch's RNG (dropout) and the optimizer are saved too, so a resumed run repeats a straight run
bit for bit. A fresh run seeds torch with ``config.seed`` first; build the task's modules after seeding as well
(``seed_everything``) so that two runs with one seed start from the same weights.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from layerwise._progress import progress
from layerwise.finite import check_finite, check_rate
from layerwise.training import distributed
from layerwise.training.checkpoint import TrainerState, load_checkpoint, prepare_output, save_checkpoint
from layerwise.training.config import TrainingConfig
from layerwise.training.schedule import lr_factor

logger = logging.getLogger(__name__)

__all__ = ["TrainingRun", "TrainingTask", "seed_everything", "train"]

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def seed_everything(seed: int) -> None:
    """Seed torch's global RNG (CPU and every GPU): call before building modules and before training."""
    torch.manual_seed(int(seed))


class TrainingTask:
    """What the loop needs from a trainer. ``module`` is the trained ``nn.Module`` (moved to the device).

    Subclasses implement :meth:`param_groups` and :meth:`loss`; the rest has defaults for a module with
    ``save(folder)`` and ``load_weights(folder)`` (the :class:`~layerwise.modules.base.Module` format).
    """

    module: torch.nn.Module
    description: str = "training"

    def param_groups(self) -> list[dict]:
        """AdamW groups ``{"name": str, "params": [...], "lr": float}``, each with its own learning rate."""
        raise NotImplementedError

    def loss(self, step: int, micro: int) -> dict:
        """``{"loss": scalar tensor, other name: float or tensor...}`` for micro-batch ``micro`` of step ``step``."""
        raise NotImplementedError

    def evaluate(self) -> float | None:
        """A dev score, higher is better (None: no evaluation)."""
        return None

    def fingerprint(self) -> dict:
        """What identifies the run: ``{"model": ..., "data": ..., "settings": ...}`` (JSON)."""
        return {}

    def save(self, folder: Path) -> None:
        self.module.save(folder)

    def load_weights(self, folder: Path) -> None:
        self.module.load_weights(folder)

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """The task's own state for an exact resume (generator states, data orders)."""
        return {}

    def load_state_tensors(self, tensors: dict[str, torch.Tensor]) -> None:
        if tensors:
            raise ValueError(f"this task keeps no state tensors, got {sorted(tensors)}")


@dataclass
class TrainingRun:
    """The outcome of :func:`train`: the history of the whole run (resumes included) and this call's timings."""

    step: list[int]  # optimisation steps done, 1-based
    loss: list[float]  # training loss per step (mean over micro-batches)
    dev: list[list]  # [step, score] at each evaluation
    best_dev: float | None  # best dev score (None without evaluation)
    metrics: dict[str, list[float]] = field(default_factory=dict)  # the task's other per-step values
    seconds: float = 0.0  # this call, evaluations and checkpoints included
    train_seconds: float = 0.0  # this call's optimisation steps only
    steps_this_run: int = 0


_DIVERGED = ("training diverged or the model's weights are damaged: lower the learning rate, check the model, and "
             "run again (nothing of this run is reported)")


def _optimizer(task: TrainingTask, config: TrainingConfig):
    groups = [g for g in task.param_groups() if any(p.requires_grad for p in g["params"])]
    for g in groups:
        check_rate(g["lr"], f"the learning rate of parameter group {g.get('name')!r}")
    if not groups:
        return None, []
    opt = torch.optim.AdamW(groups, weight_decay=config.weight_decay)
    return opt, [g["lr"] for g in groups]


def _step(task, opt, base_lrs, config: TrainingConfig, step: int, history: dict, ddp=None) -> None:
    """One optimisation step: schedule, accumulated backward passes, clipping, AdamW; the losses go to history.

    With ``ddp`` (a :func:`~layerwise.training.distributed.data_parallel` wrapper) the micro-batches run through it:
    gradients are averaged over the ranks at the last one only (``no_sync`` before), and the logged values are
    averaged over the ranks, so rank 0's history is that of one process with the global batch.
    """
    factor = lr_factor(step, warmup_steps=config.warmup_steps, total_steps=config.steps, decay=config.decay)
    if opt is not None:
        for g, lr in zip(opt.param_groups, base_lrs):
            g["lr"] = lr * factor
        opt.zero_grad(set_to_none=True)
    sums: dict[str, float] = {}
    for micro in range(config.grad_accumulation):
        last = micro == config.grad_accumulation - 1
        with contextlib.nullcontext() if ddp is None or last else ddp.no_sync():
            out = task.loss(step, micro) if ddp is None else ddp(step, micro)
            if opt is not None:
                (out["loss"] / config.grad_accumulation).backward()
        for key, value in out.items():
            sums[key] = sums.get(key, 0.0) + float(value.detach() if isinstance(value, torch.Tensor) else value)
    if opt is not None:
        if config.max_grad_norm:
            params = [p for g in opt.param_groups for p in g["params"]]
            torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm)
        opt.step()
    history["step"].append(step + 1)
    for key, mean in distributed.mean_across({k: total / config.grad_accumulation for k, total in sums.items()}).items():
        history.setdefault(key, []).append(mean)
    check_finite(history["loss"][-1], f"the training loss at step {step + 1}", fix=_DIVERGED)


def _evaluate(task, out: Path | None, state: TrainerState, memory: dict) -> None:
    """Score the task (rank 0 scores, every rank gets its score, so the best/last decision is the same everywhere)."""
    score = distributed.run_on_main(task.evaluate)
    if score is None:
        return
    check_finite(score, f"the dev score at step {state.step}", fix=_DIVERGED)
    state.history["dev"].append([state.step, score])
    if state.best is None or score > state.best:
        state.best = score
        if out is not None:
            if distributed.is_main():
                task.save(out / "best")
        else:
            memory["best"] = {k: v.detach().clone() for k, v in task.module.state_dict().items()}


def _checkpoint(out: Path, task, opt, state: TrainerState, schedule: dict) -> None:
    """``out/last`` (written by rank 0, with every rank's RNG state)."""
    rank_rngs = distributed.rng_states()
    if distributed.is_main():
        save_checkpoint(out / "last", task, opt, state, schedule=schedule, rank_rngs=rank_rngs)


def _start(task, config: TrainingConfig, output_dir, resume: bool, overwrite: bool):
    """Check the output (rank 0), move the module, seed, build the optimizer and load ``last/`` when resuming."""
    distributed.setup(config.device)
    out = distributed.run_on_main(prepare_output, output_dir, resume=resume, overwrite=overwrite)
    if config.device is not None or config.dtype is not None:
        task.module.to(device=config.device, dtype=DTYPES[config.dtype] if config.dtype else None)
    state = TrainerState(fingerprint={**task.fingerprint(), "loop": config.to_dict()} if out else {})
    seed_everything(distributed.rank_seed(config.seed))
    opt, base_lrs = _optimizer(task, config)
    if resume:
        state = load_checkpoint(out / "last", task, opt, state.fingerprint)
    ddp = distributed.data_parallel(task) if distributed.is_distributed() and opt is not None else None
    return out, state, opt, base_lrs, ddp


def train(task: TrainingTask, config: TrainingConfig, *, output_dir=None, resume: bool = False,
          overwrite: bool = False, show_progress: bool | None = None, max_steps_this_run: int | None = None,
          restore_best: bool = False) -> TrainingRun:
    """Run ``task`` for ``config.steps`` steps (``max_steps_this_run`` stops early, as an interruption would).

    With ``output_dir``: checkpoints in ``last/`` and ``best/``; ``resume`` continues from ``last/`` (refused when
    the fingerprint differs), ``overwrite`` starts again. ``restore_best`` loads the best dev state at the end.
    """
    out, state, opt, base_lrs, ddp = _start(task, config, output_dir, resume, overwrite)
    start = state.step
    stop = config.steps if max_steps_this_run is None else min(config.steps, start + max_steps_this_run)
    schedule = {"kind": "linear_warmup", "warmup_steps": config.warmup_steps, "total_steps": config.steps,
                "decay": config.decay, "base_lrs": base_lrs}
    show = (logger.isEnabledFor(logging.INFO) if show_progress is None else show_progress) and distributed.is_main()
    memory: dict = {}
    t0, train_seconds = time.perf_counter(), 0.0
    task.module.train()
    with progress(total=config.steps, initial=start, desc=task.description, unit="step", disable=not show) as bar:
        for step in range(start, stop):
            t_step = time.perf_counter()
            _step(task, opt, base_lrs, config, step, state.history, ddp)
            train_seconds += time.perf_counter() - t_step
            state.step = step + 1
            bar.update(1)
            bar.set_postfix(loss=f"{state.history['loss'][-1]:.3f}")
            if (config.eval_every and state.step % config.eval_every == 0) or state.step == config.steps:
                _evaluate(task, out, state, memory)
                task.module.train()
                if out is not None:
                    _checkpoint(out, task, opt, state, schedule)
    if out is not None and stop < config.steps and stop > start:
        _checkpoint(out, task, opt, state, schedule)
    distributed.release(ddp)  # a later train() of the same module (the next phase) wraps it anew
    distributed.barrier()  # rank 0's files are complete before any rank reads them
    if restore_best and state.best is not None and out is not None:
        task.load_weights(out / "best")
    elif restore_best and state.best is not None:
        task.module.load_state_dict(memory["best"])
    hist = state.history
    metrics = {k: v for k, v in hist.items() if k not in ("step", "loss", "dev")}
    return TrainingRun(step=hist["step"], loss=hist["loss"], dev=hist["dev"], best_dev=state.best, metrics=metrics,
                       seconds=time.perf_counter() - t0, train_seconds=train_seconds, steps_this_run=stop - start)
