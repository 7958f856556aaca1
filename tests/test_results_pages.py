"""The layer-attention and Latte-Mix pages: rendered from the committed store alone they keep every number of the
committed pages; a run reuses exactly the parts whose key is stored and computes the others."""

import re
from pathlib import Path

import pytest

from layerwise.benchmarks import ResultsStore
from layerwise.benchmarks.catalog import get_page
from layerwise.benchmarks.registry import PageContext

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"
NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?![\w.])")  # numbers, not digits inside names (sts12)


def table_rows(markdown: str) -> list[list[str]]:
    """Every row of every markdown table (separator rows dropped), as stripped cells."""
    rows = []
    for line in markdown.splitlines():
        line = line.strip()
        if not (line.startswith("|") and line.endswith("|")) or set(line) <= set("|-: "):
            continue
        rows.append([c.strip() for c in line[1:-1].split("|")])
    return rows


def row_numbers(rows):
    return [[n for c in row for n in NUMBER.findall(c)] for row in rows]


def test_table_parser_reads_cells_and_skips_separators():
    md = "text 1.5\n\n| a | b |\n|---|---|\n| x | 71.25 ± 0.15 |\n"
    assert table_rows(md) == [["a", "b"], ["x", "71.25 ± 0.15"]]
    assert row_numbers(table_rows(md)) == [[], ["71.25", "0.15"]]


@pytest.mark.parametrize("name", ["layer-attention", "lattemix"])
def test_render_from_the_committed_store_keeps_every_number(name, tmp_path):
    page = get_page(name)
    ctx = PageContext(store=ResultsStore(RESULTS / "state"), output=tmp_path)
    written = page.render(ctx)
    assert tmp_path / f"{name}.md" in written and (tmp_path / f"{name}.json").is_file()
    before = table_rows((RESULTS / f"{name}.md").read_text(encoding="utf-8"))
    after = table_rows((tmp_path / f"{name}.md").read_text(encoding="utf-8"))
    assert len(before) > 20 and after == before  # every cell, the p columns too
    p_cells = [c for row in after for c in row if re.fullmatch(r"\d\.\d{4} \((yes|no)\)", c)]
    assert p_cells  # the committed parts keep their per-pair outputs: their rows are tested


def _data(folder):
    from conftest import write_stsb, write_unlabeled

    data = write_unlabeled(write_stsb(folder, n_pairs=15))
    (data / "quora").mkdir()
    (data / "quora" / "dev.tsv").write_text(
        "1\ta man is playing guitar .\ta man plays the guitar .\t1\n"
        "0\ta child eats food .\tthe dog is swimming in the water .\t2\n"
        "1\ta woman plays piano .\ta woman is riding a bike in the park .\t3\n")
    return data


def _la_options(model, tmp_path, **over):
    grid = {"model": str(model), "objectives": ["unsup"], "poolers": ["layer_attention", "first0_last_mean"],
            "frozen_seeds": [0], "encoder_poolers": ["last_cls"], "encoder_seeds": [0], "steps": 2,
            "batch_size": 4, "sts_sets": ["stsb"], "retrieval_poolers": ["layer_attention"],
            "retrieval": {"indexes": ["exact"]}, "train_limit": 16, "checkpoints": str(tmp_path / "runs")}
    grid.update(over)
    return {"grid": grid}


