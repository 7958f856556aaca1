"""Layer-wise attention pooling and contrastive objectives (Oh et al., COLING 2022).

The public estimator is :class:`LayerAttentionPooler` (:mod:`.estimator`): fit on texts, pairs or triplets, encode,
save a sentence-transformers folder, load.

Poolers, losses, the training loop (:mod:`.train`; :mod:`.frozen` for a frozen encoder) and NLI triplets, and the
exporter (:mod:`.export`). The paper's grid and its results page are in :mod:`layerwise.benchmarks.layer_attention`;
retrieval evaluation is in ``layerwise.evaluation.retrieval``.
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
