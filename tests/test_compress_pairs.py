"""Compression students with the user's labelled pairs as a second loss (``Compressor.fit(..., train_pairs=...)``,
``layerwise compress --train-pairs``): the loss against a slow twin, which candidates the pairs change (the students)
and which they leave (the cuts, read back), the refusals, and the command-line flag."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from layerwise.cli import main
from layerwise.errors import UsageError
from layerwise.methods.compress import build as build_module
from layerwise.methods.compress import distill as distill_module
from layerwise.methods.compress import students as students_module
from layerwise.methods.truncated.tasks import PairSet
from layerwise.training import batch_indices
from test_compress import CORPUS, FAST, _comp, _dev, teacher  # noqa: F401 (teacher: a module fixture)
from test_compress_cli import _args, _files


def _pairs(n: int = 12, seed: int = 3):
    s1, s2, y = _dev(n, seed=seed, step=3)
    return s1, s2, y


def test_the_pair_loss_is_tmfts_objective_on_its_own_batch_added_to_the_mse(teacher):  # noqa: F811
    """Slow twin: MSE to the teacher on the corpus batch + weight x mean (cos(u, v) - y)^2 on the step's pair batch
    (drawn as TMFT draws its batches, seed + 1), each side encoded alone; for the every-depth student the pair loss
    is the mean over its depths, each from a separately cut copy."""
    import torch

    from layerwise.encoders.truncate import truncate_encoder
    from layerwise.methods.truncated.model import TruncatedModel

    texts = CORPUS[:8]
    targets = np.random.default_rng(0).normal(size=(8, 32)).astype(np.float32)
    s1, s2, y = _pairs(12)
    pairs = PairSet(tuple(s1), tuple(s2), np.asarray(y) / 5.0, "train")
    model = TruncatedModel.from_pretrained(str(teacher), (3,), max_length=16).eval()

    def pair_mse(m, step):
        idx = batch_indices(12, 8, 7 + 1, step)
        u, v = m([s1[i] for i in idx]).detach().numpy(), m([s2[i] for i in idx]).detach().numpy()
        cos = (u * v).sum(1) / np.linalg.norm(u, axis=1) / np.linalg.norm(v, axis=1)
        return float(np.mean((cos - np.asarray(y)[idx] / 5.0) ** 2))

    with torch.no_grad():
        for step in (0, 1):
            out = distill_module.DistillTask(model, texts, targets, batch_size=8, lr=1e-3, seed=7,
                                             pairs=distill_module.PairLoss(pairs, 0.5)).loss(step, 0)
            plain = distill_module.DistillTask(model, texts, targets, batch_size=8, lr=1e-3, seed=7).loss(step, 0)
            assert out["distill"].item() == pytest.approx(plain["loss"].item(), rel=1e-6)
            assert out["pairs"].item() == pytest.approx(pair_mse(model, step), rel=1e-5)
            assert out["loss"].item() == pytest.approx(plain["loss"].item() + 0.5 * pair_mse(model, step), rel=1e-5)
        every = distill_module.DistillTask(model, texts, targets, batch_size=8, lr=1e-3, seed=7, depths=(1, 3),
                                           pairs=distill_module.PairLoss(pairs)).loss(0, 0)["pairs"].item()
        cuts = [TruncatedModel(truncate_encoder(model.encoder, d), model.tokenizer, (d,), max_length=16) for d in (1, 3)]
    assert every == pytest.approx(np.mean([pair_mse(c, 0) for c in cuts]), rel=1e-5)
    with pytest.raises(ValueError, match="scaled to"):
        distill_module.PairLoss(PairSet(tuple(s1), tuple(s2), np.asarray(y), "train"))


def test_labelled_pairs_train_new_students_and_leave_every_cut_as_it_was(teacher, env, monkeypatch):  # noqa: F811
    dev, work = _dev(), str(env / "work")
    plain = _comp(teacher, depths=(1,), every_depth=True, budget=100.0, output_dir=work).fit(CORPUS, dev)
    trained = []
    real = students_module.distill_student
    monkeypatch.setattr(students_module, "distill_student",
                        lambda *a, **k: trained.append((k.get("depths"), k.get("pairs"))) or real(*a, **k))
    est = _comp(teacher, depths=(1,), every_depth=True, budget=100.0, output_dir=work).fit(
        CORPUS, dev, train_pairs=_pairs())
    assert [d for d, _ in trained] == [None, (1,)]  # both students trained anew, with the pairs
    assert all(p is not None and p.targets.min() == 0.0 and p.targets.max() == 1.0 for _, p in trained)
    before = {c.name: c for c in plain.candidates_}
    for c in est.candidates_:
        if c.recipe in ("distilled", "every-depth"):
            assert c.dev != before[c.name].dev  # another student
        else:  # the cuts and the original: read back as they were (their keys leave the pairs out)
            assert c.to_dict() == before[c.name].to_dict()
    students = sorted(p.name.split("-")[0] for p in (env / "work" / "students").iterdir())
    assert students == ["distilled", "distilled", "every", "every"]
    keys = {(c.recipe, bool(k)) for c in est.candidates_
            for k in [est._run._key(c.recipe, c.layers, c.backend)["data"].get("train_pairs")]}
    assert {recipe for recipe, pairs in keys if pairs} == {"distilled", "every-depth"}
    assert {recipe for recipe, pairs in keys if not pairs} == {c.recipe for c in est.candidates_} - {"distilled",
                                                                                                  "every-depth"}
    no_pairs = plain._run._key("distilled", (1,), "torch")
    assert "train_pairs" not in no_pairs["data"] and "pairs_weight" not in no_pairs["settings"]
    # the same call again trains nothing; another weight is another student
    monkeypatch.setattr(build_module.Compression, "_measure", lambda *a: pytest.fail("measured again"))
    again = _comp(teacher, depths=(1,), every_depth=True, budget=100.0, output_dir=work).fit(
        CORPUS, dev, train_pairs=_pairs())
    assert [c.to_dict() for c in again.candidates_] == [c.to_dict() for c in est.candidates_]
    heavier = _comp(teacher, depths=(1,), budget=100.0, output_dir=work, settings=replace(FAST, pairs_weight=2.0))
    assert heavier._compression(CORPUS, dev, None, _pairs())[0].students.root("distilled", 1).name not in [
        p.name for p in (env / "work" / "students").iterdir()]


@pytest.mark.parametrize("kw,train_pairs,message", [
    ({}, (["a b c ."] * 3, ["b c d ."] * 3, [2.0, 2.0, 2.0]),
     r"train_pairs needs at least 2 pairs with different scores \(their scores are mapped to \[0, 1\]"),
    ({}, (["a b c ."], ["b c d ."], [2.0]), "train_pairs needs at least 2 pairs"),
    ({}, "pairs.csv", "train_pairs must be"),
    ({"settings": replace(FAST, pairs_weight=0.0)}, None, "settings.pairs_weight"),
])
def test_refusals_before_any_work(tiny_bert, env, monkeypatch, kw, train_pairs, message):
    monkeypatch.setattr(build_module, "LayerEncoder", lambda *a, **k: pytest.fail("work started"))
    with pytest.raises(UsageError, match=message):
        _comp(tiny_bert, output_dir=str(env / "out"), **kw).fit(CORPUS, _dev(), train_pairs=train_pairs)
    assert not (env / "out").exists()


def test_train_pairs_flag_reaches_the_students(tiny_bert, env, capsys, monkeypatch):
    corpus, dev, sick = _files(env)
    seen = []
    monkeypatch.setattr(build_module.Compression, "run",
                        lambda self: seen.append((self.config, self.data.train_pairs)) or pytest.skip())
    with pytest.raises(pytest.skip.Exception):
        main(_args(tiny_bert, corpus, dev, env / "out", "--train-pairs", str(sick), "--pairs-weight", "0.5"))
    config, pairs = seen[0]
    assert config.pairs_weight == 0.5 and len(pairs) == 16 and pairs.targets.min() == 0 and pairs.targets.max() == 1
    with pytest.raises(SystemExit) as exc:  # refused by the parser, one usage line
        main(_args(tiny_bert, corpus, dev, env / "out2", "--train-pairs", str(sick), "--pairs-weight", "-1"))
    assert exc.value.code == 2 and "--pairs-weight" in capsys.readouterr().err


def test_another_learning_rate_trains_new_students_and_reads_every_cut_back(teacher, env, monkeypatch):  # noqa: F811
    """The distillation's settings (epochs, batch size, learning rate, seed) are in the students' keys only: a run
    at another rate in the same folder measures its students and nothing else (the cuts and the original are read
    back with the numbers they had)."""
    dev, work = _dev(), str(env / "work")
    first = _comp(teacher, depths=(1, 2), budget=100.0, output_dir=work).fit(CORPUS, dev)
    real, measured = build_module.Compression._measure, []
    monkeypatch.setattr(build_module.Compression, "_measure",
                        lambda self, recipe, layers, backend: measured.append(recipe) or real(self, recipe, layers,
                                                                                               backend))
    other = replace(FAST, lr=FAST.lr / 10, epochs=FAST.epochs + 1, batch_size=FAST.batch_size // 2, seed=1)
    second = _comp(teacher, depths=(1, 2), budget=100.0, output_dir=work, settings=other).fit(CORPUS, dev)
    assert sorted(measured) == ["distilled", "distilled"]
    before = {c.name: c for c in first.candidates_}
    for c in second.candidates_:
        if c.recipe == "distilled":
            assert c.dev != before[c.name].dev
        else:
            assert c.to_dict() == before[c.name].to_dict()