def test_layer_attention_page_runs_resumes_and_recomputes_only_changed_settings(tiny_bert, tmp_path, monkeypatch):
    from layerwise.benchmarks.layer_attention import experiment
    from layerwise.benchmarks.layer_attention.pages import load_page_runs

    monkeypatch.setenv("LAYERWISE_HOME", str(tmp_path / "home"))
    data, store = _data(tmp_path / "data"), ResultsStore(tmp_path / "state")
    page = get_page("layer-attention")
    ctx = PageContext(store=store, output=tmp_path / "out", data_dir=str(data), command=("test",),
                      options=_la_options(tiny_bert, tmp_path))
    page.run(ctx)
    parts = {p.name: p for p in store.parts("layer-attention")}
    assert sorted(parts) == ["encoder-unsup-last_cls-seed0", "frozen-unsup-first0_last_mean-seed0",
                             "frozen-unsup-layer_attention-seed0", "gold-scores", "search-untouched-encoder"]
    _check_layer_attention_outputs(ctx, store)
    vectors = [(r["vector"], r["index"]) for r in parts["search-untouched-encoder"].payload["rows"]]
    assert vectors == [("last-layer mean", "exact (numpy)"), ("[CLS]_Last", "exact (numpy)")]  # 6 texts: no IVF
    searched = parts["frozen-unsup-layer_attention-seed0"]
    assert searched.key["retrieval"] is not None and searched.key["data"]["quora"]
    assert parts["frozen-unsup-first0_last_mean-seed0"].key["retrieval"] is None
    assert searched.key["model"]["weights_sha256"] and searched.key["max_length"] == 32
    assert searched.runs[0]["command"] == "test"
    _check_search_outputs(parts)

    def boom(*a, **k):
        raise AssertionError("a stored run was recomputed")

    monkeypatch.setattr(experiment, "_frozen_run", boom)
    monkeypatch.setattr(experiment, "_encoder_run", boom)
    page.run(ctx)  # every key is stored: nothing is computed
    monkeypatch.undo()
    monkeypatch.setenv("LAYERWISE_HOME", str(tmp_path / "home"))
    ctx3 = PageContext(store=store, output=tmp_path / "out", data_dir=str(data),
                       options=_la_options(tiny_bert, tmp_path, steps=3, regimes=["frozen"]))
    page.run(ctx3)  # a changed setting: new parts, the old ones kept
    assert len(store.parts("layer-attention")) == 7  # the gold scores are stored once
    written = page.render(ctx3)
    md = (tmp_path / "out" / "layer-attention.md").read_text()
    assert any(p.suffix == ".png" for p in written)
    rows = table_rows(md)
    # STS table: header + 2 poolers; search table: header + with the pooler + without it; without a pooler:
    # header + mean + [CLS]_Last; then the attention weights by length: header, the length buckets, rho
    assert rows[0][:3] == ["pooler", "seeds", "stsb"] and rows[9][:2] == ["tokens", "sentences"]
    assert rows[-1][0] == "rho (weight, tokens)" and 9 + 3 <= len(rows) <= 9 + 2 + 4
    assert rows[6][:2] == ["vector", "index"] and [r[0] for r in rows[7:9]] == ["last-layer mean", "[CLS]_Last"]
    steps = [r.history["steps_this_run"] for r in load_page_runs(ctx3).runs]
    assert steps == [3, 3]  # the newest key of each part is shown


def _check_search_outputs(parts):
    """Every search keeps each query's first relevant rank: their reciprocals average to the stored MRR@10, and
    the page's p is the paired bootstrap over the queries of the last-layer mean against layer_attention."""
    from layerwise.benchmarks.layer_attention.grid import RunResult
    from layerwise.benchmarks.layer_attention.report import _retrieval_table
    from layerwise.benchmarks.significance_parts import p_cell
    from layerwise.evaluation.retrieval import reciprocal_ranks
    from layerwise.evaluation.significance import paired_bootstrap_accuracy
    from layerwise.evaluation.unit_outputs import unpack_small

    searched = parts["frozen-unsup-layer_attention-seed0"].payload
    rows = [*searched["search_with_pooler"], *searched["search_without_pooler"],
            *parts["search-untouched-encoder"].payload["rows"]]
    rr = [reciprocal_ranks(unpack_small(r["first_hits"], r["n_queries"])) for r in rows]
    for r, x in zip(rows, rr, strict=True):
        assert 100 * x.mean() == pytest.approx(r["mrr10"], abs=1e-9)
    run = RunResult.from_payload(searched)
    table = table_rows("\n".join(_retrieval_table([run])))
    assert [row[-1] for row in table[1:]] == ["reference", p_cell(paired_bootstrap_accuracy(
        rr[1], rr[0], n_resamples=2000, seed=0))]  # the pooler (exact), then the last-layer mean against it


