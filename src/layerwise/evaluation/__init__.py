"""Evaluators shared by every method: STS correlation, metrics, classification probes and retrieval."""

from layerwise.evaluation.sts import per_layer_scores, sts_scores

__all__ = ["per_layer_scores", "sts_scores"]
