"""``MultitaskModel`` (the multi-task estimator) on a tiny random BERT and task files the tests write: the estimator
contract, save / load / SentenceTransformer equality, every file format from Python and the command line, and the
one-line errors (naming the Python argument, or exit 2 before any model loads)."""

from __future__ import annotations

import csv
import json
import random

import numpy as np
import pytest
import torch
from sklearn.base import clone

from conftest import SENTENCES
from estimator_checks import check_estimator
from layerwise import MultitaskModel, Task
from layerwise.cli import main
from layerwise.data.readers import DataFileError
from layerwise.errors import UsageError
from layerwise.methods.multitask import estimator as estimator_module
from layerwise.methods.multitask import task_list
from layerwise.methods.multitask.task_list import read_task_file

TINY = {"epochs": 1, "batch_size": 4, "max_length": 12, "lr": 1e-3, "show_progress": False}
FORMATS = ("csv", "tsv", "jsonl", "parquet")


def _rows(kind: str, n: int, seed: int = 0) -> list[dict]:
    rnd = random.Random(seed)
    if kind == "classification":
        return [{"review": rnd.choice(SENTENCES), "stars": ("low", "high")[i % 2]} for i in range(n)]
    if kind == "pair_classification":
        return [{"q1": rnd.choice(SENTENCES), "q2": rnd.choice(SENTENCES), "dup": i % 2} for i in range(n)]
    if kind == "pair_regression":
        return [{"left": rnd.choice(SENTENCES), "right": rnd.choice(SENTENCES), "sim": float(i % 5) + 1.0}
                for i in range(n)]
    return [{"premise": s, "hyp": rnd.choice(SENTENCES), "gold": ("entailment", "neutral", "contradiction")[i % 3]}
            for i, s in enumerate(rnd.choices(SENTENCES, k=n))]


def write_rows(path, rows: list[dict]):
    """``rows`` as a CSV, TSV, JSON lines or Parquet file (by the suffix)."""
    fmt = path.suffix[1:]
    if fmt in ("csv", "tsv"):
        with path.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]), delimiter="," if fmt == "csv" else "\t")
            writer.writeheader()
            writer.writerows(rows)
    elif fmt == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        import pandas as pd

        pd.DataFrame(rows).to_parquet(path)
    return path


COLUMNS = {"classification": {"text": "review", "label": "stars"},
           "pair_classification": {"sentence1": "q1", "sentence2": "q2", "label": "dup"},
           "pair_regression": {"sentence1": "left", "sentence2": "right", "score": "sim"},
           "nli": {"sentence1": "premise", "sentence2": "hyp", "label": "gold"}}


def write_task_files(folder, formats: dict) -> list[dict]:
    """A train (12 rows) and dev (8 rows) file per kind in the format given for it; the task list as dicts."""
    folder.mkdir(parents=True, exist_ok=True)
    entries = []
    for kind, fmt in formats.items():
        name = {"classification": "sentiment", "pair_classification": "paraphrase", "pair_regression": "similar",
                "nli": "snli"}[kind]
        entry = {"name": name, "kind": kind, "data": str(write_rows(folder / f"{name}.{fmt}", _rows(kind, 12))),
                 "columns": COLUMNS[kind]}
        if kind != "nli":
            entry["dev"] = str(write_rows(folder / f"{name}-dev.{fmt}", _rows(kind, 8, seed=1)))
        entries.append(entry)
    return entries


def _tasks(entries: list[dict], **extra) -> list[Task]:
    return [Task(**{**e, **extra.get(e["name"], {})}) for e in entries]


@pytest.fixture()
def memory_tasks():
    texts = SENTENCES[:8]
    return [Task("sentiment", "classification", (texts, ["neg", "pos"] * 4)),
            Task("similar", "pair_regression", (texts, texts[::-1], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 2.5, 1.5]),
                 layer="mix")]


# ---------------------------------------------------------------------------------------------- contract


def test_estimator_contract(tiny_bert, memory_tasks):
    est = check_estimator(lambda: MultitaskModel(str(tiny_bert), tasks=memory_tasks, **TINY), lambda e: e.fit())
    assert set(est.tasks_) == {"sentiment", "similar"} and est.tasks_["similar"].layer == "mix"
    assert est.network_.mixes.keys() == {"similar"} and len(est.layer_weights_["similar"]) == 3
    assert est.history_[0]["name"] == "tasks" and est.dev_scores_ == {}  # no dev data: the last state is kept
    assert set(est.predict("sentiment", ["a man plays the guitar ."])) <= {"neg", "pos"}


