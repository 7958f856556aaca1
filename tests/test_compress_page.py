"""The ``compress`` results page on a tiny random BERT and small written data: run, store, render from the store."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from conftest import write_stsb, write_unlabeled
from layerwise.benchmarks import Part, ResultsStore
from layerwise.benchmarks.catalog import get_page
from layerwise.benchmarks.registry import PageContext
from layerwise.methods.compress import Compressor
from layerwise.methods.compress import students as students_module


def _options(tiny_bert, env, **over) -> dict:
    """A page run on the tiny model small enough for a test: torch only, one epoch, 16 timed sentences."""
    return {"models": [str(tiny_bert)], "backends": ["torch"], "epochs": 1, "batch_size": 8, "max_length": 16,
            "speed_sentences": 16, "speed_batch_size": 16, "speed_repeats": 1, "corpus": ["wiki", "snli"],
            "tests": ["stsb"], "folders": str(env / "runs"), "every_depth": False, **over}


def n_layers(folder) -> int:
    return int(json.loads((Path(folder) / "config.json").read_text())["num_hidden_layers"])


def test_compress_page_runs_and_renders_from_the_store(tiny_bert, env, monkeypatch):
    data = write_unlabeled(write_stsb(env / "data", n_pairs=24))
    store = ResultsStore(env / "state")
    options = _options(tiny_bert, env)
    ctx = PageContext(store=store, output=env / "out", data_dir=str(data), command=("test",), options=options)
    page = get_page("compress")
    page.run(ctx)
    parts = store.parts("compress")
    depths = sorted(p.key["depth"] for p in parts if "depth" in p.key)
    (summary,) = [p for p in parts if "depth" not in p.key]
    assert depths == list(range(1, n_layers(tiny_bert) + 1))  # one part per depth, the full one too, and the choice
    depth_parts = [p for p in parts if "depth" in p.key]
    counts = depth_parts[0].payload["corpus"]
    assert counts["kept"] == counts["distinct"] - counts["left_out_scored"] > 8
    for part in depth_parts:
        recipes = {c["recipe"] for c in part.payload["result"]["candidates"]}
        if part.key["depth"] == n_layers(tiny_bert):  # the full depth: the original and its LC cut of all states
            assert recipes <= {"original", "lc-cut"} and "original" in recipes
            continue
        assert {"original", "cut", "distilled"} <= recipes
        depths = {c["depth"] for c in part.payload["result"]["candidates"] if c["recipe"] != "lc-cut"}
        assert depths == {part.key["depth"], n_layers(tiny_bert)}  # this depth's candidates and the original
        assert all(set(c["tests"]) == {"stsb"} for c in part.payload["result"]["candidates"])
    assert Path(summary.payload["saved_model"], "config.json").is_file()
    monkeypatch.setattr(Compressor, "fit", lambda *a, **k: pytest.fail("computed again"))
    page.run(ctx)  # the part is in the store: nothing is computed
    md, png = page.render(ctx)
    text = md.read_text()
    assert f"## {tiny_bert.name}" in text and "| **chosen** |" in text and png.is_file()
    assert f"Distillation corpus: {counts['kept']} sentences" in text
    chosen = summary.payload["chosen"]
    assert f"**{chosen['recipe']}-l{chosen['depth']}-{chosen['backend']}**" in text  # render's choice = the run's
    assert "## all-MiniLM-L6-v2\n\n**Not run yet.**" in text  # the built-in models this store lacks
    assert "(goal:" not in text  # the throughput goals name the built-in models only


def test_a_killed_page_run_keeps_its_finished_depths(tiny_bert, env, monkeypatch):
    data = write_unlabeled(write_stsb(env / "data", n_pairs=24))
    store = ResultsStore(env / "state")
    options = _options(tiny_bert, env, timings="per-depth")
    ctx = PageContext(store=store, output=env / "out", data_dir=str(data), command=("test",), options=options)
    real_fit, fits = Compressor.fit, []

    def fit_then_kill(self, *a, **kw):
        fits.append(self.depths)
        if len(fits) == 2:
            raise KeyboardInterrupt
        return real_fit(self, *a, **kw)

    monkeypatch.setattr(Compressor, "fit", fit_then_kill)
    with pytest.raises(KeyboardInterrupt):
        get_page("compress").run(ctx)
    assert [p.key["depth"] for p in store.parts("compress")] == [2]  # deepest first
    fits.clear()
    monkeypatch.setattr(Compressor, "fit", lambda self, *a, **kw: fits.append(self.depths) or real_fit(self, *a, **kw))
    get_page("compress").run(ctx)
    assert fits[0] == (1,) and len(fits) == 2  # the finished depth is not fitted again: the killed one, the choice
    # each depth part lists the code that measured its candidates (read back or not), beside the run that stored it
    from layerwise.benchmarks.compress.pages import computed_at
    from layerwise.methods.compress.frontier import Candidate
    from layerwise.reports import source_revision

    for part in (p for p in store.parts("compress") if "depth" in p.key):
        candidates = [Candidate.from_dict(c) for c in part.payload["result"]["candidates"]]
        assert part.payload["computed_at"] == computed_at(candidates)
        assert bool(part.payload["computed_at"]) == (source_revision() is not None)  # none outside a checkout


def test_a_redone_depth_is_computed_again_where_code_since_changed_and_re_stored_where_not(tiny_bert, env,
                                                                                          monkeypatch):
    """``--redo`` / ``--stale`` of a depth part: what the work folder holds that code of a stale commit computed is
    forgotten and computed again (the part then names only the new code); work of a commit not stale is read back."""
    from layerwise import __version__
    from layerwise.benchmarks.compress import pages as pages_module
    from layerwise.methods.compress import build as build_module

    data = write_unlabeled(write_stsb(env / "data", n_pairs=24))
    options = _options(tiny_bert, env, timings="per-depth")
    stamp = {"commit": "a" * 40, "dirty": False}
    for module in (build_module, students_module):
        monkeypatch.setattr(module, "code_revision", lambda: {"layerwise": __version__, **stamp})

    def ctx(redo=()):
        return PageContext(store=ResultsStore(env / "state", redo=redo), output=env / "out", data_dir=str(data),
                           command=("test",), options=options)

    get_page("compress").run(ctx())
    name = f"{tiny_bert.name}-l1"
    part = next(p for p in ctx().store.parts("compress") if p.name == name)
    assert part.payload["computed_at"] == [stamp]
    measured, stale = [], set()
    real_measure = build_module.Compression._measure
    monkeypatch.setattr(build_module.Compression, "_measure",
                        lambda self, *a: measured.append(a[0]) or real_measure(self, *a))
    monkeypatch.setattr(pages_module, "source_root", lambda: env)
    monkeypatch.setattr(pages_module, "changed_files", lambda commit, sources, root: ["m.py"] if commit in stale
                        else [])
    stamp["commit"] = "b" * 40
    get_page("compress").run(ctx(redo=(name,)))  # a's code unchanged: re-stored from the work folder
    again = next(p for p in ctx().store.parts("compress") if p.name == name)
    assert measured == [] and again.payload["computed_at"] == [{"commit": "a" * 40, "dirty": False}]
    stale.add("a" * 40)  # now a's measured code changed: depth 1 computed again, its student trained again
    get_page("compress").run(ctx(redo=(name,)))
    redone = next(p for p in ctx().store.parts("compress") if p.name == name)
    assert "distilled" in measured and redone.payload["computed_at"] == [{"commit": "b" * 40, "dirty": False}]
    student = next(c for c in redone.payload["result"]["candidates"] if c["recipe"] == "distilled")
    assert student["extra"]["computed"]["trained"]["commit"] == "b" * 40


def test_min_depth_builds_no_shallower_depth_and_the_page_says_what_is_not_measured(tiny_bert, env, monkeypatch):
    data = write_unlabeled(write_stsb(env / "data", n_pairs=24))
    top = n_layers(tiny_bert)
    ctx = PageContext(store=ResultsStore(env / "state"), output=env / "out", data_dir=str(data),
                      options=_options(tiny_bert, env, min_depth=top))
    real_fit, fits = Compressor.fit, []
    monkeypatch.setattr(Compressor, "fit", lambda self, *a, **kw: fits.append(self.depths) or real_fit(self, *a, **kw))
    get_page("compress").run(ctx)
    assert set(fits) == {(top,)}  # the depth, then the choice read back from it: no shallower depth is built
    parts = ctx.store.parts("compress")
    assert sorted(p.key["depth"] for p in parts if "depth" in p.key) == [top]
    (chosen,) = [p.payload["chosen"] for p in parts if "depth" not in p.key]  # the choice is saved, among the built
    (built,) = [p.payload["result"]["candidates"] for p in parts if "depth" in p.key]
    assert (chosen["recipe"], chosen["layers"], chosen["backend"]) in [(c["recipe"], c["layers"], c["backend"])
                                                                       for c in built]
    (md, _) = get_page("compress").render(ctx)
    assert f"Depths measured: {top}; **not yet measured: {', '.join(map(str, range(1, top)))}**" in md.read_text()
    assert "min_depth" not in json.dumps(parts[0].key)  # which depths a run builds is not in the key
    monkeypatch.setattr("layerwise.benchmarks.compress.pages.page_data", lambda *a, **k: pytest.fail("data read"))
    deep = PageContext(store=ResultsStore(env / "state"), output=env / "out", data_dir=str(data),
                       options=_options(tiny_bert, env, min_depth=top + 1))
    with pytest.raises(ValueError, match=f"min_depth={top + 1} is deeper than {tiny_bert.name}'s {top} layers; "
                                         f"pass a depth in 1..{top}"):
        get_page("compress").run(deep)  # refused before any data is read


def test_depths_builds_only_those_and_refuses_one_outside_the_model_before_any_data(tiny_bert, env, monkeypatch):
    data = write_unlabeled(write_stsb(env / "data", n_pairs=24))
    top = n_layers(tiny_bert)
    ctx = PageContext(store=ResultsStore(env / "state"), output=env / "out", data_dir=str(data),
                      options=_options(tiny_bert, env, depths=[1], tests=["stsb", "sts14"]))
    real_fit, fits = Compressor.fit, []
    monkeypatch.setattr(Compressor, "fit", lambda self, *a, **kw: fits.append(self.depths) or real_fit(self, *a, **kw))
    get_page("compress").run(ctx)
    assert set(fits) == {(1,)}  # depth 1, then the choice read back from it: the depths between are not built
    parts = ctx.store.parts("compress")
    assert sorted(p.key["depth"] for p in parts if "depth" in p.key) == [1]
    assert "depths" not in json.dumps(parts[0].key)  # which depths a run builds is not in the key
    (md, _) = get_page("compress").render(ctx)
    assert f"Depths measured: 1; **not yet measured: {', '.join(map(str, range(2, top + 1)))}**" in md.read_text()
    assert "Tests: stsb (SICK-R" in md.read_text() and "; not scored, absent from the data folder: sts14." in md.read_text()
    fits.clear()
    get_page("compress").run(PageContext(store=ResultsStore(env / "state"), output=env / "out", data_dir=str(data),
                                         options=_options(tiny_bert, env, depths=[top, 1], tests=["stsb", "sts14"])))
    assert fits[0] == (top,) and (1,) not in fits  # the stored depth is read, the new one built
    monkeypatch.setattr("layerwise.benchmarks.compress.pages.page_data", lambda *a, **k: pytest.fail("data read"))
    deep = PageContext(store=ResultsStore(env / "state"), output=env / "out", data_dir=str(data),
                       options=_options(tiny_bert, env, depths=[top + 1, 1]))
    with pytest.raises(ValueError, match=rf"depths=\[{top + 1}, 1\]: \[{top + 1}\] outside {tiny_bert.name}'s "
                                         rf"1..{top}; pass depths in 1..{top}"):
        get_page("compress").run(deep)  # refused before any data is read


def test_the_choice_is_read_back_from_the_shallowest_depth_part_that_holds_it():
    from layerwise.benchmarks.compress.stored import home_depth
    from layerwise.methods.compress.frontier import Candidate

    def cand(recipe, layers):
        return {"recipe": recipe, "depth": max(layers), "layers": list(layers), "backend": "torch", "parameters": 1,
                "dev": 70.0, "tests": {}, "speed": {"seconds": [1.0], "original_seconds": [1.0]}}

    key = {"model": "m", "protocol": {"budget": 1.0}}
    zero = Candidate.from_dict(cand("lc-cut", (0,)))
    two = Part("compress", "m-l2", {**key, "depth": 2}, {"result": {"candidates": [cand("lc-cut", (0,))]}})
    one = Part("compress", "m-l1", {**key, "depth": 1}, {"result": {"candidates": [cand("lc-cut", (0,))]}})
    other = Part("compress", "m-l1", {"model": "n", "depth": 1}, {"result": {"candidates": [cand("lc-cut", (0,))]}})
    assert home_depth([two, other], key, zero) == 2  # depth 1 not built (min_depth): read back from depth 2
    assert home_depth([two, one], key, zero) == 1


def test_retime_times_every_stored_candidate_again_and_keeps_the_scores(tiny_bert, env, monkeypatch):
    from layerwise.methods.compress import build

    data = write_unlabeled(write_stsb(env / "data", n_pairs=24))
    options = _options(tiny_bert, env)
    ctx = PageContext(store=ResultsStore(env / "state"), output=env / "out", data_dir=str(data), options=options)
    get_page("compress").run(ctx)
    before = {p.name: p.payload["result"]["candidates"] for p in ctx.store.parts("compress") if "depth" in p.key}
    timed, real = [], build.measure_speed
    monkeypatch.setattr(build, "measure_speed", lambda *a, **k: timed.append(1) or real(*a, **k))
    monkeypatch.setattr(students_module, "distill_student", lambda *a, **k: pytest.fail("no student trains again"))
    monkeypatch.setattr(build.Compression, "_measure", lambda *a, **k: pytest.fail("no candidate is scored again"))
    redo = PageContext(store=ResultsStore(env / "state", redo=("*-l*",)), output=env / "out", data_dir=str(data),
                       options={**options, "retime": True})
    get_page("compress").run(redo)
    after = {p.name: p.payload["result"]["candidates"] for p in redo.store.parts("compress") if "depth" in p.key}
    assert after.keys() == before.keys() and len(timed) == len({(c["recipe"], tuple(c["layers"]), c["backend"])
                                                                   for cs in before.values() for c in cs})
    for name, cands in after.items():  # every candidate timed again, each scored as before
        assert [{k: v for k, v in c.items() if k != "speed"} for c in cands] == [
            {k: v for k, v in c.items() if k != "speed"} for c in before[name]]
        assert all(c["speed"]["seconds"] for c in cands)
    assert all("adopted" not in p.payload for p in redo.store.parts("compress") if "depth" in p.key)


@pytest.mark.parametrize("options", [{"budgte": 1}, {"timings": "sometimes"}, {"stop_outside_budget": "yes"},
                                     {"retime": 1}, {"graph_test_scores": "fast"}, {"train_students": 11},
                                     {"train_students": [True]}, {"train_pairs": "sickr"},
                                     {"min_depth": 0}, {"min_depth": "11"}, {"depths": "9"}, {"depths": [9.0]}])
def test_compress_page_refuses_unknown_options(tmp_path, options):
    ctx = PageContext(store=ResultsStore(tmp_path), output=tmp_path, options=options)
    with pytest.raises(ValueError, match="unknown or invalid compress page option.*" + next(iter(options))):
        get_page("compress").run(ctx)


def test_an_lc_cut_equal_to_a_plain_cut_is_listed_once_as_the_cut():
    from layerwise.benchmarks.compress.stored import model_candidates
    from layerwise.benchmarks.store import Part

    def cand(recipe, layers, dev):
        return {"recipe": recipe, "depth": max(layers), "layers": list(layers), "backend": "torch",
                "parameters": 1, "dev": dev, "tests": {}, "speed": {"seconds": [1.0], "original_seconds": [2.0]}}

    key = {"model": "m", "protocol": {"budget": 1.0}}
    parts = [Part("compress", "m-l1", {**key, "depth": 1}, {"result": {"candidates": [
                 cand("original", (3,), 80.0), cand("cut", (1,), 60.0)]}}),
             Part("compress", "m-l2", {**key, "depth": 2}, {"result": {"candidates": [
                 cand("original", (3,), 80.0), cand("cut", (2,), 55.0), cand("lc-cut", (1,), 60.0),
                 cand("lc-cut", (0, 2), 62.0)]}})]
    candidates, original, _ = model_candidates(parts, key, 1.0)
    assert [(c.recipe, c.layers) for c in candidates] == [("original", (3,)), ("cut", (1,)), ("cut", (2,)),
                                                           ("lc-cut", (0, 2))]
    assert original.dev == 80.0


def test_goal_lines_say_met_or_not_met_with_the_measured_figures():
    from layerwise.benchmarks.compress.goals import goal_lines
    from layerwise.benchmarks.compress.stored import ModelResults
    from layerwise.methods.compress.frontier import Candidate

    def cand(recipe, depth, backend, dev, stsb, seconds):
        return Candidate.from_dict({"recipe": recipe, "depth": depth, "layers": [depth], "backend": backend,
                                    "parameters": 1, "dev": dev, "tests": {"stsb": stsb},
                                    "speed": {"seconds": [seconds], "original_seconds": [1.0]}})

    original = cand("original", 6, "torch", 80.0, 82.0, 1.0)
    candidates = [original, cand("distilled", 3, "torch", 79.5, 81.5, 0.5), cand("distilled", 3, "onnx", 79.5, 81.5, 0.4),
                  cand("distilled", 3, "onnx-int8", 78.9, 81.2, 0.3), cand("distilled", 2, "torch", 70.0, 70.0, 0.2)]
    r = ModelResults("x/all-MiniLM-L6-v2", {"budget": 1.0}, {}, [], candidates, original, candidates[3])
    lines = goal_lines(r, {2: 71.0, 3: 80.0})
    assert "distilled-l3-onnx-int8, 3.33x (goal: >= 3x, **met**)" in lines[1]
    assert lines[2].endswith("higher at 1 of 2 depths (2: 70.00 vs 71.00, 3: 81.50 vs 80.00); TMFT trains on "
                             "STS-B's labelled train pairs, which the students never see (they learn the original's "
                             "embeddings of the unlabeled corpus)")
    assert ("at most 0.60 points, over 0.5 for 1 of 1 candidates (goal: within 0.5, **not met**; "
            "distilled-l3-onnx-int8 -0.60; all lower than float32)") in lines[3]  # which candidates, which way
    from layerwise.benchmarks.compress.goals import _directions

    assert _directions({"a": 0.8, "b": 0.61}) == "none lower than float32 (int8 scored higher)"
    assert _directions({"a": 0.8, "b": -0.61, "c": -0.7}) == "2 lower than float32, 1 higher"
    slow = [c if c.backend != "onnx-int8" else cand("distilled", 3, "onnx-int8", 79.4, 81.2, 0.5) for c in candidates]
    lines = goal_lines(ModelResults("x/all-MiniLM-L6-v2", {"budget": 1.0}, {}, [], slow, original, slow[3]), {})
    assert "(goal: >= 3x, **not met**)" in lines[1] and "**met**)" in lines[2]  # no TMFT figures: no student line
    assert lines[1].endswith("Why: every candidate within the limits runs at least 3 of 6 layers; the nearest with "
                             "fewer, distilled-l2-torch, is -12.00 on STS-B test and -12.00 on the STS average against "
                             "the original, so the speed-up rests on the backend at 3 layers")


def test_candidates_carried_over_from_an_earlier_run_are_marked_with_that_run():
    from layerwise.benchmarks.compress.goals import goal_lines
    from layerwise.benchmarks.compress.report import CARRIED_MARK, _table
    from layerwise.benchmarks.compress.stored import ModelResults
    from layerwise.methods.compress.frontier import Candidate

    def cand(recipe, backend, seconds):
        return {"recipe": recipe, "depth": 1, "layers": [1], "backend": backend, "parameters": 1, "dev": 70.0,
                "tests": {"stsb": 70.0}, "speed": {"seconds": [seconds], "original_seconds": [1.0]}}

    donor = Part("compress", "m-l1", {"depth": 1}, {"result": {"candidates": [cand("cut", "torch", 0.5)]}},
                 runs=[{"started": "2026-11-25 09:00:00 UTC"}])
    original = Candidate.from_dict({**cand("original", "torch", 1.0), "depth": 2, "layers": [2]})
    old, new = Candidate.from_dict(cand("cut", "torch", 0.5)), Candidate.from_dict(cand("cut", "onnx", 0.25))
    r = ModelResults("m", {"budget": 100.0}, {}, [], [original, old, new], original, old, {1: donor})
    assert r.carried(old) is donor and r.carried(new) is None and r.carried(original) is None
    again = Candidate.from_dict(cand("cut", "torch", 0.4))  # measured again (its student retrained, say): its own
    assert r.carried(again) is None
    rows = "\n".join(_table(r, {}))
    assert f"| 2.00x{CARRIED_MARK} |" in rows and "| 4.00x |" in rows and f"{CARRIED_MARK} timed in an earlier run" in rows
    assert "2.00x (timed in the earlier run of 2026-11-25, carried over)" in goal_lines(r, {})[0]


def test_the_goal_lines_show_how_far_the_ratio_moved_between_passes():
    from layerwise.benchmarks.compress.goals import goal_lines
    from layerwise.benchmarks.compress.stored import ModelResults
    from layerwise.methods.compress.frontier import Candidate

    def cand(recipe, depth, seconds, original_seconds):
        return Candidate.from_dict({"recipe": recipe, "depth": depth, "layers": [depth], "backend": "torch",
                                    "parameters": 1, "dev": 70.0, "tests": {"stsb": 70.0},
                                    "speed": {"seconds": seconds, "original_seconds": original_seconds}})

    original = cand("original", 2, [1.0, 1.0, 1.0], [1.0, 1.0, 1.0])
    cut = cand("cut", 1, [0.5, 0.4, 0.25], [1.0, 1.2, 1.0])  # passes 2.0x, 3.0x, 4.0x; medians 1.0 / 0.4 = 2.5x
    assert cut.pass_ratios == pytest.approx([2.0, 3.0, 4.0]) and cut.ratio == pytest.approx(2.5)
    r = ModelResults("m", {"budget": 100.0}, {}, [], [original, cut], original, cut, {})
    lines = goal_lines(r, {})
    assert "cut-l1-torch** (hidden states 1), 2.50x (passes 2.00-4.00x)," in lines[0]
    assert "cut-l1-torch, 2.50x (passes 2.00-4.00x)" in lines[1]

def test_each_ratio_is_also_read_against_every_pass_of_the_original_in_its_run():
    from layerwise.benchmarks.compress.goals import goal_lines, run_ratio
    from layerwise.benchmarks.compress.report import _table
    from layerwise.benchmarks.compress.stored import ModelResults
    from layerwise.methods.compress.frontier import Candidate

    def cand(recipe, depth, seconds, original_seconds):
        return {"recipe": recipe, "depth": depth, "layers": [depth], "backend": "torch", "parameters": 1,
                "dev": 70.0, "tests": {"stsb": 70.0}, "speed": {"seconds": [seconds] * 3,
                                                                "original_seconds": [original_seconds] * 3}}

    # the original timed beside the cut was slow (1.2 s a pass against 1.0 beside the others): paired, the cut is
    # 1.2 / 0.35 = 3.43x; against the median of the run's 9 passes of the original (1.0 s), 2.86x
    stored = [cand("original", 2, 1.0, 1.0), cand("cut", 1, 0.35, 1.2), cand("distilled", 1, 0.34, 1.0)]
    part = Part("compress", "m-l1", {"depth": 1}, {"result": {"candidates": stored}},
                runs=[{"started": "2026-11-28 09:00:00 UTC"}])
    original, cut, student = map(Candidate.from_dict, stored)
    r = ModelResults("x/all-MiniLM-L6-v2", {"budget": 100.0}, {}, [part], [original, cut, student], original, cut)
    assert cut.ratio == pytest.approx(1.2 / 0.35)
    assert run_ratio(r, cut) == (pytest.approx(1.0 / 0.35), 9) and run_ratio(r, student)[0] == pytest.approx(1 / 0.34)
    # the slow twin: the median of every original pass of the part, by hand
    passes = sorted(x for d in stored for x in d["speed"]["original_seconds"])
    assert run_ratio(r, cut)[0] == pytest.approx(passes[len(passes) // 2] / 0.35)
    line = goal_lines(r, {})[1]
    assert "cut-l1-torch, 3.43x (passes 3.43-3.43x; 2.86x against the median of the original's 9 passes in its " \
           "run) (goal: >= 3x, **met**)" in line
    # on that reading another candidate is the fastest, and the goal is not met
    assert "the fastest within the limits is distilled-l1-torch, 2.94x (goal **not met** on that reading)" in line
    assert "| 3.43x | 2.86x |" in "\n".join(_table(r, {}))
    # a candidate no part holds (read from elsewhere) has no such reading: the column is left empty
    lone = ModelResults("m", {"budget": 100.0}, {}, [], [original, cut], original, cut)
    assert run_ratio(lone, cut) is None and "| 3.43x |  |" in "\n".join(_table(lone, {}))


def test_a_stored_choice_that_the_frontier_no_longer_makes_is_fitted_again(tiny_bert, env, monkeypatch):
    from layerwise.benchmarks.compress.stored import model_candidates

    data = write_unlabeled(write_stsb(env / "data", n_pairs=24))
    store = ResultsStore(env / "state")
    options = _options(tiny_bert, env)
    ctx = PageContext(store=store, output=env / "out", data_dir=str(data), command=("test",), options=options)
    get_page("compress").run(ctx)
    (summary,) = [p for p in store.parts("compress") if "depth" not in p.key]
    candidates, _, chosen = model_candidates(store.parts("compress"), summary.key, 1.0)
    other = next(c for c in candidates if (c.recipe, c.layers) != (chosen.recipe, chosen.layers))
    store.save(Part("compress", summary.name, summary.key, {**summary.payload, "chosen": other.to_dict(),
                                                            "read": other.to_dict()}, True,
                    summary.runs))  # as if chosen when fewer depths were stored
    real_fit, fits = Compressor.fit, []
    monkeypatch.setattr(Compressor, "fit", lambda self, *a, **kw: fits.append(self.depths) or real_fit(self, *a, **kw))
    get_page("compress").run(ctx)
    (summary,) = [p for p in store.parts("compress") if "depth" not in p.key]
    # fitted again at the shallowest depth part that holds the choice (the original is in every part: its
    # timing's reference), where its fit reads it back without building another depth
    home = min(p.key["depth"] for p in store.parts("compress") if "depth" in p.key and any(
        (c["recipe"], tuple(c["layers"]), c["backend"]) == (chosen.recipe, chosen.layers, chosen.backend)
        for c in p.payload["result"]["candidates"]))
    assert fits == [(home,)] and summary.payload["chosen"]["recipe"] == chosen.recipe
    assert tuple(summary.payload["chosen"]["layers"]) == chosen.layers
    # the same choice with other numbers (as before its candidates were timed again): saved again, with these
    slower = {**chosen.to_dict(), "speed": {**chosen.speed, "seconds": [9.0]}}
    store.save(Part("compress", summary.name, summary.key, {**summary.payload, "read": slower}, True, summary.runs))
    fits.clear()
    get_page("compress").run(ctx)
    (summary,) = [p for p in store.parts("compress") if "depth" not in p.key]
    assert fits == [(home,)] and summary.payload["read"] == chosen.to_dict()
    get_page("compress").run(ctx)  # nothing changed since: nothing fitted
    assert len(fits) == 1
    # the fitted choice's own numbers (the work folder's) may differ from the depth parts' reading of it (the
    # original's ratio of another depth's run, say): an unchanged reading fits nothing again
    store.save(Part("compress", summary.name, summary.key, {**summary.payload, "chosen": slower}, True, summary.runs))
    get_page("compress").run(ctx)
    assert len(fits) == 1


def test_every_depth_option_trains_one_student_for_every_depth_part(tiny_bert, env):
    from layerwise.benchmarks.compress.pages import CompressPageConfig

    assert "every_depth" not in CompressPageConfig(every_depth=False).protocol()  # off: earlier parts keep their key
    data = write_unlabeled(write_stsb(env / "data", n_pairs=24))
    store = ResultsStore(env / "state")
    options = _options(tiny_bert, env, every_depth=True)
    ctx = PageContext(store=store, output=env / "out", data_dir=str(data), command=("test",), options=options)
    get_page("compress").run(ctx)
    depth_parts = sorted((p for p in store.parts("compress") if "depth" in p.key), key=lambda p: p.key["depth"])
    assert [p.key["depth"] for p in depth_parts] == list(range(1, n_layers(tiny_bert) + 1))
    for part in depth_parts:
        assert part.key["protocol"]["every_depth"] is True
        every = [c for c in part.payload["result"]["candidates"] if c["recipe"] == "every-depth"]
        assert [c["depth"] for c in every] == [part.key["depth"]]  # this depth's cut of the one student
    students = [p.name for p in (env / "runs" / tiny_bert.name / "work" / "students").iterdir()
                if p.name.startswith("every-depth")]
    assert len(students) == 1 and students[0].startswith(f"every-depth-l{n_layers(tiny_bert)}")
    md, _ = get_page("compress").render(ctx)
    assert "| every-depth (1) | torch |" in md.read_text() and "every-depth student: yes" in md.read_text()


def test_a_protocol_that_only_adds_candidates_keeps_the_stored_ones(tiny_bert, env, monkeypatch):
    from layerwise.methods.compress import build as build_module

    data = write_unlabeled(write_stsb(env / "data", n_pairs=24))
    store = ResultsStore(env / "state")
    old = PageContext(store=store, output=env / "out", data_dir=str(data), command=("test",),
                      options=_options(tiny_bert, env))
    get_page("compress").run(old)
    measured = []
    real_measure = build_module.Compression._measure
    monkeypatch.setattr(build_module.Compression, "_measure",
                        lambda self, *a: measured.append(a[0]) or real_measure(self, *a))
    new = PageContext(store=store, output=env / "out", data_dir=str(data), command=("test",),
                      options=_options(tiny_bert, env, every_depth=True, folders=str(env / "fresh")))
    get_page("compress").run(new)  # a fresh work folder: what is not new comes from the stored parts
    # but the students' candidates: the fresh folder holds no student, so the distilled ones are trained again and
    # measured on their own student (Compression.adopt)
    assert set(measured) == {"distilled", "every-depth"}
    parts = [p for p in store.parts("compress") if "depth" in p.key and p.key["protocol"].get("every_depth")]
    assert len(parts) == n_layers(tiny_bert) and all("adopted" in p.payload for p in parts)
    assert sum(p.payload["adopted"]["candidates"] for p in parts) > 0  # the full depth may add nothing new
    carried = [c for p in parts for c in p.payload["result"]["candidates"] if c.get("extra", {}).get("carried_over")]
    # each marked as carried over (the original, in every depth part, is counted in the first only); no student's
    assert len(carried) >= sum(p.payload["adopted"]["candidates"] for p in parts)
    assert not any(c["recipe"] in ("distilled", "every-depth") for c in carried)
    md, _ = get_page("compress").render(new)
    assert "carried over" in md.read_text() and "every-depth student: yes" in md.read_text()


def test_a_donor_named_for_redo_is_not_carried_over(tiny_bert, env):
    """A protocol that only adds candidates would keep the stored part's; where ``--redo`` (or ``--stale``) names
    that part, nothing of it is kept: every candidate of the new part is measured in this run."""
    data = write_unlabeled(write_stsb(env / "data", n_pairs=24))
    store = ResultsStore(env / "state")
    old = PageContext(store=store, output=env / "out", data_dir=str(data), command=("test",),
                      options=_options(tiny_bert, env))
    get_page("compress").run(old)
    donors = [p for p in store.parts("compress") if "depth" in p.key]
    redo = ResultsStore(env / "state", redo=tuple(f"{p.name}--{p.digest}" for p in donors))
    assert all(redo.named_for_redo(p.name, p.key) for p in donors)
    assert not redo.named_for_redo(donors[0].name, {**donors[0].key, "depth": -1})  # another key of the name
    new = PageContext(store=redo, output=env / "out", data_dir=str(data), command=("test",),
                      options=_options(tiny_bert, env, every_depth=True, folders=str(env / "fresh")))
    get_page("compress").run(new)
    parts = [p for p in store.parts("compress") if "depth" in p.key and p.key["protocol"].get("every_depth")]
    assert len(parts) == n_layers(tiny_bert) and not any("adopted" in p.payload for p in parts)


def test_the_int8_settings_line_states_each_setting_once_with_the_alphas_kept_under_it():
    from types import SimpleNamespace

    from layerwise.benchmarks.compress.report import _quantization_line
    from layerwise.methods.compress.backends import int8_settings
    from layerwise.methods.compress.frontier import Candidate

    def cand(quantization, backend="openvino-int8"):
        return Candidate.from_dict({"recipe": "cut", "depth": 1, "layers": [1], "backend": backend, "parameters": 1,
                                    "dev": 50.0, "tests": {}, "speed": {},
                                    "extra": {} if quantization is None else {"quantization": quantization}})

    now = int8_settings()
    r = SimpleNamespace(candidates=[cand({**now, "smooth_quant_alpha": a}) for a in (-1.0, 0.95, -1.0)]
                        + [cand(None), cand({"preset": "mixed", "smooth_quant_alpha": 0.95}), cand(None, "openvino")])
    (line, blank) = _quantization_line(r)
    assert blank == "" and line.count("calibration_sentences 300") == 1  # one setting, its alphas counted
    assert "(3 candidates; alpha kept: off for 2, 0.95 for 1)" in line
    assert "not recorded (scored before candidates kept it; SmoothQuant was off then) (1 candidates)" in line
    assert "preset mixed, smooth_quant_alpha 0.95 (1 candidates)" in line  # a fixed alpha, as it was recorded
    assert _quantization_line(SimpleNamespace(candidates=[cand(None, "openvino")])) == []


def test_the_mixed_int8_line_names_what_each_candidate_kept_float32():
    from types import SimpleNamespace

    from layerwise.benchmarks.compress.report import _mixed_line
    from layerwise.methods.compress.frontier import Candidate

    def cand(recipe, depth, kept, products, backend="onnx-int8-mixed"):
        q = {"calibration_sentences": 300, "outlier_ratio": 16.0, "percentile": 99.9, "kept_float32": kept,
             "products": products}
        return Candidate.from_dict({"recipe": recipe, "depth": depth, "layers": [depth], "backend": backend,
                                    "parameters": 1, "dev": 50.0, "tests": {}, "speed": {},
                                    "extra": {"quantization": q}})

    kept = [f"/model/encoder/layer.{i}/output/dense/MatMul" for i in (6, 7)]
    r = SimpleNamespace(candidates=[cand("original", 12, kept, 72), cand("cut", 3, [], 18),
                                    cand("cut", 3, [], 18, backend="onnx-int8")])
    (line, blank) = _mixed_line(r)
    assert blank == "" and "first 300 sentences, has max |x| over 16 times its 99.9th percentile" in line
    assert line.endswith("kept: original-l12: 2 of 72 (layer.6, layer.7); cut-l3: 0 of 18.")
    assert _mixed_line(SimpleNamespace(candidates=r.candidates[2:])) == []


def test_stop_outside_budget_leaves_the_shallower_depths_out_and_the_page_says_why(env, monkeypatch):
    """A 3-layer model whose candidates' dev scores are set per depth at the seam that returns a scored candidate:
    depth 2's best is 10 points below the original, so with the option the page builds depths 3 and 2 only."""
    from dataclasses import replace

    from conftest import build_tiny_bert
    from layerwise.methods.compress import build

    model = build_tiny_bert(env / "deep", num_hidden_layers=3)
    real, scored = build.Compression._scored, []

    def known(self, recipe, layers, backend):
        scored.append((recipe, max(layers)))
        return replace(real(self, recipe, layers, backend), dev={3: 80.0, 2: 70.0, 1: 79.5, 0: 60.0}[max(layers)])

    monkeypatch.setattr(build.Compression, "_scored", known)
    data = write_unlabeled(write_stsb(env / "data", n_pairs=24))
    options = {**_options(model, env), "stop_outside_budget": True}
    ctx = PageContext(store=ResultsStore(env / "state"), output=env / "out", data_dir=str(data), options=options)
    get_page("compress").run(ctx)
    parts = ctx.store.parts("compress")
    assert sorted(p.key["depth"] for p in parts if "depth" in p.key) == [2, 3]
    (stop,) = [p for p in parts if p.key.get("stop_outside_budget")]
    assert stop.payload["depth"] == 2 and stop.payload["best_dev"] == 70.0 and stop.payload["original_dev"] == 80.0
    assert not any(d == 1 for recipe, d in scored if recipe in ("cut", "distilled"))
    text = get_page("compress").render(ctx)[0].read_text()
    assert ("Depths measured: 2, 3; **depths 1 not built**: at depth 2 no candidate of at most 2 layers was within "
            "the budget of 1 on dev") in text and "70.00 against the original's 80.00" in text
    assert f"{model.name}: 80.00 (3), 70.00 (2)" in text  # each depth's best, from the stored candidates
    monkeypatch.setattr(Compressor, "fit", lambda *a, **k: pytest.fail("computed again"))
    monkeypatch.setattr(Compressor, "prepare", lambda *a, **k: pytest.fail("computed again"))
    get_page("compress").run(ctx)  # the stop is read from the stored depths: depth 1 is not built now either
    (again,) = [p for p in ctx.store.parts("compress") if p.key.get("stop_outside_budget")]
    assert again.runs == stop.runs  # the same decision is not stored again
    without = PageContext(store=ResultsStore(env / "state"), output=env / "out2", data_dir=str(data),
                          options={k: v for k, v in options.items() if k != "stop_outside_budget"})
    monkeypatch.setattr(Compressor, "prepare", lambda *a, **k: pytest.fail("stop"))
    with pytest.raises(pytest.fail.Exception, match="stop"):  # without the option the descent goes on to depth 1
        get_page("compress").run(without)


