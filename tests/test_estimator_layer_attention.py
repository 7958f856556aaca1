"""LayerAttentionPooler: the estimator contract, fit on texts / pairs / triplets, save and load (no remote code),
export refusing folder code, search on a BEIR folder, and the `train` / `retrieval` commands on the user's files."""

import json
import shutil
from types import SimpleNamespace

import numpy as np
import pytest

from conftest import SENTENCES
from estimator_checks import check_estimator
from layerwise import LayerAttentionPooler, load_sentence_transformer
from layerwise.encoders.folder_code import check_no_code, code_references
from layerwise.errors import UsageError

ST = pytest.importorskip("sentence_transformers")
TOL = 1e-5
PAIRS = [(a, b) for a, b in zip(SENTENCES, SENTENCES[1:] + SENTENCES[:1])]
TRIPLETS = [(a, b, c) for (a, b), c in zip(PAIRS, SENTENCES[5:] + SENTENCES[:5])]
FAST = {"steps": 2, "batch_size": 4, "warmup_steps": 0, "max_length": 16, "lr": 1e-3, "eval_every": 0}


def _make(tiny_bert, **kw):
    return LayerAttentionPooler(str(tiny_bert), **{**FAST, **kw})


def test_check_estimator(tiny_bert):
    check_estimator(lambda: _make(tiny_bert), lambda est: est.fit(SENTENCES))


@pytest.mark.parametrize(("objective", "data"), [("unsup", SENTENCES), ("in_batch", PAIRS),
                                                 ("sup_hard_neg", TRIPLETS)])
def test_fit_save_load_and_sentence_transformer_give_the_same_embeddings(tmp_path, tiny_bert, objective, data):
    est = _make(tiny_bert, objective=objective).fit(data)
    ref = est.encode(SENTENCES)
    assert ref.shape == (len(SENTENCES), 32) and est.n_examples_ == len(data) and len(est.history_["loss"]) == 2
    out = est.save(tmp_path / "saved")
    assert not list(out.rglob("*.py")) and code_references(out) == []  # no code of its own, no auto_map
    types = [m["type"] for m in json.loads((out / "modules.json").read_text())]
    assert types[0].startswith("sentence_transformers.") and types[1].startswith("layerwise.")
    st = load_sentence_transformer(out, device="cpu")  # trust_remote_code stays False
    assert isinstance(st, ST.SentenceTransformer)
    np.testing.assert_allclose(st.encode(SENTENCES, convert_to_numpy=True, batch_size=5), ref, atol=TOL)
    back = LayerAttentionPooler.load(out)
    np.testing.assert_allclose(back.encode(SENTENCES), ref, atol=TOL)
    assert back.get_params() == est.get_params()
    readme = (out / "README.md").read_text()
    assert 'model = load_sentence_transformer("saved")' in readme and "trust_remote_code=True)" not in readme


def test_plain_sentence_transformer_refuses_a_layerwise_class_without_the_flag(tmp_path, tiny_bert):
    """Why load_sentence_transformer exists: sentence-transformers >= 6 imports no class outside its own package
    without trust_remote_code=True (which would also run a .py file placed in the folder); before 6 it did."""
    est = _make(tiny_bert).fit(SENTENCES)
    out = est.save(tmp_path / "saved")
    if int(ST.__version__.split(".")[0]) >= 6:
        with pytest.raises(ValueError, match="trust_remote_code"):
            ST.SentenceTransformer(str(out), device="cpu")
    else:  # sentence-transformers 5.x: the plain load imports the installed class and gives the same vectors
        plain = ST.SentenceTransformer(str(out), device="cpu")
        np.testing.assert_allclose(plain.encode(SENTENCES, convert_to_numpy=True), est.encode(SENTENCES), atol=TOL)


