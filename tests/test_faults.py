"""Fault injection: a kill in the middle of a write never loses what was finished nor leaves a half file that is
read later; a clean re-run gives the same numbers as a run that was never interrupted."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from layerwise.cache import LayerCache
from layerwise.layers import LayerStack

RELIABILITY_GROUP = "Faults during writes"


class Killed(BaseException):
    """Stands for SIGKILL/Ctrl-C: a BaseException, so no `except Exception` in the code under test catches it."""


def _compute(texts):
    """Deterministic stand-in encoder: (m, 3, 4) vectors from each text's bytes."""
    rows = [np.frombuffer((t * 48).encode()[:48], dtype=np.uint8).astype(np.float32).reshape(3, 4 * 4)[:, :4]
            for t in texts]
    mean = np.stack(rows) / 255.0
    return LayerStack(mean=mean, cls=mean[:, ::-1].copy(), pooler=mean[:, -1].copy())


TEXTS = [f"sentence number {i} about a dog" for i in range(20)]


def _leftovers(folder):
    return [p.name for p in folder.rglob("*") if p.is_file() and p.name.startswith(".tmp-")]


def test_kill_inside_the_shard_writer_then_clean_rerun(tmp_path, monkeypatch, case):
    from layerwise.cache import _shards as cache_module  # where the shard writer calls save_file

    real_save = cache_module.save_file
    writes = []

    def dying_save(tensors, path, metadata=None):
        writes.append(path)
        if len(writes) == 2:  # the second shard: half the bytes reach the disk, then the process dies
            real_save(tensors, path, metadata=metadata)
            with open(path, "r+b") as fh:
                fh.truncate(os.path.getsize(path) // 2)
            raise Killed()
        return real_save(tensors, path, metadata=metadata)

    monkeypatch.setattr(cache_module, "save_file", dying_save)
    cache = LayerCache(tmp_path / "cache", {"model": "stand-in"})
    with pytest.raises(Killed):
        cache.get_or_compute(TEXTS, _compute, chunk_size=8)
    assert _leftovers(tmp_path) == []  # the half-written temp file is gone
    assert len(list(cache.path.glob("shard-*.safetensors"))) == 1  # the finished shard is kept
    monkeypatch.setattr(cache_module, "save_file", real_save)

    again = LayerCache(tmp_path / "cache", {"model": "stand-in"})
    got = again.get_or_compute(TEXTS, _compute, chunk_size=8)
    assert again.last_stats == {"distinct": 20, "stored": 8, "computed": 12}
    want = _compute(TEXTS)
    np.testing.assert_array_equal(got.mean, want.mean)
    np.testing.assert_array_equal(got.cls, want.cls)
    np.testing.assert_array_equal(got.pooler, want.pooler)
    case.record("kill while a cache shard is half written", "LayerCache.get_or_compute(20 texts, chunk_size=8)",
                "recovery", "no temp file left, 1 finished shard kept; re-run computed 12, stored 8, identical numbers")


def test_damaged_shard_on_disk_is_set_aside_and_recomputed(tmp_path, case):
    cache = LayerCache(tmp_path / "cache", {"model": "stand-in"})
    cache.get_or_compute(TEXTS, _compute, chunk_size=8)
    shard = sorted(cache.path.glob("shard-*.safetensors"))[0]
    raw = bytearray(shard.read_bytes())
    raw[-16:] = bytes(16)  # bit rot in the tensor data: the checksum catches it
    shard.write_bytes(bytes(raw))
    again = LayerCache(tmp_path / "cache", {"model": "stand-in"})
    got = again.get_or_compute(TEXTS, _compute, chunk_size=8)
    np.testing.assert_array_equal(got.mean, _compute(TEXTS).mean)
    assert list(cache.path.glob("*.corrupt")) and again.last_stats["computed"] > 0
    case.record("a cache shard damaged on disk (16 bytes zeroed)", "LayerCache.get_or_compute on the same texts",
                "recovery", f"shard set aside as .corrupt, {again.last_stats['computed']} texts recomputed, "
                "identical numbers")


@pytest.mark.parametrize("where", ["while writing", "before the rename"])
def test_kill_during_a_results_write_keeps_the_previous_file(where, tmp_path, monkeypatch, case):
    from layerwise import reports

    path = reports.write_json(tmp_path / "result.json", {"spearman": 81.5})
    if where == "while writing":
        real_fdopen = os.fdopen

        class HalfWriter:
            def __init__(self, fh):
                self.fh = fh

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                self.fh.close()

            def write(self, data):
                self.fh.write(data[: len(data) // 2])
                raise Killed()

        monkeypatch.setattr(reports.os, "fdopen", lambda fd, mode: HalfWriter(real_fdopen(fd, mode)))
    else:
        def no_rename(src, dst):
            raise Killed()

        monkeypatch.setattr(reports.os, "replace", no_rename)
    with pytest.raises(Killed):
        reports.write_json(path, {"spearman": 12.0, "note": "new run"})
    monkeypatch.undo()
    assert json.loads(path.read_text()) == {"spearman": 81.5}
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]  # no temp file left behind
    case.record(f"kill {where} a results file", "reports.write_json(existing path, new result)", "recovery",
                "the previous file is intact and no temp file is left")


def test_interrupted_cli_run_continues_from_the_cache(tiny_bert, tmp_path, monkeypatch, case, capsys):
    from conftest import write_stsb
    from layerwise.encoders.layer_encoder import LayerEncoder

    monkeypatch.setenv("LAYERWISE_HOME", str(tmp_path / "home"))
    monkeypatch.setitem(LayerCache.get_or_compute.__kwdefaults__, "chunk_size", 4)  # 12 distinct texts: 3 chunks
    data = write_stsb(tmp_path / "data", n_pairs=20)
    argv = ["search", "--model", tiny_bert, "--data-dir", data, "--split", "all", "--dev-size", "20",
            "--splits", "2", "--output", tmp_path / "o", "-q"]
    real = LayerEncoder._encode_unique
    calls = []

    def killed_on_third_chunk(self, texts):
        calls.append(len(texts))
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(self, texts)

    monkeypatch.setattr(LayerEncoder, "_encode_unique", killed_on_third_chunk)
    assert case.run(argv, capsys).code == 130
    monkeypatch.setattr(LayerEncoder, "_encode_unique", real)
    assert case.run(argv, capsys).code == 0
    resumed = json.loads(next((tmp_path / "o").glob("*.json")).read_text())
    assert resumed["cache"]["stored"] > 0 and resumed["cache"]["computed"] < resumed["cache"]["distinct"]
    # an uninterrupted run with the same chunks (its own cache): batches, hence float rounding, are the same
    fresh_argv = [*argv[:-3], "--output", tmp_path / "fresh", "--cache-dir", tmp_path / "other-cache", "-q"]
    assert case.run(fresh_argv, capsys).code == 0
    fresh = json.loads(next((tmp_path / "fresh").glob("*.json")).read_text())
    assert resumed["lc"]["summary"] == fresh["lc"]["summary"] and resumed["per_layer"] == fresh["per_layer"]
    case.record("Ctrl-C in `layerwise search` on the third encoded chunk, then the same command again",
                "layerwise search ... (interrupted, re-run)", "recovery",
                f"exit 130, then exit 0 with {resumed['cache']['stored']} of {resumed['cache']['distinct']} texts "
                "read from the cache; numbers identical to an uninterrupted run")