def test_where_and_how_a_run_works_is_passed_on_but_not_in_the_page_key():
    from layerwise.benchmarks.compress.pages import CompressPageConfig, _settings

    checked = CompressPageConfig(graph_test_scores="checked")  # each candidate records it; the page says which
    assert checked.protocol() == CompressPageConfig().protocol() and _settings(checked).graph_test_scores == "checked"
    on_gpu = CompressPageConfig(device="cuda", train_students=(11,))  # where and what runs: not how it is measured
    assert on_gpu.protocol() == CompressPageConfig().protocol() and _settings(on_gpu).device == "cuda"


def test_the_page_says_which_graph_candidates_took_the_torch_test_scores():
    from types import SimpleNamespace

    from layerwise.benchmarks.compress.report import _graph_scores_line
    from layerwise.methods.compress.frontier import Candidate

    def cand(backend, depth, info=None):
        return Candidate(recipe="cut", depth=depth, layers=(depth,), backend=backend, parameters=1, dev=80.0,
                         tests={}, speed={}, extra={"test_scores": info} if info else {})

    info = {"from": "torch", "checked_sentences": 3120, "max_abs_diff": 2.5e-6, "tolerance": 1e-4}
    r = SimpleNamespace(candidates=[cand("torch", 11), cand("onnx", 11, info), cand("openvino", 10, info),
                                    cand("onnx", 12)])
    (line, _) = _graph_scores_line(r)
    assert "2 onnx / openvino candidates at depth(s) 10, 11" in line and "of 3,120 sentences" in line
    assert "within 2.5e-06 (tolerance 0.0001)" in line
    r.candidates.append(cand("openvino", 9, {**info, "checked_sentences": 3000}))
    assert "of 3,000-3,120 sentences" in _graph_scores_line(r)[0]  # a range only where they differ
    assert _graph_scores_line(SimpleNamespace(candidates=[cand("onnx", 12)])) == []  # measured runs: no line


