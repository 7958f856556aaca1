"""The one module format (config.json + model.safetensors), ScalarMix, SentenceModel's folder, length batching."""

import json

import numpy as np
import pytest
import torch

from layerwise import LayerStack, layer_mean
from layerwise.methods.lattemix import LatteMixConfig, TokenLatentModel, build_model, load_model
from layerwise.modules import POOLER_KINDS, LayerPooler, PoolerConfig, ScalarMix, build_pooler, load_pooler


def _inputs(B=5, K=4, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, K, d, generator=g), torch.randn(B, K, d, generator=g)


def _randomise(module: torch.nn.Module, seed: int = 1) -> None:
    """Move every parameter away from its initial value (e.g. ScalarMix's zeros) so a round trip is meaningful."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(torch.randn(p.shape, generator=g))


@pytest.mark.parametrize("kind", POOLER_KINDS)
def test_every_pooler_kind_round_trips_through_the_module_format(kind, tmp_path):
    torch.manual_seed(0)
    pooler = LayerPooler(kind=kind, hidden_size=8, n_states=4).eval()
    _randomise(pooler)
    cls, mean = _inputs()
    out = pooler(cls, mean)
    folder = pooler.save(tmp_path / kind)
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "model.safetensors"]
    assert json.loads((folder / "config.json").read_text()) == {"kind": kind, "hidden_size": 8, "n_states": 4,
                                                                 "mlp": True}
    again = LayerPooler.load(folder)
    assert again.config == pooler.config and not again.training
    assert torch.equal(again(cls, mean), out)
    assert torch.equal(load_pooler(folder)(cls, mean), out)  # the wrapper kept for callers


def test_pooler_config_and_build_pooler_still_work():
    cfg = PoolerConfig(kind="scalar_mix", hidden_size=8, n_states=4, mlp=False)
    assert PoolerConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    pooler = build_pooler(cfg)
    assert pooler.config == cfg and pooler.get_config_dict() == cfg.to_dict()
    with pytest.raises(ValueError, match="first0_last_mean"):
        PoolerConfig(kind="first_last_mean")  # one name per pooler: the error lists the valid ones


def test_first0_last_mean_is_the_first0_last_selection():
    pooler = LayerPooler(kind="first0_last_mean", hidden_size=3, n_states=5, mlp=False)
    rng = np.random.default_rng(0)
    stack = LayerStack(mean=rng.normal(size=(4, 5, 3)).astype(np.float32),
                       cls=rng.normal(size=(4, 5, 3)).astype(np.float32))
    got = pooler(torch.from_numpy(stack.cls), torch.from_numpy(stack.mean)).numpy()
    np.testing.assert_allclose(got, layer_mean(stack, (0, 4)), rtol=1e-6)


def test_scalar_mix_against_the_closed_form_and_round_trip(tmp_path):
    mix = ScalarMix(5)
    with torch.no_grad():
        mix.weights.copy_(torch.tensor([0.5, -1.0, 2.0, 0.0, -3.0]))
        mix.gamma.fill_(2.0)
    h = torch.randn(3, 7, 5, 4, generator=torch.Generator().manual_seed(0))  # (..., K, d) with two leading axes
    w = mix.weights.detach().double().numpy()
    p = np.exp(w) / np.exp(w).sum()
    want = 2.0 * np.einsum("k,abkd->abd", p, h.double().numpy())  # gamma * sum_k softmax(w)_k h_k
    np.testing.assert_allclose(mix(h).detach().numpy(), want, rtol=1e-5, atol=1e-6)
    again = ScalarMix.load(mix.save(tmp_path / "mix"))
    assert again.n_states == 5 and torch.equal(again(h), mix(h))
    with pytest.raises(ValueError, match="K=5"):
        mix(torch.zeros(2, 4, 3))


@pytest.mark.parametrize("kind", ["categorical", "normal", "ae"])
def test_every_vae_kind_round_trips(kind, tmp_path):
    cfg = LatteMixConfig(kind=kind, input_dim=16, n_classes=8, latent_dim=4, depth=2, hidden_dim=24)
    model = build_model(cfg)
    model.set_input_stats(torch.randn(50, 16) * 3 + 1)
    model.eval()
    again = TokenLatentModel.load(model.save(tmp_path / kind))
    assert again.config == cfg and again.get_config_dict() == cfg.to_dict()
    x = torch.randn(7, 16)
    with torch.no_grad():
        a = model(x, generator=torch.Generator().manual_seed(3))
        b = load_model(tmp_path / kind)(x, generator=torch.Generator().manual_seed(3))
    assert all(torch.equal(a[k], b[k]) for k in ("loss", "recon", "kl"))


def test_load_errors_name_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError, match="holds no saved LayerPooler"):
        LayerPooler.load(tmp_path / "nothing")
    folder = LayerPooler(kind="last_cls", hidden_size=4, n_states=3).save(tmp_path / "p")
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "dropout": 0.1}))
    with pytest.raises(ValueError, match=r"unknown keys \['dropout'\], missing keys \[\]"):
        LayerPooler.load(folder)
    del cfg["mlp"]
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match=r"missing keys \['mlp'\]"):
        LayerPooler.load(folder)


def test_save_is_atomic_and_never_replaces_a_foreign_folder(tmp_path, monkeypatch):
    import safetensors.torch

    first = LayerPooler(kind="last_mean", hidden_size=4, n_states=3)
    folder = first.save(tmp_path / "p")
    second = LayerPooler(kind="last_mean", hidden_size=4, n_states=3)
    _randomise(second)

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(safetensors.torch, "save_file", broken)
    with pytest.raises(OSError, match="disk full"):
        second.save(folder)
    monkeypatch.undo()
    kept = LayerPooler.load(folder)
    assert all(torch.equal(a, b) for a, b in zip(kept.state_dict().values(), first.state_dict().values()))
    assert [p.name for p in tmp_path.iterdir()] == ["p"]  # no temporary folder left behind
    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "readme.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not written by this tool"):
        first.save(foreign)
    assert (foreign / "readme.txt").read_text() == "mine"


def test_length_sorted_batches_against_per_batch_tokenisation(tiny_bert):
    from transformers import AutoTokenizer

    from conftest import SENTENCES
    from layerwise.encoders.batching import length_sorted_batches

    tok = AutoTokenizer.from_pretrained(tiny_bert)
    texts = SENTENCES + ["a man .", "the dog is swimming in the water with a child and a cat ."]
    seen, lengths = [], []
    for idx, enc in length_sorted_batches(tok, texts, batch_size=3, max_length=9):
        slow = tok([texts[i] for i in idx], padding=True, truncation=True, max_length=9, return_tensors="pt")
        assert enc.keys() == slow.keys() and all(torch.equal(enc[k], slow[k]) for k in slow)
        seen += list(idx)
        lengths += enc["attention_mask"].sum(1).tolist()
    assert sorted(seen) == list(range(len(texts)))
    assert lengths == sorted(lengths, reverse=True)


def test_sentence_model_folder_round_trip(tiny_bert, tmp_path):
    from conftest import SENTENCES
    from layerwise.encoders.trainable import SentenceModel

    torch.manual_seed(0)
    model = SentenceModel.from_pretrained(str(tiny_bert), pooler="scalar_mix", max_length=12)
    _randomise(model.pooler)
    folder = model.save(tmp_path / "sm")
    assert sorted(p.name for p in folder.iterdir()) == ["encoder", "pooler", "sentence_model.json"]
    assert json.loads((folder / "sentence_model.json").read_text()) == {"format_version": 1, "max_length": 12}
    again = SentenceModel.load(folder)
    assert again.max_length == 12 and again.pooler.config == model.pooler.config
    np.testing.assert_array_equal(again.encode(SENTENCES), model.encode(SENTENCES))
    # batches sorted by token length give what one batch per text gives
    one_by_one = np.concatenate([model.encode([t]) for t in SENTENCES])
    np.testing.assert_allclose(model.encode(SENTENCES, batch_size=5), one_by_one, atol=1e-5)
    model.save(folder)  # a saved model may be replaced
    with pytest.raises(FileNotFoundError, match="holds no saved SentenceModel"):
        SentenceModel.load(folder / "pooler")
