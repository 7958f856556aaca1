"""One-off: move the finished layer-attention and Latte-Mix results into the results store (nothing recomputed).

Sources: ``docs/results/state/layer-attention-frozen/<objective>/<pooler>/seed<n>.json`` (frozen grid),
``docs/results/layer-attention.json`` (the encoder-trained runs exist only there) and ``docs/results/lattemix.json``.
Each run becomes one store part under ``docs/results/state/<page>/`` with the key the library computes
(:func:`layerwise.methods.layer_attention.grid.run_key`, :mod:`layerwise.methods.lattemix.page_parts`): the model
hashes come from the installed model folder when the recorded weights sha256 equals the installed one (else the
part keeps the recorded hash and ``None`` for what cannot be checked, so a later run recomputes it rather than
trust it), the data checksums from the data folder. Each part records that it was migrated, from which file, with
the original run's date, command and environment. The pooler ``first_last_mean`` is renamed ``first0_last_mean``.

    PYTHONPATH=src python scripts/migrate_la_lattemix_state.py --data-dir /work/shared/data [--delete-old]
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import logging
from pathlib import Path

from layerwise.encoders.registry import BUILTIN_MODELS
from layerwise.experiments.store import Part, ResultsStore

logger = logging.getLogger("migrate_la_lattemix_state")

REPO = Path(__file__).resolve().parents[1]
RENAMED = {"first_last_mean": "first0_last_mean"}


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def migrated_run(env: dict, source: Path, note: str = "") -> dict:
    """The run record of a migrated part: the original run's date, command and environment, and where it came from."""
    rec = {"started": env["date"], "command": env["command"], "environment": env,
           "migrated_from": str(source.relative_to(REPO) if source.is_relative_to(REPO) else source),
           "migrated_on": _now()}
    if note:
        rec["note"] = note
    return rec


def installed_model_key(name: str, recorded_sha: str | None) -> tuple[dict, str]:
    """The model part of a key from the installed folder, when its weights are the ones the results used."""
    from layerwise.encoders.layer_encoder import LayerEncoder
    from layerwise.encoders.registry import ModelNotFoundError
    from layerwise.experiments.store import model_key

    expected = recorded_sha or BUILTIN_MODELS[name].sha256
    try:
        key = model_key(LayerEncoder(name, cache_dir=False).identity)
    except ModelNotFoundError:
        return ({"name": name, "weights_sha256": expected, "tokenizer_sha256": None, "config_sha256": None},
                f"{name} is not installed here: tokenizer and config hashes unknown, weights sha256 as recorded")
    if key["weights_sha256"] != expected:
        raise SystemExit(f"installed {name} weights sha256 {key['weights_sha256'][:12]} differ from the results' "
                         f"{expected[:12]}: the results were not computed with this model; not migrating them")
    how = "recorded" if recorded_sha else "not recorded by the run; the published sha256 of the built-in model"
    return key, f"model hashes from the installed {name} (weights sha256 {how}, equal to the installed one)"


def _run_result(old: dict):
    from layerwise.methods.layer_attention.grid import RunResult, SearchRow

    train = old["train"]
    extra = {k: v for k, v in train.items() if k not in ("history", "config", "training_data", "n_examples", "output")}
    rows = [tuple(SearchRow.from_search(r) for r in old.get(k, {}).get("results", ()))
            for k in ("retrieval", "retrieval_without_pooler")]
    return RunResult(old["regime"], old["objective"], RENAMED.get(old["pooler"], old["pooler"]), old["seed"],
                     dict(old["sts"]), train["history"], train["training_data"], train["n_examples"], rows[0],
                     rows[1], checkpoint=train.get("output"), extra=extra)


def migrate_layer_attention(store: ResultsStore, data_dir: str, results: Path) -> list[Path]:
    from layerwise.methods.layer_attention.experiment import PAGE_NAME as PAGE, data_checksums, load_grid_data
    from layerwise.methods.layer_attention.grid import GridConfig, run_key, run_name

    page_json = results / "layer-attention.json"
    doc = json.loads(page_json.read_text())
    config = GridConfig()
    model, model_note = installed_model_key(doc["model"], None)
    sums = data_checksums(load_grid_data(config, data_dir))
    frozen_dir = results / "state" / "layer-attention-frozen"
    sources = [(json.loads(f.read_text()), f) for f in sorted(frozen_dir.rglob("seed*.json"))]
    sources += [(r, page_json) for r in doc["runs"] if r["regime"] == "encoder"]
    done = []
    for old, source in sources:
        result = _run_result(old)
        key = run_key(config, model, sums, result.regime, result.objective, result.pooler, result.seed)
        if key["training"] != json.loads(json.dumps(result.history["config"])):
            raise SystemExit(f"{source}: training config {result.history['config']} is not the page's "
                             f"{key['training']}; not migrating it")
        if bool(result.search_with_pooler) != (key["retrieval"] is not None):
            raise SystemExit(f"{source}: retrieval present={bool(result.search_with_pooler)} but the grid says "
                             f"{key['retrieval'] is not None} for {result.pooler} seed {result.seed}")
        note = model_note + ("; the frozen-run file recorded no environment: the page run's is kept"
                             if source != page_json else "")
        part = Part(PAGE, run_name(result.regime, result.objective, result.pooler, result.seed), key,
                    result.to_payload(), runs=[migrated_run(doc["environment"], source, note)])
        store.save(part)
        done.append(source)
    logger.info("layer-attention: %d runs migrated", len(sources))
    return sorted(set(done))


