"""Word-similarity files with each format quirk, and the per-layer analysis against a slow twin."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from layerwise.data.wordsim import load_wordsim, read_wordsim_file


def test_tab_space_crlf_comments_and_duplicates(tmp_path):
    f = tmp_path / "mixed.txt"
    f.write_bytes(b"# a comment\r\nlove\tsex\t6.77\r\nmoney cash 9.15\r\n\r\nmoney\tcash\t9.15\r\ntiger  tiger   10.00\n")
    d = read_wordsim_file(f)
    assert d.words1 == ("love", "money", "money", "tiger") and d.words2 == ("sex", "cash", "cash", "tiger")
    np.testing.assert_array_equal(d.scores, [6.77, 9.15, 9.15, 10.0])
    assert d.name == "mixed"


def test_simverb_layout_takes_the_first_number_after_the_words(tmp_path):
    f = tmp_path / "SimVerb-3500.txt"
    f.write_text("take\tremove\tV\t6.81\tSYNONYMS\nshare\tkeep\tV\t0.83\tANTONYMS\n")
    d = load_wordsim(f)
    np.testing.assert_array_equal(d.scores, [6.81, 0.83])


@pytest.mark.parametrize("line", ["onlyoneword\n", "a b notanumber\n", "a b inf\n"])
def test_bad_lines_name_file_and_line(tmp_path, line):
    f = tmp_path / "bad.txt"
    f.write_text("a b 1.0\n" + line)
    with pytest.raises(ValueError, match=r"bad\.txt:2"):
        read_wordsim_file(f)


def test_unknown_name_and_missing_folder_are_clear(monkeypatch):
    monkeypatch.delenv("LAYERWISE_DATA", raising=False)
    with pytest.raises(ValueError, match="unknown word-similarity set"):
        load_wordsim("simverb")
    with pytest.raises(FileNotFoundError, match="needs the data folder"):
        load_wordsim("rg65")


def test_per_layer_scores_equal_a_word_by_word_forward_pass(tiny_bert, tmp_path):
    from transformers import AutoModel, AutoTokenizer

    from layerwise.encoders import LayerEncoder
    from layerwise.evaluation.metrics import cosine_rows, spearman
    from layerwise.methods.truncated.wordsim import per_layer_wordsim

    f = tmp_path / "pairs.txt"
    f.write_text("man woman 8.3\ndog cat 7.0\ncar bike 6.1\nguitar piano 5.5\nred blue 4.0\npark street 3.2\n"
                 "water food 1.0\nman guitar 0.5\n")
    data = read_wordsim_file(f)
    result = per_layer_wordsim(LayerEncoder(tiny_bert, cache_dir=False, show_progress=False), [data])

    tok = AutoTokenizer.from_pretrained(tiny_bert)
    model = AutoModel.from_pretrained(tiny_bert).eval()

    def vec(word):  # (K, d): mean over the word's tokens without [CLS]/[SEP], one word per forward pass
        enc = tok(word, return_tensors="pt")
        with torch.no_grad():
            hs = model(**enc, output_hidden_states=True).hidden_states
        return np.stack([h[0, 1:-1].mean(0).numpy() for h in hs])

    a = np.stack([vec(w) for w in data.words1])
    b = np.stack([vec(w) for w in data.words2])
    want = [100 * spearman(cosine_rows(a[:, k], b[:, k]), data.scores) for k in range(a.shape[1])]
    np.testing.assert_allclose(result.scores["pairs"], want, atol=1e-6)
    assert result.n_pairs == {"pairs": 8} and len(result.data["pairs"]["checksum"]) == 64


def test_wordsim_command_writes_json_markdown_and_plot(tiny_bert, tmp_path, capsys):
    from layerwise.cli import main

    f = tmp_path / "pairs.txt"
    f.write_text("man woman 8.3\ndog cat 7.0\ncar bike 6.1\nred blue 4.0\nwater food 1.0\n")
    assert main(["wordsim", "--model", str(tiny_bert), "--sets", str(f), "--output", str(tmp_path / "out"),
                 "-q"]) == 0
    out = capsys.readouterr().out
    assert "pairs" in out and "best" in out
    (found,) = (tmp_path / "out").glob(f"wordsim-{tiny_bert.name}-*.json")  # named by the model and the sets
    stem = found.with_suffix("")
    for ext in ("json", "md", "png"):
        assert stem.with_suffix(f".{ext}").is_file()
    f2 = tmp_path / "other.txt"
    f2.write_text("man woman 1.0\ndog cat 7.0\ncar bike 8.1\nred blue 4.0\nwater food 2.0\n")
    assert main(["wordsim", "--model", str(tiny_bert), "--sets", str(f2), "--output", str(tmp_path / "out"),
                 "-q"]) == 0  # other sets: their own files, the first run's kept
    assert len(list((tmp_path / "out").glob(f"wordsim-{tiny_bert.name}-*.json"))) == 2 and found.is_file()


def test_wordsim_command_reads_column_files_and_says_a_missing_one(tiny_bert, tmp_path, capsys):
    import json

    from layerwise.cli import main

    rows = [("man", "woman", 8.3), ("dog", "cat", 7.0), ("car", "bike", 6.1), ("red", "blue", 4.0),
            ("water", "food", 1.0)]
    (tmp_path / "pairs.txt").write_text("".join(f"{a} {b} {s}\n" for a, b, s in rows))
    (tmp_path / "pairs.csv").write_text("a,b,sim\n" + "".join(f"{a},{b},{s}\n" for a, b, s in rows))
    got = {}
    for name, extra in (("pairs.txt", []), ("pairs.csv", ["--word1-column", "a", "--word2-column", "b",
                                                           "--score-column", "sim"])):
        out = tmp_path / name.replace(".", "-")
        assert main(["wordsim", "--model", str(tiny_bert), "--sets", str(tmp_path / name), *extra, "--output",
                     str(out), "-q"]) == 0
        (found,) = out.glob("wordsim-*.json")
        got[name] = json.loads(found.read_text())["scores"]["pairs"]
    assert got["pairs.csv"] == got["pairs.txt"]  # the same pairs, read by the column reader of tmft --word-pairs
    capsys.readouterr()
    assert main(["wordsim", "--model", str(tiny_bert), "--sets", str(tmp_path / "nope.txt"), "-q"]) == 2
    assert "nope.txt: no such file" in capsys.readouterr().err
