"""Export a trained pooler (``layerwise train``: a ``SentenceModel`` folder) as a sentence-transformers folder.

    Transformer (every hidden state, ``output_hidden_states``) -> LayerPoolerModule (the trained LayerPooler)

The pooler is a class of the installed layerwise package (:class:`~layerwise.export.st_modules.LayerPoolerModule`),
named in ``modules.json`` by import path; the folder holds no ``.py`` file and no ``auto_map``, and loads without
``trust_remote_code`` through :func:`layerwise.load_sentence_transformer` (see :mod:`layerwise.export.no_code`).
A source folder that names code is refused.
"""

from __future__ import annotations

import os
from pathlib import Path

from layerwise.encoders.folder_code import check_no_code
from layerwise.encoders.model_files import weights_sha256
from layerwise.encoders.trainable import SentenceModel, is_sentence_model_folder
from layerwise.export.card import ExportCard, render_card
from layerwise.export.kinds import Exporter, register_exporter
from layerwise.export.sentence_transformers import check_destination, save_st_folder, transformer_options

__all__ = ["export_trained_pooler", "write_trained_pooler"]


def export_trained_pooler(source: str | os.PathLike, folder: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Write the ``SentenceModel`` saved in ``source`` (encoder + trained pooler) to ``folder``."""
    check_destination(folder, overwrite)
    check_no_code(source, name="source")
    model = SentenceModel.load(source)  # a clear error when ``source`` holds no SentenceModel
    source_info = {"name": str(source), "weights_sha256": weights_sha256(Path(source) / "encoder")}
    return write_trained_pooler(model, folder, source=source_info, overwrite=overwrite)


def write_trained_pooler(model: SentenceModel, folder: str | os.PathLike, *, source: dict, extra: dict | None = None,
                         overwrite: bool = False) -> Path:
    """Write ``model`` (a ``SentenceModel`` in memory) to ``folder``; ``source`` names its base model in the card."""
    # sentence-transformers is optional (the st extra): its module class is imported when an export is written
    from layerwise.export.st_modules import LayerPoolerModule

    cfg = model.pooler.config
    card = ExportCard(
        kind="trained_pooler", source=source,
        description=f"A trained `{cfg.kind}` pooler over all {cfg.n_states} hidden states of the encoder "
                    f"(layerwise `LayerPooler`{', with its MLP head' if cfg.mlp else ''}).",
        layerwise_module=True, extra={"pooler": cfg.to_dict(), "max_length": model.max_length, **(extra or {})})
    return save_st_folder(model.encoder, model.tokenizer, folder, [LayerPoolerModule.from_pooler(model.pooler)],
                          transformer_kwargs=transformer_options(model.max_length, all_hidden_states=True),
                          provenance=card.provenance(), readme=render_card(card, Path(folder).name), overwrite=overwrite)


EXPORTER = register_exporter(Exporter(kind="trained_pooler", detects=is_sentence_model_folder,
                                      export=export_trained_pooler))
