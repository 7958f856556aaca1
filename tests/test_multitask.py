"""Multi-task fine-tuning on a tiny random BERT and small written data: schedules, phases, save/load, resume."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
import torch

from conftest import write_multitask
from layerwise.methods.multitask.config import MIX_LR, MultitaskConfig, get_experiment, load_config
from layerwise.methods.multitask.data import load_multitask_data
from layerwise.methods.multitask.evaluate import overall_score
from layerwise.methods.multitask.model import MultitaskNetwork
from layerwise.methods.multitask.run import RunControl, build_model, run_experiment
from layerwise.methods.multitask.schedule import BatchPlan

TINY = {"epochs": 1, "batch_size": 8, "max_length": 16, "lr": 1e-3}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return write_multitask(tmp_path_factory.mktemp("mt-data"), n=24)


# ---------------------------------------------------------------------------------------------- schedules


def _visits(plan: BatchPlan, epoch: int) -> list[tuple[str, list[int]]]:
    per = plan.steps_per_epoch
    return [(t, idx.tolist()) for t, idx in (plan.batch(epoch * per + s) for s in range(per))]


@pytest.mark.parametrize("schedule", ["task_by_task", "round_robin", "proportional"])
def test_every_schedule_visits_every_example_once_per_epoch(schedule):
    plan = BatchPlan(("sst", "para", "sts"), (10, 5, 23), batch_size=4, schedule=schedule, seed=3)
    assert plan.batches_per_task == (3, 1, 6)  # 10 = 4 + 4 + 2; 5 = 4 + 1 (a batch of one dropped); 23 = 5 * 4 + 3
    for epoch in (0, 1):
        seen = {t: [] for t in plan.tasks}
        for task, idx in _visits(plan, epoch):
            assert len(idx) >= 2
            seen[task] += idx
        assert sorted(seen["sst"]) == list(range(10))
        assert len(set(seen["para"])) == 4 and set(seen["para"]) <= set(range(5))
        assert sorted(seen["sts"]) == list(range(23))
    assert _visits(plan, 0) != _visits(plan, 1)  # a new shuffle each epoch
    assert _visits(plan, 1) == _visits(BatchPlan(plan.tasks, plan.sizes, 4, schedule, 3), 1)  # pure function


def test_schedule_orders():
    tasks, sizes = ("sst", "para", "sts"), (8, 4, 12)  # 2, 1, 3 batches of 4
    order = lambda s, seed=0: [t for t, _ in BatchPlan(tasks, sizes, 4, s, seed).epoch_order(0)]  # noqa: E731
    assert order("task_by_task") == ["sst", "sst", "para", "sts", "sts", "sts"]
    assert order("round_robin") == ["sst", "para", "sts", "sst", "sts", "sts"]
    prop = [order("proportional", seed) for seed in range(20)]
    assert all(Counter(o) == Counter(sst=2, para=1, sts=3) for o in prop)
    assert len({tuple(o) for o in prop}) > 1  # seeded shuffles differ
    with pytest.raises(ValueError, match="valid: task_by_task, round_robin, proportional"):
        BatchPlan(tasks, sizes, 4, "random")


# ---------------------------------------------------------------------------------------------- config


def test_config_round_trip_and_named_experiments(tmp_path):
    cfg = get_experiment("NLI_TRIPLET+MIX", epochs=3)
    assert (cfg.nli, cfg.sts_head, cfg.para_features, cfg.layers, cfg.epochs) == ("triplet", "cosine", "abs_diff",
                                                                                  "mix", 3)
    # +MIX rows train their mixes at MIX_LR; every other row keeps the default (its results key unchanged)
    assert cfg.mix_lr == MIX_LR != MultitaskConfig().mix_lr == get_experiment("NLI_TRIPLET+SUBSET").mix_lr
    assert get_experiment("BASELINE+MIX", mix_lr=0.5).mix_lr == 0.5  # an explicit override still wins
    path = cfg.save(tmp_path / "c.json")
    assert load_config(path) == cfg
    with pytest.raises(KeyError, match="Did you mean 'BASELINE'"):
        get_experiment("BASELIN")
    (tmp_path / "bad.json").write_text(json.dumps({"name": "x", "heads": 3}))
    with pytest.raises(ValueError, match="unknown MultitaskConfig fields"):
        load_config(tmp_path / "bad.json")
    with pytest.raises(ValueError, match="schedule"):
        MultitaskConfig(schedule="shuffle")


def test_overall_score_formula():
    assert overall_score(0.5, 0.75, 0.6) == pytest.approx((0.5 + 0.75 + 0.8) / 3)


def test_data_splits(data_dir):
    data = load_multitask_data(MultitaskConfig(), data_dir)
    assert len(data.sst.train) == 24 and len(data.sst.dev) == 24 and data.n_classes == 5
    assert (len(data.para.train), len(data.para.dev), len(data.para.test)) == (22, 2, 24)  # 90 / 10 of Quora dev
    dev_rows = set(zip(data.para.dev.first, data.para.dev.second, data.para.dev.targets, strict=True))
    train_rows = list(zip(data.para.train.first, data.para.train.second, data.para.train.targets, strict=True))
    assert len(dev_rows) + len(train_rows) == 24
    small = load_multitask_data(MultitaskConfig(limit=20, eval_limit=5), data_dir)
    assert len(small.sst.train) == 20 and len(small.para.train) == 20 and len(small.sts.dev) == 5
    assert set(small.sst.train.sentences) <= set(data.sst.train.sentences)
    assert len(data.sts.test) == 24 and data.nli_pairs is None


# ---------------------------------------------------------------------------------------------- model


def _model(tiny_bert, config, data, seed=0):
    torch.manual_seed(seed)
    return build_model(str(tiny_bert), config, data.n_classes)


@pytest.mark.parametrize("name", ["BASELINE", "SHARED", "STS_PARA_HEAD_MOD_1", "FREEZE_SST", "BASELINE+MIX"])
def test_model_outputs_and_save_load_round_trip(tiny_bert, data_dir, tmp_path, name):
    config = get_experiment(name, **TINY, sst_transformer_layers=1)
    data = load_multitask_data(config, data_dir)
    model = _model(tiny_bert, config, data).eval()
    s = data.sst.dev.sentences[:3]
    a, b = data.sts.dev.first[:3], data.sts.dev.second[:3]
    assert model.sst_logits(s).shape == (3, 5)
    assert model.pair_scores("para", a, b).shape == (3,) and model.pair_scores("sts", a, b).shape == (3,)
    model.save(tmp_path / "m")
    back = MultitaskNetwork.load(tmp_path / "m")
    assert torch.equal(back.sst_logits(s), model.sst_logits(s))
    assert torch.equal(back.pair_scores("sts", a, b), model.pair_scores("sts", a, b))
    assert back.layer_weights() == model.layer_weights()


def test_freeze_sst_leaves_frozen_weights_bit_identical(tiny_bert, data_dir, tmp_path):
    from layerwise.methods.multitask.run import phases
    from layerwise.methods.multitask.task import TaskPhase
    from layerwise.training import TrainingConfig, train

    config = get_experiment("FREEZE_SST", **TINY, sst_transformer_layers=1)
    data = load_multitask_data(config, data_dir)
    model = _model(tiny_bert, config, data)
    name, tasks, plan, _ = phases(config, data, 0)[1]
    assert (name, tasks) == ("sst_head", ("sst",))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    task = TaskPhase(model, data, tasks, config, plan, frozen_encoder=True, name=name)
    train(task, TrainingConfig(steps=3, decay="constant", seed=0), show_progress=False)
    after = model.state_dict()
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and all(k.startswith("heads.sst.") for k in changed)
    assert {k for k in before if k.startswith("heads.sst.") and "weight" in k} & changed


def test_prototype_head_is_filled_from_sst_training_sentences(tiny_bert, data_dir):
    from layerwise.methods.multitask.run import set_prototypes

    config = get_experiment("SST_TO_STS", **TINY, sst_prototypes=2)
    data = load_multitask_data(config, data_dir)
    model = _model(tiny_bert, config, data)
    picked = set_prototypes(model, data, 2, seed=0)
    head = model.heads["sst"]
    assert head.prototypes.shape == (10, 32)
    assert head.prototype_labels.tolist() == [c for c in range(5) for _ in range(2)]
    assert [int(data.sst.train.labels[i]) for i in picked] == head.prototype_labels.tolist()
    model.eval()
    with torch.no_grad():
        want = model.embed("sst", model.encode_texts([data.sst.train.sentences[picked[3]]])[0])[0]
    assert torch.allclose(head.prototypes[3], want, atol=1e-5)
    with pytest.raises(ValueError, match="sst_prototypes=9"):
        load_multitask_data(get_experiment("SST_TO_STS", sst_prototypes=9), data_dir)


# ---------------------------------------------------------------------------------------------- runs


def test_resume_equals_a_straight_run(tiny_bert, data_dir, tmp_path):
    config = get_experiment("NLI_CONTRASTIVE", **TINY, limit=12)
    data = load_multitask_data(config, data_dir)
    straight = run_experiment(config, 0, tmp_path / "a", model_name=str(tiny_bert), data=data)
    assert run_experiment(config, 0, tmp_path / "b", model_name=str(tiny_bert), data=data,
                          control=RunControl(max_steps_per_phase=1)) is None
    resumed = run_experiment(config, 0, tmp_path / "b", model_name=str(tiny_bert), data=data, control=RunControl(resume=True))
    assert resumed.dev == straight.dev and resumed.test == straight.test
    assert [p.epoch_loss for p in resumed.phases] == [p.epoch_loss for p in straight.phases]
    a = MultitaskNetwork.load(straight.model_dir).state_dict()
    b = MultitaskNetwork.load(resumed.model_dir).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    with pytest.raises(FileExistsError, match="resume=True"):
        run_experiment(config, 0, tmp_path / "b", model_name=str(tiny_bert), data=data)


@pytest.mark.parametrize("name", ["FREEZE_SST", "STS_PARA_HEAD_MOD+SUBSET", "NLI_REGRESSION+MIX"])
def test_experiments_run_and_score(tiny_bert, data_dir, tmp_path, name):
    config = get_experiment(name, **TINY, limit=12, sst_transformer_layers=1)
    data = load_multitask_data(config, data_dir)
    result = run_experiment(config, 0, tmp_path / "run", model_name=str(tiny_bert), data=data)
    for scores in (result.dev, result.test):
        assert 0 <= scores.sst_acc <= 1 and 0 <= scores.para_acc <= 1 and -1 <= scores.sts_pearson <= 1
    assert [p.name for p in result.phases] == {"FREEZE_SST": ["para_sts", "sst_head"],
                                              "STS_PARA_HEAD_MOD+SUBSET": ["tasks"],
                                              "NLI_REGRESSION+MIX": ["nli", "tasks"]}[name]
    if name.endswith("+MIX"):
        assert set(result.layer_weights) == {"sst", "para", "sts"}
        assert all(len(w) == 3 and sum(w) == pytest.approx(1.0) for w in result.layer_weights.values())
        assert any(not np.allclose(w, 1 / 3) for w in result.layer_weights.values())  # trained
    if name.endswith("+SUBSET"):
        assert set(result.subsets) == {"sst", "para", "sts"}
        loaded = MultitaskNetwork.load(result.model_dir)
        assert loaded.subsets == {t: tuple(c["layers"]) for t, c in result.subsets.items()}


def test_tensors_sha256_covers_zero_dim_tensors():
    from layerwise.training import tensors_sha256

    assert tensors_sha256({"gamma": torch.ones(())}) != tensors_sha256({"gamma": torch.zeros(())})


def test_batched_length_sorted_predictions_equal_one_at_a_time(tiny_bert, data_dir):
    from layerwise.methods.multitask.evaluate import predict_pairs, predict_sst

    config = get_experiment("STS_PARA_HEAD_MOD", **TINY)
    data = load_multitask_data(config, data_dir)
    model = _model(tiny_bert, config, data).eval()
    s, d = data.sst.dev.sentences[:7], data.para.dev
    with torch.no_grad():
        one = np.stack([model.sst_logits([x])[0].numpy() for x in s])
        pairs = np.array([model.pair_scores("para", [a], [b])[0].item() for a, b in zip(d.first, d.second,
                                                                                         strict=True)])
    np.testing.assert_allclose(predict_sst(model, s, batch_size=3), one, atol=1e-5)
    np.testing.assert_allclose(predict_pairs(model, "para", d.first, d.second, batch_size=1), pairs, atol=1e-5)


def test_resume_with_other_settings_is_refused(tiny_bert, data_dir, tmp_path):
    config = get_experiment("BASELINE", **TINY, limit=12)
    data = load_multitask_data(config, data_dir)
    assert run_experiment(config, 0, tmp_path / "r", model_name=str(tiny_bert), data=data,
                          control=RunControl(max_steps_per_phase=1)) is None
    other = get_experiment("BASELINE", **{**TINY, "lr": 5e-4}, limit=12)
    with pytest.raises(ValueError, match="cannot resume .* settings.config.lr"):
        run_experiment(other, 0, tmp_path / "r", model_name=str(tiny_bert), data=data, control=RunControl(resume=True))


def test_freeze_sst_with_a_mix_gives_the_token_head_no_mix(tiny_bert, data_dir):
    config = get_experiment("FREEZE_SST+MIX", **TINY, sst_transformer_layers=1)
    data = load_multitask_data(config, data_dir)
    assert set(_model(tiny_bert, config, data).layer_weights()) == {"para", "sts"}