def _check_layer_attention_outputs(ctx, store):
    """Each run keeps its test pairs' cosines; the page's p is the significance module's on those vectors."""
    from scipy.stats import spearmanr

    from layerwise.benchmarks.layer_attention.pages import load_page_runs
    from layerwise.benchmarks.significance_parts import load_gold
    from layerwise.evaluation.significance import bootstrap_scores, compare_scores
    from layerwise.evaluation.unit_outputs import unpack_ranks

    page = load_page_runs(ctx)
    run = {r.pooler: r for r in page.regime("frozen")}
    part = next(p for p in store.parts("layer-attention") if p.name == "frozen-unsup-layer_attention-seed0")
    gold = load_gold(store, "layer-attention", part.key["data"]["sts"])["stsb"]
    cos = {k: unpack_ranks(r.predictions["stsb"], len(gold)) for k, r in run.items()}
    assert spearmanr(cos["layer_attention"], gold).statistic * 100 == pytest.approx(
        run["layer_attention"].sts["stsb"], abs=1e-9)  # the stored ranks are exactly those of the cosines
    want = compare_scores(*(bootstrap_scores(cos[k], metric="spearman", gold=gold, n_resamples=2000, seed=0)
                            for k in ("first0_last_mean", "layer_attention")))
    assert page.tests[("frozen", "unsup", "first0_last_mean")] == want
    assert page.tests[("encoder", "unsup", "last_cls")] is None  # no layer_attention run in that table


def test_layer_attention_p_column_old_parts_and_a_copy_of_the_reference(tmp_path):
    """Runs stored without predictions render "not tested"; a pooler whose predictions equal layer_attention's
    gets p = 1, "no"."""
    import numpy as np

    from layerwise.benchmarks.layer_attention.grid import RunResult
    from layerwise.benchmarks.layer_attention.pages import grid_config, pooler_tests
    from layerwise.benchmarks.layer_attention.report import PageRuns, _sts_table
    from layerwise.benchmarks.significance_parts import pack_predictions, save_gold
    from layerwise.benchmarks.store import Part

    rng = np.random.default_rng(0)
    gold = {"stsb": rng.integers(0, 6, 12).astype(float), "sickr": rng.normal(size=9)}
    cos = {s: g + rng.normal(size=len(g)) for s, g in gold.items()}
    store, sums = ResultsStore(tmp_path), {"stsb": "a", "sickr": "b"}
    hist = {"steps_this_run": 1, "train_seconds": 1.0}

    def run(pooler, predictions):
        r = RunResult("frozen", "unsup", pooler, 0, {"stsb": 1.0, "sickr": 2.0}, hist, "x", 3,
                      predictions=predictions)
        return r, Part("layer-attention", pooler, {"data": {"sts": sums}}, r.to_payload())

    made = [run("layer_attention", pack_predictions(cos)), run("last_mean", pack_predictions(cos)),
            run("last_cls", {})]
    runs, parts = [r for r, _ in made], [p for _, p in made]
    assert RunResult.from_payload(parts[0].payload) == runs[0]  # the packed cosines round-trip with the run
    assert set(pooler_tests(store, runs, parts, ["stsb", "sickr"]).values()) == {None}  # no gold stored
    save_gold(store, "layer-attention", gold, sums)
    tests = pooler_tests(store, runs, parts, ["stsb", "sickr"])
    assert tests[("frozen", "unsup", "last_mean")].p_value == 1.0
    assert tests[("frozen", "unsup", "last_cls")] is None
    config = grid_config({"grid": {"poolers": ["layer_attention", "last_mean", "last_cls"], "objectives": ["unsup"]}})
    page = PageRuns(config, "m", runs, tests=tests)
    cells = {r[0]: r[-1] for r in table_rows("\n".join(_sts_table(page, "frozen", config.poolers, "unsup")))}
    assert cells == {"pooler": "p vs layer_attention (avg)", "**layer_attention**": "reference",
                     "last_mean": "1.0000 (no)", "last_cls": "not tested"}
    speed = {r[0]: r[-2] for r in table_rows("\n".join(_sts_table(page, "frozen", config.poolers, "unsup")))}
    assert speed["last_cls"] == "1.00"  # one machine: the speeds compare, nothing more said
    mixed = PageRuns(config, "m", runs, tests=tests, machines=["2 CPUs", "2 CPUs", "16 CPUs"])
    speed = {r[0]: r[-2] for r in table_rows("\n".join(_sts_table(mixed, "frozen", config.poolers, "unsup")))}
    assert speed["last_cls"] == "1.00 (16 CPUs)" and speed["last_mean"] == "1.00 (2 CPUs)"
    busy = PageRuns(config, "m", runs, tests=tests, machines=["2 CPUs", "2 CPUs, busy", "2 CPUs"])
    lines = _sts_table(busy, "frozen", config.poolers, "unsup")
    speed = {r[0]: r[-2] for r in table_rows("\n".join(lines))}
    assert speed["last_mean"] == "1.00 (2 CPUs, busy)" and lines[-1].startswith("*busy*")  # said even on one machine


