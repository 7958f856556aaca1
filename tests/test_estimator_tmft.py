"""TruncatedFineTuner (TMFT on the user's own data) on a tiny random BERT: the estimator contract, the pre-steps and
their data arguments, save/load and SentenceTransformer equality, and the user's files from Python and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import SENTENCES
from estimator_checks import check_estimator
from layerwise import TruncatedFineTuner
from layerwise.errors import UsageError

WORDS1 = "man woman dog cat car bike guitar piano red blue park street water food house child".split()
WORDS2 = "woman child cat dog bike car piano guitar blue red street park food water street man".split()


def _pairs(n: int = 12, seed: int = 0):
    rnd = np.random.default_rng(seed)
    s1 = [SENTENCES[i % len(SENTENCES)] for i in range(n)]
    s2 = [SENTENCES[(3 * i + 1) % len(SENTENCES)] for i in range(n)]
    return s1, s2, np.round(rnd.uniform(0, 5, n), 1)


def _words():
    scores = np.linspace(0, 10, len(WORDS1))
    return WORDS1 * 2, WORDS2[::-1] + WORDS2, np.concatenate([scores, scores[::-1]])


def _tuner(model, **kw) -> TruncatedFineTuner:
    settings = dict(depth=1, epochs=2, batch_size=4, lr=1e-3, max_length=16, show_progress=False,
                    wordsim_epochs=1, wordsim_batch_size=4, mlm_batch_size=4, mlm_grad_accumulation=1)
    return TruncatedFineTuner(str(model), **{**settings, **kw})


def test_check_estimator(tiny_bert):
    s1, s2, y = _pairs()
    est = check_estimator(lambda: _tuner(tiny_bert), lambda e: e.fit(s1, s2, y, dev=(s1, s2, y)))
    assert est.n_layers_ == 1 and est.layers_ == (1,)
    assert len(est.history_["loss"]) == 2 * 3 and [s for s, _ in est.history_["dev"]] == [3, 6]
    assert est.dev_score_ == max(v for _, v in est.history_["dev"])
    assert est.model_path_ is None and est.pre_step_ is None


@pytest.mark.parametrize("layers", [None, (0, 2)])
def test_fit_save_load_and_sentence_transformers_give_the_same_embeddings(tiny_bert, tmp_path, layers):
    from sentence_transformers import SentenceTransformer

    s1, s2, y = _pairs()
    est = _tuner(tiny_bert, depth=2 if layers else 1, layers=layers).fit(s1, s2, y)
    assert est.dev_score_ is None and len(est.history_["dev"]) == 0  # no dev: the last epoch is kept
    vectors = est.encode(SENTENCES)
    folder = est.save(tmp_path / "tmft")
    config = json.loads((folder / "config.json").read_text())
    assert config["num_hidden_layers"] == est.depth  # the saved encoder really has `depth` layers
    st = SentenceTransformer(str(folder), device="cpu", trust_remote_code=False)
    assert np.abs(st.encode(SENTENCES) - vectors).max() < 1e-5
    loaded = TruncatedFineTuner.load(folder)
    assert np.abs(loaded.encode(SENTENCES) - vectors).max() < 1e-5
    assert loaded.get_params() == est.get_params() and loaded.layers_ == est.layers_
    assert loaded.history_ == est.history_ and loaded.model_path_ == folder
    assert loaded.n_parameters_ == est.n_parameters_


def test_the_truncated_encoder_is_smaller_and_its_output_is_hidden_state_depth_before_training(tiny_bert):
    from layerwise.encoders import LayerEncoder

    est = _tuner(tiny_bert, lr=1e-12, epochs=1)  # a learning rate too small to move the weights in float32
    est.fit(*_pairs())
    stack = LayerEncoder(str(tiny_bert), max_length=16, cache_dir=False, show_progress=False).encode(SENTENCES)
    np.testing.assert_allclose(est.encode(SENTENCES), stack.mean[:, 1], atol=1e-5)
    full = _tuner(tiny_bert, depth=2, lr=1e-12, epochs=1).fit(*_pairs())
    assert est.n_parameters_ < full.n_parameters_


def test_scores_are_read_on_their_own_scale(tiny_bert):
    s1, s2, y = _pairs()
    a = _tuner(tiny_bert).fit(s1, s2, y).encode(SENTENCES)
    b = _tuner(tiny_bert).fit(s1, s2, 20 * y + 100).encode(SENTENCES)  # same scores on another scale
    np.testing.assert_allclose(a, b, atol=1e-6)
    c = _tuner(tiny_bert, score_scale=(0, 5)).fit(s1, s2, y)
    assert c.encode(SENTENCES).shape == a.shape
    with pytest.raises(UsageError, match="score_scale"):
        _tuner(tiny_bert, score_scale=(0, 1)).fit(s1, s2, y)
    words = _words()  # scored 0-10: word pairs are read on their own range, whatever score_scale says
    assert max(words[2]) == 10
    _tuner(tiny_bert, score_scale=(0, 5), pre_step="wordsim", epochs=1).fit(s1, s2, y, word_pairs=words)


def test_training_matches_fine_tune_the_function_the_paper_runs_call(tiny_bert):
    from layerwise.data.readers import normalize_scores
    from layerwise.methods.truncated.run import TMFTData, fine_tune
    from layerwise.methods.truncated.tasks import PairSet

    s1, s2, y = _pairs()
    est = _tuner(tiny_bert).fit(s1, s2, y, dev=(s1, s2, y))
    config = est._config()
    fit = fine_tune(config, TMFTData(PairSet(tuple(s1), tuple(s2), normalize_scores(y)), PairSet(tuple(s1), tuple(s2), y)),
                    show_progress=False)
    np.testing.assert_allclose(est.encode(SENTENCES), fit.model.encode(SENTENCES), atol=1e-6)
    assert est.dev_score_ == pytest.approx(fit.run.best_dev)


@pytest.mark.parametrize("pre_step", ["wordsim", "mlm"])
def test_pre_steps_run_on_the_callers_data_and_resume_from_output_dir(tiny_bert, tmp_path, pre_step):
    from sentence_transformers import SentenceTransformer

    s1, s2, y = _pairs()
    data = {"word_pairs": _words()} if pre_step == "wordsim" else {"corpus": SENTENCES * 2}
    est = _tuner(tiny_bert, depth=2, pre_step=pre_step, output_dir=str(tmp_path / "runs"))
    est.fit(s1, s2, y, dev=(s1, s2, y), **data)
    assert est.pre_step_["kind"] == {"wordsim": "ws", "mlm": "mlm"}[pre_step]
    if pre_step == "wordsim":
        assert est.pre_step_["pairs"] == [22, 5, 5] and np.isfinite(est.pre_step_["test_spearman"])
    else:
        assert est.pre_step_["sentences"] == len(SENTENCES)  # the corpus without its duplicates
    assert est.model_path_.parent.parent == tmp_path / "runs" and (est.model_path_ / "modules.json").is_file()
    st = SentenceTransformer(str(est.model_path_), device="cpu")
    assert np.abs(st.encode(SENTENCES) - est.encode(SENTENCES)).max() < 1e-5
    again = _tuner(tiny_bert, depth=2, pre_step=pre_step, output_dir=str(tmp_path / "runs"))
    again.fit(s1, s2, y, dev=(s1, s2, y), **data)  # every stage's checkpoint is there: nothing trains again
    assert again.history_ == est.history_
    np.testing.assert_allclose(again.encode(SENTENCES), est.encode(SENTENCES), atol=1e-6)


@pytest.mark.parametrize("params, data, message", [
    ({"pre_step": "wordsim"}, {}, "pre_step='wordsim' needs word pairs: pass fit(..., word_pairs="),
    ({"pre_step": "mlm"}, {}, "pre_step='mlm' needs a corpus: pass fit(..., corpus="),
    ({}, {"word_pairs": _words()}, "word_pairs is given but pre_step=None"),
    ({"pre_step": "wordsim"}, {"word_pairs": _words(), "corpus": SENTENCES}, "corpus is given but pre_step='wordsim'"),
    ({"pre_step": "mlm"}, {"corpus": SENTENCES, "word_pairs": _words()}, "word_pairs is given but pre_step='mlm'"),
    ({"pre_step": "ws"}, {}, "pre_step='ws' is not a pre-step"),
    ({"depth": 3}, {}, "depth=3 is not a hidden state of"),
    ({"depth": 2, "layers": (0, 1)}, {}, "layers=(0, 1) must lie in 0..depth"),
    ({"epochs": 0}, {}, "epochs=0 must be a whole number of at least 1"),
    ({"lr": -1.0}, {}, "lr=-1.0 must be a finite number > 0"),
    ({"wordsim_split": (0.5, 0.5)}, {}, "wordsim_split="),
    ({"pre_step": "wordsim"}, {"word_pairs": (["a"] * 4, ["b"] * 4, [1, 2, 3, 4])}, "word_pairs: 4 word pairs"),
    ({}, {"dev": (["a"], ["b"], [1.0])}, "dev needs at least 2 pairs"),
])
def test_bad_parameters_and_data_name_the_python_argument(tiny_bert, params, data, message):
    s1, s2, y = _pairs()
    with pytest.raises(UsageError) as info:
        _tuner(tiny_bert, **params).fit(s1, s2, y, **data)
    assert message in str(info.value) and "--" not in str(info.value)


def test_bad_training_pairs_are_refused(tiny_bert):
    s1, s2, y = _pairs()
    with pytest.raises(UsageError, match="sentences1 has 12 texts but sentences2 has 11"):
        _tuner(tiny_bert).fit(s1, s2[:-1], y)
    with pytest.raises(UsageError, match="scores has 11 values for 12 pairs"):
        _tuner(tiny_bert).fit(s1, s2, y[:-1])
    with pytest.raises(UsageError, match="must be a list of strings"):
        _tuner(tiny_bert).fit("a sentence", s2, y)
    with pytest.raises(UsageError, match="scores"):
        _tuner(tiny_bert).fit(s1, s2, np.ones(len(y)))  # constant: nothing to learn


def test_load_refuses_a_folder_without_a_saved_estimator(tmp_path):
    with pytest.raises(UsageError, match="holds no saved TruncatedFineTuner"):
        TruncatedFineTuner.load(tmp_path)


# ------------------------------------------------------------------------------------------ the user's files

def _write_table(path, columns: list[str], rows: list[tuple]):
    import pandas as pd

    frame = pd.DataFrame(rows, columns=columns)
    if path.suffix == ".csv":
        frame.to_csv(path, index=False)
    elif path.suffix == ".tsv":
        frame.to_csv(path, index=False, sep="\t")
    elif path.suffix == ".jsonl":
        frame.to_json(path, orient="records", lines=True)
    else:
        frame.to_parquet(path, index=False)
    return path


def _pair_file(path, n: int = 12, seed: int = 0):
    s1, s2, y = _pairs(n, seed)
    return _write_table(path, ["left", "right", "sim"], list(zip(s1, s2, y.tolist(), strict=True)))


PAIR_COLUMNS = ["--sentence1-column", "left", "--sentence2-column", "right", "--score-column", "sim"]
CLI_SETTINGS = ["--epochs", "2", "--batch-size", "4", "--lr", "1e-3", "--max-length", "16", "--ws-epochs", "1", "-q"]


# format of the pairs -> the pre-step and the format of its data
CASES = {"csv": ("none", None), "tsv": ("wordsim", ".tsv"), "jsonl": ("mlm", ".txt"), "parquet": ("mlm", ".parquet")}


@pytest.mark.parametrize("fmt", list(CASES))
def test_python_and_cli_on_the_users_files_in_each_format(tiny_bert, tmp_path, capsys, fmt):
    from sentence_transformers import SentenceTransformer

    from layerwise.cli import main
    from layerwise.data.readers import read_corpus, read_pairs, read_word_pairs

    pre_step, data_suffix = CASES[fmt]
    train = _pair_file(tmp_path / f"my train.{fmt}")  # a space: the outputs get a plain name
    dev = _pair_file(tmp_path / f"held.{fmt}", seed=1)
    columns = {"sentence1": "left", "sentence2": "right", "score": "sim"}
    argv = ["tmft", "--model", str(tiny_bert), "--layers", "2", "--train", str(train), "--dev", str(dev),
            "--test", str(dev), *PAIR_COLUMNS, *CLI_SETTINGS, "--output", str(tmp_path / "out"),
            "--pre-step", pre_step]
    data, extra = {}, {}
    if pre_step == "wordsim":
        # its score column is named by --score-column too (one option for every file's scores)
        words = _write_table(tmp_path / f"words{data_suffix}", ["a", "b", "sim"], list(zip(*_words(), strict=True)))
        argv += ["--word-pairs", str(words), "--word1-column", "a", "--word2-column", "b"]
        data["word_pairs"] = read_word_pairs(words, word1="a", word2="b", score="sim")
        extra = {"wordsim_epochs": 1}
    elif pre_step == "mlm":
        corpus = tmp_path / f"corpus{data_suffix}"
        if data_suffix == ".txt":
            corpus.write_text("".join(s + "\n" for s in SENTENCES))
            data["corpus"] = read_corpus(corpus)
        else:
            _write_table(corpus, ["sentence"], [(s,) for s in SENTENCES])
            argv += ["--text-column", "sentence"]
            data["corpus"] = read_corpus(corpus, column="sentence")
        argv += ["--mlm-corpus", str(corpus)]

    # Python: the same files through the readers, the same settings
    pairs, held = read_pairs(train, **columns), read_pairs(dev, **columns)
    est = TruncatedFineTuner(str(tiny_bert), depth=2, pre_step=None if pre_step == "none" else pre_step, epochs=2,
                             batch_size=4, lr=1e-3, max_length=16, show_progress=False, **extra)
    est.fit(pairs.sentences1, pairs.sentences2, pairs.scores, dev=held, **data)

    # the command line: the estimator behind it, outputs named after the training file
    assert main(argv) == 0
    printed = capsys.readouterr().out
    (summary,) = (tmp_path / "out").glob("tmft-my_train-*.json")  # named by the runs' settings and the files
    doc = json.loads(summary.read_text())
    assert summary.with_suffix(".md").is_file() and f"wrote {summary}" in printed
    assert doc["data"]["train"]["label"] == "my_train" and doc["data"]["dev"]["rows"] == 12
    (run,) = doc["runs"]
    assert run["dev_spearman"] == pytest.approx(est.dev_score_) and run["layers"] == [2]
    assert (run["pre_step_info"] is None) == (pre_step == "none")
    model = run["model"]
    assert "my_train" in model and " " not in model and "(" not in model
    st = SentenceTransformer(model, device="cpu")
    assert np.abs(st.encode(SENTENCES) - est.encode(SENTENCES)).max() < 1e-5


@pytest.mark.parametrize("fmt", ["csv", "tsv", "jsonl", "parquet"])
def test_cli_a_wrong_column_or_an_empty_file_is_one_line_and_exit_2_before_the_model_loads(
        tiny_bert, tmp_path, capsys, monkeypatch, fmt):
    from layerwise.cli import main
    from layerwise.methods.truncated.model import TruncatedModel

    def never(*a, **k):
        raise AssertionError("the model loaded before the files were checked")

    monkeypatch.setattr(TruncatedModel, "from_pretrained", never)
    train = _pair_file(tmp_path / f"train.{fmt}")
    empty = tmp_path / f"empty.{fmt}"
    empty.write_bytes(b"")
    base = ["tmft", "--model", str(tiny_bert), "--layers", "1", *CLI_SETTINGS, "--output", str(tmp_path / "o")]
    for argv, needle in (
        ([*base, "--train", str(train), "--sentence1-column", "left", "--sentence2-column", "right"], "score"),
        ([*base, "--train", str(train), *PAIR_COLUMNS, "--dev", str(empty)], "empty"),
        ([*base, "--train", str(empty), *PAIR_COLUMNS], "empty"),
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err and needle in err


@pytest.mark.parametrize("args, message", [
    (["--pre-step", "wordsim"], "--pre-step wordsim with --train needs --word-pairs FILE"),
    (["--pre-step", "mlm"], "--pre-step mlm with --train needs --mlm-corpus FILE"),
    (["--mlm-corpus", "CORPUS"], "--mlm-corpus is the data of --pre-step mlm"),
    (["--train-limit", "5"], "--train-limit applies to the built-in data only"),
])
def test_cli_pre_step_data_must_match_the_pre_step(tiny_bert, tmp_path, capsys, args, message):
    from layerwise.cli import main

    train = _pair_file(tmp_path / "train.csv")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a man plays guitar .\n")
    args = [str(corpus) if a == "CORPUS" else a for a in args]
    code = main(["tmft", "--model", str(tiny_bert), "--layers", "1", "--train", str(train), *PAIR_COLUMNS,
                 "--output", str(tmp_path / "o"), "-q", *args])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_cli_file_options_need_train(tiny_bert, tmp_path, capsys):
    from layerwise.cli import main

    dev = _pair_file(tmp_path / "dev.csv")
    assert main(["tmft", "--model", str(tiny_bert), "--layers", "1", "--dev", str(dev), "-q",
                 "--output", str(tmp_path / "o")]) == 2
    assert "--dev is for your own pairs: pass --train FILE too" in capsys.readouterr().err
