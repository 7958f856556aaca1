"""Layer-wise attention pooling and contrastive objectives (Oh et al., COLING 2022).

Poolers, losses, the training loop and NLI triplets; the results page (``pages``: the frozen-encoder grid and the
encoder-trained runs in ``experiment``, typed runs and their store keys in ``grid``, markdown and figure in
``report``). Retrieval evaluation is in ``layerwise.evaluation.retrieval``.
"""

from layerwise.encoders.trainable import SentenceModel
from layerwise.losses.contrastive import InBatchLoss, SupervisedHardNegativeLoss, UnsupervisedSimCSELoss
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
    "LayerPooler",
    "PoolerConfig",
    "SupervisedHardNegativeLoss",
    "UnsupervisedSimCSELoss",
    "build_pooler",
    "load_pooler",
]