def test_train_students_option_trains_into_the_work_folder_and_stores_nothing(tiny_bert, env, monkeypatch):
    """The GPU machine's share of a page run: the students of the depths asked, nothing scored or stored; the run
    on the timing machine, the work folder copied there, loads them."""

    data = write_unlabeled(write_stsb(env / "data", n_pairs=24))
    options = _options(tiny_bert, env, train_students=[1])
    ctx = PageContext(store=ResultsStore(env / "state"), output=env / "out", data_dir=str(data), options=options)
    get_page("compress").run(ctx)
    assert ctx.store.parts("compress") == []
    work = env / "runs" / tiny_bert.name / "work"
    assert [p.name.rsplit("-", 1)[0] for p in (work / "students").iterdir()] == ["distilled-l1"]
    assert not (work / "candidates").exists()
    monkeypatch.setattr(students_module, "distill_student", lambda *a, **k: pytest.fail("trained again"))
    get_page("compress").run(PageContext(store=ctx.store, output=env / "out", data_dir=str(data),
                                         options=_options(tiny_bert, env)))
    assert sorted(p.key["depth"] for p in ctx.store.parts("compress") if "depth" in p.key) == [1, 2]


def test_train_pairs_option_gives_every_student_the_labelled_pairs_and_enters_the_key(tiny_bert, env, monkeypatch):
    from layerwise.benchmarks.compress.pages import CompressPageConfig

    assert "train_pairs" not in CompressPageConfig().protocol()  # unset: the stored parts keep their key
    data = write_unlabeled(write_stsb(env / "data", n_pairs=24))
    trained = []
    real = students_module.distill_student
    monkeypatch.setattr(students_module, "distill_student",
                        lambda *a, **k: trained.append(k.get("pairs")) or real(*a, **k))
    store = ResultsStore(env / "state")
    ctx = PageContext(store=store, output=env / "out", data_dir=str(data), command=("test",),
                      options=_options(tiny_bert, env, train_pairs="stsb"))
    get_page("compress").run(ctx)
    assert trained and all(p is not None and len(p) == 24 and 0 <= p.targets.min() < p.targets.max() <= 1
                           for p in trained)  # STS-B train, its scores mapped to [0, 1]
    depth_parts = [p for p in store.parts("compress") if "depth" in p.key]
    assert all(p.key["protocol"]["train_pairs"] == "stsb" and "train_pairs" in p.key["data"] for p in depth_parts)
    md, _ = get_page("compress").render(ctx)
    assert "labelled pairs, every student's second loss: stsb train" in md.read_text()


