"""Configuration of Latte-Mix token models: a frozen dataclass with a JSON round trip."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

__all__ = ["LatteMixConfig", "MODEL_KINDS", "OPTIONAL_FIELDS"]

MODEL_KINDS = ("categorical", "normal", "ae")
OPTIONAL_FIELDS = ("decoder_depth", "kl_threshold")  # left out of ``to_dict`` when None


@dataclass(frozen=True)
class LatteMixConfig:
    kind: str = "categorical"  # "categorical" (Gumbel-softmax VAE), "normal" (Gaussian VAE) or "ae" (plain autoencoder)
    input_dim: int = 384  # d of the frozen token vectors
    n_classes: int = 16  # categorical: classes per latent group (the mixture lives on these)
    n_groups: int = 32  # categorical: independent latent groups (posterior is a product of G categoricals);
    # many small groups beat one large one by far here (all-MiniLM-L6-v2, STS-B: G=1/C=64 58 vs G=32/C=16 79)
    latent_dim: int = 32  # normal VAE and AE: size of the continuous latent
    depth: int = 1  # encoder layers: 1 = one linear map to the posterior's parameters; 2-3 add hidden layers
    hidden_dim: int = 512  # width of the hidden layers when depth > 1 (or decoder_depth > 1)
    tau: float = 1.0  # Gumbel-softmax temperature of the training samples (Eq. 4 of the paper)
    beta: float = 1.0  # final weight of the KL term
    beta_warmup_steps: int = 1000  # beta rises linearly from 0 over these steps (against KL vanishing)
    # settings the paper uses that are off by default here (None keeps this library's choice, and keeps the saved
    # configs and results-store keys written before they existed unchanged: ``to_dict`` leaves a None one out)
    decoder_depth: int | None = None  # decoder layers (None: as ``depth``, the decoder mirrors the encoder); paper: 3
    kl_threshold: float | None = None  # KL thresholding ("free bits", nats) per latent group (categorical) or
    # dimension (normal): the KL term is sum_g max(eps, batch mean of KL_g); paper: eps = 0.3. None: the plain KL

    def __post_init__(self) -> None:
        if self.kind not in MODEL_KINDS:
            raise ValueError(f"unknown model kind {self.kind!r}; valid: {', '.join(MODEL_KINDS)}")
        for name in ("input_dim", "n_classes", "n_groups", "latent_dim", "depth", "hidden_dim", "decoder_depth"):
            if getattr(self, name) is not None and int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be a positive integer, got {getattr(self, name)}")
        if self.kind == "categorical" and self.n_classes < 2:
            raise ValueError("a categorical latent needs n_classes >= 2")
        if self.tau <= 0:
            raise ValueError(f"tau must be positive, got {self.tau}")
        if self.beta < 0 or self.beta_warmup_steps < 0:
            raise ValueError("beta and beta_warmup_steps must be non-negative")
        if self.kl_threshold is not None and not self.kl_threshold >= 0:
            raise ValueError(f"kl_threshold must be None or a number >= 0, got {self.kl_threshold}")

    @property
    def decoder_layers(self) -> int:
        """Layers of the decoder: ``decoder_depth``, or ``depth`` when it is None."""
        return self.depth if self.decoder_depth is None else self.decoder_depth

    def to_dict(self) -> dict:
        """Every field, less the paper's optional settings left at None (see ``decoder_depth``, ``kl_threshold``)."""
        return {k: v for k, v in asdict(self).items() if v is not None or k not in OPTIONAL_FIELDS}

    @classmethod
    def from_dict(cls, data: dict) -> "LatteMixConfig":
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown LatteMixConfig fields {sorted(unknown)}; valid: {sorted(known)}")
        return cls(**data)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> "LatteMixConfig":
        return cls.from_dict(json.loads(Path(path).read_text()))
