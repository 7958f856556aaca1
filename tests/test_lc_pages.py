"""The BERT-LC results pages: rendered from the committed store they show the committed numbers; resume keys."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

from layerwise.benchmarks import PageContext, ResultsStore
from layerwise.benchmarks.catalog import get_page

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"
_NUMBER = re.compile(r"[-+−]?\d+(?:\.\d+)?")


def table_numbers(markdown: str) -> list[tuple[str, list[str]]]:
    """(first cell, numbers of the other cells) of every table row, in order; separator rows skipped.

    Cells naming a run's time of day, load average or date (history columns) are left out: they describe when a
    part was computed, which a re-render does not change but a migration may format differently."""
    rows = []
    for line in markdown.splitlines():
        if not line.startswith("|") or set(line) <= set("|-: "):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows.append((cells[0], [n for c in cells[1:] for n in _NUMBER.findall(c)]))
    return rows


@pytest.mark.parametrize("page", ["lc-sts", "transfer", "ablations"])
def test_page_renders_the_committed_numbers(page, tmp_path):
    committed = (RESULTS / f"{page}.md").read_text(encoding="utf-8")
    ctx = PageContext(store=ResultsStore(RESULTS / "state"), output=tmp_path, command=("layerwise", "test"))
    get_page(page).render(ctx)
    again = (tmp_path / f"{page}.md").read_text(encoding="utf-8")
    want, got = table_numbers(committed), table_numbers(again)
    assert len(want) > 10 and len(got) == len(want)
    for w, g in zip(want, got):
        assert g == w, f"{page}: row {w[0]!r} differs"


def test_table_numbers_sees_a_changed_number():
    a = "| x | 1.00 ± 0.20 | 3 |\n|---|---|---|\n| y | 5 | 6 |"
    assert table_numbers(a) == [("x", ["1.00", "0.20", "3"]), ("y", ["5", "6"])]
    assert table_numbers(a.replace("0.20", "0.21")) != table_numbers(a)


# ---------------------------------------------------------------------------------------------- resume keys

@pytest.fixture()
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("LAYERWISE_HOME", str(tmp_path / "home"))
    return tmp_path


def _parts(store: ResultsStore, page: str) -> dict[str, dict]:
    return {p.name + "--" + p.digest: p.payload for p in store.parts(page)}


def test_lc_sts_page_resumes_and_any_setting_change_computes_afresh(tiny_bert, home):
    from conftest import write_stsb

    data = write_stsb(home / "data", n_pairs=24)
    store = ResultsStore(home / "store")
    base = {"models": [str(tiny_bert)], "datasets": ["stsb"], "combined_splits": [],
            "settings": {"n_splits": 2, "dev_size": 10, "bootstrap": 50}}
    page = get_page("lc-sts")

    def run(data_dir=data, **options):
        ctx = PageContext(store=store, output=home / "out", data_dir=str(data_dir), options={**base, **options})
        page.run(ctx)
        return _parts(store, "lc-sts")

    first = run()
    assert len(first) == 1
    assert run() == first  # same key: reused, not recomputed (the payload, times included, is unchanged)
    changes = [dict(settings={**base["settings"], "seed": 1}), dict(settings={**base["settings"], "dev_size": 12}),
               dict(settings={**base["settings"], "n_splits": 3}), dict(settings={**base["settings"], "max_layers": 2}),
               dict(settings={**base["settings"], "head": False}), dict(settings={**base["settings"], "bootstrap": 0}),
               dict(settings={**base["settings"], "max_pooling": False}), dict(max_length=8), dict(dtype="bfloat16")]
    seen = dict(first)
    for change in changes:
        got = run(**change)
        assert len(got) == len(seen) + 1, change  # a new part; every earlier one is kept
        seen = got
    other = write_stsb(home / "data2", n_pairs=24, seed=5)  # other scores and sentences: another checksum
    assert len(run(data_dir=other)) == len(seen) + 1
    page.render(PageContext(store=store, output=home / "out", options=base))
    assert "stsb" in (home / "out" / "lc-sts.md").read_text().lower()


def test_lc_sts_combined_splits_rows_and_significance_column(tiny_bert, home):
    """The paper's protocol over every split combined is a row of its own (its own part and plot) beside the
    test-split row, and every row's LC − last says whether it is significant by the named test."""
    from conftest import write_stsb
    from layerwise.benchmarks.lc.run import STSRun
    from layerwise.evaluation.significance import BOOTSTRAP_TEST

    data = write_stsb(home / "data", n_pairs=24)
    store = ResultsStore(home / "store")
    options = {"models": [str(tiny_bert)], "datasets": ["stsb"], "combined_splits": ["stsb"],
               "settings": {"n_splits": 2, "dev_size": 10, "bootstrap": 40}}
    ctx = PageContext(store=store, output=home / "out", data_dir=str(data), options=options)
    page = get_page("lc-sts")
    page.run(ctx)
    parts = {p.name: STSRun.from_dict(p.payload) for p in store.parts("lc-sts")}
    assert sorted(parts) == [f"{tiny_bert.name}-stsb-all", f"{tiny_bert.name}-stsb-allsplits-all"]
    test_row, all_row = parts[f"{tiny_bert.name}-stsb-all"], parts[f"{tiny_bert.name}-stsb-allsplits-all"]
    assert (test_row.data.split, test_row.data.n_pairs) == ("test", 24)
    assert (all_row.data.split, all_row.data.n_pairs) == ("all", 72)
    assert "every split" in all_row.protocol["name"]
    for row in parts.values():
        assert set(row.lc.significance) >= {"lc", "lc_max", "first0_last"} and "lc_max" in row.lc.summary()
        lc = row.lc.significance["lc"]
        assert lc["test"] == BOOTSTRAP_TEST and lc["n_resamples"] == 40 and 0 < lc["p_value"] <= 1
        diff = np.mean([s.test["lc"]["spearman"] - s.test["last"]["spearman"] for s in row.lc.splits])
        assert lc["difference"] == pytest.approx(diff, abs=1e-9)  # the tested statistic is the column's mean
    page.render(ctx)
    text = (home / "out" / "lc-sts.md").read_text()
    assert "STS-B (all splits)" in text and BOOTSTRAP_TEST in text and "p, LC vs last (p < 0.01)" in text
    assert (home / "out" / "lc-sts" / f"{tiny_bert.name}-stsb-allsplits.png").is_file()


