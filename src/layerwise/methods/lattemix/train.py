"""Training a token latent model on frozen token vectors (no labels)."""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch
from layerwise._progress import progress

from layerwise.methods.lattemix.config import LatteMixConfig
from layerwise.methods.lattemix.models import TokenLatentModel, build_model

logger = logging.getLogger(__name__)

__all__ = ["TrainConfig", "train_token_model"]


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = 1  # passes over the training tokens (one by default, as in the paper)
    batch_size: int = 256  # tokens per step
    lr: float = 1e-3  # Adam learning rate after warm-up
    lr_warmup_steps: int = 200  # learning rate rises linearly from 0 over these steps
    seed: int = 0  # initialisation, token order, Gumbel and Gaussian noise
    max_steps: int | None = None  # stop early (tests, quick runs)

    def to_dict(self) -> dict:
        return asdict(self)


def _check_tokens(tokens, config: LatteMixConfig, train: TrainConfig) -> np.ndarray:
    """Token vectors as float32 (m, d), after checking them and the training settings against ``config``."""
    tokens = np.asarray(tokens, dtype=np.float32)
    if tokens.ndim != 2 or len(tokens) == 0:
        raise ValueError(f"tokens must be a non-empty (m, d) array, got shape {tokens.shape}")
    if tokens.shape[1] != config.input_dim:
        raise ValueError(
            f"token vectors have d={tokens.shape[1]} but config.input_dim={config.input_dim}: build the config "
            "with input_dim equal to the encoder's hidden size"
        )
    if train.epochs < 1 or train.batch_size < 1:
        raise ValueError(f"epochs and batch_size must be positive, got {train.epochs} and {train.batch_size}")
    return tokens


def train_token_model(
    config: LatteMixConfig,
    tokens: np.ndarray,
    train: TrainConfig = TrainConfig(),
    *,
    show_progress: bool | None = None,
) -> tuple[TokenLatentModel, dict]:
    """Fit a model of kind ``config.kind`` on token vectors ``tokens`` of shape (m, d).

    Returns the model (in eval mode) and a history {"loss", "recon", "kl", "beta" (per step), "seconds", "steps"}.
    beta(step) = config.beta * min(1, step / config.beta_warmup_steps).
    """
    tokens = _check_tokens(tokens, config, train)
    torch.manual_seed(train.seed)
    gen = torch.Generator().manual_seed(train.seed)
    model = build_model(config)
    data = torch.from_numpy(tokens)
    model.set_input_stats(data)
    opt = torch.optim.Adam(model.parameters(), lr=train.lr)
    steps_per_epoch = int(np.ceil(len(data) / train.batch_size))
    total = steps_per_epoch * train.epochs
    if train.max_steps is not None:
        total = min(total, int(train.max_steps))
    history = {"loss": [], "recon": [], "kl": [], "beta": []}
    show = logger.isEnabledFor(logging.INFO) if show_progress is None else show_progress
    model.train()
    t0 = time.perf_counter()
    step = 0
    with progress(total=total, desc=f"training {config.kind} VAE" if config.kind != "ae" else "training AE",
              unit="step", disable=not show) as bar:
        while step < total:
            perm = torch.randperm(len(data), generator=gen)
            for start in range(0, len(data), train.batch_size):
                if step >= total:
                    break
                batch = data[perm[start : start + train.batch_size]]
                beta = config.beta * (min(1.0, step / config.beta_warmup_steps) if config.beta_warmup_steps else 1.0)
                lr_scale = min(1.0, (step + 1) / train.lr_warmup_steps) if train.lr_warmup_steps else 1.0
                for g in opt.param_groups:
                    g["lr"] = train.lr * lr_scale
                out = model(batch, beta=beta, generator=gen)
                opt.zero_grad(set_to_none=True)
                out["loss"].backward()
                opt.step()
                for k in ("loss", "recon", "kl"):
                    history[k].append(float(out[k].detach()))
                history["beta"].append(beta)
                step += 1
                bar.update(1)
                if step % 50 == 0:
                    bar.set_postfix(loss=f"{history['loss'][-1]:.2f}", kl=f"{history['kl'][-1]:.2f}")
    history["seconds"] = time.perf_counter() - t0
    history["steps"] = step
    model.eval()
    return model, history
