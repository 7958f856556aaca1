"""The one training loop, through each trainer: seeding, exact resume, killed checkpoints, fingerprints, outputs."""

import json
import os
import pickle
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors import SafetensorError

from conftest import SENTENCES
from layerwise.errors import ModelFilesError
from layerwise.methods.lattemix import LatteMixConfig, TrainConfig, train_token_model
from layerwise.methods.lattemix.train import TokenModelTask
from layerwise.methods.layer_attention import ContrastiveConfig, SentenceModel, train_contrastive
from layerwise.methods.layer_attention.frozen import FrozenPoolerTask, train_pooler_on_features, training_views
from layerwise.methods.layer_attention.train import ContrastiveTask
from layerwise.modules import LayerPooler
from layerwise.training import TrainingConfig, TrainingTask, lr_factor, seed_everything, train

METHODS = ("contrastive", "frozen", "lattemix")
TASKS = {"contrastive": ContrastiveTask, "frozen": FrozenPoolerTask, "lattemix": TokenModelTask}


@pytest.fixture(scope="module")
def views(tiny_bert):
    seed_everything(0)
    model = SentenceModel.from_pretrained(str(tiny_bert), max_length=16)
    return training_views(model, "unsup", SENTENCES * 2, seed=3)


def _contrastive(env, out, *, model=0, data=0, lr=1e-3, **kw):
    seed_everything(model)
    sm = SentenceModel.from_pretrained(str(env["bert"]), pooler="layer_attention", max_length=16)
    cfg = ContrastiveConfig(objective="unsup", steps=5, batch_size=4, lr=lr, pooler_lr=3e-3, warmup_steps=2,
                            eval_every=2, temperature=0.5, grad_accumulation=2)
    examples = SENTENCES if data == 0 else SENTENCES[::-1]
    hist = train_contrastive(sm, examples, cfg, out, show_progress=False, **kw)
    return hist["loss"], sm.state_dict()


def _frozen(env, out, *, model=0, data=0, lr=3e-3, **kw):
    seed_everything(model)
    pooler = LayerPooler(kind="layer_attention", hidden_size=32, n_states=3)
    cfg = ContrastiveConfig(objective="unsup", steps=8, batch_size=6, pooler_lr=lr, warmup_steps=2, eval_every=2,
                            freeze_encoder=True, temperature=0.5)
    views = env["views"] if data == 0 else env["views"][::-1]
    hist = train_pooler_on_features(pooler, views, cfg, output_dir=out, **kw)
    return hist["loss"], pooler.state_dict()


def _lattemix(env, out, *, model=0, data=0, lr=3e-3, **kw):
    tokens = np.random.default_rng(0).normal(size=(150, 16)).astype(np.float32) * (1.0 if data == 0 else 1.5)
    cfg = LatteMixConfig(kind="categorical", input_dim=16, n_classes=8 if model == 0 else 4, n_groups=2,
                         beta_warmup_steps=4)
    trained, hist = train_token_model(cfg, tokens, TrainConfig(epochs=2, batch_size=32, lr=lr, lr_warmup_steps=2,
                                                               seed=0), show_progress=False, output_dir=out,
                                      checkpoint_every=2, **kw)
    assert hist["steps"] == len(hist["loss"])
    return hist["loss"], trained.state_dict()


RUNNERS = {"contrastive": _contrastive, "frozen": _frozen, "lattemix": _lattemix}


@pytest.fixture
def env(tiny_bert, views):
    return {"bert": tiny_bert, "views": views}


