"""Layer-wise attention pooling and contrastive objectives (Oh et al., COLING 2022).

Status: poolers, losses, the training loop and NLI triplets are here and tested (retrieval evaluation is in
``layerwise.evaluation.retrieval``); the `layerwise train` / `layerwise retrieval` commands and the results
script are not built yet.
"""

from layerwise.losses.contrastive import InBatchLoss, SupervisedHardNegativeLoss, UnsupervisedSimCSELoss
from layerwise.encoders.trainable import SentenceModel
from layerwise.modules.poolers import POOLER_KINDS, LayerPooler, PoolerConfig, build_pooler, load_pooler
from layerwise.methods.layer_attention.train import OBJECTIVES, ContrastiveConfig, nli_triplets, train_contrastive

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
