"""One experiment x one seed: build the model, run its phases with the one training loop, score dev and test.

Phases, each in its own folder ``OUTPUT/<phase>/`` (``last/``, ``best/``; resumable, a finished phase is a no-op):

    nli        (NLI_* experiments) ``nli_epochs`` of pre-finetuning; its last state goes on
    tasks      every task, ``epochs`` epochs, the schedule's batch order, best dev overall score kept
  or, for FREEZE_SST:
    para_sts   PARA and STS only (best dev mean of their terms kept), then
    sst_head   the larger SST head alone on the frozen encoder (best dev SST accuracy kept)

The model of the last phase's ``best/`` is the trained model (:class:`MultitaskModel` format).
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from layerwise.encoders.registry import resolve_model
from layerwise.methods.multitask.config import TASKS, MultitaskConfig
from layerwise.methods.multitask.evaluate import TaskScores, evaluate_split
from layerwise.methods.multitask.layer_choice import choose_subsets
from layerwise.methods.multitask.model import MultitaskModel, build_heads
from layerwise.methods.multitask.schedule import BatchPlan
from layerwise.methods.multitask.task import NLIPhase, TaskPhase
from layerwise.training import TrainingConfig, seed_everything, train
from layerwise.training.checkpoint import STATE_JSON
from layerwise.training.distributed import local_device

logger = logging.getLogger(__name__)

__all__ = ["ExperimentResult", "PhaseSummary", "RunControl", "build_model", "phases", "run_experiment",
           "set_prototypes"]


@dataclass(frozen=True)
class RunControl:
    """How a run goes, apart from its settings (none of this is in its results key)."""

    resume: bool = False  # continue each phase from its last/ (refused when model, data or settings differ)
    overwrite: bool = False  # start again over an earlier run's checkpoints
    max_steps_per_phase: int | None = None  # stop early, as an interruption would (run_experiment returns None)
    device: str | None = None  # where the model trains (None: cpu; "cuda" under torchrun: GPU LOCAL_RANK)


@dataclass
class PhaseSummary:
    name: str
    steps: int
    steps_per_epoch: int
    epoch_loss: list[float]  # mean training loss of each epoch
    dev: list[list]  # [step, dev score] at each epoch end (empty for the NLI phase)
    best_dev: float | None
    seconds: float


@dataclass
class ExperimentResult:
    config: dict  # MultitaskConfig.to_dict()
    seed: int
    model: str
    dev: TaskScores
    test: TaskScores
    phases: list[PhaseSummary]
    layer_weights: dict[str, list[float]] = field(default_factory=dict)  # task -> softmax mix (layers="mix")
    subsets: dict[str, dict] = field(default_factory=dict)  # task -> chosen subset (layers="subset")
    model_dir: str = ""
    seconds: float = 0.0

    def to_payload(self) -> dict:
        out = asdict(self)
        out["dev"], out["test"] = self.dev.to_dict(), self.test.to_dict()
        return out

    @classmethod
    def from_payload(cls, p: dict) -> "ExperimentResult":
        p = {k: v for k, v in p.items() if k != "timing"}  # a stored part's run timing (see experiment.run_parts)
        return cls(**{**p, "dev": TaskScores.from_dict(p["dev"]), "test": TaskScores.from_dict(p["test"]),
                      "phases": [PhaseSummary(**s) for s in p["phases"]]})


def build_model(model_name: str, config: MultitaskConfig, n_classes: int, *, subsets=None) -> MultitaskModel:
    """Encoder ``model_name`` (built-in name or folder) with fresh heads (seed torch first)."""
    from transformers import AutoModel, AutoTokenizer

    path = resolve_model(model_name).path
    enc = AutoModel.from_pretrained(path, local_files_only=True)
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    heads, shared = build_heads(config, enc.config.hidden_size, n_classes, enc.config.num_attention_heads)
    return MultitaskModel(enc, tok, heads, shared=shared, layers=config.layers, subsets=subsets,
                          max_length=config.max_length)


@torch.inference_mode()
def set_prototypes(model: MultitaskModel, data, per_label: int, seed: int) -> list[int]:
    """Pick ``per_label`` SST training sentences of each label (seeded) and store their embeddings in the head."""
    labels = data.sst.train.labels
    rng = np.random.default_rng([seed, 2])
    picked = np.concatenate([rng.choice(np.flatnonzero(labels == c), per_label, replace=False)
                             for c in range(data.n_classes)])
    was = model.training
    model.eval()
    emb = torch.cat([model.embed("sst", model.encode_texts([data.sst.train.sentences[i] for i in chunk])[0])
                     for chunk in np.array_split(picked, max(1, len(picked) // 64))])
    model.train(was)
    model.heads["sst"].set_prototypes(emb, torch.as_tensor(labels[picked]))
    return picked.tolist()


def phases(config: MultitaskConfig, data, seed: int) -> list[tuple[str, tuple[str, ...], BatchPlan, int]]:
    """(phase name, tasks, batch plan, epochs) of each phase, in order."""
    out = []
    if config.nli:
        n = len(data.nli_pairs) if config.nli == "regression" else len(data.nli_triplets)
        out.append(("nli", (), BatchPlan(("nli",), (n,), config.batch_size, "task_by_task", seed), config.nli_epochs))

    def plan(tasks):
        return BatchPlan(tasks, tuple(len(data.task(t).train) for t in tasks), config.batch_size, config.schedule, seed)

    if config.freeze_sst:
        out.append(("para_sts", ("para", "sts"), plan(("para", "sts")), config.epochs))
        out.append(("sst_head", ("sst",), plan(("sst",)), config.epochs))
    else:
        out.append(("tasks", TASKS, plan(TASKS), config.epochs))
    return out


def _run_phase(model, data, config, seed, spec, folder: Path, control: RunControl) -> PhaseSummary:
    """One phase with the training loop."""
    name, tasks, plan, epochs = spec
    if name == "nli":
        task = NLIPhase(model, data, config, plan)
    else:
        task = TaskPhase(model, data, tasks, config, plan, frozen_encoder=name == "sst_head", name=name)
    per = plan.steps_per_epoch
    loop = TrainingConfig(steps=epochs * per, decay="constant", eval_every=per, seed=seed)
    cont = control.resume and (folder / "last" / STATE_JSON).is_file()
    run = train(task, loop, output_dir=folder, resume=cont, overwrite=control.overwrite and not cont,
                restore_best=name != "nli", max_steps_this_run=control.max_steps_per_phase)
    losses = np.asarray(run.loss)
    epoch_loss = [float(losses[e * per:(e + 1) * per].mean()) for e in range(len(losses) // per)]
    return PhaseSummary(name, loop.steps, per, epoch_loss, run.dev, run.best_dev, run.seconds)


def run_experiment(config: MultitaskConfig, seed: int, output_dir, *, model_name: str, data,
                   control: RunControl | None = None) -> ExperimentResult | None:
    """Train ``config`` with ``seed`` into ``output_dir`` and score the best model on dev and test.

    ``control`` (:class:`RunControl`): resume, start again, stop early (then None is returned), the device.
    """
    control = control or RunControl()
    t0 = time.perf_counter()
    out = Path(output_dir)
    seed_everything(seed)  # before the heads are built: one seed, one initialisation
    model = build_model(model_name, config, data.n_classes).to(local_device(control.device))
    subsets = {}
    if config.layers == "subset":
        subsets = choose_subsets(model, data, seed=config.split_seed, batch_size=config.batch_size)
        model.subsets = {t: tuple(c["layers"]) for t, c in subsets.items()}
    if config.sst_prototypes:
        set_prototypes(model, data, config.sst_prototypes, config.split_seed)
    summaries = []
    for spec in phases(config, data, seed):
        summaries.append(_run_phase(model, data, config, seed, spec, out / spec[0], control))
        if summaries[-1].steps > sum(1 for _ in summaries[-1].epoch_loss) * summaries[-1].steps_per_epoch:
            return None  # stopped early
    dev = evaluate_split(model, data, "dev", batch_size=config.batch_size)
    test = evaluate_split(model, data, "test", batch_size=config.batch_size)
    logger.info("%s seed %d: dev overall %.4f, test overall %.4f", config.name, seed, dev.overall, test.overall)
    return ExperimentResult(config.to_dict(), seed, model_name, dev, test, summaries, model.layer_weights(), subsets,
                            str(out / summaries[-1].name / "best"), time.perf_counter() - t0)
