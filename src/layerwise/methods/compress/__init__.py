"""Compression (issue #25): the fastest model within a quality budget, from any encoder.

Candidates per depth l (:mod:`.build`): the plain cut (:mod:`layerwise.encoders.truncate`), the LC cut (the best
subset of hidden states 0..l by the exact search of :mod:`layerwise.methods.lc.search`) and a student distilled
from the full model by MSE on the user's corpus (:mod:`.distill`, through the one training loop); each scored on
dev and test pairs and timed against the original in one run (:mod:`.speed`); the Pareto front and the choice
under a budget (:mod:`.frontier`); the chosen model written as a sentence-transformers folder (:mod:`.export`).
:class:`Compressor` (:mod:`.estimator`) is the method on your data; ``layerwise compress`` its command.
"""

from layerwise.methods.compress.estimator import Compressor, CompressSettings

__all__ = ["CompressSettings", "Compressor"]
