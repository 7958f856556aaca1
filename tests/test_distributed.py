"""DDP under torchrun: 2 CPU processes (gloo) train to the parameters of one process with the same global batch.

One ``torchrun --nproc_per_node 2`` launch runs every scenario of tests/ddp_worker.py; the references run here,
in this process, through the same functions.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import ddp_worker
from conftest import build_tiny_bert
from layerwise.training import distributed

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
TOL = {"rtol": 1e-4, "atol": 1e-5}  # float sums run in another order over two processes


def torchrun(args: list[str], tmp_path: Path, timeout: int = 240) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(HERE), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1", "LAYERWISE_HOME": str(tmp_path / "home")}
    env.pop("WORLD_SIZE", None)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=tmp_path)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> str:
    return str(build_tiny_bert(tmp_path_factory.mktemp("models") / "tiny-bert-nodropout", dropout=0.0))


@pytest.fixture(scope="module")
def two_processes(model_dir, tmp_path_factory) -> Path:
    """The folder of every scenario's result from one 2-process launch."""
    tmp = tmp_path_factory.mktemp("ddp")
    done = torchrun([str(HERE / "ddp_worker.py"), model_dir, str(tmp / "out")], tmp)
    assert done.returncode == 0, done.stderr[-3000:]
    return tmp / "out"


@pytest.fixture(scope="module")
def one_process_b8(model_dir) -> dict:
    """The one-process reference of a global batch of 8: (state dict, TrainingRun)."""
    return ddp_worker.tmft(model_dir, batch_size=8)


def _load(folder: Path, name: str) -> tuple[dict, dict]:
    from safetensors.torch import load_file

    return load_file(str(folder / f"{name}.safetensors")), json.loads((folder / f"{name}.json").read_text())


def assert_same_parameters(a: dict, b: dict) -> None:
    assert sorted(a) == sorted(b)
    for k in a:
        torch.testing.assert_close(a[k], b[k], **TOL, msg=lambda m, k=k: f"{k}: {m}")


@pytest.mark.parametrize("name, kwargs", [("b8", {"batch_size": 8}),
                                          ("b5_ga2", {"batch_size": 5, "grad_accumulation": 2})])
def test_two_processes_train_the_parameters_of_one_process(two_processes, model_dir, one_process_b8, name, kwargs):
    state, run = one_process_b8 if name == "b8" else ddp_worker.tmft(model_dir, **kwargs)
    got, hist = _load(two_processes, name)
    assert_same_parameters(got, state)
    np.testing.assert_allclose(hist["loss"], run.loss, **TOL)  # rank 0 logs the loss of the whole batch
    np.testing.assert_allclose([s for _, s in hist["dev"]], [s for _, s in run.dev], **TOL)


def test_in_batch_negatives_come_from_every_process(two_processes):
    state, run = ddp_worker.frozen_pooler(batch_size=5)  # 5 rows: 3 on rank 0, 2 on rank 1
    got, hist = _load(two_processes, "pooler_b5")
    assert_same_parameters(got, state)
    np.testing.assert_allclose(hist["loss"], run.loss, **TOL)


def test_the_comparison_can_fail(two_processes, one_process_b8):
    """Two processes with a global batch of 4 do not reach the one-process parameters of a batch of 8."""
    state, _ = one_process_b8
    got, _ = _load(two_processes, "b4")
    with pytest.raises(AssertionError):
        assert_same_parameters(got, state)


def test_a_resumed_two_process_run_equals_a_straight_one(two_processes):
    straight, a = _load(two_processes, "b8")
    resumed, b = _load(two_processes, "b8_resumed")
    for k in straight:
        assert torch.equal(straight[k], resumed[k]), k
    assert a["loss"] == b["loss"]


def test_shards_cover_the_batch_in_order():
    for n, world in [(8, 2), (5, 2), (7, 3), (3, 3)]:
        sizes = distributed.shard_sizes(n, world)
        assert sum(sizes) == n and max(sizes) - min(sizes) <= 1
        assert [w * s / n for w, s in [(world, sizes[0])]] == [world * sizes[0] / n]
    assert list(distributed.shard(np.arange(6))) == list(range(6))  # one process: the whole batch
    with pytest.raises(ValueError, match="cannot be split over 4 processes"):
        distributed.shard_sizes(3, 4)


def test_tmft_command_under_torchrun_equals_one_process(model_dir, tmp_path):
    """`torchrun -m layerwise.cli tmft`: rank 0 alone prints and writes, and the run scores as one process does."""
    from conftest import write_stsb
    from layerwise.cli import main

    data = write_stsb(tmp_path / "data", n_pairs=16)
    args = ["tmft", "--model", model_dir, "--layers", "1", "--epochs", "2", "--batch-size", "5", "--lr", "1e-3",
            "--data-dir", str(data), "-q"]
    done = torchrun(["-m", "layerwise.cli", *args, "--output", str(tmp_path / "two")], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("wrote ") == 3 and done.stdout.count("model: ") == 1  # printed by rank 0 only
    assert main([*args, "--output", str(tmp_path / "one")]) == 0
    from safetensors.torch import load_file

    (two,), (one,) = ((tmp_path / d / "runs").glob("*/sts/last") for d in ("two", "one"))
    assert_same_parameters(load_file(str(two / "model.safetensors")), load_file(str(one / "model.safetensors")))
    history = [json.loads((d / "trainer_state.json").read_text())["history"] for d in (two, one)]
    np.testing.assert_allclose(history[0]["loss"], history[1]["loss"], **TOL)
    # (dev Spearman is not compared: on 16 pairs of a tiny model, cosines 1e-7 apart swap near-tied ranks)


def test_commands_that_do_not_train_refuse_torchrun(monkeypatch, capsys):
    from layerwise.cli import EXIT_USAGE, main

    monkeypatch.setenv("WORLD_SIZE", "2")  # as torchrun sets it; refused before any process group is joined
    assert main(["models", "list"]) == EXIT_USAGE
    assert "`layerwise models` does not train: run it without torchrun" in capsys.readouterr().err
