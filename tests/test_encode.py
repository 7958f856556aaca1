"""`layerwise encode`: every input format, .npy and Parquet output, resume (journal and layer cache), bad files."""

import csv
import json

import numpy as np
import pytest

from conftest import SENTENCES
from layerwise.encode import CorpusSource, PoolingSpec, SpecEmbedder, encode_corpus, load_embeddings
from layerwise.encode.journal import MANIFEST, work_folders
from layerwise.errors import UsageError

TEXTS = [f"{a} {b}" for a in SENTENCES[:5] for b in SENTENCES[5:10]]  # 25 distinct texts


@pytest.fixture()
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("LAYERWISE_HOME", str(tmp_path / "home"))
    return tmp_path


def _reference(model, texts, spec):
    """The slow obvious twin: the whole list at once, no chunks, no cache."""
    from layerwise import LayerEncoder

    enc = LayerEncoder(str(model), max_length=32, cache_dir=False)
    return SpecEmbedder(enc, spec).encode(texts)


def _embedder(model, spec, cache=None):
    from layerwise import LayerEncoder

    return SpecEmbedder(LayerEncoder(str(model), max_length=32, batch_size=4, cache_dir=cache), spec)


def _write(folder, fmt, texts):
    ids = [f"doc-{i}" for i in range(len(texts))]
    if fmt == "txt":
        path = folder / "corpus.txt"
        path.write_text("\n".join(texts) + "\n")
        return CorpusSource(str(path)), [str(i) for i in range(len(texts))]
    if fmt == "jsonl":
        path = folder / "corpus.jsonl"
        path.write_text("".join(json.dumps({"key": k, "body": t}) + "\n" for k, t in zip(ids, texts, strict=True)))
        return CorpusSource(str(path), column="body", id_column="key"), ids
    if fmt in ("csv", "tsv"):
        path = folder / f"corpus.{fmt}"
        with open(path, "w", newline="") as fh:
            w = csv.writer(fh, delimiter="\t" if fmt == "tsv" else ",")
            w.writerow(["id", "text"])
            w.writerows(zip(ids, texts, strict=True))
        return CorpusSource(str(path), id_column="id"), ids
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    path = folder / "corpus.parquet"
    pq.write_table(pa.table({"id": list(range(len(texts))), "text": texts}), path, row_group_size=7)
    return CorpusSource(str(path), id_column="id"), [str(i) for i in range(len(texts))]


@pytest.mark.parametrize("fmt", ["txt", "jsonl", "csv", "tsv", "parquet"])
def test_each_input_format_gives_the_whole_list_vectors_with_ids(tmp_path, tiny_bert, fmt, home):
    spec = PoolingSpec("mean", (0, 2))
    source, ids = _write(tmp_path, fmt, TEXTS)
    result = encode_corpus(source, tmp_path / "out.npy", _embedder(tiny_bert, spec, cache=False), chunk_size=6)
    got_ids, vectors = load_embeddings(result.output)
    assert got_ids == ids and vectors.shape == (25, 32) and vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, _reference(tiny_bert, TEXTS, spec), atol=1e-6)


def test_parquet_output_holds_ids_and_vectors(tmp_path, tiny_bert, home):
    pytest.importorskip("pyarrow")
    spec = PoolingSpec("cls", (1,))
    source, ids = _write(tmp_path, "jsonl", TEXTS)
    result = encode_corpus(source, tmp_path / "out.parquet", _embedder(tiny_bert, spec, cache=False), chunk_size=10)
    got_ids, vectors = load_embeddings(result.output)
    assert got_ids == ids and result.ids is None
    np.testing.assert_allclose(vectors, _reference(tiny_bert, TEXTS, spec), atol=1e-6)


