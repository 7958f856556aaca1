"""Multi-task experiment settings: a frozen dataclass with a JSON round trip, and the named experiments.

The nine experiments of "BERTology: Improving Sentence Embeddings for Multi-Task Success" (Lee, CS224N) are in
:data:`EXPERIMENTS`; ``NAME+MIX`` (a softmax layer mix per task, trained with the rest) and ``NAME+SUBSET`` (a fixed
layer subset per task, chosen on the frozen encoder) are the layer-wise variants of any of them
(:func:`get_experiment`).
"""

from __future__ import annotations

import difflib
import json
import math
import re
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from layerwise.finite import check_rate
from layerwise.losses.nli import NLI_OBJECTIVES
from layerwise.methods.multitask.schedule import SCHEDULES
from layerwise.modules.heads import PAIR_FEATURES
from layerwise.reports import write_json

__all__ = ["EXPERIMENTS", "LAYER_MODES", "MIX_LR", "SCHEDULES", "TASKS", "MultitaskConfig", "get_experiment",
           "load_config", "experiment_names"]

_SAFE_NAME = re.compile(r"[A-Za-z0-9_+\-][A-Za-z0-9_.+\-]{0,127}")  # one path component, never . or ..
TASKS = ("sst", "para", "sts")  # the report's order: sentiment, paraphrase, similarity
LAYER_MODES = ("last", "mix", "subset")
STS_HEADS = ("linear", "cosine")


@dataclass(frozen=True)
class MultitaskConfig:
    name: str = "BASELINE"  # experiment name (recorded in results)
    para_features: str = "concat"  # PARA head input: "concat" [u; v], "abs_diff" [u; v; |u-v|], "cos" [u; v; cos]
    sts_head: str = "linear"  # "linear" on [u; v] (MSE to gold / 5) or "cosine" (cos(u, v), MSE to gold / 5)
    shared_layers: int = 0  # hidden layers (ReLU + dropout) shared by the PARA and STS heads (SHARED: 2)
    freeze_sst: bool = False  # train PARA + STS first, then only the SST head on the frozen encoder (the report's
    # FREEZE_SST and SST_TO_STS: "freezing all of the non-SST weights"): a larger transformer head, or with
    # sst_prototypes the prototype head, its prototypes embedded by the frozen encoder
    sst_transformer_layers: int = 4  # transformer layers of that larger SST head
    sst_prototypes: int = 0  # prototype sentences per SST label for the similarity-to-prototypes head (0: off)
    nli: str | None = None  # pre-finetuning objective on SNLI before the tasks ("regression", "contrastive", ...)
    nli_epochs: int = 1  # epochs of that pre-finetuning
    layers: str = "last"  # what each head reads: "last" layer mean, a per-task "mix" of all layers, or a "subset"
    schedule: str = "task_by_task"  # batch order within an epoch (see schedule.py)
    epochs: int = 10  # epochs over the task data (best dev overall kept); this library's default: the report does
    # not state its epoch count
    batch_size: int = 32  # the report's batch size
    lr: float = 2e-5  # encoder and head learning rate (the report's)
    mix_lr: float = 1e-3  # layer-mix weights (a fresh, tiny module: at 2e-5 it would barely move); +MIX: MIX_LR
    dropout: float = 0.1  # dropout of every head (the report's)
    temperature: float = 0.05  # tau of the contrastive NLI objective (the report's Eq. 3 has none, i.e. 1.0: +TAU1)
    margin: float = 1.0  # margin of the triplet NLI objective
    max_length: int = 128  # tokens per sentence
    limit: int | None = None  # at most this many training examples per task (None: all; for quick runs)
    eval_limit: int | None = None  # at most this many dev / test examples per task (None: all; for quick runs)
    split_seed: int = 0  # seed of the Quora 90 / 10 train / selection split (fixed across training seeds)

    def __post_init__(self) -> None:
        checks = [
            (self.para_features in PAIR_FEATURES, "para_features", f"one of {', '.join(PAIR_FEATURES)}"),
            (self.sts_head in STS_HEADS, "sts_head", f"one of {', '.join(STS_HEADS)}"),
            (self.shared_layers >= 0, "shared_layers", "an integer >= 0"),
            (self.sst_transformer_layers >= 1, "sst_transformer_layers", "an integer >= 1"),
            (self.sst_prototypes >= 0, "sst_prototypes", "an integer >= 0"),
            (self.nli is None or self.nli in NLI_OBJECTIVES, "nli", f"None or one of {', '.join(NLI_OBJECTIVES)}"),
            (self.nli_epochs >= 1, "nli_epochs", "an integer >= 1"),
            (self.layers in LAYER_MODES, "layers", f"one of {', '.join(LAYER_MODES)}"),
            (self.schedule in SCHEDULES, "schedule", f"one of {', '.join(SCHEDULES)}"),
            (self.epochs >= 1, "epochs", "an integer >= 1"),
            (self.batch_size >= 2, "batch_size", "an integer >= 2 (in-batch negatives need a batch)"),
            (check_rate(self.lr, "MultitaskConfig.lr") and check_rate(self.mix_lr, "MultitaskConfig.mix_lr"), "lr",
             "learning rates > 0"),
            (math.isfinite(self.temperature) and self.temperature > 0 and math.isfinite(self.margin), "temperature",
             "a finite temperature > 0 and a finite margin"),
            (_SAFE_NAME.fullmatch(self.name) is not None, "name", "a name of letters, digits and _ . + - (it names "
             "the run's folder inside OUTPUT, so no / and no leading dot)"),
            (0 <= self.dropout < 1, "dropout", "a probability in [0, 1)"),
            (self.max_length >= 2, "max_length", "an integer >= 2"),
            (self.limit is None or self.limit >= 2, "limit", "None or an integer >= 2"),
            (self.eval_limit is None or self.eval_limit >= 2, "eval_limit", "None or an integer >= 2"),
            (not (self.shared_layers and self.sts_head == "cosine"), "shared_layers",
             "0 with the cosine STS head (it has no layers to share)"),
            (not (self.shared_layers and self.para_features != "concat"), "para_features",
             "'concat' with shared_layers (the PARA and STS heads share layers on [u; v])"),
        ]
        for ok, name, fix in checks:
            if not ok:
                raise ValueError(f"MultitaskConfig.{name}={getattr(self, name)!r} is invalid: use {fix}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "MultitaskConfig":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown MultitaskConfig fields {unknown}; valid: {sorted(known)}")
        return cls(**data)

    def save(self, path: str | Path) -> Path:
        return write_json(Path(path), self.to_dict())


