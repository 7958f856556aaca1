"""Long runs through the CLI: ``train`` checkpoints, resume and output folders; ``search``, ``transfer`` and
``ablate`` results files and their reuse. Each test asserts the behaviour, then records it (``case`` fixture).

The library-level twins are in test_training.py, test_lc_pages.py and test_cli.py; these run ``layerwise ...``
as a user would, on the tiny random BERT of conftest.py and small written data.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from conftest import SENTENCES, build_tiny_bert, write_senteval, write_stsb

RELIABILITY_GROUP = "Training runs"


class Killed(BaseException):
    """Stands for SIGKILL: a BaseException, so no ``except Exception`` in the code under test catches it."""


@pytest.fixture()
def data(env):
    """STS-B (dev for the evaluations) and a sentence file to train on."""
    folder = write_stsb(env / "data", n_pairs=12)
    (folder / "train.txt").write_text("\n".join(SENTENCES) + "\n")
    return folder


def _train(model, data, out, *extra) -> list:
    """``layerwise train`` for 4 steps of 4 sentences, evaluated and checkpointed every 2 steps."""
    return ["train", "--model", model, "--train-data", data / "train.txt", "--data-dir", data, "--steps", "4",
            "--batch-size", "4", "--warmup-steps", "1", "--eval-every", "2", "--max-length", "16", "--lr", "1e-3",
            "--output", out, "-q", *extra]


def _history(out: Path) -> dict:
    return json.loads((out / "train.json").read_text())["history"]


def _same_tensors(a: Path, b: Path) -> bool:
    """Every safetensors file under folder ``a`` holds the same tensors as its twin under ``b``."""
    files = sorted(p.relative_to(a) for p in a.rglob("*.safetensors"))
    assert files and files == sorted(p.relative_to(b) for p in b.rglob("*.safetensors"))
    for rel in files:
        x, y = load_file(str(a / rel)), load_file(str(b / rel))
        if x.keys() != y.keys() or not all(torch.equal(x[k], y[k]) for k in x):
            return False
    return True


def _snapshot(folder: Path) -> dict:
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _interrupt_at(monkeypatch, step: int) -> None:
    """Ctrl-C at the start of 0-based ``step`` (after the checkpoint of ``step`` when it is even)."""
    from layerwise.methods.layer_attention.train import ContrastiveTask

    real = ContrastiveTask.loss

    def interrupted(self, s, micro):
        if s == step:
            raise KeyboardInterrupt
        return real(self, s, micro)

    monkeypatch.setattr(ContrastiveTask, "loss", interrupted)


def test_resume_never_unpickles_a_planted_trainer_state(tiny_bert, data, env, case, capsys, monkeypatch):
    assert case.run(_train(tiny_bert, data, env / "straight"), capsys).code == 0
    out = env / "run"
    _interrupt_at(monkeypatch, 2)
    assert case.run(_train(tiny_bert, data, out), capsys).code == 130
    monkeypatch.undo()
    assert json.loads((out / "last" / "trainer_state.json").read_text())["step"] == 2
    marker = env / "pwned"

    class Payload:
        def __reduce__(self):
            return os.system, (f"touch {marker}",)

    (out / "last" / "trainer_state.pt").write_bytes(pickle.dumps(Payload()))
    seen = case.run(_train(tiny_bert, data, out, "--resume"), capsys)
    assert seen.code == 0, seen.err
    assert not marker.exists()
    assert _history(out)["loss"] == _history(env / "straight")["loss"]
    case.record("a pickle planted as last/trainer_state.pt (it runs `touch` when unpickled), then --resume",
                "layerwise train ... --resume (beside a crafted trainer_state.pt)", "correct result",
                "exit 0, the marker file was never created (checkpoints are safetensors + JSON, nothing is "
                "unpickled); the resumed losses equal an uninterrupted run's", code=seen.code)
    (out / "last" / "trainer_state.safetensors").write_bytes(pickle.dumps(Payload()))
    case.cli_error(_train(tiny_bert, data, out, "--resume"), capsys, outcome="refusal",
                   what="the same pickle written over last/trainer_state.safetensors, then --resume",
                   match=("cannot resume", "damaged", "--overwrite"))
    assert not marker.exists()


def test_kill_while_writing_the_second_checkpoint_keeps_the_first(tiny_bert, data, env, case, capsys, monkeypatch):
    from layerwise.training import checkpoint

    assert case.run(_train(tiny_bert, data, env / "straight"), capsys).code == 0
    real, calls = checkpoint.save_state_file, []

    def dies_after_writing_the_second(tensors, path):
        calls.append(path)
        written = real(tensors, path)
        if len(calls) == 2:  # the second checkpoint's trainer state is on disk, its JSON and rename are not
            raise Killed()
        return written

    monkeypatch.setattr(checkpoint, "save_state_file", dies_after_writing_the_second)
    out = env / "killed"
    with pytest.raises(Killed):
        case.run(_train(tiny_bert, data, out), capsys)
    monkeypatch.undo()
    assert json.loads((out / "last" / "trainer_state.json").read_text())["step"] == 2  # the first checkpoint
    assert not [p.name for p in out.iterdir() if p.name.startswith(".last")]  # no half-written checkpoint
    seen = case.run(_train(tiny_bert, data, out, "--resume"), capsys)
    assert seen.code == 0, seen.err
    straight = _history(env / "straight")
    assert _history(out)["loss"] == straight["loss"] and _history(out)["dev"] == straight["dev"]
    assert _same_tensors(out / "last", env / "straight" / "last")
    case.record("kill while `train` writes its second checkpoint (step 4 of 4), then --resume",
                "layerwise train ... (killed inside the checkpoint writer), then ... --resume", "recovery",
                "the step-2 checkpoint is kept and no half folder is left; the resumed run's losses, dev scores, "
                "weights, optimizer and RNG state equal an uninterrupted run's", code=seen.code)


def test_existing_output_is_refused_and_left_untouched(tiny_bert, data, env, case, capsys):
    out = env / "run"
    assert case.run(_train(tiny_bert, data, out), capsys).code == 0
    before = _snapshot(out)
    assert any(str(p).startswith("best") for p in before) and Path("train.json") in before
    case.cli_error(_train(tiny_bert, data, out), capsys, outcome="refusal",
                   what="`train` into an output folder that holds a run, without --resume or --overwrite",
                   match=("already holds", "best", "train.json", "--resume", "--overwrite"))
    assert _snapshot(out) == before  # best/, last/ and train.json: every byte as it was


def test_one_seed_gives_identical_losses_from_the_first_step(tiny_bert, data, env, case, capsys):
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        assert case.run(_train(tiny_bert, data, env / name, "--seed", seed), capsys).code == 0
    a, b, c = (_history(env / n)["loss"] for n in "abc")
    assert len(a) == 4 and a == b  # every step, the first included
    assert a[0] != c[0]  # the seed is used: another seed starts differently
    assert _same_tensors(env / "a" / "best", env / "b" / "best")
    case.record("two `train --seed 0` runs (and one with --seed 1)", "layerwise train ... --seed 0 (twice)",
                "correct result", f"identical losses at all {len(a)} steps, the first included, and identical "
                "weights; --seed 1 starts from another loss")


def test_resume_with_other_data_model_or_length_is_refused(tiny_bert, data, env, case, capsys):
    (data / "other.txt").write_text("\n".join(SENTENCES[::-1]) + "\n")
    other_model = build_tiny_bert(env / "other-bert", seed=1)
    out = env / "run"
    assert case.run(_train(tiny_bert, data, out), capsys).code == 0  # also reads what building the model printed
    before = _snapshot(out)
    changes = [
        ("--train-data", data / "other.txt", "data"),
        ("--model", other_model, "model.weights_sha256"),
        ("--max-length", "12", "model.max_length"),
    ]
    for option, value, named in changes:
        argv = _train(tiny_bert, data, out, "--resume")
        argv[argv.index(option) + 1] = value
        case.cli_error(argv, capsys, outcome="refusal", what=f"`train --resume` with another {option}",
                       match=("cannot resume", f"differs in {named}" if named == "data" else named, "--overwrite"))
    assert _snapshot(out) == before
    case.cli_error(_train(tiny_bert, data, env / "empty", "--resume"), capsys,
                   what="`train --resume` into a folder with nothing to resume", match=("nothing to resume",))
    assert not (env / "empty" / "last").exists()


BAD_TRAIN_OPTIONS = [
    ("train --lr -1", ["--lr", "-1"], "--lr"),
    ("train --eval-every -2", ["--eval-every", "-2"], "--eval-every"),
]


@pytest.mark.parametrize("what, extra, option", BAD_TRAIN_OPTIONS, ids=[b[0] for b in BAD_TRAIN_OPTIONS])
def test_bad_train_option_is_one_line_before_any_work(what, extra, option, env, case, capsys, monkeypatch):
    from layerwise.encoders import trainable

    def boom(*a, **k):
        raise AssertionError("a model was loaded before the arguments were checked")

    monkeypatch.setattr(trainable.SentenceModel, "from_pretrained", boom)
    seen = case.cli_error(["train", *extra, "--output", env / "o"], capsys, what=what, match=(option, "pass"))
    assert seen.seconds < 5 and not (env / "o").exists()


# -- results files of search, transfer and ablate ---------------------------------------------------------


@pytest.mark.reliability("Results files and reuse")
def test_search_splits_and_lengths_write_different_files(tiny_bert, env, case, capsys):
    data = write_stsb(env / "data", n_pairs=30)
    out = env / "o"
    base = ["search", "--model", tiny_bert, "--data-dir", data, "--dev-size", "10", "--splits", "2", "--output",
            out, "-q"]
    runs = [("dev", "32"), ("test", "32"), ("test", "8")]
    written: dict[Path, bytes] = {}
    for split, length in runs:
        before = set(out.glob("search-*.json")) if out.exists() else set()
        assert case.run([*base, "--split", split, "--max-length", length], capsys).code == 0
        (new,) = set(out.glob("search-*.json")) - before  # one new file, none replaced
        result = json.loads(new.read_text())
        assert result["data"]["split"] == split and result["encoder"]["max_length"] == int(length)
        assert all(p.read_bytes() == b for p, b in written.items())  # the earlier results are untouched
        written[new] = new.read_bytes()
    case.record("`search` on the dev split, the test split, and the test split with --max-length 8",
                "layerwise search ... --split dev | --split test | --split test --max-length 8", "correct result",
                "three JSON files (" + ", ".join(p.stem.rsplit("-", 1)[0] + "-DIGEST.json" for p in written)
                + f", {len({p.stem.rsplit('-', 1)[1] for p in written})} different digests of every setting); each "
                "states its split and max length, none overwrote another")


@pytest.mark.reliability("Results files and reuse")
def test_transfer_rerun_with_other_settings_computes_afresh(tiny_bert, env, case, capsys):
    data = write_senteval(env / "data", n=40)
    out = env / "o"
    argv = ["transfer", "--model", tiny_bert, "--data-dir", data, "--tasks", "cr", "--outer-splits", "2",
            "--inner-splits", "2", "--jobs", "1", "--output", out, "-q"]
    assert case.run(argv, capsys).code == 0
    (old,) = (out / "transfer").glob("*.json")
    old_bytes = old.read_bytes()
    assert case.run(argv, capsys).code == 0 and old.read_bytes() == old_bytes  # same settings: reused as it was
    seen = case.run([*argv, "--max-length", "8", "--ridge-alpha", "10"], capsys)
    assert seen.code == 0, seen.err
    (new,) = set((out / "transfer").glob("*.json")) - {old}
    assert old.read_bytes() == old_bytes  # the finished part under the old settings is kept
    part = json.loads(new.read_text())
    assert part["complete"] and [r["splits"] for r in part["runs"]] == [[0, 2]]  # all splits computed now
    assert part["payload"]["cache"]["computed"] > 0  # encoded again at the new length
    summary = json.loads((out / "transfer-tiny-bert.json").read_text())
    cr = summary["tasks"]["cr"]
    assert summary["encoder"]["max_length"] == 8 and summary["protocol"]["ridge_alpha"] == 10
    assert cr["result"]["ridge_alpha"] == 10
    case.record("a finished `transfer` run again with --max-length 8 --ridge-alpha 10",
                "layerwise transfer ... --max-length 8 --ridge-alpha 10", "correct result",
                f"a new part computed all 2 splits ({part['payload']['cache']['computed']} texts encoded at max "
                "length 8); the JSON states max_length 8 and ridge_alpha 10; the old part is kept byte for byte",
                code=seen.code)


@pytest.mark.reliability("Results files and reuse")
def test_ablate_rerun_with_other_length_or_data_recomputes(tiny_bert, env, case, capsys):
    data = write_senteval(env / "data", n=40)
    other = write_senteval(env / "other", n=40, seed=1)
    copy = env / "copy"
    shutil.copytree(data, copy)
    out = env / "o"
    base = ["ablate", "--model", tiny_bert, "--sts", "--tasks", "cr", "--limited-tasks", "--outer-splits", "2",
            "--inner-splits", "2", "--jobs", "1", "--output", out, "-q"]

    def parts() -> dict[str, dict]:
        return {p.name: json.loads(p.read_text())["key"] for p in (out / "ablations").glob("*.json")}

    assert case.run([*base, "--data-dir", data], capsys).code == 0
    first = parts()
    assert case.run([*base, "--data-dir", data, "--max-length", "8"], capsys).code == 0
    after_length = parts()
    (new,) = set(after_length) - set(first)
    assert after_length[new]["max_length"] == 8
    assert case.run([*base, "--data-dir", other], capsys).code == 0
    after_data = parts()
    (new,) = set(after_data) - set(after_length)
    assert after_data[new]["data"]["checksum"] != next(iter(first.values()))["data"]["checksum"]
    assert case.run([*base, "--data-dir", copy], capsys).code == 0
    assert parts() == after_data  # the same files in another folder: the same content key, reused
    case.record("a finished `ablate` run again with --max-length 8, then with a data folder of other content, "
                "then with a byte-identical copy of the data", "layerwise ablate ... --max-length 8 | --data-dir "
                "OTHER | --data-dir COPY", "correct result",
                "a new part for each of the first two (keys hold max_length 8 and the new data checksum); the copy "
                "has the same content checksum and reuses the first part; nothing was overwritten")
