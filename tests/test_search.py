import numpy as np
import pytest

from layerwise import LayerEncoder, LayerSubsetSearch, naive_subset_scores
from layerwise.methods.lc.search import count_subsets, subset_cosine


def _random_pairs(n=120, k=5, d=8, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(n, k, d)).astype(np.float32)
    b = (0.7 * a + rng.normal(size=(n, k, d))).astype(np.float32)
    # gold related to a few layers' similarity, rounded to create ties as STS gold has
    sim = np.einsum("nd,nd->n", a[:, 1], b[:, 1]) + np.einsum("nd,nd->n", a[:, -1], b[:, -1])
    gold = np.clip(np.round((sim - sim.min()) / (sim.max() - sim.min()) * 10) / 2, 0, 5)
    return a, b, gold


@pytest.mark.parametrize("k,max_layers", [(4, None), (6, None), (7, 3), (5, 1)])
def test_fast_search_equals_naive_mean_of_layers(k, max_layers):
    a, b, gold = _random_pairs(k=k, seed=k)
    fast = LayerSubsetSearch(max_layers=max_layers, chunk_size=7).fit(a, b, gold)
    naive = naive_subset_scores(a, b, gold, max_layers=max_layers)
    assert len(fast.scores_) == len(naive) == count_subsets(k, max_layers)
    assert sorted(fast.subsets_) == sorted(naive)
    for sub, score in naive.items():
        assert fast.score_of(sub) == pytest.approx(score, abs=1e-4)
    best = max(naive, key=naive.get)
    assert naive[fast.best_layers_] == pytest.approx(naive[best], abs=1e-10)


@pytest.mark.parametrize("aggregation", ["wmean", "mean"])
def test_fast_search_with_group_aggregation(aggregation):
    a, b, gold = _random_pairs(n=150, k=5, seed=3)
    groups = np.array(["x", "y", "z"])[np.random.default_rng(0).integers(0, 3, size=150)]
    fast = LayerSubsetSearch(aggregation=aggregation).fit(a, b, gold, groups=groups)
    naive = naive_subset_scores(a, b, gold, groups=groups, aggregation=aggregation)
    for sub, score in naive.items():
        assert fast.score_of(sub) == pytest.approx(score, abs=1e-4)


def test_search_on_tiny_random_model_stack(tiny_bert):
    enc = LayerEncoder(tiny_bert, cache_dir=False, show_progress=False)
    from conftest import SENTENCES

    s = enc.encode(SENTENCES)
    a, b = s.mean[:6], s.mean[6:]
    gold = np.array([5.0, 1.0, 2.0, 2.0, 4.0, 0.0])
    fast = LayerSubsetSearch().fit(a, b, gold)
    naive = naive_subset_scores(a, b, gold)
    assert fast.n_states_ == 3  # 2 layers + embedding output
    for sub, score in naive.items():
        assert fast.score_of(sub) == pytest.approx(score, abs=1e-4)


def test_results_api():
    a, b, gold = _random_pairs(k=5)
    s = LayerSubsetSearch().fit(a, b, gold)
    top = s.top(5)
    assert top[0] == (s.best_layers_, s.best_score_)
    assert [v for _, v in top] == sorted([v for _, v in top], reverse=True)
    by_size = s.best_by_size()
    assert sorted(by_size) == [1, 2, 3, 4, 5]
    assert max(v for _, v in by_size.values()) == pytest.approx(s.best_score_)
    assert by_size[5][0] == (0, 1, 2, 3, 4)


def test_subset_cosine_is_mean_of_layers():
    a, b, _ = _random_pairs(n=10, k=4)
    u = a[:, [0, 2]].mean(1)
    v = b[:, [0, 2]].mean(1)
    want = (u * v).sum(1) / np.linalg.norm(u, axis=1) / np.linalg.norm(v, axis=1)
    np.testing.assert_allclose(subset_cosine(a, b, (0, 2)), want, rtol=1e-6)


def test_errors():
    a, b, gold = _random_pairs(k=3)
    with pytest.raises(RuntimeError, match="not fitted"):
        LayerSubsetSearch().top()
    with pytest.raises(ValueError, match="scores but there are"):
        LayerSubsetSearch().fit(a, b, gold[:-1])
    with pytest.raises(ValueError, match="shape"):
        LayerSubsetSearch().fit(a, b[:, :2], gold)
    with pytest.raises(ValueError, match="aggregation"):
        LayerSubsetSearch(aggregation="median").fit(a, b, gold)
    with pytest.raises(ValueError, match="at least 2 pairs"):
        LayerSubsetSearch().fit(a[:1], b[:1], gold[:1])
    s = LayerSubsetSearch(max_layers=1).fit(a, b, gold)
    with pytest.raises(KeyError, match="not searched"):
        s.score_of((0, 1))


