"""Which export a source folder calls for, told from the files in it."""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["EXPORT_KINDS", "export_trained", "source_kind"]

EXPORT_KINDS = ("layer_subset", "trained_pooler", "multitask", "tmft", "lattemix")


def source_kind(source: str | os.PathLike) -> str:
    """``trained_pooler`` (a ``layerwise train`` SentenceModel folder), ``multitask`` (a ``layerwise multitask``
    folder), ``tmft`` (a ``layerwise tmft`` folder), ``lattemix`` (a saved Latte-Mix token model), else
    ``layer_subset`` (a built-in name or Hugging Face folder)."""
    from layerwise.encoders.trainable import is_sentence_model_folder
    from layerwise.export.sentence_transformers import EXPORT_MARKER
    from layerwise.methods.multitask.model import is_multitask_folder

    path = Path(source).expanduser()
    if not path.is_dir():
        return "layer_subset"
    if is_sentence_model_folder(path):
        return "trained_pooler"
    if is_multitask_folder(path):
        return "multitask"
    if _is_lattemix_folder(path):
        return "lattemix"
    marker = path / EXPORT_MARKER
    if marker.is_file():
        try:
            method = json.loads(marker.read_text()).get("method")
        except (OSError, ValueError, AttributeError):
            method = None
        if method == "tmft":
            return "tmft"
    return "layer_subset"


def _is_lattemix_folder(path: Path) -> bool:
    """A saved TokenLatentModel: a module folder whose config.json holds exactly the LatteMixConfig settings."""
    from dataclasses import fields

    from layerwise.methods.lattemix.config import LatteMixConfig
    from layerwise.modules.base import CONFIG_NAME, is_module_folder

    if not is_module_folder(path):
        return False
    try:
        config = json.loads((path / CONFIG_NAME).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and set(config) == {f.name for f in fields(LatteMixConfig)}


def export_trained(source: str | os.PathLike, folder: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Export a trained folder (any kind but ``layer_subset``, which needs a :class:`SubsetExport`)."""
    from layerwise.export.multitask import export_multitask
    from layerwise.export.tmft import export_tmft
    from layerwise.export.trained_pooler import export_trained_pooler

    kind = source_kind(source)
    writers = {"trained_pooler": export_trained_pooler, "multitask": export_multitask, "tmft": export_tmft}
    if kind == "lattemix":
        raise ValueError(f"{source} is a Latte-Mix token model: export it with export_lattemix (CLI: --encoder and "
                         "--layer name the encoder and hidden state it was trained on)")
    if kind not in writers:
        raise ValueError(f"{source} is not a folder written by `layerwise train`, `layerwise multitask` or "
                         "`layerwise tmft`; for a pretrained model give the layers (--layers or --from)")
    return writers[kind](source, folder, overwrite=overwrite)
