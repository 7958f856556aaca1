"""`layerwise encode --engine ray`: a local Ray instance gives the local path's vectors and ids, in corpus order."""

import json
import shutil
import sys

import numpy as np
import pytest

from conftest import SENTENCES
from layerwise.encode import (
    CorpusSource,
    EmbedderConfig,
    PoolingSpec,
    RayEncodeConfig,
    encode_corpus,
    encode_corpus_ray,
    load_embeddings,
)
from layerwise.encode.ray_engine import actor_count
from layerwise.encode.shards import MANIFEST, write_manifest
from layerwise.errors import UsageError

TEXTS = [f"{a} {b}" for a in SENTENCES[:5] for b in SENTENCES[5:10]]  # 25 distinct texts of different lengths
IDS = [f"doc-{i}" for i in range(len(TEXTS))]


@pytest.fixture(scope="module")
def ray_instance():
    """One local Ray instance for the module (2 CPUs, as on the machine this was written on)."""
    ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'layerwise[ray]'")
    pytest.importorskip("ray.data", reason="Ray Data is not installed: pip install 'ray[data]'")
    started = not ray.is_initialized()
    if started:
        try:
            ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
        except Exception as exc:  # noqa: BLE001 - any failure to start means the environment cannot run Ray
            pytest.skip(f"a local Ray instance cannot start here ({type(exc).__name__}: {exc})")
    yield ray
    if started:
        ray.shutdown()


def _corpus(folder):
    path = folder / "corpus.jsonl"
    path.write_text("".join(json.dumps({"key": k, "body": t}) + "\n" for k, t in zip(IDS, TEXTS)))
    return CorpusSource(str(path), column="body", id_column="key")


MEAN_0_2 = PoolingSpec("mean", (0, 2))


def _config(model, spec=MEAN_0_2):
    return EmbedderConfig(model=str(model), pooling=spec, max_length=32, batch_size=4)


def test_ray_output_equals_the_local_output_with_two_actors_and_many_blocks(tmp_path, tiny_bert, ray_instance):
    pq = pytest.importorskip("pyarrow.parquet")
    source, config = _corpus(tmp_path), _config(tiny_bert)
    local = encode_corpus(source, tmp_path / "local.npy", config.build(), chunk_size=25)
    wide = RayEncodeConfig(actors=2, cpus_per_actor=0.5, rows_per_block=4, rows_per_batch=3)  # 7 blocks, 2 actors
    result = encode_corpus_ray(source, tmp_path / "shards", config, config=wide, command=["test"])
    assert (result.output, result.n, result.dim) == (str(tmp_path / "shards"), 25, 32)
    ids, vectors = load_embeddings(tmp_path / "shards")
    want_ids, want = load_embeddings(local.output)
    assert ids == want_ids == IDS and vectors.shape == (25, 32) and vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, want, atol=1e-6)
    shards = sorted((tmp_path / "shards").glob("*.parquet"))
    assert len(shards) > 1  # the order was rebuilt from several shards, not read from one
    assert sorted(r for s in shards for r in pq.read_table(s).column("row").to_pylist()) == list(range(25))
    manifest = json.loads((tmp_path / "shards" / MANIFEST).read_text())
    assert (manifest["n"], manifest["dim"], manifest["engine"]["actors"], manifest["command"]) == (25, 32, 2, ["test"])
    assert EmbedderConfig.from_dict(manifest["embedder"]) == config
    assert manifest["identity"]["model"]["weights_sha256"]
    assert ray_instance.is_initialized()  # not ours to shut down
    assert not list(tmp_path.glob(".shards.tmp-*"))
    shards[0].unlink()  # a damaged folder is refused, not read short
    with pytest.raises(UsageError, match="damaged"):
        load_embeddings(tmp_path / "shards")


