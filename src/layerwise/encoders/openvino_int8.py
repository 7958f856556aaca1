"""OpenVINO's own int8: the layer graph's float32 ``model.onnx`` quantized statically by NNCF on calibration sentences.

Unlike onnxruntime's dynamic int8 (weights only, activations scaled per batch at run time), NNCF's post-training
quantization fixes every activation's scale from the calibration batches and inserts FakeQuantize nodes that
OpenVINO compiles to int8 kernels (``pip install 'layerwise[openvino]'`` installs openvino and nncf).

Only the encoder is quantized: the graph's pooling (the masked means, the first tokens: its nodes outside
``/model/``) stays float32, so the output is the float32 pooling of int8 hidden states.

SmoothQuant's strength (alpha) has no value that suits every encoder here: at NNCF's default for transformers (0.95)
all-mpnet-base-v2 keeps its STS-B dev Spearman (88.10 against 88.11 in fp32; 85.36 with SmoothQuant off), while
all-MiniLM-L6-v2's distilled students lose up to 1.1 points that they keep with it off. So the model is quantized at
each alpha of :data:`SMOOTH_QUANT_ALPHAS` and the one kept is the one whose sentence vectors on the calibration
sentences keep the float32 graph's similarities best (:func:`similarity_agreement`: Spearman between the two models'
cosines of every pair of calibration sentences; no labels are read).

:func:`quantize_openvino` writes ``<graph folder>/openvino-int8/`` (``model.xml``, ``model.bin`` and
``calibration.json``: the sentences' sha256 (joined by newlines), their count, the settings below, the alpha kept and
each alpha's agreement) atomically; :class:`~layerwise.encoders.onnx_backend.LayerGraphSession`
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
from layerwise.encoders.openvino_runtime import INT8_DIR, INT8_XML, OPENVINO_HINT, compile_graph, require_openvino
from layerwise.errors import UsageError
from layerwise.files import atomic_folder, remove_stale

__all__ = ["CALIBRATION_FILE", "QUANTIZATION", "SMOOTH_QUANT_ALPHAS", "calibration_feeds", "has_openvino_int8",
           "quantize_openvino", "require_nncf", "similarity_agreement", "smooth_quant_alpha"]

logger = logging.getLogger(__name__)

CALIBRATION_FILE = "calibration.json"
# What NNCF is asked for (recorded in calibration.json; a graph folder quantized under other settings or other
# sentences is quantized again). SmoothQuant moves the activations' per-channel outliers into the weights before
# their scales are fixed; its alpha is chosen per model among these (-1: off), as the module's docstring says. The
# pooling is kept float32 by the ignored scope (every top-level node: not /model/).
SMOOTH_QUANT_ALPHAS = (-1.0, 0.5, 0.95)
QUANTIZATION = {"preset": "mixed", "model_type": "transformer", "smooth_quant_alphas": list(SMOOTH_QUANT_ALPHAS),
                "alpha_choice": "best similarity agreement with fp32 on the calibration sentences",
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


def has_openvino_int8(folder: str | Path, texts: Sequence[str] | None = None, layers: Sequence[int] | None = None
                      ) -> bool:
    """Whether the graph folder holds a finished OpenVINO int8 model; with ``texts``, one calibrated on these
    sentences under the current :data:`QUANTIZATION` settings, its alpha chosen on the vectors of ``layers`` (None:
    the last state) (anything else is to be quantized again)."""
    sub = Path(folder) / INT8_DIR
    if not ((sub / INT8_XML).is_file() and (sub / CALIBRATION_FILE).is_file()):
        return False
    if texts is None:
        return True
    record = json.loads((sub / CALIBRATION_FILE).read_text(encoding="utf-8"))
    return (record.get("sha256") == _sha256([str(t) for t in texts]) and record.get("layers") == _layers(layers)
            and all(record.get(k) == v for k, v in QUANTIZATION.items()))


def _layers(layers: Sequence[int] | None) -> list[int] | None:
    return None if layers is None else [int(i) for i in layers]


def similarity_agreement(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman (scipy's, ties averaged) between the cosines of every pair of rows of ``a`` and the same pairs' of
    ``b``: how well a second model (the int8 one) keeps the first's ranking of sentence similarities."""
    from scipy.stats import spearmanr

    def cosines(v):
        v = np.asarray(v, dtype=np.float64)
        v = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
        return (v @ v.T)[np.triu_indices(len(v), 1)]

    return float(spearmanr(cosines(a), cosines(b)).statistic)


