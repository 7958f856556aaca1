"""Experiments x seeds run part by part into a :class:`~layerwise.benchmarks.store.ResultsStore`.

One part per (experiment, seed), named ``<experiment>-seed<k>`` and keyed on the model identity (weights,
tokenizer, config hashes), the content checksums of every data split, every :class:`MultitaskConfig` field and the
seed, and :data:`~layerwise.benchmarks.significance_parts.OUTPUTS_KEY` (the part keeps its per-example test
outputs). A part whose key is stored is never recomputed; a run that was cut off resumes from its checkpoints under
``checkpoints/<experiment>/seed<k>-<first 8 hex digits of the digest of the key without its outputs entry>/``: a run
under changed settings trains in a folder of its own and never meets another setting's checkpoints (those folders
are large: the store is the record). The STS test gold scores are stored once per test checksum (part
``gold-scores``).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import numpy as np

from layerwise.benchmarks.page_parts import RunTimer, latest_by_name, run_record
from layerwise.benchmarks.significance_parts import OUTPUTS_KEY, load_gold, save_gold, without_outputs
from layerwise.benchmarks.store import Part, ResultsStore, keyed_name, model_key
from layerwise.data.checksum import content_checksum
from layerwise.encoders.layer_encoder import LayerEncoder
from layerwise.encoders.model_files import declared_training_data
from layerwise.encoders.registry import resolve_model
from layerwise.methods.multitask.config import MultitaskConfig
from layerwise.methods.multitask.data import load_multitask_data
from layerwise.methods.multitask.run import ExperimentResult, RunControl, run_experiment
from layerwise.training.distributed import run_on_main

logger = logging.getLogger(__name__)

__all__ = ["PAGE_NAME", "TRAINING_DATA", "part_name", "run_parts", "save_test_gold", "stored_gold", "stored_results",
           "training_data_part"]

PAGE_NAME = "multitask"


def part_name(config: MultitaskConfig, seed: int) -> str:
    return f"{config.name}-seed{seed}"


def _model_key(model: str) -> dict:
    """Weights, tokenizer and config hashes of ``model`` (a built-in name or a folder)."""
    return model_key(LayerEncoder(model, cache_dir=False).identity)


#: A run keeps its per-example test outputs (SST and PARA correctness, STS predictions) for the page's paired tests;
#: a part stored before has no such key entry, so the next run computes it again, from its checkpoints where they
#: are kept (the checkpoint folder is named by the key without this entry: the model is evaluated, not retrained).
OUTPUTS = "test per-example correctness (SST, PARA) and STS predictions"


def _key(model: dict, data, config: MultitaskConfig, seed: int) -> dict:
    return {"model": model, "data": data.checksums(), "config": config.to_dict(), "seed": int(seed),
            OUTPUTS_KEY: OUTPUTS}


def _gold_checksums(data) -> dict[str, str]:
    return {"sts": content_checksum(data.sts.test)}


def save_test_gold(store: ResultsStore, data, command=()) -> None:
    """The STS test gold scores, once per the test split's checksum (the paired Pearson tests read them)."""
    save_gold(store, PAGE_NAME, {"sts": data.sts.test.targets}, _gold_checksums(data), [run_record(command)])


def stored_gold(store: ResultsStore, checksum: str) -> np.ndarray | None:
    """The STS test gold scores stored for the test split of content checksum ``checksum``, or None."""
    gold = load_gold(store, PAGE_NAME, {"sts": checksum})
    return None if gold is None else gold["sts"]


def run_parts(configs: list[MultitaskConfig], seeds, store: ResultsStore, *, model: str, checkpoints, data_dir=None,
              command=(), control: RunControl | None = None) -> list[ExperimentResult]:
    """Every (config, seed) result: from ``store`` where its key is stored, else trained and saved at once.

    ``control`` (:class:`~layerwise.methods.multitask.run.RunControl`): by default a cut-off run resumes from its
    checkpoints; ``overwrite=True`` starts it again instead; ``device`` is where the models train (None: cpu).
    """
    control = control or RunControl()
    control = replace(control, resume=not control.overwrite)
    results = []
    mk = None
    for config in configs:
        data = load_multitask_data(config, data_dir)
        for seed in seeds:
            mk = mk or _model_key(model)
            key, name = _key(mk, data, config, seed), part_name(config, seed)
            part = store.load(PAGE_NAME, name, key)
            if part is None:
                folder = Path(checkpoints) / config.name / keyed_name(f"seed{seed}", without_outputs(key))
                run_on_main(save_test_gold, store, data, command)
                timer = RunTimer()
                result = run_experiment(config, seed, folder, model_name=model, data=data, control=control)
                timing = {**timer.record(), "device": control.device or "cpu"}  # how much of the machine it had
                payload = {**result.to_payload(), "timing": timing}
                part = Part(PAGE_NAME, name, key, payload, runs=[run_record(command)])
                run_on_main(store.save, part)  # under torchrun every process trained; rank 0 writes
                logger.info("%s: test overall %.4f", name, result.test.overall)
            results.append(ExperimentResult.from_payload(part.payload))
    return results


TRAINING_DATA = "encoder-training-data"  # the part holding the training files the encoder's folder declares


def training_data_part(model: str, store: ResultsStore, *, command=()) -> Part:
    """The training files ``model``'s folder declares (``data_config.json``; [] when it declares none), stored once
    per model identity: the page reads from it which of its tasks' data the encoder was trained on before."""
    key = {"model": _model_key(model), "source": "data_config.json"}
    part = store.load(PAGE_NAME, TRAINING_DATA, key)
    if part is None:
        files = declared_training_data(resolve_model(model).path)
        part = Part(PAGE_NAME, TRAINING_DATA, key, {"files": files}, runs=[run_record(command)])
        run_on_main(store.save, part)
    return part


def stored_results(store: ResultsStore, names: list[str], seeds, *, page: str = PAGE_NAME):
    """(results, parts used, part names not stored) of the experiments ``names`` x ``seeds``, from the store alone."""
    parts = latest_by_name(store.parts(page))
    results, used, missing = [], [], []
    for name in names:
        for seed in seeds:
            part = parts.get(f"{name}-seed{seed}")
            if part is None:
                missing.append(f"{name}-seed{seed}")
                continue
            results.append(ExperimentResult.from_payload(part.payload))
            used.append(part)
    return results, used, missing
