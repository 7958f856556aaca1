"""``scripts/int8_variants.py`` on a tiny random BERT: its ``page`` setting is the library's int8 graph, and a
variant that keeps nodes in float32 keeps exactly the ones it names."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import numpy as np
import pytest

from conftest import SENTENCES, write_stsb

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "int8_variants.py"


def test_the_page_setting_gives_the_library_int8_graph_and_an_exclusion_keeps_its_nodes(tiny_bert, env, tmp_path):
    pytest.importorskip("onnxruntime")
    onnx = pytest.importorskip("onnx")
    from layerwise.encoders.onnx_backend import INT8_FILE, export_layer_graph

    script = runpy.run_path(str(SCRIPT))
    graph = export_layer_graph(tiny_bert, tmp_path / "graph")
    mine = tmp_path / "page-int8.onnx"
    settings = script["quantize"](graph / "model.onnx", mine, script["VARIANTS"]["page"])
    assert settings["nodes_kept_fp32"] == 0
    ours = onnx.load(str(graph / INT8_FILE))
    theirs = onnx.load(str(mine))
    assert [n.op_type for n in ours.graph.node] == [n.op_type for n in theirs.graph.node]
    for a, b in zip(ours.graph.initializer, theirs.graph.initializer, strict=True):  # the same quantized weights
        assert a.name == b.name and np.array_equal(onnx.numpy_helper.to_array(a), onnx.numpy_helper.to_array(b))

    kept = script["quantize"](graph / "model.onnx", tmp_path / "ffn.onnx", script["VARIANTS"]["fp32-ffn"])
    n_layers = json.loads((Path(tiny_bert) / "config.json").read_text())["num_hidden_layers"]
    assert kept["nodes_kept_fp32"] == 2 * n_layers  # the two FFN products of every layer, not the attention's
    names = {n.name for n in onnx.load(str(tmp_path / "ffn.onnx")).graph.node if n.op_type == "MatMul"}
    assert {f"/model/encoder/layer.{i}/{p}/dense/MatMul" for i in range(n_layers)
            for p in ("intermediate", "output")} <= names  # still float MatMul nodes

    fp32 = onnx.load(str(graph / "model.onnx"))
    weights = {i.name for i in fp32.graph.initializer}
    linear = {n.name for n in fp32.graph.node if n.op_type == "MatMul" and n.input[1] in weights
              and n.name.startswith("/model/encoder/")}
    found = script["outlier_nodes"](str(tiny_bert), SENTENCES, ratio=0.0, batch_size=4, max_length=16)
    assert set(found) == linear and all(r >= 1.0 for r in found.values())  # every Linear, named as in the graph
    assert script["outlier_nodes"](str(tiny_bert), SENTENCES, ratio=1e9, batch_size=4, max_length=16) == {}

    data = write_stsb(env / "data", n_pairs=12)
    out = tmp_path / "screen.jsonl"
    assert script["main"]([str(graph), str(tiny_bert), "--data-dir", str(data), "--out", str(out),
                           "--variants", "page,fp32-attention", "--max-length", "16"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["variant"] for r in rows] == ["page", "fp32-attention"]
    assert all(-1.0 <= r["cosine_to_fp32"]["min"] <= r["cosine_to_fp32"]["mean"] <= 1.0 + 1e-9 for r in rows)
    assert rows[0]["difference"] == pytest.approx(rows[0]["dev_spearman"] - rows[0]["fp32_dev_spearman"], abs=1e-3)
    assert rows[0]["environment"]["command"]
