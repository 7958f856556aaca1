"""BERT-LC (Hosseini et al., Findings of EMNLP 2023): mean-pool a chosen subset of hidden states.

- :mod:`.estimator`: ``LayerCombination``, the method as an estimator on the user's own pairs or labeled texts
- :mod:`.search`: the exact search of every subset on STS pairs (``LayerSubsetSearch``)
- :mod:`.protocol`: the STS dev/test protocol (``run_bert_lc``)
- :mod:`.transfer`: the SentEval transfer protocol with the ridge screen
- :mod:`.ablation`: number of layers, excluding a layer, limited data
- :mod:`.screen`: the closed-form ridge screen of every subset (transfer)
- :mod:`.run`, :mod:`.transfer_run`, :mod:`.ablation_run`: end-to-end runs (typed results, config dataclasses,
  parts of the results store), with :mod:`.transfer_report`, :mod:`.ablation_report` writing their files
- :mod:`.pages`: the ``lc-sts``, ``transfer`` and ``ablations`` results pages (:mod:`.sts_page`,
  :mod:`.sts_observations`, :mod:`.transfer_pages`, :mod:`.transfer_check`). The files of the old results
  scripts were converted into store parts once (one-off code, commit ef01597, removed after it ran; each converted
  part records ``migrated_from``)
"""

from layerwise.methods.lc.estimator import LayerCombination
from layerwise.methods.lc.protocol import LCProtocol, LCResult, LCSplit, run_bert_lc, split_indices
from layerwise.methods.lc.search import LayerSubsetSearch, naive_subset_scores

__all__ = ["LCProtocol", "LayerCombination", "LCResult", "LCSplit", "LayerSubsetSearch", "naive_subset_scores", "run_bert_lc", "split_indices"]
