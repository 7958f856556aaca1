"""An encoder plus a trainable layer pooler: texts -> (B, d) sentence embeddings, with gradients."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from layerwise.encoders.layer_encoder import pool_hidden_states
from layerwise.encoders.registry import resolve_model
from layerwise.modules.poolers import LayerPooler, PoolerConfig, build_pooler, load_pooler

__all__ = ["SentenceModel"]


class SentenceModel(nn.Module):
    """Hugging Face encoder (all hidden states) -> per-layer CLS and masked-mean vectors -> :class:`LayerPooler`."""

    def __init__(self, encoder, tokenizer, pooler: LayerPooler, *, max_length: int = 32):
        super().__init__()
        self.encoder = encoder
        self.tokenizer = tokenizer
        self.pooler = pooler
        self.max_length = int(max_length)

    @classmethod
    def from_pretrained(cls, model: str, *, pooler: str = "layer_attention", max_length: int = 32) -> "SentenceModel":
        """A built-in name or local folder, and a fresh pooler of kind ``pooler``."""
        from transformers import AutoModel, AutoTokenizer

        path = resolve_model(model).path
        tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
        enc = AutoModel.from_pretrained(path, local_files_only=True)
        cfg = PoolerConfig(kind=pooler, hidden_size=enc.config.hidden_size, n_states=enc.config.num_hidden_layers + 1)
        return cls(enc, tok, build_pooler(cfg), max_length=max_length)

    def layer_vectors(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-layer CLS and masked-mean vectors, each (B, K, d)."""
        device = next(self.encoder.parameters()).device
        enc = self.tokenizer(list(texts), padding=True, truncation=True, max_length=self.max_length,
                             return_tensors="pt").to(device)
        out = self.encoder(**enc, output_hidden_states=True)
        return pool_hidden_states(out.hidden_states, enc["attention_mask"])

    def forward(self, texts: list[str]) -> torch.Tensor:
        return self.pooler(*self.layer_vectors(texts))

    @torch.inference_mode()
    def encode(self, texts: list[str], *, batch_size: int = 128, use_pooler: bool = True) -> np.ndarray:
        """Embeddings (n, d) in eval mode (no dropout), length-sorted batches, original order kept.

        ``use_pooler=False`` returns the last layer's token mean instead ("train with the pooler, search without").
        """
        was = self.training
        self.eval()
        order = np.argsort([-len(t) for t in texts], kind="stable")
        out = np.empty((len(texts), self.pooler.config.hidden_size), dtype=np.float32)
        for s in range(0, len(texts), batch_size):
            idx = order[s : s + batch_size]
            batch = [texts[i] for i in idx]
            emb = self(batch) if use_pooler else self.layer_vectors(batch)[1][:, -1]
            out[idx] = emb.float().cpu().numpy()
        self.train(was)
        return out

    def save(self, folder: str | Path) -> Path:
        """``encoder/`` (Hugging Face folder with tokenizer) and ``pooler/`` (config + safetensors)."""
        folder = Path(folder)
        self.encoder.save_pretrained(folder / "encoder")
        self.tokenizer.save_pretrained(folder / "encoder")
        self.pooler.save(folder / "pooler")
        (folder / "max_length.txt").write_text(f"{self.max_length}\n")
        return folder

    @classmethod
    def load(cls, folder: str | Path) -> "SentenceModel":
        from transformers import AutoModel, AutoTokenizer

        folder = Path(folder)
        if not (folder / "encoder").is_dir() or not (folder / "pooler").is_dir():
            raise FileNotFoundError(f"{folder} holds no saved SentenceModel (encoder/ and pooler/)")
        enc = AutoModel.from_pretrained(folder / "encoder", local_files_only=True)
        tok = AutoTokenizer.from_pretrained(folder / "encoder", local_files_only=True)
        max_length = int((folder / "max_length.txt").read_text()) if (folder / "max_length.txt").is_file() else 32
        return cls(enc, tok, load_pooler(folder / "pooler"), max_length=max_length)
