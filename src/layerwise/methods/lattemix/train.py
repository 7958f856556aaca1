"""Training a token latent model on frozen token vectors (no labels), through the one training loop.

Adam (AdamW without weight decay) at ``lr`` after a linear warm-up, no clipping, one pass per epoch over the tokens
in an order drawn from a seeded ``torch.Generator`` at the start of each epoch; the same generator draws the
Gumbel / Gaussian noise. The generator's state and the current epoch's order are checkpointed, so a resumed run
repeats a straight run exactly, and for a seed the batches and noise are those of earlier versions of this trainer.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch

from layerwise.encoders.tokens import TokenStack
from layerwise.methods.lattemix.config import LatteMixConfig
from layerwise.methods.lattemix.models import TokenLatentModel, build_model
from layerwise.training import TrainingConfig, TrainingTask, seed_everything, tensors_sha256
from layerwise.training import train as train_loop  # `train` is this module's TrainConfig argument

logger = logging.getLogger(__name__)

__all__ = ["TokenModelTask", "TrainConfig", "train_on_token_stack", "train_token_model"]


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = 1  # passes over the training tokens (one by default, as in the paper)
    batch_size: int = 256  # tokens per step
    lr: float = 1e-3  # Adam learning rate after warm-up
    lr_warmup_steps: int = 200  # learning rate rises linearly from 0 over these steps
    seed: int = 0  # initialisation, token order, Gumbel and Gaussian noise
    max_steps: int | None = None  # stop early (tests, quick runs)

    def __post_init__(self) -> None:
        checks = [(self.epochs >= 1, "epochs", "an integer >= 1"), (self.batch_size >= 1, "batch_size", "an integer >= 1"),
                  (self.lr > 0, "lr", "a number > 0"), (self.lr_warmup_steps >= 0, "lr_warmup_steps", "an integer >= 0"),
                  (self.max_steps is None or self.max_steps >= 0, "max_steps", "None or an integer >= 0")]
        for ok, name, fix in checks:
            if not ok:
                raise ValueError(f"TrainConfig.{name}={getattr(self, name)!r} is invalid: use {fix}")

    def to_dict(self) -> dict:
        return asdict(self)


class TokenModelTask(TrainingTask):
    """A token VAE on (m, d) token vectors; step s reads batch s mod ceil(m / batch_size) of its epoch's order."""

    def __init__(self, model: TokenLatentModel, data: torch.Tensor, train_config: TrainConfig):
        self.module, self.data, self.train_config = model, data, train_config
        self.generator = torch.Generator().manual_seed(train_config.seed)
        self.steps_per_epoch = int(np.ceil(len(data) / train_config.batch_size))
        self.order = torch.arange(len(data))  # replaced at the start of every epoch
        kind = model.config.kind
        self.description = "training AE" if kind == "ae" else f"training {kind} VAE"

    def param_groups(self) -> list[dict]:
        return [{"name": "model", "params": list(self.module.parameters()), "lr": self.train_config.lr}]

    def loss(self, step: int, micro: int) -> dict:
        pos = step % self.steps_per_epoch
        if pos == 0:
            self.order = torch.randperm(len(self.data), generator=self.generator)
        bs = self.train_config.batch_size
        ref = next(self.module.parameters())
        batch = self.data[self.order[pos * bs : (pos + 1) * bs]].to(device=ref.device, dtype=ref.dtype)
        c = self.module.config
        beta = c.beta * (min(1.0, step / c.beta_warmup_steps) if c.beta_warmup_steps else 1.0)
        out = self.module(batch, beta=beta, generator=self.generator)
        return {"loss": out["loss"], "recon": out["recon"], "kl": out["kl"], "beta": beta}

    def fingerprint(self) -> dict:
        model = {"weights_sha256": tensors_sha256(self.module.state_dict()), "config": self.module.get_config_dict()}
        return {"model": model, "data": tensors_sha256({"tokens": self.data}), "settings": self.train_config.to_dict()}

    def state_tensors(self) -> dict[str, torch.Tensor]:
        return {"generator": self.generator.get_state(), "order": self.order}

    def load_state_tensors(self, tensors: dict[str, torch.Tensor]) -> None:
        self.generator.set_state(tensors["generator"])
        self.order = tensors["order"]


def train_token_model(
    config: LatteMixConfig,
    tokens: np.ndarray,
    train: TrainConfig = TrainConfig(),
    *,
    show_progress: bool | None = None,
    output_dir: str | Path | None = None,
    resume: bool = False,
    overwrite: bool = False,
    checkpoint_every: int = 0,
) -> tuple[TokenLatentModel, dict]:
    """Fit a model of kind ``config.kind`` on token vectors ``tokens`` of shape (m, d).

    Returns the model (in eval mode) and a history {"loss", "recon", "kl", "beta" (per step), "seconds", "steps"}.
    beta(step) = config.beta * min(1, step / config.beta_warmup_steps). With ``output_dir``: a checkpoint in
    ``last/`` every ``checkpoint_every`` steps (0: at the end) and ``resume`` / ``overwrite`` as in every trainer.
    """
    tokens = np.asarray(tokens, dtype=np.float32)
    if tokens.ndim != 2 or len(tokens) == 0:
        raise ValueError(f"tokens must be a non-empty (m, d) array, got shape {tokens.shape}")
    if tokens.shape[1] != config.input_dim:
        raise ValueError(
            f"token vectors have d={tokens.shape[1]} but config.input_dim={config.input_dim}: build the config "
            "with input_dim equal to the encoder's hidden size"
        )
    seed_everything(train.seed)  # before building: the initial weights follow the seed
    model = build_model(config)
    data = torch.from_numpy(tokens)
    model.set_input_stats(data)
    total = int(np.ceil(len(data) / train.batch_size)) * train.epochs
    total = total if train.max_steps is None else min(total, int(train.max_steps))
    history = {"loss": [], "recon": [], "kl": [], "beta": [], "seconds": 0.0, "steps": 0}
    if total > 0:
        loop = TrainingConfig(steps=total, warmup_steps=train.lr_warmup_steps, decay="constant", weight_decay=0.0,
                              max_grad_norm=None, eval_every=checkpoint_every, seed=train.seed)
        run = train_loop(TokenModelTask(model, data, train), loop, output_dir=output_dir, resume=resume,
                         overwrite=overwrite, show_progress=show_progress)
        history.update({k: run.metrics[k] for k in ("recon", "kl", "beta")}, loss=run.loss, seconds=run.seconds,
                       steps=len(run.loss))
    model.eval()
    return model, history



def train_on_token_stack(
    config: LatteMixConfig,
    stack: TokenStack,
    layer: int,
    train: TrainConfig = TrainConfig(),
    *,
    include_special: bool = False,
    show_progress: bool | None = None,
) -> tuple[TokenLatentModel, dict]:
    """Fit a model on the token vectors of hidden state ``layer`` of an encoded corpus (the method's fit step).

    ``config.input_dim`` is set to the vectors' width; special tokens ([CLS], [SEP]) are left out unless
    ``include_special``. Returns :func:`train_token_model`'s model and history.
    """
    tokens = stack.token_vectors(layer, include_special=include_special)
    if len(tokens) == 0:
        raise ValueError("the training texts hold no tokens besides special tokens: give longer texts, or "
                         "include_special=True")
    config = replace(config, input_dim=int(tokens.shape[1]))
    return train_token_model(config, tokens, train, show_progress=show_progress)
