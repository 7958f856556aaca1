"""Training objectives, one file per family."""

from layerwise.losses.contrastive import (
    OBJECTIVES,
    InBatchLoss,
    SupervisedHardNegativeLoss,
    UnsupervisedSimCSELoss,
    objective_loss,
)

__all__ = ["OBJECTIVES", "InBatchLoss", "SupervisedHardNegativeLoss", "UnsupervisedSimCSELoss", "objective_loss"]
