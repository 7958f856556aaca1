import math

import numpy as np
import pytest
import torch

from conftest import SENTENCES
from layerwise import LayerEncoder
from layerwise.encoders.tokens import TokenStack
from layerwise.methods.lattemix import (
    LatteMixConfig,
    TrainConfig,
    build_model,
    gumbel_softmax_sample,
    load_model,
    pair_similarity,
    sentence_mixtures,
    train_token_model,
)
from layerwise.methods.lattemix.divergences import (
    gaussian_mixture_cosine,
    gaussian_mixture_l2,
    js_divergence,
    kl_categorical_uniform,
    kl_normal_standard,
)


def test_gumbel_softmax_becomes_one_hot_as_tau_goes_to_zero():
    logits = torch.log_softmax(torch.randn(200, 3, 10, generator=torch.Generator().manual_seed(0)), -1)
    taus = [5.0, 1.0, 0.1, 0.01, 0.001]
    samples = [gumbel_softmax_sample(logits, t, torch.Generator().manual_seed(1)) for t in taus]
    peaks = [float(s.max(-1).values.mean()) for s in samples]
    assert peaks == sorted(peaks) and peaks[0] < 0.6  # sharper as tau falls; far from one-hot when hot
    hard, soft = samples[-1], samples[0]
    assert torch.allclose(hard.sum(-1), torch.ones(200, 3), atol=1e-6)
    assert peaks[-1] > 0.999 and float((hard.max(-1).values > 0.99).float().mean()) > 0.99  # one-hot
    # same noise: the argmax is the Gumbel-max sample at every temperature
    assert torch.equal(hard.argmax(-1), soft.argmax(-1))


def test_kl_and_js_against_hand_computed_values():
    q = torch.tensor([0.5, 0.25, 0.25])
    want = 0.5 * math.log(0.5) + 2 * 0.25 * math.log(0.25) + math.log(3)
    assert float(kl_categorical_uniform(q)) == pytest.approx(want, abs=1e-6)
    assert float(kl_categorical_uniform(torch.full((4,), 0.25))) == pytest.approx(0.0, abs=1e-7)
    assert float(js_divergence(torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0]))) == pytest.approx(math.log(2), abs=1e-6)
    p, r = np.array([0.5, 0.5]), np.array([0.9, 0.1])
    m = (p + r) / 2
    want_js = 0.5 * np.sum(p * np.log(p / m)) + 0.5 * np.sum(r * np.log(r / m))
    assert float(js_divergence(torch.tensor(p), torch.tensor(r))) == pytest.approx(want_js, abs=1e-9)
    # KL(N(1, e^0) || N(0, 1)) = 1/2 (1 + 1 - 0 - 1) = 0.5 per dimension
    assert float(kl_normal_standard(torch.ones(3), torch.zeros(3))) == pytest.approx(1.5)


def test_gaussian_mixture_l2_against_numeric_integration():
    mu1, var1 = torch.tensor([[0.0], [1.5]], dtype=torch.float64), torch.tensor([[1.0], [0.5]], dtype=torch.float64)
    mu2, var2 = torch.tensor([[0.5]], dtype=torch.float64), torch.tensor([[2.0]], dtype=torch.float64)
    x = np.linspace(-15, 15, 200001)

    def pdf(mu, var):
        return sum(np.exp(-(x - m) ** 2 / (2 * v)) / np.sqrt(2 * np.pi * v) for m, v in zip(mu.ravel(), var.ravel())) / len(mu)

    p, q = pdf(mu1.numpy(), var1.numpy()), pdf(mu2.numpy(), var2.numpy())
    want = np.trapezoid((p - q) ** 2, x)
    assert float(gaussian_mixture_l2(mu1, var1, mu2, var2)) == pytest.approx(want, rel=1e-6)
    cos = np.trapezoid(p * q, x) / np.sqrt(np.trapezoid(p * p, x) * np.trapezoid(q * q, x))
    assert float(gaussian_mixture_cosine(mu1, var1, mu2, var2)) == pytest.approx(cos, rel=1e-6)
    assert float(gaussian_mixture_l2(mu1, var1, mu1, var1)) == pytest.approx(0.0, abs=1e-12)


def _token_stack():
    rng = np.random.default_rng(0)
    # sentence 0: [CLS] w [SEP]; sentence 1: [CLS] w w w [SEP]
    special = np.array([1, 0, 1, 1, 0, 0, 0, 1], bool)
    return TokenStack(vectors=rng.normal(size=(8, 1, 16)).astype(np.float32), special=special,
                      offsets=np.array([0, 3, 8]), layers=(2,))


@pytest.mark.parametrize("kind", ["categorical", "normal", "ae"])
def test_mixture_of_one_token_is_its_posterior(kind):
    ts = _token_stack()
    model = build_model(LatteMixConfig(kind=kind, input_dim=16, n_classes=8, n_groups=2, latent_dim=4)).eval()
    mix = sentence_mixtures(model, ts, 2)
    with torch.no_grad():
        post = model.posterior(torch.from_numpy(ts.vectors[1:2, 0]))
    if kind == "categorical":
        np.testing.assert_allclose(mix.probs[0], post[0].numpy(), atol=1e-6)
        np.testing.assert_allclose(mix.probs.sum(-1), 1.0, atol=1e-6)
        with torch.no_grad():  # sentence 1: the mean of its three word tokens' posteriors
            want = model.posterior(torch.from_numpy(ts.vectors[4:7, 0])).mean(0)
        np.testing.assert_allclose(mix.probs[1], want.numpy(), atol=1e-6)
    elif kind == "normal":
        np.testing.assert_allclose(mix.mu[0], post[0][0].numpy(), atol=1e-6)
        np.testing.assert_allclose(mix.var[0], post[1][0].numpy(), atol=1e-6)
    else:
        np.testing.assert_allclose(mix.probs[0, 0], post[0].numpy(), atol=1e-6)


