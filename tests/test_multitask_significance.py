"""The multitask page's paired tests: each run keeps its per-example test outputs, the findings table gets a p per
targeted score (and overall) against the claim's reference, computed as the significance module computes it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy.stats import pearsonr

from conftest import write_multitask
from layerwise.benchmarks import ResultsStore
from layerwise.benchmarks.catalog import get_page
from layerwise.benchmarks.registry import PageContext
from layerwise.benchmarks.significance_parts import N_RESAMPLES, OUTPUTS_KEY, SEED, without_outputs
from layerwise.evaluation.significance import bootstrap_scores, compare_combined, compare_scores
from layerwise.keys import keyed_name
from layerwise.methods.multitask.run import ExperimentResult, unpack_test_output

TINY = {"epochs": 1, "batch_size": 8, "max_length": 16, "lr": 1e-3, "limit": 10, "eval_limit": 8}


@pytest.fixture(scope="module")
def stored(tiny_bert, tmp_path_factory):
    """BASELINE (seeds 0, 1) and SHARED (seed 0) run through the page on a tiny BERT and small data."""
    tmp = tmp_path_factory.mktemp("mt-sig")
    data = write_multitask(tmp / "data", n=20)
    store = ResultsStore(tmp / "state")
    options = {"experiments": ["BASELINE", "SHARED"], "seeds": [0], "more_seeds": [1], "more_seeds_for": ["BASELINE"],
               "model": str(tiny_bert), "overrides": TINY, "checkpoints": str(tmp / "runs"), "paper_protocols": []}
    ctx = PageContext(store=store, output=tmp / "out", data_dir=str(data), options=options)
    get_page("multitask").run(ctx)
    parts = {p.name: p for p in store.parts("multitask")}
    return tmp, ctx, parts


def _results(parts, name):
    return [ExperimentResult.from_payload(p.payload) for n, p in sorted(parts.items()) if n.startswith(f"{name}-seed")]


def test_runs_keep_their_test_outputs_and_the_gold_round_trips(stored):
    from layerwise.benchmarks.multitask.experiment import stored_gold

    tmp, ctx, parts = stored
    part = parts["BASELINE-seed0"]
    assert part.key[OUTPUTS_KEY] and "gold-scores" in parts
    (folder,) = (tmp / "runs" / "BASELINE").glob("seed0-*")  # named without the outputs entry: old checkpoints reused
    assert folder.name == keyed_name("seed0", without_outputs(part.key))
    result = ExperimentResult.from_payload(part.payload)
    assert ExperimentResult.from_payload(result.to_payload()) == result
    out = {t: unpack_test_output(result.test_outputs[t]) for t in ("sst", "para", "sts")}
    assert out["sst"].dtype == bool and len(out["sst"]) == len(out["para"]) == len(out["sts"]) == 8
    assert out["sst"].mean() == pytest.approx(result.test.sst_acc)
    assert out["para"].mean() == pytest.approx(result.test.para_acc)
    gold = stored_gold(ctx.store, result.test_outputs["sts"]["checksum"])
    assert len(gold) == 8
    assert pearsonr(out["sts"], gold).statistic == pytest.approx(result.test.sts_pearson, abs=1e-6)


def test_p_values_equal_the_significance_modules_on_the_stored_outputs(stored):
    from layerwise.benchmarks.multitask.experiment import stored_gold
    from layerwise.benchmarks.multitask.pages import claim_tests

    _, ctx, parts = stored
    shared, base = _results(parts, "SHARED"), _results(parts, "BASELINE")
    assert len(base) == 2 and len(shared) == 1
    tests = claim_tests(ctx.store, shared + base)[("SHARED", "BASELINE")]
    assert set(tests) == {"para_acc", "sts_pearson", "overall"}
    gold = stored_gold(ctx.store, base[0].test_outputs["sts"]["checksum"])

    def scores(runs, task, metric, offset):
        x = np.stack([unpack_test_output(r.test_outputs[task]) for r in runs]).astype(float)
        return bootstrap_scores(x, [np.arange(x.shape[1])] * len(x), metric=metric,
                                gold=gold if metric == "pearson" else None, n_resamples=N_RESAMPLES, seed=SEED + offset)

    want = {s: (scores(shared, t, m, o), scores(base, t, m, o))
            for s, t, m, o in [("sst_acc", "sst", "accuracy", 0), ("para_acc", "para", "accuracy", 1),
                               ("sts_pearson", "sts", "pearson", 2)]}
    for s in ("para_acc", "sts_pearson"):
        assert tests[s] == compare_scores(*want[s])
    overall = compare_combined([(*want["sst_acc"], 1 / 3), (*want["para_acc"], 1 / 3), (*want["sts_pearson"], 1 / 6)])
    assert tests["overall"] == overall
    # the observed overall difference is the page's (x100), the mean over seeds of each side
    page_diff = 100 * (np.mean([r.test.overall for r in shared]) - np.mean([r.test.overall for r in base]))
    assert overall.difference == pytest.approx(page_diff, abs=1e-4)


def test_a_copy_of_the_reference_gets_p_one_and_old_runs_are_not_tested(stored):
    from layerwise.benchmarks.multitask.pages import claim_tests, load_page
    from layerwise.benchmarks.multitask.report import render_markdown

    _, ctx, parts = stored
    base = _results(parts, "BASELINE")
    copy = [dataclasses.replace(r, config={**r.config, "name": "SHARED"}) for r in base]
    tests = claim_tests(ctx.store, copy + base)[("SHARED", "BASELINE")]
    assert all(t.p_value == 1.0 and t.difference == 0 for t in tests.values())
    old = [dataclasses.replace(r, test_outputs={}) for r in _results(parts, "SHARED")]
    assert all(t is None for t in claim_tests(ctx.store, old + base)[("SHARED", "BASELINE")].values())
    page = dataclasses.replace(load_page(ctx), results=old + base)
    page.tests = claim_tests(ctx.store, page.results)
    row = next(line for line in render_markdown(page).splitlines() if line.startswith("| sharing two hidden"))
    assert "PARA acc not tested, STS Pearson not tested" in row and row.count("not tested") == 3
    get_page("multitask").render(ctx)  # the stored runs: every targeted score and overall tested
    row = next(line for line in (ctx.output / "multitask.md").read_text().splitlines()
               if line.startswith("| sharing two hidden"))
    assert "not tested" not in row and row.count(" (yes)") + row.count(" (no)") == 3
