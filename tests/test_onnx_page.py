"""The onnx speed page: measured on a tiny model with few sentences, stored, rendered from the store alone."""

import importlib.util

import pytest

from layerwise.benchmarks.catalog import get_page
from layerwise.benchmarks.registry import PageContext, render_page
from layerwise.benchmarks.store import ResultsStore


def test_onnx_page_runs_stores_and_renders(tiny_bert, env, tmp_path, monkeypatch):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("sentence_transformers")
    page = get_page("onnx")
    has_openvino = importlib.util.find_spec("openvino") is not None
    options = {"model": str(tiny_bert), "n_sentences": 40, "repeats": 2, "warmup": 4, "max_length": 32,
               "dev_pairs": 60, "openvino": has_openvino}
    ctx = PageContext(store=ResultsStore(tmp_path / "state"), output=tmp_path / "out", command=("test",),
                      options=options)
    page.run(ctx)
    [part] = ctx.store.parts("onnx")
    p = part.payload
    assert set(p["seconds_runs"]) == {"torch", "onnx", "onnx-int8", "sentence-transformers"} | (
        {"openvino"} if has_openvino else set())
    if has_openvino:
        assert p["agreement"]["openvino_max_abs_diff"]["mean"] < 1e-4
    assert all(len(runs) == 2 for runs in p["seconds_runs"].values())
    assert p["agreement"]["fp32_max_abs_diff"]["mean"] < 1e-4
    assert abs(p["quality"]["onnx"] - p["quality"]["torch"]) < 0.05
    [path] = page.render(ctx)
    text = path.read_text()
    assert "ONNX int8, every state, vs sentence-transformers" in text and f"{p['ratios']['onnx-int8_vs_st']:.2f}x" in text
    page.run(ctx)  # stored: nothing is measured again
    assert [q.payload["seconds"] for q in ctx.store.parts("onnx")] == [p["seconds"]]
    path.unlink()
    page.render(ctx)
    assert path.read_text() == text  # the page comes from the store alone


def test_committed_onnx_page_renders_from_the_committed_store(tmp_path):
    from pathlib import Path

    results = Path(__file__).resolve().parents[1] / "docs" / "results"
    ctx = PageContext(store=ResultsStore(results / "state"), output=tmp_path, command=("test",))
    render_page(get_page("onnx"), ctx)  # as `layerwise results render` does: with the shared footer
    assert (tmp_path / "onnx.md").read_text() == (results / "onnx.md").read_text()