def test_a_part_started_on_a_loaded_machine_is_busy():
    from layerwise.benchmarks.page_parts import part_cpus
    from layerwise.benchmarks.store import Part

    def part(load):
        return Part("p", "x", {}, {}, runs=[{"environment": {"machine": {"cpu_count": 2, "load_average_1_5_15": load}}}])

    assert part_cpus(part([1.9, 1.0, 1.0])) == "2 CPUs" and part_cpus(part([6.2, 5.0, 3.6])) == "2 CPUs, busy"
    assert part_cpus(Part("p", "x", {}, {}, runs=[])) == "?"


def test_layer_attention_grid_refuses_unknown_settings():
    from layerwise.benchmarks.layer_attention.pages import grid_config

    with pytest.raises(ValueError, match="unknown layer-attention grid settings"):
        grid_config({"grid": {"stepz": 3}})
    with pytest.raises(ValueError, match="unknown poolers"):
        grid_config({"grid": {"poolers": ["first_last_means"]}})
    with pytest.raises(ValueError, match="unknown layer-attention page options"):
        grid_config({"gird": {}})


def test_lattemix_page_and_run_configs_refuse_bad_settings():
    from layerwise.benchmarks.lattemix.pages import page_config
    from layerwise.benchmarks.lattemix.results import LatteMixRun

    with pytest.raises(ValueError, match="unknown lattemix page settings"):
        page_config({"page": {"seedz": [0]}})
    with pytest.raises(ValueError, match="unknown lattemix page options"):
        page_config({"pages": {}})
    with pytest.raises(ValueError, match="unknown model kinds"):
        LatteMixRun(kinds=("vae",))
    with pytest.raises(ValueError, match="seeds is empty"):
        LatteMixRun(seeds=())
    assert LatteMixRun(seeds=(3,)).to_dict()["seeds"] == (3,)


