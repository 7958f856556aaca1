"""The five methods, one package each.

- :mod:`~layerwise.methods.lc`: BERT-LC, layer combination (exact subset search, STS and transfer protocols, ablations)
- :mod:`~layerwise.methods.layer_attention`: layer-wise attention pooling with SimCSE-family objectives
- :mod:`~layerwise.methods.lattemix`: Latte-Mix, categorical VAE over frozen token vectors
- :mod:`~layerwise.methods.truncated`: truncated model fine-tuning (TMFT), not built yet (issue #12)
- :mod:`~layerwise.methods.multitask`: multi-task fine-tuning, not built yet (issue #13)
"""
