"""One-off conversion of the BERT-LC results written by the old scripts into results-store parts (no recomputing).

Converts ``state/transfer/**`` (per-task files, ``last-run.json``, ``check-*.json``),
``state/ablations/*.parts.json`` and the rows of ``lc-sts.json`` into parts under ``state/<page>/`` with the keys
the current code computes: model hashes from the installed model folders (refused when the recorded weights
sha256 differs from the installed one), data checksums from the data folder through the loaders, and the
settings the old scripts ran with. Every part records ``migrated_from`` and keeps the original runs'
environment, command, date and history.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from layerwise.data import load_sts
from layerwise.data.checksum import content_checksum
from layerwise.data.senteval import load_transfer
from layerwise.encoders.layer_encoder import LayerEncoder, ModelIdentity
from layerwise.experiments.store import Part, ResultsStore, model_key
from layerwise.methods.lc import ablation_run, transfer_run
from layerwise.methods.lc.ablation import LimitedAblation, SizeAblation
from layerwise.methods.lc.pages import SEARCH_SETTINGS, run_entry, sts_part_key
from layerwise.methods.lc.run import STS_SCHEMA
from layerwise.methods.lc.transfer import TransferProtocol, TransferResult
from layerwise.methods.lc.transfer_check import ShortcutCheck, check_key

logger = logging.getLogger(__name__)

__all__ = ["migrate_lc_results"]

_ENCODER = {"max_length": 256, "dtype": "float32"}  # what the old scripts ran with (LayerEncoder defaults)


class _Identities:
    def __init__(self):
        self._known: dict[str, ModelIdentity] = {}

    def __call__(self, recorded: dict) -> ModelIdentity:
        name = recorded["name"]
        if name not in self._known:
            self._known[name] = LayerEncoder(name, cache_dir=False).identity
        ident = self._known[name]
        if ident.weights_sha256 != recorded["weights_sha256"]:
            raise ValueError(f"{name}: recorded weights sha256 {recorded['weights_sha256'][:16]}… differs from the "
                             f"installed {ident.weights_sha256[:16]}…; install the model the results were made with")
        return ident


def migrate_lc_results(results_dir: str | Path, data_dir: str | Path) -> list[Path]:
    """Write the store parts for every old BERT-LC results file under ``results_dir`` (docs/results)."""
    results_dir = Path(results_dir)
    store = ResultsStore(results_dir / "state")
    ids = _Identities()
    written = []
    for path in sorted((results_dir / "state" / "transfer").glob("*/transfer-*.json")):
        written.append(_transfer_task(store, ids, path, data_dir, results_dir))
    for path in sorted((results_dir / "state" / "transfer").glob("*/last-run.json")):
        rec = json.loads(path.read_text())
        model = path.parent.name
        ident = ids({"name": model, "weights_sha256": _recorded_weights(results_dir, model)})
        key = {"model": model_key(ident), "tasks": sorted(rec["tasks"])}
        written.append(store.save(Part(transfer_run.PAGE, f"last-run-{model}", key,
                                       {**rec, "model": model, "migrated_from": _rel(path, results_dir)})))
    for path in sorted((results_dir / "state" / "transfer").glob("check-*.json")):
        written.append(_check(store, ids, path, data_dir, results_dir))
    for path in sorted((results_dir / "state" / "ablations").glob("*.parts.json")):
        written += _ablations(store, ids, path, data_dir, results_dir)
    if (results_dir / "lc-sts.json").is_file():
        written += _lc_sts(store, ids, results_dir / "lc-sts.json", data_dir, results_dir)
    return written


def _rel(path: Path, root: Path) -> str:
    return f"docs/results/{path.relative_to(root).as_posix()}"


def _recorded_weights(results_dir: Path, model: str) -> str:
    for path in (results_dir / "state" / "transfer" / model).glob("transfer-*.json"):
        return json.loads(path.read_text())["model"]["weights_sha256"]
    raise FileNotFoundError(f"no transfer state for {model} under {results_dir}")


def _history(st: dict) -> list[dict]:
    if "runs" in st:
        return list(st["runs"])
    env = st.get("environment", {})
    return [{"started": env.get("date"), "command": env.get("command"),
             "load_at_start": env.get("machine", {}).get("load_average_1_5_15"),
             "load_at_save": st.get("load_average_at_save"),
             "splits": [0, len(st.get("result", {}).get("splits", []))], "protocol_seconds": st.get("protocol_seconds")}]


def _transfer_task(store, ids, path: Path, data_dir, root: Path) -> Path:
    st = json.loads(path.read_text())
    ident = ids(st["model"])
    p = st["protocol"]
    protocol = TransferProtocol(n_outer=p["n_outer"], n_inner=p["n_inner"], max_layers=None, shortlist=p["shortlist"],
                                seed=p["seed"], ridge_alpha=p["ridge_alpha"], screen_dim=p.get("screen_dim"))
    data = load_transfer(st["task"], data_dir=data_dir)
    checksum = content_checksum(data)
    result = TransferResult.from_dict(st["result"])
    complete = bool(st.get("complete", len(result.splits) == result.n_outer))
    task = transfer_run.TaskRun(st["task"], ident, result, st["n_examples"], st["encode_seconds"],
                                st.get("first_encode_seconds", st["encode_seconds"]), st["protocol_seconds"],
                                st.get("head", "trained pooler head"), st["environment"], _history(st), complete,
                                checksum, st.get("cache"), _rel(path, root))
    key = transfer_run.task_key(ident, _ENCODER, checksum, data.name, protocol, True)
    return store.save(Part(transfer_run.PAGE, transfer_run.part_name(ident, data.name), key, task.payload(),
                           complete, task.runs))


def _check(store, ids, path: Path, data_dir, root: Path) -> Path:
    st = json.loads(path.read_text())
    ident = ids(st["model"])
    checksum = content_checksum(load_transfer(st["task"], data_dir=data_dir))
    key = check_key(ident, checksum, ShortcutCheck(task=st["task"]))
    runs = [{"started": None, "command": "python scripts/transfer_results.py (shortcut check)", "load_at_start": None,
             "load_at_save": None, "splits": [0, len(st["splits"])]}]
    return store.save(Part(transfer_run.PAGE, f"check-{st['task']}", key,
                           {**st, "migrated_from": _rel(path, root)}, True, runs))


def _ablations(store, ids, path: Path, data_dir, root: Path) -> list[Path]:
    old = json.loads(path.read_text())
    model = path.name[len("ablations-"):-len(".parts.json")]
    page_json = root / "ablations" / f"ablations-{model}.json"
    env = json.loads(page_json.read_text())["environment"] if page_json.is_file() else None
    settings = ablation_run.AblationConfig().settings()
    out = []
    for old_key, p in old.items():
        kind, name = old_key.split(":", 1)
        ident = ids({"name": model, "weights_sha256": p["weights_sha256"]})
        if p["settings"] != settings[kind]:
            raise ValueError(f"{path}: part {old_key} has settings {p['settings']}, not the defaults; convert by hand")
        data = load_sts(name, data_dir=data_dir) if kind == "sts" else load_transfer(name, data_dir=data_dir)
        info = {"name": data.name, "split": getattr(data, "split", None), "checksum": content_checksum(data)}
        result = (LimitedAblation if kind == "limited" else SizeAblation).from_dict(p["result"])
        part = ablation_run.AblationPart(kind, name, p["settings"], result, p["seconds"], p.get("finished"),
                                         p.get("load_average_at_finish"), env, info["checksum"], _rel(path, root),
                                         ident.to_dict())
        key = ablation_run.part_key(ident, _ENCODER, kind, info, p["settings"])
        run = {"started": p.get("finished"), "command": (env or {}).get("command"), "load_at_start": None,
               "load_at_save": p.get("load_average_at_finish")}
        out.append(store.save(Part(ablation_run.PAGE, ablation_run.part_name(ident, kind, name), key,
                                   part.payload(), True, [run])))
    return out


def _lc_sts(store, ids, path: Path, data_dir, root: Path) -> list[Path]:
    doc = json.loads(path.read_text())
    out = []
    for row in doc["rows"]:
        ident = ids(row["model"])
        prm = row["params"]
        if {k: prm[k] for k in ("n_splits", "dev_size", "seed")} != {k: SEARCH_SETTINGS[k] for k in
                                                                       ("n_splits", "dev_size", "seed")}:
            raise ValueError(f"{path}: row {prm} was run with other settings than the page's; convert by hand")
        data = load_sts(prm["dataset"], data_dir=data_dir)
        if data.split != row["data"]["split"] or len(data) != row["data"]["n_pairs"]:
            raise ValueError(f"{path}: row {prm} used split {row['data']['split']}, the loader gives {data.split}")
        info = {"name": data.name, "split": data.split, "checksum": content_checksum(data)}
        key = sts_part_key(ident, row["encoder"], info, prm["aggregation"], SEARCH_SETTINGS)
        payload = {**row, "schema": STS_SCHEMA, "migrated_from": _rel(path, root)}
        payload["data"] = {**row["data"], "checksum": info["checksum"]}
        name = f"{Path(prm['model']).name}-{prm['dataset']}-{prm['aggregation']}"
        out.append(store.save(Part("lc-sts", name, key, payload, True, [run_entry(row["environment"])])))
    return out