def test_candidates_read_back_from_the_work_folder_count_as_carried_over_from_the_run_that_timed_them():
    """A run that adds a backend finds the earlier run's part (its donor) but adopts none of its candidates when the
    work folder already holds them (``adopted`` 0): they were timed in that run all the same, and the page says so."""
    from layerwise.benchmarks.compress.report import _reference_lines
    from layerwise.benchmarks.compress.stored import by_model

    def cand(recipe, backend, seconds):
        return {"recipe": recipe, "depth": 1, "layers": [1], "backend": backend, "parameters": 1, "dev": 70.0,
                "tests": {"stsb": 70.0}, "speed": {"seconds": [seconds], "original_seconds": [1.0]}}

    def part(backends, started, adopted, *candidates):
        key = {"model": {"name": "m"}, "data": {"stsb": "x"}, "protocol": {"budget": 1.0, "backends": backends},
               "depth": 1}
        payload = {"model": "m", "corpus": {}, "result": {"candidates": [cand("original", "torch", 1.0), *candidates]},
                   **({"adopted": adopted} if adopted is not None else {})}
        return Part("compress", "m-l1", key, payload, runs=[{"started": started}])

    earlier = part(["torch"], "2026-11-26 10:00", None, cand("cut", "torch", 0.5))
    later = part(["torch", "onnx"], "2026-11-27 10:00", {"candidates": 0, "from_run": "2026-11-26 10:00"},
                 cand("cut", "torch", 0.5), cand("cut", "onnx", 0.4))
    [r] = by_model([earlier, later])
    by_name = {c.name: c for c in r.candidates}
    assert r.carried(by_name["cut-l1-torch"]) is earlier and r.carried(by_name["cut-l1-onnx"]) is None
    assert r.carried(r.original) is earlier  # the original of that run too: its timing is that run's
    rows = _reference_lines(r)
    assert any(row.startswith("| 1 | 2026-11-27 |") and "| 2 (2026-11-26) |" in row for row in rows)
    assert any(row.startswith("| 1 (carried over) | 2026-11-26 |") for row in rows)
    # the code column: no commit recorded by these runs, and candidates that record none
    assert any(row.endswith("| ? (3 of 3 candidates measured before candidates recorded their code) |")
               for row in rows)
    retimed = part(["torch", "onnx"], "2026-11-27 10:00", None, cand("cut", "torch", 0.5), cand("cut", "onnx", 0.4))
    [r] = by_model([earlier, retimed])  # no "adopted": every candidate timed in its own run (a retime)
    assert all(r.carried(c) is None for c in r.candidates)


