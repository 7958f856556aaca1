"""``layerwise ablate`` and the ``ablations`` page: the BERT-LC ablations for one model, part by part.

Every part (one STS set, one transfer task, one limited-data task) is a part of a
:class:`~layerwise.benchmarks.store.ResultsStore` (page ``ablations``), keyed on the model identity, max length,
dtype, the data checksum and the part's protocol settings; a re-run with the same settings reuses it, a re-run
with any setting changed computes it afresh.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from layerwise.benchmarks.lc.ablation import (
    LIMITED_FRACTIONS,
    LimitedAblation,
    SizeAblation,
    ablate_sts,
    ablate_transfer,
    limited_data,
    seeded_splits,
)
from layerwise.benchmarks.lc.run import encode_pairs
from layerwise.benchmarks.lc.transfer_run import encode_task
from layerwise.benchmarks.schema import check_schema, stamp
from layerwise.benchmarks.store import Part, ResultsStore, model_key
from layerwise.data import load_sts
from layerwise.data.checksum import content_checksum
from layerwise.data.senteval import canonical_task, load_transfer
from layerwise.data.sts import STSData
from layerwise.encoders.layer_encoder import LayerEncoder, ModelIdentity
from layerwise.encoders.registry import DEFAULT_MODEL
from layerwise.evaluation.classification import CLASSIFIER
from layerwise.methods.lc.screen import DEFAULT_RIDGE_ALPHA
from layerwise.reports import environment

logger = logging.getLogger(__name__)

__all__ = ["ABLATION_SCHEMA", "AblationConfig", "AblationPart", "AblationResult", "PAGE", "part_key",
           "run_ablations"]

PAGE = "ablations"
ABLATION_SCHEMA = 1
KINDS = ("sts", "transfer", "limited")


@dataclass(frozen=True)
class AblationConfig:
    """(a) number of layers and (b) layer exclusion on ``sts`` and ``tasks``, (c) limited data on ``limited_tasks``."""

    model: str = DEFAULT_MODEL
    sts: tuple[str, ...] = ("stsb", "sickr")
    tasks: tuple[str, ...] = ("mr", "cr", "subj", "trec")
    limited_tasks: tuple[str, ...] = ("mr", "subj", "trec")
    fractions: tuple[float, ...] = LIMITED_FRACTIONS  # (c) train-dev fractions kept
    limited_seeds: int = 10  # (c) seeds 0 .. limited_seeds - 1 of the nested cuts
    aggregation: str = "all"  # STS12-16 subsets combined (see evaluation.metrics)
    n_splits: int = 5  # STS dev/test splits
    dev_size: int = 350  # STS dev pairs per split
    n_outer: int = 10  # transfer outer splits
    n_inner: int = 10  # transfer inner splits
    seed: int = 0
    n_jobs: int = 2  # threads; does not change the numbers
    data_dir: str | None = None
    encoder_options: dict = field(default_factory=dict)

    def settings(self) -> dict:
        """kind -> the protocol settings of its parts (what a part's key and the page show)."""
        return {"sts": {"aggregation": self.aggregation, "n_splits": self.n_splits, "dev_size": self.dev_size,
                        "seed": self.seed},
                "transfer": {"n_outer": self.n_outer, "n_inner": self.n_inner, "seed": self.seed},
                "limited": {"fractions": [float(f) for f in self.fractions],
                            "seeds": list(range(self.limited_seeds)), "n_inner": self.n_inner,
                            "test": f"one stratified 85/15 split (seed {self.seed}) for every fraction and seed"}}

    def to_dict(self) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, d: dict) -> "AblationConfig":
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})


@dataclass
class AblationPart:
    """One finished part: its numbers (as ``ablation.py`` returns them) and how they were computed."""

    kind: str  # "sts" | "transfer" | "limited"
    name: str  # data set or task
    settings: dict
    result: SizeAblation | LimitedAblation  # (a) + (b) for "sts" and "transfer", (c) for "limited"
    seconds: float
    finished: str | None = None
    load_average_at_finish: list[float] | None = None
    environment: dict | None = None
    data_checksum: str | None = None
    migrated_from: str | None = None
    model: dict | None = None  # ModelIdentity.to_dict() of the model that computed it

    def to_dict(self) -> dict:
        return {**{f: getattr(self, f) for f in self.__dataclass_fields__}, "result": self.result.to_dict()}

    @classmethod
    def from_dict(cls, d: dict) -> "AblationPart":
        kind = LimitedAblation if d["kind"] == "limited" else SizeAblation
        return cls(**{**d, "result": kind.from_dict(d["result"])})

    def payload(self) -> dict:
        return stamp("ablation-part", ABLATION_SCHEMA, {"part": self.to_dict()})

    @classmethod
    def from_payload(cls, d: dict, where: str = "ablation part") -> "AblationPart":
        check_schema(d, "ablation-part", ABLATION_SCHEMA, where=where)
        return cls.from_dict(d["part"])


@dataclass
class AblationResult:
    model: ModelIdentity
    settings: dict  # AblationConfig.settings()
    environment: dict
    sts: dict[str, AblationPart] = field(default_factory=dict)
    transfer: dict[str, AblationPart] = field(default_factory=dict)
    limited: dict[str, AblationPart] = field(default_factory=dict)

    def block(self, kind: str) -> dict[str, AblationPart]:
        return getattr(self, kind)

    def to_dict(self) -> dict:
        return stamp("ablations", ABLATION_SCHEMA, {
            "model": self.model.to_dict(), "settings": self.settings, "environment": self.environment,
            **{k: {n: p.to_dict() for n, p in self.block(k).items()} for k in KINDS}})

    @classmethod
    def from_dict(cls, d: dict) -> "AblationResult":
        check_schema(d, "ablations", ABLATION_SCHEMA)
        blocks = {k: {n: AblationPart.from_dict(p) for n, p in d[k].items()} for k in KINDS}
        return cls(ModelIdentity.from_dict(d["model"]), d["settings"], d["environment"], **blocks)


