"""Typed results of lattemix, train and retrieval: JSON round trips, schema checks, the search dict's keys kept;
the git helpers of ``reports`` (``source_revision`` built on ``git_state``) against git run directly."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from layerwise.benchmarks.lattemix.results import DataSetInfo, KindResult, LatteMixResult, LatteMixRun, TrainingText
from layerwise.benchmarks.layer_attention.results import (
    IndexResult,
    RetrievalDataInfo,
    RetrievalResult,
    TrainHistory,
    TrainResult,
)
from layerwise.encoders.layer_encoder import ModelIdentity
from layerwise.evaluation.retrieval import RetrievalData, search
from layerwise.methods.lattemix import LatteMixConfig, TrainConfig
from layerwise.methods.layer_attention.train import ContrastiveConfig
from layerwise.reports import git_state, source_revision

IDENTITY = ModelIdentity("tiny", None, "/models/tiny", "ab" * 32, None, "cd" * 32, "bert", 2, 32, True, False)


def _lattemix() -> LatteMixResult:
    run = LatteMixRun(model="tiny", datasets=("stsb", "sickr"), seeds=(0, 1), kinds=("categorical",),
                      config=LatteMixConfig(n_classes=8), train=TrainConfig(max_steps=3), train_limit=10)
    kind = KindResult(config=LatteMixConfig(n_classes=8, input_dim=32).to_dict(), train=TrainConfig().to_dict(),
                      seeds=[0, 1], layer=2, include_special=False,
                      scores={"js": {"stsb": [50.0, 51.5], "sickr": [40.0, 42.0]}}, train_seconds=[1.0, 1.5],
                      final_loss=[3.0, 2.5], final_kl=[0.1, 0.2])
    return LatteMixResult(
        settings=run, model=IDENTITY, layer=2, aggregation="all",
        data={"stsb": DataSetInfo("test", 10, "/d/stsb"), "sickr": DataSetInfo("test", 12, "/d/sick")},
        training_text=TrainingText({"snli": 5, "wiki": 7}, 1, 10, 10, "a note", n_tokens=99),
        baselines={"mean": {"stsb": 60.0, "sickr": 55.0}}, runs={"categorical": kind},
        seconds={"encode_train": 0.5, "encode_eval": 0.25}, environment={"command": "layerwise lattemix"})


def _train() -> TrainResult:
    history = TrainHistory(step=[1, 2], loss=[2.0, 1.5], dev=[[2, 70.5]], best_dev=70.5, seconds=3.0,
                           train_seconds=2.0, steps_this_run=2, config=ContrastiveConfig(steps=2, batch_size=4))
    return TrainResult("tiny", "layer_attention", "wiki1m head", 40, "STS-B dev (8 pairs)", history, "/runs/t")


def _retrieval() -> RetrievalResult:
    index = IndexResult("exact (numpy)", 80.0, {1: 70.0, 5: 90.0, 10: 95.0}, 0.1, 0.0, 4096, 2, 6)
    return RetrievalResult("/runs/t/best", "layer_attention", RetrievalDataInfo("quora", "dev", 6, 2), [index])


@pytest.mark.parametrize("make, cls, kind", [(_lattemix, LatteMixResult, "lattemix"), (_train, TrainResult, "train"),
                                             (_retrieval, RetrievalResult, "retrieval")])
def test_results_round_trip_through_json_with_their_stamp(make, cls, kind):
    result = make()
    doc = json.loads(json.dumps(result.to_dict()))
    assert list(doc)[:2] == ["kind", "schema"] and (doc["kind"], doc["schema"]) == (kind, 1)
    assert cls.from_dict(doc) == result
    with pytest.raises(ValueError, match=f"has {kind} schema 2; this layerwise reads schema 1"):
        cls.from_dict({**doc, "schema": 2})
    with pytest.raises(ValueError, match=f"not a '{kind}' results document \\(kind 'search'\\)"):
        cls.from_dict({**doc, "kind": "search"})
    with pytest.raises(ValueError, match=f"has {kind} schema None"):  # written before the stamp existed
        cls.from_dict({k: v for k, v in doc.items() if k != "schema"})


def test_lattemix_json_keeps_the_keys_the_command_always_wrote():
    doc = _lattemix().to_dict()
    assert list(doc) == ["kind", "schema", "settings", "model", "layer", "aggregation", "data", "training_text",
                         "baselines", "runs", "seconds", "environment"]
    assert doc["model"] == IDENTITY.to_dict() and doc["data"]["stsb"] == {"split": "test", "n_pairs": 10,
                                                                         "source": "/d/stsb"}
    assert doc["settings"]["config"]["n_classes"] == 8 and doc["runs"]["categorical"]["scores"]["js"]["stsb"][1] == 51.5
    assert list(doc["training_text"]) == ["sources", "excluded_as_evaluation_sentences", "n_sentences", "limit",
                                          "note", "n_tokens"]


def test_lattemix_run_from_dict_refuses_unknown_fields():
    with pytest.raises(ValueError, match="unknown LatteMixRun fields \\['layers'\\]"):
        LatteMixRun.from_dict({"layers": [1]})


def test_index_result_keeps_the_search_dict_keys_and_order():
    rng = np.random.default_rng(0)
    data = RetrievalData([f"q{i}" for i in range(8)], [0, 2, 5], [frozenset({1}), frozenset({3, 4}), frozenset({6})],
                         "dev", "mem")
    found = search(data, rng.normal(size=(8, 4)).astype(np.float32))
    typed = IndexResult.from_dict(found)
    assert typed.to_dict() == found and list(typed.to_dict()) == list(found)
    assert typed.mrr_at_10 == found["mrr@10"] and typed.recall == {k: found[f"recall@{k}"] for k in (1, 5, 10)}


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          capture_output=True, text=True, check=True).stdout


def test_git_state_under_src_and_over_the_whole_checkout(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("a = 1\n")
    (tmp_path / "README").write_text("read me\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-qm", "first")
    head = _git(tmp_path, "rev-parse", "HEAD").strip()
    assert git_state(tmp_path) == {"commit": head, "src_changes": []}
    (tmp_path / "README").write_text("changed\n")
    (tmp_path / "src" / "new.py").write_text("")
    assert git_state(tmp_path) == {"commit": head, "src_changes": ["?? src/new.py"]}  # README is outside src/
    # source_revision's view: tracked files anywhere, untracked ones ignored
    assert git_state(tmp_path, under=None, untracked=False) == {"commit": head, "src_changes": ["M README"]}
    assert git_state(tmp_path / "missing") is None


def test_source_revision_is_this_checkouts_head():
    rev = source_revision()
    root = Path(__file__).resolve().parents[1]
    import layerwise

    if Path(layerwise.__file__).resolve().parent != root / "src" / "layerwise":
        assert rev is None or set(rev) == {"commit", "dirty"}
        pytest.skip("layerwise is not imported from this checkout's src/")
    assert rev is not None and rev["commit"] == _git(root, "rev-parse", "HEAD").strip()
    code_changes = _git(root, "status", "--porcelain", "--", "src").strip()
    assert rev["dirty"] == bool(code_changes)  # only the code under src/ counts


def test_source_revision_is_dirty_only_for_the_code_under_src(tmp_path, monkeypatch):
    from layerwise import reports

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("a = 1\n")
    (tmp_path / "docs" / "results").mkdir(parents=True)
    (tmp_path / "docs" / "results" / "page.md").write_text("# page\n")
    (tmp_path / "README").write_text("read me\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-qm", "first")
    monkeypatch.setattr(reports, "source_root", lambda: tmp_path)
    (tmp_path / "docs" / "results" / "page.md").write_text("# page, run again\n")  # a results run's own outputs
    (tmp_path / "README").write_text("edited\n")  # and a test, README or Makefile: not code a run executes
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_new.py").write_text("")
    assert reports.source_revision()["dirty"] is False
    (tmp_path / "src" / "b.py").write_text("b = 1\n")  # a new module under src/, not committed: a run may import it
    assert reports.source_revision()["dirty"] is True
    (tmp_path / "src" / "b.py").unlink()
    assert reports.source_revision()["dirty"] is False
    (tmp_path / "src" / "a.py").write_text("a = 2\n")
    assert reports.source_revision()["dirty"] is True