def test_the_runs_table_names_the_code_of_the_run_and_of_the_candidates_it_read_back():
    from layerwise.benchmarks.compress.report import _reference_lines
    from layerwise.benchmarks.compress.stored import by_model

    a, b = {"commit": "a" * 40, "dirty": False}, {"commit": "b" * 40, "dirty": True}

    def cand(recipe, computed):
        return {"recipe": recipe, "depth": 1, "layers": [1], "backend": "torch", "parameters": 1, "dev": 70.0,
                "tests": {"stsb": 70.0}, "speed": {"seconds": [1.0], "original_seconds": [1.0]},
                "extra": {"computed": computed} if computed else {}}

    key = {"model": {"name": "m"}, "data": {"stsb": "x"}, "protocol": {"budget": 1.0, "backends": ["torch"]},
           "depth": 1}
    payload = {"model": "m", "corpus": {}, "computed_at": [b],
               "result": {"candidates": [cand("original", None), cand("cut", {"scored": b, "timed": b})]}}
    part = Part("compress", "m-l1", key, payload, runs=[{"started": "2026-11-28 10:00",
                                                         "environment": {"source": a}}])
    [r] = by_model([part])
    rows = _reference_lines(r)
    assert any(row.startswith("| 1 | 2026-11-28 |") and row.endswith(
        "| aaaaaaa, bbbbbbb+ (1 of 2 candidates measured before candidates recorded their code) |") for row in rows)


def test_the_original_carried_over_is_credited_to_the_run_that_timed_it_whatever_the_depth():
    """Every depth part holds the original (its timing's reference), timed once per work folder: a part whose own
    earlier run timed it otherwise credits the run whose timing it has (another depth's donor)."""
    from layerwise.benchmarks.compress.report import _reference_lines
    from layerwise.benchmarks.compress.stored import by_model

    def cand(recipe, depth, backend, seconds):
        return {"recipe": recipe, "depth": depth, "layers": [depth], "backend": backend, "parameters": 1,
                "dev": 70.0, "tests": {"stsb": 70.0}, "speed": {"seconds": [seconds], "original_seconds": [1.0]}}

    def part(depth, backends, started, adopted, *candidates):
        key = {"model": {"name": "m"}, "data": {"stsb": "x"}, "protocol": {"budget": 1.0, "backends": backends},
               "depth": depth}
        payload = {"model": "m", "corpus": {}, "result": {"candidates": list(candidates)},
                   **({"adopted": adopted} if adopted is not None else {})}
        return Part("compress", f"m-l{depth}", key, payload, runs=[{"started": started}])

    old2 = part(2, ["torch"], "2026-11-26 10:00", None, cand("original", 2, "torch", 1.1))
    old1 = part(1, ["torch"], "2026-11-27 09:00", None, cand("original", 2, "torch", 0.9), cand("cut", 1, "torch", .5))
    adopted = {"candidates": 0, "from_run": "x"}
    new2 = part(2, ["torch", "onnx"], "2026-11-27 12:00", adopted, cand("original", 2, "torch", 0.9),
                cand("original", 2, "onnx", 0.8))
    new1 = part(1, ["torch", "onnx"], "2026-11-27 12:00", adopted, cand("original", 2, "torch", 0.9),
                cand("cut", 1, "torch", .5), cand("cut", 1, "onnx", .4))
    [r] = by_model([old2, old1, new2, new1])
    original = next(c for c in r.candidates if c.name == "original-l2-torch")
    assert r.carried(original) is old1  # not old2, the depth-2 part's own donor: it timed another original
    rows = _reference_lines(r)
    assert any(row.startswith("| 2 | 2026-11-27 |") and "| 1 (2026-11-27) |" in row for row in rows)
    assert any(row.startswith("| 1 | 2026-11-27 |") and "| 2 (2026-11-27) |" in row for row in rows)


def test_the_students_of_earlier_protocols_stand_beside_this_one_and_the_tmft_line_says_who_saw_pairs():
    from layerwise.benchmarks.compress.goals import goal_lines
    from layerwise.benchmarks.compress.stored import by_model, other_protocols
    from layerwise.benchmarks.compress.students_report import protocol_lines

    def cand(recipe, depth, backend, dev, stsb):
        return {"recipe": recipe, "depth": depth, "layers": [depth], "backend": backend, "parameters": 1, "dev": dev,
                "tests": {"stsb": stsb, "sickr": stsb - 2}, "speed": {"seconds": [1.0], "original_seconds": [1.0]}}

    def part(protocol, depth, started, *candidates):
        key = {"model": {"name": "m"}, "data": {"stsb": "x"}, "protocol": protocol, "depth": depth}
        return Part("compress", f"m-l{depth}", key, {"model": "m", "corpus": {}, "result": {"candidates": [
            cand("original", 2, "torch", 80.0, 82.0), *candidates]}}, runs=[{"started": started}])

    old = {"budget": 1.0, "backends": ["torch"], "lr": 0.0001}
    new = {**old, "lr": 0.001, "train_pairs": "stsb"}
    fewer = {**old, "backends": []}  # differs only in an additive field: the same recipe, never a column
    parts = [part(old, 1, "2026-11-26", cand("distilled", 1, "torch", 70.0, 66.0), cand("distilled", 1, "onnx", 1, 1)),
             part(fewer, 1, "2026-11-25", cand("distilled", 1, "torch", 70.0, 66.0)),
             part(new, 1, "2026-11-27", cand("distilled", 1, "torch", 75.0, 71.0)),
             part(new, 2, "2026-11-27", cand("every-depth", 2, "torch", 79.0, 80.0))]
    [r] = by_model(parts)
    assert r.protocol == new
    others = other_protocols(parts, r)
    assert [p for p, _ in others] == [old]
    lines = protocol_lines(r, others)
    assert lines[2] == "| depth | student | this protocol (lr 0.001, train_pairs stsb) | lr 0.0001, train_pairs none |"
    assert "| 1 | distilled | 75.00 / 71.00 / 70.00 | 70.00 / 66.00 / 65.00 |" in lines  # dev / STS-B test / average
    assert "| 2 | every-depth | 79.00 / 80.00 / 79.00 | – |" in lines
    assert not any("| 1 | every-depth |" in line for line in lines)  # neither protocol has one there
    assert protocol_lines(by_model(parts[:2])[0], []) == []  # nothing earlier: no table
    student = next(line for line in goal_lines(r, {1: 60.0, 2: 70.0}) if line.startswith("- distilled"))
    assert student.endswith("higher at 1 of 1 depths (1: 71.00 vs 60.00); both learn from labelled pairs (stsb train: "
                            "the students beside the MSE on the corpus, TMFT from STS-B train alone, for 3 epoch(s))")


