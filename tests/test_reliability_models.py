"""Model folders a user may hand over: damaged, incomplete, altered. Each is refused with one line naming the
folder and the files expected, or, where the model is fine but the option is not, handled correctly."""

from __future__ import annotations

import json
import logging
import os
import shutil

import numpy as np
import pytest

from conftest import write_stsb

RELIABILITY_GROUP = "Model files"


@pytest.fixture()
def model(tiny_bert, env):
    """A copy of the tiny BERT that a test may damage."""
    return shutil.copytree(tiny_bert, env / "model")


def _layers(model, env):
    return ["layers", "--model", model, "--data-dir", write_stsb(env / "data", n_pairs=12), "--output", env / "o", "-q"]


def _truncate(path):
    path.write_bytes(path.read_bytes()[:1000])


def _garbage(path):
    path.write_bytes(os.urandom(5000))


DAMAGE = [
    ("no tokenizer files (was a 5-token vocabulary, every word [UNK], exit 0)",
     lambda m: [(m / n).unlink() for n in ("tokenizer.json", "tokenizer_config.json")], ("no tokenizer files",)),
    ("only a config.json", lambda m: [p.unlink() for p in m.iterdir() if p.name != "config.json"], ("no weight files",)),
    ("invalid config.json", lambda m: (m / "config.json").write_text("{not json"), ("config.json", "JSON")),
    ("config.json without model_type", lambda m: (m / "config.json").write_text("{}"), ("model_type",)),
    ("missing weights", lambda m: (m / "model.safetensors").unlink(), ("no weight files",)),
    ("truncated weights", lambda m: _truncate(m / "model.safetensors"), ("cannot load the model", "damaged")),
    ("garbage weights", lambda m: _garbage(m / "model.safetensors"), ("cannot load the model", "damaged")),
]


@pytest.mark.parametrize("what, damage, match", DAMAGE, ids=[d[0].split(" (")[0] for d in DAMAGE])
def test_damaged_model_folder_is_refused(what, damage, match, model, env, case, capsys):
    damage(model)
    case.cli_error(_layers(model, env), capsys, what=what, match=(str(model), *match), outcome="refusal")


def _fake_builtin(monkeypatch, folder, sha256):
    from layerwise.encoders import registry

    fake = registry.BuiltinModel(name="tiny-builtin", hf_id="test/tiny-builtin", install="pip install tiny",
                                 locate=lambda: folder, sha256=sha256)
    monkeypatch.setitem(registry.BUILTIN_MODELS, "tiny-builtin", fake)
    return fake


def test_builtin_weights_checked_against_the_published_hash(model, env, case, capsys, monkeypatch):
    from layerwise.encoders import registry

    real_sha = registry.weights_sha256
    published = real_sha(model)
    _fake_builtin(monkeypatch, model, published)
    assert registry.resolve_model("tiny-builtin").path == model
    memo = json.loads((env / "home" / "verified-weights.json").read_text())
    assert memo[str((model / "model.safetensors").resolve())]["sha256"] == published

    def no_rehash(path):
        raise AssertionError("an unchanged file was hashed again")

    monkeypatch.setattr(registry, "weights_sha256", no_rehash)
    registry.resolve_model("tiny-builtin")  # remembered by size and mtime: no hashing
    monkeypatch.setattr(registry, "weights_sha256", real_sha)

    weights = model / "model.safetensors"
    raw = bytearray(weights.read_bytes())
    raw[-4096:] = bytes(b ^ 0xFF for b in raw[-4096:])  # 4 KB flipped: still loads, gives other numbers
    weights.write_bytes(bytes(raw))
    case.cli_error(_layers("tiny-builtin", env), capsys,
                   what="built-in model with 4 KB of its weights flipped (was negative correlations, exit 0)",
                   match=("tiny-builtin", "not the published", "reinstall"), outcome="refusal")


def test_tokenizer_change_changes_the_cache_key(model, env, case):
    from layerwise import LayerEncoder

    text = ["A Man Plays The Guitar ."]
    first = LayerEncoder(model, cache_dir=env / "cache", show_progress=False)
    before = first.encode(text)
    tok = json.loads((model / "tokenizer.json").read_text())
    tok["normalizer"]["lowercase"] = False  # a copy that stops lowercasing: capitalised words become [UNK]
    (model / "tokenizer.json").write_text(json.dumps(tok))
    cfg = json.loads((model / "tokenizer_config.json").read_text())
    cfg["do_lower_case"] = False
    (model / "tokenizer_config.json").write_text(json.dumps(cfg))
    second = LayerEncoder(model, cache_dir=env / "cache", show_progress=False)
    after = second.encode(text)
    assert first.cache_key()["tokenizer_sha256"] != second.cache_key()["tokenizer_sha256"]
    assert second.cache.last_stats["computed"] == 1  # not the old vectors
    assert not np.allclose(before.mean, after.mean)
    assert np.allclose(after.mean, LayerEncoder(model, cache_dir=False, show_progress=False).encode(text).mean)
    case.record("tokenizer.json that stops lowercasing, same weights (was the old cached vectors)",
                "LayerEncoder(copy with tokenizer.json changed).encode(texts)", "correct result",
                "cache key holds tokenizer_sha256 and config_sha256: the texts were encoded again")


def test_max_length_beyond_the_models_positions_is_capped(model, env, case, caplog):
    from layerwise import LayerEncoder

    long_text = " ".join(["the man is playing guitar"] * 40)  # 200 words; the tiny model has 64 positions
    with caplog.at_level(logging.WARNING, logger="layerwise.encoders.layer_encoder"):
        enc = LayerEncoder(model, max_length=100000, cache_dir=False, show_progress=False)
    assert enc.max_length == 64
    assert "texts are cut at 64 tokens" in caplog.text
    capped = enc.encode([long_text, "a dog"])
    exact = LayerEncoder(model, max_length=64, cache_dir=False, show_progress=False).encode([long_text, "a dog"])
    assert np.allclose(capped.mean, exact.mean)
    case.record("--max-length 100000 with a long text (was a tensor size mismatch at 512 positions)",
                "LayerEncoder(model, max_length=100000).encode([200-word text])", "correct result",
                caplog.records[-1].getMessage())


def test_mpnet_positions_count_from_the_padding_index(tiny_mpnet, env):
    from layerwise import LayerEncoder

    enc = LayerEncoder(tiny_mpnet, max_length=100000, cache_dir=False, show_progress=False)
    assert enc.max_length == 66 - 2  # position ids start at padding_idx + 1
    enc.encode([" ".join(["the dog runs"] * 40)])


@pytest.mark.slow
def test_real_minilm_long_text_with_huge_max_length(env):
    """The reported case on the real model: 3000 words, --max-length 100000 (was a size mismatch at 512)."""
    from layerwise import LayerEncoder
    from layerwise.errors import ModelNotFoundError

    try:
        enc = LayerEncoder("all-MiniLM-L6-v2", max_length=100000, cache_dir=False, show_progress=False)
    except ModelNotFoundError:
        pytest.skip("all-MiniLM-L6-v2 is not installed")
    assert enc.max_length == 512
    assert enc.encode([" ".join(["word"] * 3000), "short"]).mean.shape == (2, 7, 384)
