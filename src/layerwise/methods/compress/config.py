"""The settings of a compression run (every field changes a number of some candidate) and its backends.

A backend is how a candidate runs: ``torch`` (float32, the model as it is), ``onnx`` (the same graph exported to
ONNX and run by onnxruntime) and ``onnx-int8`` (that graph with int8 dynamic quantization of its weights). The ONNX
backends need the ``onnx`` extra; :func:`check_backends` refuses a backend whose packages are missing, naming it.
"""

from __future__ import annotations

import importlib.util
from dataclasses import asdict, dataclass

from layerwise.errors import UsageError

__all__ = ["BACKENDS", "BACKEND_EXTRAS", "CompressConfig", "check_backends"]

#: every backend -> (the packages it needs, the extra that installs them)
BACKEND_EXTRAS: dict[str, tuple[tuple[str, ...], str | None]] = {
    "torch": ((), None),
    "onnx": (("onnx", "onnxruntime"), "onnx"),
    "onnx-int8": (("onnx", "onnxruntime"), "onnx"),
}
BACKENDS = tuple(BACKEND_EXTRAS)


def check_backends(backends) -> tuple[str, ...]:
    """``backends`` as a tuple of known names, each once, with its packages installed; else one-line UsageError."""
    if isinstance(backends, str):
        backends = tuple(b.strip() for b in backends.split(","))
    backends = tuple(backends)
    if not backends:
        raise UsageError(f"backends is empty; pass at least one of {', '.join(BACKENDS)}")
    for name in backends:
        if name not in BACKEND_EXTRAS:
            raise UsageError(f"unknown backend {name!r}; valid: {', '.join(BACKENDS)}")
        packages, extra = BACKEND_EXTRAS[name]
        missing = [p for p in packages if importlib.util.find_spec(p) is None]
        if missing:
            raise UsageError(f"backend {name!r} needs {', '.join(missing)}, which is not installed: "
                             f"pip install 'layerwise[{extra}]'")
    if len(set(backends)) != len(backends):
        raise UsageError(f"backends={backends!r} names a backend twice; name each once")
    return backends


@dataclass(frozen=True)
class CompressConfig:
    """What the candidates are and how they are measured (the quality budget is not here: it only chooses)."""

    model: str  # built-in name or local Hugging Face folder (the teacher and the model every candidate is cut from)
    depths: tuple[int, ...]  # depths l (transformer layers kept) of the candidates, each in 1..L
    backends: tuple[str, ...] = ("torch",)
    epochs: int = 1  # distillation: passes over the corpus
    batch_size: int = 32  # distillation: sentences per step (the corpus must hold one batch at least)
    lr: float = 1e-4  # distillation: AdamW learning rate (linear decay, 10 % warm-up)
    max_length: int = 128  # tokens per sentence, for every candidate, the teacher and the timing
    seed: int = 0  # distillation: batches, dropout
    speed_sentences: int = 256  # corpus sentences encoded per timed pass (the first ones)
    speed_batch_size: int = 32  # sentences per forward pass when timing (the original model's too)
    speed_repeats: int = 3  # timed passes per model, interleaved with the original's; the median pass counts

    def to_dict(self) -> dict:
        out = asdict(self)
        out["depths"], out["backends"] = list(self.depths), list(self.backends)
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "CompressConfig":
        return cls(**{**data, "depths": tuple(data["depths"]), "backends": tuple(data["backends"])})