def test_identical_sentences_tie_exactly_in_both_paths():
    # real STS sets hold pairs of identical sentences: cosine 1.0 in both paths, so ties stay ties
    a, b, gold = _random_pairs(n=60, k=4, seed=5)
    b[:8] = a[:8]
    gold[:8] = 5.0
    fast = LayerSubsetSearch().fit(a, b, gold)
    naive = naive_subset_scores(a, b, gold)
    for sub, score in naive.items():
        assert fast.score_of(sub) == pytest.approx(score, abs=1e-10)
    assert (subset_cosine(a[:8], b[:8], (0, 3)) == 1.0).all()


def _assert_same_scores(fast, naive, atol=1e-4):
    for sub, score in naive.items():
        got = fast.score_of(sub)
        if np.isnan(score):
            assert np.isnan(got), sub
        else:
            assert got == pytest.approx(score, abs=atol), sub


@pytest.mark.parametrize("k,max_layers", [(7, None), (9, 4), (8, 8)])
def test_fast_search_with_both_halves_equals_naive(monkeypatch, k, max_layers):
    # a small table forces the split into a B table and A subsets (with 13 states of real models it always splits)
    from layerwise.methods.lc import _subset_gram

    monkeypatch.setattr(_subset_gram, "TABLE_BYTES", 24 * 80 * 8)  # 8 rows of 3n doubles: k_B = 3
    a, b, gold = _random_pairs(n=80, k=k, d=6, seed=k)
    b[:5] = a[:5]  # identical sides: cosine exactly 1.0 in both paths (ties)
    a[10:13], b[10:13] = a[20], b[20]  # duplicated pairs: equal cosines (ties) for every subset
    fast = LayerSubsetSearch(max_layers=max_layers, chunk_size=5).fit(a, b, gold)
    assert _subset_gram.SubsetGram(a, b, np.arange(80)).k_a == k - 3
    naive = naive_subset_scores(a, b, gold, max_layers=max_layers)
    assert len(fast.scores_) == len(naive)
    _assert_same_scores(fast, naive, atol=1e-10)


@pytest.mark.filterwarnings("ignore:An input array is constant")
def test_constant_cosines_give_nan_as_in_naive():
    # hidden state 0 gives the same vector on both sides of every pair (a constant cosine): undefined Spearman
    a, b, gold = _random_pairs(n=40, k=4, seed=2)
    a[:, 0] = 1.0
    b[:, 0] = 2.0
    gold[::2] = gold[1::2]  # ties in the gold scores too
    fast = LayerSubsetSearch().fit(a, b, gold)
    naive = naive_subset_scores(a, b, gold)
    assert np.isnan(naive[(0,)]) and np.isnan(fast.score_of((0,)))
    _assert_same_scores(fast, naive, atol=1e-10)
    assert 0 not in fast.best_layers_ or len(fast.best_layers_) > 1


def test_chunked_equals_unchunked_and_threads_do_not_change_scores(monkeypatch):
    from layerwise.methods.lc import _subset_gram

    a, b, gold = _random_pairs(n=50, k=6, seed=4)
    whole = LayerSubsetSearch(chunk_size=10_000, n_jobs=1).fit(a, b, gold)
    monkeypatch.setattr(_subset_gram, "TABLE_BYTES", 24 * 50 * 4)  # k_B = 2: several A subsets, tiles across them
    for chunk_size, n_jobs in [(1, 1), (3, 2), (7, 4), (None, 2)]:
        got = LayerSubsetSearch(chunk_size=chunk_size, n_jobs=n_jobs).fit(a, b, gold)
        np.testing.assert_array_equal(got.bits_, whole.bits_)
        np.testing.assert_array_equal(got.scores_, whole.scores_)
        assert got.best_layers_ == whole.best_layers_


def test_subsets_come_in_increasing_bits_and_masks_agree():
    a, b, gold = _random_pairs(n=30, k=5, seed=6)
    s = LayerSubsetSearch(max_layers=3).fit(a, b, gold)
    assert (np.diff(s.bits_) > 0).all() and len(s.bits_) == count_subsets(5, 3)
    assert s.subsets_ == [tuple(int(x) for x in np.flatnonzero(m)) for m in s.masks_]
    assert [sum(1 << x for x in sub) for sub in s.subsets_] == list(s.bits_)
    best = np.flatnonzero(s.scores_ == np.nanmax(s.scores_))[0]  # ties go to the subset with the smaller bits
    assert s.best_layers_ == s.subsets_[best]


def test_many_states_with_a_small_cap_equal_naive():
    # 40 states: the A side has 27 states, of which only subsets of at most 2 are enumerated
    a, b, gold = _random_pairs(n=40, k=40, d=5, seed=8)
    fast = LayerSubsetSearch(max_layers=2).fit(a, b, gold)
    naive = naive_subset_scores(a, b, gold, max_layers=2)
    assert len(fast.scores_) == len(naive) == count_subsets(40, 2)
    _assert_same_scores(fast, naive, atol=1e-10)
