"""Latte-Mix's sentence-transformers module: a saved token model's mixture vector, for exported folders.

A folder's ``modules.json`` names this class by import path; :func:`layerwise.export.no_code.load_sentence_transformer`
resolves it to the installed class with ``trust_remote_code=False`` (see :mod:`layerwise.methods.lattemix.export`). This module imports sentence-transformers
(the ``st`` extra) at its top: import it only where an export is written or loaded.
"""

from __future__ import annotations

import torch
from sentence_transformers.base.modules.module import Module as STModule

from layerwise.methods.lattemix.models import TokenLatentModel

__all__ = ["LatteMixModule"]


class LatteMixModule(STModule):
    """A trained Latte-Mix token model as a sentence-transformers module: the sentence's mixture vector.

    Reads ``features["token_embeddings"]`` (B, T, d) of an encoder cut at the model's hidden state, ``attention_mask``
    and ``input_ids`` (B, T); every kept token (not padding, and not a special token unless ``include_special``) gets
    its posterior q(z|u), and the sentence vector is their mean, flattened: (B, G * C) for a categorical model (the
    mixture p(z|m)), (B, D) for an autoencoder (the mean code). Cosine of these vectors is Latte-Mix's ``cosine``
    similarity (:func:`layerwise.methods.lattemix.similarity.pair_similarity`).
    """

    config_keys = ["latte_config", "special_ids", "include_special"]

    def __init__(self, latte_config: dict, special_ids: list[int], include_special: bool = False):
        super().__init__()
        self.latte_config, self.special_ids = dict(latte_config), [int(i) for i in special_ids]
        self.include_special = bool(include_special)
        self.latent = TokenLatentModel(**self.latte_config)
        if self.latent.config.kind == "normal":
            raise ValueError("a normal (Gaussian) Latte-Mix model compares mixtures of Gaussians, not vectors: only "
                             "categorical and ae models export as embeddings")

    def forward(self, features: dict) -> dict:
        tokens, mask = features["token_embeddings"], features["attention_mask"].bool()  # (B, T, d), (B, T)
        if not self.include_special:
            special = torch.tensor(self.special_ids, device=mask.device)
            mask = mask & ~torch.isin(features["input_ids"], special)
        counts = mask.sum(1)  # (B,)
        if bool((counts == 0).any()):
            raise ValueError("a text has no tokens left after dropping special tokens; export with include_special")
        post = self.latent.posterior(tokens[mask]).reshape(int(counts.sum()), -1)  # (m, G * C) or (m, D)
        rows = torch.repeat_interleave(torch.arange(len(counts), device=mask.device), counts)
        out = torch.zeros(len(counts), post.shape[1], dtype=post.dtype, device=post.device).index_add_(0, rows, post)
        features["sentence_embedding"] = out / counts[:, None].to(post.dtype)
        return features

    def get_embedding_dimension(self) -> int:
        return int(self.latent.latent_size)

    def save(self, output_path: str, *args, safe_serialization: bool = True, **kwargs) -> None:
        self.save_config(output_path)
        self.save_torch_weights(output_path, safe_serialization=safe_serialization)

    @classmethod
    def load(cls, model_name_or_path: str, subfolder: str = "", token=None, cache_folder=None, revision=None,
             local_files_only: bool = False, **kwargs) -> "LatteMixModule":
        hub = {"subfolder": subfolder, "token": token, "cache_folder": cache_folder, "revision": revision,
               "local_files_only": local_files_only}
        model = cls(**cls.load_config(model_name_or_path=model_name_or_path, **hub))
        return cls.load_torch_weights(model_name_or_path=model_name_or_path, model=model, **hub)
