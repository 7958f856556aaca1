"""Truncated model fine-tuning (TMFT; Rep, Dukić, Šnajder, Findings of EMNLP 2024; issue #12).

The encoder is cut at hidden state l (:mod:`layerwise.encoders.truncate`), mean-pooled (:mod:`.model`; a layer
subset for LC-TMFT), fine-tuned on STS-B with :mod:`layerwise.training` after an optional word-similarity or MLM step
(:mod:`.run`, :mod:`.tasks`) and saved as a sentence-transformers folder (:mod:`.export`). The zero-training
frontier, the throughput, the runs of the paper and the ``tmft`` page are in :mod:`layerwise.benchmarks.truncated`.
"""
