"""Attention weight against sentence length (the layer-attention page, Appendix C of Oh et al. 2022): the weights
come from the pooler's real forward pass, sum to 1 per sentence, and the stored summary matches a slow twin."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from layerwise.benchmarks import ResultsStore
from layerwise.benchmarks.catalog import get_page
from layerwise.benchmarks.registry import PageContext
from layerwise.modules.poolers import PoolerConfig, build_pooler, state_weights


def _features(b=5, k=4, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, k, d, generator=g), torch.randn(b, k, d, generator=g)


def _slow_state_weights(pooler, cls, mean) -> np.ndarray:
    """Per sentence, the weight of each state's values, with loops over the states (numpy)."""
    wq, wk = pooler.w_q.weight.detach().numpy(), pooler.w_k.weight.detach().numpy()
    c, m = cls.numpy().astype(np.float64), mean.numpy().astype(np.float64)
    n, k, d = c.shape
    out = np.zeros((n, k))
    for s in range(n):
        if pooler.config.kind == "layer_attention_ratio":
            e = np.array([np.exp((wq @ c[s, i]) @ (wk @ m[s, i]) / math.sqrt(d)) for i in range(k)])
            out[s] = e / e.sum()
        else:
            for i in range(k):  # query state i's softmax over the keys j, averaged over i
                e = np.array([np.exp((wq @ c[s, i]) @ (wk @ m[s, j]) / math.sqrt(d)) for j in range(k)])
                out[s] += e / e.sum() / k
    return out


@pytest.mark.parametrize("kind", ["layer_attention", "layer_attention_ratio"])
def test_forward_with_attention_is_the_forward_pass_and_its_state_weights_sum_to_one(kind):
    from layerwise.methods.layer_attention.frozen import LayerFeatures, embed_features, embed_features_with_weights

    torch.manual_seed(0)
    pooler = build_pooler(PoolerConfig(kind=kind, hidden_size=8, n_states=4)).eval()
    cls, mean = _features()
    with torch.no_grad():
        out, att = pooler.forward_with_attention(cls, mean)
        assert torch.equal(out, pooler(cls, mean)) and torch.equal(att, pooler.attention(cls, mean))
    w = state_weights(att).numpy()
    assert w.shape == (5, 4) and np.allclose(w.sum(axis=1), 1.0, atol=1e-6)
    assert np.allclose(w, _slow_state_weights(pooler, cls, mean), atol=1e-5)
    feats = LayerFeatures(cls, mean)
    emb, weights = embed_features_with_weights(pooler, feats, batch_size=2)  # batches of 2: the rows stay in order
    assert np.array_equal(emb, embed_features(pooler, feats, batch_size=2)) and np.allclose(weights, w, atol=1e-7)
    with pytest.raises(ValueError, match="no attention weights"):
        embed_features_with_weights(build_pooler(PoolerConfig(kind="last_mean", hidden_size=8, n_states=4)), feats)


def test_length_profile_matches_its_slow_twin():
    from layerwise.benchmarks.layer_attention.attention_length import length_profile, mean_profile

    rng = np.random.default_rng(3)
    lengths = rng.integers(4, 20, 60)
    weights = rng.dirichlet(np.ones(5), 60)
    prof = length_profile(lengths, weights, max_length=16)
    q = sorted({int(np.quantile(lengths, p, method="lower")) for p in (0, 0.25, 0.5, 0.75, 1)})
    bounds = [(q[0] - 1, q[1])] + [(q[i], q[i + 1]) for i in range(1, len(q) - 1)]  # (lo, hi]
    want = [[i for i, x in enumerate(lengths) if lo < x <= hi] for lo, hi in bounds]
    assert [b["n"] for b in prof["buckets"]] == [len(w) for w in want if w]
    for b, rows in zip(prof["buckets"], [w for w in want if w], strict=True):
        assert np.allclose(b["weights"], weights[rows].mean(axis=0), atol=1e-6)
        assert (b["lo"], b["hi"]) == (lengths[rows].min(), lengths[rows].max())
        assert sum(b["weights"]) == pytest.approx(1.0, abs=1e-5)
    assert sum(b["n"] for b in prof["buckets"]) == 60 and prof["at_max_length"] == int((lengths >= 16).sum())
    from scipy.stats import spearmanr

    assert prof["spearman"][2] == pytest.approx(spearmanr(lengths, weights[:, 2]).statistic, abs=1e-4)
    two = mean_profile([prof, prof])
    assert two["seeds"] == 2 and np.allclose(two["buckets"][0]["weights"], prof["buckets"][0]["weights"])