def test_transfer_key_covers_every_protocol_setting_and_a_real_rerun_reuses(tiny_bert, home):
    from dataclasses import fields, replace

    from conftest import write_senteval
    from layerwise.benchmarks.lc.transfer_run import TransferRunConfig, run_transfer_tasks, task_key
    from layerwise.methods.lc.transfer import TransferProtocol

    data = write_senteval(home / "data", n=40)
    store = ResultsStore(home / "store")
    config = TransferRunConfig(model=str(tiny_bert), tasks=("cr",), n_jobs=1, data_dir=str(data),
                               protocol=TransferProtocol(n_outer=2, n_inner=2))
    first = run_transfer_tasks(config, store)
    again = run_transfer_tasks(config, store)
    assert again.tasks["cr"].result.to_dict() == first.tasks["cr"].result.to_dict()
    assert again.tasks["cr"].encode_seconds == first.tasks["cr"].encode_seconds  # reused without encoding
    changed = run_transfer_tasks(replace(config, protocol=replace(config.protocol, seed=3)), store)
    assert changed.tasks["cr"].result.seed == 3 and len(store.parts("transfer")) == 2
    # every protocol field, the max length, dtype, data checksum and head are in the key
    ident, enc = first.model, {"max_length": 256, "dtype": "float32"}
    base = task_key(ident, enc, "abc", "cr", config.protocol, True)
    other_values = {"n_outer": 3, "n_inner": 3, "max_layers": 2, "shortlist": None, "seed": 1, "ridge_alpha": 1.0,
                    "screen_dim": 4, "inner": "kfold", "bootstrap": 100}
    assert set(other_values) == {f.name for f in fields(TransferProtocol)}
    keys = [task_key(ident, enc, "abc", "cr", replace(config.protocol, **{k: v}), True) for k, v in other_values.items()]
    keys += [task_key(ident, {**enc, "max_length": 8}, "abc", "cr", config.protocol, True),
             task_key(ident, {**enc, "dtype": "bfloat16"}, "abc", "cr", config.protocol, True),
             task_key(ident, enc, "abd", "cr", config.protocol, True),
             task_key(ident, enc, "abc", "cr", config.protocol, False),
             task_key(replace(ident, tokenizer_sha256="x"), enc, "abc", "cr", config.protocol, True)]
    assert all(k != base for k in keys) and len({store.path("transfer", "x", k) for k in keys}) == len(keys)


