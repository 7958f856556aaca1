"""Bad input to the production commands (export, encode on Ray, training under torchrun), as a user gives it: a
one-line error or a refusal before any model loads or any engine starts, and nothing of the user's touched.
Each test asserts the behaviour, then records it (``case`` fixture) for docs/reliability.md."""

from __future__ import annotations

import pytest

RELIABILITY_GROUP = "Export and scale-out"


@pytest.fixture()
def corpus(env):
    path = env / "corpus.txt"
    path.write_text("a first text\nanother one\n", encoding="utf-8")
    return path


def _no_model_load(monkeypatch):
    from layerwise.encoders import layer_encoder

    def boom(*a, **k):
        raise AssertionError("a model was loaded before the arguments were checked")

    monkeypatch.setattr(layer_encoder, "_load", boom)


@pytest.mark.reliability("Export and scale-out")
def test_ray_output_named_like_a_file_is_refused(tiny_bert, corpus, env, case, capsys, monkeypatch):
    _no_model_load(monkeypatch)
    case.cli_error(["encode", corpus, env / "vectors.npy", "--engine", "ray", "--model", tiny_bert, "-q"], capsys,
                   what="encode --engine ray into OUTPUT.npy (Ray writes a folder of shards)",
                   match=("vectors.npy", "folder"))


@pytest.mark.reliability("Export and scale-out")
def test_ray_never_replaces_a_folder_it_did_not_write(tiny_bert, corpus, env, case, capsys, monkeypatch):
    _no_model_load(monkeypatch)
    mine = env / "my-data"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me", encoding="utf-8")
    case.cli_error(["encode", corpus, mine, "--engine", "ray", "--model", tiny_bert, "--overwrite", "-q"], capsys,
                   what="encode --engine ray --overwrite into a non-empty folder layerwise did not write",
                   match=("did not write", "never replaced"), outcome="refusal")
    assert [p.name for p in mine.iterdir()] == ["notes.txt"] and (mine / "notes.txt").read_text() == "keep me"


@pytest.mark.reliability("Export and scale-out")
def test_ray_options_without_the_ray_engine(tiny_bert, corpus, env, case, capsys, monkeypatch):
    _no_model_load(monkeypatch)
    case.cli_error(["encode", corpus, env / "v.npy", "--model", tiny_bert, "--actors", "4", "-q"], capsys,
                   what="encode --actors 4 with the local engine", match=("--actors", "--engine ray"))


@pytest.mark.reliability("Export and scale-out")
def test_a_command_that_does_not_train_refuses_torchrun(tiny_bert, env, case, capsys, monkeypatch):
    _no_model_load(monkeypatch)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    case.cli_error(["search", "--model", tiny_bert, "--output", env / "o", "-q"], capsys,
                   what="search started under torchrun with 2 processes (only train, tmft, multitask run as DDP)",
                   match=("does not train", "without torchrun"))


@pytest.mark.reliability("Export and scale-out")
def test_export_from_a_file_that_is_not_a_search_result(tiny_bert, env, case, capsys):
    bad = env / "results.json"
    bad.write_text("{not json", encoding="utf-8")
    case.cli_error(["export", tiny_bert, env / "out", "--from", bad], capsys,
                   what="export --from a file that is not JSON", match=(str(bad), "layerwise search"))
    assert not (env / "out").exists()


@pytest.mark.reliability("Export and scale-out")
def test_export_never_replaces_a_folder_it_did_not_write(tiny_bert, env, case, capsys):
    mine = env / "my-model"
    mine.mkdir()
    (mine / "weights.bin").write_bytes(b"mine")
    case.cli_error(["export", tiny_bert, mine, "--layers", "0,2", "--overwrite"], capsys,
                   what="export --overwrite into a folder that holds no earlier export", match=(str(mine),),
                   outcome="refusal")
    assert [p.name for p in mine.iterdir()] == ["weights.bin"]


@pytest.mark.reliability("Export and scale-out")
@pytest.mark.parametrize("command", ["tmft", "multitask"])
def test_training_on_a_gpu_that_is_not_there(command, tiny_bert, env, case, capsys, monkeypatch):
    import torch

    _no_model_load(monkeypatch)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    case.cli_error([command, "--model", tiny_bert, "--device", "cuda", "--output", env / "o", "-q"], capsys,
                   what=f"{command} --device cuda on a machine without a GPU", match=("--device cuda", "--device cpu"))


def test_local_device_gives_each_torchrun_process_its_gpu(monkeypatch):
    import torch

    from layerwise.training.distributed import local_device

    assert local_device(None) == torch.device("cpu") and local_device("cpu") == torch.device("cpu")
    assert local_device("cuda:1") == torch.device("cuda", 1)
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_RANK", "3")
    assert local_device("cuda") == torch.device("cuda", 3)


@pytest.mark.reliability("Export and scale-out")
def test_ctrl_c_in_encode_with_an_exported_folder_continues_where_it_stopped(tiny_bert, env, case, capsys,
                                                                             monkeypatch):
    import numpy as np

    from layerwise.encode import FolderEmbedder, load_embeddings

    corpus = env / "corpus-25.txt"
    corpus.write_text("".join(f"sentence number {i} about a dog\n" for i in range(25)), encoding="utf-8")
    assert case.run(["export", tiny_bert, env / "exp", "--layers", "0,2"], capsys).code == 0
    real, calls = FolderEmbedder.encode, []

    def counted(self, texts):
        calls.append(len(texts))
        if stop_after is not None and len(calls) > stop_after:
            raise KeyboardInterrupt
        return real(self, texts)

    monkeypatch.setattr(FolderEmbedder, "encode", counted)
    argv = ["encode", corpus, env / "v.npy", "--folder", env / "exp", "--chunk-size", "10", "-q"]
    stop_after = 2
    seen = case.run(argv, capsys)
    assert seen.code == 130 and "continues where it stopped" in seen.err and not seen.traceback
    assert not (env / "v.npy").exists()  # no partial output
    stop_after, calls[:] = None, []
    assert case.run(argv, capsys).code == 0
    assert calls == [5]  # the two finished chunks of 10 were read back, only the last 5 texts encoded
    straight = [*argv[:2], env / "straight.npy", *argv[3:]]
    assert case.run(straight, capsys).code == 0
    resumed, fresh = load_embeddings(env / "v.npy"), load_embeddings(env / "straight.npy")
    assert resumed[0] == fresh[0] and np.array_equal(resumed[1], fresh[1])
    case.record("Ctrl-C in `layerwise encode --folder` on the third chunk, then the same command again",
                "layerwise encode corpus.txt v.npy --folder EXPORT --chunk-size 10 (interrupted, re-run)", "recovery",
                "exit 130 with no partial output, then exit 0 encoding only the last 5 of 25 texts (2 finished "
                "chunks read back from the work folder beside the output); ids and vectors identical to an "
                "uninterrupted run", code=0)
