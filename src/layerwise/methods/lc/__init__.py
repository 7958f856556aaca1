"""BERT-LC (Hosseini et al., Findings of EMNLP 2023): mean-pool a chosen subset of hidden states.

- :mod:`.estimator`: ``LayerCombination``, the method as an estimator on the user's own pairs or labeled texts
- :mod:`.search`: the exact search of every subset on STS pairs (``LayerSubsetSearch``)
- :mod:`.protocol`: the STS dev/test protocol (``run_bert_lc``)
- :mod:`.transfer`: the SentEval transfer protocol with the ridge screen
- :mod:`.screen`: the closed-form ridge screen of every subset (transfer), on :mod:`.features`
- :mod:`.export`: a layer subset as a sentence-transformers folder (the ``layer_subset`` exporter)

The paper's runs, ablations and results pages are in :mod:`layerwise.benchmarks.lc`.
"""

from layerwise.methods.lc.estimator import LayerCombination
from layerwise.methods.lc.protocol import LCProtocol, LCResult, LCSplit, run_bert_lc, split_indices
from layerwise.methods.lc.search import LayerSubsetSearch, naive_subset_scores

__all__ = ["LCProtocol", "LayerCombination", "LCResult", "LCSplit", "LayerSubsetSearch", "naive_subset_scores", "run_bert_lc", "split_indices"]
