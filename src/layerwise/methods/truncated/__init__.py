"""Truncated model fine-tuning (TMFT; Rep, Dukić, Šnajder, Findings of EMNLP 2024; issue #12).

The encoder is cut at hidden state l (:mod:`.truncate`), mean-pooled (:mod:`.model`; a layer subset for LC-TMFT),
fine-tuned on STS-B with :mod:`layerwise.training` after an optional word-similarity or MLM step (:mod:`.run`) and
saved as a sentence-transformers folder. :mod:`.analysis` adds the zero-training frontier and measured throughput,
:mod:`.experiment` runs everything part by part into a results store, :mod:`.pages` declares the ``tmft`` page.
"""
