"""Text -> vector functions for ``layerwise encode`` and the MTEB wrapper.

:class:`PoolingSpec` names any layerwise pooling (a layer subset's mean or CLS, LC + MLP through the pooler head, or
the model's pooler output); :class:`SpecEmbedder` computes it from a :class:`~layerwise.LayerEncoder`'s layer stack,
so every chunk goes through the layer cache (a second run reads what the first one encoded).
:class:`FolderEmbedder` runs an exported sentence-transformers folder. Both give ``output_key()``, every setting that
changes their vectors, which keys the resume journal of ``layerwise encode`` (:mod:`layerwise.encode.journal`).
:class:`EmbedderConfig` is a small JSON-able description of either, from which a process (a Ray actor, say) builds
its own embedder.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

import numpy as np

from layerwise.encoders.batching import cut_texts
from layerwise.encoders.layer_encoder import LayerEncoder
from layerwise.encoders.model_files import folder_sha256
from layerwise.layers import LayerStack, validate_layers
from layerwise.pooling import head_pooling, layer_mean, pooler_output

__all__ = ["SPEC_KINDS", "EmbedderConfig", "FolderEmbedder", "PoolingSpec", "SpecEmbedder"]

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
            raise ValueError("head=True feeds a layer average through the pooler head; with kind='pooler' pass "
                             "head=False")
        if not self.layers:
            raise ValueError("a pooling needs at least one hidden state; pass e.g. layers=(0, 6)")

    def to_dict(self) -> dict:
        return {**asdict(self), "layers": list(self.layers)}

    @classmethod
    def from_dict(cls, d: dict) -> "PoolingSpec":
        return cls(**{**d, "layers": tuple(d["layers"])})

    def __call__(self, stack: LayerStack, head=None) -> np.ndarray:
        """(n, d) float32 vectors; ``head`` = (W, b) from :meth:`LayerEncoder.pooler_head` when ``self.head``."""
        if self.kind == "pooler":
            return pooler_output(stack)
        if self.head:
            return head_pooling(stack, self.layers, head[0], head[1], kind=self.kind)
        return layer_mean(stack, self.layers, kind=self.kind).astype(np.float32)


class SpecEmbedder:
    """``encode(texts) -> (n, d)``: ``spec`` over ``encoder``'s layer stack (cached when the encoder caches)."""

    def __init__(self, encoder, spec: PoolingSpec):
        self.encoder, self.spec = encoder, spec
        validate_layers(spec.layers, encoder.n_states)  # a bad layer fails now, not after the first chunk
        if spec.kind == "pooler" and not encoder.identity.has_pooler:
            raise ValueError(f"{encoder.identity.name} has no pooler output; use kind='mean' or 'cls'")
        self.head = encoder.pooler_head()[:2] if spec.head else None
        self.dim = int(encoder.identity.hidden_size)

    def describe(self) -> dict:
        return {"model": self.encoder.identity.to_dict(), "pooling": self.spec.to_dict(),
                "max_length": self.encoder.max_length}

    def output_key(self) -> dict:
        """Every setting that changes the vectors: the encoder's cache key (weights, tokenizer and config sha256, max
        length, dtype) and the pooling. Batch size and device are left out, as in the layer cache's key."""
        return {"kind": "spec", "encoder": self.encoder.cache_key(), "pooling": self.spec.to_dict()}

    def encode(self, texts: list[str]) -> np.ndarray:
        return self.spec(self.encoder.encode(list(texts)), self.head)


class FolderEmbedder:
    """``encode(texts) -> (n, d)`` with a sentence-transformers folder (an export); no layer cache."""

    def __init__(self, folder: str | os.PathLike, *, batch_size: int = 64, device: str = "cpu"):
        from layerwise.export.no_code import load_sentence_transformer

        self.folder = str(folder)
        # never the folder's code: layerwise module classes resolve to the installed package, anything else is refused
        self.model = load_sentence_transformer(self.folder, device=device)
        self.batch_size = int(batch_size)
        dim = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dim = int(dim())

    def describe(self) -> dict:
        return {"folder": self.folder}

    def output_key(self) -> dict:
        """What the vectors depend on: every file of the folder (:func:`~layerwise.encoders.model_files.folder_sha256`)."""
        return {"kind": "folder", "folder_sha256": folder_sha256(self.folder), "dim": self.dim}

    def encode(self, texts: list[str]) -> np.ndarray:
        texts = cut_texts(texts, self.model.max_seq_length or 512)  # bounded memory for any text's size
        return self.model.encode(texts, batch_size=self.batch_size, convert_to_numpy=True,
                                 show_progress_bar=False).astype(np.float32)


@dataclass(frozen=True)
class EmbedderConfig:
    """What to build an embedder from: a model pooled by ``pooling``, or an exported ``folder`` (one of the two).

    Small and picklable, so a worker process builds its own embedder from it (:meth:`build`).
    """

    model: str | None = None  # built-in name or Hugging Face folder (with ``pooling``); None with ``folder``
    pooling: PoolingSpec = PoolingSpec()  # the pooling of ``model``'s layer stack (unused with ``folder``)
    folder: str | None = None  # an exported sentence-transformers folder (its own pooling)
    max_length: int = 256  # tokens per text (``model`` only; a folder records its own)
    batch_size: int = 64  # texts per forward pass
    device: str = "cpu"
    dtype: str = "float32"  # ``model`` only
    cache_dir: str | bool | None = False  # ``model``'s layer cache: False none, None the default, or a folder
    backend: str = "torch"  # ``model`` only: torch, onnx or onnx-int8 (LayerEncoder's backend)

    def __post_init__(self) -> None:
        if (self.model is None) == (self.folder is None):
            raise ValueError(f"an EmbedderConfig needs a model or a folder, not both or neither (model={self.model!r}, "
                             f"folder={self.folder!r})")

    def to_dict(self) -> dict:
        return {**asdict(self), "pooling": self.pooling.to_dict()}

    @classmethod
    def from_dict(cls, d: dict) -> "EmbedderConfig":
        return cls(**{**d, "pooling": PoolingSpec.from_dict(d["pooling"])})

    def build(self, *, show_progress: bool = False):
        """A :class:`SpecEmbedder` (``model``) or a :class:`FolderEmbedder` (``folder``)."""
        if self.folder is not None:
            return FolderEmbedder(self.folder, batch_size=self.batch_size, device=self.device)

        encoder = LayerEncoder(self.model, max_length=self.max_length, batch_size=self.batch_size, device=self.device,
                               dtype=self.dtype, cache_dir=self.cache_dir, show_progress=show_progress,
                               backend=self.backend)
        return SpecEmbedder(encoder, self.pooling)