def test_save_load_and_sentence_transformers_equality(tiny_bert, tmp_path):
    from sentence_transformers import SentenceTransformer

    entries = write_task_files(tmp_path / "data", {"classification": "csv", "pair_classification": "tsv",
                                                   "pair_regression": "jsonl"})
    est = MultitaskModel(tiny_bert, tasks=_tasks(entries, similar={"head": "cosine"},
                                                      paraphrase={"layer": 1, "features": "abs_diff"}), **TINY).fit()
    probe = ["a man is playing guitar .", "the dog is swimming in the water .", "a child eats food ."]
    pairs = (probe, probe[::-1])
    vectors = est.encode(probe)
    folder = est.save(tmp_path / "model")
    st = SentenceTransformer(str(folder), device="cpu")  # built-in modules: no trust_remote_code
    assert np.abs(st.encode(probe) - vectors).max() < 1e-5
    back = MultitaskModel.load(folder)
    assert np.abs(back.encode(probe) - vectors).max() < 1e-5
    for task, inputs in (("sentiment", probe), ("paraphrase", pairs), ("similar", pairs)):
        np.testing.assert_array_equal(back.predict(task, inputs), est.predict(task, inputs))
    assert back.tasks_ == est.tasks_ and back.dev_scores_ == est.dev_scores_
    assert back.get_params()["tasks"] == est.tasks  # file tasks come back: the loaded estimator can be refitted
    assert est.save(folder) == folder  # a folder this library wrote is replaced


def test_heads_read_the_layer_they_name(tiny_bert, memory_tasks):
    """A task reading hidden state k embeds with the mean of that state (the obvious computation)."""
    tasks = [memory_tasks[0], Task("similar", "pair_regression", memory_tasks[1].data, layer=0)]
    est = MultitaskModel(str(tiny_bert), tasks=tasks, **TINY).fit()
    net = est.network_.eval()
    texts = ["a man plays the guitar .", "a dog ."]
    with torch.no_grad():
        enc = net.tokenizer(texts, padding=True, return_tensors="pt")
        states = net.encoder(**enc, output_hidden_states=True).hidden_states
        w = enc["attention_mask"].unsqueeze(-1).float()
        first = (states[0] * w).sum(1) / w.sum(1)
        last = (states[-1] * w).sum(1) / w.sum(1)
        mean = net.encode_texts(texts)[0]
        torch.testing.assert_close(net.embed("similar", mean), first, atol=1e-6, rtol=0)
        torch.testing.assert_close(net.embed("sentiment", mean), last, atol=1e-6, rtol=0)
    np.testing.assert_allclose(est.encode(texts), last.numpy(), atol=1e-6)
    scores = est.predict("similar", (texts, texts[::-1]))
    with torch.no_grad():
        head = net.heads["similar"](first, first[[1, 0]]).numpy()
    np.testing.assert_allclose(scores, 0.0 + head * 5.0, atol=1e-5)  # back in the data's 0-5 scale


# ---------------------------------------------------------------------------------------------- every format


def test_python_end_to_end_every_format(tiny_bert, tmp_path):
    entries = write_task_files(tmp_path / "data", {"classification": "parquet", "pair_classification": "jsonl",
                                                   "pair_regression": "csv", "nli": "tsv"})
    est = MultitaskModel(str(tiny_bert), tasks=_tasks(entries), freeze=["sentiment"], shared_layers=1,
                         **TINY).fit()
    assert [p["name"] for p in est.history_] == ["nli", "paraphrase_similar", "sentiment_head"]
    assert set(est.dev_scores_) == {"sentiment", "paraphrase", "similar"}
    assert 0 <= est.dev_scores_["sentiment"]["accuracy"] <= 1 and "pearson" in est.dev_scores_["similar"]
    assert est.score("sentiment", ["a man plays the guitar .", "a dog ."], ["high", "low"]) in (0.0, 0.5, 1.0)
    assert str(est.predict("paraphrase", (["a dog ."], ["a cat ."]))[0]) in ("0", "1")
    assert est.tasks_["sentiment"].source == "sentiment" and est.tasks_["similar"].dev_source == "similar-dev"


