"""The transfer protocol: ridge screen vs scikit-learn, exhaustive choice vs a plain loop, splits, resume."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression, Ridge

from layerwise.layers import LayerStack
from layerwise.methods.lc.transfer import (
    CLASSIFIER,
    RidgeScreen,
    TransferFeatures,
    TransferProtocol,
    TransferResult,
    all_subsets,
    choose_subset,
    default_max_layers,
    fit_logreg,
    inner_splits,
    outer_splits,
    pair_features,
    relative_error_reduction,
    run_transfer,
    screen_agreement,
)
from layerwise.pooling import head_pooling


def _stack(rng, n, k=4, d=6, signal=None):
    mean = rng.normal(size=(n, k, d)).astype(np.float32)
    if signal is not None:  # make some layers informative so choices are not ties
        for layer, strength in signal.items():
            mean[:, layer, 0] += strength
    return LayerStack(mean=mean, cls=rng.normal(size=(n, k, d)).astype(np.float32))


def _task(seed=0, n=90, n_classes=3, k=4, d=6, pair=False):
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % n_classes
    first = _stack(rng, n, k, d)
    first.mean[:, 1, :n_classes] += 1.5 * np.eye(n_classes)[labels]  # layer 1 carries the label
    first.mean[:, k - 1, :n_classes] += 0.7 * np.eye(n_classes)[labels]
    second = _stack(rng, n, k, d) if pair else None
    return TransferFeatures(first=first, labels=labels, n_classes=n_classes, second=second)


def _ridge_reference(x_tr, y_tr, x_dev, y_dev, n_classes, alpha):
    """scikit-learn Ridge on explicit features, penalty alpha * trace(centred Gram) / p as RidgeScreen."""
    xc = x_tr - x_tr.mean(0)
    a = alpha * np.trace(xc.T @ xc) / x_tr.shape[1]
    onehot = np.eye(n_classes)[y_tr]
    model = Ridge(alpha=a, fit_intercept=True, solver="cholesky").fit(x_tr.astype(np.float64), onehot)
    return float((model.predict(x_dev.astype(np.float64)).argmax(1) == y_dev).mean())


@pytest.mark.parametrize("pair", [False, True])
def test_ridge_screen_equals_sklearn_ridge_on_explicit_features(pair):
    data = _task(pair=pair, n=80)
    rows = np.arange(3, 80)
    splits = inner_splits(data.labels[rows], n_splits=4, seed=1)
    subsets = all_subsets(data.n_states, 4)
    alpha = 0.05
    got = RidgeScreen(data, alpha=alpha).scores(rows, splits, subsets)
    for i, s in enumerate(subsets):
        x = data.features(s, rows=rows)
        y = data.labels[rows]
        for j, (tr, dev) in enumerate(splits):
            want = _ridge_reference(x[tr], y[tr], x[dev], y[dev], data.n_classes, alpha)
            assert got[i, j] == pytest.approx(want, abs=1e-12), (s, j)


def test_ridge_screen_chunking_does_not_change_scores():
    data = _task(n=70)
    rows = np.arange(70)
    splits = inner_splits(data.labels, n_splits=3, seed=0)
    subsets = all_subsets(4, 4)
    a = RidgeScreen(data).scores(rows, splits, subsets)
    b = RidgeScreen(data, chunk_bytes=1).scores(rows, splits, subsets)  # one subset per chunk
    np.testing.assert_array_equal(a, b)


def test_exhaustive_choice_equals_a_plain_loop_of_sklearn_logistic_regression():
    data = _task(n=90)
    rows = np.arange(90)
    splits = inner_splits(data.labels, n_splits=3, seed=2)
    subsets = all_subsets(4, 2)
    layers, inner, screen, short = choose_subset(data, rows, splits, subsets, shortlist=None, seed=5)
    # slow twin: scikit-learn's own LogisticRegression with the paper's settings, subset by subset
    want = {}
    for s in subsets:
        x = data.take(rows).first.mean[:, list(s)].mean(1)
        accs = []
        for tr, dev in splits:
            clf = LogisticRegression(random_state=5, **CLASSIFIER).fit(x[tr], data.labels[tr])
            accs.append(clf.score(x[dev], data.labels[dev]))
        want[s] = 100 * np.mean(accs)
    assert set(short) == {",".join(map(str, s)) for s in subsets}
    for s in subsets:
        assert short[",".join(map(str, s))] == pytest.approx(want[s], abs=1e-9)
    best = max(want.values())
    assert inner == pytest.approx(best)
    assert want[tuple(layers)] == pytest.approx(best)
    assert 1 in layers  # the informative layer


def test_shortlist_of_one_takes_the_ridge_choice():
    data = _task(n=90)
    rows = np.arange(90)
    splits = inner_splits(data.labels, n_splits=3, seed=2)
    subsets = all_subsets(4, 4)
    layers, inner, screen, short = choose_subset(data, rows, splits, subsets, shortlist=1, seed=0)
    assert short == {}
    assert tuple(layers) == subsets[int(np.argmax(screen))]
    assert inner == pytest.approx(screen.max())


def test_fit_logreg_is_the_papers_classifier():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(60, 5)), np.arange(60) % 2
    clf = fit_logreg(x, y, seed=3)
    assert (clf.solver, clf.tol, clf.max_iter, clf.C) == ("saga", 0.01, 200, 10.0)
    ref = LogisticRegression(solver="saga", tol=0.01, max_iter=200, C=10, random_state=3).fit(x, y)
    np.testing.assert_allclose(clf.coef_, ref.coef_)
    # a single-class training part gives a constant predictor instead of an error
    assert (fit_logreg(x, np.zeros(60, dtype=int)).predict(x) == 0).all()


def test_relative_error_reduction():
    assert relative_error_reduction(0.9, 0.8) == pytest.approx(0.5)
    assert relative_error_reduction(0.7, 0.8) == pytest.approx(-0.5)
    assert relative_error_reduction(0.8, 0.8) == 0.0
    assert math.isnan(relative_error_reduction(1.0, 1.0))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        relative_error_reduction(90.0, 80.0)  # percentages by mistake


def test_splits_are_seeded_stratified_and_disjoint():
    labels = np.array([0] * 60 + [1] * 20 + [2] * 20)
    a = outer_splits(labels, n_splits=3, seed=7)
    b = outer_splits(labels, n_splits=3, seed=7)
    for (tr, te), (tr2, te2) in zip(a, b):
        np.testing.assert_array_equal(tr, tr2)
        np.testing.assert_array_equal(te, te2)
        assert len(np.intersect1d(tr, te)) == 0 and len(tr) + len(te) == 100
        assert len(te) == 15
        assert np.bincount(labels[te], minlength=3).tolist() == [9, 3, 3]  # stratified
    assert not np.array_equal(a[0][1], a[1][1])  # split k uses seed + k
    inner = inner_splits(labels, n_splits=10, seed=0)
    assert len(inner) == 10 and all(len(dev) == 18 for _, dev in inner)
    # a class with one example cannot be stratified: plain shuffled splits instead of an error
    tiny = np.array([0, 0, 0, 1, 1, 1, 2, 0, 1, 0])
    assert len(inner_splits(tiny, n_splits=2, seed=0)) == 2


def test_pair_features_and_head_features():
    u, v = np.array([[1.0, -2.0]]), np.array([[3.0, 1.0]])
    np.testing.assert_array_equal(pair_features(u, v), [[1, -2, 3, 1, 2, 3, 3, -2]])
    rng = np.random.default_rng(1)
    st = _stack(rng, 5, k=3, d=4)
    w, b = rng.normal(size=(4, 4)), rng.normal(size=4)
    data = TransferFeatures(first=st, labels=np.zeros(5, int), n_classes=2, head=(w, b))
    np.testing.assert_allclose(data.features((0, 2), head=True), head_pooling(st, (0, 2), w, b), rtol=1e-6)
    np.testing.assert_allclose(data.features((1,), "cls", rows=[4, 0]), st.cls[[4, 0], 1])
    plain = TransferFeatures(first=st, labels=np.zeros(5, int), n_classes=2)
    with pytest.raises(ValueError, match="no trained pooler head"):
        plain.features((0,), head=True)


def test_bad_input_is_named():
    rng = np.random.default_rng(0)
    st = _stack(rng, 4)
    with pytest.raises(ValueError, match="3 labels for 4"):
        TransferFeatures(first=st, labels=[0, 1, 0], n_classes=2)
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 2\)"):
        TransferFeatures(first=st, labels=[0, 1, 2, 0], n_classes=2)
    with pytest.raises(ValueError, match="max_layers"):
        all_subsets(4, 0)
    assert default_max_layers(13) == 4 and default_max_layers(25) == 3
    assert len(all_subsets(13, 4)) == 1092


def test_run_transfer_resumes_a_cut_off_run(tmp_path):
    data = _task(n=120, k=3)
    straight = run_transfer(data, TransferProtocol(n_outer=3, n_inner=3, seed=4), task="toy")
    assert len(straight.splits) == 3 and set(straight.methods) == {"cls", "last", "last_four", "random", "lc"}
    saved = []

    class Stop(Exception):
        pass

    def stop_after_two(result):
        saved.append(TransferResult.from_dict(result.to_dict()))  # as written to disk and read back
        if len(result.splits) == 2:
            raise Stop

    with pytest.raises(Stop):
        run_transfer(data, TransferProtocol(n_outer=3, n_inner=3, seed=4), task="toy", on_split=stop_after_two)
    resumed = run_transfer(data, TransferProtocol(n_outer=3, n_inner=3, seed=4), task="toy", previous=saved[-1])
    assert [s.test for s in resumed.splits] == [s.test for s in straight.splits]
    assert [s.layers for s in resumed.splits] == [s.layers for s in straight.splits]
    # different settings: the saved splits are not reused
    other = run_transfer(data, TransferProtocol(n_outer=3, n_inner=2, seed=4), task="toy", previous=saved[-1])
    assert other.n_inner == 2 and len(other.splits) == 3
    ridge = run_transfer(data, TransferProtocol(n_outer=3, n_inner=3, seed=4, ridge_alpha=10.0), task="toy",
                         previous=saved[-1])
    assert ridge.ridge_alpha == 10.0 and [s.seconds for s in ridge.splits[:2]] != [s.seconds for s in saved[-1].splits]
    summary = straight.to_dict()
    assert set(summary["relative_error_reduction"]) == {"cls", "last", "last_four", "random"}


def test_max_splits_stops_after_the_first_outer_splits_and_a_later_run_continues_them():
    data = _task(n=120, k=3)
    protocol = TransferProtocol(n_outer=3, n_inner=3, seed=4)
    straight = run_transfer(data, protocol, task="toy")
    first = run_transfer(data, protocol, task="toy", max_splits=2)
    assert [s.test for s in first.splits] == [s.test for s in straight.splits[:2]]  # the full run's first two
    assert first.significance == straight.significance == {}  # a partial run is never tested as a whole
    again = run_transfer(data, protocol, task="toy", previous=first, max_splits=1)  # fewer asked: nothing dropped
    assert [s.seconds for s in again.splits] == [s.seconds for s in first.splits]
    rest = run_transfer(data, protocol, task="toy", previous=first)
    assert [s.test for s in rest.splits] == [s.test for s in straight.splits]
    assert [s.layers for s in rest.splits] == [s.layers for s in straight.splits]
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match="max_splits"):
            run_transfer(data, protocol, task="toy", max_splits=bad)


def test_screen_projection_keeps_the_gram_trick_exact():
    """With dim < d the screen equals scikit-learn Ridge on explicitly projected features."""
    import torch

    data = _task(n=80, d=8)
    rows = np.arange(80)
    splits = inner_splits(data.labels, n_splits=3, seed=0)
    subsets = all_subsets(4, 3)
    screen = RidgeScreen(data, alpha=0.05, dim=3)
    got = screen.scores(rows, splits, subsets)
    basis = screen.basis(torch.from_numpy(data.first.mean[rows]).double()).numpy()
    assert basis.shape == (8, 3)
    np.testing.assert_allclose(basis.T @ basis, np.eye(3), atol=1e-10)
    for i, s in enumerate(subsets):
        x = data.features(s).astype(np.float64) @ basis
        for j, (tr, dev) in enumerate(splits):
            want = _ridge_reference(x[tr], data.labels[tr], x[dev], data.labels[dev], data.n_classes, 0.05)
            assert got[i, j] == pytest.approx(want, abs=1e-12)
    with pytest.raises(ValueError, match="pair task"):
        RidgeScreen(_task(pair=True), dim=3)


@pytest.mark.parametrize("pair", [False, True])
def test_a_reused_screen_equals_fresh_screens_on_each_part(pair):
    """The sums over all rows kept between calls (train-dev = all minus the rows left out) change nothing."""
    data = _task(pair=pair, n=90)
    subsets = all_subsets(data.n_states, 3)
    reused = RidgeScreen(data, alpha=0.05)
    for td, _ in outer_splits(data.labels, n_splits=3, seed=0):
        splits = inner_splits(data.labels[td], n_splits=3, seed=1)
        got = reused.scores(td, splits, subsets)
        want = RidgeScreen(data, alpha=0.05, cache_bytes=0).scores(td, splits, subsets)
        np.testing.assert_allclose(got, want, atol=1e-12)
    assert reused._full  # the full-data sums were kept and used
    small = RidgeScreen(data, alpha=0.05, cache_bytes=0)
    assert not small._full


def test_inner_kfold_puts_every_row_in_one_dev_fold_stratified_and_seeded():
    from layerwise.evaluation.classification import inner_kfold

    labels = np.arange(60) % 3
    folds = inner_kfold(labels, n_splits=10, seed=1)
    dev = np.concatenate([d for _, d in folds])
    assert len(folds) == 10 and sorted(dev.tolist()) == list(range(60))  # a partition of the rows
    for tr, d in folds:
        assert len(np.intersect1d(tr, d)) == 0 and len(tr) + len(d) == 60
        assert np.bincount(labels[d]).tolist() == [2, 2, 2]  # stratified
    assert all((a[1] == b[1]).all() for a, b in zip(folds, inner_kfold(labels, n_splits=10, seed=1)))
    assert not all((a[1] == b[1]).all() for a, b in zip(folds, inner_kfold(labels, n_splits=10, seed=2)))
    with pytest.raises(ValueError, match="2 <= folds"):
        inner_kfold(labels, n_splits=1)
    with pytest.raises(ValueError, match="unknown inner splits"):
        TransferProtocol(inner="loo")


def test_exact_protocol_chooses_by_kfold_exhaustive_saga_and_reports_the_screens_agreement():
    """The paper's protocol (k-fold inner cross-validation, SAGA over every allowed subset) against a plain loop of
    scikit-learn's StratifiedKFold and LogisticRegression; the screen's agreement counted by hand."""
    from sklearn.model_selection import StratifiedKFold

    data = _task(n=90, k=3)
    exact = TransferProtocol(n_outer=2, n_inner=3, seed=1, shortlist=None, inner="kfold")
    assert exact.to_dict()["inner"] == "kfold" and "inner" not in TransferProtocol().to_dict()  # old keys unchanged
    result = run_transfer(data, exact, task="toy")
    agree, gaps = 0, []
    for k, ((td, _), split) in enumerate(zip(outer_splits(data.labels, n_splits=2, seed=1), result.splits)):
        y = data.labels[td]
        folds = StratifiedKFold(n_splits=3, shuffle=True, random_state=1 + k).split(np.zeros(len(td)), y)
        folds = list(folds)
        want = {}
        for s in result.subsets:  # slow twin: every subset, every fold, the paper's classifier
            x = data.first.mean[td][:, list(s)].mean(1)
            want[s] = 100 * np.mean([LogisticRegression(random_state=1 + k, **CLASSIFIER).fit(x[tr], y[tr])
                                     .score(x[dev], y[dev]) for tr, dev in folds])
        assert len(split.shortlist) == len(result.subsets)
        assert want[tuple(split.layers)] == pytest.approx(max(want.values()), abs=1e-9)
        ridge = result.subsets[int(np.argmax(split.screen))]
        agree += ridge == tuple(split.layers)
        gaps.append(want[tuple(split.layers)] - want[ridge])
    assert screen_agreement(result) == {"splits": 2, "agree": agree, "saga_gap": pytest.approx(np.mean(gaps))}
    assert screen_agreement(run_transfer(data, TransferProtocol(n_outer=1, n_inner=2), task="toy")) is None


def test_transfer_keeps_per_example_correctness_and_tests_lc_against_each_baseline():
    from layerwise.evaluation.unit_outputs import pack_correct, unpack_correct
    from layerwise.methods.lc.transfer import subset_correct

    bits = np.random.default_rng(0).random(13) < 0.5
    assert (unpack_correct(pack_correct(bits), 13) == bits).all()
    with pytest.raises(ValueError, match="does not hold"):
        unpack_correct(pack_correct(bits), 17)
    data = _task(n=120, k=3)
    protocol = TransferProtocol(n_outer=3, n_inner=2, seed=4, bootstrap=60)
    assert protocol.to_dict()["bootstrap"] == 60 and "bootstrap" not in TransferProtocol().to_dict()
    result = run_transfer(data, protocol, task="toy")
    outer = outer_splits(data.labels, n_splits=3, seed=4)
    td, te = outer[0]
    split = result.splits[0]
    want = subset_correct(data, td, te, split.layers, seed=split.seed)  # the stored bits are LC's predictions
    assert (unpack_correct(split.correct["lc"], len(te)) == want).all()
    summary = result.summary()
    assert set(result.significance) == {"cls", "last", "last_four", "random"}
    for b, test in result.significance.items():
        assert test["difference"] == pytest.approx(summary["lc"]["mean"] - summary[b]["mean"], abs=1e-9)
        assert test["n_resamples"] == 60 and test["metric"] == "accuracy" and 0 < test["p_value"] <= 1
    again = TransferResult.from_dict(result.to_dict())  # kept through the results file
    assert again.significance == result.significance and again.splits[0].correct == split.correct
    assert run_transfer(data, TransferProtocol(n_outer=2, n_inner=2), task="toy").significance == {}


def _pair_task_with_ties(n_classes: int, n: int = 120) -> TransferFeatures:
    """A pair task with ties: rows 0..19 repeat rows 20..39, and pairs 40..59 have two identical sides."""
    data = _task(pair=True, n=n, n_classes=n_classes, d=5)
    first, second = data.first.mean.copy(), data.second.mean.copy()
    first[:20], second[:20] = first[20:40], second[20:40]
    second[40:60] = first[40:60]
    return TransferFeatures(first=LayerStack(mean=first, cls=data.first.cls), labels=data.labels,
                            n_classes=n_classes, second=LayerStack(mean=second, cls=data.second.cls))


@pytest.mark.parametrize("n_classes", [2, 5])
def test_fast_pair_screen_equals_the_reference_engine(n_classes):
    """The fast pair path (held-out Gram subtracted in BLAS, one triangle, triangular solves) scores every subset
    as the earlier code does, across outer splits that reuse the kept sums, with tied rows and identical sides."""
    data = _pair_task_with_ties(n_classes)
    subsets = all_subsets(data.n_states, 4)
    fast, reference = RidgeScreen(data, alpha=0.01), RidgeScreen(data, alpha=0.01, engine="reference")
    for td, _ in outer_splits(data.labels, n_splits=3, seed=0):
        splits = inner_splits(data.labels[td], n_splits=4, seed=2)
        np.testing.assert_array_equal(fast.scores(td, splits, subsets), reference.scores(td, splits, subsets))


def test_run_transfer_gives_the_same_result_with_either_engine():
    data = _pair_task_with_ties(2)
    protocol = TransferProtocol(n_outer=2, n_inner=3, max_layers=2)
    fast = run_transfer(data, protocol, engine="fast").to_dict()
    reference = run_transfer(data, protocol, engine="reference").to_dict()
    for split in fast["splits"] + reference["splits"]:
        split.pop("seconds")
    assert fast == reference
    with pytest.raises(ValueError, match="unknown screen engine 'slow'; valid: fast, reference"):
        RidgeScreen(data, engine="slow")


def test_the_exhaustive_choice_shows_a_bar_over_its_saga_fits_and_chooses_the_same(monkeypatch, caplog):
    import logging

    import layerwise.methods.lc.transfer as transfer

    bars = []

    def recorded(*args, **kwargs):
        bars.append((kwargs["disable"], transfer_progress(*args, **kwargs)))
        return bars[-1][1]

    transfer_progress = transfer.progress
    monkeypatch.setattr(transfer, "progress", recorded)
    data = _task(n=90)
    rows = np.arange(90)
    splits = inner_splits(data.labels, n_splits=3, seed=2)
    subsets = all_subsets(4, 2)
    # the level set here, not inherited: an earlier test in the same worker may have left logging at INFO
    caplog.set_level(logging.WARNING, logger=transfer.logger.name)
    quiet = choose_subset(data, rows, splits, subsets, shortlist=None, seed=5)
    caplog.set_level(logging.INFO, logger=transfer.logger.name)  # a run at INFO (the CLI's default) shows it
    shown = choose_subset(data, rows, splits, subsets, shortlist=None, seed=5, n_jobs=2)
    assert [disabled for disabled, _ in bars] == [True, False]
    bar = bars[1][1]
    assert bar.desc.startswith(f"SAGA fits ({len(subsets)} subsets x 3 inner splits)")
    assert bar.n == bar.total == len(subsets) * len(splits)  # every fit counted, the threads' included
    assert shown[0] == quiet[0] and shown[1] == quiet[1] and shown[3] == quiet[3]
