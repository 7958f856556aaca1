"""The ``multitask`` results page and the ``layerwise multitask`` command on a tiny random BERT and small data."""

from __future__ import annotations

import json

import pytest

from conftest import write_multitask
from layerwise.benchmarks import ResultsStore
from layerwise.benchmarks.catalog import get_page
from layerwise.benchmarks.registry import PageContext

TINY = {"epochs": 1, "batch_size": 8, "max_length": 16, "lr": 1e-3, "limit": 10, "eval_limit": 8}


def _best_of_two(tiny_bert, tmp_path) -> dict:
    """Two experiments at seed 0, and seed 1 for the better of them on dev."""
    return {"experiments": ["BASELINE", "STS_PARA_HEAD_MOD"], "seeds": [0], "more_seeds": [1],
            "more_seeds_for": ["best"], "model": str(tiny_bert), "overrides": TINY,
            "checkpoints": str(tmp_path / "runs"), "paper_protocols": []}


def test_page_runs_resumes_and_renders(tiny_bert, tmp_path, monkeypatch):
    from layerwise.benchmarks.multitask import experiment

    data = write_multitask(tmp_path / "data", n=20)
    store = ResultsStore(tmp_path / "state")
    options = {"experiments": ["BASELINE", "BASELINE+MIX"], "seeds": [0, 1], "model": str(tiny_bert),
               "overrides": TINY, "checkpoints": str(tmp_path / "runs"), "paper_protocols": []}
    page = get_page("multitask")
    ctx = PageContext(store=store, output=tmp_path / "out", data_dir=str(data), options=options)
    page.run(ctx)
    parts = {p.name: p for p in store.parts("multitask")}
    assert sorted(parts) == ["BASELINE+MIX-seed0", "BASELINE+MIX-seed1", "BASELINE-seed0", "BASELINE-seed1",
                             "encoder-training-data", "gold-scores"]
    assert parts["encoder-training-data"].payload == {"files": []}  # the tiny model declares no training data
    key = parts["BASELINE-seed1"].key
    assert key["seed"] == 1 and key["config"]["epochs"] == 1 and key["model"]["weights_sha256"]
    assert set(key["data"]) >= {"sst", "para", "sts"}
    timing = parts["BASELINE-seed0"].payload["timing"]  # how much of the machine the run had, and where it ran
    assert timing["device"] == "cpu" and timing["wall_seconds"] > 0 and timing["cpu_seconds"] > 0
    assert len(timing["load_average_at_end"]) == 3
    monkeypatch.setattr(experiment, "run_experiment",
                        lambda *a, **k: (_ for _ in ()).throw(AssertionError("recomputed")))
    page.run(ctx)  # everything stored: nothing trains
    written = page.render(ctx)
    md = (tmp_path / "out" / "multitask.md").read_text()
    assert tmp_path / "out" / "multitask-layers.png" in written
    assert "Every mix starts uniform (1/3 = 0.333 per hidden state)" in md  # the tiny BERT: hidden states 0..2
    assert "device: cpu" in md and "| run | wall (min) | CPU/wall | load at start | load at end | CPUs |" in md
    row = next(line for line in md.splitlines() if line.startswith("| BASELINE-seed1 |"))
    assert "not recorded" not in row  # every column of a run stored with its timing
    summary = json.loads((tmp_path / "out" / "multitask.json").read_text())
    base = summary["experiments"]["BASELINE"]
    tests = [parts[f"BASELINE-seed{s}"].payload["test"]["overall"] for s in (0, 1)]
    assert base["test"]["overall"] == pytest.approx(sum(tests) / 2)
    row = next(line for line in md.splitlines() if line.startswith("| BASELINE |"))
    assert f"{sum(tests) / 2:.3f} ±" in row and "| 2 |" in row
    changed = {**options, "overrides": {**TINY, "epochs": 2}, "experiments": ["BASELINE"], "seeds": [0]}
    with pytest.raises(AssertionError, match="recomputed"):  # another setting: another key, computed again
        page.run(PageContext(store=store, output=tmp_path / "out", data_dir=str(data), options=changed))


def test_page_refuses_bad_options():
    from layerwise.benchmarks.multitask.pages import page_config

    with pytest.raises(ValueError, match="unknown multitask page options"):
        page_config({"experiment": ["BASELINE"]})
    with pytest.raises(ValueError, match="unknown MultitaskConfig overrides"):
        page_config({"overrides": {"epoch": 1}})
    with pytest.raises(KeyError, match="no multitask experiment"):
        page_config({"experiments": ["BASELINE+MAX"]})
    with pytest.raises(ValueError, match="multitask page: shard='2/2' is invalid"):
        page_config({"shard": "2/2"})
    with pytest.raises(ValueError, match="multitask page: device='gpu0' is not a torch device"):
        page_config({"device": "gpu0"})


