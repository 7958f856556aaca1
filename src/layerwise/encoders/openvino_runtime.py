"""The layer graph (:mod:`~layerwise.encoders.onnx_backend`) run by OpenVINO instead of onnxruntime: the same
``model.onnx``, read and compiled by OpenVINO for the CPU in float32 (``pip install 'layerwise[openvino]'``).

OpenVINO's own int8 model (NNCF's static quantization of the same graph, :mod:`~layerwise.encoders.openvino_int8`)
lives in the graph folder's ``openvino-int8/model.xml`` and is compiled here too; onnxruntime's dynamically quantized
``model-int8.onnx`` is not run by OpenVINO (it was slower there than on onnxruntime, with other numbers).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from layerwise.errors import UsageError

__all__ = ["INT8_DIR", "INT8_XML", "OPENVINO_HINT", "compile_graph", "require_openvino"]

OPENVINO_HINT = "pip install 'layerwise[openvino]'"
INT8_DIR, INT8_XML = "openvino-int8", "model.xml"  # OpenVINO's int8 model inside a layer graph folder


def require_openvino():
    """``openvino`` (imported), or a one-line :class:`UsageError` naming the extra to install."""
    try:
        import openvino
    except ImportError:
        raise UsageError(f"backend 'openvino' needs openvino, which is not installed: {OPENVINO_HINT}") from None
    return openvino


def compile_graph(path, threads: int) -> tuple[Callable[[dict], list[np.ndarray]], tuple[str, ...]]:
    """``(run, input_names)``: ``run(feed)`` gives the graph's outputs in order for a feed of int64 arrays.

    ``path``: an ONNX file or an OpenVINO ``.xml`` model, or an OpenVINO model in memory. Compiled with ``threads`` inference threads and float32
    precision for what is not int8 (on CPUs with bf16 units OpenVINO would otherwise compute in bf16, and the
    outputs would no longer be the torch model's)."""
    ov = require_openvino()
    model = ov.Core().read_model(str(path)) if isinstance(path, (str, Path)) else path
    config = {"INFERENCE_PRECISION_HINT": "f32", **({"INFERENCE_NUM_THREADS": int(threads)} if threads else {})}
    compiled = ov.Core().compile_model(model, "CPU", config)
    inputs = tuple(port.get_any_name() for port in compiled.inputs)

    def run(feed: dict) -> list[np.ndarray]:
        result = compiled(feed)
        return [np.asarray(result[port]) for port in compiled.outputs]

    return run, inputs
