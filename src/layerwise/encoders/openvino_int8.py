"""OpenVINO's own int8: the layer graph's float32 ``model.onnx`` quantized statically by NNCF on calibration sentences.

Unlike onnxruntime's dynamic int8 (weights only, activations scaled per batch at run time), NNCF's post-training
quantization fixes every activation's scale from the calibration batches and inserts FakeQuantize nodes that
OpenVINO compiles to int8 kernels (``pip install 'layerwise[openvino]'`` installs openvino and nncf).

Only the encoder is quantized: the graph's pooling (the masked means, the first tokens: its nodes outside
``/model/``) stays float32, so the output is the float32 pooling of int8 hidden states. :func:`quantize_openvino`
writes ``<graph folder>/openvino-int8/`` (``model.xml``, ``model.bin`` and ``calibration.json``: the sentences'
sha256 (joined by newlines), their count and the settings below) atomically; :class:`~layerwise.encoders.onnx_backend.LayerGraphSession`
``(quantized=True, runtime="openvino")`` runs it.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Sequence

import numpy as np

from layerwise.encoders.batching import length_sorted_batches
from layerwise.encoders.onnx_backend import FP32_FILE, INFO_FILE
from layerwise.encoders.openvino_runtime import INT8_DIR, INT8_XML, OPENVINO_HINT, require_openvino
from layerwise.errors import UsageError
from layerwise.files import atomic_folder, remove_stale

__all__ = ["CALIBRATION_FILE", "QUANTIZATION", "calibration_feeds", "has_openvino_int8", "quantize_openvino",
           "require_nncf"]

CALIBRATION_FILE = "calibration.json"
# What NNCF is asked for (recorded in calibration.json; a graph folder quantized under other settings or other
# sentences is quantized again). SmoothQuant at NNCF's default for transformers (alpha 0.95 on the MatMuls) moves
# the activations' per-channel outliers into the weights before their scales are fixed: without it, NNCF's int8 of
# all-mpnet-base-v2 lost points of STS-B dev Spearman that it keeps with it (the closing note of the change that
# turned it on gives both). The pooling is kept float32 by the ignored scope (every top-level node: not /model/).
QUANTIZATION = {"preset": "mixed", "model_type": "transformer", "smooth_quant_alpha": 0.95,
                "ignored": "nodes outside /model/ (the pooling)", "fast_bias_correction": True}
_IGNORED_PATTERN = r"^/(?!model/).*"


def require_nncf():
    """``nncf`` (imported), or a one-line :class:`UsageError` naming the extra to install."""
    require_openvino()
    try:
        import nncf
    except ImportError:
        raise UsageError(f"backend 'openvino-int8' needs nncf, which is not installed: {OPENVINO_HINT}") from None
    return nncf


def _sha256(texts: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest()


def has_openvino_int8(folder: str | Path, texts: Sequence[str] | None = None) -> bool:
    """Whether the graph folder holds a finished OpenVINO int8 model; with ``texts``, one calibrated on these
    sentences under the current :data:`QUANTIZATION` settings (anything else is to be quantized again)."""
    sub = Path(folder) / INT8_DIR
    if not ((sub / INT8_XML).is_file() and (sub / CALIBRATION_FILE).is_file()):
        return False
    if texts is None:
        return True
    record = json.loads((sub / CALIBRATION_FILE).read_text(encoding="utf-8"))
    return (record.get("sha256") == _sha256([str(t) for t in texts])
            and all(record.get(k) == v for k, v in QUANTIZATION.items()))


def calibration_feeds(tokenizer, texts: Sequence[str], inputs: Sequence[str], *, batch_size: int = 32,
                      max_length: int = 256) -> list[dict[str, np.ndarray]]:
    """The graph's feeds (int64 arrays by input name) of ``texts`` in length-sorted batches, as encoding runs them."""
    feeds = []
    for _, enc in length_sorted_batches(tokenizer, list(texts), batch_size=batch_size, max_length=max_length):
        ids = np.asarray(enc["input_ids"], dtype=np.int64)
        feeds.append({name: np.asarray(enc[name], dtype=np.int64) if name in enc else np.zeros_like(ids)
                      for name in inputs})
    return feeds


def quantize_openvino(folder: str | Path, tokenizer, texts: Sequence[str], *, batch_size: int = 32,
                      max_length: int = 256) -> Path:
    """Quantize the graph folder's ``model.onnx`` to int8 with NNCF, calibrated on ``texts``; returns the folder.

    ``texts``: the calibration sentences (a few hundred of the user's corpus; at least one). The result replaces
    an earlier ``openvino-int8/`` of the same folder; a killed run leaves the folder as it was."""
    nncf = require_nncf()
    ov = require_openvino()
    from nncf.quantization.advanced_parameters import AdvancedQuantizationParameters, AdvancedSmoothQuantParameters

    folder, texts = Path(folder), [str(t) for t in texts]
    if not (folder / INFO_FILE).is_file():
        raise UsageError(f"{folder} is not a layer graph folder (no {INFO_FILE}); write one with export_layer_graph")
    if not texts:
        raise UsageError("quantize_openvino needs calibration sentences; pass at least one")
    inputs = tuple(json.loads((folder / INFO_FILE).read_text(encoding="utf-8"))["inputs"])
    feeds = calibration_feeds(tokenizer, texts, inputs, batch_size=batch_size, max_length=max_length)
    model = ov.Core().read_model(str(folder / FP32_FILE))
    nncf_log = logging.getLogger("nncf")  # NNCF logs a line per node it leaves unquantized at INFO: warnings only
    level = nncf_log.level
    nncf_log.setLevel(max(level, logging.WARNING))
    try:
        quantized = nncf.quantize(
            model, nncf.Dataset(feeds), preset=nncf.QuantizationPreset.MIXED, model_type=nncf.ModelType.TRANSFORMER,
            subset_size=len(feeds), fast_bias_correction=True,
            ignored_scope=nncf.IgnoredScope(patterns=[_IGNORED_PATTERN], validate=False),
            advanced_parameters=AdvancedQuantizationParameters(
                smooth_quant_alphas=AdvancedSmoothQuantParameters(matmul=QUANTIZATION["smooth_quant_alpha"])))
    finally:
        nncf_log.setLevel(level)
    dest = folder / INT8_DIR
    remove_stale(dest)
    with atomic_folder(dest, replaceable=lambda d: (d / CALIBRATION_FILE).is_file()) as tmp:
        ov.save_model(quantized, str(tmp / INT8_XML), compress_to_fp16=False)
        record = {"sentences": len(texts), "sha256": _sha256(texts), "batches": len(feeds),
                  "batch_size": batch_size, "max_length": max_length, **QUANTIZATION,
                  "versions": {"openvino": ov.__version__, "nncf": nncf.__version__}}
        (tmp / CALIBRATION_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return folder
