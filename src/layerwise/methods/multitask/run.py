"""One experiment x one seed: build the model, run its phases with the one training loop, score dev and test.

Phases, each in its own folder ``OUTPUT/<phase>/`` (``last/``, ``best/``; resumable, a finished phase is a no-op):

    nli        (NLI_* experiments) ``nli_epochs`` of pre-finetuning; its last state goes on
    tasks      every task, ``epochs`` epochs, the schedule's batch order, best dev overall score kept
  or, for FREEZE_SST:
    para_sts   PARA and STS only (best dev mean of their terms kept), then
    sst_head   the larger SST head alone on the frozen encoder (best dev SST accuracy kept); with prototypes
               (SST_TO_STS+FROZEN) the prototype head, its prototypes embedded once the encoder is frozen

The model of the last phase's ``best/`` is the trained model (:class:`MultitaskNetwork` format). The method part,
building nothing and writing no results (:func:`train_phases`: the phases of a model on its data), is shared with
the estimator (``MultitaskModel`` of ``estimator.py``, on a user's task list); :func:`run_experiment` adds the named
experiment's model, subsets and prototypes and the dev / test scores.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from layerwise.data.checksum import content_checksum
from layerwise.encoders.registry import resolve_model
from layerwise.evaluation.unit_outputs import pack_correct, pack_scores, unpack_correct, unpack_scores
from layerwise.finite import check_finite_weights
from layerwise.methods.multitask.config import TASKS, MultitaskConfig
from layerwise.methods.multitask.evaluate import TaskScores, evaluate_split, evaluate_split_outputs
from layerwise.methods.multitask.layer_choice import choose_subsets
from layerwise.methods.multitask.model import MultitaskNetwork, build_heads
from layerwise.methods.multitask.schedule import BatchPlan
from layerwise.methods.multitask.task import NLIPhase, TaskPhase
from layerwise.training import TrainingConfig, seed_everything, train
from layerwise.training.checkpoint import STATE_JSON
from layerwise.training.distributed import local_device

logger = logging.getLogger(__name__)

__all__ = ["ExperimentResult", "PhaseSummary", "RunControl", "build_model", "load_encoder", "pack_test_outputs",
           "phases", "run_experiment", "set_prototypes", "train_phases", "unpack_test_output"]


@dataclass(frozen=True)
class RunControl:
    """How a run goes, apart from its settings (none of this is in its results key)."""

    resume: bool = False  # continue each phase from its last/ (refused when model, data or settings differ)
    overwrite: bool = False  # start again over an earlier run's checkpoints
    max_steps_per_phase: int | None = None  # stop early, as an interruption would (run_experiment returns None)
    device: str | None = None  # where the model trains (None: cpu; "cuda" under torchrun: GPU LOCAL_RANK)
    show_progress: bool | None = None  # progress bars (None: when the log level is INFO)
    on_freeze: object = None  # on_freeze(model): once the encoder is final, before the first phase on it frozen


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
    # task -> its per-unit test outputs, for paired tests between experiments (:func:`pack_test_outputs`); {}: a
    # result stored before they were kept
    test_outputs: dict[str, dict] = field(default_factory=dict)

    def to_payload(self) -> dict:
        out = asdict(self)
        out["dev"], out["test"] = self.dev.to_dict(), self.test.to_dict()
        return out

    @classmethod
    def from_payload(cls, p: dict) -> "ExperimentResult":
        p = {k: v for k, v in p.items() if k != "timing"}  # a stored part's run timing (see experiment.run_parts)
        return cls(**{**p, "dev": TaskScores.from_dict(p["dev"]), "test": TaskScores.from_dict(p["test"]),
                      "phases": [PhaseSummary(**s) for s in p["phases"]]})


def pack_test_outputs(outputs: dict[str, np.ndarray], data) -> dict[str, dict]:
    """Per-unit test outputs (:func:`~layerwise.methods.multitask.evaluate.evaluate_split_outputs`) as a result
    keeps them: task -> ``{"n", "checksum"`` (content checksum of the test split: two runs are paired only on the
    same units) ``, "correct"`` (SST, PARA: packed correctness) ``| "predictions"`` (STS: exact float64)``}``."""
    out = {}
    for task, x in outputs.items():
        packed = {"correct": pack_correct(x)} if x.dtype == bool else {"predictions": pack_scores(x)}
        out[task] = {"n": len(x), "checksum": content_checksum(data.task(task).test), **packed}
    return out


def unpack_test_output(entry: dict) -> np.ndarray:
    """One task's per-unit outputs from :func:`pack_test_outputs`: bool correctness or float64 predictions (n,)."""
    if "correct" in entry:
        return unpack_correct(entry["correct"], entry["n"])
    return unpack_scores(entry["predictions"], entry["n"])