def load_config(path: str | Path) -> MultitaskConfig:
    """A :class:`MultitaskConfig` from a JSON file (``{"name": ..., field: value, ...}``); unknown fields refused."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read multitask config {path}: {exc}; "
                         "pass a JSON object of MultitaskConfig fields") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path} must hold a JSON object of MultitaskConfig fields")
    return MultitaskConfig.from_dict(data)


_HEAD_MOD = {"sts_head": "cosine", "para_features": "abs_diff"}

EXPERIMENTS: dict[str, MultitaskConfig] = {
    "BASELINE": MultitaskConfig(name="BASELINE"),
    "SHARED": MultitaskConfig(name="SHARED", shared_layers=2),
    "STS_PARA_HEAD_MOD": MultitaskConfig(name="STS_PARA_HEAD_MOD", **_HEAD_MOD),
    "STS_PARA_HEAD_MOD_1": MultitaskConfig(name="STS_PARA_HEAD_MOD_1", sts_head="cosine", para_features="cos"),
    "FREEZE_SST": MultitaskConfig(name="FREEZE_SST", freeze_sst=True),
    "SST_TO_STS": MultitaskConfig(name="SST_TO_STS", sst_prototypes=100),
    "NLI_REGRESSION": MultitaskConfig(name="NLI_REGRESSION", nli="regression", **_HEAD_MOD),
    "NLI_CONTRASTIVE": MultitaskConfig(name="NLI_CONTRASTIVE", nli="contrastive", **_HEAD_MOD),
    "NLI_TRIPLET": MultitaskConfig(name="NLI_TRIPLET", nli="triplet", **_HEAD_MOD),
}
# The +MIX experiments' layer-mix learning rate. Each task's mix gets one Adam step per batch of its task (125 steps
# in the results page's budget of 1 epoch over 4,000 examples), so its logits can move at most about 125 x mix_lr:
# at 1e-3 the first page run's weights went from 1/7 = 0.143 only to 0.129-0.160 (logits +-0.1, at that limit).
MIX_LR = 2e-2
_VARIANTS = {"MIX": {"layers": "mix", "mix_lr": MIX_LR}, "SUBSET": {"layers": "subset"},
             # the report's protocol where this library's default differs: SST_TO_STS+FROZEN trains PARA and STS
             # first, then the prototype SST head alone on the frozen encoder; NLI_CONTRASTIVE+TAU1 is Eq. 3 as
             # written (no temperature, i.e. 1.0, beside the default 0.05 of SimCSE); FREEZE_SST+HEADMOD freezes on
             # the cosine STS head and [u; v; |u - v|] PARA features of STS_PARA_HEAD_MOD, the heads the report's
             # later experiments build on (FREEZE_SST alone keeps BASELINE's linear STS head)
             "FROZEN": {"freeze_sst": True}, "TAU1": {"temperature": 1.0}, "HEADMOD": _HEAD_MOD}


def experiment_names() -> list[str]:
    """The nine named experiments and their one-variant forms (``+MIX``, ``+SUBSET``, ``+FROZEN``, ``+TAU1``,
    ``+HEADMOD``)."""
    return [*EXPERIMENTS, *(f"{n}+{v}" for n in EXPERIMENTS for v in _VARIANTS)]


def get_experiment(name: str, **overrides) -> MultitaskConfig:
    """The named experiment (``BASELINE``, ``NLI_TRIPLET+MIX``, ``SST_TO_STS+FROZEN+MIX``...) with ``overrides``
    (epochs, schedule...); variants apply left to right."""
    base, *variants = name.split("+")
    if base not in EXPERIMENTS or any(v not in _VARIANTS for v in variants):
        close = difflib.get_close_matches(name, experiment_names(), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise KeyError(f"no multitask experiment {name!r}.{hint} Valid: {', '.join(EXPERIMENTS)}, each optionally "
                       f"with {', '.join('+' + v for v in _VARIANTS)}")
    config = EXPERIMENTS[base]
    for variant in variants:
        config = replace(config, name=name, **_VARIANTS[variant])
    return replace(config, **overrides) if overrides else config
