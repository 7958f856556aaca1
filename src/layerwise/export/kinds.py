"""Which export a source folder calls for, told from the files in it."""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["EXPORT_KINDS", "export_trained", "source_kind"]

EXPORT_KINDS = ("layer_subset", "trained_pooler", "multitask", "tmft")


def source_kind(source: str | os.PathLike) -> str:
    """``trained_pooler`` (a ``layerwise train`` SentenceModel folder), ``multitask`` (a ``layerwise multitask``
    folder), ``tmft`` (a ``layerwise tmft`` folder), else ``layer_subset`` (a built-in name or Hugging Face folder)."""
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
    marker = path / EXPORT_MARKER
    if marker.is_file():
        try:
            method = json.loads(marker.read_text()).get("method")
        except (OSError, ValueError, AttributeError):
            method = None
        if method == "tmft":
            return "tmft"
    return "layer_subset"


def export_trained(source: str | os.PathLike, folder: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Export a trained folder (any kind but ``layer_subset``, which needs a :class:`SubsetExport`)."""
    from layerwise.export.multitask import export_multitask
    from layerwise.export.tmft import export_tmft
    from layerwise.export.trained_pooler import export_trained_pooler

    kind = source_kind(source)
    writers = {"trained_pooler": export_trained_pooler, "multitask": export_multitask, "tmft": export_tmft}
    if kind not in writers:
        raise ValueError(f"{source} is not a folder written by `layerwise train`, `layerwise multitask` or "
                         "`layerwise tmft`; for a pretrained model give the layers (--layers or --from)")
    return writers[kind](source, folder, overwrite=overwrite)
