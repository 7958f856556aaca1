"""Paired bootstrap tests: the fast path against a slow obvious twin (repeat the units, scipy's spearmanr)."""

import warnings

import numpy as np
import pytest
from scipy.stats import pearsonr, spearmanr

from layerwise.evaluation import resampled
from layerwise.evaluation.significance import (
    BOOTSTRAP_TEST,
    SignificanceResult,
    SpearmanResamples,
    bootstrap_counts,
    bootstrap_scores,
    compare_scores,
    paired_bootstrap_accuracy,
    paired_bootstrap_spearman,
    resampled_pearson,
    resampled_spearman,
)


def _slow_spearman(x, gold, c):
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy warns on a resample of one distinct value (NaN, as the fast path)
        return spearmanr(np.repeat(x, c), np.repeat(gold, c)).statistic


def _slow_p(observed, draws):
    draws = np.asarray(draws)
    tol = 1e-9 * max(1.0, abs(observed))  # float noise on the boundary counts as on it
    return (1 + sum(not abs(d - observed) < abs(observed) - tol for d in draws)) / (len(draws) + 1)


def _slow_spearman_test(gold, a, b, rows, groups, aggregation, n_resamples, seed):
    """The obvious way: per resample, expand every evaluation's drawn rows and call scipy."""
    units = np.unique(np.concatenate(rows))

    def stat(weight_of):  # weight_of: unit -> multiplicity
        total = 0.0
        for k, r in enumerate(rows):
            cells = [r] if aggregation == "all" else [r[groups[r] == g] for g in np.unique(groups[r])]
            parts, sizes = [], []
            for cell in cells:
                c = np.array([weight_of[i] for i in cell])
                parts.append(_slow_spearman(a[k][cell], gold[cell], c) - _slow_spearman(b[k][cell], gold[cell], c))
                sizes.append(c.sum())
            w = np.array(sizes) / sum(sizes) if aggregation == "wmean" else np.full(len(cells), 1 / len(cells))
            total += float(np.dot(w, parts))
        return 100 * total / len(rows)

    observed = stat(dict.fromkeys(units.tolist(), 1))
    draws = [stat(dict(zip(units.tolist(), row))) for block in bootstrap_counts(len(units), n_resamples, seed)
             for row in block]
    return observed, _slow_p(observed, draws)


def _systems(rng, n, ties=True):
    gold = rng.integers(0, 6, n).astype(float) if ties else rng.normal(size=n)
    a = gold + rng.normal(scale=1.0, size=n)
    b = gold + rng.normal(scale=1.5, size=n)
    return gold, np.round(a, 1), np.round(b, 1)  # rounding makes ties in the systems too


@pytest.mark.parametrize(("n", "ties"), [(40, True), (40, False), (6, False), (7, True)])
def test_resampled_spearman_matches_scipy_on_expanded_samples(n, ties):
    rng = np.random.default_rng(n)
    gold, a, _ = _systems(rng, n, ties=ties)
    if not ties:
        a = gold + rng.normal(size=n)  # no two values equal: a unit drawn twice is the only tie
    counts = next(bootstrap_counts(n, 150, seed=3, batch=150))  # more rows than one chunk of the fast path
    assert len(counts) > resampled._CHUNK
    fast = resampled_spearman(a, gold, counts)
    slow = [_slow_spearman(a, gold, c) for c in counts]
    np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-12)


def test_shared_resamples_score_every_system_as_a_fresh_draw_does():
    rng = np.random.default_rng(5)
    gold, a, b = _systems(rng, 60)
    rows = [np.arange(0, 40), np.arange(20, 60)]
    shared = SpearmanResamples(gold, n_resamples=300, seed=2)
    for system in (a, b, a):  # the gold side is computed once, then read by every system
        fresh = bootstrap_scores(system, rows, metric="spearman", gold=gold, n_resamples=300, seed=2)
        got = shared.scores(system, rows)
        np.testing.assert_array_equal(got.observed, fresh.observed)
        np.testing.assert_array_equal(got.resampled, fresh.resampled)
    counts = np.concatenate(list(bootstrap_counts(60, 300, seed=2)))
    slow = [100 * _slow_spearman(b[rows[1]], gold[rows[1]], c[rows[1]]) for c in counts[:25]]
    np.testing.assert_allclose(shared.scores(b, rows).resampled[:25, 1], slow, rtol=0, atol=1e-10)