@pytest.mark.parametrize("fmt", FORMATS)
def test_cli_end_to_end_every_format(tiny_bert, env, capsys, fmt):
    entries = write_task_files(env / "data", {"classification": fmt, "pair_regression": fmt})
    for e in entries:  # paths relative to the task file
        e["data"], e["dev"] = f"data/{e['name']}.{fmt}", f"data/{e['name']}-dev.{fmt}"
    entries[1]["layer"] = "mix"
    if fmt in ("csv", "jsonl"):
        task_file = env / "my-tasks.json"
        task_file.write_text(json.dumps({"tasks": entries}))
    else:
        task_file = env / "my-tasks.toml"
        task_file.write_text("".join(
            "[[tasks]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in e.items() if k != "columns")
            + "columns = { " + ", ".join(f'{k} = "{v}"' for k, v in e["columns"].items()) + " }\n" for e in entries))
    out = env / "out"
    code = main(["multitask", "--tasks", str(task_file), "--model", str(tiny_bert), "--epochs", "1", "--batch-size",
                 "4", "--max-length", "12", "--lr", "1e-3", "--output", str(out), "-q"])
    printed = capsys.readouterr().out
    assert code == 0
    (report_file,) = out.glob("multitask-my-tasks-*.json")  # named by the settings and the task file
    report = json.loads(report_file.read_text())
    assert [(t["name"], t["source"], t["dev_source"]) for t in report["tasks"]] == [
        ("sentiment", "sentiment", "sentiment-dev"), ("similar", "similar", "similar-dev")]
    acc = report["tasks"][0]["dev_scores"]["accuracy"]
    assert f"accuracy {acc:.4f}" in printed and "sentiment-dev" in printed
    back = MultitaskModel.load(report_file.with_name(report_file.stem + "-model"))
    assert back.predict("sentiment", ["a dog ."])[0] in ("low", "high")


# ---------------------------------------------------------------------------------------------- errors


@pytest.fixture()
def no_model_load(monkeypatch):
    """Any attempt to load the encoder fails the test: file errors must come first."""
    def refuse(name):
        raise AssertionError("the model was loaded before the data was checked")

    monkeypatch.setattr(estimator_module, "load_encoder", refuse)


