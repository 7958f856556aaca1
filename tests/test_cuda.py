"""Every estimator on a GPU: fit on ``device="cuda"`` on a tiny random BERT, and the model it saves loads on the CPU
and gives the same vectors there (a model trained on a GPU serves on a CPU machine). Encoding without training gives
the CPU's vectors on the GPU.

The GPU tests skip where torch sees no GPU (CI, this project's CPU machines); they run on a lent GPU machine:
``python -m pytest tests/test_cuda.py``. The last test runs everywhere: a folder that records a GPU it was trained on
loads and encodes on a machine without it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from conftest import SENTENCES
from layerwise import (
    Compressor,
    CompressSettings,
    LatteMix,
    LayerAttentionPooler,
    LayerCombination,
    LayerEncoder,
    MultitaskModel,
    Task,
    TruncatedFineTuner,
)

# LAYERWISE_TEST_DEVICE=cpu runs these tests' own code on a machine without a GPU (the comparisons are then trivial)
DEVICE = os.environ.get("LAYERWISE_TEST_DEVICE", "cuda")
needs_gpu = pytest.mark.skipif(DEVICE.startswith("cuda") and not torch.cuda.is_available(),
                               reason="needs a GPU that torch sees")

TOL = 1e-4  # float32 on a GPU against float32 on the CPU: other kernels, other summation orders


def _pairs(n: int = 16, seed: int = 0):
    rnd = np.random.default_rng(seed)
    s1 = [SENTENCES[i % len(SENTENCES)] for i in range(n)]
    s2 = [SENTENCES[(3 * i + 1) % len(SENTENCES)] for i in range(n)]
    return s1, s2, np.round(rnd.uniform(0, 5, n), 1)


def _assert_close(a: np.ndarray, b: np.ndarray) -> None:
    assert a.shape == b.shape and np.isfinite(a).all()
    np.testing.assert_allclose(a, b, atol=TOL, rtol=TOL)


def _encode_without_gpu(cls: type, folder, tmp_path) -> np.ndarray:
    """``cls.load(folder).encode(SENTENCES)`` in a process that sees no GPU, as on a CPU-only server."""
    out = tmp_path / f"{cls.__name__}.npy"
    code = (f"import numpy as np, torch, layerwise; assert not torch.cuda.is_available(); "
            f"np.save({str(out)!r}, layerwise.{cls.__name__}.load({str(folder)!r}).encode({SENTENCES!r}))")
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return np.load(out)


@needs_gpu
def test_layer_encoder_on_cuda_gives_the_cpu_vectors(tiny_bert, env):
    cpu = LayerEncoder(str(tiny_bert), device="cpu", cache_dir=False).encode(SENTENCES)
    gpu = LayerEncoder(str(tiny_bert), device=DEVICE, cache_dir=False).encode(SENTENCES)
    _assert_close(np.asarray(gpu.mean), np.asarray(cpu.mean))


@needs_gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_layer_encoder_in_half_precision_on_cuda_is_close_to_float32(tiny_bert, env, dtype):
    """Half precision on the GPU: every hidden state's mean within a few bits of float32 (cosine > 0.999)."""
    full = np.asarray(LayerEncoder(str(tiny_bert), device="cpu", cache_dir=False).encode(SENTENCES).mean)
    half = np.asarray(LayerEncoder(str(tiny_bert), device=DEVICE, dtype=dtype, cache_dir=False).encode(SENTENCES).mean)
    assert half.dtype == np.float32 and half.shape == full.shape and np.isfinite(half).all()
    cos = (half * full).sum(-1) / (np.linalg.norm(half, axis=-1) * np.linalg.norm(full, axis=-1))
    assert cos.min() > 0.999, cos.min()

@needs_gpu
def test_layer_combination_on_cuda_chooses_and_encodes_as_on_cpu(tiny_bert, tmp_path, env):
    s1, s2, y = _pairs()
    cpu = LayerCombination(str(tiny_bert), max_length=32, cache_dir=False, device="cpu").fit(s1, s2, y)
    gpu = LayerCombination(str(tiny_bert), max_length=32, cache_dir=False, device=DEVICE).fit(s1, s2, y)
    assert gpu.layers_ == cpu.layers_
    _assert_close(gpu.encode(SENTENCES), cpu.encode(SENTENCES))
    _assert_close(_encode_without_gpu(LayerCombination, gpu.save(tmp_path / "lc"), tmp_path), cpu.encode(SENTENCES))


@needs_gpu
def test_layer_attention_trained_on_cuda_loads_on_cpu(tiny_bert, tmp_path, env):
    est = LayerAttentionPooler(str(tiny_bert), steps=3, batch_size=4, warmup_steps=0, max_length=16, lr=1e-3,
                               eval_every=0, device=DEVICE).fit(SENTENCES)
    assert next(est.model_.parameters()).device.type == torch.device(DEVICE).type
    on_gpu = est.encode(SENTENCES)
    _assert_close(_encode_without_gpu(LayerAttentionPooler, est.save(tmp_path / "att"), tmp_path), on_gpu)


