"""OpenVINO's own int8 (NNCF static quantization of the layer graph) on tiny random models: int8 kernels in the
graph, the float32 pooling of int8 hidden states close to the float32 graph, and clear refusals."""

from __future__ import annotations

import builtins

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("openvino")
pytest.importorskip("nncf")

from conftest import WORDS, build_tiny_bert, build_tiny_mpnet  # noqa: E402
from layerwise.encoders.onnx_backend import LayerGraphSession, export_layer_graph  # noqa: E402
from layerwise.encoders.openvino_int8 import (  # noqa: E402
    CALIBRATION_FILE,
    SMOOTH_QUANT_ALPHAS,
    has_openvino_int8,
    quantize_openvino,
    require_nncf,
)
from layerwise.errors import UsageError  # noqa: E402

RNG = np.random.default_rng(0)
TEXTS = [" ".join(RNG.choice(WORDS, size=RNG.integers(3, 12))) for _ in range(48)]
BOUND = 5e-2  # per hidden state: max |int8 - fp32| over max |fp32| (measured here: at most 6e-3)


@pytest.mark.parametrize("build", [build_tiny_bert, build_tiny_mpnet], ids=["bert", "mpnet"])
def test_the_int8_model_has_int8_kernels_and_every_state_stays_close(build, tmp_path):
    from transformers import AutoModel, AutoTokenizer

    model = build(tmp_path / "m")
    tok = AutoTokenizer.from_pretrained(model)
    graph = export_layer_graph(AutoModel.from_pretrained(model), tmp_path / "g")
    assert not has_openvino_int8(graph)
    quantize_openvino(graph, tok, TEXTS[:24], batch_size=8, max_length=32)
    assert has_openvino_int8(graph) and 'type="FakeQuantize"' in (graph / "openvino-int8" / "model.xml").read_text()
    fp32 = LayerGraphSession(graph).encode(tok, TEXTS, batch_size=8, max_length=32)
    int8 = LayerGraphSession(graph, quantized=True, runtime="openvino").encode(tok, TEXTS, batch_size=8, max_length=32)
    for name in ("mean", "cls"):  # the pooling is float32: the masked means are as close as the first tokens
        a, b = getattr(fp32, name), getattr(int8, name)
        rel = np.abs(a - b).max(axis=(0, 2)) / np.abs(a).max(axis=(0, 2))
        assert 0 < rel.max() < BOUND, (name, rel)
    import json

    record = json.loads((graph / "openvino-int8" / CALIBRATION_FILE).read_text())
    assert record["sentences"] == 24 and record["smooth_quant_alpha"] in SMOOTH_QUANT_ALPHAS and record["versions"]["nncf"]
    assert has_openvino_int8(graph, TEXTS[:24]) and not has_openvino_int8(graph, TEXTS[:23])  # other sentences
    assert not has_openvino_int8(graph, TEXTS[:24], layers=[1, 2])  # its alpha was chosen on the last state


def test_quantizing_again_replaces_its_own_folder_and_refusals_name_the_fix(tmp_path):
    from transformers import AutoModel, AutoTokenizer

    model = build_tiny_bert(tmp_path / "m")
    tok = AutoTokenizer.from_pretrained(model)
    graph = export_layer_graph(AutoModel.from_pretrained(model), tmp_path / "g")
    with pytest.raises(UsageError, match="quantize_openvino"):  # asked for before it was written
        LayerGraphSession(graph, quantized=True, runtime="openvino")
    quantize_openvino(graph, tok, TEXTS[:8], batch_size=8, max_length=32)
    quantize_openvino(graph, tok, TEXTS[8:24], batch_size=8, max_length=32)  # a new calibration replaces it
    import json

    assert json.loads((graph / "openvino-int8" / CALIBRATION_FILE).read_text())["sentences"] == 16
    assert sorted(p.name for p in graph.iterdir() if p.name.startswith(".")) == []  # no temporary left
    with pytest.raises(UsageError, match="calibration sentences"):
        quantize_openvino(graph, tok, TEXTS[:2], max_length=32)
    with pytest.raises(UsageError, match="not states of this graph"):
        quantize_openvino(graph, tok, TEXTS[:8], max_length=32, layers=[0, 9])
    with pytest.raises(UsageError, match="not a layer graph folder"):
        quantize_openvino(tmp_path / "m", tok, TEXTS, max_length=32)


def test_a_missing_nncf_names_the_extra(monkeypatch):
    real = builtins.__import__

    def no_nncf(name, *args, **kwargs):
        if name == "nncf" or name.startswith("nncf."):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_nncf)
    with pytest.raises(UsageError, match=r"openvino-int8' needs nncf.*pip install 'layerwise\[openvino\]'"):
        require_nncf()