def _cli_error(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    return err


@pytest.mark.parametrize("problem", ["wrong column", "empty file", "unknown kind", "bad task file"])
def test_cli_bad_files_one_line_exit_2_before_the_model(tiny_bert, env, capsys, no_model_load, problem):
    entries = write_task_files(env / "data", {"classification": "csv"})
    if problem == "wrong column":
        entries[0]["columns"] = {"text": "comment", "label": "stars"}
    elif problem == "empty file":
        (env / "data" / "sentiment.csv").write_text("")
    elif problem == "unknown kind":
        entries[0]["kind"] = "regression"
    task_file = env / "tasks.json"
    task_file.write_text("{not json" if problem == "bad task file" else json.dumps({"tasks": entries}))
    err = _cli_error(capsys, ["multitask", "--tasks", str(task_file), "--model", str(tiny_bert), "--output",
                              str(env / "out"), "-q"])
    expected = {"wrong column": "comment", "empty file": "sentiment.csv", "unknown kind": "tasks[0].kind",
                "bad task file": "tasks.json"}[problem]
    assert expected in err
    assert not (env / "out").exists() or not any((env / "out").iterdir())


def test_python_errors_name_the_argument(tiny_bert, tmp_path, memory_tasks, no_model_load):
    entries = write_task_files(tmp_path, {"classification": "csv"})
    cases = [
        ([memory_tasks[0], Task("x", "regression", "f.csv")], {}, r"tasks\[1\]\.kind='regression'"),
        ([Task("s", "classification", entries[0]["data"], columns={"text": "nope", "label": "stars"})], {},
         r"tasks\[0\]\.data: .*nope"),
        ([Task("s", "classification", entries[0]["data"], columns={"txt": "review"})], {}, r"tasks\[0\]\.columns"),
        ([Task("s", "pair_regression", memory_tasks[1].data, head="transformer")], {}, r"tasks\[0\]\.head"),
        ([memory_tasks[0], Task("sentiment", "classification", memory_tasks[0].data)], {}, "used twice"),
        ([memory_tasks[0], Task("n", "nli", "x.csv", dev="y.csv")], {}, r"tasks\[1\]\.dev"),
        (memory_tasks, {"freeze": ["nope"]}, "freeze names"),
        (memory_tasks, {"epochs": 0}, "epochs=0 is invalid"),
        (memory_tasks[0], {}, "tasks must be a list"),
        ([Task("s", "classification", (SENTENCES[:4], ["a"] * 4))], {}, "single label"),
    ]
    for tasks, params, message in cases:
        with pytest.raises(UsageError, match=message):
            MultitaskModel(str(tiny_bert), tasks=tasks, **params).fit()


def test_predict_errors_and_layer_range(tiny_bert, memory_tasks):
    with pytest.raises(UsageError, match=r"tasks\[1\]\.layer=7 is invalid: the encoder has hidden states 0\.\.2"):
        MultitaskModel(str(tiny_bert), tasks=[memory_tasks[0], Task("s", "pair_regression", memory_tasks[1].data,
                                                                    layer=7)], **TINY).fit()
    est = MultitaskModel(str(tiny_bert), tasks=memory_tasks, **TINY).fit()
    with pytest.raises(UsageError, match="task='nope' has no head"):
        est.predict("nope", ["a"])
    with pytest.raises(UsageError, match=r"\(texts1, texts2\)"):
        est.predict("similar", ["a", "b"])
    with pytest.raises(UsageError, match="texts1 has 2 texts and texts2 1"):
        est.predict("similar", (["a", "b"], ["c"]))


def test_task_file_checks(tmp_path, monkeypatch):
    bad = tmp_path / "t.json"
    for doc, message in (({"task": []}, "non-empty list 'tasks'"), ({"tasks": [{"name": "a", "kind": "nli"}]},
                                                                     r"tasks\[0\] has no data"),
                         ({"tasks": [{"name": "a", "kind": "nli", "data": "x", "colour": 1}]}, "unknown fields"),
                         ({"tasks": [{"name": "a", "kind": "nli", "data": "x"}], "epochs": 3}, "besides 'tasks'")):
        bad.write_text(json.dumps(doc))
        with pytest.raises(DataFileError, match=message):
            read_task_file(bad)
    (tmp_path / "t.yaml").write_text("tasks: []")
    with pytest.raises(DataFileError, match="not .json or .toml"):
        read_task_file(tmp_path / "t.yaml")
    toml = tmp_path / "t.toml"
    toml.write_text('[[tasks]]\nname = "a"\nkind = "classification"\ndata = "sub/a.csv"\n')
    assert read_task_file(toml) == [Task("a", "classification", str(tmp_path / "sub" / "a.csv"))]
    monkeypatch.setattr(task_list, "tomllib", None)  # Python 3.10 without tomli: a clear refusal
    with pytest.raises(DataFileError, match="needs Python 3.11 or the tomli package"):
        read_task_file(toml)


def test_output_dir_checkpoints_and_a_refit_resumes(tiny_bert, tmp_path, memory_tasks, monkeypatch):
    """With output_dir every phase checkpoints; fitting again there continues the finished run (nothing retrained)."""
    from layerwise.methods.multitask.task import TaskPhase

    tasks = [memory_tasks[0], Task("similar", "pair_regression", memory_tasks[1].data, dev=memory_tasks[1].data)]
    est = MultitaskModel(str(tiny_bert), tasks=tasks, output_dir=str(tmp_path / "ckpt"), **TINY).fit()
    assert (tmp_path / "ckpt" / "tasks" / "last").is_dir() and (tmp_path / "ckpt" / "tasks" / "best").is_dir()

    def no_training(self, step, micro):
        raise AssertionError("a finished phase was trained again")

    monkeypatch.setattr(TaskPhase, "loss", no_training)
    again = clone(est).fit()
    probe = ["a man plays the guitar .", "a dog ."]
    np.testing.assert_array_equal(again.encode(probe), est.encode(probe))
    assert again.dev_scores_ == est.dev_scores_
    with pytest.raises(UsageError, match=r"output_dir=.* holds the checkpoints of a fit with other settings \(.*lr"):
        clone(est).set_params(lr=5e-4).fit()


def test_cli_task_options_need_a_task_file(tiny_bert, env, capsys):
    err = _cli_error(capsys, ["multitask", "BASELINE", "--freeze", "sst", "--model", str(tiny_bert), "--output",
                              str(env / "out")])
    assert "--freeze apply to --tasks FILE" in err
    (env / "t.json").write_text(json.dumps({"tasks": [{"name": "a", "kind": "classification", "data": "a.csv"}]}))
    err = _cli_error(capsys, ["multitask", "BASELINE", "--tasks", str(env / "t.json"), "--model", str(tiny_bert),
                              "--output", str(env / "out")])
    assert "leave out experiment names" in err


def test_frozen_tasks_train_their_head_and_mix_only(tiny_bert, memory_tasks):
    from transformers import AutoModel

    task = Task("sentiment", "classification", memory_tasks[0].data, layer="mix")
    est = MultitaskModel(str(tiny_bert), tasks=[task], freeze=["sentiment"], **TINY).fit()
    assert [p["name"] for p in est.history_] == ["sentiment_head"]
    original = AutoModel.from_pretrained(tiny_bert).state_dict()
    for name, tensor in est.network_.encoder.state_dict().items():
        assert torch.equal(tensor, original[name]), name
    assert not np.allclose(est.layer_weights_["sentiment"], 1 / 3)  # the task's layer mix trained with its head


def test_pair_classification_with_three_classes(tiny_bert):
    first, second = SENTENCES[:9], SENTENCES[3:12]
    labels = ["entailment", "neutral", "contradiction"] * 3
    task = Task("nli3", "pair_classification", (first, second, labels), dev=(first, second, labels))
    est = MultitaskModel(str(tiny_bert), tasks=[task], **TINY).fit()
    assert est.network_.heads["nli3"].n_outputs == 3 and est.tasks_["nli3"].label_names == sorted(set(labels))
    pred = est.predict("nli3", (first, second))
    assert set(pred) <= set(labels)
    assert est.score("nli3", (first, second), labels) == pytest.approx(est.dev_scores_["nli3"]["accuracy"])