@needs_gpu
def test_lattemix_trained_on_cuda_loads_on_cpu(tiny_bert, tmp_path, env):
    est = LatteMix(str(tiny_bert), layer=1, n_groups=3, n_classes=4, latent_dim=5, epochs=1, batch_size=32,
                   lr_warmup_steps=2, beta_warmup_steps=5, show_progress=False, device=DEVICE).fit(SENTENCES * 3)
    on_gpu = est.encode(SENTENCES)
    _assert_close(_encode_without_gpu(LatteMix, est.save(tmp_path / "latte"), tmp_path), on_gpu)


@needs_gpu
@pytest.mark.parametrize("pre_step", [None, "wordsim", "mlm"])
def test_tmft_trained_on_cuda_loads_on_cpu(tiny_bert, tmp_path, env, pre_step):
    s1, s2, y = _pairs()
    words1 = "man woman dog cat car bike guitar piano red blue park street water food house child".split()
    data = {"wordsim": {"word_pairs": (words1, words1[::-1], np.linspace(0, 10, len(words1)))},
            "mlm": {"corpus": SENTENCES}}.get(pre_step, {})
    est = TruncatedFineTuner(str(tiny_bert), depth=1, epochs=2, batch_size=4, lr=1e-3, max_length=16,
                             pre_step=pre_step, wordsim_epochs=1, wordsim_batch_size=4, mlm_batch_size=4,
                             mlm_grad_accumulation=1, show_progress=False, device=DEVICE
                             ).fit(s1, s2, y, dev=(s1, s2, y), **data)
    assert (est.pre_step_ is None) == (pre_step is None)
    on_gpu = est.encode(SENTENCES)
    _assert_close(_encode_without_gpu(TruncatedFineTuner, est.save(tmp_path / "tmft"), tmp_path), on_gpu)


@needs_gpu
def test_tmft_resumes_on_cuda_to_the_same_model(tiny_bert, tmp_path, env):
    """Two epochs in one go, and one epoch then a resumed second (the checkpoint holds the GPU's RNG state)."""
    s1, s2, y = _pairs()
    kw = dict(depth=1, batch_size=4, lr=1e-3, max_length=16, show_progress=False, device=DEVICE)
    whole = TruncatedFineTuner(str(tiny_bert), epochs=2, **kw).fit(s1, s2, y).encode(SENTENCES)
    out = tmp_path / "run"
    TruncatedFineTuner(str(tiny_bert), epochs=1, output_dir=str(out), **kw).fit(s1, s2, y)
    resumed = TruncatedFineTuner(str(tiny_bert), epochs=2, output_dir=str(out), **kw).fit(s1, s2, y)
    _assert_close(resumed.encode(SENTENCES), whole)


@needs_gpu
def test_multitask_trained_on_cuda_loads_on_cpu(tiny_bert, tmp_path, env):
    texts = SENTENCES[:8]
    tasks = [Task("sentiment", "classification", (texts, ["neg", "pos"] * 4)),
             Task("similar", "pair_regression", (texts, texts[::-1], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 2.5, 1.5]),
                  layer="mix")]
    est = MultitaskModel(str(tiny_bert), tasks=tasks, epochs=1, batch_size=4, max_length=12, lr=1e-3,
                         show_progress=False, device=DEVICE).fit()
    on_gpu = est.encode(SENTENCES)
    _assert_close(_encode_without_gpu(MultitaskModel, est.save(tmp_path / "mt"), tmp_path), on_gpu)


@needs_gpu
def test_compressor_distils_on_cuda_and_its_choice_loads_on_cpu(tiny_bert, tmp_path, env):
    corpus = [f"{a[:-2]} and {b[:-2]} ." for a in SENTENCES for b in SENTENCES][:64]
    settings = CompressSettings(epochs=2, batch_size=8, lr=1e-3, max_length=16, speed_sentences=16,
                                speed_batch_size=16, speed_repeats=1, device=DEVICE)
    est = Compressor(str(tiny_bert), depths=(1,), budget=100.0, backends=("torch",), settings=settings,
                     show_progress=False).fit(corpus, _pairs())
    assert {"original", "cut", "distilled"} <= {c.recipe for c in est.candidates_}
    on_gpu = est.encode(SENTENCES)
    _assert_close(_encode_without_gpu(Compressor, est.save(tmp_path / "chosen"), tmp_path), on_gpu)



