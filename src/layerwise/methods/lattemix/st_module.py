"""Latte-Mix as a sentence-transformers module: a class of the installed ``layerwise`` package.

A saved folder's ``modules.json`` names :class:`LatteMixModule` by its import path
(``layerwise.methods.lattemix.st_module.LatteMixModule``); the folder holds its settings (``config.json``) and
weights (``model.safetensors``), never a ``.py`` file, so loading it runs no code from the folder.

How sentence-transformers 6 resolves that name: a type outside ``sentence_transformers.*`` is imported only with
``trust_remote_code=True`` (``sentence_transformers.util.misc.import_module_class``; without it the load is refused
with a ``ValueError``). With it, a dotted path of more than two parts is never looked up as a file of the folder
(``transformers``' dynamic loading takes ``file.Class`` only and gives up), so it imports the installed class.
Loading without the flag is :meth:`layerwise.LatteMix.load`, or :func:`layerwise.load_sentence_transformer` for a
``SentenceTransformer`` (the installed class, never a file of the folder).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from sentence_transformers.base.modules.module import Module as STModule

from layerwise.methods.lattemix.models import TokenLatentModel

__all__ = ["MODULE_TYPE", "LatteMixModule", "module_path"]

MODULE_TYPE = "layerwise.methods.lattemix.st_module.LatteMixModule"  # its name in modules.json


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


def module_path(folder: str | os.PathLike) -> str:
    """The sub-folder of ``folder`` holding its :class:`LatteMixModule` (from ``modules.json``), or a ValueError."""
    folder = Path(folder)
    try:
        entries = json.loads((folder / "modules.json").read_text())
        types = [(e["type"], e["path"]) for e in entries]
    except (OSError, ValueError, TypeError, KeyError) as err:
        raise ValueError(f"{folder} is not a sentence-transformers folder (modules.json unreadable: {err})") from None
    if len(types) != 2 or types[1][0] != MODULE_TYPE or not types[0][0].endswith(".Transformer"):
        raise ValueError(f"{folder} is not a saved LatteMix model: its modules.json lists {[t for t, _ in types]}, "
                         f"expected a Transformer and {MODULE_TYPE}")
    return types[1][1]
