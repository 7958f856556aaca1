"""Round 3 of bad input and faults (issue 27), by class: data loss and silently wrong results.

Each test reproduces one case of the class (a user file replaced, a damaged chunk used, NaN passed on) and asserts the
behaviour now: a refusal or one-line error (exit 2) with the user's files intact, or a correct result. Each records its
case (``case`` fixture) for docs/reliability.md. Internal errors, memory and unclear errors: test_reliability_files.py.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from reliability_cases import no_model_load as _no_model_load

RELIABILITY_GROUP = "Data loss"



# -- data loss --------------------------------------------------------------------------------------------


@pytest.mark.reliability("Data loss")
def test_export_overwrite_keeps_the_users_files(tiny_bert, env, case, capsys):
    dest = env / "exported"
    assert case.run(["export", tiny_bert, dest, "--layers", "0,2"], capsys).code == 0
    (dest / "my-notes.txt").write_text("keep me", encoding="utf-8")
    sub = next(p for p in dest.iterdir() if p.is_dir())
    (sub / "mine.json").write_text("{}", encoding="utf-8")
    seen = case.run(["export", tiny_bert, dest, "--layers", "1,2", "--overwrite"], capsys)
    assert seen.code == 0, seen.err
    assert (dest / "my-notes.txt").read_text() == "keep me" and (sub / "mine.json").is_file()
    manifest = json.loads((dest / "layerwise_export.json").read_text())
    assert "my-notes.txt" not in manifest["files"] and "model.safetensors" in manifest["files"]
    case.record("export --overwrite over an export holding the user's files (was: whole folder deleted)",
                f"layerwise export {tiny_bert} {dest} --layers 1,2 --overwrite", "correct result",
                "the export's own files (listed in layerwise_export.json) replaced; my-notes.txt and "
                "a module folder's mine.json kept", code=seen.code)


@pytest.mark.reliability("Data loss")
def test_export_overwrite_refuses_a_user_file_of_an_exports_name(tiny_bert, env, case, capsys, no_bars):
    dest = env / "exported"
    assert case.run(["export", tiny_bert, dest, "--layers", "0,2"], capsys).code == 0
    manifest = json.loads((dest / "layerwise_export.json").read_text())
    manifest["files"].remove("README.md")
    (dest / "layerwise_export.json").write_text(json.dumps(manifest))
    (dest / "README.md").write_text("my own card", encoding="utf-8")
    case.cli_error(["export", tiny_bert, dest, "--layers", "1,2", "--overwrite"], capsys, outcome="refusal",
                   what="export --overwrite where a file the export did not write has a name the export takes",
                   match=("README.md", "not written by layerwise"))
    assert (dest / "README.md").read_text() == "my own card"


@pytest.mark.reliability("Data loss")
def test_export_overwrite_of_an_export_without_a_file_list_is_refused(tiny_bert, env, case, capsys):
    dest = env / "old-export"
    dest.mkdir()
    (dest / "layerwise_export.json").write_text('{"written_by": "layerwise"}')
    (dest / "data.bin").write_bytes(b"user data")
    case.cli_error(["export", tiny_bert, dest, "--layers", "0,2", "--overwrite"], capsys, outcome="refusal",
                   what="export --overwrite into a folder whose marker lists no files (which are ours is unknown)",
                   match=("lists no files", "nothing is replaced"))
    assert (dest / "data.bin").read_bytes() == b"user data"


def _parquet_corpus(path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": ["a first text", "another one"]}), str(path))
    return path


@pytest.mark.reliability("Data loss")
@pytest.mark.parametrize("overwrite", [False, True], ids=["plain", "overwrite"])
@pytest.mark.parametrize("kind", ["output", "ids"])
def test_encode_never_writes_over_its_corpus(kind, overwrite, tiny_bert, env, case, capsys, monkeypatch):
    _no_model_load(monkeypatch)
    if kind == "output":
        corpus = out = _parquet_corpus(env / "corpus.parquet")
        what = "encode CORPUS OUT with OUT = the corpus (was: corpus replaced)"
    else:
        corpus, out = env / "vectors.ids.txt", env / "vectors.npy"
        corpus.write_text("a first text\nanother one\n", encoding="utf-8")
        what = "encode CORPUS OUT.npy whose ids file OUT.ids.txt is the corpus (was: corpus replaced)"
    before = corpus.read_bytes()
    extra = ["--overwrite"] if overwrite else []
    case.cli_error(["encode", corpus, out, "--model", tiny_bert, "-q", *extra], capsys, outcome="refusal",
                   what=what + (" with --overwrite" if overwrite else ""), match=("destroy the input", str(corpus)))
    assert corpus.read_bytes() == before


def test_encode_output_equal_to_the_corpus_in_the_library(env):
    from layerwise.encode import CorpusSource
    from layerwise.encode.writers import check_output
    from layerwise.errors import UsageError

    corpus = env / "texts.ids.txt"
    corpus.write_text("one\ntwo\n")
    with pytest.raises(UsageError, match="destroy the input"):
        check_output(env / "texts.npy", inputs=(CorpusSource(str(corpus)).path,))
    check_output(env / "other.npy", inputs=(str(corpus),))  # another name: fine


@pytest.mark.reliability("Data loss")
def test_encode_overwrite_refuses_a_file_it_did_not_write(tiny_bert, corpus, env, case, capsys, monkeypatch):
    _no_model_load(monkeypatch)
    mine = env / "results.npy"
    np.save(mine, np.arange(6, dtype=np.int64).reshape(2, 3))
    before = mine.read_bytes()
    case.cli_error(["encode", corpus, mine, "--model", tiny_bert, "--overwrite", "-q"], capsys, outcome="refusal",
                   what="encode --overwrite onto a .npy that encode did not write (no ids file, int64)",
                   match=("results.npy exists and was not written by layerwise", "move it away"))
    assert mine.read_bytes() == before


@pytest.mark.reliability("Data loss")
def test_encode_overwrite_refuses_a_user_file_shaped_like_its_own(tiny_bert, corpus, env, case, capsys, monkeypatch):
    # a float32 (n, d) array with NAME.ids.txt beside it is what encode writes, but encode did not write these:
    # only the folder's manifest (the sha256 of what the tool put there) tells, never the files' shape
    _no_model_load(monkeypatch)
    mine, ids = env / "user.npy", env / "user.ids.txt"
    np.save(mine, np.ones((3, 5), dtype=np.float32))
    ids.write_text("a\nb\nc\n")
    before = mine.read_bytes(), ids.read_bytes()
    for argv in (["encode", corpus, mine, "--model", tiny_bert, "-q"],
                 ["encode", corpus, mine, "--model", tiny_bert, "--overwrite", "-q"]):
        case.cli_error(argv, capsys, outcome="refusal", what="encode onto a user's float32 .npy with an ids file",
                       match=("user.", "not written by layerwise", "move it away"))  # not "pass --overwrite"
    assert (mine.read_bytes(), ids.read_bytes()) == before


def test_encode_overwrite_replaces_its_own_output_and_only_while_unchanged(tiny_bert, corpus, env, capsys):
    from layerwise.cli import main
    from layerwise.outputs import MANIFEST, sha256_file

    out = env / "v.npy"
    assert main(["encode", str(corpus), str(out), "--model", str(tiny_bert), "-q", "--no-cache"]) == 0
    first = np.load(out)
    listed = (env / MANIFEST).read_text().splitlines()
    assert sorted(listed) == sorted(f"{sha256_file(env / n)}  {n}" for n in ("v.npy", "v.ids.txt"))
    assert main(["encode", str(corpus), str(out), "--model", str(tiny_bert), "-q", "--no-cache"]) == 2
    assert "pass --overwrite" in capsys.readouterr().err  # ours: overwrite may replace it
    assert main(["encode", str(corpus), str(out), "--model", str(tiny_bert), "-q", "--no-cache", "--overwrite"]) == 0
    np.testing.assert_array_equal(np.load(out), first)
    (env / "v.ids.txt").write_text("edited by hand\n" * len(first))  # changed since the tool wrote it: the user's
    assert main(["encode", str(corpus), str(out), "--model", str(tiny_bert), "-q", "--no-cache", "--overwrite"]) == 2
    assert "v.ids.txt exists and was not written by layerwise (or was changed since" in capsys.readouterr().err
    np.testing.assert_array_equal(np.load(out), first)


# -- silently wrong ---------------------------------------------------------------------------------------


def _texts(n: int) -> str:
    words = ["a man", "the dog", "two people", "a woman", "the cat", "a child"]
    return "".join(f"{words[i % 6]} is playing {'red ' * (i % 4)}guitar .\n" for i in range(n))


@pytest.mark.reliability("Silently wrong")
def test_a_damaged_resume_chunk_that_still_loads_is_encoded_again(tiny_bert, env, case, capsys, monkeypatch,
                                                                   caplog):
    from layerwise.encode import SpecEmbedder
    from layerwise.encode.journal import work_folders

    corpus = env / "corpus.txt"
    corpus.write_text(_texts(12), encoding="utf-8")
    base = ["encode", corpus, "--model", tiny_bert, "--chunk-size", "4", "-q"]
    assert case.run([*base[:2], env / "straight.npy", *base[2:], "--no-cache"], capsys).code == 0
    real, calls = SpecEmbedder.encode, []

    def stopping(self, texts):
        calls.append(len(texts))
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(self, texts)

    monkeypatch.setattr(SpecEmbedder, "encode", stopping)
    out = env / "out.npy"
    assert case.run([*base[:2], out, *base[2:]], capsys).code == 130
    (work,) = work_folders(out)
    chunk = np.load(work / "chunk-000001.npy")
    chunk[2] = 0.0  # one row zeroed: the file still loads, of the right shape and dtype
    np.save(work / "chunk-000001.npy", chunk)
    monkeypatch.setattr(SpecEmbedder, "encode", real)
    seen = case.run([*base[:2], out, *base[2:]], capsys)
    assert seen.code == 0, seen.err
    np.testing.assert_allclose(np.load(out), np.load(env / "straight.npy"), atol=1e-6)
    warned = [r.getMessage() for r in caplog.records if "damaged" in r.getMessage()]
    assert warned and "chunk 1" in warned[0] and "sha256" in warned[0]
    case.record("encode resume with a finished chunk edited in place (one row zeroed; was used as it was)",
                f"layerwise encode corpus.txt {out} --model {tiny_bert} --chunk-size 4 (after Ctrl-C)",
                "recovery", warned[0], code=seen.code)


def _nan_copy(model, dest, *, tensor: str = "encoder.layer.0.attention.self.query.weight"):
    """A copy of the model folder ``model`` with one NaN in ``tensor``."""
    import shutil

    from safetensors.torch import load_file, save_file

    shutil.copytree(model, dest)
    state = load_file(str(dest / "model.safetensors"))
    key = next(k for k in state if k.endswith(tensor))
    state[key][0, 0] = float("nan")
    save_file(state, str(dest / "model.safetensors"), metadata={"format": "pt"})
    return dest


@pytest.fixture()
def nan_bert(tiny_bert, env):
    return _nan_copy(tiny_bert, env / "nan-bert")


@pytest.mark.reliability("Silently wrong")
def test_nan_weights_in_encode_are_one_line(nan_bert, corpus, env, case, capsys):
    case.cli_error(["encode", corpus, env / "v.npy", "--model", nan_bert, "-q"], capsys,
                   what="encode with a model holding one NaN weight (was: all-NaN vectors, exit 0)",
                   match=("nan-bert", "NaN or inf", "encoder.layer.0"))
    assert not (env / "v.npy").exists()


@pytest.mark.reliability("Silently wrong")
def test_nan_weights_in_export_are_one_line(nan_bert, env, case, capsys, no_bars):
    case.cli_error(["export", nan_bert, env / "exp", "--layers", "0,2"], capsys,
                   what="export of a model holding one NaN weight (was: an export giving NaN vectors)",
                   match=("nan-bert", "NaN or inf"))
    assert not (env / "exp").exists()


@pytest.fixture()
def sts(env):
    from conftest import write_stsb

    folder = write_stsb(env / "data", n_pairs=12)
    (folder / "train.txt").write_text("a man is playing a guitar .\nthe dog runs .\ntwo people sit .\n"
                                      "a woman eats food .\n")
    return folder


@pytest.mark.reliability("Silently wrong")
def test_nan_weights_in_train_and_tmft_are_one_line(nan_bert, sts, env, case, capsys):
    case.cli_error(["train", "--model", nan_bert, "--train-data", sts / "train.txt", "--data-dir", sts, "--steps", "2",
                    "--batch-size", "2", "--max-length", "16", "--output", env / "t", "-q"], capsys,
                   what="train from a model holding one NaN weight (was: 'best dev nan', exit 0)",
                   match=("nan-bert", "NaN or inf"))
    case.cli_error(["tmft", "--model", nan_bert, "--layers", "1", "--epochs", "1", "--batch-size", "4",
                    "--data-dir", sts, "--output", env / "m", "-q"], capsys,
                   what="tmft from a model holding one NaN weight (was: NaN tables, exit 0)",
                   match=("nan-bert", "NaN or inf"))


@pytest.mark.reliability("Silently wrong")
def test_nan_in_a_trained_pooler_is_refused_at_load(tiny_bert, env, case, capsys, no_bars):
    import torch

    from layerwise.encoders.trainable import SentenceModel

    model = SentenceModel.from_pretrained(str(tiny_bert), max_length=16)
    with torch.no_grad():
        next(model.pooler.parameters()).fill_(float("nan"))
    model.save(env / "trained")
    case.cli_error(["export", env / "trained", env / "exp"], capsys, outcome="refusal",
                   what="export of a trained layer-attention pooler whose weights are NaN (was: NaN export, exit 0)",
                   match=("pooler", "NaN or inf"))
    assert not (env / "exp").exists()


@pytest.mark.reliability("Silently wrong")
def test_nan_vectors_from_an_exported_folder_are_never_written(tiny_bert, corpus, env, case, capsys, no_bars):
    exported = env / "exp"
    assert case.run(["export", tiny_bert, exported, "--layers", "0,2"], capsys).code == 0
    from safetensors.torch import load_file, save_file

    state = load_file(str(exported / "model.safetensors"))
    key = next(k for k in state if k.endswith("word_embeddings.weight"))
    state[key][:] = float("nan")
    save_file(state, str(exported / "model.safetensors"), metadata={"format": "pt"})
    case.cli_error(["encode", corpus, env / "v.npy", "--folder", exported, "-q"], capsys,
                   what="encode --folder with an export whose weights were made NaN after export (was: NaN .npy)",
                   match=("folder", "NaN or inf", "corpus rows 0..2"))
    assert not (env / "v.npy").exists() and not list(env.glob(".v.npy.tmp-*"))  # (the resume folder stays)


@pytest.mark.reliability("Silently wrong")
def test_multitask_lr_inf_is_refused_like_train_and_tmft(env, case, capsys):
    for command in ("multitask", "train", "tmft"):
        case.cli_error([command, *(["BASELINE"] if command == "multitask" else []), "--lr", "inf", "--output",
                        env / "o"], capsys, what=f"{command} --lr inf" + (" (was: accepted, the encoder trained to NaN)"
                                                          if command == "multitask" else " (one check for every "
                                                          "trainer)"),
                       match=("--lr", "finite"))


def test_one_learning_rate_validation_for_every_trainer():
    from layerwise.errors import UsageError
    from layerwise.finite import check_rate
    from layerwise.methods.multitask.config import MultitaskConfig

    for bad in (float("inf"), float("nan"), 0.0, -1e-3, "x"):
        with pytest.raises(UsageError, match="finite number above 0|not a number"):
            check_rate(bad, "lr")
    with pytest.raises(UsageError, match="MultitaskConfig.lr"):
        MultitaskConfig(lr=float("inf"))
    assert check_rate("2e-5", "lr") == 2e-5


@pytest.mark.reliability("Silently wrong")
@pytest.mark.parametrize("name", ["../../x", "/tmp/abs-x", ".hidden", "a/b"])
def test_multitask_config_name_stays_inside_output(name, env, case, capsys):
    config = env / "c.json"
    config.write_text(json.dumps({"name": name}))
    case.cli_error(["multitask", "--config", config, "--output", env / "o", "-q"], capsys,
                   what=f"multitask --config naming the experiment {name!r} (was: written outside OUTPUT)",
                   match=("MultitaskConfig.name", "inside OUTPUT"))
    assert not (env / "o").exists() or not any((env / "o").rglob("*x*"))


@pytest.mark.reliability("Silently wrong")
def test_training_on_one_example_is_refused(tiny_bert, sts, env, case, capsys):
    (sts / "one.txt").write_text("a man is playing a guitar .\n")
    case.cli_error(["train", "--model", tiny_bert, "--train-data", sts / "one.txt", "--data-dir", sts, "--steps", "2",
                    "--batch-size", "4", "--max-length", "16", "--output", env / "t", "-q"], capsys,
                   what="train on a file of one sentence (was: loss 0.000 at every step, exit 0)",
                   match=("1 training example for the unsup objective", "loss is 0", "at least 2"))


class Killed(BaseException):
    """Stands for SIGKILL: a BaseException, so no ``except Exception`` in the code under test catches it."""


@pytest.mark.reliability("Data loss")
def test_kill_while_an_overwrite_carries_user_files_keeps_the_folder(tiny_bert, env, case, capsys, monkeypatch):
    from layerwise.export import sentence_transformers as st

    dest = env / "exported"
    assert case.run(["export", tiny_bert, dest, "--layers", "0,2"], capsys).code == 0
    (dest / "my-notes.txt").write_text("keep me", encoding="utf-8")
    before = {p.relative_to(dest): p.read_bytes() for p in dest.rglob("*") if p.is_file()}

    def killed(*a, **k):
        raise Killed

    monkeypatch.setattr(st.shutil, "copy2", killed)
    with pytest.raises(Killed):
        case.run(["export", tiny_bert, dest, "--layers", "1,2", "--overwrite"], capsys)
    assert {p.relative_to(dest): p.read_bytes() for p in dest.rglob("*") if p.is_file()} == before
    assert not list(env.glob(".exported.*"))
    monkeypatch.undo()
    seen = case.run(["export", tiny_bert, dest, "--layers", "1,2", "--overwrite"], capsys)
    assert seen.code == 0 and (dest / "my-notes.txt").read_text() == "keep me"
    case.record("kill while export --overwrite copies the user's files into the new folder", f"layerwise export "
                f"{tiny_bert} {dest} --layers 1,2 --overwrite (killed, then again)", "recovery",
                "the earlier export and my-notes.txt untouched, no temporary folder left; the re-run replaced the "
                "export and kept my-notes.txt", code=seen.code)


@pytest.mark.reliability("Silently wrong")
@pytest.mark.parametrize("target", ["chunk-000001.sha256", "chunk-000001.npy"])
def test_kill_while_a_resume_chunk_is_written_then_the_same_numbers(target, tiny_bert, env, case, capsys,
                                                                     monkeypatch):
    from layerwise.encode import journal

    corpus = env / "corpus.txt"
    corpus.write_text(_texts(12), encoding="utf-8")
    base = ["encode", corpus, "--model", tiny_bert, "--chunk-size", "4", "-q"]
    assert case.run([*base[:2], env / "straight.npy", *base[2:], "--no-cache"], capsys).code == 0
    real = journal.write_bytes

    def killed(path, data):
        if str(path).endswith(target):
            raise Killed
        return real(path, data)

    monkeypatch.setattr(journal, "write_bytes", killed)
    out = env / "out.npy"
    with pytest.raises(Killed):
        case.run([*base[:2], out, *base[2:]], capsys)
    monkeypatch.setattr(journal, "write_bytes", real)
    seen = case.run([*base[:2], out, *base[2:]], capsys)
    assert seen.code == 0, seen.err
    assert out.read_bytes() == (env / "straight.npy").read_bytes()
    assert not list(env.glob(".out.npy.*"))  # work folder, temporaries and lock all gone
    case.record(f"kill while encode writes {target} of its resume journal", "layerwise encode corpus.txt out.npy "
                "--model tiny-bert --chunk-size 4 (killed, then again)", "recovery",
                "the re-run encoded the unfinished chunk again; out.npy byte-identical to a straight run; no work "
                "folder, temporary or lock file left", code=seen.code)
