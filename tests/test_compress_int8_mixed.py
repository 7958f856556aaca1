"""onnxruntime's int8 with the products whose inputs have outliers kept float32 (methods/compress/int8_mixed.py), on
tiny random models built from a config."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from conftest import SENTENCES
from layerwise.encoders.batching import length_sorted_batches
from layerwise.encoders.onnx_int8 import INT8_QUANTIZATION
from layerwise.errors import UsageError
from layerwise.methods.compress import int8_mixed as mixed


@pytest.fixture()
def graph(tiny_bert, tmp_path):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from layerwise.encoders.onnx_backend import export_layer_graph

    return export_layer_graph(tiny_bert, tmp_path / "graph")


def _hf(folder):
    from transformers import AutoModel, AutoTokenizer

    return AutoModel.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)


def _vectors(folder, tokenizer, mixed_model=False, **kw):
    from layerwise.encoders.onnx_backend import LayerGraphSession

    session = mixed.mixed_session(folder) if mixed_model else LayerGraphSession(folder, **kw)
    return session.encode(tokenizer, SENTENCES, batch_size=4, max_length=16).mean


def test_node_names_are_the_exports():
    assert mixed.node_name("encoder.layer.6.output.dense") == "/model/encoder/layer.6/output/dense/MatMul"
    assert mixed.node_name("encoder.layer.10.attention.attn.q") == "/model/encoder/layer.10/attention/attn/q/MatMul"


def test_the_ratio_of_a_layers_first_product_is_that_of_its_input_hidden_state(tiny_bert):
    """Slow twin: the query product of layer i reads hidden state i; its ratio computed from the hidden states the
    model returns, with numpy's percentile (the same order statistic), per batch, averaged."""
    model, tok = _hf(tiny_bert)
    ratios = mixed.input_outlier_ratios(model, tok, SENTENCES, batch_size=4, max_length=16)
    twins = {i: [] for i in range(model.config.num_hidden_layers)}
    with torch.no_grad():
        for _, enc in length_sorted_batches(tok, SENTENCES, batch_size=4, max_length=16):
            states = model(**enc, output_hidden_states=True).hidden_states
            for i in twins:
                x = np.abs(states[i].numpy().ravel()).astype(np.float64)
                twins[i].append(x.max() / np.percentile(x, 99.9, method="inverted_cdf"))
    for i, twin in twins.items():
        assert ratios[f"/model/encoder/layer.{i}/attention/self/query/MatMul"] == pytest.approx(np.mean(twin),
                                                                                                 rel=1e-5)
    assert len(ratios) == 6 * model.config.num_hidden_layers and not model.training  # q, k, v, o and the FFN's two


def test_kept_products_are_float32_and_the_rest_the_onnx_int8_models(graph, tiny_bert, monkeypatch):
    model, tok = _hf(tiny_bert)
    fp32, int8 = _vectors(graph, tok), _vectors(graph, tok, quantized=True)
    assert not mixed.has_mixed_int8(graph)
    monkeypatch.setattr(mixed, "OUTLIER_RATIO", 1e9)  # no input has outliers: every product int8, as onnx-int8
    mixed.quantize_mixed(graph, model, tok, SENTENCES, batch_size=4, max_length=16)
    assert mixed.mixed_int8_record(graph)["kept_float32"] == []
    np.testing.assert_array_equal(_vectors(graph, tok, mixed_model=True), int8)
    monkeypatch.setattr(mixed, "OUTLIER_RATIO", 0.0)  # every input "has outliers": every product float32
    assert not mixed.has_mixed_int8(graph, SENTENCES)  # made at another ratio: to be quantized again
    mixed.quantize_mixed(graph, model, tok, SENTENCES, batch_size=4, max_length=16)
    record = mixed.mixed_int8_record(graph)
    assert len(record["kept_float32"]) == record["products"] == len(record["ratios"])
    np.testing.assert_allclose(_vectors(graph, tok, mixed_model=True), fp32, atol=1e-5)
    assert np.abs(int8 - fp32).max() > 1e-4  # (the int8 model does differ: the check above can fail)
    assert mixed.has_mixed_int8(graph, SENTENCES) and not mixed.has_mixed_int8(graph, SENTENCES[:-1])
    calibration = graph / "onnx-int8-mixed" / "calibration.json"
    record = json.loads(calibration.read_text())
    assert record["sentences"] == len(SENTENCES) and record["quantization"] == INT8_QUANTIZATION
    calibration.write_text(json.dumps({k: v for k, v in record.items() if k != "quantization"}))
    assert not mixed.has_mixed_int8(graph, SENTENCES)  # quantized before the setting was recorded (8-bit weights)


def test_a_graph_of_another_model_and_bad_calls_are_refused(graph, tiny_mpnet, tiny_bert):
    other, tok = _hf(tiny_mpnet)
    with pytest.raises(RuntimeError, match=r"has no MatMul node named /model/encoder/layer.0/attention/attn/k/MatMul \(14 of 18 products\)"):
        mixed.quantize_mixed(graph, other, tok, SENTENCES, max_length=16)
    assert not mixed.has_mixed_int8(graph)  # nothing written
    model, tok = _hf(tiny_bert)
    with pytest.raises(UsageError, match="needs calibration sentences"):
        mixed.quantize_mixed(graph, model, tok, [], max_length=16)
    with pytest.raises(UsageError, match="onnx-int8-mixed/model.onnx is missing; write the mixed int8 model first"):
        mixed.mixed_session(graph)
