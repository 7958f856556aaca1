import numpy as np
import pytest
from scipy.stats import pearsonr, spearmanr

from layerwise.evaluation.metrics import cosine_rows, pearson, spearman, spearman_rows


def test_spearman_matches_scipy_with_ties():
    rng = np.random.default_rng(0)
    gold = rng.integers(0, 6, size=200).astype(float)  # many ties, as STS gold scores have
    pred = rng.normal(size=200)
    pred[:40] = np.round(pred[:40], 1)  # ties in the prediction too
    assert spearman(pred, gold) == pytest.approx(spearmanr(pred, gold)[0], abs=1e-12)
    assert pearson(pred, gold) == pytest.approx(pearsonr(pred, gold)[0], abs=1e-12)


@pytest.mark.filterwarnings("ignore:An input array is constant")  # row 5 is constant on purpose (scipy warns)
def test_spearman_rows_equals_scipy_per_row_with_and_without_ties():
    rng = np.random.default_rng(1)
    m, n = 50, 97
    gold = np.round(rng.uniform(0, 5, size=n) * 2) / 2
    pred = rng.normal(size=(m, n))
    pred[::3] = np.round(pred[::3], 1)  # every third row has tied predictions
    pred[5] = 1.0  # a constant row: rho undefined, as in scipy
    got = spearman_rows(pred, gold)
    for i in range(m):
        want = spearmanr(pred[i], gold)[0]
        if np.isnan(want):
            assert np.isnan(got[i])
        else:
            assert got[i] == pytest.approx(want, abs=1e-12), i


def test_spearman_rows_no_ties_fast_path():
    rng = np.random.default_rng(2)
    gold = rng.normal(size=300)
    pred = rng.normal(size=(20, 300))
    want = [spearmanr(p, gold)[0] for p in pred]
    np.testing.assert_allclose(spearman_rows(pred, gold), want, atol=1e-12)


def test_cosine_rows():
    a = np.array([[1.0, 0.0], [1.0, 1.0]])
    b = np.array([[0.0, 2.0], [2.0, 2.0]])
    np.testing.assert_allclose(cosine_rows(a, b), [0.0, 1.0])


@pytest.mark.parametrize("fn", [spearman, pearson])
def test_mismatched_and_empty_input(fn):
    with pytest.raises(ValueError, match="differ in length"):
        fn(np.zeros(3), np.zeros(4))
    with pytest.raises(ValueError, match="at least 2"):
        fn(np.zeros(1), np.zeros(1))


def test_spearman_rows_shape_errors():
    with pytest.raises(ValueError, match="expected"):
        spearman_rows(np.zeros((2, 3)), np.zeros(4))


def test_rank_correlator_is_exact_on_near_ties_signed_zeros_and_nan():
    from layerwise.evaluation.metrics import RankCorrelator

    rng = np.random.default_rng(3)
    gold = np.round(rng.uniform(0, 5, size=64), 1)
    rows = rng.normal(size=(6, 64))
    rows[0, :10] = np.nextafter(rows[0, 10], 1)  # values one ulp apart: truncated keys collide
    rows[0, 10:20] = rows[0, 10]  # exact ties
    rows[1, :5] = 0.0
    rows[1, 5:10] = -0.0  # -0.0 == 0.0 must be one tie group
    rows[2, 3] = np.nan
    rows[3] = -np.abs(rows[3])  # negative values: the key transform must keep their order
    got = RankCorrelator(gold)(rows)
    for i in range(6):
        want = spearmanr(rows[i], gold)[0]
        if np.isnan(want):
            assert np.isnan(got[i])
        else:
            assert got[i] == pytest.approx(want, abs=1e-12), i


@pytest.mark.filterwarnings("ignore:An input array is constant")
def test_gold_order_correlator_equals_scipy_on_ties_near_ties_and_odd_values():
    from layerwise.evaluation.metrics import GoldOrderCorrelator

    rng = np.random.default_rng(4)
    gold = np.round(rng.uniform(0, 5, size=64), 1)  # many gold ties
    rows = np.clip(rng.normal(0.3, 0.4, size=(10, 64)), -1, 1)  # cosines
    rows[0, :10] = np.nextafter(rows[0, 10], 2)  # one ulp apart: truncated keys collide
    rows[0, 10:20] = rows[0, 10]  # exact ties
    rows[1, :5] = 0.0
    rows[1, 5:10] = -0.0  # -0.0 == 0.0: one tie group
    rows[2, 3] = np.nan
    rows[3] = 0.5  # constant: undefined
    rows[4, 7] = 40.0  # outside [-1, 1]: ranked exactly
    rows[5, 9] = -np.inf
    rows[6] = rng.normal(size=64) * 1e-14  # all within a few ulps of 3.0 after the shift: every key collides
    rows[7, :] = np.round(rows[7], 2)  # ties everywhere
    corr = GoldOrderCorrelator(gold)
    got = corr(rows[:, corr.order])
    for i in range(len(rows)):
        want = spearmanr(rows[i], gold)[0]
        if np.isnan(want):
            assert np.isnan(got[i]), i
        else:
            assert got[i] == pytest.approx(want, abs=1e-12), i


def test_gold_order_correlator_gives_equal_doubles_for_equal_correlations():
    from layerwise.evaluation.metrics import GoldOrderCorrelator

    gold = np.array([1.0, 2.0, 2.0, 3.0, 4.0, 5.0])
    corr = GoldOrderCorrelator(gold)  # gold is sorted already: columns in gold order
    # the two rows differ only by swapping the two pairs of equal gold: the same rho, exactly
    rows = np.array([[0.1, 0.2, 0.3, 0.6, 0.4, 0.9], [0.1, 0.3, 0.2, 0.6, 0.4, 0.9]])
    got = corr(rows)
    assert got[0] == got[1]
    assert got[0] == pytest.approx(spearmanr(rows[0], gold)[0], abs=1e-12)