def test_lattemix_page_runs_resumes_and_renders(tiny_bert, tmp_path, monkeypatch):
    from layerwise.benchmarks.lattemix import experiment
    from layerwise.methods.lattemix import LatteMixConfig, TrainConfig

    monkeypatch.setenv("LAYERWISE_HOME", str(tmp_path / "home"))
    data, store = _data(tmp_path / "data"), ResultsStore(tmp_path / "state")
    options = {"page": {"models": [str(tiny_bert)], "sts_sets": ["stsb"], "small_sets": ["stsb"], "seeds": [0],
                        "kinds": ["categorical", "ae"], "train": TrainConfig(max_steps=3),
                        "model_config": LatteMixConfig(n_classes=4, n_groups=2, latent_dim=4, beta_warmup_steps=2),
                        "train_limit": 30, "layer_train_limit": 20, "sweep_train_limit": 25,
                        "sweep": [("default", {}), ("groups", {"n_groups": 1})]}}
    page = get_page("lattemix")
    ctx = PageContext(store=store, output=tmp_path / "out", data_dir=str(data), options=options)
    page.run(ctx)
    names = sorted(p.name for p in store.parts("lattemix"))
    tiny = tiny_bert.name
    assert names == ["gold-scores"] + [f"layer-{tiny}-{i}" for i in range(3)] + [
        f"main-{tiny}", f"pc-{tiny}", f"sweep-{tiny}-default-default", f"sweep-{tiny}-groups-n_groups=1"]
    _check_lattemix_outputs(ctx, store)
    main = next(p for p in store.parts("lattemix") if p.name.startswith("main"))
    assert main.key["train_limit"] == 30 and main.key["data"]["train"] and main.key["kinds"] == ["categorical", "ae"]
    monkeypatch.setattr(experiment, "_train", lambda *a, **k: (_ for _ in ()).throw(AssertionError("recomputed")))
    page.run(ctx)  # everything stored: nothing trains
    page.render(ctx)
    rows = table_rows((tmp_path / "out" / "lattemix.md").read_text())
    assert ["hidden state", "mean stsb", "Latte-Mix cos stsb", "Latte-Mix -JS stsb"] in rows
    assert ["varied", "setting (others as default)", "stsb cos", "stsb -JS", "stsb -L2", "train s",
            "p vs default (cos)", "p vs default (-JS)", "p vs default (-L2)"] in rows
    assert "not tested" not in next(r for r in rows if r[0] == "groups")[-3:]
    pc = next(p for p in store.parts("lattemix") if p.name.startswith("pc-")).payload
    assert 0 < pc["share"] < 1 and set(pc["scores"]) == {"mean", "mean_pc1_removed"}
    words = pc["words"]  # per word type: the ids lined up with the token vectors (else the run had raised)
    assert words["n_types_read"] == sum(b["n_types"] for b in words["count_bins"]) > 0
    assert [r[2] for r in words["highest"]] == sorted((r[2] for r in words["highest"]), reverse=True)
    assert words["highest"][0][2] >= words["lowest"][0][2] and all(r[1] >= words["min_count"] for r in words["lowest"])
    assert "*Per word type*" in (tmp_path / "out" / "lattemix.md").read_text()
    mean_row = next(r for r in rows if r[0] == "mean pooling (no special tokens)" and len(r) == 3)
    assert mean_row[2] == "reference"
    assert float(mean_row[1]) == pytest.approx(pc["scores"]["mean"]["stsb"], abs=0.005)
    assert (tmp_path / "out" / "lattemix-layers.png").is_file()


def _check_lattemix_outputs(ctx, store):
    """The main part keeps each pair's similarity per method and seed; the page's p is the module's on them."""
    from scipy.stats import spearmanr

    from layerwise.benchmarks.lattemix.pages import load_page_parts
    from layerwise.benchmarks.significance_parts import load_gold
    from layerwise.evaluation.significance import bootstrap_scores, compare_scores
    from layerwise.evaluation.unit_outputs import unpack_ranks

    parts = load_page_parts(ctx)
    main, part = parts.main[0], next(p for p in store.parts("lattemix") if p.name.startswith("main"))
    gold = load_gold(store, "lattemix", part.key["data"]["eval"])["stsb"]
    cos = unpack_ranks(main.runs["categorical"].predictions["cosine"]["stsb"][0], len(gold))
    assert 100 * spearmanr(cos, gold).statistic == pytest.approx(main.runs["categorical"].scores["cosine"]["stsb"][0],
                                                                 abs=1e-9)
    mean = unpack_ranks(main.baseline_predictions["mean"]["stsb"], len(gold))
    want = compare_scores(*(bootstrap_scores(x, metric="spearman", gold=gold, n_resamples=2000, seed=0)
                            for x in (cos, mean)))
    assert parts.tests[("main", main.model["name"], "categorical/cosine")] == want


