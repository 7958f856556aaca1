"""The ``compress`` results page on a tiny random BERT and small written data: run, store, render from the store."""

from __future__ import annotations

import pytest

from conftest import write_stsb, write_unlabeled
from layerwise.benchmarks import ResultsStore
from layerwise.benchmarks.catalog import get_page
from layerwise.benchmarks.registry import PageContext
from layerwise.methods.compress import Compressor


def test_compress_page_runs_and_renders_from_the_store(tiny_bert, env, monkeypatch):
    data = write_unlabeled(write_stsb(env / "data", n_pairs=24))
    store = ResultsStore(env / "state")
    options = {"models": [str(tiny_bert)], "backends": ["torch"], "epochs": 1, "batch_size": 8, "max_length": 16,
               "speed_sentences": 16, "speed_batch_size": 16, "speed_repeats": 1, "corpus": ["wiki", "snli"],
               "tests": ["stsb"], "folders": str(env / "runs")}
    ctx = PageContext(store=store, output=env / "out", data_dir=str(data), command=("test",), options=options)
    page = get_page("compress")
    page.run(ctx)
    (part,) = store.parts("compress")
    p = part.payload
    counts = p["corpus"]
    assert counts["kept"] == counts["distinct"] - counts["left_out_scored"] > 8
    recipes = {c["recipe"] for c in p["result"]["candidates"]}
    assert {"original", "cut", "distilled"} <= recipes
    assert all(set(c["tests"]) == {"stsb"} for c in p["result"]["candidates"])
    monkeypatch.setattr(Compressor, "fit", lambda *a, **k: pytest.fail("computed again"))
    page.run(ctx)  # the part is in the store: nothing is computed
    md, png = page.render(ctx)
    text = md.read_text()
    assert f"## {tiny_bert.name}" in text and "| **chosen** |" in text and png.is_file()
    assert f"Distillation corpus: {counts['kept']} sentences" in text


def test_compress_page_refuses_unknown_options(tmp_path):
    ctx = PageContext(store=ResultsStore(tmp_path), output=tmp_path, options={"budgte": 1})
    with pytest.raises(ValueError, match="unknown compress page option"):
        get_page("compress").run(ctx)
