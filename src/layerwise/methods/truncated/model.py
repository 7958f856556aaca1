"""The TMFT sentence model: an encoder cut above its highest hidden state used, mean-pooled, with gradients.

``layers`` = (l,) is TMFT proper: mean pooling of hidden state l of the encoder truncated at l. A longer subset D is
TMFT on a layer combination (the paper's future work): the encoder is truncated at max(D) and the sentence vector is
the mean over D of each hidden state's masked token mean, as in BERT-LC.

Saved as a sentence-transformers folder with built-in modules only (:mod:`layerwise.export`): Transformer + mean
Pooling for one hidden state; Transformer (all hidden states) + WeightedLayerPooling with 0/1 weights + mean Pooling for
a subset, which is the same arithmetic (a mean over tokens of a mean over layers is the mean over layers of the token
means, under one attention mask).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from torch import nn

from layerwise.encoders.batching import cut_texts, length_sorted_batches
from layerwise.encoders.hidden_states import pool_hidden_states
from layerwise.encoders.model_files import check_model_folder
from layerwise.encoders.registry import resolve_model
from layerwise.encoders.truncate import count_parameters, truncate_encoder
from layerwise.export.sentence_transformers import EXPORT_MARKER, write_sentence_transformer
from layerwise.finite import check_finite_weights
from layerwise.layers import validate_layers

__all__ = ["TruncatedModel"]


class TruncatedModel(nn.Module):
    """texts -> (B, d): mean over ``layers`` of the masked token means of a truncated encoder's hidden states."""

    def __init__(self, encoder, tokenizer, layers: tuple[int, ...], *, max_length: int = 128):
        super().__init__()
        top = int(encoder.config.num_hidden_layers)
        self.layers = validate_layers(layers, top + 1)
        if max(self.layers) != top:
            raise ValueError(f"the encoder keeps hidden states 0..{top} but the highest layer used is "
                             f"{max(self.layers)}: truncate it at {max(self.layers)} first")
        self.encoder = encoder
        self.tokenizer = tokenizer
        self.max_length = int(max_length)

    @classmethod
    def from_pretrained(cls, model: str, layers, *, max_length: int = 128) -> "TruncatedModel":
        """A built-in name or local folder, truncated above the highest hidden state in ``layers``."""
        from transformers import AutoModel, AutoTokenizer

        path = resolve_model(model).path
        tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
        full = AutoModel.from_pretrained(path, local_files_only=True)
        check_finite_weights(full, str(model))
        layers = validate_layers(layers, full.config.num_hidden_layers + 1)
        return cls(truncate_encoder(full, max(layers), copy_model=False), tok, layers, max_length=max_length)

    @property
    def device(self) -> torch.device:
        return next(self.encoder.parameters()).device

    def n_parameters(self) -> int:
        """Parameters of the truncated encoder, pooler head excluded (as the paper counts them)."""
        return count_parameters(self.encoder)

    def state_means(self, encoding) -> torch.Tensor:
        """(B, l + 1, d) masked token means of every hidden state 0..l of a tokenised batch."""
        encoding = {k: v.to(self.device) for k, v in encoding.items() if k != "special_tokens_mask"}
        out = self.encoder(**encoding, output_hidden_states=True)
        states = out.hidden_states
        if not states:  # an encoder cut at 0 layers: transformers (5.x) returns no hidden states, only the output
            states = (out.last_hidden_state,)
        return pool_hidden_states(states, encoding["attention_mask"])[1]

    def embed(self, encoding) -> torch.Tensor:
        """(B, d) sentence vectors of a tokenised batch."""
        return self.state_means(encoding)[:, list(self.layers)].mean(dim=1)

    def tokenize(self, texts: list[str]):
        return self.tokenizer(cut_texts(texts, self.max_length), padding=True, truncation=True,
                              max_length=self.max_length, return_tensors="pt")

    def forward(self, texts: list[str]) -> torch.Tensor:
        return self.embed(self.tokenize(texts))

    @torch.inference_mode()
    def encode(self, texts: list[str], *, batch_size: int = 128) -> np.ndarray:
        """(n, d) float32 vectors in eval mode, batches sorted by token length, original order kept."""
        was = self.training
        self.eval()
        out = np.empty((len(texts), int(self.encoder.config.hidden_size)), dtype=np.float32)
        try:
            for idx, enc in length_sorted_batches(self.tokenizer, list(texts), batch_size=batch_size,
                                                  max_length=self.max_length):
                out[idx] = self.embed(enc).float().cpu().numpy()
        finally:
            self.train(was)
        return out

    def save(self, folder: str | Path, *, provenance: dict | None = None, overwrite: bool = True) -> Path:
        """A sentence-transformers folder (see the module docstring); ``overwrite`` replaces only an export."""
        info = {"method": "tmft", "layers": list(self.layers), "max_length": self.max_length, **(provenance or {})}
        return write_sentence_transformer(self.encoder, self.tokenizer, folder, layers=self.layers,
                                          max_seq_length=self.max_length, provenance=info, overwrite=overwrite)

    @classmethod
    def load(cls, folder: str | Path) -> "TruncatedModel":
        from transformers import AutoModel, AutoTokenizer

        folder = Path(folder)
        marker = folder / EXPORT_MARKER
        if not marker.is_file():
            raise FileNotFoundError(f"{folder} holds no TMFT model ({EXPORT_MARKER} missing): pass a folder written "
                                    "by `layerwise tmft` or TruncatedModel.save")
        info = json.loads(marker.read_text())
        if not isinstance(info, dict) or not isinstance(info.get("layers"), list) or "max_length" not in info:
            raise ValueError(f"{marker} does not describe a TMFT model (layers and max_length); pass a folder written "
                             "by `layerwise tmft` or TruncatedModel.save")
        check_model_folder(folder)  # sizes against the weights before anything is allocated
        enc = AutoModel.from_pretrained(folder, local_files_only=True)
        check_finite_weights(enc, str(folder))
        tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        return cls(enc, tok, tuple(info["layers"]), max_length=info["max_length"])

    def load_weights(self, folder: str | Path) -> "TruncatedModel":
        self.encoder.load_state_dict(type(self).load(folder).encoder.state_dict())
        return self
