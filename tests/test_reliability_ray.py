"""``layerwise encode --engine ray`` (issue 27): its output locked as the local engine's, and an error raised inside a
Ray actor said in one line (exit 2, no traceback). Ray starts in one test only (it is slow)."""

from __future__ import annotations

import pytest

from reliability_cases import child_env
from reliability_cases import no_model_load as _no_model_load

RELIABILITY_GROUP = "Unclear errors"


@pytest.mark.reliability("Unclear errors")
def test_a_second_ray_encode_of_one_output_is_refused_while_the_first_runs(tiny_bert, corpus, env, case, capsys,
                                                                            monkeypatch):
    pytest.importorskip("ray")
    from layerwise.encode import CorpusSource, EmbedderConfig, encode_corpus_ray
    from layerwise.encode.writers import lock_path, output_lock
    from layerwise.errors import UsageError

    _no_model_load(monkeypatch)
    out = env / "shards"
    with output_lock(out):  # the first encode, still running
        case.cli_error(["encode", corpus, out, "--engine", "ray", "--model", tiny_bert, "-q"], capsys,
                       what="two `encode --engine ray` to one output at once (was: not locked)",
                       match=("being written by another", "wait for it"))
        with pytest.raises(UsageError, match="being written by another"):  # the library refuses it too
            encode_corpus_ray(CorpusSource(str(corpus)), out, EmbedderConfig(model=str(tiny_bert)))
    assert not lock_path(out).exists() and not out.exists()


def test_a_user_error_is_found_in_what_ray_raises():
    from layerwise.encode.ray_engine import user_error_in
    from layerwise.errors import ModelFilesError, UsageError
    from layerwise.finite import NonFiniteError

    inner = NonFiniteError("the vectors of corpus rows from 0 (Ray block): 4 of 4 values are NaN or inf; fix")
    wrapper = RuntimeError("UDF failed")
    wrapper.cause = inner  # RayTaskError's attribute
    assert user_error_in(wrapper) is inner
    chained = RuntimeError("outer")
    chained.__cause__ = ModelFilesError("model.safetensors is damaged")
    assert isinstance(user_error_in(chained), ModelFilesError)
    died = RuntimeError("The actor died because of an error raised in its creation task\nTraceback (most recent call "
                        "last):\n  File x\nlayerwise.errors.ModelFilesError: /m: config.json is missing; restore it\n")
    found = user_error_in(died)  # only Ray's text of it is left
    assert isinstance(found, UsageError) and str(found) == "/m: config.json is missing; restore it"
    assert user_error_in(RuntimeError("a bug")) is None and user_error_in(KeyError("k")) is None


@pytest.fixture()
def exploding_model(env):
    """A tiny BERT whose finite weights overflow float32 on any input: it loads, and gives NaN vectors."""
    from safetensors.torch import load_file, save_file

    from conftest import build_tiny_bert

    folder = build_tiny_bert(env / "exploding")
    state = load_file(str(folder / "model.safetensors"))
    for key in state:
        if "word_embeddings" in key:
            state[key] = state[key] * 1e38
    save_file(state, str(folder / "model.safetensors"))
    return folder


@pytest.mark.reliability("Silently wrong")
def test_nan_vectors_inside_a_ray_actor_are_one_line(exploding_model, corpus, env, case):
    """Run as the user runs it (a process of its own: Ray's log handlers hold the real stderr)."""
    import subprocess
    import sys

    pytest.importorskip("ray.data")
    out = env / "shards"
    argv = ["encode", corpus, out, "--engine", "ray", "--model", exploding_model, "--actors", "1", "--no-cache", "-q"]
    # the timeout only guards against a hang: Ray's start alone took over 300 s on 2 loaded cores (151 s unloaded)
    run = subprocess.run([sys.executable, "-m", "layerwise.cli", *map(str, argv)], capture_output=True, text=True,
                         env=child_env(), timeout=900)
    errors = [ln for ln in run.stderr.splitlines() if ln.startswith("layerwise")]
    assert run.returncode == 2 and "Traceback" not in run.stderr + run.stdout, run.stderr
    assert len(errors) == 1 and "NaN or inf" in errors[0] and "Ray block" in errors[0], run.stderr
    assert sorted(p.name for p in env.iterdir()) == ["corpus.txt", "exploding", "home"][: 2 + (env / "home").exists()]
    case.record("NaN vectors computed inside a Ray actor (was: Ray's traceback)", "layerwise " + " ".join(map(str, argv)),
                "clear error", errors[0], code=run.returncode)

