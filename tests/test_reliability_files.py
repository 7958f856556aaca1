"""Round 3 of bad input and faults (issue 27), by class: internal errors and crashes, runaway memory, unclear errors.

Every file layerwise reads is validated (shapes against the config, sizes against the weights before allocating, the
schema of stored JSON) with a one-line error; a full disk fails cleanly; any text's size costs bounded memory; two
encodes of one output, a bad output location and a model looked for in the wrong place are said in one line.
Each test records its case (``case`` fixture) for docs/reliability.md; data loss and silent results:
test_reliability_round3.py.
"""

from __future__ import annotations

import errno
import json
import shutil
import time

import numpy as np
import pytest

from reliability_cases import no_model_load as _no_model_load

RELIABILITY_GROUP = "Internal errors"



@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A saved SentenceModel (encoder + layer-attention pooler) of the tiny BERT, to damage copies of."""
    from conftest import build_tiny_bert
    from layerwise.encoders.trainable import SentenceModel

    root = tmp_path_factory.mktemp("trained")
    model = SentenceModel.from_pretrained(str(build_tiny_bert(root / "bert")), max_length=16)
    return model.save(root / "model")


def _damaged(trained, env, damage) -> object:
    folder = env / "trained"
    shutil.copytree(trained, folder)
    damage(folder / "pooler")
    return folder


def _wrong_shape(pooler):
    from safetensors.torch import load_file, save_file

    state = load_file(str(pooler / "model.safetensors"))
    key = sorted(state)[0]
    state[key] = state[key].reshape(-1)[:-1].clone()
    save_file(state, str(pooler / "model.safetensors"))


def _truncated(pooler):
    data = (pooler / "model.safetensors").read_bytes()
    (pooler / "model.safetensors").write_bytes(data[: len(data) // 2])


def _huge(pooler):
    config = json.loads((pooler / "config.json").read_text())
    config["hidden_size"] = 10**7  # the pooler's (K, d) parameters: 10**8 floats and more
    (pooler / "config.json").write_text(json.dumps(config))


TRAINED_DAMAGE = [
    ("trained pooler weights of the wrong shape (was: internal error)", _wrong_shape, ("does not fit", "shape")),
    ("trained pooler weights truncated (was: internal error)", _truncated, ("cannot be read as safetensors",)),
    ("trained pooler config with hidden_size 10**7 (was: tried to allocate terabytes)", _huge,
     ("does not fit", "10000000")),
]


@pytest.mark.reliability("Internal errors")
@pytest.mark.parametrize("what, damage, match", TRAINED_DAMAGE, ids=["shape", "truncated", "huge"])
def test_damaged_trained_module_is_refused_in_one_line(what, damage, match, trained, env, case, capsys, no_bars):
    import tracemalloc

    folder = _damaged(trained, env, damage)
    tracemalloc.start()
    seen = case.cli_error(["export", folder, env / "exp"], capsys, what=what, match=match, outcome="refusal")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 200e6 and seen.seconds < 30 and not (env / "exp").exists()


def test_module_load_checks_shapes_on_the_meta_device(trained, env):
    from layerwise.errors import ModelFilesError
    from layerwise.modules.poolers import load_pooler

    pooler = load_pooler(trained / "pooler")  # intact: loads
    assert all(p.device.type == "cpu" for p in pooler.parameters())
    folder = _damaged(trained, env, _huge)
    with pytest.raises(ModelFilesError, match="does not fit"):
        load_pooler(folder / "pooler")


def _config_edit(model, dest, **changes):
    shutil.copytree(model, dest)
    config = json.loads((dest / "config.json").read_text())
    config.update(changes)
    (dest / "config.json").write_text(json.dumps(config))
    return dest


HUGE_CONFIGS = [
    ("encoder config with num_hidden_layers 100000 (was: still running at 120 s, 5.2 GB)", {"num_hidden_layers": 100000},
     ("100000 layers", "does not belong")),
    ("encoder config with hidden_size 10**6", {"hidden_size": 10**6}, ("hidden size 1000000", "does not belong")),
    ("encoder config with num_hidden_layers -3", {"num_hidden_layers": -3}, ("num_hidden_layers", "integer of at least 0")),
]


@pytest.mark.reliability("Runaway memory")
@pytest.mark.parametrize("what, changes, match", HUGE_CONFIGS, ids=["layers", "hidden", "negative"])
def test_encoder_config_larger_than_its_weights_is_refused_before_loading(what, changes, match, tiny_bert, corpus, env,
                                                                          case, capsys, monkeypatch):
    _no_model_load(monkeypatch)
    model = _config_edit(tiny_bert, env / "edited", **changes)
    seen = case.cli_error(["encode", corpus, env / "v.npy", "--model", model, "-q"], capsys, what=what, match=match,
                          outcome="refusal")
    assert seen.seconds < 5


@pytest.mark.reliability("Internal errors")
@pytest.mark.parametrize("content", ['{"hello": 1}', "[1, 2, 3]", "not json"], ids=["object", "list", "text"])
def test_a_foreign_json_in_the_results_store_is_one_line(content, env, case, capsys):
    store = env / "state"
    (store / "tmft").mkdir(parents=True)
    (store / "tmft" / "notes--0.json").write_text(content)
    case.cli_error(["results", "render", "tmft", "--store", store, "--output", env / "pages", "-q"], capsys,
                   what=f"a foreign file in the results store ({content!r}; was: internal error)",
                   match=("notes--0.json", "move it away"))


@pytest.mark.reliability("Internal errors")
@pytest.mark.parametrize("labels", ["0", "1", "empty"])
def test_quora_split_without_usable_pairs_is_one_line(labels, tiny_bert, env, case, capsys):
    from conftest import write_multitask

    data = write_multitask(env / "data", n=12)
    rows = [] if labels == "empty" else [f"{labels}\tq {i} ?\tq {i} .\t{i}" for i in range(12)]
    (data / "quora" / "dev.tsv").write_text("".join(f"{r}\n" for r in rows))
    want = {"0": "no duplicate (label 1)", "1": "no non-duplicate (label 0)", "empty": "holds 0 pairs"}[labels]
    case.cli_error(["multitask", "BASELINE", "--model", tiny_bert, "--data-dir", data, "--epochs", "1", "--limit", "8",
                    "--eval-limit", "4", "--output", env / "o", "-q"], capsys,
                   what=f"Quora dev.tsv with {'no rows' if labels == 'empty' else 'every label ' + labels} "
                        "(was: internal error)", match=("Quora dev.tsv", want))


class _FullDisk:
    """A file object whose writes fail with ENOSPC once ``room`` bytes are written (a disk filling mid-write)."""

    def __init__(self, f, room: int):
        self.f, self.room = f, room

    def write(self, data):
        self.room -= len(data)
        if self.room < 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        return self.f.write(data)

    def __getattr__(self, name):
        return getattr(self.f, name)


@pytest.mark.reliability("Internal errors")
def test_full_disk_while_writing_the_npy_fails_cleanly(tiny_bert, corpus, env, case, capsys, monkeypatch):
    from layerwise.encode import writers

    def opener(path, mode="r", *args, **kwargs):
        f = open(path, mode, *args, **kwargs)
        return _FullDisk(f, 200) if "b" in mode else f  # the header fits, the first rows do not

    monkeypatch.setattr(writers, "open", opener, raising=False)
    out = env / "v.npy"
    case.cli_error(["encode", corpus, out, "--model", tiny_bert, "--no-cache", "-q"], capsys,
                   what="disk full while writing the .npy (was: bus error, exit 135, a temp file left)",
                   match=("writing", "No space left", "nothing was left behind"))
    assert not out.exists() and not list(env.glob(".v.npy.tmp-*")) and not list(env.glob(".v.npy.lock"))


@pytest.mark.reliability("Internal errors")
def test_too_little_free_space_is_said_before_writing(tiny_bert, corpus, env, case, capsys, monkeypatch):
    from collections import namedtuple

    from layerwise.encode import writers

    usage = namedtuple("usage", "total used free")
    free = (1 << 20) + 100  # enough for the check before the model loads (1 MB), not for 3 x 32 float32 + 1 MB
    monkeypatch.setattr(writers.shutil, "disk_usage", lambda p: usage(10**9, 10**9 - free, free))
    out = env / "v.npy"
    case.cli_error(["encode", corpus, out, "--model", tiny_bert, "--no-cache", "-q"], capsys,
                   what="too little free space for the .npy (checked before its first byte)",
                   match=("MB free", "another disk"))
    assert not out.exists() and not list(env.glob(".v.npy.tmp-*"))


def test_the_npy_writer_writes_what_np_save_writes(env):
    from layerwise.encode.writers import open_writer

    vectors = np.random.default_rng(0).standard_normal((7, 5)).astype(np.float32)
    writer = open_writer(env / "w.npy", 7, 5)
    writer.write([str(i) for i in range(4)], vectors[:4])
    writer.write(["4", "5", "6"], vectors[4:])
    writer.close()
    np.save(env / "ref.npy", vectors)  # the slow obvious twin
    assert (env / "w.npy").read_bytes() == (env / "ref.npy").read_bytes()
    assert (env / "w.ids.txt").read_text() == "".join(f"{i}\n" for i in range(7))


# -- runaway memory ---------------------------------------------------------------------------------------


@pytest.mark.reliability("Runaway memory")
def test_a_line_of_megabytes_reaches_the_tokenizer_cut(tiny_bert, env, case, capsys, monkeypatch):
    """A 3 MB line: the tokenizer receives at most max_length * CHARS_PER_TOKEN characters, and the vector equals the
    one of the text cut by hand (the tokens kept are the same)."""
    from layerwise.encoders import batching

    line = ("a man is playing a guitar . " * 110_000)[:3_000_000]
    corpus = env / "big.txt"
    corpus.write_text(line + "\nthe dog runs .\n", encoding="utf-8")
    seen_sizes = []
    real = batching.cut_texts

    def spying(texts, max_length):
        out = real(texts, max_length)
        seen_sizes.extend(len(t) for t in out)
        return out

    monkeypatch.setattr(batching, "cut_texts", spying)
    out = env / "v.npy"
    t0 = time.perf_counter()
    seen = case.run(["encode", corpus, out, "--model", tiny_bert, "--max-length", "32", "--no-cache", "-q"], capsys)
    assert seen.code == 0, seen.err
    assert max(seen_sizes) == 32 * batching.CHARS_PER_TOKEN
    cut = env / "cut.txt"
    cut.write_text(line[: 32 * batching.CHARS_PER_TOKEN] + "\nthe dog runs .\n", encoding="utf-8")
    assert case.run(["encode", cut, env / "c.npy", "--model", tiny_bert, "--max-length", "32", "--no-cache", "-q"],
                    capsys).code == 0
    np.testing.assert_allclose(np.load(out), np.load(env / "c.npy"), atol=1e-6)
    case.record("encode a corpus with one 3 MB line (a 5.6 MB line peaked at 1.73 GB)",
                f"layerwise encode big.txt {out} --model {tiny_bert} --max-length 32",
                "correct result", f"the tokenizer received at most {max(seen_sizes)} characters per text; vectors "
                "equal those of the line cut by hand", code=seen.code)
    assert time.perf_counter() - t0 < 60


def test_cut_texts_keeps_short_texts_and_bounds_long_ones():
    from layerwise.encoders.batching import CHARS_PER_TOKEN, cut_texts

    assert cut_texts(["short", "x" * 10_000], 8) == ["short", "x" * (8 * CHARS_PER_TOKEN)]


def test_every_tokenizing_path_cuts_texts(tiny_bert):
    """The trainable model (train, tmft) tokenizes cut texts too: one long text costs what a cut one does."""
    from layerwise.encoders.trainable import SentenceModel

    model = SentenceModel.from_pretrained(str(tiny_bert), max_length=8)
    long = "a man is playing a guitar . " * 40_000
    calls = []
    real = model.tokenizer.__class__.__call__

    def spy(self, texts, *a, **k):
        calls.append(max(len(t) for t in texts))
        return real(self, texts, *a, **k)

    model.tokenizer.__class__.__call__ = spy
    try:
        model.layer_vectors([long, "the dog"])
        model.encode([long, "the dog"])
    finally:
        model.tokenizer.__class__.__call__ = real
    assert calls and max(calls) <= 8 * 64


# -- unclear errors ---------------------------------------------------------------------------------------


@pytest.mark.reliability("Unclear errors")
def test_a_second_encode_of_one_output_is_refused_while_the_first_runs(tiny_bert, corpus, env, case, capsys,
                                                                        monkeypatch):
    from layerwise.encode.writers import lock_path, output_lock

    _no_model_load(monkeypatch)
    out = env / "v.npy"
    with output_lock(out):  # the first encode, still running
        case.cli_error(["encode", corpus, out, "--model", tiny_bert, "-q"], capsys,
                       what="two encodes to one output at once (was: each deleted the other's temp files)",
                       match=("being written by another", "wait for it"))
        assert lock_path(out).exists()
    assert not lock_path(out).exists()  # released and removed with the first run


@pytest.mark.reliability("Unclear errors")
@pytest.mark.parametrize("where", ["read-only", "file-parent", "full"])
def test_encode_checks_its_output_location_before_the_model_loads(where, tiny_bert, corpus, env, case, capsys,
                                                                   monkeypatch):
    _no_model_load(monkeypatch)
    if where == "read-only":
        out, match = "/sys/kernel/v.npy", ("not writable",)
    elif where == "file-parent":
        (env / "a-file").write_text("x")
        out, match = env / "a-file" / "v.npy", ("a-file", "is a file")
    else:
        from collections import namedtuple

        usage = namedtuple("usage", "total used free")
        monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(10**9, 10**9 - 10, 10))
        out, match = env / "v.npy", ("is full", "another disk")
    case.cli_error(["encode", corpus, out, "--model", tiny_bert, "-q"], capsys, match=match,
                   what=f"encode into a {where} output location (was: found only after the model loaded)")


@pytest.mark.reliability("Unclear errors")
def test_not_installed_builtin_says_where_it_looked_and_how_to_point_there(env, corpus, case, capsys, monkeypatch):
    from layerwise.encoders import registry

    monkeypatch.setenv("LAYERWISE_HOME", str(env / "other-cache"))
    monkeypatch.delenv("LAYERWISE_MODELS", raising=False)
    seen = case.cli_error(["encode", corpus, env / "v.npy", "--model", "all-mpnet-base-v2", "-q"], capsys,
                          what="all-mpnet-base-v2 with LAYERWISE_HOME set for another cache (was: 'not installed', "
                               "nothing about where)",
                          match=(str(env / "other-cache" / "models" / "all-mpnet-base-v2"), "LAYERWISE_MODELS"))
    assert "make models" in seen.err
    models = env / "models"
    (models / "all-mpnet-base-v2").mkdir(parents=True)
    (models / "all-mpnet-base-v2" / "config.json").write_text("{}")
    monkeypatch.setenv("LAYERWISE_MODELS", str(models))
    assert registry.models_home() == models and registry._mpnet_path() == models / "all-mpnet-base-v2"


@pytest.mark.reliability("Internal errors")
def test_a_trained_folder_whose_description_is_not_an_object(trained, env, case, capsys, no_bars):
    folder = env / "trained"
    shutil.copytree(trained, folder)
    (folder / "sentence_model.json").write_text("[1, 2]")
    case.cli_error(["export", folder, env / "exp"], capsys, outcome="refusal",
                   what="a trained model folder whose sentence_model.json is a JSON list (was: internal error)",
                   match=("sentence_model.json", "not SentenceModel format"))


@pytest.mark.reliability("Unclear errors")
def test_non_utf8_corpus_names_file_and_line_end_to_end(tiny_bert, env, case, capsys, monkeypatch):
    _no_model_load(monkeypatch)
    lines = [b"a man is playing a guitar ."] * 15_010
    lines[14_999] = b"caf\xe9 au lait"  # line 15,000, as in the issue
    corpus = env / "latin1.txt"
    corpus.write_bytes(b"\n".join(lines) + b"\n")
    case.cli_error(["encode", corpus, env / "v.npy", "--model", tiny_bert, "-q"], capsys,
                   what="encode a corpus with a Latin-1 byte on line 15,000 (was: 'position 5307', no file or line)",
                   match=(str(corpus), "line 15000", "UTF-8"))
