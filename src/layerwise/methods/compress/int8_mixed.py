"""onnxruntime's dynamic int8 with the matrix products whose inputs have outliers kept in float32.

``onnx-int8`` (:func:`~layerwise.encoders.onnx_backend.export_layer_graph`) quantizes the input of every matrix
product at run time with one scale for the whole batch tensor. Where a few values of that input are tens of times
larger than the rest, the others fall on a few int8 levels. In all-mpnet-base-v2 the input of the second FFN product
(after GELU) in layers 6-10 has max |x| 22-45 times its 99.9th percentile, and the int8 graph's sentence vectors
there have a mean cosine of 0.88 with the float32 graph's on STS-B dev; keeping those five products in float32 gives
0.99 (``scripts/int8_variants.py``, ``docs/results/screens/compress-int8-variants.jsonl``).

So the torch encoder runs the calibration sentences (length-sorted batches, as encoding runs them) with a forward hook
on every ``Linear`` layer of its ``encoder``; a product whose input has max |x| over :data:`OUTLIER_RATIO` times the
99.9th percentile of |x| (per batch, averaged over the batches) stays float32, and every other is quantized as
``onnx-int8`` quantizes it (:mod:`~layerwise.encoders.onnx_int8`). :func:`quantize_mixed` writes
``<graph folder>/onnx-int8-mixed/`` (``model.onnx`` and ``calibration.json``: the sentences' sha256, the int8
setting, the ratio of every product, the ones kept) atomically;
``LayerGraphSession.from_file(folder / INT8_MIXED_DIR / FP32_FILE)`` runs it (:func:`mixed_session`).
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from layerwise.data.checksum import content_checksum
from layerwise.encoders.batching import length_sorted_batches
from layerwise.encoders.onnx_backend import FP32_FILE, INFO_FILE, LayerGraphSession, require_onnx
from layerwise.encoders.onnx_int8 import INT8_QUANTIZATION, quantize_int8
from layerwise.errors import UsageError
from layerwise.files import atomic_folder, remove_stale

__all__ = ["CALIBRATION_FILE", "INT8_MIXED_DIR", "OUTLIER_RATIO", "PERCENTILE", "has_mixed_int8",
           "input_outlier_ratios", "mixed_int8_record", "mixed_session", "node_name", "quantize_mixed"]

logger = logging.getLogger(__name__)

CALIBRATION_FILE = "calibration.json"
INT8_MIXED_DIR = "onnx-int8-mixed"  # in the layer graph folder, beside model.onnx and model-int8.onnx
OUTLIER_RATIO = 16.0  # max |x| / 99.9th percentile of |x| above which a product's input stays float32
PERCENTILE = 99.9


def node_name(module: str) -> str:
    """The MatMul node the TorchScript export names for the ``Linear`` at ``module`` (a path in the encoder, e.g.
    ``encoder.layer.6.output.dense`` -> ``/model/encoder/layer.6/output/dense/MatMul``: the export's wrapper holds
    the encoder as ``model``; a list index stays joined to its list by a dot)."""
    return "/model/" + re.sub(r"\.(?!\d)", "/", module) + "/MatMul"


def input_outlier_ratios(encoder, tokenizer, texts: Sequence[str], *, batch_size: int = 32,
                         max_length: int = 256) -> dict[str, float]:
    """``{MatMul node name: ratio}`` for every ``Linear`` under ``encoder.encoder`` (the transformer layers): max |x|
    of its input over the :data:`PERCENTILE` th percentile of |x|, per batch of ``texts``, averaged over the
    batches. The encoder is run in eval mode without gradients and left as it was."""
    ratios: dict[str, list[float]] = {}

    def hook(name: str):
        def record(module, inputs, output):
            x = inputs[0].detach().abs().flatten().float()
            k = max(1, int(np.ceil(PERCENTILE / 100 * x.numel())))
            ratios.setdefault(name, []).append(float(x.max() / x.kthvalue(k).values.clamp_min(1e-12)))
        return record

    handles = [m.register_forward_hook(hook(node_name(n))) for n, m in encoder.named_modules()
               if isinstance(m, torch.nn.Linear) and n.startswith("encoder.")]
    training = encoder.training
    device = next(encoder.parameters()).device
    try:
        encoder.eval()
        with torch.no_grad():
            for _, enc in length_sorted_batches(tokenizer, list(texts), batch_size=batch_size, max_length=max_length):
                encoder(**{k: v.to(device) for k, v in enc.items()})
    finally:
        for h in handles:
            h.remove()
        encoder.train(training)
    return {name: float(np.mean(r)) for name, r in ratios.items()}


def mixed_session(folder: str | Path, *, threads: int | None = None) -> LayerGraphSession:
    """A session on the graph folder's mixed int8 model (a one-line UsageError where it was not written)."""
    path = Path(folder) / INT8_MIXED_DIR / FP32_FILE
    if not path.is_file():
        raise UsageError(f"{path} is missing; write the mixed int8 model first with quantize_mixed")
    return LayerGraphSession.from_file(path, threads=threads)


