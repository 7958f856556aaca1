"""Encoders: model name resolution, the layer encoder (every hidden state, inference), the trainable encoder."""

from layerwise.encoders.layer_encoder import LayerEncoder, ModelIdentity
from layerwise.encoders.registry import BUILTIN_MODELS, DEFAULT_MODEL, resolve_model
from layerwise.errors import ModelNotFoundError

__all__ = ["BUILTIN_MODELS", "DEFAULT_MODEL", "LayerEncoder", "ModelIdentity", "ModelNotFoundError", "resolve_model"]
