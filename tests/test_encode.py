"""`layerwise encode`: every input format, .npy and Parquet output, resume through the layer cache, bad files."""

import csv
import json

import numpy as np
import pytest

from conftest import SENTENCES
from layerwise.encode import CorpusSource, PoolingSpec, SpecEmbedder, encode_corpus, load_embeddings
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


def test_an_interrupted_run_resumes_from_the_layer_cache(tmp_path, tiny_bert, home, monkeypatch):
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
        encode_corpus(source, out, _embedder(tiny_bert, spec), chunk_size=10)
    assert not out.exists() and not list(tmp_path.glob(".out.npy.tmp-*"))  # nothing partial is left
    assert encoded == [10, 10, 5]
    encoded.clear()
    stop_after = None
    encode_corpus(source, out, _embedder(tiny_bert, spec), chunk_size=10)
    assert encoded == [5]  # the two finished chunks come from the cache
    np.testing.assert_allclose(load_embeddings(out)[1], _reference(tiny_bert, TEXTS, spec), atol=1e-6)


@pytest.mark.parametrize(("name", "content", "options", "message"), [
    ("c.jsonl", '{"text": "a man"}\n{oops\n', {}, "line 2 is not JSON"),
    ("c.jsonl", '{"body": "a man"}\n', {}, "has no field 'text'"),
    ("c.jsonl", '["a man"]\n', {}, "is a JSON list, not an object"),
    ("c.csv", "id,body\n1,a man\n", {}, "has no column 'text'"),
    ("c.txt", "a man\n\nthe dog\n", {}, "row 1 .* the text is empty"),
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
    with pytest.raises(UsageError, match="exists: pass --overwrite"):
        encode_corpus(CorpusSource(str(path)), tmp_path / "out.npy", object())
    assert (tmp_path / "out.npy").read_bytes() == b"mine"
    with pytest.raises(UsageError, match="must end in .npy or .parquet"):
        encode_corpus(CorpusSource(str(path)), tmp_path / "out.csv", object())
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)  # as if pyarrow were not installed
    with pytest.raises(UsageError, match=r"pip install 'layerwise\[parquet\]'"):
        encode_corpus(CorpusSource(str(path)), tmp_path / "out.parquet", object())


def test_encode_command_with_a_spec_and_with_an_exported_folder(tmp_path, tiny_bert, home, capsys):
    from layerwise.cli import main
    from layerwise.export import SubsetExport, export_layer_subset

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
