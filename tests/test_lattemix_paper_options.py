"""Latte-Mix's paper settings as options: KL thresholding, decoder depth, the categorical L2 similarity and the
first principal component of token vectors, each against a slow obvious twin."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from layerwise.methods.lattemix import LatteMixConfig, build_model, load_model, pair_similarity
from layerwise.methods.lattemix.divergences import categorical_l2, thresholded_kl
from layerwise.methods.lattemix.principal import fit_first_component, word_coordinates
from layerwise.methods.lattemix.similarity import Mixtures


def _slow_thresholded_kl(kl_units, eps):
    """sum over units of max(eps, the unit's mean KL over the batch), by loops."""
    m, g = len(kl_units), len(kl_units[0])
    total = 0.0
    for j in range(g):
        mean = sum(float(kl_units[i][j]) for i in range(m)) / m
        total += mean if eps is None else max(eps, mean)
    return total


@pytest.mark.parametrize("eps", [None, 0.0, 0.3, 5.0])
def test_thresholded_kl_against_loops(eps):
    kl = torch.rand(9, 6, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 0.8
    assert float(thresholded_kl(kl, eps)) == pytest.approx(_slow_thresholded_kl(kl.tolist(), eps), rel=1e-12)


def _slow_categorical_loss(model, u, beta, eps, noise_seed):
    """The categorical VAE's loss written out token by token and group by group (same Gumbel noise)."""
    c = model.config
    x = (u - model.input_mean) / model.input_std
    logits = model.encoder(x).view(-1, c.n_groups, c.n_classes)
    log_q = torch.log_softmax(logits, -1)
    gen = torch.Generator().manual_seed(noise_seed)
    uni = torch.rand(log_q.shape, generator=gen, dtype=log_q.dtype)
    g = -torch.log((-torch.log(uni.clamp(1e-20, 1.0))).clamp_min(1e-20))
    z = torch.softmax((log_q + g) / c.tau, -1).view(len(u), -1)
    x_hat = model.decoder(z)
    recon = [0.5 * float(((x[i] - x_hat[i]) ** 2).sum()) + 0.5 * x.shape[1] * math.log(2 * math.pi)
             for i in range(len(u))]
    q = log_q.exp()
    kl = [[sum(float(q[i, j, k]) * (math.log(float(q[i, j, k])) + math.log(c.n_classes)) for k in range(c.n_classes))
           for j in range(c.n_groups)] for i in range(len(u))]
    return sum(recon) / len(u) + beta * _slow_thresholded_kl(kl, eps)


@pytest.mark.parametrize("eps", [None, 0.3])
def test_the_categorical_loss_thresholds_each_group_as_the_slow_twin(eps):
    torch.manual_seed(0)
    model = build_model(LatteMixConfig(input_dim=6, n_classes=4, n_groups=3, kl_threshold=eps, decoder_depth=3,
                                       hidden_dim=7))
    u = torch.randn(11, 6, dtype=torch.float32)
    with torch.no_grad():
        out = model(u, beta=0.7, generator=torch.Generator().manual_seed(4))
        want = _slow_categorical_loss(model, u, 0.7, eps, 4)
    assert float(out["loss"]) == pytest.approx(want, rel=1e-5)


def test_a_group_below_the_threshold_gets_no_gradient_from_the_kl():
    """With eps above every group's KL the KL term is constant: the encoder's gradient is the reconstruction's."""
    torch.manual_seed(1)
    u = torch.randn(16, 6)
    base = build_model(LatteMixConfig(input_dim=6, n_classes=4, n_groups=3)).state_dict()

    def encoder_grads(eps, term):
        model = build_model(LatteMixConfig(input_dim=6, n_classes=4, n_groups=3, kl_threshold=eps))
        model.load_state_dict(base)
        model(u, beta=1.0, generator=torch.Generator().manual_seed(2))[term].backward()
        return [p.grad.clone() for p in model.encoder.parameters()]

    recon = encoder_grads(None, "recon")
    for a, b in zip(encoder_grads(1e6, "loss"), recon):
        torch.testing.assert_close(a, b)
    # without the threshold the KL does move the encoder
    assert not all(torch.allclose(a, b) for a, b in zip(encoder_grads(None, "loss"), recon))


def test_normal_thresholds_each_dimension():
    torch.manual_seed(3)
    model = build_model(LatteMixConfig(kind="normal", input_dim=5, latent_dim=4, kl_threshold=0.3))
    u = torch.randn(8, 5)
    with torch.no_grad():
        out = model(u, beta=1.0, generator=torch.Generator().manual_seed(0))
        h = model.encoder((u - model.input_mean) / model.input_std)
        mu, logvar = h.chunk(2, -1)
        logvar = logvar.clamp(-10, 10)
        kl = [[0.5 * (float(mu[i, j]) ** 2 + math.exp(float(logvar[i, j])) - float(logvar[i, j]) - 1) for j in range(4)]
              for i in range(8)]
    assert float(out["loss"] - out["recon"]) == pytest.approx(_slow_thresholded_kl(kl, 0.3), rel=1e-5)
    assert float(out["kl"]) == pytest.approx(sum(map(sum, kl)) / 8, rel=1e-5)  # reported: the plain KL


def test_decoder_depth_and_the_saved_config(tmp_path):
    cfg = LatteMixConfig(input_dim=6, n_classes=4, n_groups=2, depth=1, decoder_depth=3, hidden_dim=5,
                         kl_threshold=0.3, tau=0.3)
    model = build_model(cfg)
    linear = [m for m in model.decoder if isinstance(m, torch.nn.Linear)]
    assert len(linear) == 3 and len([m for m in model.encoder if isinstance(m, torch.nn.Linear)]) == 1
    model.save(tmp_path / "m")
    assert load_model(tmp_path / "m").config == cfg
    # the options left at None keep the dictionary (saved configs, results-store keys) of before they existed
    plain = LatteMixConfig().to_dict()
    assert "decoder_depth" not in plain and "kl_threshold" not in plain
    assert LatteMixConfig.from_dict(plain) == LatteMixConfig()
    assert LatteMixConfig(depth=2).decoder_layers == 2
    with pytest.raises(ValueError, match="kl_threshold"):
        LatteMixConfig(kl_threshold=-0.1)
    with pytest.raises(ValueError, match="decoder_depth"):
        LatteMixConfig(decoder_depth=0)


def test_categorical_l2_against_loops():
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(5), size=(4, 3))  # (n, G, C)
    q = rng.dirichlet(np.ones(5), size=(4, 3))
    want = [-sum((p[i, g, c] - q[i, g, c]) ** 2 for g in range(3) for c in range(5)) for i in range(4)]
    got = pair_similarity(Mixtures("categorical", probs=p), Mixtures("categorical", probs=q), "l2")
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert float(categorical_l2(torch.tensor(p[0]), torch.tensor(p[0]))) == 0.0


def test_first_component_against_the_svd():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 6)) @ np.diag([5.0, 2.0, 1.0, 1.0, 0.5, 0.1]) + 3.0
    x = x @ np.linalg.qr(rng.normal(size=(6, 6)))[0]  # the top direction is not an axis
    pc = fit_first_component(x.astype(np.float32), chunk=64)
    centred = x - x.mean(0)
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    w = vt[0] * np.sign(vt[0][np.argmax(np.abs(vt[0]))])
    np.testing.assert_allclose(pc.direction, w, atol=1e-5)
    assert pc.share == pytest.approx(s[0] ** 2 / (s**2).sum(), rel=1e-5)
    np.testing.assert_allclose(pc.coordinate(x), centred @ w, atol=1e-4)
    removed = pc.remove(x)
    np.testing.assert_allclose(pc.coordinate(removed), 0.0, atol=1e-8)
    np.testing.assert_allclose(removed - x, -np.outer(centred @ pc.direction, pc.direction), atol=1e-8)
    with pytest.raises(ValueError, match="at least 2"):
        fit_first_component(x[:1])