def _check_text(part: str, recorded: dict, page, sets, limit, data_dir) -> dict:
    """Data checksums for a Latte-Mix part, after checking the training text is the one the run described."""
    from layerwise.methods.lattemix.experiment import text_checksums
    from layerwise.methods.lattemix.run import training_sentences

    sums = text_checksums(page, sets, limit, data_dir)
    from layerwise.data import load_sts

    exclude = {s for n in sets for d in [load_sts(n, data_dir=data_dir)] for s in (*d.sentences1, *d.sentences2)}
    _, info = training_sentences(data_dir, sources=page.train_sources, exclude=exclude, limit=limit,
                                 seed=page.text_seed)
    for k in ("sources", "excluded_as_evaluation_sentences", "n_sentences", "limit"):
        if info[k] != recorded[k]:
            raise SystemExit(f"lattemix {part}: training text {k} {info[k]} here, {recorded[k]} in the results")
    return sums


def migrate_lattemix(store: ResultsStore, data_dir: str, source: Path) -> list[Path]:
    from dataclasses import replace

    from layerwise.methods.lattemix.experiment import PAGE_NAME as PAGE
    from layerwise.methods.lattemix.grid import (KindResult, LayerPoint, MainResult, PageConfig, SweepRow, part_key,
                                                 variant_name)

    doc = json.loads(source.read_text())
    page, env = PageConfig(), doc["environment"]
    if list(doc["seeds"]) != list(page.seeds) or list(doc["small_sets"]) != list(page.small_sets):
        raise SystemExit(f"{source}: seeds/small sets {doc['seeds']}/{doc['small_sets']} are not the page's")
    first = None
    for main in doc["main"]:
        m = main["model"]
        model, note = installed_model_key(m["name"], m["weights_sha256"])
        first = first or (m, model, note)
        config = replace(page.model_config, input_dim=m["hidden_size"])
        if config.to_dict() != main["runs"]["categorical"]["config"]:
            raise SystemExit(f"{source}: {m['name']} categorical config differs from the page's default")
        sums = _check_text(f"main {m['name']}", main["training_text"], page, list(main["data"]), page.train_limit,
                           data_dir)
        key = part_key(page, model, sums, layer=main["layer"], config=config, seeds=page.seeds,
                       train_limit=page.train_limit, kinds=page.kinds)
        result = MainResult(**{**main, "runs": {k: KindResult(**v) for k, v in main["runs"].items()}})
        store.save(Part(PAGE, f"main-{m['name']}", key, result.to_payload(), runs=[migrated_run(env, source, note)]))
    m, model, note = first
    base = replace(page.model_config, kind="categorical", input_dim=m["hidden_size"])
    lc = doc["layers"]
    sums = _check_text("curve", lc["training_text"], page, page.small_sets, page.layer_train_limit, data_dir)
    for layer in lc["layers"]:
        key = part_key(page, model, sums, layer=layer, config=base, seeds=page.seeds[:1],
                       train_limit=page.layer_train_limit)
        point = LayerPoint(layer=layer, mean=lc["mean"][str(layer)], categorical=lc["categorical"][str(layer)],
                           training_text=lc["training_text"])
        store.save(Part(PAGE, f"layer-{m['name']}-{layer}", key, point.to_payload(),
                        runs=[migrated_run(env, source, note)]))
    sums = _check_text("sweep", doc["sweep_training_text"], page, page.small_sets, page.sweep_train_limit, data_dir)
    for row in doc["sweep"]:
        config = replace(base, **row["change"])
        if config.to_dict() != row["config"]:
            raise SystemExit(f"{source}: sweep row {row['vary']} {row['change']} config differs from the page's")
        key = part_key(page, model, sums, layer=m["n_layers"], config=config, seeds=page.seeds[:1],
                       train_limit=page.sweep_train_limit)
        store.save(Part(PAGE, f"sweep-{m['name']}-{variant_name(row['vary'], row['change'])}", key,
                        SweepRow(**row, training_text=doc["sweep_training_text"]).to_payload(),
                        runs=[migrated_run(env, source, note)]))
    logger.info("lattemix: %d main tables, %d hidden states, %d sweep rows migrated", len(doc["main"]),
                len(lc["layers"]), len(doc["sweep"]))
    return [source]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", required=True)
    p.add_argument("--results", default=str(REPO / "docs" / "results"))
    p.add_argument("--pages", nargs="+", default=["layer-attention", "lattemix"])
    p.add_argument("--delete-old", action="store_true", help="remove the old state files once the store holds them")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    results = Path(args.results)
    store = ResultsStore(results / "state")
    old = []
    if "layer-attention" in args.pages:
        old += migrate_layer_attention(store, args.data_dir, results)
    if "lattemix" in args.pages:
        old += migrate_lattemix(store, args.data_dir, results / "lattemix.json")
    if args.delete_old:
        for f in old:
            f.unlink()
            logger.info("removed %s", f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
