"""The readers of the user's own files (layerwise.data.readers), their CLI helpers, and their errors."""

import argparse
import csv
import json
import re

import numpy as np
import pytest

from layerwise.cli import _files
from layerwise.data import (
    BeirData,
    DataFileError,
    STSData,
    TransferData,
    TripletData,
    WordSimData,
    data_label,
    normalize_scores,
    read_beir,
    read_corpus,
    read_labeled,
    read_pairs,
    read_triplets,
    read_word_pairs,
)
from layerwise.errors import UsageError

FORMATS = ["csv", "tsv", "jsonl", "parquet"]


def write(path, columns: dict, fmt: str | None = None):
    """A table of ``columns`` (name -> values) at ``path`` in the format of its suffix; returns the path."""
    fmt = fmt or path.suffix[1:]
    names = list(columns)
    rows = list(zip(*columns.values()))
    if fmt in ("csv", "tsv"):
        with open(path, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh, delimiter="\t" if fmt == "tsv" else ",")
            w.writerow(names)
            w.writerows(rows)
    elif fmt == "jsonl":
        path.write_text("".join(json.dumps(dict(zip(names, r))) + "\n" for r in rows), encoding="utf-8")
    else:
        pa = pytest.importorskip("pyarrow")
        import pyarrow.parquet as pq

        pq.write_table(pa.table(columns), path)
    return path


S1 = ["A man plays a guitar.", 'She said "hi, there"', "Dogs, running\tfast", "It rains.", "x"]
S2 = ["A person plays music.", "Nobody spoke.", "A dog runs.", "The sun shines.", "y"]
GOLD = [9.5, 1.0, 7.25, 2.0, 5.0]  # a 1-10 scale: read as it is, not assumed 0-5


