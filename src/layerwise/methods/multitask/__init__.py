"""Multi-task fine-tuning (sentiment, paraphrase and similarity heads on one encoder). Not built yet: issue #13.

It will train task heads from :mod:`layerwise.modules` on one encoder with :mod:`layerwise.training`.
"""
