"""``layerwise compress`` end to end on a tiny random BERT and small files: the report, the plot, the chosen model
(loaded by sentence-transformers), a re-run that recomputes nothing, and the refusals (one line, exit 2, before any
model loads)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import SENTENCES
from layerwise.cli import main
from layerwise.methods.compress import build as build_module
from layerwise.methods.compress import students as students_module


def _files(folder, n_corpus: int = 40):
    corpus = folder / "corpus.txt"
    corpus.write_text("\n".join([f"{a[:-2]} and {b[:-2]} ." for a in SENTENCES for b in SENTENCES][:n_corpus]) + "\n")
    for name, seed in (("dev", 0), ("sick", 1)):
        rnd = np.random.default_rng(seed)
        rows = [f"{SENTENCES[i % 12]},{SENTENCES[(5 * i + seed + 1) % 12]},{rnd.uniform(0, 5):.2f}" for i in range(16)]
        (folder / f"{name}.csv").write_text("sentence1,sentence2,score\n" + "\n".join(rows) + "\n")
    return corpus, folder / "dev.csv", folder / "sick.csv"


def _args(model, corpus, dev, out, *extra):
    return ["compress", str(model), "--corpus", str(corpus), "--dev", str(dev), "--output", str(out),
            "--depths", "1", "--batch-size", "8", "--max-length", "16", "--speed-sentences", "16",
            "--speed-batch-size", "16", "--speed-repeats", "1", "-q", *extra]


def test_compress_end_to_end(tiny_bert, env, capsys, monkeypatch):
    from sentence_transformers import SentenceTransformer

    corpus, dev, sick = _files(env)
    out = env / "out"
    assert main(_args(tiny_bert, corpus, dev, out, "--test", str(sick), "--budget", "0.5")) == 0
    printed = capsys.readouterr().out
    report = json.loads((out / "report.json").read_text())
    chosen = report["chosen"]
    name = f"{chosen['recipe']}-l{chosen['depth']}-{chosen['backend']}"
    assert f"chosen {name}" in printed
    assert chosen["dev"] >= report["original"]["dev"] - 0.5
    md = (out / "report.md").read_text()
    assert f"| {name} |" in md and "| sick |" in md.splitlines()[md.splitlines().index("## Candidates") + 2]
    assert (out / "frontier.png").read_bytes()[:4] == b"\x89PNG"
    st = SentenceTransformer(str(out / "model"), device="cpu", trust_remote_code=False)
    assert st.encode(SENTENCES).shape == (len(SENTENCES), 32)
    # the same command again: every candidate is read back, nothing is measured
    monkeypatch.setattr(build_module.Compression, "_measure", lambda *a: pytest.fail("measured again"))
    assert main(_args(tiny_bert, corpus, dev, out, "--test", str(sick), "--budget", "0.5")) == 0
    assert json.loads((out / "report.json").read_text())["candidates"] == report["candidates"]


def test_prepare_scores_and_a_later_run_only_times(tiny_bert, env, capsys, monkeypatch):
    corpus, dev, _ = _files(env)
    out = env / "out"
    assert main(_args(tiny_bert, corpus, dev, out, "--prepare")) == 0
    assert "scored" in capsys.readouterr().out and not (out / "report.json").exists()
    monkeypatch.setattr(build_module.Compression, "_measure", lambda *a: pytest.fail("scored again"))
    assert main(_args(tiny_bert, corpus, dev, out)) == 0
    assert all(c["speed"]["seconds"] for c in json.loads((out / "report.json").read_text())["candidates"])
    first = json.loads((out / "report.json").read_text())["candidates"]
    assert main(_args(tiny_bert, corpus, dev, out, "--retime")) == 0  # every candidate timed again, none scored
    assert f"forgot {len(first)} stored timings" in capsys.readouterr().out
    again = json.loads((out / "report.json").read_text())["candidates"]
    assert [c["dev"] for c in again] == [c["dev"] for c in first] and all(c["speed"]["seconds"] for c in again)


@pytest.mark.parametrize("extra,n_corpus,message", [
    (("--depths", "3"), 40, "depth 3 is outside 1..2"),
    (("--backends", "torch,tensorrt"), 40, "unknown backend 'tensorrt'"),
    ((), 5, "fewer than one batch"),
])
def test_refusals_are_one_line(tiny_bert, env, capsys, monkeypatch, extra, n_corpus, message):
    corpus, dev, _ = _files(env, n_corpus)
    monkeypatch.setattr(build_module, "LayerEncoder", lambda *a, **k: pytest.fail("work started"))
    assert main([*_args(tiny_bert, corpus, dev, env / "out"), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_a_negative_budget_is_refused_by_the_parser(tiny_bert, env, capsys):
    corpus, dev, _ = _files(env)
    with pytest.raises(SystemExit) as exc:
        main(_args(tiny_bert, corpus, dev, env / "out", "--budget", "-1"))
    assert exc.value.code == 2 and "--budget" in capsys.readouterr().err


@pytest.mark.parametrize("user_file", ["report.md", "model/notes.txt"])
def test_a_user_file_in_output_is_refused_before_any_work(tiny_bert, env, capsys, monkeypatch, user_file):
    corpus, dev, _ = _files(env)
    out = env / "out"
    (out / user_file).parent.mkdir(parents=True, exist_ok=True)
    (out / user_file).write_text("mine\n")
    monkeypatch.setattr(build_module, "LayerEncoder", lambda *a, **k: pytest.fail("work started"))
    code = main(_args(tiny_bert, corpus, dev, out))
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and (out / user_file).read_text() == "mine\n"


def test_every_depth_flag_adds_the_every_depth_candidates(tiny_bert, env, capsys):
    corpus, dev, _ = _files(env)
    out = env / "out"
    assert main([*_args(tiny_bert, corpus, dev, out, "--every-depth"), "--depths", "1,2"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert sorted(c["depth"] for c in report["candidates"] if c["recipe"] == "every-depth") == [1, 2]
    assert "- every-depth: " in (out / "report.md").read_text()  # the recipe explained in the report


def test_stop_outside_budget_flag_leaves_the_shallower_depths_out_and_says_so(env, capsys, monkeypatch):
    from dataclasses import replace

    from conftest import build_tiny_bert

    model = build_tiny_bert(env / "deep", num_hidden_layers=3)
    real = build_module.Compression._scored
    monkeypatch.setattr(build_module.Compression, "_scored", lambda self, recipe, layers, backend: replace(
        real(self, recipe, layers, backend), dev={3: 80.0, 2: 70.0, 1: 79.5, 0: 60.0}[max(layers)]))
    corpus, dev, _ = _files(env)
    out = env / "out"
    assert main([*_args(model, corpus, dev, out, "--stop-outside-budget"), "--depths", "1,2,3"]) == 0
    assert "depths not built (--stop-outside-budget): 1" in capsys.readouterr().out
    report = json.loads((out / "report.json").read_text())
    assert report["unbuilt_depths"] == [1] and {c["depth"] for c in report["candidates"]} <= {0, 2, 3}
    assert "Depths not built: 1 (`stop_outside_budget`" in (out / "report.md").read_text()


def test_graph_test_scores_flag_reaches_the_settings(tiny_bert, env, capsys, monkeypatch):
    from layerwise.cli.compress import GRAPH_TEST_SCORES
    from layerwise.methods.compress import config as config_module

    assert GRAPH_TEST_SCORES == config_module.GRAPH_TEST_SCORES  # the parser's choices are the library's
    corpus, dev, _ = _files(env)
    seen = []
    monkeypatch.setattr(build_module.Compression, "run", lambda self: seen.append(self.config) or pytest.skip())
    with pytest.raises(pytest.skip.Exception):
        main(_args(tiny_bert, corpus, dev, env / "out", "--graph-test-scores", "checked"))
    assert seen[0].graph_test_scores == "checked"
    with pytest.raises(SystemExit) as exc:  # refused by the parser, one usage line
        main(_args(tiny_bert, corpus, dev, env / "out2", "--graph-test-scores", "fast"))
    assert exc.value.code == 2 and "invalid choice: 'fast'" in capsys.readouterr().err


def test_train_students_flag_trains_only_and_the_same_command_then_loads_them(tiny_bert, env, capsys, monkeypatch):
    corpus, dev, _ = _files(env)
    out = env / "out"
    assert main(_args(tiny_bert, corpus, dev, out, "--train-students")) == 0
    assert "trained 1 student(s)" in capsys.readouterr().out and not (out / "report.json").exists()
    assert not (out / "work" / "candidates").exists()
    monkeypatch.setattr(students_module, "distill_student", lambda *a, **k: pytest.fail("trained again"))
    assert main(_args(tiny_bert, corpus, dev, out)) == 0 and (out / "report.json").is_file()


def test_a_student_below_its_untrained_cut_is_warned_of_with_the_fix_on_stderr_and_in_the_report(
        tiny_bert, env, capsys, monkeypatch):
    """Which students failed is :func:`~layerwise.methods.compress.diagnostics.failed_students`'s (tested on
    its own below); here it names the depth-1 student, and the warning reaches the user and the report."""
    from layerwise.methods.compress import diagnostics

    corpus, dev, _ = _files(env)
    out = env / "out"
    monkeypatch.setattr(diagnostics, "failed_students", lambda cands: [
        (c, c) for c in cands if c.recipe == "distilled" and c.backend == "torch"])
    assert main(_args(tiny_bert, corpus, dev, out, "--lr", "0.003")) == 0
    err = capsys.readouterr().err
    assert "warning: distilled-l1 failed to train: dev Spearman" in err and "--lr 0.003; try 0.0003" in err
    md = (out / "report.md").read_text()
    assert "## Warnings" in md and "- distilled-l1 failed to train" in md


def test_failed_students_are_those_below_the_untrained_cut_of_their_depth_on_dev():
    from layerwise.methods.compress.diagnostics import failed_student_lines, failed_students
    from layerwise.methods.compress.frontier import Candidate

    def cand(recipe, depth, dev, backend="torch"):
        return Candidate.from_dict({"recipe": recipe, "depth": depth, "layers": [depth], "backend": backend,
                                    "parameters": 1, "dev": dev, "tests": {}, "extra": {}, "speed": {}})

    cands = [cand("original", 12, 88.0), cand("cut", 9, 71.3), cand("distilled", 9, 7.5),
             cand("distilled", 9, 7.9, "onnx-int8"), cand("cut", 6, 60.0), cand("distilled", 6, 80.0),
             cand("every-depth", 6, 59.0), cand("every-depth", 5, 10.0)]  # depth 5: no cut to judge it by
    assert [(s.recipe, s.depth, cut.dev) for s, cut in failed_students(cands)] == [
        ("distilled", 9, 71.3), ("every-depth", 6, 60.0)]
    assert failed_student_lines(cands, 1e-3)[0] == (
        "warning: distilled-l9 failed to train: dev Spearman 7.50, below the untrained cut at its depth (71.30); its "
        "candidates are measured as they are. Train again with a lower learning rate (this run: --lr 0.001; try "
        "0.0001) in a new --output folder")
    assert failed_students([c for c in cands if c.recipe != "cut"]) == []
