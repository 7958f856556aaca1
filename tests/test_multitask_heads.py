"""Task heads and NLI objectives of multi-task fine-tuning, each against a hand computation."""

from __future__ import annotations

import math

import pytest
import torch
from torch.nn import functional as F

from layerwise.losses.nli import NLI_LABEL_SCORES, NLIRegressionLoss, NLITripletLoss, nli_loss
from layerwise.modules.heads import (
    ClassificationHead,
    CosineHead,
    PairHead,
    PrototypeHead,
    SharedHidden,
    TransformerClassificationHead,
    pair_features,
)


def _cos(a, b):
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def test_classification_head_shape_and_cross_entropy_by_hand():
    torch.manual_seed(0)
    head = ClassificationHead(4, 5, dropout=0.0).eval()
    u = torch.randn(3, 4)
    logits = head(u)
    assert logits.shape == (3, 5)
    w, b = head.linear.weight.tolist(), head.linear.bias.tolist()
    labels = [0, 3, 4]
    hand = 0.0
    for i, y in enumerate(labels):
        z = [sum(w[c][k] * u[i, k].item() for k in range(4)) + b[c] for c in range(5)]
        hand += -(z[y] - math.log(sum(math.exp(v) for v in z))) / 3
    assert F.cross_entropy(logits, torch.tensor(labels)).item() == pytest.approx(hand, rel=1e-5)


@pytest.mark.parametrize("features,width", [("concat", 8), ("abs_diff", 12), ("cos", 9)])
def test_pair_head_features_and_bce_by_hand(features, width):
    torch.manual_seed(1)
    head = PairHead(4, features, dropout=0.0).eval()
    assert head.linear.in_features == width
    u, v = torch.randn(2, 4), torch.randn(2, 4)
    out = head(u, v)
    assert out.shape == (2,)
    w, b = head.linear.weight[0].tolist(), head.linear.bias.item()
    targets = [1.0, 0.0]
    hand = 0.0
    for i in range(2):
        a, c = u[i].tolist(), v[i].tolist()
        extra = {"concat": [], "abs_diff": [abs(p - q) for p, q in zip(a, c, strict=True)], "cos": [_cos(a, c)]}
        x = a + c + extra[features]
        z = sum(p * q for p, q in zip(w, x, strict=True)) + b
        assert out[i].item() == pytest.approx(z, rel=1e-5, abs=1e-6)
        p = 1 / (1 + math.exp(-z))
        hand += -(targets[i] * math.log(p) + (1 - targets[i]) * math.log(1 - p)) / 2
    loss = F.binary_cross_entropy_with_logits(out, torch.tensor(targets))
    assert loss.item() == pytest.approx(hand, rel=1e-5)


def test_linear_sts_head_mse_and_cosine_head_by_hand():
    torch.manual_seed(2)
    u, v = torch.randn(3, 4), torch.randn(3, 4)
    gold = torch.tensor([5.0, 2.5, 0.0])
    cos = CosineHead(dropout=0.0).eval()(u, v)
    hand = [_cos(u[i].tolist(), v[i].tolist()) for i in range(3)]
    assert cos.tolist() == pytest.approx(hand, rel=1e-5)
    mse = sum((c - g / 5) ** 2 for c, g in zip(hand, gold.tolist(), strict=True)) / 3
    assert F.mse_loss(cos, gold / 5).item() == pytest.approx(mse, rel=1e-5)
    lin = PairHead(4, "concat", dropout=0.0).eval()
    z = lin(u, v)
    by_hand = torch.cat([u, v], 1) @ lin.linear.weight[0] + lin.linear.bias
    assert torch.allclose(z, by_hand)


def test_shared_hidden_layers_feed_the_pair_heads():
    torch.manual_seed(3)
    shared = SharedHidden(8, 6, n_layers=2, dropout=0.0).eval()
    para, sts = PairHead(4, "concat", 0.0, shared_size=6).eval(), PairHead(4, "concat", 0.0, shared_size=6).eval()
    u, v = torch.randn(5, 4), torch.randn(5, 4)
    l1, l2 = shared.layers[0], shared.layers[3]
    h = torch.relu(l2(torch.relu(l1(torch.cat([u, v], 1)))))
    assert torch.allclose(para(u, v, shared), para.linear(h).squeeze(-1))
    assert torch.allclose(sts(u, v, shared), sts.linear(h).squeeze(-1))
    with pytest.raises(ValueError, match="shared_size"):
        para(u, v)


