"""Export a truncated fine-tuned model (``layerwise tmft``), which is already a sentence-transformers folder.

A TMFT run saves ``TruncatedModel`` folders with built-in modules only (:mod:`layerwise.methods.truncated.model`);
the export writes the same model again with the provenance and model card every export carries.
"""

from __future__ import annotations

import os
from pathlib import Path

from layerwise.export.card import ExportCard, render_card
from layerwise.export.sentence_transformers import (
    check_destination,
    pooling_modules,
    save_st_folder,
    transformer_options,
)

__all__ = ["export_tmft"]


def export_tmft(source: str | os.PathLike, folder: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Write the ``TruncatedModel`` saved in ``source`` to ``folder`` (loads with ``trust_remote_code=False``)."""
    from layerwise.encoders.registry import weights_sha256
    from layerwise.methods.truncated.model import TruncatedModel

    check_destination(folder, overwrite)
    model = TruncatedModel.load(source)  # a clear error when ``source`` holds no TMFT model
    top = int(model.encoder.config.num_hidden_layers)
    card = ExportCard(
        kind="tmft", source={"name": str(source), "weights_sha256": weights_sha256(source)},
        layers=list(model.layers), pooling="mean",
        description=f"A truncated fine-tuned encoder (TMFT): {top} layers, mean pooling of hidden state(s) "
                    f"{', '.join(map(str, model.layers))}.", extra={"max_length": model.max_length})
    modules, all_states = pooling_modules(model.encoder.config, pooling="mean", layers=model.layers)
    provenance = {"method": "tmft", **card.provenance(), "layers": list(model.layers), "max_length": model.max_length}
    return save_st_folder(model.encoder, model.tokenizer, folder, modules,
                          transformer_kwargs=transformer_options(model.max_length, all_hidden_states=all_states),
                          provenance=provenance, readme=render_card(card, Path(folder).name), overwrite=overwrite)
