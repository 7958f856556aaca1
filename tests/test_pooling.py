import numpy as np
import pytest

from layerwise import LayerStack, layer_mean, named_selections, random_layers, scalar_mix
from layerwise.pooling import Pooling, baseline_poolings, cls_pooling, pooler_output


def _stack(n=4, k=5, d=3, pooler=True):
    rng = np.random.default_rng(0)
    return LayerStack(
        mean=rng.normal(size=(n, k, d)).astype(np.float32),
        cls=rng.normal(size=(n, k, d)).astype(np.float32),
        pooler=rng.normal(size=(n, d)).astype(np.float32) if pooler else None,
    )


def test_named_selections_name_both_first_last_conventions():
    sel = named_selections(13)  # BERT-base: hidden states 0..12
    assert sel["last"] == (12,)
    assert sel["first0_last"] == (0, 12)
    assert sel["first1_last"] == (1, 12)
    assert sel["last_four"] == (9, 10, 11, 12)
    assert sel["all"] == tuple(range(13))


def test_layer_mean_and_cls():
    s = _stack()
    np.testing.assert_allclose(layer_mean(s, (0, 4)), (s.mean[:, 0] + s.mean[:, 4]) / 2, rtol=1e-6)
    np.testing.assert_allclose(layer_mean(s, [-1]), s.mean[:, 4])
    np.testing.assert_allclose(layer_mean(s, (1, 2), kind="cls"), s.cls[:, 1:3].mean(1), rtol=1e-6)
    np.testing.assert_allclose(cls_pooling(s), s.cls[:, -1])
    np.testing.assert_allclose(pooler_output(s), s.pooler)


def test_scalar_mix_closed_form():
    s = _stack()
    w = np.array([0.5, -1.0, 2.0, 0.0, -3.0])
    p = np.exp(w) / np.exp(w).sum()
    want = 2.0 * sum(p[l] * s.mean[:, l] for l in range(5))
    np.testing.assert_allclose(scalar_mix(s, w, gamma=2.0), want, rtol=1e-5)
    with pytest.raises(ValueError, match="one weight per hidden state"):
        scalar_mix(s, [1.0, 2.0])


def test_random_layers_is_seeded():
    assert random_layers(13, seed=3) == random_layers(13, seed=3)
    assert len(random_layers(13, seed=1, size=4)) == 4
    draws = {random_layers(13, seed=s) for s in range(20)}
    assert len(draws) > 1


def test_bad_selections_and_missing_pooler():
    s = _stack(pooler=False)
    with pytest.raises(ValueError, match="hidden state 7 does not exist"):
        layer_mean(s, (0, 7))
    with pytest.raises(ValueError, match="at least one"):
        layer_mean(s, ())
    with pytest.raises(ValueError, match="no pooler output"):
        pooler_output(s)
    with pytest.raises(ValueError, match="unknown kind"):
        layer_mean(s, (1,), kind="max")


def test_baselines_and_pooling_objects():
    s = _stack()
    names = [p.name for p in baseline_poolings(5, seed=0, has_pooler=True)]
    assert names == ["cls", "last", "first0_last", "first1_last", "last_four", "all", "random", "pooler"]
    p = Pooling("x", "mean", (1, 3))
    np.testing.assert_allclose(p(s), s.mean[:, [1, 3]].mean(1), rtol=1e-6)
    assert p.to_dict() == {"name": "x", "kind": "mean", "layers": [1, 3]}


def test_layer_stack_validation():
    with pytest.raises(ValueError, match="cls shape"):
        LayerStack(mean=np.zeros((2, 3, 4)), cls=np.zeros((2, 2, 4)))
    s = _stack()
    t = s.take([2, 0])
    np.testing.assert_array_equal(t.mean[0], s.mean[2])
    both = LayerStack.concatenate([s, t])
    assert len(both) == 6 and both.n_states == 5 and both.n_layers == 4


def test_results_json_is_strict_and_readable(tmp_path):
    import json
    import os
    import stat

    from layerwise.reports import write_json

    path = write_json(tmp_path / "r.json", {"x": float("nan"), "y": np.array([1.0, np.inf]), "z": np.float32(2.5)})
    assert json.loads(path.read_text()) == {"x": None, "y": [1.0, None], "z": 2.5}
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o666 & ~umask  # not mkstemp's private 0600


def test_max_pooling_of_a_subset_is_the_elementwise_max_of_the_states_means():
    from layerwise.pooling import layer_max

    rng = np.random.default_rng(3)
    stack = LayerStack(mean=rng.normal(size=(5, 4, 3)).astype(np.float32), cls=np.zeros((5, 4, 3), np.float32))
    got = layer_max(stack, (0, 2, 3))
    for i in range(5):  # slow twin: per sentence and dimension, the largest of the chosen states' values
        for j in range(3):
            assert got[i, j] == max(stack.mean[i, l, j] for l in (0, 2, 3))
    assert np.array_equal(layer_max(stack, (2,)), layer_mean(stack, (2,)))  # one state: its mean vector
    assert np.array_equal(Pooling("m", "max", (0, 2, 3))(stack), got)
    with pytest.raises(ValueError):
        layer_max(stack, (7,))
