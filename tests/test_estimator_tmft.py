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


def test_training_matches_fine_tune_the_function_the_paper_runs_call(tiny_bert):
    from layerwise.data.readers import normalize_scores
    from layerwise.methods.truncated.run import fine_tune
    from layerwise.methods.truncated.tasks import PairSet

    s1, s2, y = _pairs()
    est = _tuner(tiny_bert).fit(s1, s2, y, dev=(s1, s2, y))
    config = est._config()
    fit = fine_tune(config, PairSet(tuple(s1), tuple(s2), normalize_scores(y)), PairSet(tuple(s1), tuple(s2), y),
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
    ({"epochs": 0}, {}, "epochs=0 must be an integer >= 1"),
    ({"lr": -1.0}, {}, "lr=-1.0 must be a number > 0"),
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
    with pytest.raises(UsageError, match="scores has shape"):
        _tuner(tiny_bert).fit(s1, s2, y[:-1])
    with pytest.raises(UsageError, match="must be a list of strings"):
        _tuner(tiny_bert).fit("a sentence", s2, y)
    with pytest.raises(UsageError, match="scores"):
        _tuner(tiny_bert).fit(s1, s2, np.ones(len(y)))  # constant: nothing to learn


def test_load_refuses_a_folder_without_a_saved_estimator(tmp_path):
    with pytest.raises(UsageError, match="holds no saved TruncatedFineTuner"):
        TruncatedFineTuner.load(tmp_path)