def test_the_page_says_where_the_students_trained_from_their_facts():
    from layerwise.benchmarks.compress.stored import ModelResults
    from layerwise.benchmarks.compress.students_report import training_lines
    from layerwise.methods.compress.frontier import Candidate

    def cand(recipe, depth, backend, extra):
        return Candidate.from_dict({"recipe": recipe, "depth": depth, "layers": [depth], "backend": backend,
                                    "parameters": 1, "dev": 1.0, "tests": {}, "extra": extra,
                                    "speed": {"seconds": [1.0], "original_seconds": [1.0]}})

    gpu = {"device": "cuda:0", "seconds": 30.2, "machine": {"gpu": "NVIDIA H100 80GB HBM3"}, "steps": 9,
           "steps_this_run": 9}
    original = cand("original", 3, "torch", {})
    candidates = [original, cand("distilled", 1, "torch", gpu), cand("distilled", 1, "onnx", gpu),
                  cand("every-depth", 2, "torch", {**gpu, "seconds": 42.8}),
                  cand("every-depth", 1, "torch", {**gpu, "seconds": 42.8}),  # the same student, cut: counted once
                  cand("distilled", 2, "torch", {"device": "cpu", "seconds": 400.0}),
                  cand("distilled", 3, "torch", {"steps": 1})]  # stored before the device was recorded: not counted
    r = ModelResults("m", {"budget": 1.0}, {}, [], candidates, original, original)
    assert training_lines(r)[0].startswith("Students trained on cuda:0 (NVIDIA H100 80GB HBM3): 2 student(s), 30-43 s "
                                            "each; cpu: 1 student(s), 400 s (whether resumed not recorded: a "
                                            "resumed student's time is its last process's) (each student's `run.json`)")
    assert training_lines(ModelResults("m", {}, {}, [], [original], original, original)) == []


def test_a_student_below_the_untrained_cut_of_its_depth_is_named_as_failed_with_what_it_recorded():
    from layerwise.benchmarks.compress.stored import ModelResults
    from layerwise.benchmarks.compress.students_report import failed_lines
    from layerwise.methods.compress.frontier import Candidate

    def cand(recipe, depth, dev, backend="torch", extra=None):
        return Candidate.from_dict({"recipe": recipe, "depth": depth, "layers": [depth], "backend": backend,
                                    "parameters": 1, "dev": dev, "tests": {}, "extra": extra or {},
                                    "speed": {"seconds": [1.0], "original_seconds": [1.0]}})

    collapsed = {"mse_distilled": 0.0107, "mse_cut": 0.0203, "mse_sentences": 1000, "final_loss": 0.112}
    original = cand("original", 12, 88.11)
    candidates = [original, cand("cut", 9, 71.34), cand("distilled", 9, 7.50, extra=collapsed),
                  cand("distilled", 9, 7.93, "onnx-int8", collapsed),  # its backends: the torch row names it
                  cand("cut", 6, 60.0), cand("distilled", 6, 80.0, extra=collapsed),  # above its cut: trained
                  cand("every-depth", 5, 40.0)]  # no cut at its depth stored: nothing to tell it by
    r = ModelResults("m", {"lr": 0.001}, {}, [], candidates, original, original)
    lines = failed_lines(r, [({"lr": 0.0001}, [cand("distilled", 9, 86.0)])])
    assert len(lines) == 4 and lines[2].startswith(
        "- **distilled-l9 failed to train**: STS-B dev 7.50, below the untrained cut at its depth (71.34); its "
        "embeddings are nearer the teacher's than the cut's (MSE 0.0107 against 0.0203 on 1000 sentences)")
    assert "last 10 steps 0.112; this protocol's learning rate 0.001." in lines[2]
    assert "(the table above)" in lines[2] and "(the table above)" not in failed_lines(r, [])[2]
    trained = [original, cand("cut", 9, 71.34), cand("distilled", 9, 86.0, extra=collapsed)]
    assert failed_lines(ModelResults("m", {"lr": 0.001}, {}, [], trained, original, original), []) == []


def test_the_page_says_which_training_of_the_every_depth_student_each_depth_cuts():
    from layerwise.benchmarks.compress.stored import ModelResults
    from layerwise.benchmarks.compress.students_report import every_depth_lines, training_lines
    from layerwise.methods.compress.frontier import Candidate

    def cand(recipe, depth, backend, extra):
        return Candidate.from_dict({"recipe": recipe, "depth": depth, "layers": [depth], "backend": backend,
                                    "parameters": 1, "dev": 1.0, "tests": {}, "extra": extra,
                                    "speed": {"seconds": [1.0], "original_seconds": [1.0]}})

    a, b = ({"device": "cpu", "seconds": s, "weights_sha256": h * 64, "steps": 9, "steps_this_run": 9}
            for s, h in ((2561.2, "a"), (2400.0, "b")))
    original = cand("original", 4, "torch", {})
    one = [original, *(cand("every-depth", d, "torch", a) for d in (4, 3, 2)), cand("every-depth", 2, "onnx", b)]
    r = ModelResults("m", {}, {}, [], one, original, original)
    assert every_depth_lines(r) == ["Every-depth student: one training, cut at each depth (depth(s) 4, 3, 2: weights "
                                     "sha256 aaaaaaaaaaaa, trained on cpu, 2561 s).", ""]
    assert "1 student(s)" in training_lines(r)[0]
    # depths 4 and 3 built on one machine, 2 and 1 on another: two models, each named with the depths it gives
    two = [original, *(cand("every-depth", d, "torch", a) for d in (4, 3)),
           *(cand("every-depth", d, "torch", b) for d in (2, 1))]
    r = ModelResults("m", {}, {}, [], two, original, original)
    line = every_depth_lines(r)[0]
    assert line.startswith("Every-depth student: **2 trainings** of the same recipe and seed")
    assert "depth(s) 4, 3: weights sha256 aaaaaaaaaaaa, trained on cpu, 2561 s; depth(s) 2, 1: weights sha256 " \
           "bbbbbbbbbbbb, trained on cpu, 2400 s." in line
    assert "2 student(s), 2400-2561 s each" in training_lines(r)[0]
    old = [original, cand("every-depth", 2, "torch", {"steps": 9}), cand("every-depth", 1, "torch", {"steps": 9})]
    assert every_depth_lines(ModelResults("m", {}, {}, [], old, original, original))[0] == (
        "Every-depth student (depth(s) 2, 1: weights not recorded (trained before candidates recorded them), so which "
        "training they cut is not known).")
    mixed = [original, cand("every-depth", 2, "torch", a), cand("every-depth", 1, "torch", {"steps": 9})]
    assert every_depth_lines(ModelResults("m", {}, {}, [], mixed, original, original))[0] == (
        "Every-depth student (depth(s) 2: weights sha256 aaaaaaaaaaaa, trained on cpu, 2561 s; depth(s) 1: weights not recorded (trained before candidates recorded them), so which training "
        "they cut is not known).")
    assert every_depth_lines(ModelResults("m", {}, {}, [], [original], original, original)) == []


def test_the_tmft_pages_sts_b_figures_leave_out_its_runs_on_other_data_sets(tmp_path):
    from layerwise.benchmarks.compress.goals import tmft_page_scores

    store = ResultsStore(tmp_path)
    for name, over, score in (("a", {}, 70.0), ("b", {"seed": 1}, 72.0), ("c", {"dataset": "sickr"}, 50.0),
                              ("d", {"epochs": 1}, 60.0), ("e", {"pre_step": "ws"}, 61.0)):
        config = {"model": "m", "layers": [3], "pre_step": "none", "epochs": 3, "seed": 0, **over}
        store.save(Part("tmft", f"run-{name}", {"config": config}, {"config": config, "test_spearman": score}))
    assert tmft_page_scores(store, "m") == {3: pytest.approx(71.0)}  # STS-B, 3 epochs, no pre-step: seeds 0 and 1


def test_the_goal_line_names_a_test_set_that_the_average_hides():
    from layerwise.benchmarks.compress.goals import goal_lines
    from layerwise.benchmarks.compress.stored import ModelResults
    from layerwise.methods.compress.frontier import Candidate

    def cand(recipe, depth, tests, seconds):
        return Candidate.from_dict({"recipe": recipe, "depth": depth, "layers": [depth], "backend": "torch",
                                    "parameters": 1, "dev": 80.0, "tests": tests,
                                    "speed": {"seconds": [seconds], "original_seconds": [1.0]}})

    original = cand("original", 6, {"stsb": 82.0, "sickr": 78.0, "sts12": 72.0}, 1.0)
    student = cand("distilled", 4, {"stsb": 81.5, "sickr": 71.5, "sts12": 78.0}, 0.25)  # average 77.0 vs 77.33
    line = goal_lines(ModelResults("x/all-MiniLM-L6-v2", {"budget": 1.0}, {}, [], [original, student], original,
                                   student), {})[1]
    assert "distilled-l4-torch, 4.00x (goal: >= 3x, **met**); but on its own test sets it is more than 1.0 below the " \
           "original on sickr (-6.50): the average holds because it gains on others" in line
    fair = cand("distilled", 4, {"stsb": 81.5, "sickr": 77.5, "sts12": 72.0}, 0.25)
    assert "below the original on" not in goal_lines(ModelResults("m", {"budget": 1.0}, {}, [], [original, fair],
                                                                   original, fair), {})[1]