@pytest.mark.parametrize("fmt", FORMATS)
def test_pairs_in_every_format_with_other_column_names(tmp_path, fmt):
    path = write(tmp_path / f"my pairs (v2).{fmt}", {"premise": S1, "hypothesis": S2, "gold": GOLD})
    data = read_pairs(path, sentence1="premise", sentence2="hypothesis", score="gold")
    assert isinstance(data, STSData) and len(data) == 5
    assert data.sentences1 == S1 and data.sentences2 == S2  # quotes, commas and tabs kept as in the file
    np.testing.assert_array_equal(data.scores, GOLD)
    assert data.scores.dtype == np.float64
    assert data.name == "my_pairs_v2" and data.split == "file" and data.source == str(path)
    assert data.subset_names == ["my_pairs_v2"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_labelled_texts_and_pairs_in_every_format(tmp_path, fmt):
    texts = ["good film", "bad film", "fine film", "great", "awful"]
    path = write(tmp_path / f"reviews.{fmt}", {"review": texts, "stars": ["pos", "neg", "pos", "pos", "neg"],
                                               "other": S2})
    data = read_labeled(path, text="review", label="stars")
    assert isinstance(data, TransferData) and not data.is_pair
    assert data.sentences == texts and data.label_names == ["neg", "pos"]  # sorted strings
    np.testing.assert_array_equal(data.labels, [1, 0, 1, 1, 0])
    assert data.name == "reviews" and set(data.splits.tolist()) == {"file"}
    pairs = read_labeled(path, text="review", label="stars", text2="other")
    assert pairs.is_pair and pairs.sentences2 == S2


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_integer_labels_are_ordered_numerically(tmp_path, fmt):
    path = write(tmp_path / f"t.{fmt}", {"text": ["a", "b", "c", "d"], "label": [10, 2, 0, 2]})
    data = read_labeled(path)
    assert data.label_names == ["0", "2", "10"]  # not "0" < "10" < "2"
    np.testing.assert_array_equal(data.labels, [2, 1, 0, 1])


@pytest.mark.parametrize("fmt", FORMATS)
def test_triplets_pairs_and_an_explicit_negative_column(tmp_path, fmt):
    cols = {"q": ["a", "b"], "pos": ["a+", "b+"], "neg": ["a-", "b-"]}
    path = write(tmp_path / f"tr.{fmt}", cols)
    data = read_triplets(path, anchor="q", positive="pos", negative="neg")
    assert isinstance(data, TripletData) and len(data) == 2 and data.negatives == ["a-", "b-"]
    assert data.anchors == ["a", "b"] and data.positives == ["a+", "b+"] and data.name == "tr"
    assert read_triplets(path, anchor="q", positive="pos").negatives is None  # default name absent: pairs
    assert read_triplets(path, anchor="q", positive="pos", negative=None).negatives is None  # pairs asked for
    with pytest.raises(DataFileError, match="no (column|field) 'hard'.* pass negative=<column>"):
        read_triplets(path, anchor="q", positive="pos", negative="hard")  # named explicitly: must be there
    path2 = write(tmp_path / f"tr2.{fmt}", {"anchor": ["a"], "positive": ["a+"], "negative": ["a-"]})
    assert read_triplets(path2).negatives == ["a-"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_word_pairs_in_every_format(tmp_path, fmt):
    path = write(tmp_path / f"words.{fmt}", {"w1": ["cat", "car"], "w2": ["dog", "bus"], "sim": [7.5, 3.0]})
    data = read_word_pairs(path, word1="w1", word2="w2", score="sim")
    assert isinstance(data, WordSimData) and data.words1 == ("cat", "car") and data.words2 == ("dog", "bus")
    np.testing.assert_array_equal(data.scores, [7.5, 3.0])
    assert data.name == "words" and data.source == str(path)


@pytest.mark.parametrize("fmt", ["txt", *FORMATS])
def test_corpora_in_every_format(tmp_path, fmt):
    texts = ["first text", "second, with a comma", 'third "quoted"']
    if fmt == "txt":
        path = tmp_path / "c.txt"
        path.write_text("\n".join(texts) + "\n")
        assert read_corpus(path) == texts
        with pytest.raises(DataFileError, match=r"\.txt corpus.* column cannot apply"):
            read_corpus(path, column="body")
        with pytest.raises(DataFileError, match=r"\.txt corpus.* id_column cannot apply"):
            read_corpus(path, id_column="id")
        return
    path = write(tmp_path / f"c.{fmt}", {"body": texts, "key": ["k1", "k2", "k3"]})
    assert read_corpus(path, column="body") == texts
    assert read_corpus(path, column="body", id_column="key") == texts
    dup = write(tmp_path / f"d.{fmt}", {"text": texts, "id": ["k1", "k2", "k1"]})
    with pytest.raises(DataFileError, match="the id 'k1' appears on row 1 and row 3.* pass id_column=<column>"):
        read_corpus(dup, id_column="id")


def test_beir_folder(tmp_path):
    root = tmp_path / "my beir"
    (root / "qrels").mkdir(parents=True)
    docs = [{"_id": "d1", "title": "Paris", "text": "The capital of France."}, {"_id": "d2", "title": "", "text": "Rome."},
            {"_id": "d3", "text": "No title at all."}]
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (root / "queries.jsonl").write_text('{"_id": "q1", "text": "capital of France?"}\n{"_id": "q2", "text": "unjudged"}\n')
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td3\t0\n")
    data = read_beir(root)
    assert isinstance(data, BeirData) and data.name == "my_beir" and data.split == "test"
    assert data.corpus == {"d1": "Paris The capital of France.", "d2": "Rome.", "d3": "No title at all."}
    assert data.queries == {"q1": "capital of France?"}  # only judged queries, as BEIR's loader keeps
    assert data.qrels == {"q1": {"d1": 1, "d3": 0}}
    with pytest.raises(DataFileError, match=r"no qrels/dev.tsv; pass split= one of test"):
        read_beir(root, split="dev")
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td9\t1\n")
    with pytest.raises(DataFileError, match="line 2: corpus-id 'd9' is not in corpus.jsonl"):
        read_beir(root)
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\thigh\n")
    with pytest.raises(DataFileError, match="line 2: the score 'high' is not an integer"):
        read_beir(root)
    with pytest.raises(DataFileError, match="does not exist"):
        read_beir(tmp_path / "nowhere")


def test_data_label_is_a_plain_name(tmp_path):
    assert data_label("runs/My Pairs (2024).tsv") == "My_Pairs_2024"
    assert data_label("a/b/stsb-dev.v2.csv") == "stsb-dev.v2"
    assert data_label("((( ))).csv") == "data"
    (tmp_path / "folder.x").mkdir()
    assert data_label(tmp_path / "folder.x") == "folder.x"  # a folder keeps its whole name


def test_normalize_scores_reads_the_scale():
    np.testing.assert_allclose(normalize_scores([1, 3, 5]), [0, 0.5, 1])  # observed min and max
    np.testing.assert_allclose(normalize_scores([1, 3, 5], scale=(0, 10)), [0.1, 0.3, 0.5])
    with pytest.raises(UsageError, match=r"score 11.0 at index 1 lies outside scale=\(0, 10\)"):
        normalize_scores([1, 11], scale=(0, 10))
    with pytest.raises(UsageError, match="every score is 2.0.* pass scale="):
        normalize_scores([2, 2])
    with pytest.raises(UsageError, match="finite lo < hi"):
        normalize_scores([1, 2], scale=(5, 1))
    with pytest.raises(UsageError, match="must be finite"):
        normalize_scores([1, float("nan")])


# ----------------------------------------------------------------------------------------------
# errors: one line, the file, the line or row, what is wrong, the fix with the Python argument


def _pairs_csv(tmp_path, body: str, name="p.csv", encoding="utf-8"):
    path = tmp_path / name
    path.write_bytes(body.encode(encoding) if isinstance(body, str) else body)
    return path


HEADER = "sentence1,sentence2,score\n"


@pytest.mark.parametrize(("body", "kwargs", "message"), [
    ("", {}, "is empty"),
    (HEADER, {}, "holds a header but no rows"),
    ("sentence1,sentence2,gold\na,b,1\nc,d,2\n", {}, r"has no column 'score' \(columns: sentence1, sentence2, gold\); "
                                                    "pass score=<column>"),
    ("sentence1,score,score\na,1,2\n", {}, "column 'score' 2 times in its header"),
    (HEADER + "a,b,1\nc,d,high\n", {}, "line 3: the score 'high' is not a number.* pass score=<column>"),
    (HEADER + "a,b,1\nc,d,nan\n", {}, "line 3: the score 'nan' is not finite"),
    (HEADER + "a,b,inf\nc,d,2\n", {}, "line 2: the score 'inf' is not finite"),
    (HEADER + "a,b,3\nc,d,3\n", {}, "every score is 3, so a rank correlation with them is undefined"),
    (HEADER + "a,b,1\n ,d,2\n", {}, "line 3: the sentence1 text is empty"),
    (HEADER + "a,b,1\nc,d,2\n", {"min_rows": 5}, "holds 2 rows of sentence pairs but at least 5 are needed"),
    ("sentence1;sentence2;score\na;b;1\n", {}, "header is one column, 'sentence1;sentence2;score', so it is probably "
                                                 "separated by ';'"),
    (HEADER + "a,b,1\nc,d\n", {}, "line 3 has 2 fields but the header has 3; quote fields that hold a comma"),
    (HEADER.encode() + b"a,b,1\nc\xe9,d,2\n", {}, r"line 3 is not valid UTF-8 \(byte b'\\xe9' at column 2\)"),
])
def test_bad_pairs_files_get_one_line_naming_the_file_and_the_fix(tmp_path, body, kwargs, message):
    path = _pairs_csv(tmp_path, body)
    with pytest.raises(DataFileError, match=message) as err:
        read_pairs(path, **kwargs)
    text = str(err.value)
    assert "\n" not in text and str(path) in text and "--" not in text  # Python callers get no CLI flag


@pytest.mark.parametrize(("name", "content", "reader", "message"), [
    ("missing.csv", None, read_pairs, "does not exist; pass the path of an existing file"),
    ("pairs.xlsx", "x", read_pairs, r"suffix '.xlsx'; layerwise reads .csv, .tsv, .jsonl, .parquet"),
    ("c.docx", "x", read_corpus, r"suffix '.docx'; layerwise reads .txt, .csv"),
    ("p.jsonl", '{"sentence1": "a", "sentence2": "b", "score": 1}\n{"sentence1": "a", "score": 2}\n', read_pairs,
     r"line 2 has no field 'sentence2' \(fields: sentence1, score\); pass sentence2=<column>"),
    ("p.jsonl", '{"sentence1": "a", "sentence1": "c", "sentence2": "b", "score": 1}\n', read_pairs,
     "line 1 has the field 'sentence1' twice"),
    ("p.jsonl", '{"sentence1": "a", "sentence2": "b", "score": true}\n', read_pairs, "the score True is not a number"),
    ("p.jsonl", '{"sentence1": "a", "sentence2": null, "score": 1}\n', read_pairs, "the sentence2 text is missing"),
    ("p.jsonl", '{"sentence1": "a", "sentence2": "b", "score": 1}\n{oops\n', read_pairs, "line 2 is not JSON"),
    ("l.tsv", "text\tlabel\na\t1.5\n", read_labeled, None),  # a float label in TSV is a string label: fine
    ("l.jsonl", '{"text": "a", "label": 1.5}\n', read_labeled, "the label 1.5 is neither a string nor an integer"),
    ("l.csv", "text,label\na,\n", read_labeled, "line 2: the label is empty"),
    ("w.csv", "word1,word2,score\ncat,dog,x\n", read_word_pairs, "line 2: the score 'x' is not a number"),
    ("t.csv", "anchor,positive\na,\n", read_triplets, "line 2: the positive text is empty"),
])
def test_each_reader_and_format_names_the_problem(tmp_path, name, content, reader, message):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    if message is None:
        reader(path)
        return
    with pytest.raises(DataFileError, match=message):
        reader(path)


def test_a_folder_is_not_a_file(tmp_path):
    (tmp_path / "d.csv").mkdir()
    with pytest.raises(DataFileError, match="is not a file"):
        read_pairs(tmp_path / "d.csv")


def test_bom_crlf_and_quoting_are_read(tmp_path):
    body = '\ufeffsentence1,sentence2,score\r\n"a, b","multi\r\nline",1\r\nc,"say ""hi""",2\r\n'
    data = read_pairs(_pairs_csv(tmp_path, body))
    assert data.sentences1 == ["a, b", "c"] and data.sentences2 == ["multi\r\nline", 'say "hi"']
    tsv = _pairs_csv(tmp_path, "\ufeffsentence1\tsentence2\tscore\r\na, b\tc\t0.5\r\nd\te\t1\r\n", name="p.tsv")
    assert read_pairs(tsv).sentences1 == ["a, b", "d"]
    jsonl = tmp_path / "p.jsonl"
    jsonl.write_bytes(b'\xef\xbb\xbf{"sentence1": "a", "sentence2": "b", "score": 1}\r\n\r\n'
                      b'{"sentence1": "c", "sentence2": "d", "score": "2"}\r\n')
    np.testing.assert_array_equal(read_pairs(jsonl).scores, [1, 2])  # blank lines skipped, "2" read as a number


def test_parquet_errors_name_the_row(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    path = tmp_path / "p.parquet"
    pq.write_table(pa.table({"sentence1": ["a", "b"], "sentence2": ["c", ""], "score": [1.0, 2.0]}), path)
    with pytest.raises(DataFileError, match="row 2: the sentence2 text is empty"):
        read_pairs(path)
    pq.write_table(pa.Table.from_arrays([pa.array(["a"]), pa.array(["b"])], names=["text", "text"]), path)
    with pytest.raises(DataFileError, match="column 'text' 2 times"):
        read_labeled(path)
    path.write_bytes(b"not parquet")
    with pytest.raises(DataFileError, match="cannot be read as Parquet"):
        read_pairs(path)


# ----------------------------------------------------------------------------------------------
# the CLI helpers


def _parser():
    p = argparse.ArgumentParser()
    for add in (_files.add_pair_columns, _files.add_label_columns, _files.add_corpus_columns,
                _files.add_word_columns, _files.add_triplet_columns):
        add(p)  # every helper on one parser: --text-column and --score-column are shared, not added twice
    return p


def test_cli_helpers_combine_and_read_with_the_flags(tmp_path):
    p = _parser()
    pairs = write(tmp_path / "p.csv", {"a": S1, "b": S2, "g": GOLD})
    args = p.parse_args(["--sentence1-column", "a", "--sentence2-column", "b", "--score-column", "g"])
    assert _files.pairs_from_args(args, pairs).sentences1 == S1
    lab = write(tmp_path / "l.tsv", {"t": ["x", "y"], "y": ["1", "0"], "u": ["p", "q"]})
    args = p.parse_args(["--text-column", "t", "--label-column", "y", "--text2-column", "u"])
    assert _files.labeled_from_args(args, lab).sentences2 == ["p", "q"]
    assert _files.corpus_from_args(args, lab) == ["x", "y"]
    words = write(tmp_path / "w.jsonl", {"l": ["cat", "a"], "r": ["dog", "b"], "s": [1, 2]})
    args = p.parse_args(["--word1-column", "l", "--word2-column", "r", "--score-column", "s"])
    assert _files.word_pairs_from_args(args, words).words2 == ("dog", "b")
    tri = write(tmp_path / "t.csv", {"anchor": ["a"], "positive": ["b"], "negative": ["c"]})
    assert _files.triplets_from_args(p.parse_args([]), tri).negatives == ["c"]
    assert _files.triplets_from_args(p.parse_args(["--negative-column", ""]), tri).negatives is None


@pytest.mark.parametrize(("flags", "reader", "message"), [
    (["--score-column", "gold"], "pairs", r"has no column 'gold' .*; pass --score-column COLUMN with one of them"),
    (["--text2-column", "other"], "labeled", r"has no column 'other' .*; pass --text2-column COLUMN"),
    (["--negative-column", "hard"], "triplets", r"has no column 'hard' .*; pass --negative-column COLUMN"),
    (["--text-column", "body"], "corpus_txt", r"\.txt corpus.* so --text-column cannot apply"),
    (["--word1-column", "w"], "word_pairs", r"has no column 'w' .*; pass --word1-column COLUMN"),
])
def test_cli_helper_errors_name_the_flag(tmp_path, flags, reader, message):
    path = write(tmp_path / "x.csv", {"sentence1": ["a", "b"], "sentence2": ["c", "d"], "score": [1, 2],
                                      "text": ["a", "b"], "label": ["p", "q"], "anchor": ["a", "b"],
                                      "positive": ["c", "d"], "word1": ["a", "b"], "word2": ["c", "d"]})
    if reader == "corpus_txt":
        path = tmp_path / "x.txt"
        path.write_text("a\nb\n")
        reader = "corpus"
    with pytest.raises(DataFileError, match=message) as err:
        getattr(_files, f"{reader}_from_args")(_parser().parse_args(flags), path)
    assert "=<column>" not in str(err.value) and "column=" not in str(err.value)


# ----------------------------------------------------------------------------------------------
# layerwise encode through the shared reader: one line, exit 2, before any model loads


@pytest.mark.parametrize(("name", "content", "flags", "message"), [
    ("c.csv", "id,body\n1,a man\n", [], r"has no column 'text' \(columns: id, body\); pass --column COLUMN"),
    ("c.jsonl", '{"text": "a", "id": "x"}\n{"text": "b", "id": null}\n', ["--id-column", "id"],
     "line 2: the id is missing; give every row an id .* pass --id-column COLUMN"),
    ("c.txt", "a man\nthe dog\n", ["--id-column", "id"], r"\.txt corpus.* so --id-column cannot apply"),
    ("c.txt", "a man\nthe dog\n", ["--column", "text"], r"\.txt corpus.* so --column cannot apply"),
    ("c.csv", "", [], "is empty"),
])
def test_encode_refuses_a_bad_corpus_in_one_line_with_exit_2(tmp_path, capsys, env, tiny_bert, monkeypatch, name,
                                                              content, flags, message):
    from layerwise.cli import main
    from layerwise.encoders import layer_encoder

    def never(*args, **kwargs):
        raise AssertionError("no model may load for a bad file")

    monkeypatch.setattr(layer_encoder.LayerEncoder, "__init__", never)
    path = tmp_path / name
    path.write_text(content)
    code = main(["encode", str(path), str(tmp_path / "out.npy"), "--model", str(tiny_bert), *flags])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("layerwise: error: ") and err.count("\n") == 1
    assert re.search(message, err), err
    assert not (tmp_path / "out.npy").exists()


def test_a_null_id_is_refused_not_numbered(tmp_path):
    from layerwise.encode import CorpusSource, scan_corpus

    path = write(tmp_path / "c.jsonl", {"text": ["a", "b"], "id": ["1", None]})
    with pytest.raises(DataFileError, match="line 2: the id is missing.* pass id_column=<column>"):
        scan_corpus(CorpusSource(str(path), id_column="id"))


def test_text_corpora_decode_line_by_line(tmp_path):
    path = tmp_path / "c.txt"
    path.write_bytes(b"\xef\xbb\xbffirst\r\nsecond\r\n")
    assert read_corpus(path) == ["first", "second"]  # BOM and CRLF dropped
    path.write_bytes("first\nsecond\nthird caf\u00e9\n".encode("latin-1"))
    with pytest.raises(DataFileError, match=r"c.txt line 3 is not valid UTF-8 .* save the file as UTF-8"):
        read_corpus(path)
    jsonl = tmp_path / "c.jsonl"
    jsonl.write_bytes(b'{"text": "a"}\n{"text": "\xff"}\n')
    with pytest.raises(DataFileError, match="c.jsonl line 2 is not valid UTF-8"):
        read_corpus(jsonl)


@pytest.mark.parametrize("fmt", ["csv", "tsv"])
def test_streaming_csv_rows_match_the_csv_module_on_the_whole_file(tmp_path, fmt):
    """The slow obvious twin: csv.DictReader over the whole decoded text gives the same rows."""
    import random

    rng = random.Random(7)
    alphabet = ['a', 'b', ' ', ',', '\t', '"', "'", '\n', '\r\n', 'é', '語', '🙂', '\\']
    texts = ["x" + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(60)]
    path = write(tmp_path / f"t.{fmt}", {"text": texts, "label": [str(i % 3) for i in range(60)]})
    with open(path, newline="", encoding="utf-8") as fh:
        reference = [row["text"] for row in csv.DictReader(fh, delimiter="\t" if fmt == "tsv" else ",")]
    assert read_labeled(path).sentences == reference == texts
