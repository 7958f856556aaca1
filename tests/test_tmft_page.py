"""TMFT analyses, the ``tmft`` results page and the ``layerwise tmft`` command on a tiny random BERT and small data."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from scipy.stats import spearmanr

from conftest import write_stsb, write_unlabeled
from layerwise.benchmarks import ResultsStore
from layerwise.benchmarks.catalog import get_page
from layerwise.benchmarks.registry import PageContext
from layerwise.errors import UsageError
from test_tmft import WS_LINES


@pytest.fixture
def data_dir(tmp_path):
    folder = write_unlabeled(write_stsb(tmp_path / "data", n_pairs=24))
    ws = folder / "wordsim" / "faruqui_eval-word-vectors"
    ws.mkdir(parents=True)
    (ws / "EN-RG-65.txt").write_text(WS_LINES.replace(" ", "\t"))
    return folder


def test_frontier_equals_a_naive_search_restricted_to_each_depth(tiny_bert, data_dir):
    from transformers import AutoModel

    from layerwise.benchmarks.truncated.analysis import Frontier, zero_training_frontier
    from layerwise.data import load_sts
    from layerwise.encoders import LayerEncoder
    from layerwise.encoders.truncate import count_parameters, truncate_encoder
    from layerwise.methods.lc.search import naive_subset_scores, subset_cosine

    enc = LayerEncoder(str(tiny_bert), max_length=16, cache_dir=False, show_progress=False)
    frontier = zero_training_frontier(enc, data_dir)
    assert [r.depth for r in frontier.rows] == [0, 1, 2] and frontier.n_dev == 24
    dev, test = (load_sts("stsb", data_dir=data_dir, split=s) for s in ("dev", "test"))
    a, b = enc.encode(dev.sentences1).mean, enc.encode(dev.sentences2).mean
    ta, tb = (enc.encode(s).mean.astype(np.float64) for s in (test.sentences1, test.sentences2))
    full = AutoModel.from_pretrained(tiny_bert)
    for row in frontier.rows:
        naive = naive_subset_scores(a[:, : row.depth + 1], b[:, : row.depth + 1], dev.scores)
        assert max(row.layers) <= row.depth
        assert row.dev_spearman == pytest.approx(max(naive.values()), abs=1e-9)
        assert naive[row.layers] == pytest.approx(row.dev_spearman, abs=1e-9)
        # the same pairs recur in the tiny data, so equal cosines must tie exactly: one cosine function for both
        cos = subset_cosine(ta, tb, row.layers)
        u, v = ta[:, list(row.layers)].mean(1), tb[:, list(row.layers)].mean(1)
        np.testing.assert_allclose(cos, (u * v).sum(1) / np.linalg.norm(u, axis=1) / np.linalg.norm(v, axis=1))
        assert row.test_spearman == pytest.approx(100 * spearmanr(cos, test.scores)[0], abs=1e-6)
        cos = subset_cosine(ta, tb, (row.depth,))
        assert row.single_test_spearman == pytest.approx(100 * spearmanr(cos, test.scores)[0], abs=1e-6)
        assert row.parameters == count_parameters(truncate_encoder(full, row.depth))
    assert Frontier.from_dict(json.loads(json.dumps(frontier.to_dict()))) == frontier


def test_throughput_has_one_positive_row_per_depth_and_the_full_model(tiny_bert):
    from layerwise.benchmarks.truncated.analysis import Throughput, throughput

    sentences = ["a man plays guitar .", "the dog runs in the park .", "a child eats food ."] * 5
    t = throughput(str(tiny_bert), [0, 1], sentences, batch_size=4, repeats=2, max_length=16)
    assert [r.depth for r in t.rows] == [0, 1, 2] and t.full().depth == 2 and t.n_sentences == 15
    assert all(r.sentences_per_second > 0 and len(r.seconds) == 2 for r in t.rows)
    for r in t.rows:
        assert r.sentences_per_second == pytest.approx(15 / float(np.median(r.seconds)))
    assert t.rows[0].parameters < t.rows[1].parameters < t.rows[2].parameters
    assert Throughput.from_dict(json.loads(json.dumps(t.to_dict()))) == t
    with pytest.raises(ValueError, match="depths"):
        throughput(str(tiny_bert), [3], sentences)


def test_pareto_front_against_brute_force():
    from layerwise.benchmarks.truncated.analysis import pareto_front

    rng = np.random.default_rng(0)
    pts = rng.integers(0, 6, size=(40, 2)).astype(float)
    want = [i for i, (c, q) in enumerate(pts)
            if not any(c2 <= c and q2 >= q and (c2, q2) != (c, q) for c2, q2 in pts)]
    assert sorted(pareto_front(pts)) == want
    assert pareto_front([(1, 5), (2, 4), (3, 9)]) == [0, 2]


def _options(tiny_bert, tmp_path, **over):
    ws = {"sets": ["rg65"], "epochs": 1, "batch_size": 4}
    return {"minilm": str(tiny_bert), "minilm_depths": [0, 2], "pre_steps": ["none", "ws"], "seeds": [0, 1],
            "mpnet": None, "epochs": 1, "check_depths": [0, 2], "check_epochs": 2, "throughput_sentences": 12,
            "throughput_repeats": 1, "checkpoints": str(tmp_path / "runs"), "paper_epochs": 2, "paper_seeds": [0, 1],
            "paper_depths": [2], "sickr_depths": [], "overrides": {"batch_size": 8, "lr": 1e-3, "max_length": 16,
                                                                  "ws": ws}, **over}


def test_page_runs_resumes_and_renders(tiny_bert, data_dir, tmp_path, monkeypatch):
    from layerwise.benchmarks.truncated import experiment

    store = ResultsStore(tmp_path / "state")
    page = get_page("tmft")
    ctx = PageContext(store=store, output=tmp_path / "out", data_dir=str(data_dir),
                      options=_options(tiny_bert, tmp_path, train=False))
    page.run(ctx)  # the analyses only
    assert sorted(p.name for p in store.parts("tmft")) == [f"frontier-{tiny_bert.name}", f"throughput-{tiny_bert.name}"]
    ctx = PageContext(store=store, output=tmp_path / "out", data_dir=str(data_dir),
                      options=_options(tiny_bert, tmp_path))
    page.run(ctx)
    parts = {p.name: p for p in store.parts("tmft")}
    name = tiny_bert.name
    lc = parts[f"frontier-{name}"].payload["rows"][-1]["layers"]
    runs = {f"run-{name}-{p}-L{d}-seed{s}-ep{e}" for p, s, e in (("none", 0, 1), ("none", 1, 1), ("ws", 0, 1),
                                                                  ("none", 0, 2)) for d in (0, 2)}
    runs.add(f"run-{name}-none-L{'_'.join(map(str, lc))}-seed0-ep1")
    runs.add(f"run-{name}-none-L2-seed1-ep2")  # the paper's settings (here 2 epochs, seeds 0 and 1) at depth 2
    assert set(parts) == runs | {f"frontier-{name}", f"throughput-{name}", "gold-scores"}
    key = parts[f"run-{name}-ws-L2-seed0-ep1"].key
    assert key["config"]["epochs"] == 1 and key["model"]["weights_sha256"] and set(key["data"]) == {"stsb", "wordsim"}
    assert all(p.payload["wall_seconds"] > 0 for p in parts.values() if p.name != "gold-scores")
    assert all(p.payload["cpu_seconds"] > 0 and len(p.payload["load_average_at_end"]) == 3
               for name, p in parts.items() if name.startswith("run-"))
    monkeypatch.setattr(experiment, "run_tmft", lambda *a, **k: (_ for _ in ()).throw(AssertionError("recomputed")))
    monkeypatch.setattr(experiment, "throughput", lambda *a, **k: (_ for _ in ()).throw(AssertionError("timed")))
    page.run(ctx)  # everything stored: nothing trains or times again
    written = page.render(ctx)
    out = tmp_path / "out"
    assert {p.name for p in written} == {"tmft.md", "tmft.json", "tmft-layers.png", "tmft-cost.png", "tmft-speed.png"}
    md, summary = (out / "tmft.md").read_text(), json.loads((out / "tmft.json").read_text())
    tests = [parts[f"run-{name}-none-L2-seed{s}-ep1"].payload["test_spearman"] for s in (0, 1)]
    row = next(g for g in summary["groups"] if g["pre_step"] == "none" and g["layers"] == [2] and g["epochs"] == 1)
    assert row["test_spearman"] == pytest.approx(np.mean(tests)) and row["seeds"] == [0, 1]
    line = next(s for s in md.splitlines() if s.startswith("| 2 |"))
    assert f"{np.mean(tests):.2f} ± {np.std(tests, ddof=1):.2f} (2)" in line
    assert "## Not run yet" not in md and "ELECTRA" in md and "Ranking of depths" in md
    spread = max(np.std([parts[f"run-{name}-none-L{d}-seed{s}-ep1"].payload["test_spearman"] for s in (0, 1)], ddof=1)
                 for d in (0, 2))
    ws_line = next(s for s in md.splitlines() if s.startswith("- WS + TMFT against plain TMFT"))
    assert f"TMFT's seed spread: up to {spread:.2f}" in ws_line  # the noise a pre-step's gain is read against
    _check_depth_test(parts, name, md, store)
    _check_epoch_test(parts, name, md, store)
    paper = [parts[f"run-{name}-none-L2-seed{s}-ep2"].payload["test_spearman"] for s in (0, 1)]
    row = next(s for s in md.split("## The paper's settings")[1].splitlines() if s.startswith("| 2 |"))
    assert f"| {np.mean(paper):.2f} ± {np.std(paper, ddof=1):.2f} (2) | {np.mean(paper) - np.mean(tests):+.2f} |" in row
    assert row.endswith("(yes) |") or row.endswith("(no) |")  # tested: every run kept its predictions
    paper_runs = [p for n, p in parts.items() if n.startswith(f"run-{name}-none-") and n.endswith("-ep2")]
    hours = sum(p.payload["wall_seconds"] for p in paper_runs) / 3600  # trained here, on the CPU: their hours
    assert (f"The {len(paper_runs)} stored 2-epoch runs took" in md and f"trained on cpu: {len(paper_runs)} of them on "
            f"the CPU, {hours:.2f} h of it." in md)
    ws = parts[f"run-{name}-ws-L2-seed0-ep1"].payload["pre_step"]  # the word step's own scores, per depth
    assert f"| 2 | {ws['dev_spearman']:.2f} | {ws['test_spearman']:.2f} |" in md
    assert "| run | wall (min) | CPU/wall |" in md  # every run of this page recorded every column
    assert not [line for line in md.splitlines() if line.startswith("| run-") and "not recorded" in line]
    changed = _options(tiny_bert, tmp_path, minilm_depths=[0, 1, 2])  # a depth not run: listed, not invented
    page.render(PageContext(store=store, output=out, data_dir=str(data_dir), options=changed))
    md = (out / "tmft.md").read_text()
    row1 = next(s for s in md.splitlines() if s.startswith("| 1 |"))
    assert row1.split(" | ")[3] == "not run yet"  # WS + TMFT at depth 1
    assert f"- run-{name}-ws-L1-seed0-ep1" in md and f"- run-{name}-none-L1-seed1-ep1" in md
    with pytest.raises(AssertionError, match="recomputed"):  # another setting: another key, computed again
        page.run(PageContext(store=store, output=out, data_dir=str(data_dir),
                             options=_options(tiny_bert, tmp_path, overrides={**_options(tiny_bert, tmp_path)["overrides"],
                                                                              "lr": 2e-3})))


def test_tmft_on_sickr_stands_beside_the_untrained_model_on_the_same_pairs(tiny_bert, data_dir, tmp_path):
    from layerwise import LayerEncoder
    from layerwise.data import load_sts
    from test_tmft_paper_options import _write_sick

    _write_sick(data_dir)
    store, name = ResultsStore(tmp_path / "state"), tiny_bert.name
    options = _options(tiny_bert, tmp_path, minilm_depths=[2], pre_steps=["none"], seeds=[0], check_depths=[],
                       lc_tmft=False, paper_depths=[], sickr_depths=[0, 2])
    ctx = PageContext(store=store, output=tmp_path / "out", data_dir=str(data_dir), options=options)
    page = get_page("tmft")
    page.run(ctx)
    parts = {p.name: p for p in store.parts("tmft")}
    runs = {d: parts[f"run-{name}-none-L{d}-seed0-sickr-ep1"] for d in (0, 2)}
    assert all(set(r.key["data"]) == {"sickr"} and r.payload["config"]["dataset"] == "sickr" for r in runs.values())
    frontier = parts[f"frontier-{name}-sickr"]
    assert set(frontier.key["data"]) == {"trial", "test"} and "SICK-R" not in frontier.key["search"]
    # the untrained state-l-alone score is the plain cosine of hidden state l's mean on SICK-R test (a twin here)
    test, enc = load_sts("sickr", data_dir=data_dir, split="test"), LayerEncoder(tiny_bert, max_length=16,
                                                                                cache_dir=False)
    a, b = enc.encode(test.sentences1).mean, enc.encode(test.sentences2).mean
    for row in frontier.payload["rows"]:
        d = row["depth"]
        cos = (a[:, d] * b[:, d]).sum(1) / np.linalg.norm(a[:, d], axis=1) / np.linalg.norm(b[:, d], axis=1)
        assert row["single_test_spearman"] == pytest.approx(100 * spearmanr(cos, test.scores)[0], abs=1e-4)
    page.render(ctx)
    md = (tmp_path / "out" / "tmft.md").read_text()
    section = md.split("## TMFT on SICK-R")[1].split("\n## ")[0]
    rows = {line.split(" | ")[0]: line.split(" | ") for line in section.splitlines() if line.startswith("| ")}
    for d in (0, 2):
        row = next(r for r in frontier.payload["rows"] if r["depth"] == d)
        assert rows[f"| {d}"][2] == f"{runs[d].payload['test_spearman']:.2f}"
        assert rows[f"| {d}"][5] == f"{row['single_test_spearman']:.2f}"
    assert re.fullmatch(r"\d\.\d{4} \((yes|no)\)", rows["| 0"][4]) and rows["| 2"][4] == "reference"
    gap = runs[0].payload["test_spearman"] - runs[2].payload["test_spearman"]
    assert rows["| 0"][3] == f"{gap:+.2f}" and "SICK-R test pairs resampled" in section
    missing = md.split("## Not run yet")[1].split("\n## ")[0] if "## Not run yet" in md else ""
    assert f"frontier-{name}-sickr" not in missing and "sickr-ep1" not in missing  # stored: not listed as missing


def _check_depth_test(parts, name, md, store):
    """Each run keeps its test pairs' cosine ranks; depth 0 (2 seeds) against the full depth 2 (2 seeds) is the
    significance module's test of the mean over seeds on those vectors, shown in the depth's row."""
    from layerwise.benchmarks.significance_parts import load_gold, p_cell
    from layerwise.evaluation.significance import bootstrap_scores, compare_scores
    from layerwise.evaluation.unit_outputs import unpack_ranks

    run = parts[f"run-{name}-none-L0-seed0-ep1"]
    gold = load_gold(store, "tmft", run.key["data"])["stsb"]
    ranks = {(d, s): unpack_ranks(parts[f"run-{name}-none-L{d}-seed{s}-ep1"].payload["test_predictions"], len(gold))
             for d in (0, 2) for s in (0, 1)}
    assert 100 * spearmanr(ranks[(0, 0)], gold).statistic == pytest.approx(run.payload["test_spearman"], abs=1e-9)
    want = compare_scores(*(bootstrap_scores(np.stack([ranks[(d, 0)], ranks[(d, 1)]]), [np.arange(len(gold))] * 2,
                                             metric="spearman", gold=gold, n_resamples=2000, seed=0) for d in (0, 2)))
    row = next(s for s in md.splitlines() if s.startswith("| 0 |") and "x |" in s)  # the verdict table's row
    assert row.endswith(f" {p_cell(want)} |")


def _check_epoch_test(parts, name, md, store):
    """The epoch check's p: depth 2 at 2 epochs (seeds 0, 1) against 1 epoch (seeds 0, 1), the mean over seeds of
    each resampled, as computed here from the stored ranks."""
    from layerwise.benchmarks.significance_parts import load_gold, p_cell
    from layerwise.evaluation.significance import bootstrap_scores, compare_scores
    from layerwise.evaluation.unit_outputs import unpack_ranks

    gold = load_gold(store, "tmft", parts[f"run-{name}-none-L2-seed0-ep1"].key["data"])["stsb"]
    ranks = {e: np.stack([unpack_ranks(parts[f"run-{name}-none-L2-seed{s}-ep{e}"].payload["test_predictions"],
                                       len(gold)) for s in (0, 1)]) for e in (1, 2)}
    want = compare_scores(*(bootstrap_scores(ranks[e], [np.arange(len(gold))] * 2, metric="spearman", gold=gold,
                                             n_resamples=2000, seed=0) for e in (2, 1)))
    section = md.split("## Epoch check")[1].split("\n## ")[0]
    assert "| depth | 1 epoch | 2 epochs | p vs 1 epoch |" in section
    row = next(s for s in section.splitlines() if s.startswith("| 2 |"))
    assert row.endswith(f" {p_cell(want)} |")


def test_an_old_run_is_not_tested_and_a_copy_of_its_baseline_gets_p_one():
    from layerwise.benchmarks.significance_parts import p_cell
    from layerwise.benchmarks.truncated.significance import group_test
    from layerwise.evaluation.unit_outputs import pack_ranks
    from layerwise.methods.truncated.run import TMFTResult

    rng = np.random.default_rng(0)
    gold = rng.normal(size=20)

    def result(predictions):
        return TMFTResult({}, {}, 1, 2, 0.0, 0.0, 0.0, 1, 0.0, None, {"stsb": "abc"}, None,
                          test_predictions=predictions)

    new = result(pack_ranks(gold + rng.normal(size=20)))
    assert p_cell(group_test({"abc": gold}, (new,), (result(new.test_predictions),))) == "1.0000 (no)"
    assert group_test({"abc": gold}, (new,), (result(None),)) is None  # stored before the predictions were kept
    assert group_test({}, (new,), (new,)) is None  # no gold stored for that data
    assert p_cell(None) == "not tested"


def test_page_refuses_bad_options():
    from layerwise.benchmarks.truncated.pages import page_config

    with pytest.raises(ValueError, match="unknown tmft page options"):
        page_config({"depths": [0]})
    with pytest.raises(ValueError, match="unknown TMFTConfig overrides"):
        page_config({"overrides": {"layers": [1]}})
    with pytest.raises(ValueError, match="pre_steps"):
        page_config({"pre_steps": ["both"]})
    for bad in ("2/2", "1", "a/b", "-1/3"):
        with pytest.raises(ValueError, match="shard=.*'i/n'"):
            page_config({"shard": bad})
    with pytest.raises(ValueError, match="not a torch device"):
        page_config({"device": "gpu0"})
    with pytest.raises(ValueError, match="paper_seeds"):
        page_config({"paper_seeds": []})


def test_shards_split_the_grid_and_keep_the_mlm_runs_of_one_seed_together():
    from layerwise.benchmarks.truncated.pages import page_config

    configs = page_config().configs((0, 6))
    shards = [page_config({"shard": f"{i}/3"}).shard_of(configs) for i in range(3)]
    assert sorted(map(repr, sum(shards, []))) == sorted(map(repr, configs))  # every run once, in no two shards
    assert all(shard == [c for c in configs if c in shard] for shard in shards)  # the grid's order kept
    mlm = [i for i, shard in enumerate(shards) for c in shard if c.pre_step == "mlm"]
    assert len(mlm) == sum(c.pre_step == "mlm" for c in configs) and len(set(mlm)) == 1  # one shard trains the MLM
    assert max(map(len, shards)) - min(map(len, shards)) <= len(mlm)
    assert page_config().shard_of(configs) == configs


def test_a_shard_refuses_to_start_without_the_stored_frontier(tiny_bert, data_dir, tmp_path):
    store = ResultsStore(tmp_path / "state")
    page = get_page("tmft")
    ctx = PageContext(store=store, output=tmp_path / "out", data_dir=str(data_dir),
                      options=_options(tiny_bert, tmp_path, shard="0/2"))
    with pytest.raises(UsageError, match="needs the frontier .* without a shard first"):
        page.run(ctx)


def test_cli_tmft_end_to_end_and_resume(tiny_bert, data_dir, tmp_path, capsys, monkeypatch):
    from sentence_transformers import SentenceTransformer

    from layerwise.benchmarks.truncated import experiment
    from layerwise.cli import main

    out = tmp_path / "out"
    argv = ["tmft", "--model", str(tiny_bert), "--layers", "0", "2", "--subset", "0,2", "--epochs", "1",
            "--batch-size", "8", "--lr", "1e-3", "--max-length", "16", "--data-dir", str(data_dir), "--output",
            str(out), "-q"]
    assert main(argv) == 0
    doc = json.loads((out / "tmft.json").read_text())
    assert [r["config"]["layers"] for r in doc["runs"]] == [[0], [2], [0, 2]]
    assert (out / "tmft.md").is_file() and (out / "tmft-layers.png").is_file()
    saved = doc["runs"][2]["saved_model"]
    assert SentenceTransformer(saved, device="cpu").encode(["a man plays guitar ."]).shape == (1, 32)
    first = capsys.readouterr().out
    monkeypatch.setattr(experiment, "run_tmft", lambda *a, **k: (_ for _ in ()).throw(AssertionError("recomputed")))
    assert main(argv) == 0  # stored: reused, same numbers
    assert json.loads((out / "tmft.json").read_text())["runs"] == doc["runs"]
    assert capsys.readouterr().out.splitlines()[:4] == first.splitlines()[:4]


@pytest.mark.parametrize("args, message", [
    (["--layers", "3"], "hidden state(s) [3] are not in"),
    (["--subset", "0,x"], "is not a comma-separated list"),
    (["--layers", "1", "--epochs", "0"], "is not positive"),
    ([], "pass --layers"),
    (["--layers", "1", "--pre-step", "both"], "invalid choice"),
])
def test_cli_tmft_refuses_bad_options(tiny_bert, data_dir, tmp_path, capsys, args, message):
    from layerwise.cli import main

    try:
        code = main(["tmft", "--model", str(tiny_bert), "--data-dir", str(data_dir), "--output",
                     str(tmp_path / "o"), "-q", *args])
    except SystemExit as exc:  # refused while parsing (argparse type= and choices)
        code = exc.code
    assert code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_truncated_model_at_depth_zero_equals_hidden_state_zero(tiny_bert):
    from layerwise.encoders import LayerEncoder
    from layerwise.methods.truncated.model import TruncatedModel

    texts = ["a man plays guitar .", "the dog runs in the park today ."]
    want = LayerEncoder(str(tiny_bert), max_length=16, cache_dir=False, show_progress=False).encode(texts).mean[:, 0]
    got = TruncatedModel.from_pretrained(str(tiny_bert), (0,), max_length=16).encode(texts)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_default_plan_runs_the_second_model_then_the_papers_settings_and_checks_two_epoch_counts():
    from layerwise.benchmarks.truncated.page_model import epochs_of
    from layerwise.benchmarks.truncated.pages import page_config

    page = page_config()
    configs = page.configs((0, 6))
    mpnet = [c for c in configs if c.model == page.mpnet]
    assert [c.layers for c in mpnet] == [(d,) for d in page.mpnet_depths]
    paper = {((d,), s) for d in page.paper_depths for s in page.paper_seeds}
    new = paper - {((d,), 0) for d in page.check_depths}  # seed 0 at the check depths is the epoch check's run
    assert {c.epochs for c in mpnet} == {page.mpnet_epochs} and configs[-len(new) - len(mpnet):-len(new)] == mpnet
    assert {(c.layers, c.seed) for c in configs[-len(new):]} == new and {c.epochs for c in configs[-len(new):]} == {10}
    checks = {(c.layers, c.epochs) for c in configs if c.model == page.minilm and c.epochs != page.epochs and c.seed == 0}
    assert checks == {((d,), e) for d in page.check_depths for e in page.check_epochs if e != page.epochs} | \
        {((d,), page.paper_epochs) for d in page.paper_depths}
    assert len(configs) == len(set(configs))
    settings = {"epochs": 3, "mpnet": "all-mpnet-base-v2", "mpnet_epochs": 1}
    assert epochs_of(settings, "all-mpnet-base-v2") == 1 and epochs_of(settings, "all-MiniLM-L6-v2") == 3
    assert page_config({"check_epochs": 5}).check_epochs == (5,)


def test_the_page_says_what_the_mlm_pre_step_did_and_that_its_head_is_fresh():
    from dataclasses import asdict

    from layerwise.benchmarks.truncated.page_model import TMFTPage
    from layerwise.benchmarks.truncated.pages import TMFTPageConfig
    from layerwise.benchmarks.truncated.report import render_markdown
    from layerwise.methods.truncated.config import TMFTConfig
    from layerwise.methods.truncated.run import TMFTResult

    config = TMFTConfig(model="all-MiniLM-L6-v2", layers=(3,), pre_step="mlm", epochs=3).to_dict()
    info = {"kind": "mlm", "sentences": 1234, "steps": 5, "data": "0" * 64, "head": "fresh MLM head (written here)"}
    result = TMFTResult(config, {}, 10, 20, 80.0, 75.0, 76.0, 9, 1.0, info, {}, None)
    md = render_markdown(TMFTPage("t", asdict(TMFTPageConfig()), [result], {}, {}, None))
    line = next(s for s in md.splitlines() if s.startswith("**MLM + TMFT.**"))
    assert "1,234 sentences" in line and "5 optimizer steps" in line and "15% of tokens masked" in line
    assert "fresh MLM head (written here)" in line and "no MLM head" in line


def test_a_missing_run_is_estimated_from_stored_runs_of_its_depth_per_epoch():
    from layerwise.benchmarks.truncated.pages import estimate_seconds
    from layerwise.methods.truncated.config import TMFTConfig

    def run(layers, pre="none", epochs=3, seed=0, model="m"):
        return TMFTConfig(model=model, layers=layers, pre_step=pre, epochs=epochs, seed=seed)

    done = [(run((3,)), 300.0, "cpu"), (run((3,), seed=1), 330.0, "cpu"), (run((3,), seed=2), 900.0, "cpu"),
            (run((3,), "ws"), 600.0, "cpu"), (run((6,)), 1200.0, "cpu"),  # seed 2 at 3 slowed by other jobs
            (run((3,), seed=3), 3.0, "cuda"), (run((9,)), 30.0, "cuda")]  # a GPU's times: not a CPU's estimate
    assert estimate_seconds(run((3,), epochs=10), done) == pytest.approx(1100.0)  # median 110 s/epoch x 10
    assert estimate_seconds(run((3,), "ws", seed=1), done) == pytest.approx(600.0)  # its own pre-step's runs
    assert estimate_seconds(run((6,), "mlm"), done) == pytest.approx(1200.0)  # no MLM run at 6: plain TMFT's
    assert estimate_seconds(run((9,)), done) is None and estimate_seconds(run((3,), model="other"), done) is None
    assert estimate_seconds(run((9,)), done, "cuda") == pytest.approx(30.0)
    assert estimate_seconds(run((3,)), done, "cuda") == pytest.approx(3.0)