def part_key(identity: ModelIdentity, encoder: dict, kind: str, data: dict, settings: dict) -> dict:
    """Every setting that changes a part's numbers: model, max length, dtype, data (name, split, checksum), protocol."""
    protocol = dict(settings)
    if kind != "sts":
        protocol.update(classifier=dict(CLASSIFIER), ridge_alpha=DEFAULT_RIDGE_ALPHA)
    return {"model": model_key(identity), "max_length": encoder["max_length"], "dtype": encoder["dtype"],
            "kind": kind, "data": data, "protocol": protocol}


def part_name(identity: ModelIdentity, kind: str, name: str) -> str:
    return f"{Path(identity.name).name}-{kind}-{name}"


def run_ablations(config: AblationConfig, store: ResultsStore, *, command: list[str] | None = None,
                  pairs: Sequence[STSData] = ()) -> AblationResult:
    """Every part of ``config``, each reused from ``store`` when its key matches, else computed and saved.

    ``pairs``: more STS parts from data the caller read (e.g. the user's files), named by their ``name``. One whose
    ``subsets`` are all "dev" or "test" (a dev file and a test file stacked) is chosen on its dev rows and scored
    on its test rows (one split) instead of the seeded splits."""
    from tqdm.auto import tqdm

    tasks = [canonical_task(t) for t in config.tasks]  # fail early on an unknown name
    limited_tasks = [canonical_task(t) for t in config.limited_tasks]
    own = {d.name: d for d in pairs}
    encoder = LayerEncoder(config.model, **config.encoder_options)
    env = environment(command)
    out = AblationResult(encoder.identity, config.settings(), env)
    plan = [("sts", n) for n in [*config.sts, *own]] + [("transfer", t) for t in tasks] + \
        [("limited", t) for t in limited_tasks]
    show = logger.isEnabledFor(logging.INFO)
    for kind, name in tqdm(plan, desc="ablations", unit="part", disable=not show):
        out.block(kind)[name] = _run_part(encoder, config, store, (kind, name), env, own.get(name) if kind == "sts"
                                          else None)
    return out


def _dev_test(data) -> list[tuple[np.ndarray, np.ndarray]] | None:
    """The one (dev rows, test rows) split of a stacked dev file + test file, else None (seeded splits)."""
    subsets = np.asarray(getattr(data, "subsets", []))
    if len(subsets) and set(subsets.tolist()) == {"dev", "test"}:
        return [(np.flatnonzero(subsets == "dev"), np.flatnonzero(subsets == "test"))]
    return None


def _run_part(encoder: LayerEncoder, config: AblationConfig, store: ResultsStore, which: tuple[str, str],
              env: dict, data=None) -> AblationPart:
    kind, name = which
    settings = config.settings()[kind]
    if data is None:
        data = load_sts(name, data_dir=config.data_dir) if kind == "sts" else load_transfer(name,
                                                                                            data_dir=config.data_dir)
    elif _dev_test(data) is not None:
        settings = {**settings, "splits": "chosen on the dev file, scored on the test file (one split)"}
    info = {"name": data.name, "split": getattr(data, "split", None), "checksum": content_checksum(data)}
    enc = {"max_length": encoder.max_length, "dtype": encoder.dtype}
    key = part_key(encoder.identity, enc, kind, info, settings)
    pname = part_name(encoder.identity, kind, name)
    stored = store.load(PAGE, pname, key)
    if stored is not None:
        return AblationPart.from_payload(stored.payload, where=str(store.path(PAGE, pname, key)))
    t0 = time.perf_counter()
    res = _compute(encoder, config, kind, data)
    res = type(res).from_dict(json.loads(json.dumps(res.to_dict(), default=_jsonable)))  # plain floats and ints
    part = AblationPart(kind, name, settings, res,
                        time.perf_counter() - t0, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                        [round(x, 2) for x in os.getloadavg()], env, info["checksum"], None,
                        encoder.identity.to_dict())
    run = {"started": env["date"], "command": env["command"],
           "load_at_start": env["machine"].get("load_average_1_5_15"), "load_at_save": part.load_average_at_finish}
    store.save(Part(PAGE, pname, key, part.payload(), True, [run]))
    return part


def _compute(encoder: LayerEncoder, config: AblationConfig, kind: str, data) -> SizeAblation | LimitedAblation:
    from tqdm.auto import tqdm

    if kind == "sts":
        s1, s2, _ = encode_pairs(encoder, data)
        splits = _dev_test(data) or seeded_splits(len(data.scores), n_splits=config.n_splits,
                                                  dev_size=config.dev_size, seed=config.seed)
        return ablate_sts(s1, s2, data.scores, splits=splits, groups=np.asarray(data.subsets),
                          aggregation=config.aggregation)
    features, _ = encode_task(encoder, data, head=False)
    if kind == "transfer":
        return ablate_transfer(features, n_outer=config.n_outer, n_inner=config.n_inner, seed=config.seed,
                               n_jobs=config.n_jobs)
    fractions = [float(f) for f in config.fractions]
    with tqdm(total=config.limited_seeds * len(fractions), desc=f"{data.name} limited data", unit="fit",
              disable=not logger.isEnabledFor(logging.INFO), leave=False) as bar:
        return limited_data(features, fractions=fractions, seeds=range(config.limited_seeds),
                            n_inner=config.n_inner, n_jobs=config.n_jobs, split_seed=config.seed, progress=bar)


def _jsonable(o):
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, tuple):
        return list(o)
    raise TypeError(f"cannot write a {type(o).__name__} to JSON")
