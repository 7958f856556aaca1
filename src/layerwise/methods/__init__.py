"""The five methods, one package each: the method itself (models, training tasks, search, protocols, similarity,
config) and its exporter, never its benchmarks (those are in :mod:`layerwise.benchmarks`, which calls the methods).

- :mod:`~layerwise.methods.lc`: BERT-LC, layer combination (exact subset search, STS and transfer protocols)
- :mod:`~layerwise.methods.layer_attention`: layer-wise attention pooling with SimCSE-family objectives
- :mod:`~layerwise.methods.lattemix`: Latte-Mix, categorical VAE over frozen token vectors
- :mod:`~layerwise.methods.truncated`: truncated model fine-tuning (TMFT)
- :mod:`~layerwise.methods.multitask`: multi-task fine-tuning
- :mod:`~layerwise.methods.compress`: compression (cut, LC cut, distilled students; the fastest within a budget)

Each method's ``export`` module registers its exporter with :mod:`layerwise.export` when imported; they are all
imported here, so the registry is full as soon as ``layerwise`` (any of its modules) is imported.
"""

from layerwise.methods.compress import export as compress_export
from layerwise.methods.lattemix import export as lattemix_export
from layerwise.methods.layer_attention import export as layer_attention_export
from layerwise.methods.lc import export as lc_export
from layerwise.methods.multitask import export as multitask_export
from layerwise.methods.truncated import export as truncated_export

__all__ = ["compress_export", "lattemix_export", "layer_attention_export", "lc_export", "multitask_export", "truncated_export"]
