"""Multi-task fine-tuning (issue #13): SST sentiment, Quora paraphrase and STS similarity heads on one encoder.

After "BERTology: Improving Sentence Embeddings for Multi-Task Success" (Lee, CS224N): the report's nine experiments
(:data:`EXPERIMENTS`), trained with the one training loop (:mod:`layerwise.training`), plus the question this
library asks: do tasks fight less when each head reads its own mix (``+MIX``) or subset (``+SUBSET``) of layers?
On one's own tasks and encoder: the estimator :class:`MultitaskModel` with a list of :class:`Task`.
"""

from layerwise.methods.multitask.config import (
    EXPERIMENTS,
    MultitaskConfig,
    experiment_names,
    get_experiment,
    load_config,
)
from layerwise.methods.multitask.data import MultitaskData, load_multitask_data
from layerwise.methods.multitask.estimator import MultitaskModel
from layerwise.methods.multitask.evaluate import TaskScores, evaluate_split, overall_score
from layerwise.methods.multitask.model import MultitaskNetwork
from layerwise.methods.multitask.run import ExperimentResult, run_experiment
from layerwise.methods.multitask.schedule import BatchPlan
from layerwise.methods.multitask.task_list import Task, read_task_file

__all__ = [
    "EXPERIMENTS",
    "BatchPlan",
    "ExperimentResult",
    "MultitaskConfig",
    "MultitaskData",
    "MultitaskModel",
    "MultitaskNetwork",
    "Task",
    "TaskScores",
    "evaluate_split",
    "experiment_names",
    "get_experiment",
    "load_config",
    "load_multitask_data",
    "overall_score",
    "read_task_file",
    "run_experiment",
]
