"""Truncated model fine-tuning (TMFT; Rep, Dukić, Šnajder, Findings of EMNLP 2024; issue #12).

The encoder is cut at hidden state l (:mod:`layerwise.encoders.truncate`), mean-pooled (:mod:`.model`; a layer
subset for LC-TMFT), fine-tuned on scored pairs with :mod:`layerwise.training` after an optional word-similarity or
MLM step (:func:`.run.fine_tune`, :mod:`.tasks`) and saved as a sentence-transformers folder (:mod:`.export`).
:class:`TruncatedFineTuner` (:mod:`.estimator`) is the method on your own pairs, word pairs and corpus;
:func:`.run.run_tmft` is one run of the paper's protocol on STS-B. The zero-training frontier, the throughput, the
runs of the paper and the ``tmft`` page are in :mod:`layerwise.benchmarks.truncated`.
"""

from layerwise.methods.truncated.estimator import TruncatedFineTuner

__all__ = ["TruncatedFineTuner"]
