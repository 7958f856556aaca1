"""Export to the tools a pipeline already uses: sentence-transformers folders.

This package holds what every export shares and imports no method: the folder writer
(:mod:`.sentence_transformers`), the model card (:mod:`.card`), the trained-pooler module class
(:mod:`.st_modules`), the registry of exporters (:mod:`.kinds`) and the rule that no folder's code ever runs
(:mod:`.no_code`: :func:`load_sentence_transformer` loads any export with ``trust_remote_code=False``, the layerwise
module classes resolved to the installed package; :func:`layerwise.encoders.folder_code.check_no_code` refuses a folder that names code). Each method exports its own models from
``methods/<m>/export.py`` and registers its exporter here:

- ``layer_subset``: :func:`layerwise.methods.lc.export.export_layer_subset`, a BERT-LC layer subset (or LC + MLP)
  of a pretrained encoder, cut above its highest hidden state used; built-in modules only.
- ``trained_pooler``: :func:`layerwise.methods.layer_attention.export.export_trained_pooler`, a ``layerwise train``
  pooler (a module class of the installed layerwise package; no remote code).
- ``multitask``: :func:`layerwise.methods.multitask.export.export_multitask`, a multi-task run's encoder + mean
  pooling.
- ``tmft``: :func:`layerwise.methods.truncated.export.export_tmft`, a truncated fine-tuned model.
- ``lattemix``: :func:`layerwise.methods.lattemix.export.export_lattemix`, a Latte-Mix token model's mixture vectors
  (a module class of the installed layerwise package; no remote code).
"""

from layerwise.export.kinds import (
    FALLBACK_KIND,
    Exporter,
    export_kinds,
    export_trained,
    exporters,
    register_exporter,
    source_kind,
)
from layerwise.export.no_code import load_sentence_transformer
from layerwise.export.sentence_transformers import EXPORT_MARKER, write_sentence_transformer

__all__ = ["EXPORT_MARKER", "FALLBACK_KIND", "Exporter", "export_kinds", "export_trained", "exporters",
           "load_sentence_transformer", "register_exporter", "source_kind", "write_sentence_transformer"]
