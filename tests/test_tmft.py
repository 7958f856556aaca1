"""TMFT on a tiny random BERT and small written data: each objective learns, resume is exact, the run end to end."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conftest import build_tiny_encoder, write_stsb, write_unlabeled
from layerwise.methods.truncated.config import MLMConfig, TMFTConfig, WSConfig
from layerwise.methods.truncated.model import TruncatedModel
from layerwise.methods.truncated.tasks import MaskedLMTask, PairRegressionTask, PairSet
from layerwise.training import TrainingConfig, seed_everything, train

WS_LINES = ("man woman 8.3\ndog cat 7.0\ncar bike 6.1\nguitar piano 5.5\nred blue 4.0\npark street 3.2\n"
            "water food 1.0\nman guitar 0.5\nhouse street 2.0\nboy child 9.0\ncar street 4.5\ndog water 2.2\n"
            "piano guitar 7.7\nman boy 6.6\nwoman child 5.1\ncat house 1.5\nbike park 3.3\nred food 0.2\n"
            "blue water 2.9\nstreet park 6.0\n")


@pytest.fixture
def data_dir(tmp_path):
    folder = write_unlabeled(write_stsb(tmp_path / "data", n_pairs=24))
    ws = folder / "wordsim" / "faruqui_eval-word-vectors"
    ws.mkdir(parents=True)
    (ws / "EN-RG-65.txt").write_text(WS_LINES.replace(" ", "\t"))
    return folder


def _pairs(n=8):
    texts = ["a man plays guitar .", "a woman plays piano .", "the dog runs .", "a cat sits .",
             "two people sit on the street .", "a child eats food .", "a red car .", "a blue bike ."]
    return PairSet(tuple(texts[:n]), tuple(texts[::-1][:n]), np.linspace(0, 1, n), "toy")


def _losses(task, steps, **kw):
    return train(task, TrainingConfig(steps=steps, seed=0, **kw), show_progress=False).loss


def test_sts_objective_lowers_the_loss(tiny_bert):
    seed_everything(0)
    model = TruncatedModel.from_pretrained(str(tiny_bert), (1,), max_length=16)
    losses = _losses(PairRegressionTask(model, _pairs(), batch_size=8, lr=1e-3, seed=0), 30, decay="constant")
    assert np.mean(losses[-3:]) < 0.75 * np.mean(losses[:3])


def test_loss_is_mse_of_cosine_against_target(tiny_bert):
    model = TruncatedModel.from_pretrained(str(tiny_bert), (0, 2), max_length=16).eval()
    pairs = _pairs(4)
    task = PairRegressionTask(model, pairs, batch_size=4, lr=1e-3, seed=0)
    from layerwise.training import batch_indices

    idx = batch_indices(4, 4, 0, 0)
    with torch.no_grad():
        got = task.loss(0, 0)["loss"].item()
        u = model([pairs.texts1[i] for i in idx])
        v = model([pairs.texts2[i] for i in idx])
    cos = (u * v).sum(-1) / (u.norm(dim=-1) * v.norm(dim=-1))
    want = ((cos - torch.as_tensor(pairs.targets[idx], dtype=cos.dtype)) ** 2).mean().item()
    assert got == pytest.approx(want, rel=1e-5)


def _assert_resume_is_exact(task, loop: TrainingConfig, folder, cut: int) -> None:
    """A run stopped after ``cut`` steps and resumed from its checkpoint equals a straight run: losses and weights.

    ``task()`` builds a fresh task (module, data, seed) each time it is called."""
    straight = task()
    a = train(straight, loop, output_dir=folder / "straight", show_progress=False)
    train(task(), loop, output_dir=folder / "resumed", show_progress=False, max_steps_this_run=cut)
    seed_everything(123)  # whatever happens in between must not matter
    resumed = task()
    b = train(resumed, loop, output_dir=folder / "resumed", resume=True, show_progress=False)
    assert b.steps_this_run == loop.steps - cut and a.loss == b.loss
    for (k, x), (_, y) in zip(straight.module.state_dict().items(), resumed.module.state_dict().items(), strict=True):
        assert torch.equal(x, y), k


def test_resumed_mlm_training_equals_a_straight_run(tiny_bert, tmp_path):
    """The masks come from torch's RNG: a checkpoint restores it, so a cut-off MLM step resumes exactly."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_bert)
    texts = ["a man plays the guitar in the park .", "the dog is swimming in the water .", "two kids run ."] * 4
    settings = MLMConfig(batch_size=4, lr=1e-3, grad_accumulation=2, mlm_probability=0.3)
    loop = TrainingConfig(steps=6, grad_accumulation=2, eval_every=2, seed=0)

    def task():
        seed_everything(0)  # the fresh head's initialisation
        return MaskedLMTask(AutoModelForMaskedLM.from_pretrained(tiny_bert), tok, texts, settings, seed=1)

    _assert_resume_is_exact(task, loop, tmp_path, cut=3)


