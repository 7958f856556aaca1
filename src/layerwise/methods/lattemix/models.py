"""Token-level latent models for Latte-Mix (Li et al.): categorical VAE, Normal VAE, plain autoencoder.

Each model maps one frozen token vector u (standardised with statistics of its training tokens) to a
posterior q(z|u), and is trained to minimise

    loss = beta * KL(q(z|u) || p(z))  -  E_q[log p(u|z)],

(the KL term thresholded per latent unit when ``kl_threshold`` is set: :func:`thresholded_kl`)

with p(u|z) = N(u; decoder(z), I) (so -log p(u|z) = 1/2 ||u - decoder(z)||^2 + d/2 log 2 pi) and beta rising
linearly from 0 (against KL vanishing). The categorical VAE has G groups of C classes with a uniform prior;
training samples z with the Gumbel-softmax relaxation at temperature tau (Eq. 4 of the paper):

    z_c = exp((log pi_c + g_c) / tau) / sum_k exp((log pi_k + g_k) / tau),   g ~ Gumbel(0, 1).

The Normal VAE has a diagonal Gaussian posterior and N(0, I) prior (reparameterised samples); the
autoencoder is deterministic (no KL).
"""

from __future__ import annotations

import math
from dataclasses import fields
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from layerwise.methods.lattemix.config import OPTIONAL_FIELDS, LatteMixConfig
from layerwise.methods.lattemix.divergences import kl_categorical_uniform, kl_normal_standard, thresholded_kl
from layerwise.modules.base import Module

__all__ = ["TokenLatentModel", "build_model", "gumbel_softmax_sample", "load_model"]


def gumbel_softmax_sample(logits: torch.Tensor, tau: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """A relaxed one-hot sample over the last axis (Eq. 4); becomes one-hot as tau -> 0."""
    # drawn on the generator's device (the CPU generator of a run on a GPU), then moved: the same noise everywhere
    where = generator.device if generator is not None else logits.device
    u = torch.rand(logits.shape, generator=generator, dtype=logits.dtype, device=where).to(logits.device)
    e = (-torch.log(u.clamp(1e-20, 1.0))).clamp_min(1e-20)  # Exp(1) noise
    g = -torch.log(e)  # Gumbel(0, 1)
    return F.softmax((logits + g) / tau, dim=-1)


def _mlp(d_in: int, d_hidden: int, d_out: int, depth: int) -> nn.Sequential:
    layers: list[nn.Module] = []
    d = d_in
    for _ in range(depth - 1):
        layers += [nn.Linear(d, d_hidden), nn.GELU()]
        d = d_hidden
    layers.append(nn.Linear(d, d_out))
    return nn.Sequential(*layers)


class TokenLatentModel(Module):
    """One class for the three kinds; ``config.kind`` picks the posterior. Shapes: u (m, d).

    Built from the keyword settings of :class:`LatteMixConfig` (validated by it); ``self.config`` holds them.
    """

    config_keys = tuple(f.name for f in fields(LatteMixConfig))
    optional_config_keys = OPTIONAL_FIELDS  # None settings are left out of the saved config

    def __init__(self, **settings):
        super().__init__()
        self.config = c = LatteMixConfig.from_dict(settings)
        if c.kind == "categorical":
            self.latent_size = c.n_groups * c.n_classes
            enc_out = self.latent_size  # logits
        elif c.kind == "normal":
            self.latent_size = c.latent_dim
            enc_out = 2 * c.latent_dim  # mu, logvar
        else:
            self.latent_size = c.latent_dim
            enc_out = c.latent_dim
        self.encoder = _mlp(c.input_dim, c.hidden_dim, enc_out, c.depth)
        self.decoder = _mlp(self.latent_size, c.hidden_dim, c.input_dim, c.decoder_layers)
        # input standardisation, set from the training tokens by `set_input_stats`
        self.register_buffer("input_mean", torch.zeros(c.input_dim))
        self.register_buffer("input_std", torch.ones(c.input_dim))

    def set_input_stats(self, u: torch.Tensor) -> None:
        self.input_mean.copy_(u.mean(0))
        self.input_std.copy_(u.std(0).clamp_min(1e-6))

    def _standardise(self, u: torch.Tensor) -> torch.Tensor:
        return (u - self.input_mean) / self.input_std

    def posterior(self, u: torch.Tensor):
        """q(z|u) for raw token vectors u (m, d).

        categorical: probabilities (m, G, C); normal: (mu (m, D), var (m, D)); ae: codes (m, D).
        """
        h = self.encoder(self._standardise(u))
        c = self.config
        if c.kind == "categorical":
            return F.softmax(h.view(-1, c.n_groups, c.n_classes), dim=-1)
        if c.kind == "normal":
            mu, logvar = h.chunk(2, dim=-1)
            return mu, logvar.clamp(-10, 10).exp()
        return h

    def forward(self, u: torch.Tensor, beta: float = 1.0, generator: torch.Generator | None = None) -> dict:
        """Loss terms averaged over the batch: {"loss", "recon", "kl"} (recon = -log p(u|z); kl the plain KL, the
        loss uses it thresholded per latent unit when ``kl_threshold`` is set)."""
        x = self._standardise(u)
        h = self.encoder(x)
        c = self.config
        if c.kind == "categorical":
            logits = h.view(-1, c.n_groups, c.n_classes)
            q = F.softmax(logits, dim=-1)
            z = gumbel_softmax_sample(F.log_softmax(logits, -1), c.tau, generator).view(-1, self.latent_size)
            kl_units = kl_categorical_uniform(q)  # (m, G): one unit per group
        elif c.kind == "normal":
            mu, logvar = h.chunk(2, dim=-1)
            logvar = logvar.clamp(-10, 10)
            where = generator.device if generator is not None else mu.device
            eps = torch.randn(mu.shape, generator=generator, dtype=mu.dtype, device=where).to(mu.device)
            z = mu + eps * torch.exp(0.5 * logvar)
            kl_units = kl_normal_standard(mu[..., None], logvar[..., None])  # (m, D): one unit per dimension
        else:
            z = h
            kl_units = torch.zeros(x.shape[0], 1, dtype=x.dtype, device=x.device)
        x_hat = self.decoder(z)
        recon = 0.5 * (x - x_hat).pow(2).sum(-1) + 0.5 * x.shape[-1] * math.log(2 * math.pi)
        kl = kl_units.sum(-1)
        threshold = c.kl_threshold if c.kind != "ae" else None
        loss = recon.mean() + beta * thresholded_kl(kl_units, threshold)
        return {"loss": loss, "recon": recon.mean(), "kl": kl.mean()}

    def get_config_dict(self) -> dict:
        return self.config.to_dict()


def build_model(config: LatteMixConfig) -> TokenLatentModel:
    """A fresh model with ``config``'s settings (initialised from torch's global RNG: seed first)."""
    return TokenLatentModel(**config.to_dict())


def load_model(folder: str | Path) -> TokenLatentModel:
    """Load a model saved with :meth:`TokenLatentModel.save`, in eval mode."""
    return TokenLatentModel.load(folder)
