"""TMFT runs and analyses computed part by part into a :class:`~layerwise.benchmarks.store.ResultsStore`.

Parts (page ``tmft`` by default):

* ``run-<model>-<pre_step>-L<layers>-seed<k>-ep<epochs>``: one :func:`~layerwise.methods.truncated.run.run_tmft`,
  keyed on the model identity (weights, tokenizer, config hashes), the content checksums of every data set the run
  reads (STS-B train/dev/test; word pairs for ``ws``; MLM sentences for ``mlm``) and every :class:`TMFTConfig` field;
* ``frontier-<model>``: the zero-training frontier, keyed on the model, the STS-B dev/test checksums and the encoder
  settings; ``frontier-<model>-sickr`` the same on SICK-R trial/test (the page's TMFT on SICK-R beside it);
* ``throughput-<model>``: encoding speed per depth, keyed on the model, the depths, the sentences' checksum, the
  batch and the machine (a timing is only valid where it was taken).

A stored key is never recomputed; a TMFT run cut off mid-way resumes from its checkpoints under ``checkpoints/``.
Each payload records the wall seconds its part took (``wall_seconds``), which the page sums.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from layerwise.benchmarks.page_parts import RunTimer, latest_by_name, run_record, sts_checksum
from layerwise.benchmarks.significance_parts import OUTPUTS_KEY, load_gold, save_gold
from layerwise.benchmarks.store import Part, ResultsStore, model_key
from layerwise.benchmarks.truncated.analysis import (
    FRONTIER_SPLITS,
    Frontier,
    Throughput,
    throughput,
    zero_training_frontier,
)
from layerwise.data import load_sts
from layerwise.data.checksum import content_checksum
from layerwise.encoders.layer_encoder import LayerEncoder
from layerwise.methods.truncated.config import TMFTConfig
from layerwise.methods.truncated.run import TMFTResult, mlm_sentences, run_tmft, sts_pairs, wordsim_pairs
from layerwise.training.distributed import run_on_main

logger = logging.getLogger(__name__)

__all__ = ["PAGE_NAME", "SpeedSettings", "frontier_part", "frontier_part_name", "result_from_payload", "run_part_name", "run_runs", "throughput_part",
           "stored", "stored_gold"]

PAGE_NAME = "tmft"


def run_part_name(config: TMFTConfig) -> str:
    return f"run-{config.name}-ep{config.epochs}"


def _identity(model: str):
    return LayerEncoder(model, cache_dir=False, show_progress=False).identity


def _data_key(config: TMFTConfig, data_dir) -> dict:
    """Checksums of every data set ``config`` reads (read now: a missing file stops before any training)."""
    train, dev, test = sts_pairs(config.dataset, data_dir, config.train_limit)
    data = {config.dataset: content_checksum([train, dev, test])}
    if config.pre_step == "ws":
        data["wordsim"] = content_checksum(list(wordsim_pairs(config, data_dir)))
    if config.pre_step == "mlm":
        data["mlm"] = content_checksum(mlm_sentences(config, data_dir))
    return data


#: A run keeps each test pair's predicted cosine (dense ranks) for the page's paired tests; a run stored before has
#: no such key entry, so the next run recomputes it (from its checkpoints where they are kept: no retraining).
OUTPUTS = "test-pair cosine ranks"


def _save_gold(store: ResultsStore, page: str, config: TMFTConfig, key: dict, data_dir, command) -> None:
    """The test set's gold scores, once per the data checksum the run's key holds."""
    test = sts_pairs(config.dataset, data_dir, config.train_limit)[2]
    save_gold(store, page, {config.dataset: test.scores}, {config.dataset: key["data"][config.dataset]},
              [run_record(command)])


def stored_gold(store: ResultsStore, results: list[TMFTResult], page: str = PAGE_NAME) -> dict:
    """data checksum -> the gold test scores stored for it, for every data set the results were scored on."""
    out = {}
    for data in {tuple(sorted(r.data.items())) for r in results if len(r.data) == 1}:
        gold = load_gold(store, page, dict(data))
        if gold is not None:
            out[data[0][1]] = gold[data[0][0]]
    return out


def result_from_payload(payload: dict) -> TMFTResult:
    known = {f.name for f in fields(TMFTResult)}
    return TMFTResult(**{k: v for k, v in payload.items() if k in known})


def run_runs(configs: list[TMFTConfig], store: ResultsStore, *, checkpoints, data_dir=None, command=(),
             page: str = PAGE_NAME, show_progress: bool | None = None, device: str | None = None) -> list[TMFTResult]:
    """Every config's result: from ``store`` where its key is stored, else trained (resuming) and saved at once."""
    results, identities = [], {}
    keys = []
    for config in configs:  # every data set read and every key built before the first run trains
        if config.model not in identities:
            identities[config.model] = model_key(_identity(config.model))
        keys.append({"model": identities[config.model], "data": _data_key(config, data_dir),
                     "config": config.to_dict(), OUTPUTS_KEY: OUTPUTS})
    for config, key in zip(configs, keys, strict=True):
        name = run_part_name(config)
        part = store.load(page, name, key)
        if part is None:
            _save_gold(store, page, config, key, data_dir, command)
            timer = RunTimer()
            result = run_tmft(config, data_dir=data_dir, output=checkpoints, show_progress=show_progress,
                              device=device)
            payload = {**result.to_dict(), **timer.record(), "device": device or "cpu"}
            part = Part(page, name, key, payload, runs=[run_record(command)])
            run_on_main(store.save, part)  # under torchrun every process trained; rank 0 writes
            logger.info("%s: test Spearman %.2f", name, result.test_spearman)
        results.append(result_from_payload(part.payload))
    return results