def test_folder_code_is_refused_everywhere(tmp_path, tiny_bert):
    est = _make(tiny_bert).fit(SENTENCES)
    out = est.save(tmp_path / "saved")
    evil = tmp_path / "evil"
    shutil.copytree(out, evil)
    (evil / "modeling_x.py").write_text("raise SystemExit('folder code ran')\n")
    with pytest.raises(UsageError, match="modeling_x.py"):
        load_sentence_transformer(evil)
    with pytest.raises(UsageError, match="names code"):
        LayerAttentionPooler.load(evil)
    (evil / "modeling_x.py").unlink()
    modules = json.loads((evil / "modules.json").read_text())
    modules[1]["type"] = "modeling_x.Pooler"
    (evil / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(UsageError, match="module type 'modeling_x.Pooler'"):
        load_sentence_transformer(evil)
    with pytest.raises(UsageError, match="trust_remote_code=True is refused"):
        load_sentence_transformer(out, trust_remote_code=True)
    modules[1]["type"] = "layerwise.errors.UsageError"  # in the package, but not a module class
    (evil / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(UsageError, match="not a sentence-transformers module class"):
        load_sentence_transformer(evil)


def test_export_refuses_a_source_naming_code_and_strips_auto_map(tmp_path, tiny_bert):
    from layerwise.encoders.trainable import SentenceModel
    from layerwise.methods.layer_attention.export import export_trained_pooler

    SentenceModel.from_pretrained(str(tiny_bert), max_length=16).save(tmp_path / "trained")
    config = tmp_path / "trained" / "encoder" / "config.json"
    data = json.loads(config.read_text())
    config.write_text(json.dumps({**data, "auto_map": {"AutoModel": "modeling_x.Model"}}))
    with pytest.raises(UsageError, match="auto_map"):
        export_trained_pooler(tmp_path / "trained", tmp_path / "exp")
    assert not (tmp_path / "exp").exists()
    est = _make(tiny_bert).fit(SENTENCES)
    est.model_.encoder.config.auto_map = {"AutoModel": "modeling_x.Model"}  # as a foreign source would carry
    out = est.save(tmp_path / "saved")
    assert "auto_map" not in json.loads((out / "config.json").read_text())
    check_no_code(out)


def test_objective_must_fit_the_data(tiny_bert):
    est = _make(tiny_bert, objective="sup_hard_neg")
    with pytest.raises(UsageError, match=r"objective='sup_hard_neg' trains on triplets.*train holds pairs.*"
                                         r"objective='in_batch'"):
        est.fit(PAIRS)
    with pytest.raises(UsageError, match="objective='in_batch' trains on pairs.*holds texts"):
        _make(tiny_bert, objective="in_batch").fit(SENTENCES)
    with pytest.raises(UsageError, match="objective='unsup' trains on texts.*holds triplets"):
        _make(tiny_bert).fit(TRIPLETS)
    with pytest.raises(UsageError, match=r"train\[2\]"):
        _make(tiny_bert).fit(["a", "b", ("c", "d")])
    with pytest.raises(UsageError, match="1 training example for the unsup objective.*at least 2"):
        _make(tiny_bert).fit(["only one"])
    with pytest.raises(UsageError, match="single string"):
        _make(tiny_bert).fit("a text")
    with pytest.raises(UsageError, match="objective='simcse' is unknown"):
        _make(tiny_bert, objective="simcse").fit(SENTENCES)
    with pytest.raises(UsageError, match="pooler='attn' is unknown"):
        _make(tiny_bert, pooler="attn").fit(SENTENCES)
    with pytest.raises(UsageError, match="steps=0"):
        _make(tiny_bert, steps=0).fit(SENTENCES)


def test_triplet_data_gives_pairs_or_triplets(tiny_bert):
    pairs = SimpleNamespace(anchors=[a for a, _ in PAIRS], positives=[p for _, p in PAIRS], negatives=None)
    a = _make(tiny_bert, objective="in_batch").fit(pairs)
    b = _make(tiny_bert, objective="in_batch").fit(PAIRS)
    np.testing.assert_allclose(a.encode(SENTENCES), b.encode(SENTENCES), atol=1e-6)  # one seed, one result
    trip = SimpleNamespace(anchors=[t[0] for t in TRIPLETS], positives=[t[1] for t in TRIPLETS],
                           negatives=[t[2] for t in TRIPLETS])
    with pytest.raises(UsageError, match="holds triplets"):
        _make(tiny_bert, objective="in_batch").fit(trip)
    assert _make(tiny_bert, objective="sup_hard_neg").fit(trip).n_examples_ == len(TRIPLETS)


def test_dev_keeps_the_best_state_and_output_dir_checkpoints_and_resumes(tmp_path, tiny_bert):
    from layerwise.encoders.trainable import SentenceModel
    from layerwise.evaluation.sts import sts_scores
    from layerwise.methods.layer_attention.train import ContrastiveTask
    from layerwise.training import seed_everything, train

    dev = SimpleNamespace(sentences1=SENTENCES[:6], sentences2=SENTENCES[6:], scores=np.arange(6, dtype=float))
    est = _make(tiny_bert, steps=4, eval_every=1).fit(SENTENCES, dev=dev)
    scores = [s for _, s in est.history_["dev"]]
    assert len(scores) == 4 and est.best_dev_ == max(scores)
    here = sts_scores(est.encode(dev.sentences1), est.encode(dev.sentences2), dev.scores)["spearman"]
    assert here == pytest.approx(est.best_dev_, abs=1e-4)  # the estimator holds the best state, not the last
    out = tmp_path / "run"
    full = _make(tiny_bert, steps=4, eval_every=2, output_dir=out).fit(SENTENCES)
    assert (out / "last").is_dir()
    with pytest.raises(FileExistsError, match="resume=True"):
        _make(tiny_bert, steps=4, eval_every=2, output_dir=out).fit(SENTENCES)
    with pytest.raises(UsageError, match="resume=True needs output_dir"):
        _make(tiny_bert, resume=True).fit(SENTENCES)
    shutil.rmtree(out)
    half = _make(tiny_bert, steps=4, eval_every=2)  # two steps of four, as an interruption would leave them
    seed_everything(0)
    model = SentenceModel.from_pretrained(str(tiny_bert), max_length=16)
    train(ContrastiveTask(model, list(SENTENCES), half.training_config()), half.training_config().training_config(),
          output_dir=out, max_steps_this_run=2)
    resumed = _make(tiny_bert, steps=4, eval_every=2, output_dir=out, resume=True).fit(SENTENCES)
    assert resumed.history_["step"] == [1, 2, 3, 4]
    np.testing.assert_allclose(resumed.encode(SENTENCES), full.encode(SENTENCES), atol=1e-5)


def test_beir_search_exact_agrees_with_a_slow_twin_and_faiss(tiny_bert):
    from layerwise.evaluation.retrieval import FaissIndex, QueryRetrievalData, search

    pytest.importorskip("faiss")
    rng = np.random.default_rng(0)
    corpus, queries = rng.normal(size=(30, 8)).astype(np.float32), rng.normal(size=(5, 8)).astype(np.float32)
    relevant = [frozenset(rng.choice(30, size=2, replace=False).tolist()) for _ in range(5)]
    data = QueryRetrievalData(corpus=[str(i) for i in range(30)], corpus_ids=[str(i) for i in range(30)],
                              query_texts=["q"] * 5, query_ids=[str(i) for i in range(5)], relevant=relevant,
                              split="test", source="", name="toy")
    exact = search(data, corpus, query_emb=queries)
    flat = search(data, corpus, query_emb=queries, index=FaissIndex("flat"))
    # the slow twin: every cosine, a full sort, reciprocal rank of the first relevant document in the top 10
    cos = (queries / np.linalg.norm(queries, axis=1, keepdims=True)) @ \
        (corpus / np.linalg.norm(corpus, axis=1, keepdims=True)).T
    rr = []
    for row, rel in zip(cos, relevant):
        order = sorted(range(30), key=lambda j: -row[j])[:10]
        rr.append(next((1 / (i + 1) for i, j in enumerate(order) if j in rel), 0.0))
    assert exact["mrr@10"] == pytest.approx(100 * np.mean(rr)) == pytest.approx(flat["mrr@10"])
    assert exact["recall@10"] == pytest.approx(flat["recall@10"])
    with pytest.raises(ValueError, match="query_emb"):
        search(data, corpus)


# the user's own files, in every format, with column names other than the defaults

def _write_table(path, header, rows):
    import csv

    fmt = path.suffix[1:]
    if fmt in ("csv", "tsv"):
        with path.open("w", newline="") as f:
            writer = csv.writer(f, delimiter="," if fmt == "csv" else "\t")
            writer.writerow(header)
            writer.writerows(rows)
    elif fmt == "jsonl":
        path.write_text("".join(json.dumps(dict(zip(header, r))) + "\n" for r in rows))
    elif fmt == "parquet":
        pa = pytest.importorskip("pyarrow")
        import pyarrow.parquet as pq

        pq.write_table(pa.table({h: [r[i] for r in rows] for i, h in enumerate(header)}), str(path))
    else:  # txt: one text a line
        path.write_text("".join(r[0] + "\n" for r in rows))
    return path


def _user_files(folder, fmt):
    folder.mkdir(parents=True, exist_ok=True)
    trip = _write_table(folder / f"my triplets.{fmt}", ["query", "pos", "neg"], TRIPLETS)
    pairs = _write_table(folder / f"my_pairs.{fmt}", ["query", "pos"], PAIRS)
    texts = _write_table(folder / f"my_texts.{fmt}", ["sentence"], [(s,) for s in SENTENCES])
    dev = _write_table(folder / f"my_dev.{'csv' if fmt == 'txt' else fmt}", ["left", "right", "sim"],
                       [(a, b, float(i % 5)) for i, (a, b) in enumerate(PAIRS)])
    return trip, pairs, texts, dev


def _write_beir(folder):
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": f"d{i}", "title": "", "text": s}) + "\n"
                                                 for i, s in enumerate(SENTENCES)))
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": f"q{i}", "text": SENTENCES[i] + " !"}) + "\n"
                                                  for i in range(0, 12, 3)))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"q{i}\td{i}\t1\n" for i in range(0, 12, 3)))
    return folder


