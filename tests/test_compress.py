"""Compressor (``layerwise compress``) on tiny random BERT and MPNet: the estimator contract, the candidates and
their scores against slow twins, distillation, the choice, save/load through sentence-transformers, resume after an
interrupted fit, and each refusal before any work."""

from __future__ import annotations

import importlib.util
import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from conftest import SENTENCES, word_tokenizer
from estimator_checks import check_estimator
from layerwise import Compressor, CompressSettings, LayerEncoder
from layerwise.errors import UsageError
from layerwise.evaluation.metrics import cosine_rows, spearman
from layerwise.export.kinds import export_trained, source_kind
from layerwise.methods.compress import build as build_module
from layerwise.methods.compress import distill as distill_module
from layerwise.methods.compress import specs as specs_module
from layerwise.methods.compress import students as students_module
from layerwise.methods.compress.frontier import Candidate, choose, outside_budget, pareto_front
from layerwise.reports import write_json

CORPUS = [f"{a[:-2]} and {b[:-2]} ." for a in SENTENCES for b in SENTENCES][:80]
FAST = CompressSettings(epochs=2, batch_size=8, lr=1e-3, max_length=16, speed_sentences=16, speed_batch_size=16,
                        speed_repeats=1)


def _dev(n: int = 20, seed: int = 0, step: int = 5):
    rnd = np.random.default_rng(seed)
    return ([SENTENCES[i % 12] for i in range(n)], [SENTENCES[(step * i + 1) % 12] for i in range(n)],
            np.round(rnd.uniform(0, 5, n), 2))


@pytest.fixture(scope="module")
def teacher(tmp_path_factory) -> Path:
    """A tiny random BERT (3 layers) whose layers change the vectors a lot (weights drawn with std 0.3), so that a
    cut is far from the full model and distillation has something to learn."""
    import torch
    from transformers import BertConfig, BertModel

    folder = tmp_path_factory.mktemp("models") / "teacher"
    folder.mkdir()
    tok = word_tokenizer()
    tok.save_pretrained(folder)
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                         intermediate_size=37, max_position_embeddings=64, initializer_range=0.3)
              ).eval().save_pretrained(folder)
    return folder


def _comp(model, **kw) -> Compressor:
    return Compressor(str(model), **{"settings": FAST, "show_progress": False, **kw})