def test_transfer_run_round_trips_and_refuses_unknown_schemas(tiny_bert, home):
    from conftest import write_senteval
    from layerwise.benchmarks.lc.transfer_run import TransferRun, TransferRunConfig, run_transfer_tasks
    from layerwise.methods.lc.transfer import TransferProtocol

    data = write_senteval(home / "data", n=40)
    config = TransferRunConfig(model=str(tiny_bert), tasks=("cr",), n_jobs=1, data_dir=str(data),
                               protocol=TransferProtocol(n_outer=2, n_inner=2))
    assert TransferRunConfig.from_dict(config.to_dict()) == config
    run = run_transfer_tasks(config, ResultsStore(home / "store"))
    doc = run.to_dict()
    assert TransferRun.from_dict(doc).to_dict() == doc
    with pytest.raises(ValueError, match="schema 99"):
        TransferRun.from_dict({**doc, "schema": 99})
    with pytest.raises(ValueError, match="not a 'transfer' results document"):
        TransferRun.from_dict({**doc, "kind": "ablations"})


def test_data_checksum_ignores_the_folder_but_not_the_content(tmp_path):
    import shutil

    from conftest import write_stsb
    from layerwise.data import load_sts
    from layerwise.data.checksum import content_checksum

    a = write_stsb(tmp_path / "a", n_pairs=10)
    shutil.copytree(a, tmp_path / "b")
    c = write_stsb(tmp_path / "c", n_pairs=10, seed=1)
    one, copy, other = (content_checksum(load_sts("stsb", data_dir=d)) for d in (a, tmp_path / "b", c))
    assert one == copy and one != other


def test_committed_parts_load_as_typed_results_and_round_trip():
    from layerwise.benchmarks.lc.ablation_run import AblationResult
    from layerwise.benchmarks.lc.pages import ablation_results
    from layerwise.benchmarks.lc.run import STSRun
    from layerwise.benchmarks.lc.transfer_pages import transfer_runs
    from layerwise.benchmarks.lc.transfer_run import TransferRun

    store = ResultsStore(RESULTS / "state")
    row = store.parts("lc-sts")[0].payload
    run = STSRun.from_dict(row)
    for method, s in run.lc.summary("spearman").items():  # the summary is recomputed: means as stored, sample std
        vals = [split.test[method]["spearman"] for split in run.lc.splits]
        assert s == pytest.approx({"mean": row["lc"]["summary"]["spearman"][method]["mean"],
                                   "std": np.std(vals, ddof=1)})
    assert STSRun.from_dict(run.to_dict()).to_dict() == run.to_dict()
    with pytest.raises(ValueError, match="schema 7"):
        STSRun.from_dict({**row, "schema": 7})
    from layerwise.benchmarks.lc.ablation_run import AblationPart

    for part in store.parts("ablations"):  # the typed part writes back exactly the stored JSON
        assert AblationPart.from_payload(part.payload).payload() == part.payload
    (abl,) = ablation_results(store)
    assert AblationResult.from_dict(abl.to_dict()).to_dict() == abl.to_dict()
    assert set(abl.sts) >= {"stsb", "sickr"} and abl.model.name == "all-MiniLM-L6-v2"
    from layerwise.benchmarks.lc.transfer_check import CheckResult

    (check,) = [p.payload for p in store.parts("transfer") if p.name.startswith("check-")]
    got = CheckResult.from_dict(check).to_dict()  # the old record has no tokenizer/config hashes: None added
    assert {**got, "model": None} == {**check, "model": None} and got["model"].items() >= check["model"].items()
    runs = transfer_runs(store, {})
    assert set(runs) == {"all-MiniLM-L6-v2", "all-mpnet-base-v2"}
    mini = runs["all-MiniLM-L6-v2"]
    assert TransferRun.from_dict(mini.to_dict()).to_dict() == mini.to_dict()
    # provenance and history kept: a converted part says where it came from, a computed one when and how it ran
    assert all(t.runs and (t.migrated_from or t.environment.get("date")) for t in mini.tasks.values())