def has_mixed_int8(folder: str | Path, texts: Sequence[str] | None = None) -> bool:
    """Whether the graph folder holds a finished mixed int8 model; with ``texts``, one calibrated on these sentences
    at the current :data:`OUTLIER_RATIO` and int8 setting (anything else is to be quantized again)."""
    sub = Path(folder) / INT8_MIXED_DIR
    if not ((sub / FP32_FILE).is_file() and (sub / CALIBRATION_FILE).is_file()):
        return False
    if texts is None:
        return True
    record = mixed_int8_record(folder)
    return (record.get("sha256") == content_checksum([str(t) for t in texts]) and record.get("ratio") == OUTLIER_RATIO
            and record.get("quantization") == INT8_QUANTIZATION)


def mixed_int8_record(folder: str | Path) -> dict:
    """The folder's ``onnx-int8-mixed/calibration.json``: the calibration, every product's ratio, the ones kept."""
    return json.loads((Path(folder) / INT8_MIXED_DIR / CALIBRATION_FILE).read_text(encoding="utf-8"))


def quantize_mixed(folder: str | Path, encoder, tokenizer, texts: Sequence[str], *, batch_size: int = 32,
                   max_length: int = 256) -> Path:
    """Write the graph folder's mixed int8 model: ``model.onnx`` quantized as ``onnx-int8`` but for the products
    whose input ratio on ``texts`` (:func:`input_outlier_ratios` of ``encoder``, the torch model the graph was
    exported from) is over :data:`OUTLIER_RATIO`. Returns the folder. A product measured here that the graph does
    not name is a RuntimeError (the export's names changed: nothing would be kept float32)."""
    require_onnx()
    import onnx

    folder, texts = Path(folder), [str(t) for t in texts]
    if not (folder / INFO_FILE).is_file():
        raise UsageError(f"{folder} is not a layer graph folder (no {INFO_FILE}); write one with export_layer_graph")
    if not texts:
        raise UsageError("quantize_mixed needs calibration sentences; got none")
    ratios = input_outlier_ratios(encoder, tokenizer, texts, batch_size=batch_size, max_length=max_length)
    nodes = {n.name for n in onnx.load(str(folder / FP32_FILE), load_external_data=False).graph.node
             if n.op_type == "MatMul"}
    unnamed = sorted(set(ratios) - nodes)
    if unnamed:
        raise RuntimeError(f"{folder / FP32_FILE} has no MatMul node named {unnamed[0]} ({len(unnamed)} of "
                           f"{len(ratios)} products): the graph was not exported from this encoder, or its export "
                           "names nodes otherwise")
    kept = [n for n, r in ratios.items() if r > OUTLIER_RATIO]  # in the encoder's order
    logger.info("onnx mixed int8 of %s: %d of %d products kept float32 (input max/p%s over %g)", folder, len(kept),
                len(ratios), PERCENTILE, OUTLIER_RATIO)
    dest = folder / INT8_MIXED_DIR
    remove_stale(dest)
    with atomic_folder(dest, replaceable=lambda d: (d / CALIBRATION_FILE).is_file()) as tmp:
        quantize_int8(folder / FP32_FILE, tmp / FP32_FILE, exclude=kept)
        record = {"sentences": len(texts), "sha256": content_checksum(texts), "batch_size": batch_size,
                  "max_length": max_length, "ratio": OUTLIER_RATIO, "percentile": PERCENTILE,
                  "quantization": INT8_QUANTIZATION, "kept_float32": kept,
                  "products": len(ratios), "ratios": {n: round(r, 3) for n, r in ratios.items()}}
        (tmp / CALIBRATION_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return folder