@pytest.fixture(scope="module")
def fitted(teacher, tmp_path_factory):
    """One fit on the teacher at depths 1 and 2, kept on disk, with a test set (its own $LAYERWISE_HOME)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LAYERWISE_HOME", str(tmp_path_factory.mktemp("home")))
        work = tmp_path_factory.mktemp("work")
        s1, s2, y = _dev()
        t1, t2, ty = _dev(16, seed=1, step=7)
        est = _comp(teacher, depths=(1, 2), budget=100.0, output_dir=str(work))
        yield est.fit(CORPUS, (s1, s2, y), tests={"t": (t1, t2, ty)}), work


def test_check_estimator(tiny_bert, env):
    s1, s2, y = _dev()
    est = check_estimator(lambda: _comp(tiny_bert, depths=(1,)), lambda e: e.fit(CORPUS, (s1, s2, y)))
    recipes = {c.recipe for c in est.candidates_}
    assert {"original", "cut", "distilled"} <= recipes
    assert est.chosen_.dev >= est.original_.dev - est.budget


def test_candidates_per_depth_and_the_front(fitted):
    est, _ = fitted
    names = [c.name for c in est.candidates_]
    assert len(names) == len(set(names))
    for depth in (1, 2):
        assert f"cut-l{depth}-torch" in names and f"distilled-l{depth}-torch" in names
    assert "original-l3-torch" in names and "cut-l3-torch" not in names and "distilled-l3-torch" not in names
    lc = [c for c in est.candidates_ if c.recipe == "lc-cut"]
    assert all(c.layers not in [(1,), (2,), (3,)] and max(c.layers) <= 2 for c in lc)
    for c in est.candidates_:
        assert set(c.tests) == {"t"} and c.ratio > 0 and len(c.speed["seconds"]) == 1
    for c in est.frontier_:  # nothing beats a front member on both axes
        assert not any(o.dev >= c.dev and o.ratio >= c.ratio and (o.dev > c.dev or o.ratio > c.ratio)
                       for o in est.candidates_)
    assert est.chosen_.ratio == max(c.ratio for c in est.candidates_)  # budget 100: the fastest of all


def test_cut_scores_from_the_layer_stacks_equal_their_models(fitted, teacher):
    """Slow twin: a cut's (and the LC cut's) scores come from the layer stacks; its truncated model gives them."""
    est, _ = fitted
    s1, s2, y = _dev()
    run = est._run
    stack = LayerEncoder(str(teacher), max_length=16, cache_dir=False, show_progress=False).encode(s1 + s2).mean
    for c in est.candidates_:
        if c.recipe == "distilled":
            continue
        model = run.model(c.recipe, c.layers)
        a, b = model.encode(s1), model.encode(s2)
        np.testing.assert_allclose(a, stack[:20, list(c.layers)].mean(1), atol=1e-5)
        assert abs(100 * spearman(cosine_rows(a, b), y) - c.dev) < 1e-6
        assert int(model.encoder.config.num_hidden_layers) == c.depth  # really cut


def test_lc_cut_is_the_best_subset_within_each_depth(fitted):
    """The LC cut at depth l is the best of every subset of 0..l, scored the slow way."""
    from itertools import combinations

    from layerwise.methods.lc.search import naive_subset_scores

    est, _ = fitted
    s1, s2, y = _dev()
    run = est._run
    a, b = run._stacks["dev"]
    naive = naive_subset_scores(a, b, y)
    for depth in (1, 2):
        best = max((s for k in range(1, depth + 2) for s in combinations(range(depth + 1), k)), key=naive.get)
        got, score = specs_module.best_within(run._search, depth)
        assert abs(score - naive[best]) < 1e-6 and abs(naive[got] - naive[best]) < 1e-6


def test_distillation_reduces_the_mse_to_the_teacher(fitted):
    est, _ = fitted
    for c in est.candidates_:
        if c.recipe == "distilled":
            assert c.extra["mse_distilled"] < 0.8 * c.extra["mse_cut"], c.extra
            assert c.extra["steps"] == 2 * (len(CORPUS) // FAST.batch_size)


def test_the_saved_folder_loads_in_sentence_transformers_with_the_same_embeddings(fitted, tmp_path):
    from sentence_transformers import SentenceTransformer

    est, _ = fitted
    folder = est.save(tmp_path / "model")
    st = SentenceTransformer(str(folder), device="cpu", trust_remote_code=False)
    vectors = est.encode(SENTENCES)
    assert np.abs(st.encode(SENTENCES) - vectors).max() < 1e-5
    config = json.loads((folder / "config.json").read_text())
    assert config["num_hidden_layers"] == est.chosen_.depth == est.n_layers_  # the saved encoder is cut
    info = json.loads((folder / "layerwise_export.json").read_text())
    assert info["method"] == "compress" and info["compress"]["chosen"] == est.chosen_.to_dict()
    assert "## Frontier" in (folder / "README.md").read_text()
    loaded = Compressor.load(folder)
    assert np.abs(loaded.encode(SENTENCES) - vectors).max() < 1e-5
    assert [c.name for c in loaded.candidates_] == [c.name for c in est.candidates_]
    again = export_trained(folder, tmp_path / "again")  # `layerwise export` knows the kind
    assert source_kind(folder) == "compress" and json.loads((again / "layerwise_export.json").read_text())[
        "compress"] == info["compress"]
    assert np.abs(SentenceTransformer(str(again), device="cpu").encode(SENTENCES) - vectors).max() < 1e-5


@pytest.mark.parametrize("recipe", ["lc-cut", "distilled"])
def test_each_recipe_saves_as_sentence_transformers(fitted, tmp_path, recipe):
    from sentence_transformers import SentenceTransformer

    from layerwise.methods.compress.export import write_compressed

    est, _ = fitted
    pick = next(c for c in est.candidates_ if c.recipe == recipe and c.backend == "torch")
    model = est._run.model(pick.recipe, pick.layers)
    report = {**est.report(), "chosen": pick.to_dict()}
    folder = write_compressed(model, tmp_path / recipe, source=est.source_, report=report)
    st = SentenceTransformer(str(folder), device="cpu", trust_remote_code=False)
    assert np.abs(st.encode(SENTENCES) - model.encode(SENTENCES)).max() < 1e-5


def test_a_rerun_recomputes_nothing(fitted, teacher, monkeypatch):
    est, work = fitted
    monkeypatch.setattr(build_module.Compression, "_measure", lambda *a: pytest.fail("measured again"))
    s1, s2, y = _dev()
    t1, t2, ty = _dev(16, seed=1, step=7)
    again = _comp(teacher, depths=(1, 2), budget=100.0, output_dir=str(work)).fit(CORPUS, (s1, s2, y),
                                                                                    tests={"t": (t1, t2, ty)})
    assert [c.to_dict() for c in again.candidates_] == [c.to_dict() for c in est.candidates_]


def test_resume_after_a_kill_in_training_gives_the_straight_run(teacher, env, monkeypatch):
    s1, s2, y = _dev()
    straight = _comp(teacher, depths=(1,), output_dir=str(env / "straight")).fit(CORPUS, (s1, s2, y))
    real_train = distill_module.train

    def killed(task, config, **kw):
        real_train(task, config, **{**kw, "max_steps_this_run": 3})
        raise KeyboardInterrupt

    monkeypatch.setattr(distill_module, "train", killed)
    with pytest.raises(KeyboardInterrupt):
        _comp(teacher, depths=(1,), output_dir=str(env / "killed")).fit(CORPUS, (s1, s2, y))
    done = sorted(p.name for p in (env / "killed" / "candidates").iterdir())
    assert any(n.startswith("cut-l1") for n in done) and not any(n.startswith("distilled") for n in done)
    monkeypatch.setattr(distill_module, "train", real_train)
    measured = []
    real_measure = build_module.Compression._measure
    monkeypatch.setattr(build_module.Compression, "_measure",
                        lambda self, *a: measured.append(a[0]) or real_measure(self, *a))
    resumed = _comp(teacher, depths=(1,), output_dir=str(env / "killed")).fit(CORPUS, (s1, s2, y))
    assert measured == ["distilled"]  # the finished candidates were read back
    (student,) = (env / "killed" / "students").iterdir()
    assert (student / "run.json").is_file() and not (student / "train").exists()  # done: checkpoints removed
    a = next(c for c in straight.candidates_ if c.recipe == "distilled")
    b = next(c for c in resumed.candidates_ if c.recipe == "distilled")
    assert abs(a.dev - b.dev) < 1e-6 and a.extra["mse_distilled"] == pytest.approx(b.extra["mse_distilled"], 1e-6)
    # the time recorded is the last process's: the facts say over how many of the steps
    assert a.extra["steps_this_run"] == a.extra["steps"] == b.extra["steps"] > b.extra["steps_this_run"] > 0


def test_without_torch_backend_the_original_is_still_the_reference(tiny_bert, env):
    pytest.importorskip("onnxruntime")
    est = _comp(tiny_bert, depths=(1,), backends=("onnx",), budget=0.0).fit(CORPUS, _dev())
    assert est.original_.name == "original-l2-torch" and est.original_ in est.candidates_
    assert {c.backend for c in est.candidates_ if c.recipe != "original"} == {"onnx"}


def test_mpnet(tiny_mpnet, env, tmp_path):
    from sentence_transformers import SentenceTransformer

    s1, s2, y = _dev()
    est = _comp(tiny_mpnet, depths=(2,), budget=100.0).fit(CORPUS, (s1, s2, y))
    assert {c.recipe for c in est.candidates_} >= {"original", "cut", "distilled"}
    folder = est.save(tmp_path / "mpnet")
    st = SentenceTransformer(str(folder), device="cpu", trust_remote_code=False)
    assert np.abs(st.encode(SENTENCES) - est.encode(SENTENCES)).max() < 1e-5


def test_onnx_backends_give_the_torch_embeddings(teacher, env, tmp_path):
    pytest.importorskip("onnxruntime")
    from layerwise.encoders.onnx_backend import LayerGraphSession

    s1, s2, y = _dev()
    openvino = ("openvino",) if importlib.util.find_spec("openvino") else ()
    openvino += ("openvino-int8",) if openvino and importlib.util.find_spec("nncf") else ()
    backends = ("torch", "onnx", "onnx-int8", "onnx-int8-mixed", *openvino)
    est = _comp(teacher, depths=(1,), backends=backends, budget=100.0).fit(CORPUS, (s1, s2, y))
    by = {c.name: c for c in est.candidates_}
    assert {c.backend for c in est.candidates_} == set(backends)
    est.chosen_ = next(c for c in est.candidates_ if c.backend == "onnx-int8" and c.recipe == "distilled")
    est.model_ = est._run.model(est.chosen_.recipe, est.chosen_.layers)
    est.graph_ = est._run.graph(est.chosen_.recipe, est.chosen_.layers, est.chosen_.backend)
    vectors = est.encode(SENTENCES)  # through onnxruntime, int8
    assert 0 < np.abs(vectors - est.model_.encode(SENTENCES)).max() < 1.0
    folder = est.save(tmp_path / "int8")  # the graph travels in onnx/; the card says how to run it
    stack = LayerGraphSession(folder / "onnx", quantized=True).encode(est.model_.tokenizer, SENTENCES, max_length=16)
    np.testing.assert_allclose(stack.mean[:, list(est.chosen_.layers)].mean(1), vectors, atol=1e-6)
    np.testing.assert_allclose(Compressor.load(folder).encode(SENTENCES), vectors, atol=1e-6)
    assert "onnx/model-int8.onnx" in json.loads((folder / "layerwise_export.json").read_text())["files"]
    for name, c in by.items():
        if c.backend in ("onnx", "openvino"):
            twin = by[name.replace(f"-{c.backend}", "-torch")]
            assert c.extra["max_abs_diff_vs_torch"] < 1e-4 and abs(c.dev - twin.dev) < 1e-3
        if c.backend.endswith("-int8"):  # quantized: close, not equal (the page states the tolerance)
            assert 0 < c.extra["max_abs_diff_vs_torch"] < 1.0
        if c.backend == "onnx-int8-mixed":  # what it kept float32 is recorded, among the encoder's products
            q = c.extra["quantization"]  # BERT: q, k, v, the attention's output and the FFN's two, per layer
            assert q["outlier_ratio"] == 16.0 and q["products"] == 6 * c.depth >= len(q["kept_float32"])
            assert c.extra["max_abs_diff_vs_torch"] < 1.0
    est.chosen_ = next(c for c in est.candidates_ if c.backend == "onnx-int8-mixed" and c.recipe == "distilled")
    est.graph_ = est._run.graph(est.chosen_.recipe, est.chosen_.layers, est.chosen_.backend)
    vectors = est.encode(SENTENCES)
    folder = est.save(tmp_path / "int8-mixed")  # the mixed model travels in onnx/onnx-int8-mixed and loads back
    assert "onnx/onnx-int8-mixed/model.onnx" in json.loads((folder / "layerwise_export.json").read_text())["files"]
    assert 'LayerGraphSession.from_file(Path("onnx/onnx-int8-mixed/model.onnx"))' in (folder / "README.md").read_text()
    np.testing.assert_allclose(Compressor.load(folder).encode(SENTENCES), vectors, atol=1e-6)
    if "openvino-int8" in openvino:  # OpenVINO's int8 model travels in onnx/openvino-int8 and loads back
        est.chosen_ = next(c for c in est.candidates_ if c.backend == "openvino-int8" and c.recipe == "distilled")
        est.graph_ = est._run.graph(est.chosen_.recipe, est.chosen_.layers, est.chosen_.backend)
        vectors = est.encode(SENTENCES)
        folder = est.save(tmp_path / "ov-int8")
        assert "onnx/openvino-int8/model.xml" in json.loads((folder / "layerwise_export.json").read_text())["files"]
        assert 'runtime="openvino"' in (folder / "README.md").read_text()
        np.testing.assert_allclose(Compressor.load(folder).encode(SENTENCES), vectors, atol=1e-6)


def _candidate(name: str, dev: float, seconds: float) -> Candidate:
    recipe, depth, backend = name.split(":")
    return Candidate(recipe=recipe, depth=int(depth), layers=(int(depth),), backend=backend, parameters=1, dev=dev,
                     tests={}, speed={"seconds": [seconds], "original_seconds": [1.0]})


def test_the_frontier_plot_numbers_the_front_and_names_it_beside_the_plot(tmp_path, monkeypatch):
    from layerwise.methods.compress import frontier as frontier_module

    cands = [_candidate("original:6:torch", 80.0, 1.0), _candidate("cut:3:onnx-int8", 70.0, 0.5),
             _candidate("distilled:3:openvino-int8", 79.5, 0.4), _candidate("cut:2:torch", 60.0, 0.6),
             _candidate("lc-cut:2:some-backend", 65.0, 0.3)]  # a backend without a marker of its own: drawn as X
    figures = []
    real_save = frontier_module.save_figure
    monkeypatch.setattr(frontier_module, "save_figure", lambda fig, path, **kw: figures.append(fig) or real_save(fig, path, **kw))
    path = frontier_module.plot_frontier(cands, tmp_path / "f.png", title="m", chosen=cands[2])
    assert path.read_bytes()[:4] == b"\x89PNG"
    ax = figures[0].axes[0]
    front = sorted(pareto_front(cands), key=lambda c: c.ratio)
    assert [t.get_text() for t in ax.texts] == [str(i) for i in range(1, len(front) + 1)]  # numbers only in the plot
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[-len(front):] == [f"{i} {c.name}" for i, c in enumerate(front, 1)]
    assert {"original", "cut", "distilled", "torch", "onnx-int8", "openvino-int8", "chosen"} <= set(legend)
    assert "onnx" not in legend  # only the backends drawn


def test_choice_and_front_on_known_numbers():
    cands = [_candidate("original:6:torch", 80.0, 1.0), _candidate("cut:3:torch", 70.0, 0.5),
             _candidate("distilled:3:torch", 79.5, 0.5), _candidate("distilled:2:torch", 78.0, 0.25),
             _candidate("cut:2:torch", 60.0, 0.4)]
    assert choose(cands, 80.0, 0.0).name == "original-l6-torch"
    assert choose(cands, 80.0, 1.0).name == "distilled-l3-torch"
    assert choose(cands, 80.0, 2.0).name == "distilled-l2-torch"
    assert [c.name for c in pareto_front(cands)] == ["distilled-l2-torch", "distilled-l3-torch", "original-l6-torch"]


def test_outside_budget_on_known_numbers():
    cands = [_candidate("original:6:torch", 80.0, 1.0), _candidate("cut:3:torch", 70.0, 0.5),
             _candidate("distilled:3:torch", 78.5, 0.5), _candidate("distilled:2:torch", 77.0, 0.25)]
    assert not outside_budget(cands, 80.0, 1.0, 6)  # the original is within any budget at its own depth
    assert outside_budget(cands, 80.0, 1.0, 3)  # 78.5 is the best of at most 3 layers
    assert not outside_budget(cands, 80.0, 1.5, 3)
    assert outside_budget(cands, 80.0, 2.5, 2) and not outside_budget(cands, 80.0, 2.5, 3)
    shallow = [*cands, _candidate("lc-cut:1:torch", 79.5, 0.2)]  # within budget: it counts at every depth above
    assert not outside_budget(shallow, 80.0, 1.0, 3) and not outside_budget(shallow, 80.0, 1.0, 1)


#: dev Spearman by candidate depth in the descent tests: the full depth 80, depth 2 at most 70, depth 1 and the LC
#: cuts of hidden state 0 alone in between
DESCENT_DEV = {3: 80.0, 2: 70.0, 1: 79.5, 0: 60.0}


def test_stop_outside_budget_builds_deepest_first_and_leaves_the_shallower_depths_out(teacher, env, monkeypatch):
    """The descent on known dev scores: each candidate's real dev score replaced by its depth's score above, at the
    one seam that returns a scored candidate (``_scored``); the rest of the run is real."""
    real, scored = build_module.Compression._scored, []

    def known(self, recipe, layers, backend):
        scored.append((recipe, max(layers)))
        return replace(real(self, recipe, layers, backend), dev=DESCENT_DEV[max(layers)])

    monkeypatch.setattr(build_module.Compression, "_scored", known)
    dev = _dev()
    stopped = _comp(teacher, budget=5.0, stop_outside_budget=True, output_dir=str(env / "a")).fit(CORPUS, dev)
    assert stopped.unbuilt_depths_ == [1]  # depth 2's best (70) is 10 below the original: depth 1 not built
    assert [d for recipe, d in scored if recipe in ("cut", "distilled")] == [2, 2]  # depth 2; nothing of depth 1
    assert not any(p.name.startswith("distilled-l1") for p in (env / "a" / "students").iterdir())
    assert {c.depth for c in stopped.candidates_} <= {0, 2, 3} and stopped.chosen_.name == "original-l3-torch"
    assert stopped.report()["unbuilt_depths"] == [1]
    scored.clear()
    wider = _comp(teacher, budget=10.0, stop_outside_budget=True, output_dir=str(env / "a")).fit(CORPUS, dev)
    assert wider.unbuilt_depths_ == []  # 70 is within 10: the descent goes on, deepest first
    assert [d for recipe, d in scored if recipe in ("cut", "distilled")] == [2, 2, 1, 1]
    everything = _comp(teacher, budget=10.0, output_dir=str(env / "a")).fit(CORPUS, dev)  # the slow twin: no rule
    assert sorted(c.name for c in everything.candidates_) == sorted(c.name for c in wider.candidates_)
    assert {c.name for c in stopped.candidates_} == {c.name for c in everything.candidates_ if c.depth != 1}


@pytest.mark.parametrize("kw,fit_kw,message", [
    ({"budget": -0.5}, {}, "budget=-0.5"),
    ({"depths": (0,)}, {}, "depth 0 is outside 1..2"),
    ({"depths": (3,)}, {}, "depth 3 is outside 1..2"),
    ({"backends": ("tensorrt",)}, {}, "unknown backend 'tensorrt'"),
    ({}, {"corpus": CORPUS[:7]}, "fewer than one batch"),
    ({"every_depth": (3,)}, {}, r"every_depth=\(3,\) must be True, False or a non-empty tuple of depths in 1..2"),
    ({"every_depth": "yes"}, {}, "every_depth='yes' must be"),
    ({"stop_outside_budget": "yes"}, {}, "stop_outside_budget='yes' must be True or False"),
    ({"settings": replace(FAST, graph_test_scores="fast")}, {},
     "settings.graph_test_scores='fast' is not one of measured, checked"),
])
def test_refusals_before_any_work(tiny_bert, env, monkeypatch, kw, fit_kw, message):
    monkeypatch.setattr(build_module, "LayerEncoder", lambda *a, **k: pytest.fail("work started"))
    with pytest.raises(UsageError, match=message):
        _comp(tiny_bert, output_dir=str(env / "out"), **kw).fit(fit_kw.get("corpus", CORPUS), _dev())
    assert not (env / "out").exists()


def test_a_missing_onnx_package_names_the_extra(tiny_bert, env, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_onnxruntime(name, *args, **kw):
        if name.split(".")[0] == "onnxruntime":
            raise ImportError(name)
        return real_import(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", no_onnxruntime)
    with pytest.raises(UsageError, match=r"pip install 'layerwise\[onnx\]'"):
        _comp(tiny_bert, backends=("torch", "onnx-int8")).fit(CORPUS, _dev())


def test_each_distinct_sentence_encoded_once_gives_the_vectors_of_each_pair_set_encoded_alone(fitted):
    """The fast path of the scores (every distinct sentence of dev and tests encoded once) against its slow twin
    (each pair set's two sides encoded on their own)."""
    est, _ = fitted
    run = est._run
    student = run.model("distilled", (1,))
    fast = build_module.pair_vectors(build_module.runner(student, "torch", batch_size=16), run._all_pairs())
    for name, pairs in run._all_pairs():
        slow = (student.encode(list(pairs.texts1), batch_size=16), student.encode(list(pairs.texts2), batch_size=16))
        for a, b in zip(fast[name], slow):
            np.testing.assert_allclose(a, b, atol=1e-5)


def test_every_candidate_is_scored_before_any_is_timed_and_a_kill_while_timing_keeps_the_scores(
        teacher, env, monkeypatch):
    events = []
    real_measure, real_speed = build_module.Compression._measure, build_module.measure_speed
    monkeypatch.setattr(build_module.Compression, "_measure",
                        lambda self, *a: events.append("score") or real_measure(self, *a))

    def speed_then_kill(*a, **kw):
        events.append("time")
        if events.count("time") == 3:
            raise KeyboardInterrupt
        return real_speed(*a, **kw)

    monkeypatch.setattr(build_module, "measure_speed", speed_then_kill)
    s1, s2, y = _dev()
    with pytest.raises(KeyboardInterrupt):
        _comp(teacher, depths=(1,), output_dir=str(env / "w")).fit(CORPUS, (s1, s2, y))
    n = events.count("score")
    assert n >= 3 and events == ["score"] * n + ["time"] * 3  # every score first, then the timings
    events.clear()
    monkeypatch.setattr(build_module, "measure_speed", lambda *a, **kw: events.append("time") or real_speed(*a, **kw))
    resumed = _comp(teacher, depths=(1,), output_dir=str(env / "w")).fit(CORPUS, (s1, s2, y))
    assert events == ["time"] * (n - 2)  # nothing scored again; the two timed before the kill are kept
    assert all(c.speed["seconds"] for c in resumed.candidates_)


def test_prepare_scores_without_timing_and_fit_then_only_times(teacher, env, monkeypatch):
    s1, s2, y = _dev()
    timed = []
    real_speed = build_module.measure_speed
    monkeypatch.setattr(build_module, "measure_speed", lambda *a, **kw: timed.append(1) or real_speed(*a, **kw))
    scored = _comp(teacher, depths=(1,), output_dir=str(env / "p")).prepare(CORPUS, (s1, s2, y))
    assert timed == [] and scored and all(c.speed == {} for c in scored)
    monkeypatch.setattr(build_module.Compression, "_measure", lambda *a: pytest.fail("scored again"))
    est = _comp(teacher, depths=(1,), output_dir=str(env / "p")).fit(CORPUS, (s1, s2, y))
    assert len(timed) == len(scored) and [c.dev for c in est.candidates_] == [c.dev for c in scored]
    with pytest.raises(UsageError, match="output_dir"):
        _comp(teacher, depths=(1,)).prepare(CORPUS, (s1, s2, y))


def test_each_candidate_records_the_code_that_trained_scored_and_timed_it(teacher, env, monkeypatch):
    """What a later run reads back from the work folder says which code computed it (not which code read it):
    the revision of each stage, kept when read back, the timing's dropped when the timing is forgotten."""
    from layerwise import __version__
    from layerwise.benchmarks.compress.pages import computed_at

    s1, s2, y = _dev()
    stamp = {"commit": "a" * 40, "dirty": False}
    monkeypatch.setattr(build_module, "code_revision", lambda: {"layerwise": __version__, **stamp})
    monkeypatch.setattr(students_module, "code_revision", lambda: {"layerwise": __version__, **stamp})
    scored = _comp(teacher, depths=(1,), output_dir=str(env / "r")).prepare(CORPUS, (s1, s2, y))
    assert all(c.extra["computed"]["scored"] == {"layerwise": __version__, **stamp} for c in scored)
    assert all("timed" not in c.extra["computed"] for c in scored)
    student = next(c for c in scored if c.recipe == "distilled")
    assert student.extra["computed"]["trained"]["commit"] == "a" * 40
    assert "trained" not in next(c for c in scored if c.recipe == "cut").extra["computed"]
    stamp["commit"] = "b" * 40  # timed later, by other code: the scores keep their revision
    est = _comp(teacher, depths=(1,), output_dir=str(env / "r")).fit(CORPUS, (s1, s2, y))
    assert all(c.extra["computed"]["scored"]["commit"] == "a" * 40 for c in est.candidates_)
    assert all(c.extra["computed"]["timed"]["commit"] == "b" * 40 for c in est.candidates_)
    assert computed_at(est.candidates_) == [{"commit": "a" * 40, "dirty": False}, {"commit": "b" * 40, "dirty": False}]
    assert _comp(teacher, depths=(1,), output_dir=str(env / "r")).retime(CORPUS, (s1, s2, y)) == len(est.candidates_)
    again = _comp(teacher, depths=(1,), output_dir=str(env / "r")).prepare(CORPUS, (s1, s2, y))
    assert all(set(c.extra["computed"]) <= {"scored", "trained"} and c.speed == {} for c in again)


def test_work_that_stale_code_computed_is_forgotten_and_computed_again(teacher, env, monkeypatch):
    """``forget_computed``: what code of a stale commit trained, scored or timed is deleted from the folder (the
    student's ``run.json`` too, so it trains again); work recorded before it named its code, and work of a commit
    not stale, are read back as before."""
    from layerwise import __version__

    s1, s2, y = _dev()
    stamp = {"commit": "a" * 40, "dirty": False}
    for module in (build_module, students_module):
        monkeypatch.setattr(module, "code_revision", lambda: {"layerwise": __version__, **stamp})
    folder = env / "f"
    est = _comp(teacher, depths=(1,), output_dir=str(folder)).fit(CORPUS, (s1, s2, y))
    files = sorted((folder / "candidates").glob("*.json"))
    assert _comp(teacher, depths=(1,), output_dir=str(folder)).forget_computed(
        lambda commit: False, CORPUS, (s1, s2, y)) == 0
    legacy = next(f for f in files if "cut-l1-torch" in f.name and "lc-cut" not in f.name)
    stored = json.loads(legacy.read_text())
    del stored["candidate"]["extra"]["computed"]  # measured before candidates recorded their code
    write_json(legacy, stored)
    n = _comp(teacher, depths=(1,), output_dir=str(folder)).forget_computed(
        lambda commit: commit == "a" * 40, CORPUS, (s1, s2, y))
    assert n == len(est.candidates_) - 1 + 1  # every candidate but the legacy one, and the student
    assert sorted((folder / "candidates").glob("*.json")) == [legacy]
    trained, measured = [], []
    real_train, real_measure = distill_module.train, build_module.Compression._measure
    monkeypatch.setattr(distill_module, "train", lambda *a, **kw: trained.append(1) or real_train(*a, **kw))
    monkeypatch.setattr(build_module.Compression, "_measure",
                        lambda self, *a: measured.append(a[0]) or real_measure(self, *a))
    stamp["commit"] = "b" * 40
    again = _comp(teacher, depths=(1,), output_dir=str(folder)).fit(CORPUS, (s1, s2, y))
    assert trained and len(measured) == len(est.candidates_) - 1  # the student and all but the legacy candidate
    by_name = {c.name: c for c in again.candidates_}
    assert "computed" not in by_name["cut-l1-torch"].extra  # read back, as it was
    assert by_name["distilled-l1-torch"].extra["computed"]["trained"]["commit"] == "b" * 40
    with pytest.raises(UsageError, match="output_dir"):
        _comp(teacher, depths=(1,)).forget_computed(lambda commit: True, CORPUS, (s1, s2, y))


def test_other_timing_settings_reuse_the_trained_students(teacher, env, monkeypatch):
    s1, s2, y = _dev()
    _comp(teacher, depths=(1,), output_dir=str(env / "w")).prepare(CORPUS, (s1, s2, y))
    monkeypatch.setattr(distill_module, "train", lambda *a, **kw: pytest.fail("trained again"))
    again = _comp(teacher, depths=(1,), output_dir=str(env / "w"), settings=replace(FAST, speed_repeats=2))
    assert any(c.recipe == "distilled" for c in again.prepare(CORPUS, (s1, s2, y)))


def test_the_every_depth_loss_is_the_mean_of_each_depths_mse_on_its_own_cut(teacher):
    """Slow twin: the every-depth student's loss on a batch equals the mean over its depths of the MSE of the model
    cut at each depth (a separate truncated copy) to the teacher; without depths, the plain student's MSE."""
    import torch

    from layerwise.encoders.truncate import truncate_encoder
    from layerwise.methods.truncated.model import TruncatedModel

    texts = CORPUS[:8]
    targets = np.random.default_rng(0).normal(size=(8, 32)).astype(np.float32)
    model = TruncatedModel.from_pretrained(str(teacher), (3,), max_length=16).eval()  # eval: no dropout noise
    with torch.no_grad():
        got = distill_module.DistillTask(model, texts, targets, batch_size=8, lr=1e-3, seed=0,
                                         depths=(3, 1, 2)).loss(0, 0)["loss"].item()
        plain = distill_module.DistillTask(model, texts, targets, batch_size=8, lr=1e-3, seed=0).loss(0, 0)["loss"]
        each = [distill_module.embedding_mse(TruncatedModel(truncate_encoder(model.encoder, d), model.tokenizer, (d,),
                                                            max_length=16)(texts).numpy(), targets) for d in (1, 2, 3)]
    assert got == pytest.approx(np.mean(each), rel=1e-5)
    assert plain.item() == pytest.approx(each[-1], rel=1e-5)
    with pytest.raises(ValueError, match=r"depths \(4,\) must be a non-empty tuple within 1..3"):
        distill_module.DistillTask(model, texts, targets, batch_size=8, lr=1e-3, seed=0, depths=(4,))


def test_the_every_depth_student_is_trained_once_cut_at_each_depth_and_leaves_the_other_candidates(
        teacher, env, monkeypatch):
    s1, s2, y = _dev()
    work = env / "work"
    plain = _comp(teacher, depths=(1, 2), budget=100.0, output_dir=str(work)).fit(CORPUS, (s1, s2, y))
    trained = []
    real_distill = students_module.distill_student
    monkeypatch.setattr(students_module, "distill_student",
                        lambda *a, **k: trained.append(k.get("depths")) or real_distill(*a, **k))
    est = _comp(teacher, depths=(1, 2), every_depth=True, budget=100.0, output_dir=str(work)).fit(CORPUS, (s1, s2, y))
    assert trained == [(1, 2)]  # one run for both depths; the distilled students were read back
    every = {c.depth: c for c in est.candidates_ if c.recipe == "every-depth"}
    assert sorted(every) == [1, 2]
    for c in every.values():
        assert c.extra["mse_distilled"] < c.extra["mse_cut"] and c.extra["steps"] == 2 * (len(CORPUS) // 8)
    others = [c.to_dict() for c in est.candidates_ if c.recipe != "every-depth"]
    assert others == [c.to_dict() for c in plain.candidates_]  # every other candidate reused as it was
    run = est._run
    top, one = run.model("every-depth", (2,)), run.model("every-depth", (1,))
    assert int(one.encoder.config.num_hidden_layers) == 1  # really cut
    for k, v in one.encoder.state_dict().items():  # the first layer of the one student
        assert torch_equal(v, top.encoder.state_dict()[k]), k
    (student,) = [p.name for p in (work / "students").iterdir() if p.name.startswith("every-depth")]
    assert student.startswith("every-depth-l2")
    monkeypatch.setattr(build_module.Compression, "_measure", lambda *a: pytest.fail("measured again"))
    again = _comp(teacher, depths=(1, 2), every_depth=(1, 2), budget=100.0, output_dir=str(work)).fit(
        CORPUS, (s1, s2, y))
    assert [c.to_dict() for c in again.candidates_] == [c.to_dict() for c in est.candidates_]


def torch_equal(a, b) -> bool:
    import torch

    return bool(torch.equal(a, b))


def test_adopted_candidates_of_an_earlier_run_are_read_back_not_measured(teacher, env, monkeypatch):
    s1, s2, y = _dev()
    before = _comp(teacher, depths=(1,), output_dir=str(env / "a")).fit(CORPUS, (s1, s2, y))
    assert {c.extra["weights_sha256"] for c in before.candidates_ if c.recipe == "distilled"} != set()
    shutil.copytree(env / "a" / "students", env / "b" / "students")  # the earlier folder's students, copied
    later = _comp(teacher, depths=(1,), every_depth=True, output_dir=str(env / "b"))  # no candidates there
    untimed = Candidate.from_dict({**before.candidates_[0].to_dict(), "speed": {}})
    assert later.adopt([*before.candidates_[1:], untimed], CORPUS, (s1, s2, y)) == len(before.candidates_) - 1
    assert later.adopt(before.candidates_, CORPUS, (s1, s2, y)) == 1  # the timed twin of the untimed one only
    measured = []
    real_measure = build_module.Compression._measure
    monkeypatch.setattr(build_module.Compression, "_measure",
                        lambda self, *a: measured.append(a[0]) or real_measure(self, *a))
    later.fit(CORPUS, (s1, s2, y))
    assert measured == ["every-depth"]  # every other candidate was the earlier run's
    kept = {c.name: c.to_dict() for c in later.candidates_ if c.recipe != "every-depth"}
    # the earlier run's, each marked as carried over
    assert kept == {c.name: {**c.to_dict(), "extra": {**c.extra, "carried_over": True}} for c in before.candidates_}
    with pytest.raises(UsageError, match="adopt\\(\\) keeps candidates in output_dir"):
        _comp(teacher, depths=(1,)).adopt(before.candidates_, CORPUS, (s1, s2, y))


def test_a_students_candidates_are_not_adopted_without_that_student(teacher, env, monkeypatch):
    s1, s2, y = _dev()
    before = _comp(teacher, depths=(1,), output_dir=str(env / "a")).fit(CORPUS, (s1, s2, y))
    distilled = [c for c in before.candidates_ if c.recipe == "distilled"]
    assert distilled and all(c.extra["weights_sha256"] for c in distilled)
    fresh = _comp(teacher, depths=(1,), output_dir=str(env / "b"))  # no student in its folder: none kept
    assert fresh.adopt(before.candidates_, CORPUS, (s1, s2, y)) == len(before.candidates_) - len(distilled)
    measured = []
    real_measure = build_module.Compression._measure
    monkeypatch.setattr(build_module.Compression, "_measure",
                        lambda self, *a: measured.append(a[0]) or real_measure(self, *a))
    fresh.fit(CORPUS, (s1, s2, y))
    assert measured == ["distilled"] * len(distilled)  # trained here, measured on its own student
    # a folder whose student is another one (trained again elsewhere: other weights) keeps none of them
    other = _comp(teacher, depths=(1,), output_dir=str(env / "c"))
    shutil.copytree(env / "a" / "students", env / "c" / "students")
    (root,) = [p for p in (env / "c" / "students").iterdir() if p.name.startswith("distilled-")]
    run = json.loads((root / "run.json").read_text())
    write_json(root / "run.json", {**run, "weights_sha256": "0" * 64})
    assert other.adopt(distilled, CORPUS, (s1, s2, y)) == 0
    # a candidate stored before students' weights were recorded: kept where its folder holds a student
    older = [Candidate.from_dict({**c.to_dict(), "extra": {k: v for k, v in c.extra.items() if k != "weights_sha256"}})
             for c in distilled]
    assert other.adopt(older, CORPUS, (s1, s2, y)) == len(distilled)


def test_an_openvino_int8_candidate_quantized_under_other_settings_is_not_adopted(teacher, env):
    pytest.importorskip("nncf")
    from layerwise.methods.compress.backends import int8_settings

    s1, s2, y = _dev()
    before = _comp(teacher, depths=(1,), output_dir=str(env / "a")).fit(CORPUS, (s1, s2, y))
    later = _comp(teacher, depths=(1,), backends=("torch", "openvino-int8"), output_dir=str(env / "b"))
    int8 = before.candidates_[0].to_dict()
    older = Candidate.from_dict({**int8, "backend": "openvino-int8"})  # scored before the settings were kept
    other = Candidate.from_dict({**int8, "backend": "openvino-int8",
                                 "extra": {"quantization": {**int8_settings(), "smooth_quant_alphas": [0.95],
                                                            "smooth_quant_alpha": 0.95}}})
    assert later.adopt([older, other], CORPUS, (s1, s2, y)) == 0
    same = Candidate.from_dict({**int8, "backend": "openvino-int8",
                                "extra": {"quantization": {**int8_settings(), "smooth_quant_alpha": 0.5}}})
    assert later.adopt([same], CORPUS, (s1, s2, y)) == 1


def _counting_runner(monkeypatch) -> list[tuple[str, int]]:
    """(backend, number of texts) of every encode call a candidate's runner makes."""
    seen, real = [], build_module.runner

    def counting(model, backend, **kw):
        encode = real(model, backend, **kw)
        return lambda texts: (seen.append((backend, len(texts))), encode(texts))[1]

    monkeypatch.setattr(build_module, "runner", counting)
    return seen


def test_checked_graph_test_scores_are_the_torch_ones_and_equal_the_measured_ones(teacher, env, monkeypatch):
    pytest.importorskip("onnxruntime")
    s1, s2, y = _dev()
    t1, t2, ty = _dev(16, seed=1, step=7)
    u1, u2 = [f"{a[:-2]} or {b}" for a in SENTENCES for b in SENTENCES][:96], SENTENCES * 8
    tests = {"t": (t1, t2, ty), "u": (u1, u2, np.linspace(0, 5, 96))}  # u: more sentences than the check takes
    kw = dict(depths=(1,), backends=("torch", "onnx"), budget=100.0)
    measured = _comp(teacher, **kw).fit(CORPUS, (s1, s2, y), tests=tests)  # the slow twin: every test set encoded
    seen = _counting_runner(monkeypatch)
    checked = _comp(teacher, settings=replace(FAST, graph_test_scores="checked"), output_dir=str(env / "c"),
                    **kw).fit(CORPUS, (s1, s2, y), tests=tests)
    m, k = ({c.name: c for c in est.candidates_} for est in (measured, checked))
    assert m.keys() == k.keys() and any(c.backend == "onnx" for c in k.values())
    every = len(set(s1 + s2 + t1 + t2 + u1 + u2))
    check = len(set(s1 + s2 + t1 + t2) | set(list(dict.fromkeys(u1 + u2))[:build_module.GRAPH_CHECK_SENTENCES]))
    assert check < every
    for name, c in k.items():
        if c.backend != "onnx":
            assert "test_scores" not in c.extra and c.tests == m[name].tests
            continue
        assert c.tests == k[name.replace("-onnx", "-torch")].tests  # taken from the torch candidate...
        assert c.tests == pytest.approx(m[name].tests, abs=1e-3)  # ...which are the measured ones
        assert c.dev == pytest.approx(m[name].dev, abs=1e-6)  # the graph's own dev score
        assert c.extra["test_scores"] == {"from": "torch", "checked_sentences": check, "tolerance": 1e-4,
                                          "max_abs_diff": pytest.approx(c.extra["test_scores"]["max_abs_diff"])}
        assert c.extra["test_scores"]["max_abs_diff"] <= 1e-4 and c.extra["max_abs_diff_vs_torch"] <= 1e-4
    # the graphs encoded the check sentences (then the timed corpus sentences), never every test sentence
    assert {n for b, n in seen if b == "onnx"} == {check, FAST.speed_sentences}
    # the torch candidates and the graphs' folders are shared with a measured run; the graph candidates are not
    files = {p.name.rsplit("-", 1)[0] for p in (env / "c" / "candidates").glob("*.json")}
    again = _comp(teacher, output_dir=str(env / "c"), **kw).prepare(CORPUS, (s1, s2, y), tests=tests)
    assert {c.name for c in again} == set(k) and len(list((env / "c" / "candidates").glob("*.json"))) == \
        len(files) + sum(c.backend == "onnx" for c in k.values())


def test_a_graph_that_does_not_give_the_torch_vectors_is_measured_in_full(teacher, env, monkeypatch):
    pytest.importorskip("onnxruntime")
    monkeypatch.setattr(build_module, "GRAPH_TOLERANCE", -1.0)  # no graph passes the check
    s1, s2, y = _dev()
    tests = {"t": _dev(16, seed=1, step=7)}
    kw = dict(depths=(1,), backends=("torch", "onnx"), budget=100.0)
    checked = _comp(teacher, settings=replace(FAST, graph_test_scores="checked"), **kw).fit(CORPUS, (s1, s2, y),
                                                                                             tests=tests)
    measured = {c.name: c for c in _comp(teacher, **kw).fit(CORPUS, (s1, s2, y), tests=tests).candidates_}
    for c in checked.candidates_:
        assert "test_scores" not in c.extra and c.tests == pytest.approx(measured[c.name].tests, abs=1e-9)


def test_students_trained_on_one_machine_are_loaded_on_another_not_trained_again(teacher, env, monkeypatch):
    import shutil

    s1, s2, y = _dev()
    kw = dict(depths=(1,), every_depth=(1, 2), budget=100.0)
    gpu, _ = _comp(teacher, output_dir=str(env / "gpu"), **kw)._compression(CORPUS, (s1, s2, y), None)
    names = gpu.train_students()  # what Compressor.train_students runs
    assert sorted(n.rsplit("-", 1)[0] for n in names) == ["distilled-l1", "every-depth-l2"]
    assert sorted(p.name for p in (env / "gpu" / "students").iterdir()) == sorted(names)
    assert not (env / "gpu" / "candidates").exists()  # nothing scored, nothing timed
    shutil.copytree(env / "gpu", env / "cpu")  # the work folder carried to the machine that scores and times
    with monkeypatch.context() as patch:
        patch.setattr(students_module, "distill_student", lambda *a, **k: pytest.fail("trained again"))
        # nor the teacher's embeddings of the whole corpus: the students' facts need its first sentences only
        patch.setattr(students_module.Students, "teacher", lambda self: pytest.fail("the whole teacher computed"))
        here = _comp(teacher, output_dir=str(env / "cpu"), **kw).fit(CORPUS, (s1, s2, y))
    for recipe, depth in (("distilled", 1), ("every-depth", 2)):  # the loaded students are the trained ones
        trained, loaded = gpu.students.get(recipe, depth), here._run.students.get(recipe, depth)
        np.testing.assert_allclose(loaded.encode(SENTENCES), trained.encode(SENTENCES), atol=1e-6)
    students = [c for c in here.candidates_ if c.recipe in ("distilled", "every-depth")]
    assert students and all(c.extra["device"] == "cpu" and c.extra["seconds"] > 0 for c in students)
    assert all(c.extra["machine"]["gpu"] is None and c.extra["machine"]["torch"] for c in students)  # no GPU named
    for c in students:  # the MSE on the first sentences, without the whole teacher = from the trainer's teacher
        want = gpu.students.facts(gpu.model(c.recipe, c.layers), c.recipe, c.layers[0])
        assert c.extra["mse_distilled"] == pytest.approx(want["mse_distilled"], rel=1e-5)
        assert c.extra["mse_cut"] == pytest.approx(want["mse_cut"], rel=1e-5)
    with pytest.raises(UsageError, match="output_dir, which is None"):
        _comp(teacher, **kw).train_students(CORPUS, (s1, s2, y))
