"""Export a truncated fine-tuned model (``layerwise tmft``), which is already a sentence-transformers folder.

A TMFT run saves ``TruncatedModel`` folders with built-in modules only (:mod:`layerwise.methods.truncated.model`);
the export writes the same model again with the provenance and model card every export carries.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from layerwise.encoders.model_files import weights_sha256
from layerwise.export.card import ExportCard, render_card
from layerwise.export.kinds import Exporter, register_exporter
from layerwise.export.sentence_transformers import (
    EXPORT_MARKER,
    check_destination,
    pooling_modules,
    save_st_folder,
    transformer_options,
)
from layerwise.methods.truncated.model import TruncatedModel

__all__ = ["export_tmft", "is_tmft_folder", "write_truncated"]


def export_tmft(source: str | os.PathLike, folder: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Write the ``TruncatedModel`` saved in ``source`` to ``folder`` (loads with ``trust_remote_code=False``)."""
    check_destination(folder, overwrite)
    model = TruncatedModel.load(source)  # a clear error when ``source`` holds no TMFT model
    return write_truncated(model, folder, source={"name": str(source), "weights_sha256": weights_sha256(source)},
                           overwrite=overwrite)


def write_truncated(model, folder: str | os.PathLike, *, source: dict, scores: dict[str, str] | None = None,
                    extra: dict | None = None, overwrite: bool = False) -> Path:
    """Write ``model`` (a ``TruncatedModel``) to ``folder``: Transformer + mean Pooling (built-in modules), with
    provenance and model card; ``source`` names the model it was trained from, ``extra`` (JSON) joins the
    provenance."""
    check_destination(folder, overwrite)
    top = int(model.encoder.config.num_hidden_layers)
    card = ExportCard(
        kind="tmft", source=source, layers=list(model.layers), pooling="mean", scores=dict(scores or {}),
        description=f"A truncated fine-tuned encoder (TMFT): {top} layers, mean pooling of hidden state(s) "
                    f"{', '.join(map(str, model.layers))}.", extra={"max_length": model.max_length, **(extra or {})})
    modules, all_states = pooling_modules(model.encoder.config, pooling="mean", layers=model.layers)
    provenance = {"method": "tmft", **card.provenance(), "layers": list(model.layers), "max_length": model.max_length}
    return save_st_folder(model.encoder, model.tokenizer, folder, modules,
                          transformer_kwargs=transformer_options(model.max_length, all_hidden_states=all_states),
                          provenance=provenance, readme=render_card(card, Path(folder).name), overwrite=overwrite)


def is_tmft_folder(path: str | os.PathLike) -> bool:
    """A folder written by ``layerwise tmft`` (or exported from one): its export marker names the method ``tmft``."""
    marker = Path(path) / EXPORT_MARKER
    if not marker.is_file():
        return False
    try:
        return json.loads(marker.read_text()).get("method") == "tmft"
    except (OSError, ValueError, AttributeError):
        return False


EXPORTER = register_exporter(Exporter(kind="tmft", detects=is_tmft_folder, export=export_tmft))
