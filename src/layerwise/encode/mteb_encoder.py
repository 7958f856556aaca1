"""An encoder for MTEB 2.x (``pip install 'layerwise[mteb]'``): ``mteb.evaluate(LayerwiseMTEBEncoder(...), tasks)``.

It follows MTEB's ``EncoderProtocol`` (``mteb.models.models_protocols``): ``encode(inputs, *, task_metadata,
hf_split, hf_subset, prompt_type=None, **kwargs)`` takes a ``DataLoader`` of batches (dicts whose ``"text"`` holds a
list of strings) and returns an array (n, d); ``similarity`` (n1, n2) and ``similarity_pairwise`` (n,) are cosine;
``mteb_model_meta`` describes the model. Any embedder with ``encode(texts)`` and ``dim`` works, so any layerwise
pooling (:class:`~layerwise.encode.embedders.SpecEmbedder`, which goes through the layer cache) or an exported folder
(:class:`~layerwise.encode.embedders.FolderEmbedder`). Prompts and instructions are ignored: these encoders use none.
MTEB itself is imported only by :attr:`LayerwiseMTEBEncoder.mteb_model_meta`.
"""

from __future__ import annotations

import numpy as np
import torch

from layerwise.encode.embedders import SpecEmbedder
from layerwise.encoders.layer_encoder import LayerEncoder

__all__ = ["LayerwiseMTEBEncoder"]


def _tensor(x) -> torch.Tensor:
    t = x if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x))
    return t.float().reshape(1, -1) if t.ndim == 1 else t.float()


class LayerwiseMTEBEncoder:
    """MTEB's encoder protocol over a layerwise embedder (``encode(texts) -> (n, d)``, ``dim``)."""

    def __init__(self, embedder, *, name: str | None = None, revision: str | None = None):
        self.embedder = embedder
        info = embedder.describe() if hasattr(embedder, "describe") else {}
        model = info.get("model", {})
        self.name = name or _default_name(info)
        self.revision = revision or (model.get("weights_sha256") or "")[:12] or None
        self.max_tokens = info.get("max_length")

    @classmethod
    def from_spec(cls, model: str, spec, **encoder_options) -> "LayerwiseMTEBEncoder":
        """A :class:`~layerwise.LayerEncoder` for ``model`` (``encoder_options``: its keywords) pooled by ``spec``."""
        return cls(SpecEmbedder(LayerEncoder(model, **encoder_options), spec))

    def encode(self, inputs, *, task_metadata=None, hf_split: str | None = None, hf_subset: str | None = None,
               prompt_type=None, **kwargs) -> np.ndarray:
        """(n, d) float32 vectors of every text in ``inputs`` (batches with a ``"text"`` list), in order."""
        texts: list[str] = []
        for batch in inputs:
            if not isinstance(batch, dict) or "text" not in batch:
                raise ValueError(f"MTEB batches must be dicts with a 'text' list; got {type(batch).__name__} "
                                 f"{sorted(batch) if isinstance(batch, dict) else ''}: this encoder embeds text only")
            texts.extend(batch["text"])
        if not texts:
            return np.zeros((0, self.embedder.dim), dtype=np.float32)
        return np.asarray(self.embedder.encode(texts), dtype=np.float32)

    def similarity(self, embeddings1, embeddings2) -> torch.Tensor:
        """Cosine similarity of every pair: (n1, d), (n2, d) -> (n1, n2)."""
        a = torch.nn.functional.normalize(_tensor(embeddings1), dim=-1)
        b = torch.nn.functional.normalize(_tensor(embeddings2), dim=-1)
        return a @ b.T

    def similarity_pairwise(self, embeddings1, embeddings2) -> torch.Tensor:
        """Cosine similarity of corresponding rows: (n, d), (n, d) -> (n,)."""
        return torch.nn.functional.cosine_similarity(_tensor(embeddings1), _tensor(embeddings2), dim=-1)

    @property
    def mteb_model_meta(self):
        """An ``mteb.ModelMeta`` with the name, revision (weights hash), dimension and cosine similarity."""
        try:
            from mteb.models.model_meta import ModelMeta, ScoringFunction
        except ImportError:
            raise ImportError("MTEB is not installed: pip install 'layerwise[mteb]' (or pip install mteb)") from None
        return ModelMeta.create_empty(overwrites={
            "name": self.name, "revision": self.revision, "embed_dim": self.embedder.dim,
            "max_tokens": self.max_tokens, "similarity_fn_name": ScoringFunction.COSINE, "framework": ["PyTorch"],
        })


def _default_name(info: dict) -> str:
    """``layerwise/<model>-<kind>-<layers>`` (MTEB wants "organisation/name")."""
    from pathlib import Path

    if "folder" in info:
        return f"layerwise/{Path(info['folder']).name}"
    model = Path(info.get("model", {}).get("name", "model")).name
    spec = info.get("pooling", {})
    layers = "-".join(str(x) for x in spec.get("layers", []))
    head = "-mlp" if spec.get("head") else ""
    return f"layerwise/{model}-{spec.get('kind', 'mean')}-{layers}{head}"