@pytest.mark.slow
@pytest.mark.parametrize("page", ["lc-sts", "transfer", "ablations"])
def test_committed_parts_are_found_under_the_keys_the_run_code_computes(page, tmp_path):
    """``results run`` on a copy of the committed store computes nothing: every migrated part sits under the key
    that the run code computes from the installed models and the real data (needs both; ~10 s a page)."""
    import os
    import shutil

    from layerwise.encoders.registry import BUILTIN_MODELS

    data = Path(os.environ.get("LAYERWISE_DATA", "/work/shared/data"))
    if not (data / "sts").is_dir() or not all(m.locate() for m in BUILTIN_MODELS.values()):
        pytest.skip("needs the shared data folder and both built-in models installed")
    shutil.copytree(RESULTS / "state", tmp_path / "state")
    def results():  # every part, the record of the last invocation that computed something too
        return {p: p.read_bytes() for p in (tmp_path / "state").rglob("*.json")}

    before = results()
    ctx = PageContext(store=ResultsStore(tmp_path / "state"), output=tmp_path / "out", data_dir=str(data),
                      options={"jobs": 1} if page != "lc-sts" else {})
    get_page(page).run(ctx)
    assert results() == before


def test_results_command_lists_renders_and_refuses_bad_options(tmp_path, capsys):
    import shutil

    from layerwise.cli import main

    assert main(["results", "list"]) == 0
    listed = capsys.readouterr().out.split()
    assert {"lc-sts", "transfer", "ablations"} <= set(listed)
    shutil.copytree(RESULTS / "state" / "ablations", tmp_path / "state" / "ablations")
    assert main(["results", "render", "ablations", "--store", str(tmp_path / "state"),
                 "--output", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "ablations.md").is_file()
    assert (tmp_path / "out" / "ablations" / "ablations-all-MiniLM-L6-v2-limited.png").is_file()
    assert main(["results", "run", "ablations", "--store", str(tmp_path / "state"), "--option", "modles=[]"]) == 2
    assert "unknown option(s) ['modles']" in capsys.readouterr().err
    assert main(["results", "run", "ablations", "--option", "jobs"]) == 2
    assert "not KEY=VALUE" in capsys.readouterr().err


@pytest.mark.filterwarnings("ignore::scipy.stats.ConstantInputWarning")  # tiny model: SAGA ties on every subset
def test_shortcut_check_resumes_per_split_and_compares_with_exhaustive(tiny_bert, home):
    from conftest import write_senteval
    from layerwise.benchmarks.lc.transfer_check import ShortcutCheck, run_shortcut_check
    from layerwise.reports import environment

    data = write_senteval(home / "data", n=40)
    store = ResultsStore(home / "store")
    check = ShortcutCheck(model=str(tiny_bert), task="cr", n_splits=1, n_inner=2, n_jobs=1, data_dir=str(data))
    one = run_shortcut_check(check, store, environment())
    (part,) = store.parts("transfer")
    assert part.complete and len(one.splits) == 1 and one.n_subsets == 7  # 3 hidden states: every non-empty subset
    from dataclasses import replace

    two = run_shortcut_check(replace(check, n_splits=2), store, environment())
    first, again = one.splits[0], two.splits[0]  # the first split is reused, not recomputed (same times)
    assert (again.ridge_seconds, again.exhaustive_seconds, again.choice) == (first.ridge_seconds,
                                                                               first.exhaustive_seconds, first.choice)
    assert len(two.splits) == 2
    assert [r["splits"] for r in store.parts("transfer")[0].runs] == [[0, 1], [1, 2]]
    # each run names the code that computed its splits: the part is as stale as the oldest (page_parts.part_revisions)
    assert all(r["source"] == environment()["source"] for r in store.parts("transfer")[0].runs)
    for s in two.splits:  # the exhaustive choice has the best inner SAGA accuracy of all the choices
        assert s.inner_saga["7"] == max(s.inner_saga.values())


def _default_and_exact(tiny_bert, home, n_outer: int):
    """CR on the tiny model: the data, a store, the default protocol's run config and the exact protocol (3-fold
    inner CV, exhaustive SAGA), both on ``n_outer`` outer splits."""
    from conftest import write_senteval
    from layerwise.benchmarks.lc.transfer_run import TransferRunConfig
    from layerwise.methods.lc.transfer import TransferProtocol

    data = write_senteval(home / "data", n=40)
    base = TransferRunConfig(model=str(tiny_bert), tasks=("cr",), n_jobs=1, data_dir=str(data),
                             protocol=TransferProtocol(n_outer=n_outer, n_inner=2))
    return data, ResultsStore(home / "store"), base, TransferProtocol(n_outer=n_outer, n_inner=3, inner="kfold",
                                                                      shortlist=None)


def _by(protocol):
    """Keeps the task parts stored under ``protocol``."""
    return lambda part: part.key["protocol"] == protocol.to_dict()


def test_transfer_exact_protocol_is_a_part_of_its_own_a_section_of_the_page_and_tested(tiny_bert, home):
    from dataclasses import replace

    from layerwise.benchmarks.lc.pages import _save_exact_tests
    from layerwise.benchmarks.lc.transfer_pages import render_transfer_page
    from layerwise.benchmarks.lc.transfer_run import run_transfer_tasks
    from layerwise.benchmarks.page_parts import prune_superseded
    from layerwise.data.senteval import load_transfer
    from layerwise.evaluation.classification import outer_splits
    from layerwise.evaluation.significance import paired_bootstrap_accuracy
    from layerwise.evaluation.unit_outputs import unpack_correct
    from layerwise.methods.lc.transfer_significance import protocol_significance
    from layerwise.reports import environment

    data, store, base, exact = _default_and_exact(tiny_bert, home, n_outer=2)
    default_run = run_transfer_tasks(base, store).tasks["cr"].result
    run = run_transfer_tasks(replace(base, protocol=exact), store)
    exact_run = run.tasks["cr"].result
    assert "3-fold inner cross-validation" in run.protocol["name"]
    assert sorted(p.name for p in store.parts("transfer")) == [f"{tiny_bert.name}-cr", f"{tiny_bert.name}-cr-exact"]
    assert prune_superseded(store, "transfer", dry_run=True) == []  # neither supersedes the other

    def section():
        text, _ = render_transfer_page(store, {}, environment(["test"]), _by(base.protocol), _by(exact))
        return text.split("## The paper's exact protocol", 1)[1]

    assert "| screen agrees |" in section() and f"| {tiny_bert.name} | CR | 2 of 2 | 3 |" in section()
    # where the exact splits ran and how long they took (a page may hold runs from several machines)
    minutes = run.tasks["cr"].protocol_seconds / 60
    assert f"| {minutes:.1f} min, {os.cpu_count()} CPUs" in section()
    empty, _ = render_transfer_page(store, {}, environment(["test"]), _by(base.protocol), lambda part: False)
    assert "Not run yet on this machine" in empty
    assert section().count("not tested") == 2  # no test stored yet

    # the exact LC against the default LC and against its own last-layer mean, on the same outer splits
    ctx = PageContext(store=store, output=home / "out", data_dir=str(data), command=("test",), options={})
    _save_exact_tests(ctx, run.model.name, "cr", default_part=_by(base.protocol), exact_part=_by(exact))
    (part,) = [p for p in store.parts("transfer") if p.name.startswith("exact-test-")]
    labels = load_transfer("cr", data_dir=data).labels  # the slow twin: each split's outputs placed by hand
    rows = [te for _, te in outer_splits(labels, n_splits=2, seed=0)]

    def matrix(result, method):
        out = np.zeros((2, len(labels)))
        for k, (split, r) in enumerate(zip(result.splits, rows, strict=True)):
            out[k, r] = unpack_correct(split.correct[method], len(r))
        return out

    for name, other, method in (("lc_vs_default_lc", default_run, "lc"), ("lc_vs_last", exact_run, "last")):
        want = paired_bootstrap_accuracy(matrix(exact_run, "lc"), matrix(other, method), rows=rows,
                                         n_resamples=2000, seed=0)
        assert part.payload["tests"][name] == want.to_dict()
        assert want.difference == pytest.approx(exact_run.summary()["lc"]["mean"] - other.summary()[method]["mean"])
    assert section().count("not tested") == 0
    store.save(replace(part, payload={**part.payload, "default": "another run"}))  # the default run changed since
    assert section().count("not tested") == 2
    with pytest.raises(ValueError, match="n_outer"):  # runs on other outer splits cannot be paired
        protocol_significance(exact_run, replace(default_run, n_outer=4), labels, n_resamples=10)


def test_an_exact_run_cut_short_is_shown_and_tested_on_its_first_outer_splits(tiny_bert, home):
    from dataclasses import replace

    from layerwise.benchmarks.lc.pages import _save_exact_tests
    from layerwise.benchmarks.lc.transfer_pages import render_transfer_page
    from layerwise.benchmarks.lc.transfer_run import run_transfer_tasks
    from layerwise.data.senteval import load_transfer
    from layerwise.methods.lc.transfer_significance import protocol_significance
    from layerwise.reports import environment

    data, store, base, exact = _default_and_exact(tiny_bert, home, n_outer=3)
    default_run = run_transfer_tasks(base, store).tasks["cr"].result
    part_run = run_transfer_tasks(replace(base, protocol=exact, max_splits=2), store).tasks["cr"]
    assert len(part_run.result.splits) == 2 and not part_run.complete  # a partial part, continued later
    ctx = PageContext(store=store, output=home / "out", data_dir=str(data), command=("test",), options={})
    _save_exact_tests(ctx, part_run.model.name, "cr", default_part=_by(base.protocol), exact_part=_by(exact))
    (test,) = [p for p in store.parts("transfer") if p.name.startswith("exact-test-")]
    labels = load_transfer("cr", data_dir=data).labels

    def first(result, k):  # the slow twin: both runs as if their protocol had k outer splits
        return replace(result, splits=result.splits[:k], n_outer=k)

    a, b = first(part_run.result, 2), first(default_run, 2)
    assert test.payload["tests"]["lc_vs_default_lc"] == protocol_significance(a, b, labels, n_resamples=2000)
    assert test.payload["tests"]["lc_vs_last"] == protocol_significance(a, a, labels, n_resamples=2000,
                                                                        method_b="last")
    text, _ = render_transfer_page(store, {}, environment(["test"]), _by(base.protocol), _by(exact))
    row = next(line for line in text.split("## The paper's exact protocol", 1)[1].splitlines()
               if line.startswith(f"| {tiny_bert.name} | CR |"))
    lc = [s.test["lc"] for s in default_run.splits[:2]]
    assert "| 2 of 3 | 3 |" in row and f"| {np.mean(lc):.2f} ± {np.std(lc, ddof=1):.2f} |" in row  # same splits
    assert "not tested" not in row
    with pytest.raises(ValueError, match="2 of the 3 outer splits"):  # all of them asked of a partial run
        protocol_significance(part_run.result, default_run, labels, n_resamples=10)
    whole = run_transfer_tasks(replace(base, protocol=exact), store).tasks["cr"]  # continued, not recomputed
    assert whole.complete and [s.test for s in whole.result.splits[:2]] == [s.test for s in part_run.result.splits]


def test_the_last_run_record_is_kept_when_a_run_only_finds_stored_parts(tiny_bert, home):
    from conftest import write_senteval
    from layerwise.benchmarks.lc.pages import _save_last_run
    from layerwise.benchmarks.lc.transfer_run import TransferRunConfig, run_transfer_tasks
    from layerwise.methods.lc.transfer import TransferProtocol

    data = write_senteval(home / "data", n=40)
    store = ResultsStore(home / "store")
    config = TransferRunConfig(model=str(tiny_bert), tasks=("cr",), n_jobs=1, data_dir=str(data),
                               protocol=TransferProtocol(n_outer=2, n_inner=2))
    _save_last_run(store, run_transfer_tasks(config, store), 12.5)
    (record,) = [p for p in store.parts("transfer") if p.name.startswith("last-run-")]
    assert record.payload["wall_seconds"] == 12.5 and list(record.payload["tasks"]) == ["cr"]
    _save_last_run(store, run_transfer_tasks(config, store), 0.1)  # every task reused: nothing computed
    (kept,) = [p for p in store.parts("transfer") if p.name.startswith("last-run-")]
    assert kept.payload == record.payload
