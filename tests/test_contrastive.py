import math

import numpy as np
import pytest
import torch

from layerwise.methods.layer_attention import (
    POOLER_KINDS,
    InBatchLoss,
    PoolerConfig,
    SupervisedHardNegativeLoss,
    UnsupervisedSimCSELoss,
    build_pooler,
    load_pooler,
)


def _inputs(B=5, K=4, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, K, d, generator=g), torch.randn(B, K, d, generator=g)


@pytest.mark.parametrize("kind", POOLER_KINDS)
def test_pooler_shapes_and_save_load_round_trip(kind, tmp_path):
    torch.manual_seed(0)
    pooler = build_pooler(PoolerConfig(kind=kind, hidden_size=8, n_states=4)).eval()
    cls, mean = _inputs()
    out = pooler(cls, mean)
    assert out.shape == (5, 8)
    again = load_pooler(pooler.save(tmp_path / kind))
    assert again.config == pooler.config
    assert torch.equal(again(cls, mean), out)


def test_layer_attention_against_explicit_loops():
    torch.manual_seed(1)
    p = build_pooler(PoolerConfig(kind="layer_attention", hidden_size=8, n_states=4, mlp=True)).eval()
    cls, mean = _inputs(B=2)
    with torch.no_grad():
        got = p(cls, mean)
        for b in range(2):
            rows = []
            for i in range(4):
                q = p.w_q(cls[b, i])
                scores = torch.stack([q @ p.w_k(mean[b, j]) / math.sqrt(8) for j in range(4)])
                a = torch.softmax(scores, 0)
                rows.append(sum(a[j] * p.w_v(mean[b, j]) for j in range(4)))
            h = torch.cat([cls[b, -1], torch.stack(rows).mean(0)])
            assert torch.allclose(got[b], p.head(h), atol=1e-6)
        att = p.attention(cls, mean)
        assert torch.allclose(att.sum(-1), torch.ones(2, 4))


def test_pooler_errors():
    with pytest.raises(ValueError, match="unknown pooler kind"):
        PoolerConfig(kind="max")
    p = build_pooler(PoolerConfig(hidden_size=8, n_states=4))
    with pytest.raises(ValueError, match="built for K=4"):
        p(*_inputs(K=3))


def _ce(logits_row: np.ndarray, target: int) -> float:
    return -(logits_row[target] - np.log(np.exp(logits_row).sum()))


def test_losses_against_hand_computed_values():
    a = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    p = torch.tensor([[1.0, 1.0], [0.0, 2.0]])
    n = torch.tensor([[-1.0, 0.0], [1.0, 0.0]])
    tau = 0.5
    c = 1 / math.sqrt(2)
    # cosines: a0.p0 = c, a0.p1 = 0, a1.p0 = c, a1.p1 = 1; a0.n0 = -1, a0.n1 = 1, a1.n0 = 0, a1.n1 = 0
    in_batch = (_ce(np.array([c, 0.0]) / tau, 0) + _ce(np.array([c, 1.0]) / tau, 1)) / 2
    assert float(InBatchLoss(tau)(a, p)) == pytest.approx(in_batch, abs=1e-6)
    assert float(UnsupervisedSimCSELoss(tau)(a, p)) == pytest.approx(in_batch, abs=1e-6)
    hard = (_ce(np.array([c, 0.0, -1.0, 1.0]) / tau, 0) + _ce(np.array([c, 1.0, 0.0, 0.0]) / tau, 1)) / 2
    assert float(SupervisedHardNegativeLoss(tau)(a, p, n)) == pytest.approx(hard, abs=1e-6)
    with pytest.raises(ValueError, match="temperature"):
        InBatchLoss(0.0)
    with pytest.raises(ValueError, match="three"):
        SupervisedHardNegativeLoss()(a, p, n[:1])


def _tiny_model(folder, kind="layer_attention"):
    from layerwise.methods.layer_attention import SentenceModel

    torch.manual_seed(0)
    return SentenceModel.from_pretrained(str(folder), pooler=kind, max_length=16)


@pytest.mark.parametrize("objective", ["unsup", "in_batch", "sup_hard_neg"])
def test_a_few_training_steps_lower_the_loss(objective, tiny_bert, tmp_path):
    from conftest import SENTENCES
    from layerwise.methods.layer_attention import ContrastiveConfig, train_contrastive

    model = _tiny_model(tiny_bert)
    if objective == "unsup":
        examples = SENTENCES
    elif objective == "in_batch":
        examples = [(s, s.replace(".", "!")) for s in SENTENCES]
    else:
        examples = [(s, s.replace(".", "!"), SENTENCES[(i + 5) % len(SENTENCES)]) for i, s in enumerate(SENTENCES)]
    cfg = ContrastiveConfig(objective=objective, steps=30, batch_size=6, lr=1e-3, pooler_lr=3e-3,
                            warmup_steps=0, eval_every=0, temperature=0.5)
    hist = train_contrastive(model, examples, cfg, tmp_path / "run", show_progress=False)
    assert np.mean(hist["loss"][-5:]) < np.mean(hist["loss"][:5])
    assert (tmp_path / "run" / "last" / "trainer_state.json").is_file()


