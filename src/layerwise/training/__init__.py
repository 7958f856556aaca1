"""The one training loop shared by every trainer: settings, schedule, checkpoints without pickle, exact resume."""

from layerwise.training.batches import batch_indices, length_grouped_batch_indices, steps_per_epoch
from layerwise.training.checkpoint import (
    TrainerState,
    fingerprint_differences,
    load_checkpoint,
    prepare_output,
    save_checkpoint,
    tensors_sha256,
)
from layerwise.training.config import TrainingConfig
from layerwise.training.loop import TrainingRun, TrainingTask, seed_everything, train
from layerwise.training.schedule import lr_factor

__all__ = [
    "TrainerState",
    "TrainingConfig",
    "TrainingRun",
    "TrainingTask",
    "batch_indices",
    "length_grouped_batch_indices",
    "fingerprint_differences",
    "load_checkpoint",
    "lr_factor",
    "prepare_output",
    "save_checkpoint",
    "seed_everything",
    "steps_per_epoch",
    "tensors_sha256",
    "train",
]
