"""The ``export`` results page on a tiny random BERT and small written STS-B files: search -> export -> reload."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import write_stsb
from layerwise.benchmarks import ResultsStore
from layerwise.benchmarks.catalog import get_page
from layerwise.benchmarks.registry import PageContext


def test_export_page_runs_renders_and_agrees_with_layerwise(tiny_bert, tmp_path):
    data = write_stsb(tmp_path / "data", n_pairs=24)
    store = ResultsStore(tmp_path / "state")
    options = {"models": [str(tiny_bert)], "n_splits": 2, "dev_size": 8, "max_length": 16, "speed_sentences": 10,
               "speed_batch_size": 4, "speed_repeats": 1, "folders": str(tmp_path / "runs")}
    ctx = PageContext(store=store, output=tmp_path / "out", data_dir=str(data), command=("test",), options=options)
    page = get_page("export")
    page.run(ctx)
    (part,) = store.parts("export")
    p = part.payload
    assert p["layers_kept"] == max(p["layers"]) and p["n_layers"] == 2
    assert p["scores"]["exported"]["spearman"] == pytest.approx(p["scores"]["layerwise"]["spearman"], abs=1e-4)
    assert p["max_abs_difference"] < 1e-5
    assert all(m.startswith("sentence_transformers.") for m in p["modules"])
    assert set(p["speed"]) == {"exported", "original"} and all(
        v["sentences_per_second"] > 0 for v in p["speed"].values())
    assert np.isfinite(p["scores"]["original"]["spearman"])
    mtime = next((tmp_path / "state" / "export").iterdir()).stat().st_mtime_ns
    page.run(ctx)  # nothing left to compute: the part is not rewritten
    assert next((tmp_path / "state" / "export").iterdir()).stat().st_mtime_ns == mtime
    (md,) = page.render(ctx)
    text = md.read_text()
    assert "| tiny" in text or str(tiny_bert.name) in text
    assert "same STS-B test Spearman" in text


def test_export_page_refuses_unknown_options(tmp_path):
    ctx = PageContext(store=ResultsStore(tmp_path), output=tmp_path, options={"modles": ["x"]})
    with pytest.raises(ValueError, match="unknown export page option"):
        get_page("export").run(ctx)