def test_resume_continues_from_the_same_step(tiny_bert, tmp_path):
    from conftest import SENTENCES
    from layerwise.methods.layer_attention import ContrastiveConfig, train_contrastive

    cfg = ContrastiveConfig(objective="unsup", steps=6, batch_size=4, lr=1e-3, warmup_steps=2, eval_every=0)
    straight = _tiny_model(tiny_bert)
    h1 = train_contrastive(straight, SENTENCES, cfg, tmp_path / "a", show_progress=False)
    cut = _tiny_model(tiny_bert)
    train_contrastive(cut, SENTENCES, cfg, tmp_path / "b", show_progress=False, max_steps_this_run=3)
    resumed = _tiny_model(tiny_bert)
    h2 = train_contrastive(resumed, SENTENCES, cfg, tmp_path / "b", resume=True, show_progress=False)
    assert h2["step"] == list(range(1, 7)) and h2["steps_this_run"] == 3
    assert h2["loss"] == h1["loss"]  # bit for bit
    for a, b in zip(straight.state_dict().values(), resumed.state_dict().values()):
        assert torch.equal(a, b)


def test_dev_evaluation_keeps_the_best_and_triplets(tiny_bert, tmp_path):
    from conftest import SENTENCES, write_unlabeled
    from layerwise.data import STSData
    from layerwise.methods.layer_attention import ContrastiveConfig, SentenceModel, nli_triplets, train_contrastive

    dev = STSData(name="stsb", sentences1=SENTENCES[:6], sentences2=SENTENCES[6:], scores=np.arange(6.0),
                  subsets=np.array(["dev"] * 6), split="dev", source="test")
    model = _tiny_model(tiny_bert, kind="last_cls")
    cfg = ContrastiveConfig(objective="unsup", steps=4, batch_size=4, eval_every=2)
    hist = train_contrastive(model, SENTENCES, cfg, tmp_path / "r", dev=dev, show_progress=False)
    assert [s for s, _ in hist["dev"]] == [2, 4]
    assert hist["best_dev"] == max(v for _, v in hist["dev"])
    again = SentenceModel.load(tmp_path / "r" / "best")
    assert again.pooler.config.kind == "last_cls"
    trip = nli_triplets(write_unlabeled(tmp_path / "data"))
    assert trip and all(len(t) == 3 for t in trip)


def test_frozen_feature_training(tiny_bert):
    from conftest import SENTENCES
    from layerwise.methods.layer_attention import ContrastiveConfig
    from layerwise.methods.layer_attention.frozen import (
        compute_features,
        embed_features,
        train_pooler_on_features,
        training_views,
    )

    model = _tiny_model(tiny_bert)
    texts = SENTENCES * 3
    # without dropout the vectors are the encoder's own, and the pooler on them is SentenceModel.encode
    feats = compute_features(model, texts, dropout=False, batch_size=5)
    np.testing.assert_allclose(embed_features(model.pooler, feats), model.encode(texts), atol=1e-5)
    # with dropout two passes differ; the same seed gives the same noise
    a, b = training_views(model, "unsup", texts, seed=3)
    assert not torch.allclose(a.mean, b.mean)
    again = training_views(model, "unsup", texts, seed=3)
    assert torch.equal(a.mean, again[0].mean)
    cfg = ContrastiveConfig(objective="unsup", steps=30, batch_size=8, warmup_steps=2, freeze_encoder=True, eval_every=10,
                            pooler_lr=3e-3, temperature=0.5)
    enc_before = [p.detach().clone() for p in model.encoder.parameters()]
    gold = np.arange(len(texts), dtype=float) % 5
    dev = (feats, compute_features(model, texts[::-1], dropout=False), gold)
    hist = train_pooler_on_features(model.pooler, (a, b), cfg, dev=dev)
    assert np.mean(hist["loss"][-5:]) < np.mean(hist["loss"][:5])
    assert [s for s, _ in hist["dev"]] == [10, 20, 30] and hist["best_dev"] == max(v for _, v in hist["dev"])
    assert all(torch.equal(p, q) for p, q in zip(model.encoder.parameters(), enc_before))
    with pytest.raises(ValueError, match="freeze_encoder"):
        train_pooler_on_features(model.pooler, (a, b), ContrastiveConfig(steps=2, batch_size=4))
    trip = [(t, t, texts[-1 - i]) for i, t in enumerate(texts)]
    views = training_views(model, "sup_hard_neg", trip)
    assert len(views) == 3 and len(training_views(model, "in_batch", [(x, y) for x, y, _ in trip])) == 2