@pytest.mark.slow
def test_the_library_finds_every_committed_part_under_the_key_it_computes(monkeypatch):
    """Every committed layer-attention and Latte-Mix part carries the key a run computes here (installed models, the
    shared data): a ``layerwise results run`` recomputes nothing (its compute step fails the test if called)."""
    import os

    from conftest import SHARED_DATA

    data_dir = os.environ.get("LAYERWISE_DATA") or str(SHARED_DATA)
    if not Path(data_dir, "quora").is_dir():
        pytest.skip(f"the shared data folder {data_dir} is not present")
    from layerwise.encoders.registry import BUILTIN_MODELS

    absent = [m.name for m in BUILTIN_MODELS.values() if m.locate() is None]
    if absent:
        pytest.skip(f"{', '.join(absent)} not installed")
    from layerwise.benchmarks.lattemix import experiment as lm
    from layerwise.benchmarks.lattemix.grid import PageConfig
    from layerwise.benchmarks.layer_attention import experiment as la
    from layerwise.benchmarks.layer_attention.grid import GridConfig

    store = ResultsStore(RESULTS / "state")
    cfg = GridConfig()
    data = la.load_grid_data(cfg, data_dir)
    model, sums = la.grid_model_key(cfg), la.data_checksums(data)
    for regime in ("frozen", "encoder"):  # every run of the grid is stored under the key computed here
        assert la._missing(cfg, store, regime, model, sums) == [], regime
    monkeypatch.setattr(lm, "_prepare", lambda *a, **k: pytest.fail("a stored Latte-Mix part would be recomputed"))
    page = PageConfig()
    for m in page.models:  # the main tables of every model
        assert lm.run_main(page, store, m, data_dir=data_dir) is False, m
    assert lm.run_curve(page, store, page.models[0], data_dir=data_dir) == 0
    assert lm.run_sweep(page, store, page.models[0], data_dir=data_dir) == 0


def test_an_encoder_run_searches_without_its_pooler_with_the_mean_and_cls_last(tiny_bert, tmp_path, monkeypatch):
    """The paper's Table 3 searches the fine-tuned encoder without its pooler with [CLS]_Last: the run stores that
    row beside the last-layer mean's, each the search of the saved checkpoint's vectors, and the page shows both."""
    from layerwise.benchmarks.layer_attention.grid import RunResult
    from layerwise.encoders.trainable import SentenceModel
    from layerwise.evaluation.retrieval import load_quora_retrieval, search

    monkeypatch.setenv("LAYERWISE_HOME", str(tmp_path / "home"))
    data, store = _data(tmp_path / "data"), ResultsStore(tmp_path / "state")
    options = _la_options(tiny_bert, tmp_path, regimes=["encoder"], retrieval_poolers=["last_cls"])
    ctx = PageContext(store=store, output=tmp_path / "out", data_dir=str(data), command=("test",), options=options)
    page = get_page("layer-attention")
    page.run(ctx)
    part = next(p for p in store.parts("layer-attention") if p.name == "encoder-unsup-last_cls-seed0")
    assert part.key["without_pooler"] == ["mean", "cls"]
    run = RunResult.from_payload(part.payload)
    quora = load_quora_retrieval(str(data), "dev")
    best = SentenceModel.load(Path(run.checkpoint) / "best")
    for rows, unpooled in ((run.search_without_pooler, "mean"), (run.search_cls_last, "cls")):
        by_hand = search(quora, best.encode(quora.corpus, use_pooler=False, unpooled=unpooled))
        assert len(rows) == 1 and rows[0].mrr10 == pytest.approx(by_hand["mrr@10"], abs=1e-9)
    page.render(ctx)
    labels = [row[2] for row in table_rows((tmp_path / "out" / "layer-attention.md").read_text())
              if row[:2] == ["unsup", "last_cls"] and len(row) > 9]
    assert labels == ["pooler", "last-layer mean", "[CLS]_Last"]