def test_output_folders_are_refused_before_any_work(tmp_path, tiny_bert, monkeypatch):
    import layerwise.encode.ray_engine as engine

    def no_ray():
        raise AssertionError("Ray may not start for a refused output")

    monkeypatch.setattr(engine, "require_ray", no_ray)
    source, config = _corpus(tmp_path), _config(tiny_bert)
    for name in ("out.npy", "out.parquet"):
        with pytest.raises(UsageError, match="OUTPUT is a folder of Parquet shards"):
            encode_corpus_ray(source, tmp_path / name, config)
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match="is a file"):
        encode_corpus_ray(source, tmp_path / "file", config)
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match="did not write .* never replaced"):
        encode_corpus_ray(source, theirs, config, overwrite=True)
    assert (theirs / "notes.txt").read_text() == "mine"
    ours = tmp_path / "ours"
    ours.mkdir()
    write_manifest(ours, {"n": 1, "dim": 1})
    with pytest.raises(UsageError, match="pass --overwrite"):
        encode_corpus_ray(source, ours, config)
    (tmp_path / "bad.jsonl").write_text('{"body": "a man"}\n{oops\n')
    with pytest.raises(UsageError, match="line 2 is not JSON"):
        encode_corpus_ray(CorpusSource(str(tmp_path / "bad.jsonl"), column="body"), tmp_path / "new", config)
    assert not (tmp_path / "new").exists()
    with pytest.raises(UsageError, match="actors must be at least 1"):
        RayEncodeConfig(actors=0)
    with pytest.raises(ValueError, match="needs a model or a folder, not both or neither"):
        EmbedderConfig(model=str(tiny_bert), folder=str(tiny_bert))


def test_default_actor_count_leaves_a_cpu_for_the_writes():
    assert actor_count(RayEncodeConfig(), {"CPU": 2.0}) == 1
    assert actor_count(RayEncodeConfig(), {"CPU": 1.0}) == 1
    assert actor_count(RayEncodeConfig(cpus_per_actor=0.5), {"CPU": 3.0}) == 4
    assert actor_count(RayEncodeConfig(gpus_per_actor=1), {"CPU": 16.0, "GPU": 4.0}) == 4
    assert actor_count(RayEncodeConfig(actors=3), {"CPU": 2.0}) == 3


def test_encode_command_with_the_ray_engine_and_an_exported_folder(tmp_path, tiny_bert, ray_instance, capsys,
                                                                   monkeypatch):
    from layerwise.cli import main
    from layerwise.methods.lc.export import SubsetExport, export_layer_subset

    source = _corpus(tmp_path)
    folder = export_layer_subset(SubsetExport(model=str(tiny_bert), layers=(0, 2), max_length=32), tmp_path / "exp")
    out = tmp_path / "shards"
    out.mkdir()
    write_manifest(out, {"n": 1, "dim": 1})  # an earlier run of ours: replaced with --overwrite
    (out / "old.parquet").write_text("stale")
    args = ["encode", source.path, str(out), "--column", "body", "--id-column", "key", "--folder", str(folder),
            "--batch-size", "4", "-q", "--engine", "ray"]
    assert main([*args, "--overwrite"]) == 0
    assert "25 texts x 32 dims" in capsys.readouterr().out
    ids, vectors = load_embeddings(out)
    assert ids == IDS and not (out / "old.parquet").exists()
    np.testing.assert_allclose(vectors, _config(tiny_bert).build().encode(TEXTS), atol=1e-5)  # as in test_encode
    assert json.loads((out / MANIFEST).read_text())["engine"]["actors"] == 1  # 2 CPUs: one left for the writes
    assert main(args) == 2
    assert "pass --overwrite" in capsys.readouterr().err
    assert main([*args[:2], str(tmp_path / "x.npy"), *args[3:]]) == 2
    assert "OUTPUT is a folder" in capsys.readouterr().err
    assert main([*args[:-2], "--actors", "2"]) == 2
    assert "apply to --engine ray only" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    shutil.rmtree(out)
    assert main(args) == 2
    assert 'pip install "layerwise[ray]"' in capsys.readouterr().err
