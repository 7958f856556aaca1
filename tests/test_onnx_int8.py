"""The library's int8 graphs (encoders/onnx_int8.py): 7-bit weights, so that a CPU without VNNI cannot saturate them;
the setting recorded in the folder and in every key of an int8 result; a folder quantized otherwise quantized again."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

from conftest import SENTENCES
from layerwise import LayerEncoder
from layerwise.encoders.onnx_backend import FP32_FILE, INFO_FILE, INT8_FILE, ensure_int8, export_layer_graph
from layerwise.encoders.onnx_int8 import INT8_QUANTIZATION
from layerwise.errors import UsageError


@pytest.fixture()
def onnx(env):
    pytest.importorskip("onnxruntime")
    return pytest.importorskip("onnx")


def _int8_weights(onnx, path) -> np.ndarray:
    """Every int8 initializer of the graph at ``path`` (the quantized weights), concatenated."""
    model = onnx.load(str(path))
    arrays = [onnx.numpy_helper.to_array(t).ravel() for t in model.graph.initializer
              if t.data_type == onnx.TensorProto.INT8]
    return np.concatenate(arrays)


def _eight_bit(src, dst):
    """The int8 graph as the library wrote it before 2026-12-01: 8-bit weights (what a CPU without VNNI saturates)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(src, dst, weight_type=QuantType.QInt8, per_channel=True, op_types_to_quantize=["MatMul"])


def test_weights_are_seven_bit_and_the_setting_is_recorded(tiny_bert, onnx, tmp_path):
    graph = export_layer_graph(tiny_bert, tmp_path / "graph")
    weights = _int8_weights(onnx, graph / INT8_FILE)
    assert np.abs(weights.astype(int)).max() == 64  # 2 x 255 x 64 < 32768: a 16-bit pair sum cannot overflow
    assert json.loads((graph / INFO_FILE).read_text())["int8"] == INT8_QUANTIZATION
    _eight_bit(graph / FP32_FILE, tmp_path / "8bit.onnx")
    assert np.abs(_int8_weights(onnx, tmp_path / "8bit.onnx").astype(int)).max() == 127  # (the check above can fail)
    no_int8 = export_layer_graph(tiny_bert, tmp_path / "fp32-only", quantize=False)
    assert json.loads((no_int8 / INFO_FILE).read_text())["int8"] is None


def test_outlier_activations_do_not_saturate(tiny_bert, onnx, tmp_path):
    """Large positive FFN activations (GELU of a bias of 3) times same-sign weights: on a CPU without VNNI the 8-bit
    graph's pair sums overflow 16 bits (measured on an AVX2 EPYC: relative error 0.11 per vector), the 7-bit one's
    cannot (6.5e-3; bound 3e-2). On a VNNI CPU both pass; the weight range above catches 8 bits everywhere."""
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(tiny_bert)
    with torch.no_grad():
        for layer in model.encoder.layer:
            layer.intermediate.dense.bias.fill_(3.0)
            layer.output.dense.weight.abs_()
    folder = tmp_path / "outliers"
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(tiny_bert).save_pretrained(folder)
    kw = {"batch_size": 5, "cache_dir": False, "show_progress": False}
    ref = LayerEncoder(folder, **kw).encode(SENTENCES).mean
    got = LayerEncoder(folder, backend="onnx-int8", **kw).encode(SENTENCES).mean
    rel = np.linalg.norm(got - ref, axis=-1) / np.linalg.norm(ref, axis=-1)
    assert 1e-5 < rel[:, 1:].max() <= 3e-2


def test_a_graph_quantized_otherwise_is_quantized_again(tiny_bert, onnx, tmp_path):
    graph = export_layer_graph(tiny_bert, tmp_path / "graph")
    before = (graph / INT8_FILE).stat().st_mtime_ns
    assert ensure_int8(graph) == graph and (graph / INT8_FILE).stat().st_mtime_ns == before  # current: untouched
    # a folder of the old format: 8-bit weights, no setting recorded
    _eight_bit(graph / FP32_FILE, graph / INT8_FILE)
    info = json.loads((graph / INFO_FILE).read_text())
    (graph / INFO_FILE).write_text(json.dumps({k: v for k, v in info.items() if k != "int8"}))
    ensure_int8(graph)
    assert np.abs(_int8_weights(onnx, graph / INT8_FILE).astype(int)).max() == 64
    assert json.loads((graph / INFO_FILE).read_text()) == info
    assert not [p for p in os.listdir(graph) if p.startswith(".")]  # no partial file left
    (graph / INT8_FILE).unlink()  # a missing int8 graph is written
    ensure_int8(graph)
    assert (graph / INT8_FILE).is_file()
    with pytest.raises(UsageError, match="is not a layer graph folder"):
        ensure_int8(tmp_path)


def test_int8_results_are_keyed_by_the_setting(tiny_bert, onnx, env):
    kw = {"cache_dir": False, "show_progress": False}
    assert LayerEncoder(tiny_bert, backend="onnx-int8", **kw).cache_key()["int8"] == INT8_QUANTIZATION
    assert "int8" not in LayerEncoder(tiny_bert, backend="onnx", **kw).cache_key()
    folders = list((env / "home" / "onnx").iterdir())
    assert len(folders) == 1 and json.loads((folders[0] / INFO_FILE).read_text())["source"]["int8"] == INT8_QUANTIZATION