def test_another_search_setting_evaluates_an_encoder_run_s_saved_model_again_without_training_it(
        tiny_bert, tmp_path, monkeypatch):
    """The model folder of an encoder-trained run is named by what trains it: a run whose search settings changed
    (IVF cells, cells probed) is a new part, searched with the model already trained, not trained again."""
    from layerwise.benchmarks.layer_attention import experiment
    from layerwise.benchmarks.layer_attention.grid import RunResult

    monkeypatch.setenv("LAYERWISE_HOME", str(tmp_path / "home"))
    calls, real = [], experiment.train_contrastive

    def spy(*args, resume=False, **kw):
        calls.append(resume)
        return real(*args, resume=resume, **kw)

    monkeypatch.setattr(experiment, "train_contrastive", spy)
    data, store = _data(tmp_path / "data"), ResultsStore(tmp_path / "state")
    page, runs = get_page("layer-attention"), []
    for nprobe in (10, 5):
        options = _la_options(tiny_bert, tmp_path, regimes=["encoder"], retrieval_poolers=["last_cls"],
                              retrieval={"indexes": ["exact"], "nprobe": nprobe})
        page.run(PageContext(store=store, output=tmp_path / "out", data_dir=str(data), command=("test",),
                             options=options))
        part = next(p for p in store.parts("layer-attention") if p.name == "encoder-unsup-last_cls-seed0"
                    and p.key["retrieval"]["nprobe"] == nprobe)
        runs.append(RunResult.from_payload(part.payload))
        if nprobe == 10:
            weights = {f: f.read_bytes() for f in (Path(runs[0].checkpoint) / "best").rglob("*") if f.is_file()}
    assert calls == [False, True]  # the second run found the finished training and resumed it: nothing to train
    assert runs[0].checkpoint == runs[1].checkpoint and runs[1].history["steps_this_run"] == 0
    assert {k: runs[0].history[k] for k in ("step", "loss", "dev", "best_dev")} == {
        k: runs[1].history[k] for k in ("step", "loss", "dev", "best_dev")}
    assert {f: f.read_bytes() for f in (Path(runs[1].checkpoint) / "best").rglob("*") if f.is_file()} == weights
    assert runs[0].sts == runs[1].sts and runs[1].steps_per_second is None
    page.render(PageContext(store=store, output=tmp_path / "out", data_dir=str(data), options=options))
    row = next(r for r in table_rows((tmp_path / "out" / "layer-attention.md").read_text()) if r[0] == "last_cls")
    assert row[-1].split()[0] == "–"  # the newest part (nprobe 5) shows: trained by the first run, not timed here


def test_an_ivf_index_of_more_cells_than_quora_texts_is_refused_before_anything_is_encoded(
        tiny_bert, tmp_path, monkeypatch):
    from layerwise.benchmarks.layer_attention import experiment

    monkeypatch.setenv("LAYERWISE_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(experiment, "compute_features", lambda *a, **k: pytest.fail("encoded before the check"))
    data, store = _data(tmp_path / "data"), ResultsStore(tmp_path / "state")
    options = _la_options(tiny_bert, tmp_path, regimes=["frozen"], retrieval={"indexes": ["exact", "ivf"]})
    ctx = PageContext(store=store, output=tmp_path / "out", data_dir=str(data), command=("test",), options=options)
    with pytest.raises(ValueError, match=r"nlist=1024 IVF cells for a corpus of 6 texts: the largest valid nlist is 6"):
        get_page("layer-attention").run(ctx)
    assert store.parts("layer-attention") == []