def test_the_stricter_reading_keeps_every_test_set_within_one_point():
    from layerwise.benchmarks.compress.goals import goal_lines
    from layerwise.benchmarks.compress.stored import ModelResults
    from layerwise.methods.compress.frontier import Candidate

    def cand(recipe, depth, stsb, sickr, seconds):
        return Candidate.from_dict({"recipe": recipe, "depth": depth, "layers": [depth], "backend": "torch",
                                    "parameters": 1, "dev": 80.0, "tests": {"stsb": stsb, "sickr": sickr},
                                    "speed": {"seconds": [seconds], "original_seconds": [1.0]}})

    original = cand("original", 6, 82.0, 78.0, 1.0)
    fast = cand("distilled", 2, 90.0, 70.0, 0.2)  # the average holds, SICK-R does not
    kept = cand("distilled", 4, 81.5, 77.2, 0.5)  # every set within 1.0
    r = ModelResults("x/all-MiniLM-L6-v2", {"budget": 1.0}, {}, [], [original, fast, kept], original, fast)
    lines = goal_lines(r, {})
    assert "distilled-l2-torch, 5.00x (goal: >= 3x, **met**); but on its own test sets it is more than 1.0 below " \
           "the original on sickr (-8.00)" in lines[1]
    assert lines[2] == ("- fastest candidate within 1.0 of the original on every test set (sickr, stsb; a stricter "
                        "reading than the goal's, not the goal): distilled-l4-torch, 2.00x, closest to the limit on "
                        "sickr (-0.80)")
    none = ModelResults("x/all-MiniLM-L6-v2", {"budget": 1.0}, {}, [], [original, fast], original, fast)
    assert "): original-l6-torch, 1.00x, closest to the limit on " in goal_lines(none, {})[2]  # the original itself


def test_tmft_option_trains_the_tmft_pages_run_per_stored_depth_and_scores_it_on_the_pages_tests(tiny_bert, env,
                                                                                                monkeypatch):
    from layerwise.benchmarks.compress import tmft_check
    from layerwise.benchmarks.compress.tmft_check import stored_tmft, tmft_config

    data = write_unlabeled(write_stsb(env / "data", n_pairs=24))
    store = ResultsStore(env / "state")
    ctx = PageContext(store=store, output=env / "out", data_dir=str(data), command=("test",),
                      options=_options(tiny_bert, env, depths=[1], tmft=True))
    get_page("compress").run(ctx)
    here = stored_tmft(store.parts("compress"), str(tiny_bert))
    assert sorted(here) == [1]  # the one depth this protocol stored
    (p,) = here.values()
    assert p["config"] == json.loads(json.dumps(tmft_config(str(tiny_bert), 1).to_dict()))
    assert p["config"]["epochs"] == 3
    # the kept model, scored as the page scores (each distinct sentence once): each pair's cosine against the slow
    # twin (every sentence encoded alone), and the stored score is that cosine's Spearman
    from layerwise.data import load_sts
    from layerwise.evaluation.metrics import cosine_rows, spearman
    from layerwise.methods.truncated.model import TruncatedModel
    from layerwise.methods.truncated.run import run_folder

    model = TruncatedModel.load(run_folder(tmft_config(str(tiny_bert), 1), env / "runs" / tiny_bert.name / "tmft")
                                / "model")
    test = load_sts("stsb", data_dir=str(data))
    fast = tmft_check.pair_cosines(model, test)
    slow = [cosine_rows(model.encode([a]), model.encode([b]))[0] for a, b in zip(test.sentences1, test.sentences2)]
    np.testing.assert_allclose(fast, slow, atol=1e-5)
    assert p["tests"]["stsb"] == pytest.approx(100 * spearman(fast, np.asarray(test.scores)), abs=1e-9)
    assert [q for q in store.parts("compress") if "depth" in q.key and q.key["depth"] == 1]  # the depth part too
    monkeypatch.setattr(tmft_check, "run_tmft", lambda *a, **k: pytest.fail("trained again"))
    get_page("compress").run(ctx)  # stored: nothing trained
    (stored,) = [q for q in store.parts("compress") if "tmft_depth" in q.key]
    store.save(Part("compress", stored.name, stored.key, {**stored.payload, "data": {"stsb": "other files"}}, True,
                    stored.runs))
    with pytest.raises(pytest.fail.Exception, match="trained again"):  # other STS-B files: trained again
        get_page("compress").run(ctx)
    store.save(stored)
    md, _ = get_page("compress").render(ctx)
    text = md.read_text()
    assert "TMFT trained by this page" in text
    assert "distilled against TMFT at the same depth, trained here (the tmft page's settings: seed 0, 3 epoch(s)" in text
    assert "STS average (goal: higher): higher at" in text


def test_the_tmft_goal_line_reads_the_sts_average_of_tmft_trained_here():
    from layerwise.benchmarks.compress.goals import tmft_here_lines
    from layerwise.methods.compress.frontier import Candidate

    def cand(recipe, depth, stsb, sickr, backend="torch"):
        return Candidate.from_dict({"recipe": recipe, "depth": depth, "layers": [depth], "backend": backend,
                                    "parameters": 1, "dev": 80.0, "tests": {"stsb": stsb, "sickr": sickr},
                                    "speed": {"seconds": [1.0], "original_seconds": [1.0]}})

    here = {1: {"tests": {"stsb": 70.0, "sickr": 60.0}, "config": {"epochs": 3}},  # average 65
            2: {"tests": {"stsb": 75.0, "sickr": 75.0}, "config": {"epochs": 3}}}  # average 75
    candidates = [cand("distilled", 1, 72.0, 62.0), cand("distilled", 2, 76.0, 70.0),  # 67 > 65; 73 < 75
                  cand("distilled", 2, 99.0, 99.0, backend="onnx"), cand("cut", 1, 99.0, 99.0)]
    (line,) = tmft_here_lines(candidates, here)
    assert line.startswith("- distilled against TMFT at the same depth, trained here (the tmft page's settings: "
                           "seed 0, 3 epoch(s)")
    assert "higher at 1 of 2 depths (**not met**; 1: 67.00 vs 65.00, 2: 73.00 vs 75.00); STS-B test: higher at 2 of 2" \
        in line
    assert line.endswith("; TMFT trains on STS-B's labelled train pairs, which the students never see (they learn "
                         "the original's embeddings of the unlabeled corpus)")  # not beaten: says why it may be
    assert tmft_here_lines(candidates[:1], here)[0].count("(**met**;") == 1
    assert tmft_here_lines(candidates[:1], here)[0].endswith("higher at 1 of 1")  # beaten, no labels: nothing added
    (both,) = tmft_here_lines(candidates, here, pairs="stsb")
    assert both.endswith("; both learn from labelled pairs (stsb train: the students beside the MSE on the corpus, "
                         "TMFT from STS-B train alone, for 3 epoch(s))")
    assert tmft_here_lines(candidates, {}) == []


def test_a_protocol_run_at_fewer_depths_stands_beside_the_complete_one_not_in_its_place():
    """A recipe read at one depth (a newer run) must not hide the protocol stored at every depth: the page keeps the
    most measured protocol as the model's own and lists the newer one with the earlier protocols."""
    from layerwise.benchmarks.compress.stored import by_model, other_protocols

    def part(protocol, depth, started, dev):
        key = {"model": {"name": "m"}, "data": {"stsb": "x"}, "protocol": protocol, "depth": depth}
        cands = [{"recipe": "original", "depth": 2, "layers": [2], "backend": "torch", "parameters": 1, "dev": 80.0,
                  "tests": {"stsb": 82.0}, "speed": {"seconds": [1.0], "original_seconds": [1.0]}},
                 {"recipe": "distilled", "depth": depth, "layers": [depth], "backend": "torch", "parameters": 1,
                  "dev": dev, "tests": {"stsb": dev}, "speed": {"seconds": [.5], "original_seconds": [1.0]}}]
        return Part("compress", f"m-l{depth}", key, {"model": "m", "corpus": {}, "result": {"candidates": cands}},
                    runs=[{"started": started}])

    full = {"budget": 1.0, "backends": ["torch"]}
    one = {**full, "train_pairs": "stsb"}
    parts = [part(full, 1, "2026-11-26", 70.0), part(full, 2, "2026-11-26", 79.0), part(one, 1, "2026-11-28", 75.0)]
    [r] = by_model(parts)
    assert r.protocol == full and {p.key["depth"] for p in r.parts} == {1, 2}
    assert [p for p, _ in other_protocols(parts, r)] == [one]
    [r] = by_model([*parts, part(one, 2, "2026-11-28", 80.0)])  # as many depths: the newer one is the model's own
    assert r.protocol == one


def test_a_model_is_read_under_the_page_protocol_once_it_has_a_depth_under_it():
    """The page compares its models under one protocol: a model whose earlier runs (other settings) cover more depths
    is read under the settings of the model stored at every depth as soon as one depth of it is stored there, its
    earlier runs beside it; with no depth under the page's protocol, or no model complete, the most depths win."""
    from layerwise.benchmarks.compress.reading import page_results
    from layerwise.benchmarks.compress.stored import other_protocols

    def part(model, protocol, depth, n_layers, started="2026-12-01"):
        key = {"model": {"name": model}, "data": {"stsb": "x"}, "protocol": protocol, "depth": depth}
        cands = [{"recipe": "original", "depth": n_layers, "layers": [n_layers], "backend": "torch", "parameters": 1,
                  "dev": 80.0, "tests": {"stsb": 82.0}, "speed": {"seconds": [1.0], "original_seconds": [1.0]}},
                 {"recipe": "distilled", "depth": depth, "layers": [depth], "backend": "torch", "parameters": 1,
                  "dev": 79.5, "tests": {"stsb": 81.5}, "speed": {"seconds": [.5], "original_seconds": [1.0]}}]
        return Part("compress", f"{model}-l{depth}", key,
                    {"model": model, "corpus": {}, "result": {"candidates": cands, "n_layers": n_layers}},
                    runs=[{"started": started}])

    page = {"budget": 1.0, "backends": ["torch", "onnx"], "every_depth": True, "lr": 0.001}
    old = {"budget": 1.0, "backends": ["torch"], "every_depth": True, "lr": 0.0001}
    small = [part("a", page, 1, 2), part("a", page, 2, 2)]
    big_old = [part("b", old, 2, 3, "2026-11-27"), part("b", old, 3, 3, "2026-11-27")]
    # the same settings but an additive one (no every-depth student): the page's protocol all the same
    big_new = part("b", {**page, "every_depth": False}, 1, 3, "2026-12-07")
    a, b = page_results([*small, *big_old])  # nothing of b under the page's protocol: its most depths
    assert a.protocol == page and b.protocol == old
    parts = [*small, *big_old, big_new]
    a, b = page_results(parts)
    assert a.protocol == page and b.protocol == {**page, "every_depth": False} and b.parts == [big_new]
    assert [p for p, _ in other_protocols(parts, b)] == [old]  # the earlier runs stand beside it
    # no model stored at every depth: no page protocol, each model's most depths
    a, b = page_results([small[0], *big_old, big_new])
    assert b.protocol == old


