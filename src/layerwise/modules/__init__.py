"""Trainable modules, each saved as ``config.json`` + ``model.safetensors`` (:class:`Module`)."""

from layerwise.modules.base import Module
from layerwise.modules.poolers import POOLER_KINDS, LayerPooler, PoolerConfig, build_pooler, load_pooler
from layerwise.modules.scalar_mix import ScalarMix

__all__ = ["POOLER_KINDS", "LayerPooler", "Module", "PoolerConfig", "ScalarMix", "build_pooler", "load_pooler"]