def test_lc_mlp_and_pooler_specs_match_the_pooling_functions(tmp_path, tiny_bert, home):
    from layerwise import LayerEncoder
    from layerwise.pooling import head_pooling

    enc = LayerEncoder(str(tiny_bert), max_length=32, cache_dir=False)
    stack = enc.encode(TEXTS)
    np.testing.assert_allclose(SpecEmbedder(enc, PoolingSpec("mean", (0, 2), head=True)).encode(TEXTS),
                               head_pooling(stack, (0, 2), *enc.pooler_head()[:2]), atol=1e-6)
    np.testing.assert_array_equal(SpecEmbedder(enc, PoolingSpec("pooler")).encode(TEXTS), stack.pooler)
    with pytest.raises(ValueError, match="does not exist"):
        SpecEmbedder(enc, PoolingSpec("mean", (0, 9)))
    spec = PoolingSpec("cls", (0, 1), head=True)
    assert PoolingSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec


@pytest.mark.parametrize(("cache", "resume"), [(None, False), (False, True)], ids=["layer-cache", "journal"])
def test_an_interrupted_spec_run_resumes_from_the_layer_cache_or_the_journal(tmp_path, tiny_bert, home, monkeypatch,
                                                                             cache, resume):
    from layerwise.encoders.layer_encoder import LayerEncoder

    spec = PoolingSpec("mean", (1, 2))
    source, _ = _write(tmp_path, "txt", TEXTS)
    out = tmp_path / "out.npy"
    encoded: list[int] = []
    real = LayerEncoder._encode_unique

    def counting(self, texts):
        encoded.append(len(texts))
        if stop_after is not None and len(encoded) > stop_after:
            raise KeyboardInterrupt
        return real(self, texts)

    monkeypatch.setattr(LayerEncoder, "_encode_unique", counting)
    stop_after = 2
    with pytest.raises(KeyboardInterrupt):
        encode_corpus(source, out, _embedder(tiny_bert, spec, cache), chunk_size=10, resume=resume)
    assert not out.exists() and not list(tmp_path.glob(".out.npy.tmp-*"))  # nothing partial is left
    assert len(work_folders(out)) == int(resume)  # the journal, only when resuming through it
    assert encoded == [10, 10, 5]
    encoded.clear()
    stop_after = None
    encode_corpus(source, out, _embedder(tiny_bert, spec, cache), chunk_size=10, resume=resume)
    assert encoded == [5]  # the two finished chunks come from the layer cache or from the journal
    np.testing.assert_allclose(load_embeddings(out)[1], _reference(tiny_bert, TEXTS, spec), atol=1e-6)
    assert work_folders(out) == []


@pytest.fixture(scope="module")
def exported(tiny_bert, tmp_path_factory):
    """Two sentence-transformers exports of the tiny BERT: hidden states (0, 2) and (0, 1)."""
    from layerwise.methods.lc.export import SubsetExport, export_layer_subset

    root = tmp_path_factory.mktemp("exports")
    return [export_layer_subset(SubsetExport(model=str(tiny_bert), layers=layers, max_length=32), root / name)
            for name, layers in (("a", (0, 2)), ("b", (0, 1)))]


@pytest.fixture()
def folder_calls(monkeypatch):
    """Chunk sizes FolderEmbedder.encode was called with; ``calls.stop_after = k`` raises Ctrl-C on call k + 1."""
    from layerwise.encode import FolderEmbedder

    class Calls(list):
        stop_after = None

    calls, real = Calls(), FolderEmbedder.encode

    def counting(self, texts):
        calls.append(len(texts))
        if calls.stop_after is not None and len(calls) > calls.stop_after:
            raise KeyboardInterrupt
        return real(self, texts)

    monkeypatch.setattr(FolderEmbedder, "encode", counting)
    return calls


def _interrupted(source, out, folder, calls, stop_after, chunk_size=6):
    """Run ``encode_corpus`` with ``folder`` until Ctrl-C after ``stop_after`` chunks; returns its work folder."""
    from layerwise.encode import FolderEmbedder

    calls.stop_after = stop_after
    with pytest.raises(KeyboardInterrupt):
        encode_corpus(source, out, FolderEmbedder(folder), chunk_size=chunk_size)
    calls.stop_after = None
    calls.clear()
    (work,) = [f for f in work_folders(out) if (f / MANIFEST).is_file()]
    assert len(list(work.glob("chunk-*.npy"))) == stop_after
    return work


def _straight(source, out, folder, chunk_size=6):
    from layerwise.encode import FolderEmbedder

    return encode_corpus(source, out, FolderEmbedder(folder), chunk_size=chunk_size, resume=False)