def _vectors(model, feeds: list[dict], layers: Sequence[int] | None) -> np.ndarray:
    """The sentence vectors (the mean of ``layers``' mean-pooled states; None: the last) of every calibration batch,
    in the feeds' order, from an OpenVINO model (read or in memory)."""
    run, _ = compile_graph(model, threads=0)
    means = np.concatenate([run(feed)[0] for feed in feeds])  # (n, K, d)
    return means[:, -1] if layers is None else means[:, list(layers)].mean(axis=1)


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
                      max_length: int = 256, layers: Sequence[int] | None = None) -> Path:
    """Quantize the graph folder's ``model.onnx`` to int8 with NNCF, calibrated on ``texts``, at each SmoothQuant
    alpha of :data:`SMOOTH_QUANT_ALPHAS`, and keep the one whose vectors of ``layers`` (the mean of their mean-pooled
    states; None: the last state) agree best with the float32 graph's (:func:`similarity_agreement`); returns the
    folder.

    ``texts``: the calibration sentences (a few hundred of the user's corpus; at least 3, whose pairs the choice
    compares). The result replaces an earlier ``openvino-int8/`` of the same folder; a killed run leaves the folder
    as it was."""
    nncf = require_nncf()
    ov = require_openvino()
    folder, texts = Path(folder), [str(t) for t in texts]
    if not (folder / INFO_FILE).is_file():
        raise UsageError(f"{folder} is not a layer graph folder (no {INFO_FILE}); write one with export_layer_graph")
    if len(texts) < 3:
        raise UsageError(f"quantize_openvino needs at least 3 calibration sentences (the alpha is chosen on their "
                         f"pairs); got {len(texts)}")
    info = json.loads((folder / INFO_FILE).read_text(encoding="utf-8"))
    if layers is not None and not all(0 <= int(i) < info["n_states"] for i in layers):
        raise UsageError(f"layers {list(layers)} are not states of this graph (0..{info['n_states'] - 1})")
    feeds = calibration_feeds(tokenizer, texts, tuple(info["inputs"]), batch_size=batch_size, max_length=max_length)
    reference = _vectors(folder / FP32_FILE, feeds, layers)
    agreement, best = {}, None  # alpha -> agreement (None where undefined: every cosine alike); the best model
    for alpha in QUANTIZATION["smooth_quant_alphas"]:  # the fp32 model read afresh: NNCF gets one nobody else holds
        quantized = _nncf_quantize(nncf, ov.Core().read_model(str(folder / FP32_FILE)), feeds, alpha)
        r = similarity_agreement(reference, _vectors(quantized, feeds, layers))
        agreement[alpha] = r if np.isfinite(r) else None
        score = r if np.isfinite(r) else -np.inf
        if best is None or score > best[1]:  # ties: the first (SmoothQuant off first)
            best = (alpha, score, quantized)
    alpha = best[0]
    logger.info("openvino int8 of %s: SmoothQuant alpha %s kept (agreement with fp32: %s)", folder, alpha,
                ", ".join(f"{a}: {r}" if r is None else f"{a}: {r:.4f}" for a, r in agreement.items()))
    dest = folder / INT8_DIR
    remove_stale(dest)
    with atomic_folder(dest, replaceable=lambda d: (d / CALIBRATION_FILE).is_file()) as tmp:
        ov.save_model(best[2], str(tmp / INT8_XML), compress_to_fp16=False)
        record = {"sentences": len(texts), "sha256": _sha256(texts), "batches": len(feeds),
                  "batch_size": batch_size, "max_length": max_length, **QUANTIZATION, "layers": _layers(layers),
                  "smooth_quant_alpha": alpha, "agreement": {str(a): r for a, r in agreement.items()},
                  "versions": {"openvino": ov.__version__, "nncf": nncf.__version__}}
        (tmp / CALIBRATION_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return folder


def smooth_quant_alpha(folder: str | Path) -> float:
    """The SmoothQuant alpha that the graph folder's int8 model was kept at (-1: off)."""
    return json.loads((Path(folder) / INT8_DIR / CALIBRATION_FILE).read_text(encoding="utf-8"))["smooth_quant_alpha"]


def _nncf_quantize(nncf, model, feeds: list[dict], alpha: float):
    """NNCF's static int8 of ``model`` (an OpenVINO model, not changed) at SmoothQuant ``alpha``."""
    from nncf.quantization.advanced_parameters import AdvancedQuantizationParameters, AdvancedSmoothQuantParameters

    nncf_log = logging.getLogger("nncf")  # NNCF logs a line per node it leaves unquantized at INFO: warnings only
    level = nncf_log.level
    nncf_log.setLevel(max(level, logging.WARNING))
    try:
        return nncf.quantize(
            model, nncf.Dataset(feeds), preset=nncf.QuantizationPreset.MIXED, model_type=nncf.ModelType.TRANSFORMER,
            subset_size=len(feeds), fast_bias_correction=True,
            ignored_scope=nncf.IgnoredScope(patterns=[_IGNORED_PATTERN], validate=False),
            advanced_parameters=AdvancedQuantizationParameters(
                smooth_quant_alphas=AdvancedSmoothQuantParameters(matmul=alpha)))
    finally:
        nncf_log.setLevel(level)
