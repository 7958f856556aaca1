"""Text -> vector functions for ``layerwise encode`` and the MTEB wrapper.

:class:`PoolingSpec` names any layerwise pooling (a layer subset's mean or CLS, LC + MLP through the pooler head, or
the model's pooler output); :class:`SpecEmbedder` computes it from a :class:`~layerwise.LayerEncoder`'s layer stack,
so every chunk goes through the layer cache (a second run reads what the first one encoded).
:class:`FolderEmbedder` runs an exported sentence-transformers folder.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

import numpy as np

from layerwise.layers import LayerStack

__all__ = ["SPEC_KINDS", "FolderEmbedder", "PoolingSpec", "SpecEmbedder"]

SPEC_KINDS = ("mean", "cls", "pooler")


@dataclass(frozen=True)
class PoolingSpec:
    """A pooling of the layer stack. Hidden state 0 is the embedding output, L the last layer."""

    kind: str = "mean"  # mean (masked token mean), cls (first token) or pooler (the model's pooler output)
    layers: tuple[int, ...] = (-1,)  # hidden states averaged (negative counts from the end; unused for pooler)
    head: bool = False  # LC + MLP: the average fed through the checkpoint's pooler head, tanh(W x + b)

    def __post_init__(self) -> None:
        if self.kind not in SPEC_KINDS:
            raise ValueError(f"unknown pooling {self.kind!r}; valid: {', '.join(SPEC_KINDS)}")
        if self.head and self.kind == "pooler":
            raise ValueError("--head feeds a layer average through the pooler head; with --pooling pooler leave it out")
        if not self.layers:
            raise ValueError("a pooling needs at least one hidden state; pass e.g. --layers 0,6")

    def to_dict(self) -> dict:
        return {**asdict(self), "layers": list(self.layers)}

    @classmethod
    def from_dict(cls, d: dict) -> "PoolingSpec":
        return cls(**{**d, "layers": tuple(d["layers"])})

    def __call__(self, stack: LayerStack, head=None) -> np.ndarray:
        """(n, d) float32 vectors; ``head`` = (W, b) from :meth:`LayerEncoder.pooler_head` when ``self.head``."""
        from layerwise.pooling import head_pooling, layer_mean, pooler_output

        if self.kind == "pooler":
            return pooler_output(stack)
        if self.head:
            return head_pooling(stack, self.layers, head[0], head[1], kind=self.kind)
        return layer_mean(stack, self.layers, kind=self.kind).astype(np.float32)


class SpecEmbedder:
    """``encode(texts) -> (n, d)``: ``spec`` over ``encoder``'s layer stack (cached when the encoder caches)."""

    def __init__(self, encoder, spec: PoolingSpec):
        from layerwise.layers import validate_layers

        self.encoder, self.spec = encoder, spec
        validate_layers(spec.layers, encoder.n_states)  # a bad layer fails now, not after the first chunk
        if spec.kind == "pooler" and not encoder.identity.has_pooler:
            raise ValueError(f"{encoder.identity.name} has no pooler output; use --pooling mean or cls")
        self.head = encoder.pooler_head()[:2] if spec.head else None
        self.dim = int(encoder.identity.hidden_size)

    def describe(self) -> dict:
        return {"model": self.encoder.identity.to_dict(), "pooling": self.spec.to_dict(),
                "max_length": self.encoder.max_length}

    def encode(self, texts: list[str]) -> np.ndarray:
        return self.spec(self.encoder.encode(list(texts)), self.head)


class FolderEmbedder:
    """``encode(texts) -> (n, d)`` with a sentence-transformers folder (an export); not cached."""

    def __init__(self, folder: str | os.PathLike, *, batch_size: int = 64, device: str = "cpu",
                 trust_remote_code: bool = False):
        from sentence_transformers import SentenceTransformer

        self.folder = str(folder)
        self.model = SentenceTransformer(self.folder, device=device, trust_remote_code=trust_remote_code)
        self.batch_size = int(batch_size)
        dim = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dim = int(dim())

    def describe(self) -> dict:
        return {"folder": self.folder}

    def encode(self, texts: list[str]) -> np.ndarray:
        return self.model.encode(list(texts), batch_size=self.batch_size, convert_to_numpy=True,
                                 show_progress_bar=False).astype(np.float32)