@pytest.mark.parametrize("suffix", [".npy", ".parquet"])
def test_an_interrupted_folder_run_encodes_only_the_missing_chunks(tmp_path, exported, folder_calls, suffix):
    if suffix == ".parquet":
        pytest.importorskip("pyarrow")
    source, _ = _write(tmp_path, "jsonl", TEXTS)  # 25 texts: chunks of 6, 6, 6, 6, 1
    straight, out = tmp_path / f"straight{suffix}", tmp_path / f"out{suffix}"
    _straight(source, straight, exported[0])
    folder_calls.clear()
    _interrupted(source, out, exported[0], folder_calls, stop_after=2)
    assert not out.exists()
    from layerwise.encode import FolderEmbedder

    encode_corpus(source, out, FolderEmbedder(exported[0]), chunk_size=6)
    assert folder_calls == [6, 6, 1]  # chunks 2, 3 and 4 only
    assert work_folders(out) == []
    if suffix == ".npy":  # byte for byte what a straight run writes
        assert out.read_bytes() == straight.read_bytes()
        assert (tmp_path / "out.ids.txt").read_bytes() == (tmp_path / "straight.ids.txt").read_bytes()
    (ids, vectors), (want_ids, want) = load_embeddings(out), load_embeddings(straight)
    assert ids == want_ids
    np.testing.assert_array_equal(vectors, want)


@pytest.mark.parametrize("change", ["corpus", "chunk-size", "folder"])
def test_a_run_with_other_settings_reuses_no_chunk(tmp_path, exported, folder_calls, change):
    from layerwise.encode import FolderEmbedder

    source, _ = _write(tmp_path, "txt", TEXTS)
    out = tmp_path / "out.npy"
    stale = _interrupted(source, out, exported[0], folder_calls, stop_after=3)
    texts, chunk_size, folder = TEXTS, 6, exported[0]
    if change == "corpus":
        texts = [TEXTS[0] + " ?", *TEXTS[1:]]
        source, _ = _write(tmp_path, "txt", texts)
    elif change == "chunk-size":
        chunk_size = 10
    else:
        folder = exported[1]
    encode_corpus(source, out, FolderEmbedder(folder), chunk_size=chunk_size)
    assert sum(folder_calls) == 25  # every text encoded again
    assert not stale.exists() and work_folders(out) == []  # the stale folder carried the manifest: removed
    _straight(source, tmp_path / "straight.npy", folder, chunk_size)
    assert out.read_bytes() == (tmp_path / "straight.npy").read_bytes()