@pytest.mark.parametrize("fmt", ["csv", "tsv", "jsonl", "parquet"])
def test_python_end_to_end_on_the_users_files(tmp_path, tiny_bert, fmt):
    from layerwise.data.readers import read_corpus, read_pairs, read_triplets

    trip, pairs, texts, dev = _user_files(tmp_path, fmt)
    triplets = read_triplets(trip, anchor="query", positive="pos", negative="neg")
    dev_pairs = read_pairs(dev, sentence1="left", sentence2="right", score="sim")
    est = _make(tiny_bert, objective="sup_hard_neg", eval_every=1).fit(triplets, dev=dev_pairs)
    assert est.n_examples_ == len(TRIPLETS) and len(est.history_["dev"]) == 2
    got = read_triplets(pairs, anchor="query", positive="pos", negative=None)
    assert _make(tiny_bert, objective="in_batch", steps=1).fit(got).encode(SENTENCES).shape == (12, 32)
    corpus = read_corpus(texts, column="sentence")
    assert _make(tiny_bert, steps=1).fit(corpus).n_examples_ == len(SENTENCES)


def _cli(args, capsys):
    from layerwise.cli import main

    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(("fmt", "objective"), [("csv", "sup_hard_neg"), ("tsv", "in_batch"), ("jsonl", "unsup"),
                                                ("parquet", "in_batch"), ("txt", "unsup")])
