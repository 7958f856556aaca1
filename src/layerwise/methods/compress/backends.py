"""How a candidate runs: its torch model, or the same model as an ONNX layer graph: fp32 or int8 in onnxruntime,
fp32 compiled by OpenVINO (``openvino``), OpenVINO's own int8 (``openvino-int8``: NNCF's static quantization of
the graph, calibrated on the first :data:`CALIBRATION_SENTENCES` sentences of the corpus), or onnxruntime's int8 with
the products whose inputs have outliers on those sentences kept float32 (``onnx-int8-mixed``:
:mod:`~layerwise.methods.compress.int8_mixed`).

Every candidate is a :class:`~layerwise.methods.truncated.model.TruncatedModel`; on an ONNX backend its encoder is
exported once (:func:`layerwise.encoders.onnx_backend.export_layer_graph`: a graph whose outputs are every hidden
state's masked token mean, and its int8 dynamic-quantized copy) and the sentence vector is the mean of the
candidate's hidden states' means, as the torch model computes it. Tokenization, batching (length-sorted) and the
max length are the torch model's, so the backends differ only in the arithmetic.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from layerwise.encoders.onnx_backend import BACKENDS as ENCODER_BACKENDS
from layerwise.encoders.onnx_backend import (
    INFO_FILE,
    LayerGraphSession,
    check_backend,
    ensure_int8,
    export_layer_graph,
)
from layerwise.encoders.openvino_int8 import QUANTIZATION, has_openvino_int8, quantize_openvino, require_nncf
from layerwise.errors import UsageError
from layerwise.methods.compress.int8_mixed import (
    OUTLIER_RATIO,
    PERCENTILE,
    has_mixed_int8,
    mixed_int8_record,
    mixed_session,
    quantize_mixed,
)
from layerwise.methods.truncated.model import TruncatedModel

__all__ = ["BACKENDS", "CALIBRATED", "CALIBRATION_SENTENCES", "MIXED_SETTINGS", "ONNX_INT8_MIXED", "OPENVINO_INT8",
           "check_backends", "graph_folder", "graph_session", "int8_settings", "mixed_int8_facts", "runner",
           "same_int8_settings"]

OPENVINO_INT8 = "openvino-int8"
ONNX_INT8_MIXED = "onnx-int8-mixed"
CALIBRATED = (OPENVINO_INT8, ONNX_INT8_MIXED)  # quantized on the corpus' first sentences
BACKENDS = (*ENCODER_BACKENDS, OPENVINO_INT8, ONNX_INT8_MIXED)  # what a compression run measures its candidates on
#: what an onnx-int8-mixed candidate is quantized under (in its key: other settings make another model)
MIXED_SETTINGS = {"outlier_ratio": OUTLIER_RATIO, "percentile": PERCENTILE}
CALIBRATION_SENTENCES = 300  # NNCF's calibration: the first sentences of the distillation corpus


def check_backends(backends) -> tuple[str, ...]:
    """``backends`` (a tuple, or a comma-separated string) checked, each once, before any work: an unknown name or
    an ONNX or OpenVINO backend without its packages is a one-line UsageError naming the extra to install
    (``pip install 'layerwise[onnx]'``, ``'layerwise[openvino]'``: openvino-int8 needs nncf too)."""
    if isinstance(backends, str):
        backends = tuple(b.strip() for b in backends.split(","))
    try:
        backends = tuple(backends)
    except TypeError:
        raise UsageError(f"backends={backends!r} must be a tuple of names, e.g. ('torch', 'onnx-int8')") from None
    if not backends:
        raise UsageError("backends is empty; pass at least one, e.g. ('torch',)")
    for name in backends:
        if name == OPENVINO_INT8:
            check_backend("openvino")
            require_nncf()
        elif name == ONNX_INT8_MIXED:
            check_backend("onnx-int8")
        elif name not in BACKENDS:
            raise UsageError(f"unknown backend {name!r}; valid: {', '.join(BACKENDS)}")
        else:
            check_backend(name)
    if len(set(backends)) != len(backends):
        raise UsageError(f"backends={backends!r} names a backend twice; name each once")
    return backends


def int8_settings() -> dict:
    """What an openvino-int8 candidate is quantized under: the calibration size and NNCF's settings (each candidate
    keeps them; one quantized under others is another model)."""
    return {"calibration_sentences": CALIBRATION_SENTENCES, **QUANTIZATION}


def same_int8_settings(recorded: dict | None) -> bool:
    """Whether a candidate's recorded quantization (the settings and the SmoothQuant alpha chosen under them) was
    made under the current :func:`int8_settings` (None: recorded before candidates kept it)."""
    return recorded is not None and all(recorded.get(k) == v for k, v in int8_settings().items())


def graph_folder(model: TruncatedModel, dest: Path, source: dict, *, backend: str = "onnx",
                 calibration: list[str] | None = None) -> Path:
    """``dest`` holding the layer graph of ``model``'s encoder (fp32 and onnxruntime's int8), exported unless already
    there; for a ``backend`` of :data:`CALIBRATED`, also its int8 model quantized on the ``calibration`` sentences
    unless one made on these sentences under the current settings is there (OpenVINO's: its SmoothQuant alpha
    chosen on the model's layers; onnxruntime's mixed: the outliers measured on ``model``'s encoder); for
    ``onnx-int8``, its int8 graph quantized under the current setting (:func:`~layerwise.encoders.onnx_backend.ensure_int8`)."""
    if backend in CALIBRATED and not calibration:
        raise ValueError(f"backend {backend!r} is quantized on calibration sentences; pass calibration=")
    if not (Path(dest) / INFO_FILE).is_file():
        export_layer_graph(model.encoder, dest, source=source)
    if backend == "onnx-int8":  # a folder quantized under another setting (8-bit weights, say) quantized again
        ensure_int8(dest)
    if backend == OPENVINO_INT8 and not has_openvino_int8(dest, calibration, model.layers):
        quantize_openvino(dest, model.tokenizer, calibration, max_length=model.max_length, layers=model.layers)
    if backend == ONNX_INT8_MIXED and not has_mixed_int8(dest, calibration):
        quantize_mixed(dest, model.encoder, model.tokenizer, calibration, max_length=model.max_length)
    return Path(dest)


def mixed_int8_facts(graph: Path) -> dict:
    """What an onnx-int8-mixed candidate's graph keeps float32, for its record and the page: the settings, the
    products kept and how many there are."""
    record = mixed_int8_record(graph)
    return {"calibration_sentences": record["sentences"], **MIXED_SETTINGS, "kept_float32": record["kept_float32"],
            "products": record["products"]}


def graph_session(backend: str) -> dict:
    """``LayerGraphSession``'s ``quantized`` and ``runtime`` for an ONNX ``backend`` name (``onnx-int8-mixed``:
    :func:`~layerwise.methods.compress.int8_mixed.mixed_session` opens it)."""
    return {"quantized": backend.endswith("-int8"),
            "runtime": "openvino" if backend.startswith("openvino") else "onnxruntime"}


def runner(model: TruncatedModel, backend: str, *, batch_size: int,
           graph: Path | None = None) -> Callable[[list[str]], np.ndarray]:
    """texts -> (n, d) float32 sentence vectors of ``model`` on ``backend`` (an ONNX backend reads ``graph``)."""
    if backend == "torch":
        return lambda texts: model.encode(texts, batch_size=batch_size)
    if graph is None:
        raise ValueError(f"backend {backend!r} needs the model's layer graph folder")
    session = mixed_session(graph) if backend == ONNX_INT8_MIXED else LayerGraphSession(graph, **graph_session(backend))
    layers = list(model.layers)

    def encode(texts: list[str]) -> np.ndarray:
        stack = session.encode(model.tokenizer, texts, batch_size=batch_size, max_length=model.max_length)
        return stack.mean[:, layers].mean(axis=1).astype(np.float32)  # (n, d), as TruncatedModel.embed

    return encode