def test_page_records_the_forward_pass_weights_by_token_length_and_old_runs_render_not_measured(
        tiny_bert, tmp_path, monkeypatch):
    from transformers import AutoTokenizer

    from layerwise.benchmarks.layer_attention import experiment
    from layerwise.benchmarks.layer_attention.grid import checkpoint_key
    from test_results_pages import _data, _la_options

    monkeypatch.setenv("LAYERWISE_HOME", str(tmp_path / "home"))
    seen = []
    real = experiment.embed_features_with_weights

    def spy(pool, feats, **kw):  # the recorded weights against a plain call of the same pooler on the same vectors
        emb, w = real(pool, feats, **kw)
        with torch.no_grad():
            plain = state_weights(pool.eval().attention(feats.cls, feats.mean)).numpy()
        seen.append((pool.config.kind, w, plain))
        return emb, w

    monkeypatch.setattr(experiment, "embed_features_with_weights", spy)
    data, store = _data(tmp_path / "data"), ResultsStore(tmp_path / "state")
    options = _la_options(tiny_bert, tmp_path, regimes=["frozen"], retrieval_poolers=[],
                          poolers=["layer_attention", "layer_attention_ratio", "last_mean"])
    ctx = PageContext(store=store, output=tmp_path / "out", data_dir=str(data), options=options)
    get_page("layer-attention").run(ctx)
    assert sorted({k for k, _, _ in seen}) == ["layer_attention", "layer_attention_ratio"]  # not last_mean
    for _, w, plain in seen:
        assert np.array_equal(w, plain) and np.allclose(w.sum(axis=1), 1.0, atol=1e-6)
    parts = {p.name: p for p in store.parts("layer-attention")}
    assert parts["frozen-unsup-last_mean-seed0"].payload["attention_by_length"] == {}
    assert "attention_by_length" not in parts["frozen-unsup-last_mean-seed0"].key  # its key is as before
    part = parts["frozen-unsup-layer_attention-seed0"]
    assert "attention_by_length" not in checkpoint_key(part.key)
    prof = part.payload["attention_by_length"]
    tok = AutoTokenizer.from_pretrained(str(tiny_bert))
    from layerwise.data import load_sts

    d = load_sts("stsb", data_dir=str(data))
    texts = list(d.sentences1) + list(d.sentences2)
    lengths = np.array([len(tok(t, truncation=True, max_length=32)["input_ids"]) for t in texts])
    weights = np.concatenate([w for k, w, _ in seen if k == "layer_attention"])
    from layerwise.benchmarks.layer_attention.attention_length import length_profile

    assert prof == length_profile(lengths, weights, max_length=32) and prof["n_sentences"] == 30
    written = get_page("layer-attention").render(ctx)
    md = (tmp_path / "out" / "layer-attention.md").read_text()
    assert tmp_path / "out" / "layer-attention-length.png" in written
    assert "| tokens | sentences | state 0 | state 1 | state 2 | centre |" in md and "Not measured" not in md
    old = part.payload | {"attention_by_length": {}}  # a run stored before: its section says so, no figure
    from layerwise.benchmarks.layer_attention.attention_length import draw_length_figure, length_section
    from layerwise.benchmarks.layer_attention.grid import RunResult

    runs = [RunResult.from_payload(old)]
    assert "Not measured" in "\n".join(length_section(runs, ["unsup"], "tiny"))
    assert draw_length_figure(runs, ["unsup"]) is None