def test_train_command_on_the_users_files(tmp_path, tiny_bert, env, capsys, fmt, objective):
    trip, pairs, texts, dev = _user_files(tmp_path / "data", fmt)
    data = {"sup_hard_neg": trip, "in_batch": pairs, "unsup": texts}[objective]
    columns = {"sup_hard_neg": ["--anchor-column", "query", "--positive-column", "pos", "--negative-column", "neg"],
               "in_batch": ["--anchor-column", "query", "--positive-column", "pos"],
               "unsup": [] if fmt == "txt" else ["--text-column", "sentence"]}[objective]
    dev_args = ["--dev", str(dev), "--sentence1-column", "left", "--sentence2-column", "right", "--score-column", "sim"]
    out = tmp_path / "run"
    code, printed, err = _cli(["train", "--model", str(tiny_bert), "--objective", objective, "--train-data",
                               str(data), *columns, *dev_args, "--steps", "2", "--batch-size", "4",
                               "--eval-every", "1", "--max-length", "16", "--output", str(out), "-q"], capsys)
    assert code == 0, err
    label = {"sup_hard_neg": "my_triplets", "in_batch": "my_pairs", "unsup": "my_texts"}[objective]
    assert f"examples of {label}:" in printed
    assert "my_dev Spearman" in printed  # (the built-in STS-B dev, without --dev: tests/test_cli.py)
    doc = json.loads((out / "train.json").read_text())
    assert doc["training_data"].startswith(label) and doc["n_examples"] == len(SENTENCES)
    est = LayerAttentionPooler.load(out / "model")
    assert est.objective == objective and est.encode(SENTENCES).shape == (12, 32)
    np.testing.assert_allclose(load_sentence_transformer(out / "model").encode(SENTENCES, convert_to_numpy=True),
                               est.encode(SENTENCES), atol=TOL)


