"""TMFT's data-set option (STS-B, SICK-R; any pairs file is --train) and SimVerb-3500 beside the word-similarity
sets."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import write_stsb, write_unlabeled
from layerwise.cli import main
from layerwise.data.wordsim import available_wordsim, load_wordsim
from layerwise.methods.truncated.config import TMFTConfig
from layerwise.methods.truncated.run import sts_pairs

SICK_HEADER = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
SENTENCES = ["a man plays guitar .", "a woman plays piano .", "the dog runs .", "a cat sits .",
             "two people sit on the street .", "a child eats food .", "a red car .", "a blue bike ."]


def _write_sick(folder, n=16):
    sick = folder / "sts" / "SICK" / "senteval_tokenized"
    sick.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name, rows in (("SICK_train.txt", n), ("SICK_trial.txt", 8), ("SICK_test_annotated.txt", 8)):
        lines = [f"{i}\t{SENTENCES[i % 8]}\t{SENTENCES[(i * 3 + 1) % 8]}\t{rng.uniform(1, 5):.2f}\tNEUTRAL"
                 for i in range(rows)]
        (sick / name).write_text(SICK_HEADER + "\n".join(lines) + "\n")
    return folder


def test_sickr_pairs_map_the_1_to_5_scale_onto_0_to_1(tmp_path):
    from layerwise.data import load_sts

    data = _write_sick(write_stsb(tmp_path / "data", n_pairs=12))
    train, dev, test = sts_pairs("sickr", data, limit=10)
    gold = load_sts("sickr", data_dir=data, split="train").scores[:10]
    np.testing.assert_allclose(train.targets, (np.asarray(gold) - 1) / 4)
    assert len(train.targets) == 10 and dev.name == "sickr-trial" and len(test) == 8
    tr_b, _, _ = sts_pairs("stsb", data)
    np.testing.assert_allclose(tr_b.targets, np.asarray(load_sts("stsb", data_dir=data, split="train").scores) / 5)
    with pytest.raises(ValueError, match="dataset='sts12'"):
        sts_pairs("sts12", data)


def test_the_dataset_setting_keeps_stsb_keys_and_names():
    plain, sick = TMFTConfig(), TMFTConfig(dataset="sickr")
    assert "dataset" not in plain.to_dict() and sick.to_dict()["dataset"] == "sickr"
    assert TMFTConfig.from_dict(sick.to_dict()) == sick and TMFTConfig.from_dict(plain.to_dict()) == plain
    assert sick.name == plain.name + "-sickr"
    with pytest.raises(ValueError, match="dataset"):
        TMFTConfig(dataset="sts12")


def test_cli_tmft_on_sickr(tiny_bert, tmp_path, capsys):
    import json

    data = _write_sick(write_unlabeled(write_stsb(tmp_path / "data", n_pairs=12)))
    out = tmp_path / "out"
    args = ["tmft", "--model", str(tiny_bert), "--layers", "1", "--dataset", "sickr", "--epochs", "1",
            "--batch-size", "8", "--max-length", "16", "--data-dir", str(data), "--output", str(out), "-q"]
    assert main(args) == 0
    run = json.loads((out / "tmft.json").read_text())["runs"][0]
    assert run["config"]["dataset"] == "sickr" and set(run["data"]) == {"sickr"}
    assert "on sickr" in (out / "tmft.md").read_text()
    capsys.readouterr()
    assert main(["tmft", "--model", str(tiny_bert), "--layers", "1", "--dataset", "sickr", "--train",
                 str(tmp_path / "x.csv"), "--data-dir", str(data), "--output", str(out), "-q"]) == 2
    assert "--dataset" in capsys.readouterr().err


def test_simverb_is_a_named_set_read_where_the_data_folder_holds_it(tmp_path):
    folder = tmp_path / "data" / "wordsim" / "simverb"
    (tmp_path / "data" / "wordsim").mkdir(parents=True)
    assert "simverb3500" not in available_wordsim(tmp_path / "data")
    with pytest.raises(FileNotFoundError, match="simverb3500.*SimVerb-3500.txt does not exist"):
        load_wordsim("simverb3500", tmp_path / "data")
    folder.mkdir(parents=True)
    (folder / "SimVerb-3500.txt").write_bytes(b"take\tremove\tV\t6.81\tSYNONYMS\r\nwalk\tdrive\tV\t3.32\tCOHYPONYMS\r\n")
    d = load_wordsim("simverb3500", tmp_path / "data")
    assert d.words1 == ("take", "walk") and d.scores.tolist() == [6.81, 3.32]
    assert "simverb3500" in available_wordsim(tmp_path / "data")