def test_a_model_whose_student_fails_at_the_page_learning_rate_is_read_at_one_where_none_fails():
    """The one setting a model may keep its own value of: where a student falls below the untrained cut of its depth
    on dev under the page's protocol, and a run of the page's protocol at another learning rate trained every student,
    the model is read there and its section says why; where that run failed too, or none exists, the page's."""
    from layerwise.benchmarks.compress.reading import beside, own_setting_lines, page_protocol, page_results
    from layerwise.benchmarks.compress.stored import other_protocols

    def part(model, protocol, depth, n_layers, student_dev, started="2026-12-01"):
        key = {"model": {"name": model}, "data": {"stsb": "x"}, "protocol": protocol, "depth": depth}
        cands = [{"recipe": recipe, "depth": d, "layers": [d], "backend": "torch", "parameters": 1, "dev": dev,
                  "tests": {"stsb": dev}, "speed": {"seconds": [d / n_layers], "original_seconds": [1.0]}}
                 for recipe, d, dev in (("original", n_layers, 88.0), ("cut", depth, 70.0),
                                        ("distilled", depth, student_dev))]
        return Part("compress", f"{model}-l{depth}", key,
                    {"model": model, "corpus": {}, "result": {"candidates": cands, "n_layers": n_layers}},
                    runs=[{"started": started}])

    page = {"budget": 1.0, "backends": ["torch"], "lr": 0.001}
    low = {**page, "lr": 0.0001}
    other = {**low, "epochs": 2}  # differs in more than the learning rate: never the page's
    complete = [part("a", page, 1, 2, 80.0), part("a", page, 2, 2, 85.0)]
    failed = part("b", page, 9, 12, 7.5, "2026-12-06")
    trained = part("b", low, 9, 12, 86.0, "2026-12-07")
    a, b = page_results([*complete, failed, trained])
    assert a.protocol == page and b.protocol == low and b.parts == [trained]
    parts = [*complete, failed, trained]
    lines = own_setting_lines(b, page_protocol(parts), other_protocols(parts, b))
    assert lines[0].startswith("**Learning rate 0.0001, not the page's 0.001**: under the page's protocol this "
                               "model's students failed to train (distilled-l9 STS-B dev 7.50 against the untrained "
                               "cut's 70.00;")
    assert own_setting_lines(a, page_protocol(parts), other_protocols(parts, a)) == []
    # failed at the other rate too, or only a run that differs in more than the rate: the page's protocol
    assert page_results([*complete, failed, part("b", low, 9, 12, 50.0)])[1].parts == [failed]
    assert page_results([*complete, failed, part("b", other, 9, 12, 86.0)])[1].parts == [failed]
    # trained at the page's rate: the page's, whatever another rate gives
    ok = part("b", page, 9, 12, 80.0)
    assert page_results([*complete, ok, trained])[1].parts == [ok]
    # no depth under the page's protocol: the most depths, as before (no failure to read the rate by), and no line
    assert page_results([*complete, trained])[1].parts == [trained]
    alone = [*complete, trained]
    assert own_setting_lines(page_results(alone)[1], page_protocol(alone), other_protocols(alone, b)) == []
    # an earlier run at that rate with fewer backends, at another depth: not read in the page's run's place (its
    # candidates on the other backends would be lost), but beside the one read, not lost either
    fewer = part("b", {**low, "backends": []}, 11, 12, 89.0, "2026-11-28")
    assert page_results([*complete, failed, fewer])[1].parts == [failed]
    parts = [*complete, failed, trained, fewer]
    b = page_results(parts)[1]
    assert b.parts == [trained]
    assert [(p, [c.depth for c in cands if c.recipe == "distilled"]) for p, cands in beside(parts, b)] == [
        ({**low, "backends": []}, [11]), (page, [9])]


def test_students_that_learnt_from_pairs_under_another_protocol_are_read_against_tmft_too():
    """The like-for-like reading: where the model's main protocol trains its students on the corpus' MSE alone, the
    students of a stored protocol with ``train_pairs`` meet TMFT on the goal's STS average in a line of their own."""
    from layerwise.benchmarks.compress.goals import goal_lines
    from layerwise.benchmarks.compress.stored import by_model, other_protocols

    def part(protocol, depth, dev):
        key = {"model": {"name": "m"}, "data": {"stsb": "x"}, "protocol": protocol, "depth": depth}
        cands = [{"recipe": "original", "depth": 2, "layers": [2], "backend": "torch", "parameters": 1, "dev": 80.0,
                  "tests": {"stsb": 82.0, "sickr": 78.0}, "speed": {"seconds": [1.0], "original_seconds": [1.0]}},
                 {"recipe": "distilled", "depth": depth, "layers": [depth], "backend": "torch", "parameters": 1,
                  "dev": dev, "tests": {"stsb": dev, "sickr": dev - 4}, "extra": {"steps": 100},
                  "speed": {"seconds": [.5], "original_seconds": [1.0]}}]
        return Part("compress", f"m-l{depth}", key, {"model": "m", "corpus": {}, "result": {"candidates": cands}},
                    runs=[{"started": "2026-11-28"}])

    mse = {"budget": 1.0, "backends": ["torch"], "batch_size": 64}
    pairs = {**mse, "train_pairs": "stsb"}
    parts = [part(mse, 1, 70.0), part(mse, 2, 79.0), part(pairs, 1, 76.0)]
    [r] = by_model(parts)
    here = {1: {"tests": {"stsb": 74.0, "sickr": 70.0}, "config": {"epochs": 1, "batch_size": 32}, "steps": 50}}
    lines = goal_lines(r, {}, here, other_protocols(parts, r))
    main = [line for line in lines if line.startswith("- distilled against TMFT")]
    other = [line for line in lines if line.startswith("- distilled under the protocol with train_pairs stsb")]
    assert len(main) == 1 and "(**not met**; 1: 68.00 vs 72.00)" in main[0] and "never see" in main[0]
    assert len(other) == 1 and "(**met**; 1: 74.00 vs 72.00)" in other[0] and "both learn from labelled pairs" in other[0]
    # what each side drew of the pairs, from the records: 100 steps x 64 against TMFT's 50 steps x 32
    assert other[0].endswith("labelled pairs drawn in training: the students 6,400 (a batch of 64 at each step), "
                             "TMFT 1,600")
    assert "drawn" not in main[0]  # the main protocol's students drew none
    assert not any("under the protocol" in line for line in goal_lines(r, {}, here))  # no others given: none


def test_the_students_training_time_says_when_it_is_a_resumed_runs_last_process():
    from layerwise.benchmarks.compress.students_report import _trained

    def facts(seconds, steps_this_run=None):
        return {"seconds": seconds, "steps": 10, **({} if steps_this_run is None else {"steps_this_run": steps_this_run})}

    assert _trained({"cpu": [facts(900.0, 10), facts(1000.0, 10)]}) == "cpu: 2 student(s), 900-1000 s each"
    assert _trained({"cpu": [facts(300.0, 4)]}) == ("cpu: 1 student(s), 300 s (one resumed: 300 s are its last 4 of "
                                                    "10 steps)")
    assert _trained({"cuda:0": [facts(30.0)]}) == ("cuda:0: 1 student(s), 30 s (whether resumed not recorded: a "
                                                   "resumed student's time is its last process's)")


def test_depths_timed_on_different_cpus_are_named_and_chosen_among_per_cpu():
    """Two depth parts built in two sessions, on one platform string but two CPU generations (the int8
    instructions differ): the runs table tells the CPUs apart, and the page gives the rule's choice among each
    CPU's depths alone beside the choice across them (ratios do not compare across CPUs)."""
    from layerwise.benchmarks.compress.goals import goal_lines, timing_cpus
    from layerwise.benchmarks.compress.report import _reference_lines
    from layerwise.benchmarks.compress.stored import by_model

    def cand(recipe, depth, backend, dev, seconds):
        return {"recipe": recipe, "depth": depth, "layers": [depth], "backend": backend, "parameters": 1,
                "dev": dev, "tests": {"stsb": dev}, "speed": {"seconds": [seconds], "original_seconds": [1.0]}}

    def part(depth, isa, original_int8, student_seconds):
        key = {"model": {"name": "m"}, "data": {"stsb": "x"},
               "protocol": {"budget": 1.0, "backends": ["torch", "onnx-int8"]}, "depth": depth}
        machine = {"platform": "Linux-vm", "cpu_model": "AMD EPYC", "int8_isa": isa}
        payload = {"model": "m", "corpus": {}, "result": {"candidates": [
            cand("original", 2, "torch", 80.0, 1.0), cand("original", 2, "onnx-int8", 80.0, original_int8),
            cand("distilled", depth, "onnx-int8", 79.5, student_seconds)]}}
        return Part("compress", f"m-l{depth}", key, payload,
                    runs=[{"started": f"2026-12-0{depth} 10:00", "environment": {"machine": machine}}])

    older = part(2, ["avx2", "avx512_vnni"], 1 / 2.7, 1 / 3.3)
    newer = part(1, ["avx2", "avx512_vnni", "avx_vnni"], 1 / 3.5, 1 / 6.0)
    [r] = by_model([older, newer])
    assert [[p.key["depth"] for p in parts] for parts in timing_cpus(r).values()] == [[2], [1]]
    lines = goal_lines(r, {})
    assert lines[0].startswith("- **timed on 2 different CPUs**")
    assert ("depth(s) 2 on Linux-vm (AMD EPYC), int8 avx2 avx512_vnni: distilled-l2-onnx-int8, 3.30x" in lines[0]
            and "depth(s) 1 on Linux-vm (AMD EPYC), int8 avx2 avx512_vnni avx_vnni: distilled-l1-onnx-int8, 6.00x"
            in lines[0])
    assert lines[1].startswith("- chosen on dev (budget 1): **distilled-l1-onnx-int8**")  # across CPUs, as before
    rows = [row for row in _reference_lines(r) if row.startswith(("| 1 |", "| 2 |"))]
    assert len(rows) == 2 and "avx_vnni" in rows[0] and "avx_vnni" not in rows[1]
    [one] = by_model([older])
    assert not goal_lines(one, {})[0].startswith("- **timed on")  # one CPU: no such line
