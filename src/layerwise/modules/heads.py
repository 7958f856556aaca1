"""Task heads on sentence embeddings (multi-task fine-tuning), each a :class:`~layerwise.modules.base.Module`.

u, v are sentence embeddings of shape (B, d). The heads and what they compute:

    ClassificationHead      logits = W drop(u) + b                                  (B, C)
    PairHead                out = W drop(f(u, v)) + b, f one of PAIR_FEATURES:     (B,) or (B, C)
                              "concat"    [u; v]                   (2d)
                              "abs_diff"  [u; v; |u - v|]          (3d)
                              "cos"       [u; v; cos(u, v)]        (2d + 1)
                            with ``shared`` hidden layers (:class:`SharedHidden`) between f and the linear
    CosineHead              cos(drop(u), drop(v))                                   (B,)
    SharedHidden            h = drop(relu(W_k ... drop(relu(W_1 x)))), n_layers Linear + ReLU + dropout
    PrototypeHead           s_p = cos(u, e_p) for P fixed prototype embeddings e_p with labels y_p;
                            logits = W vec(s * onehot(y)) + b, i.e. each similarity enters in its label's column
                            (B, P * C) -> (B, C)
    TransformerClassificationHead  n_layers ``nn.TransformerEncoderLayer`` on token states (B, T, d) with the
                            padding mask, masked mean, dropout, linear -> (B, C)
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from layerwise.modules.base import Module

__all__ = [
    "PAIR_FEATURES",
    "ClassificationHead",
    "CosineHead",
    "PairHead",
    "PrototypeHead",
    "SharedHidden",
    "TransformerClassificationHead",
    "pair_features",
    "pair_features_dim",
]

PAIR_FEATURES = ("concat", "abs_diff", "cos")


def pair_features_dim(features: str, hidden_size: int) -> int:
    """Width of ``pair_features(u, v, features)`` for embeddings of size ``hidden_size``."""
    if features not in PAIR_FEATURES:
        raise ValueError(f"unknown pair features {features!r}; valid: {', '.join(PAIR_FEATURES)}")
    return {"concat": 2 * hidden_size, "abs_diff": 3 * hidden_size, "cos": 2 * hidden_size + 1}[features]


def pair_features(u: torch.Tensor, v: torch.Tensor, features: str) -> torch.Tensor:
    """(B, d), (B, d) -> (B, pair_features_dim(features, d)): [u; v], [u; v; |u - v|] or [u; v; cos(u, v)]."""
    if u.shape != v.shape or u.ndim != 2:
        raise ValueError(f"expected two (B, d) embeddings, got {tuple(u.shape)} and {tuple(v.shape)}")
    if features == "concat":
        return torch.cat([u, v], dim=-1)
    if features == "abs_diff":
        return torch.cat([u, v, (u - v).abs()], dim=-1)
    if features == "cos":
        return torch.cat([u, v, F.cosine_similarity(u, v, dim=-1).unsqueeze(-1)], dim=-1)
    raise ValueError(f"unknown pair features {features!r}; valid: {', '.join(PAIR_FEATURES)}")


def _check_dropout(dropout: float) -> float:
    if not 0.0 <= float(dropout) < 1.0:
        raise ValueError(f"dropout={dropout!r} is invalid: use a probability in [0, 1)")
    return float(dropout)


class ClassificationHead(Module):
    """``forward(u)``: (B, hidden_size) -> (B, n_classes) logits (dropout, then one linear layer)."""

    config_keys = ("hidden_size", "n_classes", "dropout")

    def __init__(self, hidden_size: int, n_classes: int, dropout: float = 0.1):
        super().__init__()
        self.hidden_size, self.n_classes, self.dropout = int(hidden_size), int(n_classes), _check_dropout(dropout)
        self.drop = nn.Dropout(self.dropout)
        self.linear = nn.Linear(self.hidden_size, self.n_classes)

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        return self.linear(self.drop(u))


class SharedHidden(Module):
    """``forward(x)``: (B, in_features) -> (B, hidden_size) through ``n_layers`` x (Linear, ReLU, dropout)."""

    config_keys = ("in_features", "hidden_size", "n_layers", "dropout")

    def __init__(self, in_features: int, hidden_size: int, n_layers: int = 2, dropout: float = 0.1):
        super().__init__()
        if int(n_layers) < 1:
            raise ValueError(f"n_layers={n_layers!r} is invalid: SharedHidden needs at least one layer")
        self.in_features, self.hidden_size = int(in_features), int(hidden_size)
        self.n_layers, self.dropout = int(n_layers), _check_dropout(dropout)
        layers: list[nn.Module] = []
        for i in range(self.n_layers):
            layers += [nn.Linear(self.in_features if i == 0 else self.hidden_size, self.hidden_size), nn.ReLU(),
                       nn.Dropout(self.dropout)]
        self.layers = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class PairHead(Module):
    """``forward(u, v, shared=None)``: two (B, hidden_size) embeddings -> (B,) one score (a logit or a regression),
    or (B, n_outputs) logits when ``n_outputs > 1`` (a pair classification with more than two classes).

    Without ``shared``: dropout on the pair features, then the linear. With a :class:`SharedHidden` (built with
    ``in_features = pair_features_dim(features, hidden_size)``): the features go through it, then the linear, whose
    input is then ``shared_size`` wide.
    """

    config_keys = ("hidden_size", "features", "dropout", "shared_size", "n_outputs")

    def __init__(self, hidden_size: int, features: str = "concat", dropout: float = 0.1, shared_size: int = 0,
                 n_outputs: int = 1):
        super().__init__()
        if int(n_outputs) < 1:
            raise ValueError(f"n_outputs={n_outputs!r} is invalid: use 1 (one score) or the number of classes")
        self.hidden_size, self.features = int(hidden_size), features
        self.dropout, self.shared_size = _check_dropout(dropout), int(shared_size)
        self.n_outputs = int(n_outputs)
        width = self.shared_size or pair_features_dim(features, self.hidden_size)
        self.drop = nn.Dropout(self.dropout)
        self.linear = nn.Linear(width, self.n_outputs)

    def forward(self, u: torch.Tensor, v: torch.Tensor, shared: SharedHidden | None = None) -> torch.Tensor:
        x = pair_features(u, v, self.features)
        if (shared is None) != (self.shared_size == 0):
            raise ValueError(f"PairHead built with shared_size={self.shared_size} got shared={shared is not None}")
        x = shared(x) if shared is not None else self.drop(x)
        out = self.linear(x)
        return out.squeeze(-1) if self.n_outputs == 1 else out


class CosineHead(Module):
    """``forward(u, v)``: cos(drop(u), drop(v)) of shape (B,), in [-1, 1]; no weights."""

    config_keys = ("dropout",)

    def __init__(self, dropout: float = 0.1):
        super().__init__()
        self.dropout = _check_dropout(dropout)
        self.drop = nn.Dropout(self.dropout)

    def forward(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        if u.shape != v.shape or u.ndim != 2:
            raise ValueError(f"expected two (B, d) embeddings, got {tuple(u.shape)} and {tuple(v.shape)}")
        return F.cosine_similarity(self.drop(u), self.drop(v), dim=-1)


class PrototypeHead(Module):
    """``forward(u)``: (B, d) -> (B, n_classes) from cosine similarities to P fixed, labelled prototype embeddings.

    ``prototypes`` (P, d) and ``prototype_labels`` (P,) are buffers (saved with the weights, never trained); set
    them with :meth:`set_prototypes` before training (computed once with the encoder).
    """

    config_keys = ("hidden_size", "n_prototypes", "n_classes", "dropout")

    def __init__(self, hidden_size: int, n_prototypes: int, n_classes: int, dropout: float = 0.1):
        super().__init__()
        if int(n_prototypes) < 1:
            raise ValueError(f"n_prototypes={n_prototypes!r} is invalid: use at least one prototype")
        self.hidden_size, self.n_prototypes = int(hidden_size), int(n_prototypes)
        self.n_classes, self.dropout = int(n_classes), _check_dropout(dropout)
        self.register_buffer("prototypes", torch.zeros(self.n_prototypes, self.hidden_size))
        self.register_buffer("prototype_labels", torch.zeros(self.n_prototypes, dtype=torch.long))
        self.drop = nn.Dropout(self.dropout)
        self.linear = nn.Linear(self.n_prototypes * self.n_classes, self.n_classes)

    def set_prototypes(self, embeddings: torch.Tensor, labels: torch.Tensor) -> "PrototypeHead":
        """Store (P, d) prototype embeddings and their (P,) labels in ``0 .. n_classes - 1``."""
        labels = torch.as_tensor(labels, dtype=torch.long)
        if tuple(embeddings.shape) != (self.n_prototypes, self.hidden_size) or labels.shape != (self.n_prototypes,):
            raise ValueError(f"expected ({self.n_prototypes}, {self.hidden_size}) prototypes and "
                             f"({self.n_prototypes},) labels, got {tuple(embeddings.shape)} and {tuple(labels.shape)}")
        if labels.min() < 0 or labels.max() >= self.n_classes:
            raise ValueError(f"prototype labels must lie in [0, {self.n_classes}), got {labels.tolist()}")
        self.prototypes.copy_(embeddings.detach())
        self.prototype_labels.copy_(labels)
        return self

    def similarity_features(self, u: torch.Tensor) -> torch.Tensor:
        """(B, d) -> (B, P * C): s_p = cos(u, e_p) placed in column y_p of its prototype's row, zeros elsewhere."""
        sims = F.normalize(self.drop(u), dim=-1) @ F.normalize(self.prototypes, dim=-1).T  # (B, P)
        onehot = F.one_hot(self.prototype_labels, self.n_classes).to(sims.dtype)  # (P, C)
        return (sims.unsqueeze(-1) * onehot).flatten(1)

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        return self.linear(self.similarity_features(u))


