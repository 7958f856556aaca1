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
from layerwise.errors import UsageError
from layerwise.export import check_no_code
from layerwise.export.no_code import code_references

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
    out = _make(tiny_bert).fit(SENTENCES).save(tmp_path / "saved")
    if int(ST.__version__.split(".")[0]) >= 6:
        with pytest.raises(ValueError, match="trust_remote_code"):
            ST.SentenceTransformer(str(out), device="cpu")
    else:  # pragma: no cover - the installed version decides
        ST.SentenceTransformer(str(out), device="cpu")


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
    from layerwise.export import export_trained_pooler

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
    with pytest.raises(UsageError, match="at least 2"):
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
