"""Tests for the STS loaders: small files written per test reproduce each quirk of the real data."""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from layerwise.data import (
    DATA_ENV_VAR,
    STS_DATASETS,
    STSData,
    available_sts,
    load_sts,
    resolve_data_dir,
)
from layerwise.evaluation.metrics import AGGREGATIONS

REAL_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
LOGGER = "layerwise.data.sts"


@pytest.fixture(autouse=True)
def _no_env_data_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests start without LAYERWISE_DATA so a developer's environment cannot change their outcome."""
    monkeypatch.delenv(DATA_ENV_VAR, raising=False)


def _write(path: Path, text: str, encoding: str = "utf-8") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode(encoding))
    return path


def _stsb_row(score: str, s1: str, s2: str, *sources: str) -> str:
    return "\t".join(["main-news", "MSRpar", "2012test", "0001", score, s1, s2, *sources]) + "\n"


@pytest.fixture
def stsb_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "sts" / "STSB"
    _write(
        folder / "sts-train.csv",
        _stsb_row("4.400", "Treasury\x12s plan is to help buyers.", "The Treasury wants to help buyers.")
        + _stsb_row("1.0", "A man plays.", "A woman sings."),
    )
    _write(folder / "sts-dev.csv", _stsb_row("2.5", "A dog runs.", "A cat runs."))
    _write(
        folder / "sts-test.csv",
        _stsb_row("5.000", 'He said "yes" to it.', 'He said "yes".')
        + _stsb_row("0.5", "Nine fields here.", "Two sources follow.", "src-a", "src-b")
        + _stsb_row("3.2", "A plane takes off.", "An air plane is taking off."),
    )
    return tmp_path


@pytest.fixture
def sts12_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "sts" / "STS12"
    _write(folder / "STS.input.MSRpar.txt", "A b.\tA c.\nD e.\tD f.\nG h.\tG i.\n")
    _write(folder / "STS.gs.MSRpar.txt", "4.0\n\n1.5\n")  # the middle pair has no gold score
    _write(folder / "STS.input.surprise.OnWN.txt", "x y\tx z\n")
    _write(folder / "STS.gs.surprise.OnWN.txt", "2.25\n")
    _write(folder / "STS.gs.SMT.txt", "3.0\n4.0\n")  # gold without input: skipped
    _write(folder / "STS.gs.ALL.txt", "4.0\n\n1.5\n2.25\n")  # not a subset: ignored
    return tmp_path


# ------------------------------------------------------------------------------------------------
# STS-B


def test_stsb_quirks_quote_nine_fields_control_char(stsb_dir: Path) -> None:
    test = load_sts("stsb", data_dir=stsb_dir)
    assert len(test) == 3
    assert test.split == "test"
    assert test.source == str(stsb_dir / "sts" / "STSB")
    assert test.sentences1[0] == 'He said "yes" to it.'  # no quoting: the quote stays
    assert test.sentences2[1] == "Two sources follow."  # 9-field row: sources dropped
    np.testing.assert_array_equal(test.scores, [5.0, 0.5, 3.2])
    assert test.scores.dtype == np.float64
    assert test.subset_names == ["test"]

    train = load_sts("stsb", data_dir=stsb_dir, split="train")
    assert len(train) == 2  # \x12 did not split the row
    assert train.sentences1[0] == "Treasury\x12s plan is to help buyers."


def test_stsb_all_concatenates_splits_in_order(stsb_dir: Path) -> None:
    data = load_sts("STS-B", data_dir=stsb_dir, split="ALL")
    assert data.split == "all"
    assert data.subsets.tolist() == ["train", "train", "dev", "test", "test", "test"]
    assert data.subset_names == ["dev", "test", "train"]


def test_data_dir_may_point_at_the_sts_folder(stsb_dir: Path) -> None:
    assert load_sts("stsb", data_dir=stsb_dir / "sts") == load_sts("stsb", data_dir=stsb_dir)