def test_all_ones_counts_give_the_plain_spearman():
    rng = np.random.default_rng(1)
    gold, a, _ = _systems(rng, 25)
    fast = resampled_spearman(a, gold, np.ones((1, 25), dtype=np.int64))[0]
    assert fast == pytest.approx(spearmanr(a, gold).statistic, abs=1e-12)


def test_bootstrap_counts_are_seeded_and_sum_to_n():
    blocks = list(bootstrap_counts(10, 7, seed=5, batch=3))
    assert [len(b) for b in blocks] == [3, 3, 1]
    assert all((b.sum(axis=1) == 10).all() for b in blocks)
    again = list(bootstrap_counts(10, 7, seed=5, batch=3))
    assert all((x == y).all() for x, y in zip(blocks, again))
    assert not all((x == y).all() for x, y in zip(blocks, bootstrap_counts(10, 7, seed=6, batch=3)))


@pytest.mark.parametrize("aggregation", ["all", "wmean", "mean"])
def test_spearman_test_matches_its_slow_twin_over_overlapping_splits(aggregation):
    rng = np.random.default_rng(2)
    n, k = 36, 3
    gold, _, _ = _systems(rng, n)
    a = np.stack([np.round(gold + rng.normal(scale=1.0, size=n), 1) for _ in range(k)])  # a system per split
    b = np.stack([np.round(gold + rng.normal(scale=1.4, size=n), 1) for _ in range(k)])
    rows = [np.sort(rng.choice(n, 24, replace=False)) for _ in range(k)]  # overlapping test parts, some units unused
    groups = np.repeat(["x", "y", "z"], n // 3)
    fast = paired_bootstrap_spearman(gold, a, b, rows=rows, groups=groups, aggregation=aggregation,
                                     n_resamples=300, seed=7)  # more resamples than one block of draws
    observed, p = _slow_spearman_test(gold, a, b, rows, groups, aggregation, 300, 7)
    assert fast.difference == pytest.approx(observed, abs=1e-9)
    assert fast.p_value == pytest.approx(p, abs=1e-12)
    assert fast.n_units == len(np.unique(np.concatenate(rows)))
    assert fast.test == BOOTSTRAP_TEST and fast.metric == "spearman"


def test_a_clearly_better_system_is_significant_and_a_copy_is_not():
    rng = np.random.default_rng(4)
    gold = rng.normal(size=400)
    good, bad = gold + rng.normal(scale=0.3, size=400), gold + rng.normal(scale=2.0, size=400)
    better = paired_bootstrap_spearman(gold, good, bad, n_resamples=500, seed=0)
    assert better.difference > 0 and better.significant(0.01)
    same = paired_bootstrap_spearman(gold, good, good + 1e-3 * rng.normal(size=400), n_resamples=500, seed=0)
    assert not same.significant(0.01)


def test_accuracy_test_matches_its_slow_twin():
    rng = np.random.default_rng(5)
    n = 50
    ca, cb = rng.random(n) < 0.8, rng.random(n) < 0.6
    folds = np.array_split(rng.permutation(n), 5)  # disjoint test folds, as outer cross-validation
    fast = paired_bootstrap_accuracy(ca, cb, rows=folds, n_resamples=300, seed=1)

    def stat(weight_of):
        per = []
        for r in folds:
            w = np.array([weight_of[i] for i in r], dtype=float)
            per.append(np.dot(w, ca[r].astype(float) - cb[r]) / w.sum() if w.sum() else np.nan)
        return 100 * np.mean(per)

    observed = stat(dict.fromkeys(range(n), 1))
    draws = [stat(dict(enumerate(row))) for block in bootstrap_counts(n, 300, 1) for row in block]
    assert fast.difference == pytest.approx(observed, abs=1e-9)
    assert fast.difference == pytest.approx(100 * (ca.mean() - cb.mean()), abs=1e-9)
    assert fast.p_value == pytest.approx(_slow_p(observed, draws), abs=1e-12)


def test_result_round_trip_and_shape_errors():
    r = SignificanceResult(BOOTSTRAP_TEST, "spearman", 1.5, 0.004, 100, 0, 30)
    assert SignificanceResult.from_dict(r.to_dict()) == r and r.significant() and not r.significant(0.001)
    with pytest.raises(ValueError, match="shape"):
        paired_bootstrap_spearman(np.arange(5.0), np.arange(5.0), np.arange(4.0))
    with pytest.raises(ValueError, match="at least 2 row"):
        paired_bootstrap_spearman(np.arange(5.0), np.arange(5.0), np.arange(5.0)[::-1], rows=[[0]])


def test_resampled_pearson_matches_scipy_on_expanded_samples():
    rng = np.random.default_rng(6)
    gold, a, _ = _systems(rng, 40)
    counts = next(bootstrap_counts(40, 30, seed=3, batch=30))
    slow = [pearsonr(np.repeat(a, c), np.repeat(gold, c)).statistic for c in counts]
    np.testing.assert_allclose(resampled_pearson(a, gold, counts), slow, rtol=0, atol=1e-12)


def test_compare_scores_with_the_same_evaluations_is_the_paired_test():
    rng = np.random.default_rng(7)
    n, k = 60, 3
    gold, _, _ = _systems(rng, n)
    a = np.stack([np.round(gold + rng.normal(scale=1.0, size=n), 1) for _ in range(k)])  # a system per seed
    b = np.stack([np.round(gold + rng.normal(scale=1.3, size=n), 1) for _ in range(k)])
    rows = [np.arange(n)] * k
    want = paired_bootstrap_spearman(gold, a, b, rows=rows, n_resamples=300, seed=2)
    got = compare_scores(bootstrap_scores(a, rows, metric="spearman", gold=gold, n_resamples=300, seed=2),
                         bootstrap_scores(b, rows, metric="spearman", gold=gold, n_resamples=300, seed=2))
    assert got.difference == pytest.approx(want.difference, abs=1e-9)
    assert got.p_value == want.p_value and got.n_units == want.n_units == n


@pytest.mark.parametrize("metric", ["spearman", "pearson"])
def test_compare_scores_of_unequal_seed_counts_matches_its_slow_twin(metric):
    """A row of 3 seeds over two disjoint sets against a baseline of 1 seed: the difference of the seed means."""
    rng = np.random.default_rng(8)
    n = 30
    gold, _, _ = _systems(rng, n)
    sets = [np.arange(0, 14), np.arange(14, n)]
    a = [np.round(gold + rng.normal(scale=1.0, size=n), 1) for _ in range(3)]
    b = [np.round(gold + rng.normal(scale=1.5, size=n), 1)]
    rows_a, rows_b = [r for _ in a for r in sets], [r for _ in b for r in sets]
    out_a, out_b = [x for x in a for _ in sets], [x for x in b for _ in sets]
    got = compare_scores(bootstrap_scores(out_a, rows_a, metric=metric, gold=gold, n_resamples=120, seed=4),
                         bootstrap_scores(out_b, rows_b, metric=metric, gold=gold, n_resamples=120, seed=4))
    corr = spearmanr if metric == "spearman" else pearsonr

    def stat(c):
        def mean(outs, rows):
            return np.mean([corr(np.repeat(o[r], c[r]), np.repeat(gold[r], c[r])).statistic for o, r in zip(outs, rows)])
        return 100 * (mean(out_a, rows_a) - mean(out_b, rows_b))

    observed = stat(np.ones(n, dtype=int))
    draws = [stat(row) for block in bootstrap_counts(n, 120, 4) for row in block]
    assert got.difference == pytest.approx(observed, abs=1e-9)
    assert got.p_value == pytest.approx(_slow_p(observed, draws), abs=1e-12)


def test_compare_scores_of_seed_averaged_correctness_is_the_accuracy_test():
    rng = np.random.default_rng(9)
    ca, cb = rng.random((2, 40)) < 0.7, rng.random(40) < 0.6
    want = paired_bootstrap_accuracy(ca.mean(axis=0), cb, n_resamples=200, seed=3)
    got = compare_scores(bootstrap_scores(ca, [np.arange(40)] * 2, metric="accuracy", n_resamples=200, seed=3),
                         bootstrap_scores(cb, metric="accuracy", n_resamples=200, seed=3))
    assert got.difference == pytest.approx(want.difference, abs=1e-9)
    assert got.p_value == want.p_value


def test_compare_scores_of_a_copy_is_p_one_and_mismatches_are_refused():
    rng = np.random.default_rng(10)
    gold, a, _ = _systems(rng, 30)
    s = bootstrap_scores(a, metric="spearman", gold=gold, n_resamples=50, seed=0)
    same = compare_scores(s, bootstrap_scores(a.copy(), metric="spearman", gold=gold, n_resamples=50, seed=0))
    assert same.difference == 0 and same.p_value == 1.0 and not same.significant()
    with pytest.raises(ValueError, match="different resamples"):
        compare_scores(s, bootstrap_scores(a, metric="spearman", gold=gold, n_resamples=50, seed=1))
    with pytest.raises(ValueError, match="unknown metric"):
        bootstrap_scores(a, metric="kendall", gold=gold)


def test_packed_ranks_keep_order_and_ties_and_scores_round_trip():
    from layerwise.evaluation.unit_outputs import (
        pack_ranks,
        pack_scores,
        pack_small,
        unpack_ranks,
        unpack_scores,
        unpack_small,
    )

    rng = np.random.default_rng(11)
    x = np.round(rng.normal(size=50), 1)  # ties
    gold = rng.normal(size=50)
    r = unpack_ranks(pack_ranks(x), 50)
    assert spearmanr(r, gold).statistic == spearmanr(x, gold).statistic
    assert ((r[:, None] < r[None, :]) == (x[:, None] < x[None, :])).all()
    assert (unpack_scores(pack_scores(x), 50) == x).all()
    many = np.arange(70_000.0)[::-1]
    assert pack_ranks(many).startswith("u4:") and (unpack_ranks(pack_ranks(many)) == many).all()
    with pytest.raises(ValueError, match="expected 49"):
        unpack_ranks(pack_ranks(x), 49)
    with pytest.raises(ValueError, match="finite"):
        pack_ranks(np.array([1.0, np.nan]))
    hits = np.array([0, 1, 10, 3, 0])
    assert (unpack_small(pack_small(hits), 5) == hits).all()
    with pytest.raises(ValueError, match="0..255"):
        pack_small(np.array([1, 256]))


def test_compare_combined_matches_its_slow_twin_and_checks_its_terms():
    """A weighted sum of two tasks' differences (accuracy and Pearson), each task's units drawn on their own."""
    from layerwise.evaluation.significance import compare_combined

    rng = np.random.default_rng(11)
    ca, cb = rng.random((2, 25)) < 0.7, rng.random((1, 25)) < 0.6
    gold, a, b = _systems(rng, 18)
    acc = (bootstrap_scores(ca, [np.arange(25)] * 2, metric="accuracy", n_resamples=90, seed=5),
           bootstrap_scores(cb, metric="accuracy", n_resamples=90, seed=5))
    cor = (bootstrap_scores(a, metric="pearson", gold=gold, n_resamples=90, seed=6),
           bootstrap_scores(b, metric="pearson", gold=gold, n_resamples=90, seed=6))
    got = compare_combined([(*acc, 1 / 3), (*cor, 1 / 6)])

    def stat(c1, c2):
        d_acc = np.mean([np.repeat(x, c1).mean() for x in ca]) - np.repeat(cb[0], c1).mean()
        d_cor = (pearsonr(np.repeat(a, c2), np.repeat(gold, c2)).statistic
                 - pearsonr(np.repeat(b, c2), np.repeat(gold, c2)).statistic)
        return 100 * (d_acc / 3 + d_cor / 6)

    observed = stat(np.ones(25, dtype=int), np.ones(18, dtype=int))
    draws = [stat(r1, r2) for b1, b2 in zip(bootstrap_counts(25, 90, 5), bootstrap_counts(18, 90, 6))
             for r1, r2 in zip(b1, b2)]
    assert got.difference == pytest.approx(observed, abs=1e-9) and got.metric == "combined" and got.n_units == 43
    assert got.p_value == pytest.approx(_slow_p(observed, draws), abs=1e-12)
    same = compare_combined([(acc[0], acc[0], 1 / 3), (cor[0], cor[0], 1 / 6)])
    assert same.difference == 0 and same.p_value == 1.0
    with pytest.raises(ValueError, match="distinct seeds"):
        compare_combined([(*acc, 1.0), (*acc, 1.0)])
    with pytest.raises(ValueError, match="at least one"):
        compare_combined([])
