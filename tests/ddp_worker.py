"""Training scenarios run once per process under ``torchrun`` by tests/test_distributed.py, and in one process as
the reference: ``python -m torch.distributed.run --nproc_per_node 2 tests/ddp_worker.py MODEL OUT``.

Every scenario trains from the same seed and writes its final parameters and loss history to
``OUT/<scenario>.safetensors`` / ``.json`` (rank 0 only, as every writer under DDP).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch

TEXTS = ["a man plays guitar .", "a woman plays piano .", "the dog runs .", "a cat sits .",
         "two people sit on the street .", "a child eats food .", "a red car .", "a blue bike .",
         "the small child is playing football .", "a group of people are standing .", "a man rides a bike .",
         "three big dogs are running in the park ."]


def pairs():
    from layerwise.methods.truncated.tasks import PairSet

    return PairSet(tuple(TEXTS), tuple(TEXTS[5:] + TEXTS[:5]), np.linspace(0, 1, len(TEXTS)), "toy")


def tmft(model_dir: str, *, batch_size: int, grad_accumulation: int = 1, steps: int = 3, output_dir=None,
         max_steps_this_run=None, resume: bool = False):
    """TMFT-style STS regression (MSE of the cosine: a mean over pairs) on a truncated tiny BERT without dropout."""
    from layerwise.methods.truncated.model import TruncatedModel
    from layerwise.methods.truncated.tasks import PairRegressionTask
    from layerwise.training import TrainingConfig, seed_everything, train

    seed_everything(0)
    model = TruncatedModel.from_pretrained(model_dir, (2,), max_length=16)
    task = PairRegressionTask(model, pairs(), batch_size=batch_size, lr=1e-2, seed=1, dev=pairs(),
                              grad_accumulation=grad_accumulation)
    config = TrainingConfig(steps=steps, grad_accumulation=grad_accumulation, eval_every=1, seed=0)
    run = train(task, config, show_progress=False, output_dir=output_dir, max_steps_this_run=max_steps_this_run,
                resume=resume, restore_best=output_dir is not None)
    return model.state_dict(), run


def frozen_pooler(*, batch_size: int, steps: int = 4):
    """A layer pooler on random layer vectors with the in-batch contrastive loss (negatives from the whole batch)."""
    from layerwise.methods.layer_attention.frozen import FrozenPoolerTask, LayerFeatures
    from layerwise.methods.layer_attention.train import ContrastiveConfig
    from layerwise.modules.poolers import PoolerConfig, build_pooler
    from layerwise.training import seed_everything, train

    g = torch.Generator().manual_seed(5)
    views = tuple(LayerFeatures(torch.randn(12, 3, 8, generator=g), torch.randn(12, 3, 8, generator=g))
                  for _ in range(2))
    config = ContrastiveConfig(objective="in_batch", steps=steps, batch_size=batch_size, warmup_steps=0,
                               freeze_encoder=True, eval_every=0, pooler_lr=1e-2)
    seed_everything(0)
    pooler = build_pooler(PoolerConfig(kind="layer_attention", hidden_size=8, n_states=3))
    run = train(FrozenPoolerTask(pooler, views, config), config.training_config(), show_progress=False)
    return pooler.state_dict(), run


def scenarios(model_dir: str, out: Path) -> dict:
    """name -> (state dict, TrainingRun) of every scenario (the resumed one writes checkpoints under ``out``)."""
    runs = {"b8": tmft(model_dir, batch_size=8), "b5_ga2": tmft(model_dir, batch_size=5, grad_accumulation=2),
            "b4": tmft(model_dir, batch_size=4), "pooler_b5": frozen_pooler(batch_size=5)}
    ckpt = out / "checkpoints"
    tmft(model_dir, batch_size=8, output_dir=ckpt, max_steps_this_run=2)
    runs["b8_resumed"] = tmft(model_dir, batch_size=8, output_dir=ckpt, resume=True)
    return runs


def write(runs: dict, out: Path) -> None:
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    for name, (state, run) in runs.items():
        save_file({k: v.contiguous() for k, v in state.items()}, str(out / f"{name}.safetensors"))
        (out / f"{name}.json").write_text(json.dumps({"loss": run.loss, "dev": run.dev, "best_dev": run.best_dev}))


if __name__ == "__main__":
    from layerwise.training import distributed

    model_dir, out = sys.argv[1], Path(sys.argv[2])
    distributed.setup("cpu")
    assert distributed.world_size() == 2, "run this under torchrun --nproc_per_node 2"
    results = scenarios(model_dir, out)
    if distributed.is_main():
        write(results, out)
    distributed.teardown()  # every rank waits for rank 0's writes, then leaves the group
