"""Export the encoder of a multi-task run (``layerwise multitask``) with mean pooling, built-in modules only.

``MultitaskNetwork.sentence_embeddings`` is the masked token mean of the encoder's last hidden state: the folder is
``Transformer -> Pooling(mean)`` over the saved ``encoder/`` and loads with ``trust_remote_code=False``. The task
heads (and per-task layer mixes) are not part of a sentence embedding and are left out.
"""

from __future__ import annotations

import os
from pathlib import Path

from layerwise.encoders.model_files import weights_sha256
from layerwise.export.card import ExportCard, render_card
from layerwise.export.kinds import Exporter, register_exporter
from layerwise.export.sentence_transformers import (
    check_destination,
    pooling_modules,
    save_st_folder,
    transformer_options,
)
from layerwise.methods.multitask.model import MultitaskNetwork, is_multitask_folder

__all__ = ["export_multitask", "write_multitask_folder"]


def export_multitask(source: str | os.PathLike, folder: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Write the encoder saved in the multi-task folder ``source`` (``best/`` or ``last/``) + mean pooling."""
    check_destination(folder, overwrite)
    model = MultitaskNetwork.load(source)  # a clear error when ``source`` holds no MultitaskNetwork
    return write_multitask_folder(model, folder, overwrite=overwrite, source={
        "name": str(source), "weights_sha256": weights_sha256(Path(source) / "encoder")})


def write_multitask_folder(model, folder: str | os.PathLike, *, source: dict, overwrite: bool = False,
                           name: str | None = None) -> Path:
    """Write ``model``'s encoder (a MultitaskNetwork) + mean pooling as a sentence-transformers folder; ``source``:
    the card's description of where it came from; ``name``: the model card's title (None: the folder's name)."""
    card = ExportCard(
        kind="multitask", source=source,
        description="The encoder of a multi-task run, mean-pooled over its last hidden state (task heads left out).",
        layers=[int(model.encoder.config.num_hidden_layers)], pooling="mean",
        extra={"max_length": model.max_length, "tasks": sorted(model.heads), "task_layers": model.layers})
    modules, _ = pooling_modules(model.encoder.config, pooling="mean")
    return save_st_folder(model.encoder, model.tokenizer, folder, modules,
                          transformer_kwargs=transformer_options(model.max_length), provenance=card.provenance(),
                          readme=render_card(card, name or Path(folder).name), overwrite=overwrite)


EXPORTER = register_exporter(Exporter(kind="multitask", detects=is_multitask_folder, export=export_multitask))
