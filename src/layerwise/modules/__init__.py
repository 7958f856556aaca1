"""Trainable modules, each saved as ``config.json`` + ``model.safetensors``."""

from layerwise.modules.poolers import POOLER_KINDS, LayerPooler, PoolerConfig, build_pooler, load_pooler

__all__ = ["POOLER_KINDS", "LayerPooler", "PoolerConfig", "build_pooler", "load_pooler"]
