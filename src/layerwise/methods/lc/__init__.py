"""BERT-LC (Hosseini et al., Findings of EMNLP 2023): mean-pool a chosen subset of hidden states.

- :mod:`.search`: the exact search of every subset on STS pairs (``LayerSubsetSearch``)
- :mod:`.protocol`: the STS dev/test protocol (``run_bert_lc``)
- :mod:`.transfer`: the SentEval transfer protocol with the ridge screen
- :mod:`.ablation`: number of layers, excluding a layer, limited data
- :mod:`.run`, :mod:`.transfer_run`, :mod:`.ablation_run`: end-to-end runs with encoding and results files
"""

from layerwise.methods.lc.protocol import LCResult, LCSplit, run_bert_lc, split_indices
from layerwise.methods.lc.search import LayerSubsetSearch, naive_subset_scores

__all__ = ["LCResult", "LCSplit", "LayerSubsetSearch", "naive_subset_scores", "run_bert_lc", "split_indices"]
