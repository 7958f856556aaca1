"""A really full disk (issue 27): writes that fail for want of space, in a process of their own.

The disk is filled for real by a file-size limit (``RLIMIT_FSIZE``, set in the child before it starts): Python ignores
SIGXFSZ, so a write past the limit fails with EFBIG exactly as a full disk fails with ENOSPC. The process must end
by itself (no signal), with one line naming the file, no temporary file, and what was finished kept.
"""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import subprocess
import sys

import numpy as np
import pytest

from reliability_cases import child_env

RELIABILITY_GROUP = "Internal errors"


def _layerwise(argv, *, limit: int | None = None) -> subprocess.CompletedProcess:
    """``layerwise ARGV`` in a child process whose files cannot grow past ``limit`` bytes."""

    def cap():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run([sys.executable, "-m", "layerwise.cli", *map(str, argv)], capture_output=True, text=True,
                          env={**child_env(), "HF_HUB_DISABLE_PROGRESS_BARS": "1"},  # transformers' save bars off
                          preexec_fn=cap if limit else None, timeout=300)


def _one_error(run: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in run.stderr.splitlines() if ln.strip() and not ln.startswith(("INFO ", "WARNING "))]
    assert run.returncode == 2, (run.returncode, run.stderr)  # ended by itself: not -SIGXFSZ, -SIGBUS (exit 135)
    assert "Traceback" not in run.stderr and len(lines) == 1, run.stderr
    return lines[0]


def _texts(n: int) -> list[str]:
    words = ["a man", "the dog", "two people", "a woman", "the cat", "a child"]
    return [f"{words[i % 6]} number {i} is {words[(i * 5) % 6]} ." for i in range(n)]


@pytest.mark.reliability("Internal errors")
def test_an_npy_larger_than_the_disk_allows_fails_before_encoding(tiny_bert, env, case):
    corpus = env / "corpus.txt"
    corpus.write_text("".join(f"{t}\n" for t in _texts(200)), encoding="utf-8")
    out = env / "v.npy"  # 200 x 32 float32: 25.7 kB; the limit 16 kB; every cache shard (8 texts) far below it
    argv = ["encode", corpus, out, "--model", tiny_bert, "--chunk-size", "8", "-q"]
    run = _layerwise(argv, limit=16_000)
    line = _one_error(run)
    assert str(out) in line and "File too large" in line and "nothing was left behind" in line
    assert not out.exists() and not (env / "v.ids.txt").exists()
    assert not list(env.glob(".v.npy.tmp-*")) and not list(env.glob(".v.npy.lock"))  # (the resume folder may stay)
    case.record("a .npy output larger than the disk allows (a real file-size limit, EFBIG)",
                "layerwise " + " ".join(map(str, argv)) + "  # RLIMIT_FSIZE 16 kB", "clear error", line,
                code=run.returncode)


@pytest.mark.reliability("Internal errors")
def test_a_layer_cache_shard_on_a_full_disk_is_one_line(tiny_bert, env, case):
    corpus = env / "corpus.txt"
    corpus.write_text("".join(f"{t}\n" for t in _texts(8)), encoding="utf-8")
    out = env / "v.npy"  # 8 x 32 float32 fits; the cache shard of 8 texts (their 3 hidden states x 2 poolings) does not
    argv = ["encode", corpus, out, "--model", tiny_bert, "-q"]
    run = _layerwise(argv, limit=4_000)
    line = _one_error(run)
    assert "layer cache shard" in line and "File too large" in line and "was: internal error" not in line
    cache = env / "home" / "cache"
    assert not [p for p in cache.rglob("*") if p.is_file() and p.name != "key.json"], list(cache.rglob("*"))
    assert not out.exists() and not list(env.glob(".v.npy.tmp-*"))
    case.record("the disk fills while the layer cache writes a shard (a real file-size limit; was: internal error, "
                "SafetensorError)", "layerwise " + " ".join(map(str, argv)) + "  # RLIMIT_FSIZE 4 kB", "clear error",
                re.sub(r"shard-[0-9a-f]{32}", "shard-<uuid>", line), code=run.returncode)  # the page: same every run


