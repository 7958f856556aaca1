"""An encoder plus a trainable layer pooler: texts -> (B, d) sentence embeddings, with gradients.

Saved as one folder: ``encoder/`` (Hugging Face model and tokenizer), ``pooler/`` (the
:class:`~layerwise.modules.base.Module` format) and ``sentence_model.json`` (format version, max_length). The folder
is written into a temporary sibling and renamed into place, so a killed save keeps the previous one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import numpy as np
import torch
from torch import nn

from layerwise.encoders.batching import cut_texts, length_sorted_batches
from layerwise.encoders.hidden_states import pool_hidden_states
from layerwise.encoders.model_files import check_model_folder
from layerwise.encoders.registry import resolve_model
from layerwise.files import atomic_folder
from layerwise.finite import check_finite_weights
from layerwise.modules.poolers import LayerPooler, PoolerConfig, build_pooler, load_pooler

__all__ = ["SENTENCE_MODEL_FILE", "UNPOOLED", "SentenceModel", "is_sentence_model_folder"]

UNPOOLED = ("mean", "cls")  # the last-layer vector searched once the pooler is removed (``encode(use_pooler=False)``)

SENTENCE_MODEL_FILE = "sentence_model.json"
FORMAT_VERSION = 1


def is_sentence_model_folder(folder: str | Path) -> bool:
    """True when ``folder`` holds a saved :class:`SentenceModel`."""
    folder = Path(folder)
    return (folder / SENTENCE_MODEL_FILE).is_file() and (folder / "encoder").is_dir() and (folder / "pooler").is_dir()


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
        """A built-in name or local folder, and a fresh pooler of kind ``pooler`` (seed torch first)."""
        from transformers import AutoModel, AutoTokenizer

        path = resolve_model(model).path
        tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
        enc = AutoModel.from_pretrained(path, local_files_only=True)
        check_finite_weights(enc, str(model))
        cfg = PoolerConfig(kind=pooler, hidden_size=enc.config.hidden_size, n_states=enc.config.num_hidden_layers + 1)
        return cls(enc, tok, build_pooler(cfg), max_length=max_length)

    @property
    def device(self) -> torch.device:
        return next(self.encoder.parameters()).device

    def encoding_vectors(self, encoding) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-layer CLS and masked-mean vectors, each (B, K, d), of a tokenised batch (moved to the model's device)."""
        encoding = {k: v.to(self.device) for k, v in encoding.items() if k != "special_tokens_mask"}
        out = self.encoder(**encoding, output_hidden_states=True)
        return pool_hidden_states(out.hidden_states, encoding["attention_mask"])

    def layer_vectors(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-layer CLS and masked-mean vectors of one batch of texts, each (B, K, d)."""
        enc = self.tokenizer(cut_texts(texts, self.max_length), padding=True, truncation=True, max_length=self.max_length,
                             return_tensors="pt")
        return self.encoding_vectors(enc)

    def forward(self, texts: list[str]) -> torch.Tensor:
        return self.pooler(*self.layer_vectors(texts))

    def batched_layer_vectors(self, texts: list[str], *, batch_size: int = 128
                              ) -> Iterator[tuple[np.ndarray, torch.Tensor, torch.Tensor]]:
        """Yield ``(idx, cls, mean)`` over batches sorted by token length; cls, mean (b, K, d) belong to texts[idx]."""
        for idx, enc in length_sorted_batches(self.tokenizer, texts, batch_size=batch_size, max_length=self.max_length):
            yield (idx, *self.encoding_vectors(enc))

    @torch.inference_mode()
    def encode(self, texts: list[str], *, batch_size: int = 128, use_pooler: bool = True,
               unpooled: str = "mean") -> np.ndarray:
        """Embeddings (n, d) in eval mode (no dropout), length-sorted batches, original order kept.

        ``use_pooler=False`` returns a last-layer vector instead ("train with the pooler, search without"):
        ``unpooled="mean"`` its token mean, ``"cls"`` its first token (the paper's "[CLS]_Last").
        """
        if unpooled not in UNPOOLED:
            raise ValueError(f"unpooled={unpooled!r}: use one of {', '.join(UNPOOLED)}")
        last = 1 if unpooled == "cls" else 0  # which of (mean, cls) the last-layer vector is taken from
        was = self.training
        self.eval()
        out = np.empty((len(texts), self.pooler.config.hidden_size), dtype=np.float32)
        try:
            for idx, cls, mean in self.batched_layer_vectors(list(texts), batch_size=batch_size):
                emb = self.pooler(cls, mean) if use_pooler else (mean, cls)[last][:, -1]
                out[idx] = emb.float().cpu().numpy()
        finally:
            self.train(was)
        return out

    def save(self, folder: str | Path) -> Path:
        """Write ``encoder/``, ``pooler/`` and ``sentence_model.json`` into ``folder`` atomically.

        An existing ``folder`` is replaced only when it holds a saved SentenceModel (or nothing).
        """
        folder = Path(folder)
        with atomic_folder(folder, replaceable=is_sentence_model_folder) as tmp:
            self.encoder.save_pretrained(tmp / "encoder")
            self.tokenizer.save_pretrained(tmp / "encoder")
            self.pooler.save(tmp / "pooler")
            info = {"format_version": FORMAT_VERSION, "max_length": self.max_length}
            (tmp / SENTENCE_MODEL_FILE).write_text(json.dumps(info, indent=2) + "\n")
        return folder

    @staticmethod
    def read_info(folder: str | Path) -> dict:
        """The settings in ``sentence_model.json``; a clear error for a folder that holds no SentenceModel."""
        folder = Path(folder)
        if not is_sentence_model_folder(folder):
            raise FileNotFoundError(
                f"{folder} holds no saved SentenceModel (encoder/, pooler/ and {SENTENCE_MODEL_FILE}); "
                "pass a folder written by SentenceModel.save or `layerwise train` (OUTPUT/best or OUTPUT/last)"
            )
        info = json.loads((folder / SENTENCE_MODEL_FILE).read_text())
        if not isinstance(info, dict) or info.get("format_version") != FORMAT_VERSION or "max_length" not in info:
            raise ValueError(f"{folder / SENTENCE_MODEL_FILE} is not SentenceModel format {FORMAT_VERSION}: {info}")
        return info

    @classmethod
    def load(cls, folder: str | Path) -> "SentenceModel":
        from transformers import AutoModel, AutoTokenizer

        folder = Path(folder)
        info = cls.read_info(folder)
        check_model_folder(folder / "encoder")  # sizes against the weights before anything is allocated
        enc = AutoModel.from_pretrained(folder / "encoder", local_files_only=True)
        check_finite_weights(enc, str(folder / "encoder"))
        tok = AutoTokenizer.from_pretrained(folder / "encoder", local_files_only=True)
        return cls(enc, tok, load_pooler(folder / "pooler"), max_length=info["max_length"])

    def load_weights(self, folder: str | Path) -> "SentenceModel":
        """Copy the encoder and pooler weights saved in ``folder`` into this model (same architecture)."""
        saved = type(self).load(folder)
        self.encoder.load_state_dict(saved.encoder.state_dict())
        self.pooler.load_state_dict(saved.pooler.state_dict())
        return self
