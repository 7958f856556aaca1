"""Settings of the training loop shared by every trainer (the method's own settings live in its config)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

from layerwise.training.schedule import DECAYS

__all__ = ["DTYPE_NAMES", "TrainingConfig"]

DTYPE_NAMES = ("float32", "bfloat16", "float16")


@dataclass(frozen=True)
class TrainingConfig:
    steps: int  # optimisation steps in the whole run (the schedule spans them, also across resumes)
    warmup_steps: int = 0  # linear warm-up of every group's learning rate
    decay: str = "linear"  # after warm-up: "linear" to 0 at `steps`, or "constant"
    weight_decay: float = 0.0  # AdamW's decoupled weight decay
    max_grad_norm: float | None = 1.0  # clip the global gradient norm; None or 0: no clipping
    grad_accumulation: int = 1  # micro-batches whose gradients add up to one optimisation step
    eval_every: int = 0  # steps between evaluations (and checkpoints); 0: only at the end
    seed: int = 0  # torch's global RNG is seeded with it at the start of a fresh run
    device: str | None = None  # move the trained module there first (None: where it already is)
    dtype: str | None = None  # cast the trained module first ("float32", "bfloat16", "float16"; None: keep)

    def __post_init__(self) -> None:
        checks = [
            (self.steps >= 1, "steps", self.steps, "an integer >= 1"),
            (self.warmup_steps >= 0, "warmup_steps", self.warmup_steps, "an integer >= 0"),
            (self.decay in DECAYS, "decay", self.decay, f"one of {', '.join(DECAYS)}"),
            (math.isfinite(self.weight_decay) and self.weight_decay >= 0, "weight_decay", self.weight_decay,
             "a finite number >= 0"),
            (self.max_grad_norm is None or (math.isfinite(self.max_grad_norm) and self.max_grad_norm >= 0),
             "max_grad_norm", self.max_grad_norm, "a finite number >= 0 or None"),
            (self.grad_accumulation >= 1, "grad_accumulation", self.grad_accumulation, "an integer >= 1"),
            (self.eval_every >= 0, "eval_every", self.eval_every, "an integer >= 0 (0: only at the end)"),
            (self.dtype is None or self.dtype in DTYPE_NAMES, "dtype", self.dtype,
             f"one of {', '.join(DTYPE_NAMES)} or None"),
        ]
        for ok, name, value, fix in checks:
            if not ok:
                raise ValueError(f"TrainingConfig.{name}={value!r} is invalid: use {fix}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "TrainingConfig":
        known = {f.name for f in fields(cls)}
        if set(data) - known:
            raise ValueError(f"unknown TrainingConfig fields {sorted(set(data) - known)}; valid: {sorted(known)}")
        return cls(**data)
