"""Typed results of a Latte-Mix run (``layerwise lattemix``) and their versioned JSON edge.

:func:`~layerwise.benchmarks.lattemix.run.run_lattemix` returns a :class:`LatteMixResult`; ``to_dict`` writes
``{"kind": "lattemix", "schema": 1, ...}`` (:func:`~layerwise.benchmarks.schema.stamp`) and ``from_dict`` reads it
back after :func:`~layerwise.benchmarks.schema.check_schema`. :class:`KindResult` (one model kind over seeds) is
also a part of the results page's stored ``main-*`` parts (``grid.MainResult``), so its fields are that JSON's.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from layerwise.benchmarks.schema import check_schema, stamp
from layerwise.encoders.layer_encoder import ModelIdentity
from layerwise.methods.lattemix.config import MODEL_KINDS, LatteMixConfig
from layerwise.methods.lattemix.train import TrainConfig

__all__ = ["LATTEMIX_SCHEMA", "DataSetInfo", "KindResult", "LatteMixResult", "LatteMixRun", "TrainingText"]

LATTEMIX_SCHEMA = 1
TRAIN_SOURCES = ("snli", "wiki")


@dataclass(frozen=True)
class LatteMixRun:
    """One Latte-Mix experiment: which model, data, hidden state, model kinds and seeds, and how they train."""

    model: str = "all-MiniLM-L6-v2"  # built-in name or folder
    datasets: tuple[str, ...] = ("stsb", "sickr")  # STS sets evaluated (never trained on)
    layer: int = -1  # hidden state (0 = embedding output, -1 = last)
    kinds: tuple[str, ...] = MODEL_KINDS  # token models trained
    seeds: tuple[int, ...] = (0, 1, 2)  # one model per seed; the first also samples the training text
    config: LatteMixConfig = LatteMixConfig()  # model hyper-parameters (``kind`` is set per entry of ``kinds``)
    train: TrainConfig = TrainConfig()
    train_sources: tuple[str, ...] = TRAIN_SOURCES
    train_limit: int | None = None  # training sentences (None: all)
    include_special: bool = False  # special tokens in the mixtures
    aggregation: str = "all"  # STS12-16 subsets: "all", "wmean" or "mean"

    def __post_init__(self) -> None:
        bad = [k for k in self.kinds if k not in MODEL_KINDS]
        if bad or not self.kinds:
            raise ValueError(f"unknown model kinds {bad or 'none given'}; valid: {', '.join(MODEL_KINDS)}")
        if not self.seeds:
            raise ValueError("seeds is empty: give at least one seed, e.g. (0,)")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "LatteMixRun":
        """Back from :meth:`to_dict` (or its JSON: lists become tuples again)."""
        known = set(cls.__dataclass_fields__)
        if set(d) - known:
            raise ValueError(f"unknown LatteMixRun fields {sorted(set(d) - known)}; valid: {sorted(known)}")
        tuples = {k: tuple(d[k]) for k in ("datasets", "kinds", "seeds", "train_sources") if k in d}
        nested = {k: f(d[k]) for k, f in (("config", LatteMixConfig.from_dict), ("train", lambda t: TrainConfig(**t)))
                  if k in d}
        return cls(**{**d, **tuples, **nested})


@dataclass(frozen=True)
class TrainingText:
    """The unlabeled training sentences (``training_sentences``' description, plus the token count)."""

    sources: dict[str, int]  # source -> sentences it offered
    excluded_as_evaluation_sentences: int  # dropped because an evaluated pair holds them
    n_sentences: int  # sentences trained on
    limit: int | None  # the sample size asked for (None: all)
    note: str
    n_tokens: int | None = None  # token vectors trained on (None: not encoded yet)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "TrainingText":
        return cls(**d)


@dataclass(frozen=True)
class DataSetInfo:
    """One evaluated STS set."""

    split: str
    n_pairs: int
    source: str  # the folder read


@dataclass(frozen=True)
class KindResult:
    """One model kind trained per seed on one hidden state: metric -> set -> Spearman x100 per seed."""

    config: dict  # LatteMixConfig.to_dict() (input_dim and kind set)
    train: dict  # TrainConfig.to_dict() (the seed field: the first seed's)
    seeds: list
    layer: int
    include_special: bool
    scores: dict  # metric -> data set -> [per seed]
    train_seconds: list  # per seed
    final_loss: list  # per seed: mean loss over the last 5% of steps
    final_kl: list  # per seed: mean KL over the last 5% of steps
    # metric -> data set -> [per seed] each pair's similarity as dense ranks (unit_outputs.pack_ranks), kept for the
    # results page's paired tests; {}: not kept
    predictions: dict = field(default_factory=dict)

    @property
    def model_config(self) -> LatteMixConfig:
        return LatteMixConfig.from_dict(self.config)


@dataclass
class LatteMixResult:
    """The result of :func:`~layerwise.benchmarks.lattemix.run.run_lattemix`: poolings of one hidden state and
    each trained model kind, on every evaluated set."""

    settings: LatteMixRun
    model: ModelIdentity
    layer: int  # the hidden state, non-negative (0 = embedding output)
    aggregation: str
    data: dict[str, DataSetInfo]  # set name -> what was scored, in run order
    training_text: TrainingText
    baselines: dict[str, dict[str, float]]  # pooling -> set -> Spearman x100
    runs: dict[str, KindResult]  # model kind -> its seeds' results
    seconds: dict[str, float]  # encode_train, encode_eval
    environment: dict = field(default_factory=dict)  # reports.environment of the command (set by the CLI)

    @property
    def seeds(self) -> list:
        """The seeds of the trained models ([] when none was trained)."""
        return next(iter(self.runs.values())).seeds if self.runs else []

    def to_dict(self) -> dict:
        return stamp("lattemix", LATTEMIX_SCHEMA, {
            "settings": self.settings.to_dict(), "model": self.model.to_dict(), "layer": self.layer,
            "aggregation": self.aggregation, "data": {k: asdict(v) for k, v in self.data.items()},
            "training_text": self.training_text.to_dict(), "baselines": self.baselines,
            "runs": {k: asdict(v) for k, v in self.runs.items()}, "seconds": self.seconds,
            "environment": self.environment})

    @classmethod
    def from_dict(cls, d: dict, where: str = "Latte-Mix results") -> "LatteMixResult":
        check_schema(d, "lattemix", LATTEMIX_SCHEMA, where)
        return cls(LatteMixRun.from_dict(d["settings"]), ModelIdentity.from_dict(d["model"]), d["layer"],
                   d["aggregation"], {k: DataSetInfo(**v) for k, v in d["data"].items()},
                   TrainingText.from_dict(d["training_text"]), d["baselines"],
                   {k: KindResult(**v) for k, v in d["runs"].items()}, d["seconds"], d.get("environment", {}))
