"""Export a Latte-Mix token model (saved by ``layerwise lattemix --save-dir``) with its encoder, for cosine similarity.

    Transformer (the encoder cut at the model's hidden state) -> LatteMixModule (mean token posterior, flattened)

A saved token model does not record its encoder or hidden state, so both are arguments; the encoder's width must
match the model's ``input_dim``. Cosine of the exported vectors is Latte-Mix's ``cosine`` similarity for the
categorical and ae kinds; a normal (Gaussian) model compares mixtures of Gaussians and has no vector to export.
The module is :class:`~layerwise.methods.lattemix.st_module.LatteMixModule`, a class of the installed ``layerwise``
package that ``modules.json`` names by import path (the folder holds no ``.py`` file); it loads without
``trust_remote_code`` through :func:`layerwise.load_sentence_transformer` (any export) or
:func:`layerwise.load_sentence_transformer`.
"""

from __future__ import annotations

import json
import os
from dataclasses import fields
from pathlib import Path

from layerwise.encoders.layer_encoder import LayerEncoder
from layerwise.encoders.truncate import truncate_encoder
from layerwise.export.card import ExportCard, render_card
from layerwise.export.kinds import Exporter, register_exporter
from layerwise.export.sentence_transformers import check_destination, save_st_folder, transformer_options
from layerwise.layers import validate_layers
from layerwise.methods.lattemix.config import OPTIONAL_FIELDS, LatteMixConfig
from layerwise.methods.lattemix.models import load_model
from layerwise.modules.base import CONFIG_NAME, is_module_folder

__all__ = ["export_lattemix", "is_lattemix_folder"]


def export_lattemix(source: str | os.PathLike, folder: str | os.PathLike, *, model: str, layer: int,
                    max_length: int = 256, include_special: bool = False, overwrite: bool = False) -> Path:
    """Write the Latte-Mix token model saved in ``source`` over hidden state ``layer`` of ``model`` to ``folder``."""
    # sentence-transformers is optional (the st extra): its module class is imported when an export is written
    from layerwise.methods.lattemix.st_module import LatteMixModule

    check_destination(folder, overwrite)
    latent = load_model(source)
    cfg = latent.config
    encoder = LayerEncoder(model, max_length=max_length, cache_dir=False, show_progress=False)
    (layer,) = validate_layers([layer], encoder.n_states)
    if cfg.input_dim != encoder.identity.hidden_size:
        raise ValueError(f"the Latte-Mix model in {source} reads {cfg.input_dim}-d tokens but {model} has "
                         f"{encoder.identity.hidden_size}-d hidden states: give the encoder it was trained on")
    # the ids the tokenizer adds around a text ([CLS]/[SEP], <s>/</s>): what ``special_tokens_mask`` flags ([UNK] is not)
    added = sorted(set(encoder.tokenizer("")["input_ids"]))
    module = LatteMixModule(cfg.to_dict(), added, include_special)
    module.latent.load_state_dict(latent.state_dict())
    cut = truncate_encoder(encoder.model, layer, copy_model=False)
    card = ExportCard(
        kind="lattemix", source={**encoder.identity.to_dict(), "latent_model": str(source)}, layers=[layer],
        pooling="mixture", layerwise_module=True,
        description=f"Latte-Mix ({cfg.kind}): the mean posterior of the tokens of hidden state {layer} of "
                    f"{encoder.identity.name}; compare with cosine similarity.",
        extra={"max_length": encoder.max_length, "include_special": include_special, "latte_mix": cfg.to_dict()})
    return save_st_folder(cut, encoder.tokenizer, folder, [module],
                          transformer_kwargs=transformer_options(encoder.max_length), provenance=card.provenance(),
                          readme=render_card(card, Path(folder).name), overwrite=overwrite)


def is_lattemix_folder(path: str | os.PathLike) -> bool:
    """A saved TokenLatentModel: a module folder whose config.json holds the LatteMixConfig settings (those in
    ``OPTIONAL_FIELDS`` only when set) and nothing else."""
    path = Path(path)
    if not is_module_folder(path):
        return False
    try:
        config = json.loads((path / CONFIG_NAME).read_text())
    except (OSError, ValueError):
        return False
    every = {f.name for f in fields(LatteMixConfig)}  # the paper's options are left out when off
    return isinstance(config, dict) and every - set(OPTIONAL_FIELDS) <= set(config) <= every


EXPORTER = register_exporter(Exporter(
    kind="lattemix", detects=is_lattemix_folder, export=export_lattemix,
    from_folder="a Latte-Mix token model, which does not record its encoder: export it with export_lattemix, "
                "naming the encoder (model=) and hidden state (layer=) it was trained on"))
