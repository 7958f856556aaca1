"""The Latte-Mix page's experiments, part by part into a :class:`~layerwise.benchmarks.store.ResultsStore`.

Each function first computes the keys of its parts (model identity, data checksums, every setting: cheap, no
encoding) and encodes only when some part is missing; each part is saved as soon as it is done.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from pathlib import Path

from layerwise.benchmarks.lattemix.grid import (
    FirstPCResult,
    KindResult,
    LayerPoint,
    MainResult,
    PageConfig,
    SweepRow,
    part_key,
    variant_name,
)
from layerwise.benchmarks.lattemix.run import (
    baseline_similarities,
    evaluate_config,
    evaluate_first_pc,
    prepare,
    score_similarities,
    training_sentences,
)
from layerwise.benchmarks.page_parts import run_record, sts_checksum
from layerwise.benchmarks.significance_parts import OUTPUTS_KEY, pack_predictions, save_gold
from layerwise.benchmarks.store import Part, ResultsStore, model_key
from layerwise.data import available_sts, load_sts
from layerwise.data.checksum import content_checksum
from layerwise.encoders.layer_encoder import LayerEncoder

logger = logging.getLogger(__name__)

__all__ = ["PAGE_NAME", "run_curve", "run_main", "run_sweep", "text_checksums"]

PAGE_NAME = "lattemix"


def text_checksums(page: PageConfig, sets, train_limit: int, data_dir=None) -> dict:
    """{"eval": {set: checksum}, "train": checksum of the training sentences} as ``prepare`` would pick them."""
    data = {n: load_sts(n, data_dir=data_dir) for n in sets}
    exclude = {s for d in data.values() for s in (*d.sentences1, *d.sentences2)}
    train, _ = training_sentences(data_dir, sources=page.train_sources, exclude=exclude, limit=train_limit,
                                  seed=page.text_seed)
    return {"eval": {n: sts_checksum(d) for n, d in data.items()}, "train": content_checksum(train)}


def _short(model: str) -> str:
    return Path(model).name


def _encoder(page: PageConfig, model: str):
    return LayerEncoder(model, max_length=page.max_length, dtype=page.dtype)


def _prepare(page: PageConfig, enc, sets, layers, limit, data_dir):
    return prepare(enc, sets, layers=layers, data_dir=data_dir, train_sources=page.train_sources,
                   train_limit=limit, seed=page.text_seed)


def _train(page, data, config, layer, seeds) -> KindResult:
    return evaluate_config(data, config, page.train, layer=layer, seeds=seeds,
                           include_special=page.include_special, aggregation=page.aggregation)


#: The main table, the sweep and the first-component part keep each test pair's similarity (dense ranks) for the
#: page's paired tests; a part stored before has no such key entry and is computed again by the next run.
OUTPUTS = "per-pair similarity ranks"


def _tested_key(key: dict) -> dict:
    return {**key, OUTPUTS_KEY: OUTPUTS}


def _save_gold(store: ResultsStore, data, sums: dict, command) -> None:
    save_gold(store, PAGE_NAME, {n: d.scores for n, (d, _, _) in data.datasets.items()}, sums["eval"],
              [run_record(command)])


def run_main(page: PageConfig, store: ResultsStore, model: str, *, data_dir=None, command=()) -> bool:
    """The main table of ``model`` (every STS set here); False when the store already holds it."""
    enc = _encoder(page, model)
    sets = [s for s in page.sts_sets if s in available_sts(data_dir)]
    layer = enc.n_states - 1
    config = replace(page.model_config, input_dim=enc.identity.hidden_size)
    sums = text_checksums(page, sets, page.train_limit, data_dir)
    key = _tested_key(part_key(page, model_key(enc.identity), sums, layer=layer, config=config, seeds=page.seeds,
                               train_limit=page.train_limit, kinds=page.kinds))
    name = f"main-{_short(model)}"
    if store.load(PAGE_NAME, name, key) is not None:
        return False
    t0 = time.perf_counter()
    data = _prepare(page, enc, sets, (layer,), page.train_limit, data_dir)
    _save_gold(store, data, sums, command)
    sims = baseline_similarities(data, layer)
    base = score_similarities(data, sims, page.aggregation)
    runs = {kind: _train(page, data, replace(config, kind=kind), layer, page.seeds) for kind in page.kinds}
    result = MainResult(model=data.model, layer=layer, training_text=data.train_info, seconds=data.seconds,
                        data={n: {"split": d.split, "n_pairs": len(d)} for n, (d, _, _) in data.datasets.items()},
                        baselines=base, runs=runs, total_seconds=time.perf_counter() - t0,
                        baseline_predictions={m: pack_predictions(per) for m, per in sims.items()})
    store.save(Part(PAGE_NAME, name, key, result.to_payload(), runs=[run_record(command)]))
    return True


def run_curve(page: PageConfig, store: ResultsStore, model: str, *, data_dir=None, command=()) -> int:
    """Mean pooling and the categorical VAE on every hidden state of ``model``; returns how many states were run."""
    enc = _encoder(page, model)
    config = replace(page.model_config, kind="categorical", input_dim=enc.identity.hidden_size)
    sums = text_checksums(page, page.small_sets, page.layer_train_limit, data_dir)
    keys = {layer: part_key(page, model_key(enc.identity), sums, layer=layer, config=config, seeds=page.seeds[:1],
                            train_limit=page.layer_train_limit) for layer in range(enc.n_states)}
    todo = [layer for layer, key in keys.items()
            if store.load(PAGE_NAME, f"layer-{_short(model)}-{layer}", key) is None]
    if not todo:
        return 0
    data = _prepare(page, enc, page.small_sets, todo, page.layer_train_limit, data_dir)
    for layer in todo:
        base = score_similarities(data, baseline_similarities(data, layer), page.aggregation)
        run = _train(page, data, config, layer, page.seeds[:1])
        point = LayerPoint(layer=layer, mean=base["mean"], categorical=run.scores, training_text=data.train_info)
        store.save(Part(PAGE_NAME, f"layer-{_short(model)}-{layer}", keys[layer], point.to_payload(),
                        runs=[run_record(command)]))
    return len(todo)


def run_sweep(page: PageConfig, store: ResultsStore, model: str, *, data_dir=None, command=()) -> int:
    """Every hyper-parameter variant of the categorical VAE on the last hidden state, and (``page.first_pc``) the
    first principal component of its training tokens, on the same data; returns how many parts were run."""
    enc = _encoder(page, model)
    layer = enc.n_states - 1
    base = replace(page.model_config, kind="categorical", input_dim=enc.identity.hidden_size)
    sums = text_checksums(page, page.small_sets, page.sweep_train_limit, data_dir)
    todo = []
    for vary, change in page.sweep:
        config = replace(base, **change)
        key = _tested_key(part_key(page, model_key(enc.identity), sums, layer=layer, config=config,
                                   seeds=page.seeds[:1], train_limit=page.sweep_train_limit))
        name = f"sweep-{_short(model)}-{variant_name(vary, change)}"
        if store.load(PAGE_NAME, name, key) is None:
            todo.append((vary, change, config, key, name))
    pc_key = _tested_key({**part_key(page, model_key(enc.identity), sums, layer=layer, config=base, seeds=[],
                                     train_limit=page.sweep_train_limit),
                            "what": "first principal component, and per word type"})
    pc_name = f"pc-{_short(model)}"
    pc_todo = page.first_pc and store.load(PAGE_NAME, pc_name, pc_key) is None
    if not todo and not pc_todo:
        return 0
    data = _prepare(page, enc, page.small_sets, (layer,), page.sweep_train_limit, data_dir)
    _save_gold(store, data, sums, command)
    if pc_todo:
        pc = FirstPCResult(**evaluate_first_pc(data, layer, aggregation=page.aggregation, keep_predictions=True),
                           training_text=data.train_info)
        store.save(Part(PAGE_NAME, pc_name, pc_key, pc.to_payload(), runs=[run_record(command)]))
    for vary, change, config, key, name in todo:
        run = _train(page, data, config, layer, page.seeds[:1])
        row = SweepRow(vary=vary, change=dict(change), config=run.config, scores=run.scores,
                       train_seconds=run.train_seconds, training_text=data.train_info, predictions=run.predictions)
        store.save(Part(PAGE_NAME, name, key, row.to_payload(), runs=[run_record(command)]))
    return len(todo) + int(pc_todo)