@pytest.mark.reliability("Internal errors")
def test_a_disk_filling_mid_encode_keeps_the_finished_chunks_for_the_resume(tiny_bert, env, case):
    corpus = env / "corpus.jsonl"
    ids = [f"doc-{i:04d}-" + "x" * 290 for i in range(200)]  # 300-byte ids: the ids file (60 kB) passes the limit
    corpus.write_text("".join(json.dumps({"id": k, "text": t}) + "\n" for k, t in zip(ids, _texts(200))))
    out = env / "v.npy"
    argv = ["encode", corpus, out, "--model", tiny_bert, "--id-column", "id", "--chunk-size", "8", "-q"]
    run = _layerwise(argv, limit=40_000)  # the .npy (25.7 kB) fits, the ids file does not: it fails mid-way
    line = _one_error(run)
    assert "File too large" in line and "nothing was left behind" in line
    assert not out.exists() and not list(env.glob(".v.npy.tmp-*")) and not list(env.glob(".v.npy.lock"))
    journal = next(env.glob(".v.npy.partial-*"))
    kept = len(list(journal.glob("*.npy")))
    assert 0 < kept < 25, kept  # the chunks finished before the disk filled, not all 25
    again = _layerwise(argv)  # room again: the same command finishes, reading the kept chunks back
    assert again.returncode == 0, again.stderr
    straight = _layerwise([*argv[:2], env / "straight.npy", *argv[3:], "--no-cache"])
    assert straight.returncode == 0, straight.stderr
    np.testing.assert_array_equal(np.load(out), np.load(env / "straight.npy"))
    assert (env / "v.ids.txt").read_text().splitlines() == ids and not journal.exists()
    case.record("the disk fills while `encode` writes (a real file-size limit on the ids file)",
                "layerwise " + " ".join(map(str, argv)) + "  # RLIMIT_FSIZE 40 kB, then again without",
                "recovery", f"{line} -- {kept} finished chunks kept; the same command then finished with the "
                "vectors of a straight run", code=run.returncode)


@pytest.mark.reliability("Internal errors")
def test_a_full_disk_while_writing_results_keeps_every_file_whole(tiny_bert, env, case):
    from conftest import write_stsb
    from layerwise.outputs import MANIFEST, OutputManifest

    data = write_stsb(env / "data", n_pairs=12)
    out = env / "o"
    argv = ["layers", "--model", tiny_bert, "--data-dir", data, "--no-cache", "--output", out, "-q"]
    run = _layerwise(argv, limit=12_000)  # the JSON and markdown fit, the plot (PNG) does not
    line = _one_error(run)
    assert ".png" in line and "File too large" in line and "no temporary file is left" in line
    written = sorted(p.name for p in out.iterdir())
    assert not [n for n in written if n.startswith(".") and n != MANIFEST], written
    manifest = OutputManifest(out)
    assert all(not manifest.foreign(n) for n in written if n != MANIFEST)  # what was written is whole and listed
    again = _layerwise(argv)
    assert again.returncode == 0, again.stderr
    assert len([n for n in os.listdir(out) if n.endswith(".png")]) == 1
    case.record("the disk fills while `layers` writes its results (a real file-size limit)",
                "layerwise " + " ".join(map(str, argv)) + "  # RLIMIT_FSIZE 12 kB, then again without",
                "recovery", f"{line} -- the files written before were whole and listed; the same command then "
                "finished", code=run.returncode)


@pytest.mark.reliability("Internal errors")
def test_an_export_on_a_full_disk_is_one_line_and_leaves_nothing(tiny_bert, env, case):
    dest = env / "exported"
    argv = ["export", tiny_bert, dest, "--layers", "0,2"]
    run = _layerwise(argv, limit=40_000)  # the weights (about 78 kB) do not fit
    line = _one_error(run)
    assert "writing" in line and "File too large" in line and "free some space" in line
    assert sorted(p.name for p in env.iterdir() if p.name != "home") == [], list(env.iterdir())
    case.record("the disk fills while `export` writes the weights (a real file-size limit; was: internal error, "
                "SafetensorError)", "layerwise " + " ".join(map(str, argv)) + "  # RLIMIT_FSIZE 40 kB", "clear error",
                line, code=run.returncode)


def test_reserve_allocates_or_writes_zeros(env, monkeypatch):
    """The fallback (a file system without fallocate) gives the same file as the fast path: a slow twin."""
    from layerwise.encode import writers

    sizes = {}
    for name, fallocate in (("fast", os.posix_fallocate), ("zeros", None)):
        if fallocate is None:
            def unsupported(fd, offset, length):
                raise OSError(95, "Operation not supported")

            monkeypatch.setattr(writers.os, "posix_fallocate", unsupported)
        with open(env / name, "wb") as f:
            f.write(b"head")
            f.flush()
            writers.reserve(f.fileno(), 3 << 20)
            assert f.tell() == 4 and os.lseek(f.fileno(), 0, os.SEEK_CUR) == 4  # the position is kept
            f.write(b"rows")
        sizes[name] = (env / name).read_bytes()
    assert sizes["fast"] == sizes["zeros"] == b"headrows" + bytes((3 << 20) - 8)


def test_sigxfsz_is_ignored_so_a_limit_is_an_error(env):
    """What the tests above rest on: the child is not killed by SIGXFSZ (Python ignores it)."""
    code = "import signal; print(signal.getsignal(signal.SIGXFSZ) == signal.SIG_IGN)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "True"
    assert signal.SIGXFSZ > 0
