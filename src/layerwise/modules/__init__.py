"""Trainable modules, each saved as ``config.json`` + ``model.safetensors`` (:class:`Module`)."""

from layerwise.modules.base import Module
from layerwise.modules.heads import (
    PAIR_FEATURES,
    ClassificationHead,
    CosineHead,
    PairHead,
    PrototypeHead,
    SharedHidden,
    TransformerClassificationHead,
)
from layerwise.modules.poolers import POOLER_KINDS, LayerPooler, PoolerConfig, build_pooler, load_pooler
from layerwise.modules.scalar_mix import ScalarMix

__all__ = ["PAIR_FEATURES", "POOLER_KINDS", "ClassificationHead", "CosineHead", "LayerPooler", "Module", "PairHead",
           "PoolerConfig", "PrototypeHead", "ScalarMix", "SharedHidden", "TransformerClassificationHead", "build_pooler",
           "load_pooler"]