def frontier_part_name(model: str, dataset: str = "stsb") -> str:
    """``frontier-<model>`` (STS-B), ``frontier-<model>-<dataset>`` on another data set."""
    return f"frontier-{Path(model).name}" + ("" if dataset == "stsb" else f"-{dataset}")


def frontier_part(model: str, store: ResultsStore, *, data_dir=None, max_length: int = 128, command=(),
                  page: str = PAGE_NAME, dataset: str = "stsb") -> Frontier:
    """The zero-training frontier of ``model`` at every depth on ``dataset`` (:data:`~.analysis.FRONTIER_SPLITS`),
    from the store or computed and saved."""
    data = {s: sts_checksum(load_sts(dataset, data_dir=data_dir, split=s)) for s in FRONTIER_SPLITS[dataset]}
    encoder = LayerEncoder(model, max_length=max_length, cache_dir=False, show_progress=show_bar())
    dev = "STS-B dev" if dataset == "stsb" else f"{dataset} {FRONTIER_SPLITS[dataset][0]}"
    key = {"model": model_key(encoder.identity), "data": data, "max_length": encoder.max_length, "dtype": "float32",
           "search": f"exact, every subset of 0..l, chosen on {dev}"}
    name = frontier_part_name(model, dataset)
    part = store.load(page, name, key)
    if part is None:
        t0 = time.perf_counter()
        frontier = zero_training_frontier(encoder, data_dir, dataset=dataset)
        part = Part(page, name, key, {**frontier.to_dict(), "wall_seconds": time.perf_counter() - t0},
                    runs=[run_record(command)])
        store.save(part)
    return Frontier.from_dict(part.payload)


@dataclass(frozen=True)
class SpeedSettings:
    """How throughput is measured: the first ``n_sentences`` distinct STS-B test sentences, batch, repeats."""

    n_sentences: int = 1000
    batch_size: int = 32
    repeats: int = 3
    max_length: int = 128


def throughput_part(model: str, depths, store: ResultsStore, *, data_dir=None,
                    settings: SpeedSettings = SpeedSettings(), command=(), page: str = PAGE_NAME) -> Throughput:
    """Sentences/s of ``model`` per depth (see :class:`SpeedSettings`), from the store or measured and saved."""
    import os
    import platform

    import torch

    test = load_sts("stsb", data_dir=data_dir, split="test")
    sentences = list(dict.fromkeys([*test.sentences1, *test.sentences2]))[:settings.n_sentences]
    key = {"model": model_key(_identity(model)), "depths": sorted(int(d) for d in depths),
           "sentences": content_checksum(sentences), **asdict(settings), "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                                                 "threads": torch.get_num_threads(), "device": "cpu"}}
    name = f"throughput-{Path(model).name}"
    part = store.load(page, name, key)
    if part is None:
        t0 = time.perf_counter()
        result = throughput(model, depths, sentences, settings.batch_size, repeats=settings.repeats,
                            max_length=settings.max_length)
        part = Part(page, name, key, {**result.to_dict(), "wall_seconds": time.perf_counter() - t0},
                    runs=[run_record(command)])
        store.save(part)
    return Throughput.from_dict(part.payload)


def show_bar() -> bool:
    return logger.isEnabledFor(logging.INFO)


def stored(store: ResultsStore, page: str = PAGE_NAME) -> dict[str, Part]:
    """part name -> the newest stored part of that name (render reads the store only through this)."""
    return latest_by_name(store.parts(page))