def test_cli_multitask_writes_results_and_resumes(tiny_bert, tmp_path, capsys):
    from layerwise.cli import main

    data = write_multitask(tmp_path / "data", n=20)
    cfg = tmp_path / "mine.json"
    cfg.write_text(json.dumps({"name": "MINE", "sts_head": "cosine", "schedule": "round_robin"}))
    argv = ["multitask", "STS_PARA_HEAD_MOD+MIX", "--config", str(cfg), "--model", str(tiny_bert), "--data-dir",
            str(data), "--output", str(tmp_path / "out"), "--epochs", "1", "--batch-size", "8", "--max-length", "16",
            "--limit", "10", "--eval-limit", "8", "-q"]
    assert main(argv) == 0
    out = tmp_path / "out"
    doc = json.loads((out / "multitask.json").read_text())
    assert [r["config"]["name"] for r in doc["runs"]] == ["STS_PARA_HEAD_MOD+MIX", "MINE"]
    assert doc["runs"][1]["config"]["schedule"] == "round_robin" and doc["runs"][1]["config"]["epochs"] == 1
    assert (out / "multitask.md").is_file() and (out / "multitask-layers.png").is_file()
    (folder,) = (out / "runs" / "MINE").glob("seed0-*")  # one folder per setting
    assert (folder / "tasks" / "best" / "multitask_model.json").is_file()
    first = capsys.readouterr().out
    assert main(argv) == 0  # stored: reused, same numbers
    assert json.loads((out / "multitask.json").read_text())["runs"] == doc["runs"]
    assert capsys.readouterr().out.splitlines()[:3] == first.splitlines()[:3]
    mine = [argv[0], *argv[2:]]  # MINE alone, under a changed setting: a new folder, the old one kept
    assert main([*mine, "--lr", "1e-4"]) == 0
    assert len(list((out / "runs" / "MINE").glob("seed0-*"))) == 2 and folder.is_dir()
    capsys.readouterr()
    assert main(["multitask", "--model", str(tiny_bert)]) == 2
    assert "name at least one experiment" in capsys.readouterr().err


def test_page_runs_more_seeds_for_the_best_experiment_once_every_first_seed_is_stored(tiny_bert, tmp_path):
    from layerwise.benchmarks.multitask.pages import best_experiment, page_config

    data = write_multitask(tmp_path / "data", n=20)
    store = ResultsStore(tmp_path / "state")
    options = _best_of_two(tiny_bert, tmp_path)
    ctx = PageContext(store=store, output=tmp_path / "out", data_dir=str(data), options=options)
    get_page("multitask").run(ctx)
    parts = {p.name: p for p in store.parts("multitask")}
    dev = {n: parts[f"{n}-seed0"].payload["dev"]["overall"] for n in options["experiments"]}
    best = max(dev, key=dev.get)
    assert sorted(parts) == sorted([f"{n}-seed0" for n in dev] + [f"{best}-seed1", "encoder-training-data",
                                                                  "gold-scores"])
    from layerwise.methods.multitask.run import ExperimentResult

    results = [ExperimentResult.from_payload(p.payload) for n, p in parts.items()
               if n not in ("encoder-training-data", "gold-scores")]
    assert best_experiment(page_config(options), results) == best
    assert best_experiment(page_config(options), results[:1]) is None  # not every first seed: unknown
    get_page("multitask").render(ctx)
    md = (tmp_path / "out" / "multitask.md").read_text()
    assert f"which every experiment has: **{best}**" in md and "## Not run yet" not in md
    with pytest.raises(ValueError, match="not among the page's experiments"):
        page_config({**options, "more_seeds_for": ["SHARED"]})


def test_run_order_trains_baseline_and_its_mix_first_and_keeps_every_experiment_once():
    from layerwise.benchmarks.multitask.pages import page_config

    page = page_config()
    order = [c.name for c in page.run_order()]
    assert order[:2] == ["BASELINE", "BASELINE+MIX"]
    assert sorted(order) == sorted(page.experiments)
    assert [c.name for c in page.configs()] == list(page.experiments)  # the page's rows keep their order
    only = page_config({"experiments": ["SHARED", "BASELINE+MIX"]})
    assert [c.name for c in only.run_order()] == ["BASELINE+MIX", "SHARED"]


def test_shards_partition_the_planned_runs(tmp_path):
    from layerwise.benchmarks.multitask.pages import page_config, planned_runs
    from layerwise.benchmarks.sharding import in_shard

    page = page_config()
    planned = [(c.name, s) for c, s in planned_runs(page, ResultsStore(tmp_path / "state"))]
    assert len(planned) == len(set(planned)) == len(page.experiments) + 2 + len(page.paper_protocols)
    assert ("BASELINE", 1) in planned and ("BASELINE+MIX", 1) in planned  # the best's seed 1: not known yet
    shares = [in_shard(planned, f"{i}/3") for i in range(3)]
    assert sorted(x for share in shares for x in share) == sorted(planned)  # no run twice, none left out


def test_sharded_page_trains_each_run_once_and_the_best_extra_seed_on_a_second_pass(tiny_bert, tmp_path):
    data = write_multitask(tmp_path / "data", n=20)
    store = ResultsStore(tmp_path / "state")
    options = _best_of_two(tiny_bert, tmp_path)
    page = get_page("multitask")

    def run(shard):
        page.run(PageContext(store=store, output=tmp_path / "out", data_dir=str(data),
                             options={**options, "shard": shard}))
        return {p.name for p in store.parts("multitask")} - {"encoder-training-data", "gold-scores"}

    assert run("0/2") == {"BASELINE-seed0"}
    assert run("1/2") == {"BASELINE-seed0", "STS_PARA_HEAD_MOD-seed0"}
    parts = {p.name: p for p in store.parts("multitask")}
    best = max(options["experiments"], key=lambda n: parts[f"{n}-seed0"].payload["dev"]["overall"])
    assert run("1/2") == {"BASELINE-seed0", "STS_PARA_HEAD_MOD-seed0"}  # the extra seed is the third run: shard 0
    assert run("0/2") == {"BASELINE-seed0", "STS_PARA_HEAD_MOD-seed0", f"{best}-seed1"}