def test_a_damaged_chunk_is_encoded_again(tmp_path, exported, folder_calls):
    from layerwise.encode import FolderEmbedder

    source, _ = _write(tmp_path, "txt", TEXTS)
    out = tmp_path / "out.npy"
    work = _interrupted(source, out, exported[0], folder_calls, stop_after=4)
    chunk = (work / "chunk-000001.npy").read_bytes()
    (work / "chunk-000001.npy").write_bytes(chunk[:len(chunk) // 2])  # truncated
    np.save(work / "chunk-000002.npy", np.zeros((5, 32), dtype=np.float32))  # a wrong shape
    (work / "chunk-000003.ids.txt").write_text("x\n" * 6)  # other ids
    encode_corpus(source, out, FolderEmbedder(exported[0]), chunk_size=6)
    assert folder_calls == [6, 6, 6, 1]  # chunks 1, 2, 3 again, and 4; chunk 0 read back
    _straight(source, tmp_path / "straight.npy", exported[0])
    assert out.read_bytes() == (tmp_path / "straight.npy").read_bytes()


def test_files_the_tool_did_not_write_are_never_removed(tmp_path, exported, folder_calls):
    from layerwise.encode import FolderEmbedder

    source, _ = _write(tmp_path, "txt", TEXTS)
    out = tmp_path / "out.npy"
    (tmp_path / ".out.npy.partial-mine").mkdir()
    (tmp_path / ".out.npy.partial-mine" / "notes.txt").write_text("mine")
    (tmp_path / ".out.npy.partial-file").write_text("mine too")
    work = _interrupted(source, out, exported[0], folder_calls, stop_after=1)
    (work / "notes.txt").write_text("put here by hand")
    (work / ".chunk-000001.npy.k2x_9q.tmp").write_bytes(b"half")  # what a kill in an atomic write leaves: ours
    encode_corpus(source, out, FolderEmbedder(exported[0]), chunk_size=6)
    assert [p.name for p in work.iterdir()] == ["notes.txt"]  # our files gone, the foreign one kept
    assert (tmp_path / ".out.npy.partial-mine" / "notes.txt").read_text() == "mine"
    assert (tmp_path / ".out.npy.partial-file").read_text() == "mine too"
    with pytest.raises(UsageError, match="did not write it .* move it away"):  # our folder's name, not our folder
        encode_corpus(source, out, FolderEmbedder(exported[0]), chunk_size=6, overwrite=True)
    assert [p.name for p in work.iterdir()] == ["notes.txt"]


def test_encode_command_resumes_a_folder_run_and_no_cache_keeps_nothing(tmp_path, exported, folder_calls, home,
                                                                         capsys):
    from layerwise.cli import main

    source, _ = _write(tmp_path, "txt", TEXTS)
    args = ["encode", source.path, str(tmp_path / "v.npy"), "--folder", str(exported[0]), "--chunk-size", "10", "-q"]
    folder_calls.stop_after = 1
    assert main(args) == 130
    assert "continues where it stopped" in capsys.readouterr().err
    folder_calls.stop_after = None
    folder_calls.clear()
    assert main(args) == 0
    assert folder_calls == [10, 5] and work_folders(tmp_path / "v.npy") == []
    folder_calls.stop_after = 1
    assert main([*args, "--no-cache", "--overwrite"]) == 130
    assert work_folders(tmp_path / "v.npy") == []  # nothing kept: the next run starts over
    assert load_embeddings(tmp_path / "v.npy")[0] == [str(i) for i in range(25)]  # the finished output untouched


def test_the_corpus_checksum_covers_the_rows_read_not_the_file(tmp_path):
    from layerwise.encode.readers import check_corpus

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    jsonl, _ = _write(tmp_path / "a", "jsonl", TEXTS)
    csv_file, _ = _write(tmp_path / "b", "csv", TEXTS)
    assert check_corpus(jsonl) == check_corpus(csv_file)  # the same ids and texts
    row_numbers = CorpusSource(jsonl.path, column="body")  # the same texts, ids 0..24 instead of doc-0..doc-24
    assert check_corpus(jsonl).sha256 != check_corpus(row_numbers).sha256
    assert check_corpus(jsonl).n == 25


@pytest.mark.parametrize(("name", "content", "options", "message"), [
    ("c.jsonl", '{"text": "a man"}\n{oops\n', {}, "line 2 is not JSON"),
    ("c.jsonl", '{"body": "a man"}\n', {}, "has no field 'text'"),
    ("c.jsonl", '["a man"]\n', {}, "is a JSON list, not an object"),
    ("c.csv", "id,body\n1,a man\n", {}, "has no column 'text'"),
    ("c.txt", "a man\n\nthe dog\n", {}, "line 2: the text is empty"),
    ("c.docx", "a man\n", {}, "suffix '.docx'"),
    ("c.txt", "", {}, "holds no rows"),
    ("c.jsonl", '{"text": 3}\n', {}, "the text is int"),
])
def test_bad_files_fail_before_any_encoding_with_the_row_named(tmp_path, name, content, options, message):
    path = tmp_path / name
    path.write_text(content)

    class Never:
        dim = 4

        def encode(self, texts):
            raise AssertionError("nothing may be encoded from a bad file")

    with pytest.raises(UsageError, match=message):
        encode_corpus(CorpusSource(str(path), **options), tmp_path / "out.npy", Never())
    assert not (tmp_path / "out.npy").exists()


def test_outputs_are_never_replaced_unasked_and_parquet_without_pyarrow_says_how_to_install(tmp_path, monkeypatch):
    import sys

    path = tmp_path / "c.txt"
    path.write_text("a man\n")
    (tmp_path / "out.npy").write_bytes(b"mine")
    with pytest.raises(UsageError, match="exists and was not written by layerwise"):  # not ours: never replaced
        encode_corpus(CorpusSource(str(path)), tmp_path / "out.npy", object(), overwrite=True)
    assert (tmp_path / "out.npy").read_bytes() == b"mine"
    with pytest.raises(UsageError, match="must end in .npy or .parquet"):
        encode_corpus(CorpusSource(str(path)), tmp_path / "out.csv", object())
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)  # as if pyarrow were not installed
    with pytest.raises(UsageError, match=r"pip install 'layerwise\[parquet\]'"):
        encode_corpus(CorpusSource(str(path)), tmp_path / "out.parquet", object())


def test_encode_command_with_a_spec_and_with_an_exported_folder(tmp_path, tiny_bert, home, capsys):
    from layerwise.cli import main
    from layerwise.methods.lc.export import SubsetExport, export_layer_subset

    source, _ = _write(tmp_path, "txt", TEXTS)
    args = ["encode", source.path, str(tmp_path / "a.npy"), "--model", str(tiny_bert), "--layers", "0,2",
            "--max-length", "32", "--chunk-size", "8", "-q"]
    assert main(args) == 0
    assert "25 texts x 32 dims" in capsys.readouterr().out
    folder = export_layer_subset(SubsetExport(model=str(tiny_bert), layers=(0, 2), max_length=32), tmp_path / "exp")
    assert main(["encode", source.path, str(tmp_path / "b.npy"), "--folder", str(folder), "-q"]) == 0
    a, b = load_embeddings(tmp_path / "a.npy")[1], load_embeddings(tmp_path / "b.npy")[1]
    np.testing.assert_allclose(a, _reference(tiny_bert, TEXTS, PoolingSpec("mean", (0, 2))), atol=1e-6)
    np.testing.assert_allclose(b, a, atol=1e-5)
    assert main(args) == 2  # the output exists
    assert "pass --overwrite" in capsys.readouterr().err
    assert main(["encode", source.path, str(tmp_path / "c.npy"), "--folder", str(folder), "--layers", "1", "-q"]) == 2
    assert "holds its own pooling" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["encode", source.path, str(tmp_path / "c.npy"), "--layers", "0,x"])
    assert "not a comma-separated list" in capsys.readouterr().err


