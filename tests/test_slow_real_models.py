"""Slow tests on the real pretrained encoders (`make test-slow`; deselected by default).

Each pairs a fast path with a real library or a slow twin on real weights and data: the layer encoder against
sentence-transformers' own `encode`, the exact subset search against the naive search, a truncated export against
the full model's hidden state, and the word-similarity analysis on the shared data.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import SHARED_DATA

pytestmark = pytest.mark.slow


def _minilm_path():
    from layerwise.encoders.registry import BUILTIN_MODELS

    path = BUILTIN_MODELS["all-MiniLM-L6-v2"].locate()
    if path is None:
        pytest.skip("all-MiniLM-L6-v2 is not installed (make setup installs it)")
    return path


def test_layer_encoder_last_layer_equals_sentence_transformers_encode(tmp_path):
    from sentence_transformers import SentenceTransformer

    from layerwise import LayerEncoder
    from layerwise.data import load_sts

    path = _minilm_path()
    texts = list(load_sts("stsb", split="test").sentences1[:200])
    stack = LayerEncoder(path, cache_dir=tmp_path, show_progress=False).encode(texts)
    ours = stack.mean[:, -1] / np.linalg.norm(stack.mean[:, -1], axis=1, keepdims=True)
    theirs = SentenceTransformer(str(path), device="cpu").encode(texts, batch_size=64)  # mean pooling + Normalize
    np.testing.assert_allclose(ours, theirs, atol=2e-5)


def test_exact_search_equals_naive_search_on_real_stsb(tmp_path):
    from layerwise import LayerEncoder, LayerSubsetSearch, naive_subset_scores
    from layerwise.data import load_sts

    data = load_sts("stsb", split="dev")
    enc = LayerEncoder(_minilm_path(), cache_dir=tmp_path, show_progress=False)
    a, b = enc.encode(data.sentences1).mean, enc.encode(data.sentences2).mean
    search = LayerSubsetSearch().fit(a, b, data.scores)
    naive = naive_subset_scores(a, b, data.scores)
    best_naive = max(naive, key=naive.get)
    assert search.best_layers_ == best_naive
    want = np.array([naive[s] for s in search.subsets_])
    scale = 100.0 if abs(search.best_score_) > 1.0 else 1.0  # scores are x100 in the public API
    np.testing.assert_allclose(search.scores_ / scale, want / (100.0 if abs(want).max() > 1.0 else 1.0), atol=1e-6)


def test_truncated_minilm_export_equals_hidden_state_3(tmp_path):
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel, AutoTokenizer

    from layerwise.encoders.hidden_states import pool_hidden_states
    from layerwise.encoders.truncate import count_parameters, truncate_encoder
    from layerwise.export import write_sentence_transformer

    path = _minilm_path()
    tok = AutoTokenizer.from_pretrained(path)
    full = AutoModel.from_pretrained(path).eval()
    cut = truncate_encoder(full, 3)
    assert count_parameters(cut) < count_parameters(full)
    folder = write_sentence_transformer(cut, tok, tmp_path / "minilm-l3")
    texts = ["A man is playing a guitar.", "Two dogs run through a snowy field near the trees."]
    enc = tok(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = full(**enc, output_hidden_states=True).hidden_states
    want = pool_hidden_states(hidden, enc["attention_mask"])[1][:, 3].numpy()
    got = SentenceTransformer(str(folder), device="cpu").encode(texts)
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_wordsim_on_the_shared_data_is_in_a_sane_range(tmp_path):
    from layerwise import LayerEncoder
    from layerwise.data import load_wordsim
    from layerwise.methods.truncated.wordsim import per_layer_wordsim

    if not (SHARED_DATA / "wordsim").is_dir():
        pytest.skip(f"no shared data at {SHARED_DATA}")
    enc = LayerEncoder(_minilm_path(), cache_dir=False, show_progress=False)
    result = per_layer_wordsim(enc, [load_wordsim("rg65", SHARED_DATA)])
    assert len(result.scores["rg65"]) == 7
    assert 30 < max(result.scores["rg65"]) < 100  # a trained encoder ranks word pairs far better than chance


def test_minilm_layer_subset_export_equals_bert_lc_and_runs_four_layers(tmp_path):
    """The export of all-MiniLM-L6-v2's hidden states (1, 4) keeps 4 of 6 layers and gives BERT-LC's vectors."""
    from safetensors import safe_open
    from sentence_transformers import SentenceTransformer

    from layerwise import LayerEncoder, layer_mean
    from layerwise.methods.lc.export import SubsetExport, export_layer_subset

    texts = ["A man is playing a guitar.", "Two dogs run through a snowy field near the trees.", "It rains."]
    enc = LayerEncoder("all-MiniLM-L6-v2", max_length=128, cache_dir=False, show_progress=False)
    want = layer_mean(enc.encode(texts), (1, 4))
    out = export_layer_subset(SubsetExport(model="all-MiniLM-L6-v2", layers=(1, 4), max_length=128), tmp_path / "x")
    got = SentenceTransformer(str(out), device="cpu", trust_remote_code=False).encode(texts)
    np.testing.assert_allclose(got, want, atol=1e-5)
    with safe_open(str(out / "model.safetensors"), "pt") as f:
        kept = {int(k.split("encoder.layer.")[1].split(".")[0]) for k in f.keys() if "encoder.layer." in k}
    assert kept == {0, 1, 2, 3}


def test_mpnet_int8_graph_keeps_stsb_dev_within_half_a_point(tmp_path, monkeypatch):
    """all-mpnet-base-v2's activations saturated the 8-bit int8 graph on a CPU without VNNI (whole STS-B dev, last-layer
    mean, max length 128: 13.85 against float32's 88.11; the screen's lines of 2026-12-01 in
    docs/results/screens/compress-int8-variants.jsonl); the library's 7-bit graph loses no more than 0.5 (issue 25's
    int8 goal) on any CPU. It scored higher in that screen (88.71, +0.60), as the 8-bit graph did on a VNNI CPU
    (+0.59): a gain is allowed up to 1.0, a loss only up to 0.5."""
    pytest.importorskip("onnxruntime")
    from layerwise import LayerEncoder
    from layerwise.data import load_sts
    from layerwise.encoders.registry import BUILTIN_MODELS
    from layerwise.evaluation.metrics import cosine_rows, spearman

    path = BUILTIN_MODELS["all-mpnet-base-v2"].locate()
    if path is None or not SHARED_DATA.is_dir():
        pytest.skip("all-mpnet-base-v2 or the shared STS-B is not here (make setup models installs the model)")
    monkeypatch.setenv("LAYERWISE_HOME", str(tmp_path))
    dev = load_sts("stsb", data_dir=SHARED_DATA, split="dev")
    scores = {}
    for backend in ("onnx", "onnx-int8"):
        enc = LayerEncoder(path, backend=backend, cache_dir=False, show_progress=False)
        a, b = enc.encode(list(dev.sentences1)).mean[:, -1], enc.encode(list(dev.sentences2)).mean[:, -1]
        scores[backend] = 100 * spearman(cosine_rows(a, b), np.asarray(dev.scores))
    assert -0.5 <= scores["onnx-int8"] - scores["onnx"] <= 1.0, scores