def load_encoder(model_name: str):
    """(Hugging Face encoder, tokenizer) of ``model_name`` (a built-in name or a local folder)."""
    from transformers import AutoModel, AutoTokenizer

    path = resolve_model(model_name).path
    enc = AutoModel.from_pretrained(path, local_files_only=True)
    check_finite_weights(enc, str(model_name))
    return enc, AutoTokenizer.from_pretrained(path, local_files_only=True)


def build_model(model_name: str, config: MultitaskConfig, n_classes: int, *, subsets=None) -> MultitaskNetwork:
    """Encoder ``model_name`` (built-in name or folder) with fresh heads (seed torch first)."""
    enc, tok = load_encoder(model_name)
    heads, shared = build_heads(config, enc.config.hidden_size, n_classes, enc.config.num_attention_heads)
    return MultitaskNetwork(enc, tok, heads, shared=shared, layers=config.layers, subsets=subsets,
                          max_length=config.max_length)


@torch.inference_mode()
def set_prototypes(model: MultitaskNetwork, data, per_label: int, seed: int, *, task: str = "sst") -> list[int]:
    """Pick ``per_label`` training sentences of each label of the classification task ``task`` (seeded) and store
    their embeddings in its head."""
    train_split, n_classes = data.task(task).train, data.specs[task].n_classes
    labels = train_split.labels
    rng = np.random.default_rng([seed, 2])
    picked = np.concatenate([rng.choice(np.flatnonzero(labels == c), per_label, replace=False)
                             for c in range(n_classes)])
    was = model.training
    model.eval()
    emb = torch.cat([model.embed(task, model.encode_texts([train_split.sentences[i] for i in chunk])[0])
                     for chunk in np.array_split(picked, max(1, len(picked) // 64))])
    model.train(was)
    model.heads[task].set_prototypes(emb, torch.as_tensor(labels[picked]))
    return picked.tolist()


def phases(config: MultitaskConfig, data, seed: int, *, tasks: tuple[str, ...] = TASKS,
           frozen: tuple[str, ...] | None = None) -> list[tuple[str, tuple[str, ...], BatchPlan, int]]:
    """(phase name, tasks, batch plan, epochs) of each phase, in order: NLI pre-finetuning when ``config.nli``,
    then ``tasks``; the ``frozen`` ones (default: SST when ``config.freeze_sst``) train last, heads alone on the
    frozen encoder, in a phase named ``<tasks>_head`` after one named by the others."""
    out = []
    if config.nli:
        n = len(data.nli_pairs) if config.nli == "regression" else len(data.nli_triplets)
        out.append(("nli", (), BatchPlan(("nli",), (n,), config.batch_size, "task_by_task", seed), config.nli_epochs))

    def plan(names):
        return BatchPlan(names, tuple(len(data.task(t).train) for t in names), config.batch_size, config.schedule, seed)

    frozen = tuple(t for t in tasks if t in (frozen if frozen is not None else ("sst",) if config.freeze_sst else ()))
    rest = tuple(t for t in tasks if t not in frozen)
    if frozen:
        if rest:
            out.append(("_".join(rest), rest, plan(rest), config.epochs))
        out.append((f"{'_'.join(frozen)}_head", frozen, plan(frozen), config.epochs))
    else:
        out.append(("tasks", tasks, plan(tasks), config.epochs))
    return out


def _run_phase(model, data, config, seed, spec, folder: Path | None, control: RunControl, *,
               frozen: bool) -> PhaseSummary:
    """One phase with the training loop (``folder`` None: in memory, no checkpoints)."""
    name, tasks, plan, epochs = spec
    if name == "nli":
        task = NLIPhase(model, data, config, plan)
    else:
        task = TaskPhase(model, data, tasks, config, plan, frozen_encoder=frozen, name=name)
    per = plan.steps_per_epoch
    loop = TrainingConfig(steps=epochs * per, decay="constant", eval_every=per, seed=seed)
    cont = control.resume and folder is not None and (folder / "last" / STATE_JSON).is_file()
    run = train(task, loop, output_dir=folder, resume=cont, overwrite=control.overwrite and not cont,
                restore_best=name != "nli", max_steps_this_run=control.max_steps_per_phase,
                show_progress=control.show_progress)
    losses = np.asarray(run.loss)
    epoch_loss = [float(losses[e * per:(e + 1) * per].mean()) for e in range(len(losses) // per)]
    return PhaseSummary(name, loop.steps, per, epoch_loss, run.dev, run.best_dev, run.seconds)


def train_phases(model: MultitaskNetwork, data, config: MultitaskConfig, seed: int, output_dir=None, *,
                 tasks: tuple[str, ...] = TASKS, frozen: tuple[str, ...] | None = None,
                 control: RunControl | None = None) -> list[PhaseSummary] | None:
    """Train ``model`` on ``data`` (a MultitaskData or a TaskSet) phase by phase (see :func:`phases`) with the one
    training loop; each phase in ``output_dir/<phase>/`` (None: in memory). ``control.on_freeze(model)`` runs once
    the encoder is final, before the first phase on the frozen encoder (prototypes are embedded there). Returns the
    phases' summaries, or None when ``control.max_steps_per_phase`` stopped a phase early."""
    control = control or RunControl()
    on_freeze = control.on_freeze
    frozen_tasks = set(frozen if frozen is not None else ("sst",) if config.freeze_sst else ())
    summaries = []
    for spec in phases(config, data, seed, tasks=tasks, frozen=frozen):
        folder = None if output_dir is None else Path(output_dir) / spec[0]
        is_frozen = spec[0] != "nli" and set(spec[1]) <= frozen_tasks
        if is_frozen and on_freeze is not None:
            on_freeze(model)
            on_freeze = None
        summaries.append(_run_phase(model, data, config, seed, spec, folder, control, frozen=is_frozen))
        if summaries[-1].steps > sum(1 for _ in summaries[-1].epoch_loss) * summaries[-1].steps_per_epoch:
            return None  # stopped early
    return summaries


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
    def prototypes(m):
        set_prototypes(m, data, config.sst_prototypes, config.split_seed)

    if config.sst_prototypes and not config.freeze_sst:  # embedded once, then the encoder trains on (the default)
        prototypes(model)
    if config.sst_prototypes and config.freeze_sst:
        control = replace(control, on_freeze=prototypes)
    summaries = train_phases(model, data, config, seed, out, control=control)
    if summaries is None:
        return None  # stopped early
    dev = evaluate_split(model, data, "dev", batch_size=config.batch_size)
    test, outputs = evaluate_split_outputs(model, data, "test", batch_size=config.batch_size)
    logger.info("%s seed %d: dev overall %.4f, test overall %.4f", config.name, seed, dev.overall, test.overall)
    return ExperimentResult(config.to_dict(), seed, model_name, dev, test, summaries, model.layer_weights(), subsets,
                            str(out / summaries[-1].name / "best"), time.perf_counter() - t0,
                            pack_test_outputs(outputs, data))
