"""Export to the tools a pipeline already uses: sentence-transformers folders, one file per kind of export.

- :func:`export_layer_subset` (``layer_subset.py``): a BERT-LC layer subset, or LC + MLP, of a pretrained encoder,
  cut above its highest hidden state used; built-in modules only.
- :func:`export_trained_pooler` (``trained_pooler.py``): a ``layerwise train`` pooler (a layerwise module class).
- :func:`export_multitask` (``multitask.py``): a multi-task run's encoder + mean pooling.
- :func:`export_tmft` (``tmft.py``): a truncated fine-tuned model, with provenance and card.
- :func:`export_lattemix` (``lattemix.py``): a Latte-Mix token model's mixture vectors (a layerwise module class).
- :func:`load_sentence_transformer` (``no_code.py``): load any export without ``trust_remote_code`` (no folder code
  ever runs; the layerwise module classes resolve to the installed package).
"""

from layerwise.export.kinds import EXPORT_KINDS, export_trained, source_kind
from layerwise.export.lattemix import export_lattemix
from layerwise.export.layer_subset import SubsetExport, export_layer_subset, subset_from_results
from layerwise.export.multitask import export_multitask
from layerwise.export.no_code import check_no_code, load_sentence_transformer
from layerwise.export.sentence_transformers import EXPORT_MARKER, write_sentence_transformer
from layerwise.export.tmft import export_tmft
from layerwise.export.trained_pooler import export_trained_pooler

__all__ = ["EXPORT_KINDS", "EXPORT_MARKER", "SubsetExport", "check_no_code", "export_lattemix", "export_layer_subset", "export_multitask", "export_tmft",
           "export_trained", "export_trained_pooler", "load_sentence_transformer", "source_kind", "subset_from_results",
           "write_sentence_transformer"]