def test_a_graph_quantized_under_other_settings_or_sentences_is_quantized_again(tmp_path, monkeypatch):
    import json

    from transformers import AutoModel, AutoTokenizer

    from layerwise.encoders import openvino_int8

    model = build_tiny_bert(tmp_path / "m")
    tok = AutoTokenizer.from_pretrained(model)
    graph = export_layer_graph(AutoModel.from_pretrained(model), tmp_path / "g")
    quantize_openvino(graph, tok, TEXTS[:8], batch_size=8, max_length=32)
    assert has_openvino_int8(graph, TEXTS[:8])
    monkeypatch.setitem(openvino_int8.QUANTIZATION, "smooth_quant_alphas", [-1.0])  # SmoothQuant off only
    assert has_openvino_int8(graph) and not has_openvino_int8(graph, TEXTS[:8])
    quantize_openvino(graph, tok, TEXTS[:8], batch_size=8, max_length=32)
    record = json.loads((graph / "openvino-int8" / CALIBRATION_FILE).read_text())
    assert record["smooth_quant_alpha"] == -1 and has_openvino_int8(graph, TEXTS[:8])


def test_the_alpha_kept_is_the_one_whose_similarities_agree_best_with_fp32(tmp_path, monkeypatch):
    """The slow twin of the choice: each alpha's int8 model quantized on its own, its vectors read back through the
    session, the agreement computed by hand from every pair's cosine (scipy), and the best one is the kept one."""
    import json

    from scipy.stats import spearmanr
    from transformers import AutoModel, AutoTokenizer

    from layerwise.encoders import openvino_int8

    model = build_tiny_mpnet(tmp_path / "m")
    tok = AutoTokenizer.from_pretrained(model)
    graph = export_layer_graph(AutoModel.from_pretrained(model), tmp_path / "g")
    calib, layers = TEXTS[:16], [1, 2]
    quantize_openvino(graph, tok, calib, batch_size=8, max_length=32, layers=layers)
    record = json.loads((graph / "openvino-int8" / CALIBRATION_FILE).read_text())
    assert record["layers"] == layers and has_openvino_int8(graph, calib, layers)

    def vectors(session):
        return session.encode(tok, calib, batch_size=8, max_length=32).mean[:, layers].mean(axis=1)

    def pair_cosines(v):
        return [float(np.dot(v[i], v[j]) / np.linalg.norm(v[i]) / np.linalg.norm(v[j]))
                for i in range(len(v)) for j in range(i + 1, len(v))]

    reference = pair_cosines(vectors(LayerGraphSession(graph, runtime="openvino")))
    by_hand = {}
    for alpha in SMOOTH_QUANT_ALPHAS:
        one = tmp_path / f"g{alpha}"
        one.mkdir()
        for name in ("model.onnx", "layer_graph.json"):
            (one / name).write_bytes((graph / name).read_bytes())
        with monkeypatch.context() as m:  # this alpha alone
            m.setitem(openvino_int8.QUANTIZATION, "smooth_quant_alphas", [alpha])
            quantize_openvino(one, tok, calib, batch_size=8, max_length=32, layers=layers)
        int8 = LayerGraphSession(one, quantized=True, runtime="openvino")
        by_hand[alpha] = spearmanr(reference, pair_cosines(vectors(int8))).statistic
        assert record["agreement"][str(alpha)] == pytest.approx(by_hand[alpha], abs=1e-6)
    assert record["smooth_quant_alpha"] == max(by_hand, key=by_hand.get)
    kept = LayerGraphSession(graph, quantized=True, runtime="openvino")
    assert spearmanr(reference, pair_cosines(vectors(kept))).statistic == pytest.approx(max(by_hand.values()), abs=1e-6)


def test_similarity_agreement_is_one_for_the_same_similarities_and_undefined_when_they_are_all_alike():
    from layerwise.encoders.openvino_int8 import similarity_agreement

    rng = np.random.default_rng(1)
    a = rng.normal(size=(6, 4))
    assert similarity_agreement(a, 3 * a) == pytest.approx(1.0)  # a scale keeps every cosine
    assert similarity_agreement(a, -a) == pytest.approx(1.0)  # a sign flip of every row does too
    assert similarity_agreement(a, rng.normal(size=(6, 4))) < 0.9
    with pytest.warns(Warning):  # scipy's ConstantInputWarning: every row alike, no ranking to compare
        assert np.isnan(similarity_agreement(a, np.ones((6, 4))))
