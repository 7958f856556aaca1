"""Trainable poolers over every hidden state (Oh et al., COLING 2022) and the baselines trained the same way.

Input to every pooler: the per-layer CLS vectors ``cls`` and token-mean vectors ``mean`` of one batch,
both of shape (B, K, d) with K = L + 1 hidden states (0 = embedding output). Output: (B, d).

Layer-wise attention (``kind="layer_attention"``), with h_i^c / h_i^a the CLS / mean vector of hidden state i:

    a_ij  = softmax_j( (W_q h_i^c) . (W_k h_j^a) / sqrt(d) )      query from state i, keys from every state j
    h_i^l = sum_j a_ij W_v h_j^a
    h^L   = mean_i h_i^l
    h     = MLP([h^c_L ; h^L])                                     MLP: Linear(2d -> d) + tanh

The attention weights form a (K x K) matrix per sentence: each state's CLS queries all states, as in
self-attention; the 1/sqrt(d) scaling keeps the softmax from saturating at initialisation. The paper's own form
(Eq. 1-5: one weight per hidden state, a ratio over the states) is ``kind="layer_attention_ratio"``:

    s_i   = (W_q h_i^c) . (W_k h_i^a) / sqrt(d)                   state i's CLS queries its own mean only
    a_i   = exp(s_i) / sum_j exp(s_j)                             one weight per state: (B, K)
    h^L   = sum_i a_i W_v h_i^a
    h     = MLP([h^c_L ; h^L])

(the 1/sqrt(d) kept for the same reason). Ablations: ``attention_cls_only`` (queries
and keys from CLS vectors, values from CLS), ``attention_mean_only`` (queries, keys and values from mean
vectors), ``attention_no_last_cls`` (h = MLP(h^L), no concatenation). Baselines: ``last_cls``,
``last_mean``, ``first0_last_mean`` (mean of states {0, L}: the embedding output counts as "first", as
``first0_last`` in ``layerwise.pooling``), ``scalar_mix`` (:class:`~layerwise.modules.scalar_mix.ScalarMix` over the
mean vectors, gamma * sum_l softmax(w)_l h_l^a), each followed by the same kind of MLP (Linear(d -> d) + tanh) so that
every pooler has a trained head. The plain concatenations of the paper's pooling ablation (its Table 2), with the
attention's head (Linear(2d -> d) + tanh): ``concat_last_cls_mean`` = MLP([h^c_L ; h^a_L]) and
``concat_last_cls_layer_mean`` = MLP([h^c_L ; mean_i h_i^a]) (the attention replaced by equal weights). Saved and loaded with the :class:`~layerwise.modules.base.Module` format.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

from layerwise.modules.base import Module
from layerwise.modules.scalar_mix import ScalarMix

__all__ = ["POOLER_KINDS", "PoolerConfig", "LayerPooler", "build_pooler", "load_pooler", "state_weights"]

POOLER_KINDS = (
    "layer_attention",
    "attention_cls_only",
    "attention_mean_only",
    "attention_no_last_cls",
    "last_cls",
    "last_mean",
    "first0_last_mean",
    "scalar_mix",
    "layer_attention_ratio",
    "concat_last_cls_mean",
    "concat_last_cls_layer_mean",
)
_CONCAT = ("layer_attention", "attention_cls_only", "attention_mean_only", "layer_attention_ratio",
           "concat_last_cls_mean", "concat_last_cls_layer_mean")  # kinds whose head reads [CLS_L ; .] (2d)


@dataclass(frozen=True)
class PoolerConfig:
    kind: str = "layer_attention"  # one of POOLER_KINDS
    hidden_size: int = 384  # d of the encoder; also the output size
    n_states: int = 7  # K = L + 1 hidden states fed to the pooler
    mlp: bool = True  # trained head after pooling (SimCSE's MLP: dense + tanh); False = identity

    def __post_init__(self) -> None:
        if self.kind not in POOLER_KINDS:
            raise ValueError(f"unknown pooler kind {self.kind!r}; valid: {', '.join(POOLER_KINDS)}")
        if self.hidden_size < 1 or self.n_states < 2:
            raise ValueError(
                f"hidden_size must be positive and n_states at least 2 (embedding output + 1 layer), got "
                f"hidden_size={self.hidden_size}, n_states={self.n_states}"
            )

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "PoolerConfig":
        return cls(**data)


class LayerPooler(Module):
    """One module for every kind in :data:`POOLER_KINDS`; ``forward(cls, mean)`` with (B, K, d) inputs -> (B, d).

    Built from keyword settings (those of :class:`PoolerConfig`, validated by it); ``self.config`` holds them.
    """

    config_keys = ("kind", "hidden_size", "n_states", "mlp")

    def __init__(self, kind: str = PoolerConfig.kind, hidden_size: int = PoolerConfig.hidden_size,
                 n_states: int = PoolerConfig.n_states, mlp: bool = PoolerConfig.mlp):
        super().__init__()
        config = self.config = PoolerConfig(kind=kind, hidden_size=hidden_size, n_states=n_states, mlp=mlp)
        d = config.hidden_size
        if kind.startswith(("attention", "layer_attention")):
            self.w_q = nn.Linear(d, d, bias=False)
            self.w_k = nn.Linear(d, d, bias=False)
            self.w_v = nn.Linear(d, d, bias=False)
        if kind == "scalar_mix":
            self.mix = ScalarMix(config.n_states)
        concat = kind in _CONCAT
        d_in = 2 * d if concat else d
        self.head = nn.Sequential(nn.Linear(d_in, d), nn.Tanh()) if config.mlp else None
        if not config.mlp and concat:
            raise ValueError(f"{kind} concatenates [CLS_L ; h^L] (2d) and needs mlp=True to return d")

    def get_config_dict(self) -> dict:
        return asdict(self.config)

    def attention(self, cls: torch.Tensor, mean: torch.Tensor) -> torch.Tensor:
        """The attention weights: (B, K, K) a_ij of the attention kinds, (B, K) a_i of ``layer_attention_ratio``."""
        kind = self.config.kind
        if kind == "layer_attention_ratio":
            q, k = self.w_q(cls), self.w_k(mean)  # (B, K, d)
            return torch.softmax((q * k).sum(-1) / math.sqrt(q.shape[-1]), dim=-1)
        q_src = mean if kind == "attention_mean_only" else cls
        k_src = cls if kind == "attention_cls_only" else mean
        q, k = self.w_q(q_src), self.w_k(k_src)  # (B, K, d)
        return torch.softmax(q @ k.transpose(1, 2) / math.sqrt(q.shape[-1]), dim=-1)

    def forward(self, cls: torch.Tensor, mean: torch.Tensor) -> torch.Tensor:
        return self.forward_with_attention(cls, mean)[0]

    def forward_with_attention(self, cls: torch.Tensor, mean: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(output (B, d), the attention weights this pass used: (B, K, K) or (B, K) as :meth:`attention`, None for
        the kinds without attention). ``forward`` is this pass with the weights dropped."""
        if cls.ndim != 3 or cls.shape != mean.shape:
            raise ValueError(f"cls and mean must both have shape (B, K, d), got {tuple(cls.shape)} and {tuple(mean.shape)}")
        if cls.shape[1] != self.config.n_states or cls.shape[2] != self.config.hidden_size:
            raise ValueError(
                f"pooler built for K={self.config.n_states}, d={self.config.hidden_size}; got K={cls.shape[1]}, "
                f"d={cls.shape[2]}"
            )
        kind, att = self.config.kind, None
        if kind == "last_cls":
            h = cls[:, -1]
        elif kind == "last_mean":
            h = mean[:, -1]
        elif kind == "first0_last_mean":
            h = 0.5 * (mean[:, 0] + mean[:, -1])
        elif kind == "scalar_mix":
            h = self.mix(mean)
        elif kind == "concat_last_cls_mean":
            h = torch.cat([cls[:, -1], mean[:, -1]], dim=-1)
        elif kind == "concat_last_cls_layer_mean":
            h = torch.cat([cls[:, -1], mean.mean(dim=1)], dim=-1)
        elif kind == "layer_attention_ratio":
            att = self.attention(cls, mean)  # (B, K)
            h = torch.cat([cls[:, -1], (att.unsqueeze(-1) * self.w_v(mean)).sum(dim=1)], dim=-1)
        else:
            v_src = cls if kind == "attention_cls_only" else mean
            att = self.attention(cls, mean)  # (B, K, K)
            h_l = (att @ self.w_v(v_src)).mean(dim=1)  # (B, d): mean_i sum_j a_ij W_v h_j
            h = h_l if kind == "attention_no_last_cls" else torch.cat([cls[:, -1], h_l], dim=-1)
        return (self.head(h) if self.head is not None else h), att


def state_weights(attention: torch.Tensor) -> torch.Tensor:
    """The weight each hidden state's values get in the pooled vector, (B, K), summing to 1 per sentence: ``a_i``
    of ``layer_attention_ratio`` ((B, K) as it is), and for the K x K kinds the mean over queries ``mean_i a_ij``
    (h^L = mean_i sum_j a_ij W_v h_j = sum_j (mean_i a_ij) W_v h_j)."""
    return attention if attention.ndim == 2 else attention.mean(dim=1)


def build_pooler(config: PoolerConfig) -> LayerPooler:
    """A fresh pooler with ``config``'s settings (initialised from torch's global RNG: seed first)."""
    return LayerPooler(**asdict(config))


def load_pooler(folder: str | Path) -> LayerPooler:
    """A pooler saved with :meth:`LayerPooler.save`, in eval mode."""
    return LayerPooler.load(folder)