def test_stsb_bad_row_names_file_and_line(tmp_path: Path) -> None:
    _write(tmp_path / "sts" / "STSB" / "sts-test.csv", _stsb_row("1", "a", "b") + "too\tfew\tfields\n")
    with pytest.raises(ValueError, match=r"sts-test\.csv:2: expected 7 or 9"):
        load_sts("stsb", data_dir=tmp_path)


def test_builtin_stsb() -> None:
    test = load_sts("stsb")
    assert len(test) == 1379
    assert test.source == "builtin:stsb"
    assert test.split == "test"
    assert float(test.scores.min()) >= 0.0 and float(test.scores.max()) <= 5.0
    data = load_sts("stsbenchmark", split="all")
    assert Counter(data.subsets.tolist()) == {"train": 5749, "dev": 1500, "test": 1379}
    assert any("\x12" in s for s in data.sentences1)


def test_builtin_stsb_used_when_data_dir_has_no_stsb(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "sts").mkdir()
    with caplog.at_level(logging.INFO, logger=LOGGER):
        data = load_sts("stsb", data_dir=tmp_path, split="dev")
    assert data.source == "builtin:stsb" and len(data) == 1500
    assert "built-in" in caplog.text


# ------------------------------------------------------------------------------------------------
# STS12-16


def test_sts12_empty_gold_lines_gold_without_input_and_all_file(
    sts12_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger=LOGGER):
        data = load_sts("sts12", data_dir=sts12_dir)
    assert len(data) == 3
    assert data.split == "test"
    assert data.subsets.tolist() == ["MSRpar", "MSRpar", "surprise.OnWN"]
    assert data.sentences1 == ["A b.", "G h.", "x y"]
    assert data.sentences2 == ["A c.", "G i.", "x z"]
    np.testing.assert_array_equal(data.scores, [4.0, 1.5, 2.25])
    assert "STS.gs.SMT.txt" in caplog.text  # skipped with a log line
    assert "ALL" not in data.subset_names
    assert load_sts("STS2012", data_dir=sts12_dir, split="test") == data


def test_sts16_four_field_inputs(tmp_path: Path) -> None:
    folder = tmp_path / "sts" / "STS16"
    _write(
        folder / "STS2016.input.headlines.txt",
        "One.\tUno.\tsrc1\tsrc2\nTwo.\tDos.\tsrc1\tsrc2\nThree.\tTres.\tsrc1\tsrc2\n",
    )
    _write(folder / "STS2016.gs.headlines.txt", "\n3\n5\n")
    _write(folder / "STS2016.input.answer-answer.txt", "Q?\tA.\ts\ts\n")
    _write(folder / "STS2016.gs.answer-answer.txt", "0\n")
    data = load_sts("sts16", data_dir=tmp_path)
    assert data.subset_names == ["answer-answer", "headlines"]
    assert data.sentences1 == ["Q?", "Two.", "Three."]
    assert data.sentences2 == ["A.", "Dos.", "Tres."]
    np.testing.assert_array_equal(data.scores, [0.0, 3.0, 5.0])