def test_retrieval_command_on_a_beir_folder(tmp_path, tiny_bert, env, capsys):
    pytest.importorskip("faiss")
    model = _make(tiny_bert).fit(SENTENCES).save(tmp_path / "model")
    beir = _write_beir(tmp_path / "my beir")
    code, printed, err = _cli(["retrieval", str(model), "--beir", str(beir), "--index", "exact", "flat",
                               "--output", str(tmp_path / "out"), "-q"], capsys)
    assert code == 0, err
    assert "my_beir test: 12 documents, 4 queries" in printed
    path = tmp_path / "out" / "retrieval-my_beir-test.json"
    from layerwise.benchmarks.layer_attention.results import RetrievalResult

    result = RetrievalResult.from_dict(json.loads(path.read_text()))
    assert [r.index for r in result.results] == ["exact (numpy)", "faiss flat"]
    assert result.results[0].mrr_at_10 == pytest.approx(result.results[1].mrr_at_10)
    assert result.data.name == "my_beir" and result.data.queries == 4


def test_retrieval_command_with_any_sentence_transformers_folder(tmp_path, tiny_bert, env, capsys):
    pytest.importorskip("faiss")
    from sentence_transformers import SentenceTransformer

    from layerwise.benchmarks.layer_attention.results import RetrievalResult
    from layerwise.data.readers import read_beir
    from layerwise.evaluation.retrieval import beir_retrieval, evaluate_retrieval
    from layerwise.methods.lc.export import SubsetExport, export_layer_subset

    folder = export_layer_subset(SubsetExport(model=str(tiny_bert), layers=(0, 2), max_length=16), tmp_path / "lc")
    beir = _write_beir(tmp_path / "my beir")
    code, printed, err = _cli(["retrieval", str(folder), "--beir", str(beir), "--index", "exact", "flat",
                               "--output", str(tmp_path / "out"), "-q"], capsys)
    assert code == 0, err
    result = RetrievalResult.from_dict(json.loads((tmp_path / "out" / "retrieval-my_beir-test.json").read_text()))
    assert result.pooler.startswith("the folder's own")
    st = SentenceTransformer(str(folder), device="cpu")  # the twin: the folder's own encode, searched directly
    want = evaluate_retrieval(lambda texts: st.encode(list(texts), convert_to_numpy=True),
                              beir_retrieval(read_beir(beir)), indexes=("exact",))
    assert result.results[0].mrr_at_10 == pytest.approx(want[0]["mrr@10"], abs=1e-9)
    capsys.readouterr()
    code, _, err = _cli(["retrieval", str(folder), "--beir", str(beir), "--without-pooler", "--index", "exact", "--output",
                         str(tmp_path / "out2"), "-q"], capsys)
    _one_line_error(code, err, "holds no trained pooler to leave out")


def _one_line_error(code, err, *words):
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("layerwise: error:") and "Traceback" not in err, err
    for word in words:
        assert word in lines[0], lines[0]


def test_bad_files_get_one_line_before_any_model_loads(tmp_path, tiny_bert, env, capsys, monkeypatch):
    from layerwise.encoders.trainable import SentenceModel

    def no_model(*args, **kwargs):
        raise AssertionError("a model was loaded before the data was checked")

    monkeypatch.setattr(SentenceModel, "from_pretrained", no_model)
    monkeypatch.setattr(SentenceModel, "load", no_model)
    trip, pairs, texts, dev = _user_files(tmp_path / "data", "csv")
    base = ["train", "--model", str(tiny_bert), "--steps", "1", "--output", str(tmp_path / "run")]
    _one_line_error(*_cli([*base, "--objective", "sup_hard_neg", "--train-data", str(trip)], capsys)[::2], "anchor")
    empty = tmp_path / "data" / "empty.csv"
    empty.write_text("")
    _one_line_error(*_cli([*base, "--objective", "in_batch", "--train-data", str(empty)], capsys)[::2], "empty")
    _one_line_error(*_cli([*base, "--objective", "unsup", "--train-data", str(texts), "--text-column", "text"],
                          capsys)[::2], "text")
    _one_line_error(*_cli([*base, "--objective", "sup_hard_neg", "--train-data", str(pairs), "--anchor-column",
                           "query", "--positive-column", "pos"], capsys)[::2], "sup_hard_neg")
    _one_line_error(*_cli([*base, "--objective", "unsup", "--train-data", str(texts), "--text-column", "sentence",
                           "--dev", str(dev)], capsys)[::2], "sentence1")
    assert not (tmp_path / "run").exists()
    beir = tmp_path / "beir"
    beir.mkdir()
    model = tmp_path / "model"
    model.mkdir()
    _one_line_error(*_cli(["retrieval", str(model), "--beir", str(beir)], capsys)[::2], "qrels")
