import numpy as np
import pytest

from layerwise import LayerStack, naive_subset_scores, run_bert_lc
from layerwise.evaluation import sts_scores
from layerwise.methods.lc import LCProtocol, split_indices
from layerwise.pooling import layer_mean


def _stacks(n=80, k=4, d=6, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(n, k, d)).astype(np.float32)
    b = (0.6 * a + rng.normal(size=(n, k, d))).astype(np.float32)
    sim = np.einsum("nd,nd->n", a[:, 2], b[:, 2])
    gold = np.round((sim - sim.min()) / (np.ptp(sim)) * 5, 1)
    return LayerStack(mean=a, cls=a[:, :, ::-1].copy()), LayerStack(mean=b, cls=b[:, :, ::-1].copy()), gold


def test_split_indices_are_seeded_disjoint_and_complete():
    dev, test = split_indices(100, dev_size=30, seed=4)
    dev2, test2 = split_indices(100, dev_size=30, seed=4)
    assert (dev == dev2).all() and (test == test2).all()
    assert len(dev) == 30 and len(test) == 70
    assert sorted(np.concatenate([dev, test])) == list(range(100))
    assert not (split_indices(100, dev_size=30, seed=5)[0] == dev).all()
    with pytest.raises(ValueError, match="dev_size"):
        split_indices(10, dev_size=9, seed=0)


def test_protocol_chooses_the_dev_best_subset_and_scores_on_test():
    s1, s2, gold = _stacks()
    res = run_bert_lc(s1, s2, gold, LCProtocol(n_splits=3, dev_size=30, seed=7), show_progress=False)
    assert len(res.splits) == 3
    for split in res.splits:
        dev, test = split_indices(len(gold), dev_size=30, seed=split.seed)
        naive = naive_subset_scores(s1.mean[dev], s2.mean[dev], gold[dev])
        assert naive[tuple(split.layers)] == pytest.approx(max(naive.values()), abs=1e-9)
        want = sts_scores(layer_mean(s1.take(test), split.layers), layer_mean(s2.take(test), split.layers),
                          gold[test])["spearman"]
        assert split.test["lc"]["spearman"] == pytest.approx(want)
        last = sts_scores(s1.mean[test, -1], s2.mean[test, -1], gold[test])["spearman"]
        assert split.test["last"]["spearman"] == pytest.approx(last)
    summ = res.summary()
    vals = [s.test["lc"]["spearman"] for s in res.splits]
    assert summ["lc"]["mean"] == pytest.approx(np.mean(vals))
    assert summ["lc"]["std"] == pytest.approx(np.std(vals, ddof=1))  # sample std
    assert {"cls", "last", "first0_last", "first1_last", "last_four", "random", "lc"} <= set(summ)


def test_protocol_input_errors():
    s1, s2, gold = _stacks()
    with pytest.raises(ValueError, match="gold scores"):
        run_bert_lc(s1, s2, gold[:-3], LCProtocol(dev_size=10))
    with pytest.raises(ValueError, match="aggregation"):
        run_bert_lc(s1, s2, gold, LCProtocol(aggregation="median"))


def test_lc_mlp_feeds_lcs_subset_through_the_head():
    s1, s2, gold = _stacks()
    rng = np.random.default_rng(3)
    w, b = rng.normal(size=(6, 6)) / 3, rng.normal(size=6)
    res = run_bert_lc(s1, s2, gold, LCProtocol(n_splits=2, dev_size=30, seed=1), head=(w, b), show_progress=False)
    for split in res.splits:
        _, test = split_indices(len(gold), dev_size=30, seed=split.seed)
        x1 = np.tanh(s1.mean[test][:, list(split.layers)].mean(1).astype(np.float64) @ w.T + b)
        x2 = np.tanh(s2.mean[test][:, list(split.layers)].mean(1).astype(np.float64) @ w.T + b)
        assert split.test["lc_mlp"]["spearman"] == pytest.approx(sts_scores(x1, x2, gold[test])["spearman"], abs=1e-4)
        assert split.poolings["lc_mlp"]["layers"] == list(split.layers)
    assert "lc_mlp" not in run_bert_lc(s1, s2, gold, LCProtocol(n_splits=1, dev_size=30), show_progress=False).summary()