def test_prototype_head_by_hand():
    torch.manual_seed(4)
    head = PrototypeHead(3, n_prototypes=4, n_classes=2, dropout=0.0).eval()
    protos, labels = torch.randn(4, 3), torch.tensor([0, 1, 1, 0])
    head.set_prototypes(protos, labels)
    u = torch.randn(2, 3)
    feats = head.similarity_features(u)
    assert feats.shape == (2, 8)
    for i in range(2):
        for p in range(4):
            s = _cos(u[i].tolist(), protos[p].tolist())
            for c in range(2):
                want = s if labels[p] == c else 0.0
                assert feats[i, p * 2 + c].item() == pytest.approx(want, abs=1e-6)
    assert torch.allclose(head(u), head.linear(feats))
    with pytest.raises(ValueError, match="labels must lie"):
        head.set_prototypes(protos, torch.tensor([0, 1, 2, 0]))


def test_transformer_head_shape_and_padding_mask():
    torch.manual_seed(5)
    head = TransformerClassificationHead(8, 5, n_layers=2, n_heads=2, dropout=0.0).eval()
    tokens, mask = torch.randn(2, 6, 8), torch.tensor([[1, 1, 1, 0, 0, 0], [1] * 6])
    out = head(tokens, mask)
    assert out.shape == (2, 5)
    changed = tokens.clone()
    changed[0, 3:] = 100.0  # padded positions must not matter
    assert torch.allclose(head(changed, mask), out, atol=1e-5)
    with pytest.raises(ValueError, match="n_heads"):
        TransformerClassificationHead(8, 5, n_heads=3)


def test_heads_save_load_round_trip(tmp_path):
    torch.manual_seed(6)
    head = PrototypeHead(3, 4, 2, 0.1)
    head.set_prototypes(torch.randn(4, 3), torch.tensor([0, 1, 1, 0]))
    head.save(tmp_path / "p")
    back = PrototypeHead.load(tmp_path / "p")
    assert torch.equal(back.prototypes, head.prototypes) and torch.equal(back.prototype_labels, head.prototype_labels)
    u = torch.randn(2, 3)
    assert torch.equal(back(u), head.eval()(u))


def test_pair_features_rejects_unknown_kind():
    with pytest.raises(ValueError, match="valid: concat, abs_diff, cos"):
        pair_features(torch.zeros(1, 2), torch.zeros(1, 2), "sum")


def test_nli_regression_by_hand():
    torch.manual_seed(7)
    u, v = torch.randn(3, 4), torch.randn(3, 4)
    labels = ["entailment", "neutral", "contradiction"]
    t = torch.tensor([NLI_LABEL_SCORES[x] for x in labels])
    assert t.tolist() == [1.0, 0.5, 0.0]
    hand = sum((_cos(u[i].tolist(), v[i].tolist()) - t[i].item()) ** 2 for i in range(3)) / 3
    assert NLIRegressionLoss()(u, v, t).item() == pytest.approx(hand, rel=1e-5)
    assert nli_loss("regression", [u, v], targets=t).item() == pytest.approx(hand, rel=1e-5)


def test_nli_contrastive_eq3_by_hand():
    torch.manual_seed(8)
    a, p, n = torch.randn(3, 4), torch.randn(3, 4), torch.randn(3, 4)
    tau = 0.05
    hand = 0.0
    for i in range(3):
        num = math.exp(_cos(a[i].tolist(), p[i].tolist()) / tau)
        den = sum(math.exp(_cos(a[i].tolist(), p[j].tolist()) / tau)
                  + math.exp(_cos(a[i].tolist(), n[j].tolist()) / tau) for j in range(3))
        hand += -math.log(num / den) / 3
    assert nli_loss("contrastive", [a, p, n], temperature=tau).item() == pytest.approx(hand, rel=1e-4)


def test_nli_triplet_eq4_by_hand():
    a = torch.tensor([[0.0, 0.0], [1.0, 1.0]])
    p = torch.tensor([[3.0, 4.0], [1.0, 1.0]])  # distances 5 and 0
    n = torch.tensor([[0.0, 1.0], [4.0, 5.0]])  # distances 1 and 5
    hand = (max(0.0, 5 - 1 + 1) + max(0.0, 0 - 5 + 1)) / 2  # = 2.5
    assert nli_loss("triplet", [a, p, n]).item() == pytest.approx(hand, abs=1e-4)
    assert NLITripletLoss(margin=2.0)(a, p, n).item() == pytest.approx(3.0, abs=1e-4)
    with pytest.raises(ValueError, match="valid: regression, contrastive, triplet"):
        nli_loss("cosine", [a, p, n])
