"""Layer-wise attention pooling and contrastive objectives (Oh et al., COLING 2022).

The public estimator is :class:`LayerAttentionPooler` (``estimator.py``): fit on texts, pairs or triplets, encode,
save a sentence-transformers folder, load.

Poolers, losses, the training loop and NLI triplets; the results page (``pages``: the frozen-encoder grid and the
encoder-trained runs in ``experiment``, typed runs and their store keys in ``grid``, markdown and figure in
``report``). Retrieval evaluation is in ``layerwise.evaluation.retrieval``.
"""

from layerwise.encoders.trainable import SentenceModel
from layerwise.losses.contrastive import InBatchLoss, SupervisedHardNegativeLoss, UnsupervisedSimCSELoss
from layerwise.methods.layer_attention.estimator import LayerAttentionPooler, training_examples
from layerwise.methods.layer_attention.train import OBJECTIVES, ContrastiveConfig, nli_triplets, train_contrastive
from layerwise.modules.poolers import POOLER_KINDS, LayerPooler, PoolerConfig, build_pooler, load_pooler

__all__ = [
    "OBJECTIVES",
    "POOLER_KINDS",
    "ContrastiveConfig",
    "SentenceModel",
    "nli_triplets",
    "train_contrastive",
    "InBatchLoss",
    "LayerAttentionPooler",
    "LayerPooler",
    "PoolerConfig",
    "SupervisedHardNegativeLoss",
    "UnsupervisedSimCSELoss",
    "build_pooler",
    "load_pooler",
    "training_examples",
]