def _same_state(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("method", METHODS)
def test_one_seed_gives_identical_runs(method, env, tmp_path):
    loss_a, state_a = RUNNERS[method](env, tmp_path / "a")
    loss_b, state_b = RUNNERS[method](env, tmp_path / "b")
    assert loss_a == loss_b and _same_state(state_a, state_b)
    assert loss_a[-1] != loss_a[0]  # it did train


@pytest.mark.parametrize("method", METHODS)
def test_an_interrupted_run_resumes_bit_for_bit(method, env, tmp_path, monkeypatch):
    straight_loss, straight_state = RUNNERS[method](env, tmp_path / "straight")
    task = TASKS[method]
    real = task.loss

    def interrupted(self, step, micro):
        if step == 4:  # the fifth step, after the checkpoint of step 4
            raise KeyboardInterrupt
        return real(self, step, micro)

    monkeypatch.setattr(task, "loss", interrupted)
    with pytest.raises(KeyboardInterrupt):
        RUNNERS[method](env, tmp_path / "cut")
    monkeypatch.undo()
    assert json.loads((tmp_path / "cut" / "last" / "trainer_state.json").read_text())["step"] == 4
    loss, state = RUNNERS[method](env, tmp_path / "cut", resume=True)
    assert loss == straight_loss and _same_state(state, straight_state)


@pytest.mark.parametrize("method", METHODS)
def test_a_run_killed_while_checkpointing_keeps_the_previous_checkpoint(method, env, tmp_path, monkeypatch):
    import safetensors.torch

    straight_loss, straight_state = RUNNERS[method](env, tmp_path / "straight")
    real, calls = safetensors.torch.save_file, []

    def dies_on_second_trainer_state(tensors, filename, *args, **kwargs):
        if Path(filename).name == "trainer_state.safetensors":
            calls.append(filename)
            if len(calls) == 2:  # the module file of this checkpoint is written, the trainer state is not
                raise SystemExit("killed")
        return real(tensors, filename, *args, **kwargs)

    monkeypatch.setattr(safetensors.torch, "save_file", dies_on_second_trainer_state)
    with pytest.raises(SystemExit):
        RUNNERS[method](env, tmp_path / "killed")
    monkeypatch.undo()
    assert json.loads((tmp_path / "killed" / "last" / "trainer_state.json").read_text())["step"] == 2
    assert not list((tmp_path / "killed").glob(".last.*"))  # the half-written folder is gone
    loss, state = RUNNERS[method](env, tmp_path / "killed", resume=True)
    assert loss == straight_loss and _same_state(state, straight_state)


@pytest.mark.parametrize("method", METHODS)
def test_a_resume_with_another_model_data_or_setting_is_refused(method, env, tmp_path):
    RUNNERS[method](env, tmp_path / "run")
    for change, named in (({"model": 1}, "model"), ({"data": 1}, "data"), ({"lr": 0.02}, r"settings\.\w*lr")):
        with pytest.raises(ValueError, match=rf"cannot resume from .*differs in [^;]*{named}"):
            RUNNERS[method](env, tmp_path / "run", resume=True, **change)


def test_existing_output_needs_resume_or_overwrite_and_overwrite_keeps_other_files(env, tmp_path):
    out = tmp_path / "run"
    loss, state = _lattemix(env, out)
    from layerwise.outputs import guarded
    from layerwise.reports import write_json

    (out / "notes.txt").write_text("mine")
    (out / "train.json").write_text("{}")  # a file of the user's under the tool's name: never removed
    for overwrite in (False, True):
        with pytest.raises(FileExistsError, match="train.json was not written by layerwise"):
            _lattemix(env, out, overwrite=overwrite)
    assert (out / "train.json").read_text() == "{}"
    (out / "train.json").unlink()
    with guarded(out):
        write_json(out / "train.json", {})  # the tool's own (listed in the folder's manifest)
    with pytest.raises(FileExistsError, match="already holds last, train.json: pass resume=True"):
        _lattemix(env, out)
    again, again_state = _lattemix(env, out, overwrite=True)
    assert again == loss and _same_state(again_state, state)
    assert (out / "notes.txt").read_text() == "mine" and not (out / "train.json").exists()
    with pytest.raises(FileNotFoundError, match="nothing to resume"):
        _lattemix(env, tmp_path / "empty", resume=True)


def test_a_kill_between_the_two_renames_is_recovered(env, tmp_path):
    out = tmp_path / "run"
    loss, _ = _lattemix(env, out)
    (out / "last").rename(out / ".last.old-12345678")  # the old checkpoint set aside, the new one not yet in place
    assert _lattemix(env, out, resume=True)[0] == loss


def test_no_code_path_unpickles(env, tmp_path):
    out = tmp_path / "run"
    loss, _ = _lattemix(env, out)
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return os.mkdir, (str(marker),)

    (out / "last" / "trainer_state.pt").write_bytes(pickle.dumps(Payload()))
    assert _lattemix(env, out, resume=True)[0] == loss  # the pickle beside the checkpoint is ignored
    (out / "last" / "trainer_state.safetensors").write_bytes(pickle.dumps(Payload()))
    with pytest.raises(ModelFilesError, match="checkpoint files are damaged") as info:  # refused, nothing unpickled
        _lattemix(env, out, resume=True)
    assert isinstance(info.value.__cause__, SafetensorError)
    assert not marker.exists()
    src = Path(__file__).resolve().parents[1] / "src"
    unpickling = re.compile(r"\btorch\.load\(|\bimport pickle\b|\bpickle\.loads?\(|allow_pickle\s*=\s*True|weights_only\s*=\s*False")
    assert [p.name for p in src.rglob("*.py") if unpickling.search(p.read_text())] == []


def test_train_seeds_before_building_the_pooler(tiny_bert, tmp_path):
    from conftest import write_stsb, write_unlabeled
    from layerwise.benchmarks.layer_attention.run import DataSources, run_train

    data = write_unlabeled(write_stsb(tmp_path / "data", n_pairs=8))
    cfg = ContrastiveConfig(objective="unsup", steps=2, batch_size=4, eval_every=0, seed=5)
    sources = DataSources(data_dir=data)
    a, b = (run_train(str(tiny_bert), cfg, tmp_path / name, data=sources).history for name in ("a", "b"))
    assert len(a.loss) == 2 and a.loss == b.loss and a.dev == b.dev and a.config == cfg


def test_schedule_against_the_explicit_formula():
    got = [lr_factor(s, warmup_steps=3, total_steps=8) for s in range(8)]
    assert got == [1 / 3, 2 / 3, 1.0, 5 / 5, 4 / 5, 3 / 5, 2 / 5, 1 / 5]
    assert [lr_factor(s, warmup_steps=2, total_steps=8, decay="constant") for s in range(4)] == [0.5, 1.0, 1.0, 1.0]
    assert lr_factor(0, warmup_steps=0, total_steps=1) == 1.0


@pytest.mark.parametrize("bad, named", [
    ({"steps": 0}, "steps=0"), ({"warmup_steps": -1}, "warmup_steps=-1"), ({"eval_every": -1}, "eval_every=-1"),
    ({"grad_accumulation": 0}, "grad_accumulation=0"), ({"decay": "cosine"}, "decay='cosine'"),
    ({"dtype": "float64"}, "dtype='float64'"), ({"max_grad_norm": -1.0}, "max_grad_norm=-1.0"),
])
def test_settings_are_validated_at_construction(bad, named):
    with pytest.raises(ValueError, match=named):
        TrainingConfig(**{"steps": 3, **bad})


@pytest.mark.parametrize("bad", [{"lr": 0.0}, {"pooler_lr": -1.0}, {"batch_size": 1}, {"temperature": 0.0},
                                 {"steps": 0}, {"warmup_steps": -1}, {"eval_every": -1}, {"grad_accumulation": 0}])
def test_contrastive_settings_are_validated(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        ContrastiveConfig(**bad)
    with pytest.raises(ValueError, match="batch_size"):
        TrainConfig(batch_size=0)


class _Regression(TrainingTask):
    """A toy task for the loop itself: least squares on fixed data, micro-batches are halves of a step's batch."""

    def __init__(self, x, y, halves: bool):
        self.module, self.x, self.y, self.halves = torch.nn.Linear(3, 1), x, y, halves

    def param_groups(self):
        return [{"name": "w", "params": [self.module.weight], "lr": 0.05},
                {"name": "b", "params": [self.module.bias], "lr": 0.2}]

    def loss(self, step, micro):
        rows = slice(micro * 4, micro * 4 + 4) if self.halves else slice(0, 8)
        w = self.module.weight  # batches follow the module's device and dtype
        x, y = self.x[rows].to(w.device, w.dtype), self.y[rows].to(w.device, w.dtype)
        return {"loss": ((self.module(x) - y) ** 2).mean()}


def test_the_loop_against_a_hand_written_adamw_loop():
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(8, 3, generator=g), torch.randn(8, 1, generator=g)
    cfg = TrainingConfig(steps=7, warmup_steps=2, weight_decay=0.1, max_grad_norm=0.5, grad_accumulation=2, seed=4)
    seed_everything(1)
    task = _Regression(x, y, halves=True)
    run = train(task, cfg)
    seed_everything(1)
    ref = torch.nn.Linear(3, 1)  # the slow twin: one full batch per step, torch's own scheduler
    opt = torch.optim.AdamW([{"params": [ref.weight], "lr": 0.05}, {"params": [ref.bias], "lr": 0.2}],
                            weight_decay=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, warmup_steps=2, total_steps=7))
    losses = []
    for _ in range(7):
        loss = ((ref(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(ref.parameters(), 0.5)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
    np.testing.assert_allclose(run.loss, losses, rtol=1e-5)
    assert torch.allclose(task.module.weight, ref.weight, atol=1e-6) and run.step == list(range(1, 8))


def test_the_loop_moves_and_casts_the_module():
    g = torch.Generator().manual_seed(0)
    task = _Regression(torch.randn(8, 3, generator=g), torch.randn(8, 1, generator=g), halves=False)
    run = train(task, TrainingConfig(steps=3, device="cpu", dtype="bfloat16"))
    assert task.module.weight.dtype == torch.bfloat16 and all(np.isfinite(run.loss))
    with pytest.raises(ValueError, match="resume and overwrite need an output_dir"):
        train(task, TrainingConfig(steps=1), resume=True)
