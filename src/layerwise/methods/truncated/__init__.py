"""Truncated model fine-tuning (TMFT; Rep, Dukić, Šnajder, Findings of EMNLP 2024; issue #12).

The encoder is cut at hidden state l (:mod:`.truncate`), mean-pooled (:mod:`.model`; a layer subset for LC-TMFT),
fine-tuned on scored pairs with :mod:`layerwise.training` after an optional word-similarity or MLM step
(:func:`.run.fine_tune`) and saved as a sentence-transformers folder. :class:`TruncatedFineTuner` (:mod:`.estimator`)
is the method on your own pairs, word pairs and corpus; :func:`.run.run_tmft` is one paper run on STS-B.
:mod:`.analysis` adds the zero-training frontier and measured throughput, :mod:`.experiment` runs everything part by
part into a results store, :mod:`.pages` declares the ``tmft`` page.
"""

from layerwise.methods.truncated.estimator import TruncatedFineTuner

__all__ = ["TruncatedFineTuner"]
