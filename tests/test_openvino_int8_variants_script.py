"""``scripts/openvino_int8_variants.py`` on a tiny random BERT: with nothing kept, its quantization at the alpha the
library kept is the library's ``openvino-int8`` model; the products it names stay float32; a screen line per alpha."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import numpy as np
import pytest

from conftest import SENTENCES, write_stsb, write_unlabeled

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "openvino_int8_variants.py"


def _quantized_inputs(model) -> dict[str, bool]:
    """Each MatMul's name -> whether its first input comes through a FakeQuantize (an int8 product)."""
    return {op.get_friendly_name(): op.input_value(0).get_node().get_type_name() == "FakeQuantize"
            for op in model.get_ops() if op.get_type_name() == "MatMul"}


def test_the_screen_quantizes_as_the_library_and_keeps_the_named_products_float32(tiny_bert, env, tmp_path):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("nncf")
    import openvino as ov

    from layerwise.encoders.onnx_backend import FP32_FILE, LayerGraphSession, export_layer_graph
    from layerwise.encoders.openvino_int8 import calibration_feeds, quantize_openvino, smooth_quant_alpha
    from layerwise.encoders.openvino_runtime import INT8_DIR, INT8_XML
    from layerwise.methods.truncated.model import TruncatedModel

    script = runpy.run_path(str(SCRIPT))
    model = TruncatedModel.from_pretrained(str(tiny_bert), (2,), max_length=16)
    graph = export_layer_graph(model.encoder, tmp_path / "graph", quantize=False)
    texts = SENTENCES * 2
    quantize_openvino(graph, model.tokenizer, texts, max_length=16, layers=(2,))
    library = LayerGraphSession(graph, quantized=True, runtime="openvino").encode(model.tokenizer, texts,
                                                                                  max_length=16).mean[:, 2]
    inputs = tuple(json.loads((graph / "layer_graph.json").read_text())["inputs"])
    feeds = calibration_feeds(model.tokenizer, texts, inputs, max_length=16)
    mine = script["quantize"](graph, feeds, smooth_quant_alpha(graph), [])
    ov.save_model(mine, str(graph / INT8_DIR / INT8_XML), compress_to_fp16=False)
    again = script["dev_vectors"](LayerGraphSession(graph, quantized=True, runtime="openvino"), model, texts, 2, 16)
    np.testing.assert_allclose(again, library, atol=1e-6)  # nothing kept: the library's int8 model

    plain = _quantized_inputs(script["quantize"](graph, feeds, -1.0, []))  # SmoothQuant off: FakeQuantize feeds them
    names = sorted(script["matmul_names"](graph))
    assert set(names) == set(plain)
    keep = [n for n in names if n.endswith("/output/dense/MatMul") and "/attention/" not in n]
    assert keep and all(plain[n] for n in keep)  # quantized when not named
    kept = _quantized_inputs(script["quantize"](graph, feeds, -1.0, keep))
    assert not any(kept[n] for n in keep)  # named: float32
    assert all(kept[n] for n in names if n not in keep and plain[n])  # the others as before

    data = write_unlabeled(write_stsb(env / "data", n_pairs=12))
    out = tmp_path / "screen.jsonl"
    assert script["main"]([str(tiny_bert), "2", "--data-dir", str(data), "--corpus", "wiki,snli",
                           "--max-length", "16", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    alphas = [r["smooth_quant_alpha"] for r in rows if not r["outliers_float32"]]
    assert alphas == [-1.0, 0.5, 0.95] and {r["candidate"] for r in rows} == {"cut-l2"}
    assert all(r["outliers_float32"] == len(r["kept_float32"]) for r in rows)
    assert all(-1.0 <= r["cosine_to_fp32"]["min"] <= r["cosine_to_fp32"]["mean"] <= 1.0 + 1e-9 for r in rows)
    assert rows[0]["difference"] == pytest.approx(rows[0]["dev_spearman"] - rows[0]["fp32_dev_spearman"], abs=1e-3)
    assert rows[0]["environment"]["command"]
    with pytest.raises(SystemExit, match="outside"):
        script["main"]([str(tiny_bert), "9", "--data-dir", str(data), "--corpus", "wiki,snli", "--out", str(out)])
    assert (graph / FP32_FILE).is_file()
