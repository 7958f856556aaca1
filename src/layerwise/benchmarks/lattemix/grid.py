"""The Latte-Mix results page's settings, its typed parts and their store keys.

Three kinds of part: ``main-<model>`` (every STS set: poolings of the last hidden state and each model kind over
seeds), ``layer-<model>-<state>`` (the per-layer curve: mean pooling and the categorical VAE on one hidden state)
and ``sweep-<model>-<variant>`` (one hyper-parameter variant of the categorical VAE). Each key holds the model
identity, the checksums of the evaluation sets and of the training sentences, max length, dtype, the hidden state,
the model and training configs, the seeds and every other protocol option.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace

from layerwise.benchmarks.lattemix.results import KindResult
from layerwise.methods.lattemix.config import LatteMixConfig
from layerwise.methods.lattemix.train import TrainConfig

__all__ = ["FirstPCResult", "KindResult", "LayerPoint", "MainResult", "PageConfig", "SWEEP", "SweepRow", "part_key",
           "variant_name"]

STS_SETS = ("stsb", "sickr", "sts12", "sts13", "sts14", "sts15", "sts16")
# (what is varied, the change from the default), in page order
SWEEP: tuple[tuple[str, dict], ...] = (
    ("default", {}),
    *(("classes per group", {"n_classes": c}) for c in (8, 64)),
    *(("groups", {"n_groups": g}) for g in (1, 8, 64)),
    ("one group, many classes", {"n_groups": 1, "n_classes": 256}),
    *(("tau", {"tau": t}) for t in (0.5, 2.0)),
    *(("depth", {"depth": k}) for k in (2, 3)),
    # the paper's settings where this library's defaults differ, one at a time and together
    ("paper: tau", {"tau": 0.3}),
    ("paper: decoder depth", {"decoder_depth": 3}),
    ("paper: KL threshold", {"kl_threshold": 0.3}),
    ("paper: all three", {"tau": 0.3, "decoder_depth": 3, "kl_threshold": 0.3}),
)


@dataclass(frozen=True)
class PageConfig:
    models: tuple[str, ...] = ("all-MiniLM-L6-v2", "all-mpnet-base-v2")  # main tables; curve and sweep: the first
    sts_sets: tuple[str, ...] = STS_SETS  # main tables (those present in the data folder)
    small_sets: tuple[str, ...] = ("stsb", "sickr")  # per-layer curve and sweep
    seeds: tuple[int, ...] = (0, 1, 2)  # main tables; curve and sweep use the first
    kinds: tuple[str, ...] = ("categorical", "normal", "ae")
    model_config: LatteMixConfig = LatteMixConfig(n_classes=16, n_groups=32, tau=1.0)  # input_dim set per model
    train: TrainConfig = TrainConfig()
    train_limit: int = 20000  # training sentences, main tables
    layer_train_limit: int = 8000  # per-layer curve
    sweep_train_limit: int = 15000  # sweep
    train_sources: tuple[str, ...] = ("snli", "wiki")
    text_seed: int = 0  # which training sentences are sampled when limited
    include_special: bool = False  # special tokens in the mixtures
    aggregation: str = "all"  # STS12-16 subsets
    max_length: int = 256
    dtype: str = "float32"
    sweep: tuple[tuple[str, dict], ...] = SWEEP
    curve: bool = True  # per-layer curve of the first model
    run_sweep: bool = True
    first_pc: bool = True  # the first principal component of the token vectors (with the sweep's data)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class MainResult:
    """A model's main table: poolings of the last hidden state and each trained model kind."""

    model: dict  # ModelIdentity as a dict
    layer: int
    training_text: dict
    seconds: dict  # encode_train, encode_eval
    data: dict  # set -> {"split", "n_pairs"}
    baselines: dict  # pooling -> set -> Spearman x100
    runs: dict[str, KindResult]
    total_seconds: float
    baseline_predictions: dict = field(default_factory=dict)  # pooling -> set -> packed ranks; {}: not kept

    def to_payload(self) -> dict:
        return asdict(self)

    @classmethod
    def from_payload(cls, doc: dict) -> "MainResult":
        return cls(**{**doc, "runs": {k: KindResult(**v) for k, v in doc["runs"].items()}})


@dataclass(frozen=True)
class LayerPoint:
    """One hidden state of the per-layer curve: mean pooling and the categorical VAE (first seed)."""

    layer: int
    mean: dict  # set -> Spearman x100
    categorical: dict  # metric -> set -> [first seed]
    training_text: dict

    def to_payload(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class FirstPCResult:
    """The first principal component of the last hidden state's training tokens, and mean pooling without it."""

    share: float  # fraction of the token vectors' variance on the first principal component
    n_tokens: int  # training tokens it was fitted on (special tokens left out)
    scores: dict  # "mean" / "mean_pc1_removed" -> set -> Spearman x100 (no special tokens)
    training_text: dict = field(default_factory=dict)
    predictions: dict = field(default_factory=dict)  # the same keys -> set -> packed ranks; {}: not kept
    words: dict = field(default_factory=dict)  # the component per word type (run.first_pc_words); {}: not read

    def to_payload(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class SweepRow:
    vary: str
    change: dict
    config: dict
    scores: dict  # metric -> set -> [first seed]
    train_seconds: list
    training_text: dict = field(default_factory=dict)
    predictions: dict = field(default_factory=dict)  # metric -> set -> [first seed] packed ranks; {}: not kept

    def to_payload(self) -> dict:
        return asdict(self)


def variant_name(vary: str, change: dict) -> str:
    text = "-".join(f"{k}={v}" for k, v in change.items()) or "default"
    return re.sub(r"[^A-Za-z0-9=.+-]+", "_", f"{vary}-{text}")


def part_key(page: PageConfig, model: dict, data: dict, *, layer: int, config: LatteMixConfig,
             seeds, train_limit: int, kinds=None) -> dict:
    """The store key of one part. ``model``: :func:`~layerwise.benchmarks.store.model_key`; ``data``:
    {"eval": {set: checksum}, "train": checksum of the training sentences}."""
    return {
        "model": model,
        "data": data,
        "max_length": page.max_length,
        "dtype": page.dtype,
        "layer": int(layer),
        "config": config.to_dict(),
        "kinds": list(kinds) if kinds is not None else None,
        "train": replace(page.train, seed=0).to_dict(),  # the seed field is set per run from ``seeds``
        "seeds": [int(s) for s in seeds],
        "train_limit": train_limit,
        "train_sources": list(page.train_sources),
        "text_seed": page.text_seed,
        "include_special": page.include_special,
        "aggregation": page.aggregation,
    }