ARCHITECTURES = ["bert", "mpnet", "electra-discriminator", "electra-generator"]


@pytest.fixture(scope="module", params=ARCHITECTURES)
def tiny_encoder(request, tmp_path_factory):
    return build_tiny_encoder(tmp_path_factory.mktemp("models") / request.param, request.param)


def _word_pairs() -> PairSet:
    rows = [line.split() for line in WS_LINES.splitlines()]
    return PairSet(tuple(r[0] for r in rows), tuple(r[1] for r in rows), np.array([float(r[2]) / 10 for r in rows]),
                   "words")


@pytest.mark.parametrize("objective", ["sts", "ws"])
def test_pair_objectives_lower_the_loss_on_each_architecture(tiny_encoder, objective):
    """TMFT STS (sentence pairs) and TMFT WS (words encoded alone) on a model truncated at layer 2."""
    seed_everything(0)
    model = TruncatedModel.from_pretrained(str(tiny_encoder), (2,), max_length=16)
    pairs = _pairs() if objective == "sts" else _word_pairs()
    task = PairRegressionTask(model, pairs, batch_size=len(pairs), lr=1e-3, seed=0)
    before = _loss_without_dropout(task)
    _losses(task, 30, decay="constant")
    after = _loss_without_dropout(task)
    assert after < 0.8 * before


def _loss_without_dropout(task) -> float:
    """The loss of the first batch (here the whole set) in eval mode: no dropout noise in the comparison."""
    task.module.eval()
    with torch.no_grad():
        loss = task.loss(0, 0)["loss"].item()
    task.module.train()
    return loss


def test_mlm_objective_lowers_the_loss_on_each_architecture(tiny_encoder):
    """The checkpoint has no MLM head: AutoModelForMaskedLM adds a fresh one (decoder tied to the input embeddings)."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    seed_everything(0)
    mlm = AutoModelForMaskedLM.from_pretrained(tiny_encoder)
    assert mlm.get_output_embeddings().weight.data_ptr() == mlm.get_input_embeddings().weight.data_ptr()
    tok = AutoTokenizer.from_pretrained(tiny_encoder)
    texts = ["a man plays the guitar in the park .", "the dog is swimming in the water ."] * 4
    task = MaskedLMTask(mlm, tok, texts, MLMConfig(batch_size=8, lr=3e-3, grad_accumulation=1, mlm_probability=0.5),
                        seed=0)
    losses = _losses(task, 30, decay="constant")
    assert np.mean(losses[-5:]) < np.mean(losses[:5])


def test_resumed_sts_training_equals_a_straight_run_on_each_architecture(tiny_encoder, tmp_path):
    loop = TrainingConfig(steps=4, eval_every=2, seed=0)

    def task():
        seed_everything(0)
        model = TruncatedModel.from_pretrained(str(tiny_encoder), (2,), max_length=16)
        return PairRegressionTask(model, _pairs(), batch_size=4, lr=1e-3, seed=3, dev=_pairs())

    _assert_resume_is_exact(task, loop, tmp_path, cut=2)


def test_config_round_trip_and_validation():
    c = TMFTConfig(model="m", layers=(3, 0), pre_step="ws", ws=WSConfig(epochs=2), mlm=MLMConfig(limit=10))
    assert c.layers == (0, 3) and TMFTConfig.from_dict(c.to_dict()) == c
    assert c.name == "m-ws-L0_3-seed0"
    with pytest.raises(ValueError, match="pre_step"):
        TMFTConfig(pre_step="both")
    with pytest.raises(ValueError, match="unknown TMFT settings"):
        TMFTConfig.from_dict({"layer": 3})


@pytest.mark.parametrize("pre_step", ["none", "ws", "mlm"])
def test_run_tmft_end_to_end(tiny_bert, data_dir, tmp_path, pre_step):
    from sentence_transformers import SentenceTransformer

    from layerwise.methods.truncated.run import run_tmft

    config = TMFTConfig(model=str(tiny_bert), layers=(1,), pre_step=pre_step, epochs=2, batch_size=8, lr=1e-4,
                        max_length=16, ws=WSConfig(sets=("rg65",), epochs=2, batch_size=4),
                        mlm=MLMConfig(epochs=1, batch_size=4, grad_accumulation=2))
    result = run_tmft(config, data_dir=data_dir, output=tmp_path / "runs", show_progress=False)
    assert result.steps == 2 * (24 // 8) and result.parameters < result.full_parameters
    assert -100 <= result.test_spearman <= 100 and np.isfinite(result.dev_spearman)
    assert (result.pre_step is None) == (pre_step == "none")
    st = SentenceTransformer(result.saved_model, device="cpu")
    assert st.encode(["a man plays guitar ."]).shape == (1, 32)
    again = run_tmft(config, data_dir=data_dir, output=tmp_path / "runs", show_progress=False)  # resumes: no-op
    assert again.test_spearman == pytest.approx(result.test_spearman)
