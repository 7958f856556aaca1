"""TMFT settings: frozen dataclasses with a JSON round trip (every field is part of a run's results key)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from layerwise.encoders.registry import DEFAULT_MODEL

__all__ = ["DATASETS", "PRE_STEPS", "MLMConfig", "TMFTConfig", "WSConfig"]

PRE_STEPS = ("none", "ws", "mlm")
DATASETS = ("stsb", "sickr")  # built-in scored pairs: (train, dev, test) splits


@dataclass(frozen=True)
class WSConfig:
    """Word-similarity fine-tuning before TMFT (the paper's "TMFT WS + TMFT STS")."""

    sets: tuple[str, ...] = ("rg65", "ws353", "simlex999")  # pooled; the paper adds SimVerb-3500 ("simverb3500",
    # read where the data folder holds it: not in this machine's folder)
    split: tuple[float, float, float] = (0.70, 0.15, 0.15)  # train / dev (best epoch) / test, seeded
    epochs: int = 50
    batch_size: int = 128
    lr: float = 2e-5


@dataclass(frozen=True)
class MLMConfig:
    """Masked-language-model domain adaptation of the full encoder before TMFT ("MLM + TMFT STS")."""

    sources: tuple[str, ...] = ("snli", "wiki")  # SNLI dev+test sentences and the wiki1m head (not SNLI+MNLI train)
    epochs: int = 1
    batch_size: int = 32
    grad_accumulation: int = 8  # 256 sentences per optimisation step, as the paper
    lr: float = 5e-5
    mlm_probability: float = 0.15  # of which 80 % [MASK], 10 % random, 10 % kept
    limit: int | None = None  # at most this many sentences (seeded sample); None: all


@dataclass(frozen=True)
class TMFTConfig:
    """One TMFT run: the encoder truncated at max(layers), mean of ``layers``, fine-tuned on ``dataset``'s train."""

    model: str = DEFAULT_MODEL  # built-in name or local Hugging Face folder
    layers: tuple[int, ...] = (6,)  # hidden states averaged (0 = embedding output); (l,) is TMFT proper
    pre_step: str = "none"  # "none", "ws" (word similarity first) or "mlm" (MLM domain adaptation first)
    epochs: int = 10  # passes over STS-B train (the paper: 10)
    batch_size: int = 32
    lr: float = 2e-5
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    max_length: int = 128  # tokens per sentence
    seed: int = 0
    train_limit: int | None = None  # first n train pairs (quick checks); None: all (STS-B: 5,749)
    ws: WSConfig = field(default_factory=WSConfig)
    mlm: MLMConfig = field(default_factory=MLMConfig)
    dataset: str = "stsb"  # "stsb" (train / dev / test) or "sickr" (SemEval-2014 train / trial / test); left out
    # of ``to_dict`` (run folders, results keys) when "stsb", so the runs made before it existed keep their keys

    def __post_init__(self) -> None:
        checks = [
            (self.pre_step in PRE_STEPS, "pre_step", self.pre_step, f"one of {', '.join(PRE_STEPS)}"),
            (self.dataset in DATASETS, "dataset", self.dataset, f"one of {', '.join(DATASETS)}"),
            (len(self.layers) >= 1 and all(isinstance(k, int) and k >= 0 for k in self.layers), "layers",
             self.layers, "hidden states >= 0"),
            (self.epochs >= 1 and self.batch_size >= 2, "epochs/batch_size", (self.epochs, self.batch_size),
             "epochs >= 1 and batch_size >= 2"),
            (self.lr > 0 and self.weight_decay >= 0 and self.max_grad_norm >= 0, "lr/weight_decay/max_grad_norm",
             (self.lr, self.weight_decay, self.max_grad_norm), "lr > 0, weight decay and clipping >= 0"),
            (self.max_length >= 2, "max_length", self.max_length, "an integer >= 2"),
            (self.seed >= 0, "seed", self.seed, "an integer >= 0"),
            (self.train_limit is None or self.train_limit >= self.batch_size, "train_limit", self.train_limit,
             "None or at least one batch"),
            (abs(sum(self.ws.split) - 1) < 1e-9 and min(self.ws.split) > 0, "ws.split", self.ws.split,
             "three positive fractions summing to 1"),
            (self.mlm.grad_accumulation >= 1 and 0 < self.mlm.mlm_probability < 1, "mlm", self.mlm,
             "grad_accumulation >= 1 and 0 < mlm_probability < 1"),
        ]
        for ok, name, value, fix in checks:
            if not ok:
                raise ValueError(f"TMFTConfig.{name}={value!r} is invalid: use {fix}")
        object.__setattr__(self, "layers", tuple(sorted(set(self.layers))))

    @property
    def name(self) -> str:
        """``<model>-<pre_step>-L<layers>-seed<k>`` (``-<dataset>`` after it unless STS-B), a folder and part name."""
        from pathlib import Path

        layers = "_".join(str(k) for k in self.layers)
        on = "" if self.dataset == "stsb" else f"-{self.dataset}"
        return f"{Path(self.model).name}-{self.pre_step}-L{layers}-seed{self.seed}{on}"

    def to_dict(self) -> dict:
        out = asdict(self)
        if self.dataset == "stsb":
            del out["dataset"]
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "TMFTConfig":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown TMFT settings {unknown}; valid: {sorted(known)}")
        data = dict(data)
        data["ws"] = WSConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.get("ws", {}).items()})
        data["mlm"] = MLMConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.get("mlm", {}).items()})
        data["layers"] = tuple(data.get("layers", (6,)))
        return cls(**data)