def test_export_command_for_a_subset_and_its_refusals(tmp_path, tiny_bert, home, capsys):
    from layerwise.cli import main

    assert main(["export", str(tiny_bert), str(tmp_path / "exp"), "--layers", "0,1", "--max-length", "32"]) == 0
    assert "trust_remote_code" not in capsys.readouterr().out
    assert json.loads((tmp_path / "exp" / "layerwise_export.json").read_text())["layers"] == [0, 1]
    assert main(["export", str(tiny_bert), str(tmp_path / "exp"), "--layers", "0,1"]) == 2
    assert "pass overwrite=True (--overwrite)" in capsys.readouterr().err
    assert main(["export", str(tiny_bert), str(tmp_path / "exp2")]) == 2
    assert "--layers" in capsys.readouterr().err
    assert main(["export", str(tmp_path / "exp"), str(tmp_path / "exp3"), "--layers", "1"]) == 0  # an export is a model


def test_export_of_a_folder_without_a_model_names_what_to_pass(tmp_path, tiny_bert, capsys):
    import shutil

    from layerwise.cli import main

    run = tmp_path / "run"  # a run's output folder: the model is a folder inside it (train's best/, tmft's runs/...)
    (run / "runs" / "mine").mkdir(parents=True)
    shutil.copytree(tiny_bert, run / "runs" / "mine" / "model")
    (run / "summary.json").write_text("{}")
    st = tmp_path / "st"  # a sentence-transformers folder: nothing to export
    st.mkdir()
    (st / "modules.json").write_text("[]")
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.txt").write_text("mine")
    for source, says in ((run, f"export one of the model folders in it: {run / 'runs' / 'mine' / 'model'}"),
                         (st, "is a sentence-transformers folder already"), (notes, "is not a model folder")):
        for extra in ([], ["--layers", "0,1"]):
            assert main(["export", str(source), str(tmp_path / "out"), *extra]) == 2
            assert says in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