def test_word_coordinates_average_each_types_coordinates_as_a_loop_does():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(300, 8)) * np.linspace(3, 0.5, 8)
    ids = rng.integers(0, 20, size=300) * 7  # sparse ids, not 0..n-1
    pc = fit_first_component(x)
    types, counts, coords = word_coordinates(pc, x, ids)
    for t, c, v in zip(types, counts, coords, strict=True):  # slow twin: each type's occurrences by hand
        rows = [i for i in range(len(ids)) if ids[i] == t]
        assert c == len(rows)
        assert v == pytest.approx(np.mean([(x[i] - pc.mean) @ pc.direction for i in rows]))
    assert list(types) == sorted(set(ids.tolist()))
    with pytest.raises(ValueError, match="one token id per vector"):
        word_coordinates(pc, x, ids[:-1])


def test_a_model_saved_before_the_options_existed_still_loads(tmp_path):
    import json

    model = build_model(LatteMixConfig(input_dim=6, n_classes=4, n_groups=2))
    model.save(tmp_path / "m")
    saved = json.loads((tmp_path / "m" / "config.json").read_text())
    assert "kl_threshold" not in saved and "decoder_depth" not in saved
    assert load_model(tmp_path / "m").config == model.config


def test_one_seed_prints_no_spread():
    from layerwise.benchmarks.lattemix.report import format_cell
    from layerwise.reports import sample_std as seed_spread

    assert seed_spread([79.4]) is None and format_cell((79.4, seed_spread([79.4]))) == "79.40"
    assert seed_spread([1.0, 3.0]) == pytest.approx(math.sqrt(2.0))  # the sample std (ddof 1)
    assert "±" in format_cell((2.0, seed_spread([1.0, 3.0])))