def test_latin1_file_is_read(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    folder = tmp_path / "sts" / "STS13"
    _write(folder / "STS.input.headlines.txt", "Caf\u00e9 opens.\tThe caf\u00e9 opened.\n", encoding="latin-1")
    _write(folder / "STS.gs.headlines.txt", "4.2\n")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        data = load_sts("sts13", data_dir=tmp_path)
    assert data.sentences1 == ["Caf\u00e9 opens."]
    assert "latin-1" in caplog.text


def test_utf8_bom_and_crlf(tmp_path: Path) -> None:
    folder = tmp_path / "sts" / "STS15"
    _write(folder / "STS.input.images.txt", "\ufeffA \u00fcber.\tB.\r\nC.\tD.\r\n")
    _write(folder / "STS.gs.images.txt", "1\r\n2\r\n")
    data = load_sts("sts15", data_dir=tmp_path)
    assert data.sentences1 == ["A \u00fcber.", "C."]
    assert data.sentences2 == ["B.", "D."]


def test_gold_longer_than_input_is_an_error(tmp_path: Path) -> None:
    folder = tmp_path / "sts" / "STS14"
    _write(folder / "STS.input.news.txt", "a\tb\n")
    _write(folder / "STS.gs.news.txt", "1\n2\n")
    with pytest.raises(ValueError, match="align line by line"):
        load_sts("sts14", data_dir=tmp_path)


def test_folder_without_pairs_is_a_value_error(tmp_path: Path) -> None:
    folder = tmp_path / "sts" / "STS15"
    _write(folder / "00-readme.txt", "nothing here\n")
    with pytest.raises(ValueError, match="holds no STS15 pairs"):
        load_sts("sts15", data_dir=tmp_path)
    _write(folder / "STS.input.images.txt", "a\tb\n")
    _write(folder / "STS.gs.images.txt", "\n")  # every gold line empty
    with pytest.raises(ValueError, match="holds no STS15 pairs"):
        load_sts("sts15", data_dir=tmp_path)


# ------------------------------------------------------------------------------------------------
# SICK-R

_SICK_HEADER = (
    "pair_ID\tsentence_A\tsentence_B\tentailment_label\trelatedness_score\tentailment_AB\tentailment_BA\t"
    "sentence_A_original\tsentence_B_original\tsentence_A_dataset\tsentence_B_dataset\tSemEval_set"
)


def _sick_row(pair_id: int, a: str, b: str, score: str, semeval_set: str) -> str:
    return "\t".join(
        [str(pair_id), a, b, "NEUTRAL", score, "A_neutral_B", "B_neutral_A", a, b, "FLICKR", "FLICKR", semeval_set]
    )


@pytest.fixture
def sick_full_dir(tmp_path: Path) -> Path:
    rows = [
        _sick_row(1, "Kids play.", "Boys play.", "4.5", "TRAIN"),
        _sick_row(2, "A man cooks.", "A dog runs.", "1.2", "TRIAL"),
        _sick_row(3, "A cat sleeps.", "A cat is asleep.", "4.9", "TEST"),
        _sick_row(4, "It rains.", "The sun shines.", "2", "TEST"),
    ]
    _write(tmp_path / "sts" / "SICK" / "SICK.txt", "\r\n".join([_SICK_HEADER, *rows]) + "\r\n")
    return tmp_path


def test_sick_full_release_splits_by_semeval_set(
    sick_full_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        test = load_sts("sick-r", data_dir=sick_full_dir)
    assert test.sentences1 == ["A cat sleeps.", "It rains."]
    np.testing.assert_array_equal(test.scores, [4.9, 2.0])
    assert test.subset_names == ["TEST"]
    assert test.split == "SICK full release, SemEval_set TEST (2 pairs)"
    assert "not comparable" in caplog.text  # counts differ from SemEval-2014: say so
    assert len(load_sts("sickr", data_dir=sick_full_dir, split="train")) == 1
    assert load_sts("sickr", data_dir=sick_full_dir, split="trial").sentences1 == ["A man cooks."]
    every = load_sts("SICK", data_dir=sick_full_dir, split="all")
    assert every.subsets.tolist() == ["TRAIN", "TRIAL", "TEST", "TEST"]


def test_sick_semeval_files_preferred_and_columns_by_name(sick_full_dir: Path) -> None:
    folder = sick_full_dir / "sts" / "SICK" / "senteval_tokenized"
    header = "pair_ID\trelatedness_score\tsentence_B\tsentence_A\tentailment_judgment\n"  # shuffled on purpose
    _write(folder / "SICK_train.txt", header + "1\t4.5\tBoys play .\tKids play .\tNEUTRAL\n")
    _write(folder / "SICK_trial.txt", header + "2\t1.2\tA dog runs\tA man cooks\tNEUTRAL\n")
    _write(
        folder / "SICK_test_annotated.txt",
        header.replace("\n", "\r\n") + "3\t4.9\tB1\tA1\tNEUTRAL\r\n5\t3\tB2\tA2\tNEUTRAL\r\n6\t1\tB3\tA3\tNEUTRAL\r\n",
    )
    test = load_sts("sickr", data_dir=sick_full_dir)
    assert test.split == "SemEval-2014 test (3 pairs)"
    assert test.source == str(folder)
    assert test.sentences1 == ["A1", "A2", "A3"]
    assert test.sentences2 == ["B1", "B2", "B3"]
    np.testing.assert_array_equal(test.scores, [4.9, 3.0, 1.0])
    every = load_sts("sickr", data_dir=sick_full_dir, split="all")
    assert every.split == "SemEval-2014 train+trial+test (5 pairs)"
    assert every.subsets.tolist() == ["TRAIN", "TRIAL", "TEST", "TEST", "TEST"]


# ------------------------------------------------------------------------------------------------
# Names, splits, data directories


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [("STS-B", "stsb"), ("STSBenchmark", "stsb"), ("sts_b", "stsb"), ("Sick-R", "sickr"), ("STS12", "sts12")],
)
def test_name_aliases(sts12_dir: Path, sick_full_dir: Path, alias: str, canonical: str) -> None:
    assert load_sts(alias, data_dir=sts12_dir).name == canonical


def test_unknown_name_suggests_close_match() -> None:
    with pytest.raises(ValueError, match=r"Did you mean 'sts12'\?") as info:
        load_sts("sts_12x")
    for name in STS_DATASETS:
        assert name in str(info.value)
    with pytest.raises(ValueError, match="Valid names"):
        load_sts("wordsim")


@pytest.mark.parametrize(
    ("name", "split", "expected"),
    [("stsb", "validation", "'dev'"), ("sickr", "dev", "'trial'"), ("sts12", "train", "test-only")],
)
def test_unknown_split_lists_valid_splits(name: str, split: str, expected: str) -> None:
    with pytest.raises(ValueError, match="Valid splits") as info:
        load_sts(name, split=split)
    assert expected in str(info.value)


def test_missing_data_dir_errors(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(FileNotFoundError, match="nowhere") as info:
        resolve_data_dir(missing)
    assert "--data-dir" in str(info.value) and DATA_ENV_VAR in str(info.value)
    with pytest.raises(FileNotFoundError, match="nowhere"):
        load_sts("stsb", data_dir=missing)  # a wrong path is an error even for the built-in set

    with pytest.raises(FileNotFoundError, match=DATA_ENV_VAR) as info:
        load_sts("sts13")  # no data_dir, no env var
    assert "data_dir" in str(info.value)

    (tmp_path / "sts").mkdir()
    with pytest.raises(FileNotFoundError, match="looked for the folder") as info:
        load_sts("sts14", data_dir=tmp_path)
    assert str(tmp_path / "sts" / "STS14") in str(info.value)


def test_env_var_is_honoured(sts12_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert resolve_data_dir() is None
    monkeypatch.setenv(DATA_ENV_VAR, str(sts12_dir))
    assert resolve_data_dir() == sts12_dir
    assert len(load_sts("sts12")) == 3
    assert available_sts() == ["stsb", "sts12"]
    assert resolve_data_dir(tmp_path / "sts") == tmp_path / "sts"  # the argument wins over the variable

    monkeypatch.setenv(DATA_ENV_VAR, str(tmp_path / "gone"))
    with pytest.raises(FileNotFoundError, match=DATA_ENV_VAR):
        resolve_data_dir()


def test_available_sts(stsb_dir: Path, tmp_path: Path) -> None:
    assert available_sts() == ["stsb"]
    _write(tmp_path / "sts" / "STS16" / "STS2016.input.h.txt", "a\tb\tc\td\n")
    _write(tmp_path / "sts" / "STS16" / "STS2016.gs.h.txt", "1\n")
    _write(tmp_path / "sts" / "STS13" / "STS.gs.SMT.txt", "1\n")  # gold only: not loadable
    _write(tmp_path / "sts" / "SICK" / "SICK.txt", _SICK_HEADER + "\n")
    assert available_sts(stsb_dir) == ["stsb", "sts16", "sickr"]
    assert set(AGGREGATIONS) == {"all", "wmean", "mean"}


# ------------------------------------------------------------------------------------------------
# STSData


def test_take_and_validation() -> None:
    data = STSData(
        name="stsb",
        sentences1=["a", "b", "c"],
        sentences2=["x", "y", "z"],
        scores=[1, 2, 3],
        subsets=["s", "t", "s"],
        split="test",
        source="memory",
    )
    assert data.scores.dtype == np.float64
    picked = data.take([2, 0])
    assert picked.sentences1 == ["c", "a"] and picked.sentences2 == ["z", "x"]
    np.testing.assert_array_equal(picked.scores, [3.0, 1.0])
    assert picked.subsets.tolist() == ["s", "s"]
    assert (picked.name, picked.split, picked.source) == ("stsb", "test", "memory")
    assert data.take(np.array([True, False, True])) == data.take([0, 2])
    assert len(data.take([])) == 0
    assert data.subset_names == ["s", "t"]
    assert "n=3" in repr(data)
    with pytest.raises(IndexError):
        data.take([3])
    with pytest.raises(TypeError):
        data.take([0.5])
    with pytest.raises(ValueError, match="differ in length"):
        STSData("stsb", ["a"], ["b", "c"], np.zeros(1), np.array(["s"]), "test", "memory")


# ------------------------------------------------------------------------------------------------
# The real data folder (skipped where it is absent; these loads take well under a second)


@pytest.mark.skipif(not (REAL_DATA / "sts").is_dir(), reason=f"{REAL_DATA} is not present")
def test_real_data_counts() -> None:
    expected = {
        "sts12": {"MSRpar": 750, "MSRvid": 750, "SMTeuroparl": 459, "surprise.OnWN": 750, "surprise.SMTnews": 399},
        "sts13": {"FNWN": 189, "headlines": 750, "OnWN": 561},
        "sts15": {"answers-forums": 375, "answers-students": 750, "belief": 375, "headlines": 750, "images": 750},
        "sts16": {"answer-answer": 254, "headlines": 249, "plagiarism": 230, "postediting": 244,
                  "question-question": 209},
    }
    totals = {"sts12": 3108, "sts13": 1500, "sts15": 3000, "sts16": 1186}
    for name, per_subset in expected.items():
        data = load_sts(name, data_dir=REAL_DATA)
        assert Counter(data.subsets.tolist()) == per_subset, name
        assert len(data) == totals[name]
        assert data.scores.min() >= 0.0 and data.scores.max() <= 5.0

    stsb = load_sts("stsb", data_dir=REAL_DATA, split="all")
    assert Counter(stsb.subsets.tolist()) == {"train": 5749, "dev": 1500, "test": 1379}
    builtin = load_sts("stsb", split="all")  # the packaged copy is the same data
    assert builtin.sentences1 == stsb.sentences1 and builtin.sentences2 == stsb.sentences2
    np.testing.assert_array_equal(builtin.scores, stsb.scores)

    sick = load_sts("sickr", data_dir=REAL_DATA)
    assert len(sick) == 4927 and sick.split == "SemEval-2014 test (4927 pairs)"
    assert len(load_sts("sickr", data_dir=REAL_DATA, split="all")) == 9927

    present = available_sts(REAL_DATA)
    assert {"stsb", "sts12", "sts13", "sts15", "sts16", "sickr"} <= set(present)
    assert ("sts14" in present) == (REAL_DATA / "sts" / "STS14").is_dir()
