"""Every hidden state of a forward pass, pooled: written once for the torch encoder, the trainable models and the
ONNX graph (which exports exactly this pooling)."""

from __future__ import annotations

import torch

__all__ = ["all_hidden_states", "pool_hidden_states"]


def pool_hidden_states(hidden_states, attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """First-token and attention-masked mean vectors of every hidden state.

    ``hidden_states``: K tensors of shape (B, T, d) (``output_hidden_states``); ``attention_mask``: (B, T).
    Returns ``cls, mean``, each (B, K, d). One masked matrix product per state, so no (B, K, T, d) copy is made;
    differentiable, so training code pools exactly as the encoder does.
    """
    mask = attention_mask.to(hidden_states[0].dtype)
    weights = (mask / mask.sum(dim=1, keepdim=True).clamp(min=1.0)).unsqueeze(1)  # (B, 1, T)
    mean = torch.stack([torch.bmm(weights, h).squeeze(1) for h in hidden_states], dim=1)
    cls = torch.stack([h[:, 0, :] for h in hidden_states], dim=1)
    return cls, mean


def all_hidden_states(out) -> tuple:
    """Every hidden state of a forward pass. A model cut to 0 layers (a layer subset of the embedding output alone,
    as exported) returns no ``hidden_states`` in transformers 5; its one hidden state is ``last_hidden_state``."""
    return out.hidden_states or (out.last_hidden_state,)
