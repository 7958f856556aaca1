import numpy as np
import pytest

from layerwise.evaluation.retrieval import (
    FaissIndex,
    exact_topk,
    first_relevant_ranks,
    load_quora_retrieval,
    reciprocal_ranks,
    retrieval_metrics,
    search,
)


def test_faiss_flat_topk_equals_exact_topk():
    rng = np.random.default_rng(0)
    corpus = rng.normal(size=(500, 16)).astype(np.float32)
    queries = rng.normal(size=(40, 16)).astype(np.float32)
    s_ref, i_ref = exact_topk(queries, corpus, 10)
    s, i = FaissIndex("flat").fit(corpus).search(queries, 10)
    np.testing.assert_allclose(s, s_ref, atol=1e-5)
    # ids may differ only where scores tie within float error
    differ = i != i_ref
    assert (np.abs(s - s_ref)[differ] < 1e-5).all()
    assert differ.mean() < 0.01


def test_faiss_ivf_with_all_cells_probed_is_exact():
    rng = np.random.default_rng(1)
    corpus = rng.normal(size=(400, 8)).astype(np.float32)
    queries = rng.normal(size=(30, 8)).astype(np.float32)
    _, i_ref = exact_topk(queries, corpus, 5)
    _, i = FaissIndex("ivf", nlist=8, nprobe=8).fit(corpus).search(queries, 5)
    assert (i == i_ref).mean() > 0.99
    with pytest.raises(ValueError, match="nlist"):
        FaissIndex("ivf", nlist=1000).fit(corpus)
    with pytest.raises(ValueError, match="unknown index kind"):
        FaissIndex("hnsw")


def test_metrics_by_hand():
    ids = np.array([[3, 1, 2], [5, 6, 7]])
    rel = [frozenset({1}), frozenset({9, 6})]
    m = retrieval_metrics(ids, rel, ks=(1, 2))
    assert m["mrr@10"] == pytest.approx(100 * (1 / 2 + 1 / 2) / 2)
    assert m["recall@1"] == 0.0
    assert m["recall@2"] == pytest.approx(100 * (1.0 + 0.5) / 2)
    ranks = first_relevant_ranks(np.array([[3, 1, 2], [5, 6, 7], [0, 2, 4]]), [*rel, frozenset({8})], 10)
    assert ranks.tolist() == [2, 2, 0]  # 0: no relevant result in the top 10
    assert reciprocal_ranks(ranks).tolist() == [0.5, 0.5, 0.0]


def test_quora_loader_and_search_drop_the_query(tmp_path):
    q = tmp_path / "quora"
    q.mkdir()
    (q / "dev.tsv").write_text(
        "1\tHow do I learn ?\tWhat is the way to learn ?\t1\n"
        "0\tHow do I learn ?\tWhere is Paris ?\t2\n"
        "1\tWhere is Paris ?\tIn which country is Paris ?\t3\n"
    )
    data = load_quora_retrieval(tmp_path, "dev")
    assert len(data.corpus) == 4 and len(data.queries) == 2
    assert data.relevant[0] == frozenset({data.corpus.index("What is the way to learn ?")})
    emb = np.random.default_rng(0).normal(size=(4, 8)).astype(np.float32)
    emb[1] = emb[0] + 0.05 * emb[1]  # the duplicate is nearest to the first query
    exact = search(data, emb, k=3)
    flat = search(data, emb, index=FaissIndex("flat"), k=3)
    assert exact["mrr@10"] == flat["mrr@10"]
    assert exact["recall@1"] >= 50.0
    with pytest.raises(ValueError, match="unknown Quora split"):
        load_quora_retrieval(tmp_path, "train")