class TransformerClassificationHead(Module):
    """``forward(tokens, mask)``: token states (B, T, d) and attention mask (B, T) -> (B, n_classes) logits.

    ``n_layers`` post-norm ``nn.TransformerEncoderLayer`` (``n_heads`` heads, feed-forward 4d, GELU, dropout), padded
    positions masked; then the masked mean over tokens, dropout and a linear layer (FREEZE_SST's larger SST head).
    """

    config_keys = ("hidden_size", "n_classes", "n_layers", "n_heads", "dropout")

    def __init__(self, hidden_size: int, n_classes: int, n_layers: int = 4, n_heads: int = 4, dropout: float = 0.1):
        super().__init__()
        if int(n_layers) < 1 or int(hidden_size) % int(n_heads):
            raise ValueError(f"n_layers={n_layers}, n_heads={n_heads} are invalid for hidden_size={hidden_size}: "
                             "use n_layers >= 1 and n_heads dividing hidden_size")
        self.hidden_size, self.n_classes = int(hidden_size), int(n_classes)
        self.n_layers, self.n_heads, self.dropout = int(n_layers), int(n_heads), _check_dropout(dropout)
        layer = nn.TransformerEncoderLayer(self.hidden_size, self.n_heads, dim_feedforward=4 * self.hidden_size,
                                           dropout=self.dropout, activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, self.n_layers, enable_nested_tensor=False)
        self.drop = nn.Dropout(self.dropout)
        self.linear = nn.Linear(self.hidden_size, self.n_classes)

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if tokens.ndim != 3 or mask.shape != tokens.shape[:2]:
            raise ValueError(f"expected tokens (B, T, d) and mask (B, T), got {tuple(tokens.shape)}, "
                             f"{tuple(mask.shape)}")
        h = self.encoder(tokens, src_key_padding_mask=mask == 0)  # (B, T, d)
        w = mask.to(h.dtype).unsqueeze(-1)
        pooled = (h * w).sum(1) / w.sum(1).clamp(min=1.0)  # (B, d)
        return self.linear(self.drop(pooled))
