"""Training objectives, one file per family."""

from layerwise.losses.contrastive import InBatchLoss, SupervisedHardNegativeLoss, UnsupervisedSimCSELoss

__all__ = ["InBatchLoss", "SupervisedHardNegativeLoss", "UnsupervisedSimCSELoss"]
