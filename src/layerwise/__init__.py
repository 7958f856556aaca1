"""layerwise: sentence embeddings from every layer of a transformer encoder.

Hidden state 0 is the embedding output and hidden state L the last layer; layer selections are explicit
tuples of these indices (see :mod:`layerwise.layers`).
"""

from __future__ import annotations

from layerwise._version import __version__
from layerwise.cache import LayerCache
from layerwise.encoders.layer_encoder import LayerEncoder, ModelIdentity
from layerwise.encoders.registry import BUILTIN_MODELS, DEFAULT_MODEL, assemble_mpnet, resolve_model
from layerwise.errors import ModelNotFoundError
from layerwise.evaluation.metrics import pearson, spearman, spearman_rows
from layerwise.evaluation.sts import per_layer_scores, sts_scores
from layerwise.export.no_code import load_sentence_transformer
from layerwise.layers import LayerStack
from layerwise.methods.compress.estimator import Compressor, CompressSettings
from layerwise.methods.lattemix.estimator import LatteMix
from layerwise.methods.layer_attention.estimator import LayerAttentionPooler
from layerwise.methods.lc.estimator import LayerCombination
from layerwise.methods.lc.protocol import LCResult, run_bert_lc
from layerwise.methods.lc.search import LayerSubsetSearch, naive_subset_scores
from layerwise.methods.multitask.estimator import MultitaskModel
from layerwise.methods.multitask.task_list import Task
from layerwise.methods.truncated.estimator import TruncatedFineTuner
from layerwise.pooling import (
    Pooling,
    baseline_poolings,
    cls_pooling,
    layer_mean,
    named_selections,
    random_layers,
    scalar_mix,
)

__all__ = [
    "BUILTIN_MODELS",
    "CompressSettings",
    "Compressor",
    "DEFAULT_MODEL",
    "LCResult",
    "LayerAttentionPooler",
    "LayerCache",
    "LayerCombination",
    "LayerEncoder",
    "LayerStack",
    "LayerSubsetSearch",
    "LatteMix",
    "ModelIdentity",
    "ModelNotFoundError",
    "MultitaskModel",
    "Pooling",
    "TruncatedFineTuner",
    "__version__",
    "assemble_mpnet",
    "baseline_poolings",
    "cls_pooling",
    "layer_mean",
    "load_sentence_transformer",
    "naive_subset_scores",
    "named_selections",
    "pearson",
    "per_layer_scores",
    "random_layers",
    "resolve_model",
    "run_bert_lc",
    "scalar_mix",
    "spearman",
    "spearman_rows",
    "sts_scores",
    "Task",
]
