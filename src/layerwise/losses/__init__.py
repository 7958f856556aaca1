"""Training objectives, one file per family."""

from layerwise.losses.contrastive import (
    OBJECTIVES,
    InBatchLoss,
    SupervisedHardNegativeLoss,
    UnsupervisedSimCSELoss,
    objective_loss,
)
from layerwise.losses.nli import NLI_OBJECTIVES, NLIRegressionLoss, NLITripletLoss, nli_loss

__all__ = ["NLI_OBJECTIVES", "OBJECTIVES", "InBatchLoss", "NLIRegressionLoss", "NLITripletLoss",
           "SupervisedHardNegativeLoss", "UnsupervisedSimCSELoss", "nli_loss", "objective_loss"]