@needs_gpu
def test_students_trained_on_cuda_are_loaded_by_a_run_without_a_gpu(tiny_bert, tmp_path, env):
    """``Compressor.train_students`` on the GPU, then the same parameters in a process that sees no GPU: it loads the
    students from the copied folder (training them again would fail there: distill_student is replaced) and fits."""
    import shutil

    corpus = [f"{a[:-2]} and {b[:-2]} ." for a in SENTENCES for b in SENTENCES][:64]
    settings = CompressSettings(epochs=2, batch_size=8, lr=1e-3, max_length=16, speed_sentences=16,
                                speed_batch_size=16, speed_repeats=1, device=DEVICE)
    kw = dict(depths=(1,), every_depth=(1, 2), budget=100.0, backends=("torch",))
    names = Compressor(str(tiny_bert), settings=settings, output_dir=str(tmp_path / "gpu"), show_progress=False,
                       **kw).train_students(corpus, _pairs())
    facts = json.loads(next((tmp_path / "gpu" / "students").glob("*/run.json")).read_text())
    assert len(names) == 2 and facts["device"].startswith(DEVICE)
    assert (facts["machine"]["gpu"] is None) == (DEVICE == "cpu")  # the GPU's name, recorded where it trained
    shutil.copytree(tmp_path / "gpu", tmp_path / "cpu")
    code = ("import torch, json, layerwise; from layerwise.methods.compress import students; "
            "assert not torch.cuda.is_available(); "
            "students.distill_student = lambda *a, **k: (_ for _ in ()).throw(AssertionError('trained again')); "
            f"s = layerwise.CompressSettings(epochs=2, batch_size=8, lr=1e-3, max_length=16, speed_sentences=16, "
            f"speed_batch_size=16, speed_repeats=1); "
            f"est = layerwise.Compressor({str(tiny_bert)!r}, settings=s, output_dir={str(tmp_path / 'cpu')!r}, "
            f"show_progress=False, depths=(1,), every_depth=(1, 2), budget=100.0, backends=('torch',))"
            f".fit({corpus!r}, {tuple(map(list, _pairs()[:2])) + (_pairs()[2].tolist(),)!r}); "
            "print(json.dumps(sorted(c.name for c in est.candidates_)))")
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "distilled-l1-torch" in done.stdout and "every-depth-l1-torch" in done.stdout


@needs_gpu
def test_compress_command_on_cuda_writes_a_model_that_serves_without_a_gpu(tiny_bert, env, capsys):
    """``layerwise compress --device cuda`` with its default backends (ONNX export and int8 where installed)."""
    from layerwise.cli import main
    from test_compress_cli import _args, _files

    corpus, dev, sick = _files(env)
    out = env / "out"
    assert main([*_args(tiny_bert, corpus, dev, out, "--test", str(sick), "--budget", "100"), "--device", DEVICE]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["chosen"] and all(np.isfinite(c["dev"]) for c in report["candidates"])
    code = (f"import torch; assert not torch.cuda.is_available(); from sentence_transformers import "
            f"SentenceTransformer; assert SentenceTransformer({str(out / 'model')!r}, device='cpu')"
            f".encode({SENTENCES!r}).shape == ({len(SENTENCES)}, 32)")
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]

def _record_device(value, device: str):
    """``value`` (parsed JSON) with every ``"device"`` entry set to ``device``."""
    if isinstance(value, dict):
        return {k: device if k == "device" else _record_device(v, device) for k, v in value.items()}
    if isinstance(value, list):
        return [_record_device(v, device) for v in value]
    return value


def _fit_small(name: str, model: str):
    s1, s2, y = _pairs()
    texts = SENTENCES[:8]
    if name == "lc":
        return LayerCombination(model, max_length=32, cache_dir=False).fit(s1, s2, y)
    if name == "attention":
        return LayerAttentionPooler(model, steps=2, batch_size=4, warmup_steps=0, max_length=16, eval_every=0,
                                    device="cpu").fit(SENTENCES)
    if name == "lattemix":
        return LatteMix(model, layer=1, n_groups=3, n_classes=4, latent_dim=5, epochs=1, batch_size=32,
                        show_progress=False).fit(SENTENCES * 3)
    return MultitaskModel(model, tasks=[Task("sentiment", "classification", (texts, ["neg", "pos"] * 4))], epochs=1,
                          batch_size=4, max_length=12, show_progress=False).fit()


@pytest.mark.parametrize(("name", "cls"), [("lc", LayerCombination), ("attention", LayerAttentionPooler),
                                           ("lattemix", LatteMix), ("multitask", MultitaskModel)])
def test_a_folder_that_records_a_gpu_loads_on_a_machine_without_it(tiny_bert, tmp_path, env, name, cls):
    """The device a model was fitted on is where it ran, not part of the model: ``load`` runs it where asked."""
    est = _fit_small(name, str(tiny_bert))
    folder = est.save(tmp_path / name)
    recorded = 0
    for path in folder.rglob("*.json"):
        text = path.read_text()
        if '"device"' in text:
            path.write_text(json.dumps(_record_device(json.loads(text), "cuda:7")))
            recorded += 1
    assert recorded, "the saved folder records no device: this test would check nothing"
    loaded = cls.load(folder, device="cpu")
    _assert_close(loaded.encode(SENTENCES), est.encode(SENTENCES))
    assert loaded.get_params()["device"] in (None, "cpu")
    assert cls.load(folder).get_params()["device"] != "cuda:7"