def test_similarities_and_errors():
    ts = _token_stack()
    model = build_model(LatteMixConfig(kind="categorical", input_dim=16, n_classes=8)).eval()
    mix = sentence_mixtures(model, ts, 2)
    assert pair_similarity(mix, mix, "cosine") == pytest.approx([1.0, 1.0])
    assert pair_similarity(mix, mix, "js") == pytest.approx([0.0, 0.0], abs=1e-9)
    assert pair_similarity(mix, mix, "l2") == pytest.approx([0.0, 0.0], abs=1e-12)
    with pytest.raises(ValueError, match="valid: cosine, js, l2"):
        pair_similarity(mix, mix, "hellinger")
    with pytest.raises(ValueError, match="unknown model kind"):
        LatteMixConfig(kind="dirichlet")
    with pytest.raises(ValueError, match="input_dim"):
        train_token_model(LatteMixConfig(input_dim=8), np.zeros((10, 16), np.float32))


@pytest.mark.parametrize("kind", ["categorical", "normal", "ae"])
def test_save_load_round_trip(kind, tmp_path):
    cfg = LatteMixConfig(kind=kind, input_dim=16, n_classes=8, latent_dim=4, depth=2, hidden_dim=24)
    model = build_model(cfg)
    model.set_input_stats(torch.randn(50, 16) * 3 + 1)
    model.eval()
    model.save(tmp_path / "m")
    again = load_model(tmp_path / "m")
    assert again.config == cfg
    x = torch.randn(7, 16)
    with torch.no_grad():
        a, b = model.posterior(x), again.posterior(x)
    for u, v in zip(a if isinstance(a, tuple) else [a], b if isinstance(b, tuple) else [b]):
        assert torch.equal(u, v)


@pytest.mark.parametrize("kind", ["categorical", "normal", "ae"])
def test_a_few_steps_lower_the_loss_on_a_tiny_random_model(kind, tiny_bert):
    enc = LayerEncoder(tiny_bert, cache_dir=False, show_progress=False)
    tokens = enc.encode_tokens(SENTENCES * 4, layers=(-1,)).token_vectors(2, include_special=False)
    cfg = LatteMixConfig(kind=kind, input_dim=32, n_classes=16, latent_dim=8, beta_warmup_steps=0)

    def full_loss(model):
        with torch.no_grad():
            return float(model(torch.from_numpy(tokens), beta=1.0, generator=torch.Generator().manual_seed(9))["loss"])

    untrained, _ = train_token_model(cfg, tokens, TrainConfig(max_steps=0, seed=0), show_progress=False)
    trained, hist = train_token_model(cfg, tokens, TrainConfig(epochs=15, batch_size=32, lr=3e-3,
                                                               lr_warmup_steps=0, seed=0), show_progress=False)
    assert hist["steps"] > 20
    assert full_loss(trained) < full_loss(untrained) - 0.5


def _reference_token_training(config, tokens, train):
    """The slow twin: the hand-written loop the trainer had before the shared loop (Adam, warm-up, one generator for
    the epoch orders and the noise)."""
    torch.manual_seed(train.seed)
    gen = torch.Generator().manual_seed(train.seed)
    model = build_model(config)
    data = torch.from_numpy(tokens)
    model.set_input_stats(data)
    opt = torch.optim.Adam(model.parameters(), lr=train.lr)
    total = int(np.ceil(len(data) / train.batch_size)) * train.epochs
    losses, step = [], 0
    while step < total:
        perm = torch.randperm(len(data), generator=gen)
        for start in range(0, len(data), train.batch_size):
            beta = config.beta * min(1.0, step / config.beta_warmup_steps)
            for g in opt.param_groups:
                g["lr"] = train.lr * min(1.0, (step + 1) / train.lr_warmup_steps)
            out = model(data[perm[start : start + train.batch_size]], beta=beta, generator=gen)
            opt.zero_grad(set_to_none=True)
            out["loss"].backward()
            opt.step()
            losses.append(float(out["loss"].detach()))
            step += 1
    return model, losses


@pytest.mark.parametrize("kind", ["categorical", "normal"])
def test_the_shared_loop_keeps_the_batch_order_and_noise_of_a_seed(kind):
    tokens = np.random.default_rng(0).normal(size=(150, 16)).astype(np.float32)
    cfg = LatteMixConfig(kind=kind, input_dim=16, n_classes=8, n_groups=2, latent_dim=4, beta_warmup_steps=5)
    train = TrainConfig(epochs=2, batch_size=32, lr=3e-3, lr_warmup_steps=3, seed=1)
    model, hist = train_token_model(cfg, tokens, train, show_progress=False)
    ref, losses = _reference_token_training(cfg, tokens, train)
    assert hist["loss"] == losses
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), ref.state_dict().values()))
