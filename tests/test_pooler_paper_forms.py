"""The paper's per-layer-ratio attention (Oh et al. 2022, Eq. 1-5) and the plain concatenations of its Table 2,
each against a slow obvious twin written with loops."""

from __future__ import annotations

import math

import pytest
import torch

from layerwise.modules import LayerPooler, load_pooler


def _inputs(b=3, k=4, d=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, k, d, generator=g, dtype=torch.float64), torch.randn(b, k, d, generator=g,
                                                                               dtype=torch.float64)


def _pooler(kind, k=4, d=5):
    torch.manual_seed(1)
    return LayerPooler(kind=kind, hidden_size=d, n_states=k).double().eval()


def _head(p, x):
    w, b = p.head[0].weight.detach(), p.head[0].bias.detach()
    return [math.tanh(sum(float(w[o, i]) * x[i] for i in range(len(x))) + float(b[o])) for o in range(len(b))]


def _vec(m, v):
    """W v for a bias-free linear map, by loops."""
    w = m.weight.detach()
    return [sum(float(w[o, i]) * float(v[i]) for i in range(len(v))) for o in range(w.shape[0])]


def test_per_layer_ratio_attention_against_loops():
    cls, mean = _inputs()
    p = _pooler("layer_attention_ratio")
    with torch.no_grad():
        got, weights = p(cls, mean), p.attention(cls, mean)
    b, k, d = cls.shape
    for n in range(b):
        scores = [sum(a * c for a, c in zip(_vec(p.w_q, cls[n, i]), _vec(p.w_k, mean[n, i]))) / math.sqrt(d)
                  for i in range(k)]
        z = sum(math.exp(s) for s in scores)
        ratio = [math.exp(s) / z for s in scores]  # one weight per hidden state, summing to 1
        assert weights[n].tolist() == pytest.approx(ratio, rel=1e-9)
        values = [_vec(p.w_v, mean[n, i]) for i in range(k)]
        h_l = [sum(ratio[i] * values[i][j] for i in range(k)) for j in range(d)]
        want = _head(p, [float(x) for x in cls[n, -1]] + h_l)
        assert got[n].tolist() == pytest.approx(want, rel=1e-9, abs=1e-12)


def test_the_ratio_form_differs_from_the_k_by_k_operator():
    cls, mean = _inputs()
    a, b = _pooler("layer_attention_ratio"), _pooler("layer_attention")
    b.load_state_dict(a.state_dict())  # the same weights: only the operator differs
    with torch.no_grad():
        assert a.attention(cls, mean).shape == (3, 4) and b.attention(cls, mean).shape == (3, 4, 4)
        assert not torch.allclose(a(cls, mean), b(cls, mean))


@pytest.mark.parametrize("kind", ["concat_last_cls_mean", "concat_last_cls_layer_mean"])
def test_plain_concatenations_against_loops(kind):
    cls, mean = _inputs(seed=2)
    p = _pooler(kind)
    with torch.no_grad():
        got = p(cls, mean)
    b, k, d = cls.shape
    for n in range(b):
        if kind == "concat_last_cls_mean":
            second = [float(mean[n, -1, j]) for j in range(d)]
        else:
            second = [sum(float(mean[n, i, j]) for i in range(k)) / k for j in range(d)]
        want = _head(p, [float(x) for x in cls[n, -1]] + second)
        assert got[n].tolist() == pytest.approx(want, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("kind", ["layer_attention_ratio", "concat_last_cls_mean", "concat_last_cls_layer_mean"])
def test_new_kinds_save_load_and_need_their_head(kind, tmp_path):
    p = _pooler(kind).float()
    p.save(tmp_path / kind)
    q = load_pooler(tmp_path / kind)
    cls, mean = (x.float() for x in _inputs())
    with torch.no_grad():
        assert torch.equal(p(cls, mean), q(cls, mean))
    with pytest.raises(ValueError, match="needs mlp=True"):
        LayerPooler(kind=kind, hidden_size=5, n_states=4, mlp=False)
