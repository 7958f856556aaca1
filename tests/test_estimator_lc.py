"""LayerCombination (BERT-LC as an estimator) and the LC commands on the user's own files.

The subset search, the transfer protocol and the exporter have their own tests (test_search, test_transfer,
test_export); here: the estimator contract, that fit/encode/save/load and the commands are those pieces put
together right (the estimator's choice is the naive search's best, its embeddings are what SentenceTransformer
gives from the saved folder), and that bad input is refused in one line.
"""

from __future__ import annotations

import csv
import json
import pickle
import random

import numpy as np
import pytest

from conftest import SENTENCES, word_tokenizer
from estimator_checks import check_estimator
from layerwise import LayerCombination, LayerEncoder, naive_subset_scores
from layerwise.errors import UsageError
from layerwise.pooling import layer_mean

TOL = 1e-5
FORMATS = ["csv", "tsv", "jsonl", "parquet"]
OVERLAP_WORDS = "a man woman dog child playing plays guitar piano park water bike".split()


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    """A tiny random BERT (3 layers) whose hidden states differ enough for subsets to score differently."""
    import torch
    from transformers import BertConfig, BertModel

    folder = tmp_path_factory.mktemp("models") / "varied-bert"
    folder.mkdir()
    tok = word_tokenizer()
    tok.save_pretrained(folder)
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                     intermediate_size=37, max_position_embeddings=64, initializer_range=0.2)
    BertModel(cfg).eval().save_pretrained(folder)
    return folder


def _pairs(n: int = 30, seed: int = 0):
    """Pairs scored by their word overlap (0-5), so the scores mean something and vary."""
    rnd = random.Random(seed)
    s1, s2, scores = [], [], []
    for _ in range(n):
        a, b = rnd.sample(SENTENCES, 2)
        shared = len(set(a.split()) & set(b.split()))
        s1.append(a)
        s2.append(b)
        scores.append(min(5.0, shared + rnd.random()))
    return s1, s2, scores


def _labeled(n: int = 40, seed: int = 0):
    """Texts labeled by which of two word pools they draw from."""
    rnd = random.Random(seed)
    pools = {"people": "a man woman child is playing guitar piano".split(),
             "animals": "the dog cat is swimming in water eats food".split()}
    texts, labels = [], []
    for i in range(n):
        label = "people" if i % 2 else "animals"
        texts.append(" ".join(rnd.choice(pools[label]) for _ in range(6)) + " .")
        labels.append(label)
    return texts, labels


def _make(bert, **kw):
    return lambda: LayerCombination(str(bert), max_length=32, cache_dir=False, **kw)


# -- the contract -----------------------------------------------------------------------------------------------


def test_check_estimator_on_sts_pairs(bert, env):
    s1, s2, scores = _pairs()
    est = check_estimator(_make(bert), lambda e: e.fit(s1, s2, scores))
    assert est.task_ == "sts" and est.n_states_ == 4


def test_check_estimator_on_labeled_texts(bert, env):
    texts, labels = _labeled()
    est = check_estimator(_make(bert, n_inner=3), lambda e: e.fit(texts, labels))
    assert est.task_ == "classification" and list(est.classes_) == ["animals", "people"]


# -- STS pairs --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_sts_fit_keeps_the_naive_search_best_and_every_subset_score(bert, env, pooling):
    s1, s2, scores = _pairs()
    est = LayerCombination(str(bert), pooling=pooling, max_length=32, cache_dir=False).fit(s1, s2, scores)
    stack = LayerEncoder(str(bert), max_length=32, cache_dir=False).encode(s1 + s2)
    src = stack.mean if pooling == "mean" else stack.cls
    naive = naive_subset_scores(src[:30], src[30:], np.asarray(scores))
    assert len(est.scores_) == len(naive) == 15 and est.masks_.shape == (15, 4)
    for layers, value in naive.items():
        assert est.score_of(layers) == pytest.approx(value, abs=1e-6, nan_ok=True)  # CLS of state 0: constant
    best = max((k for k in naive if not np.isnan(naive[k])), key=naive.get)
    assert est.layers_ == best and est.score_ == pytest.approx(naive[best], abs=1e-6)
    assert est.top(1) == [(est.layers_, est.score_)]
    assert len(set(np.round(est.scores_, 6))) > 5  # the subsets really differ on this model
    # the embeddings are the chosen states' pooled mean, and score() measures them as the search did
    np.testing.assert_allclose(est.encode(SENTENCES), layer_mean(LayerEncoder(str(bert), max_length=32,
                               cache_dir=False).encode(SENTENCES), est.layers_, kind=pooling), atol=TOL)
    assert est.score(s1, s2, scores) == pytest.approx(est.score_, abs=1e-4)


def test_max_layers_caps_the_subsets_searched(bert, env):
    s1, s2, scores = _pairs()
    est = LayerCombination(str(bert), max_layers=1, max_length=32, cache_dir=False).fit(s1, s2, scores)
    assert est.masks_.shape == (4, 4) and len(est.layers_) == 1
    with pytest.raises(KeyError, match="not considered"):
        est.score_of((0, 1))


def test_save_loads_in_sentence_transformers_without_remote_code_and_back(bert, env, tmp_path):
    """The acceptance item: fitted on the user's pairs, saved, SentenceTransformer(folder) gives the same vectors."""
    from sentence_transformers import SentenceTransformer
    from sklearn.base import clone

    s1, s2, scores = _pairs()
    est = LayerCombination(str(bert), max_length=32, cache_dir=False).fit(s1, s2, scores)
    out = est.save(tmp_path / "lc")
    card = (out / "README.md").read_text()  # the card said "No scores were measured" although fit measured one
    assert f"Spearman x100 {est.score_:.2f}, the best of {len(est.scores_)} subsets" in card
    assert "No scores were measured" not in card
    modules = json.loads((out / "modules.json").read_text())
    assert all(m["type"].startswith("sentence_transformers.") for m in modules)
    st = SentenceTransformer(str(out), device="cpu", trust_remote_code=False)
    ours = est.encode(SENTENCES)
    assert np.abs(st.encode(SENTENCES, convert_to_numpy=True, batch_size=5) - ours).max() < TOL
    assert st[0].auto_model.config.num_hidden_layers == max(est.layers_)  # cut above the highest state used
    back = LayerCombination.load(out)
    assert back.layers_ == est.layers_ and back.score_ == est.score_ and back.task_ == "sts"
    np.testing.assert_array_equal(back.scores_, est.scores_)
    np.testing.assert_array_equal(back.masks_, est.masks_)
    assert np.abs(back.encode(SENTENCES) - ours).max() < TOL
    assert back.model_identity_.weights_sha256 == est.model_identity_.weights_sha256
    assert clone(back).get_params()["model"] == str(out)
    copy = pickle.loads(pickle.dumps(back))  # without the loaded encoder, rebuilt on use
    assert "_encoder" not in vars(copy) and np.abs(copy.encode(SENTENCES) - ours).max() < TOL
    with pytest.raises(FileExistsError, match="overwrite=True"):
        est.save(out)
    assert est.save(out, overwrite=True) == out


@pytest.mark.parametrize("fmt", FORMATS)
def test_acceptance_fitted_on_the_users_pair_file_saved_loads_in_sentence_transformers(tiny_bert, env, tmp_path, fmt):
    """Issue 24's acceptance item, on the shared tiny BERT: the user's file (any format, own column names) -> fit ->
    save -> SentenceTransformer(folder) without trust_remote_code, same embeddings to 1e-5."""
    from sentence_transformers import SentenceTransformer

    from layerwise.data.readers import read_pairs

    path = _pair_file(tmp_path, "my_pairs", fmt)
    data = read_pairs(path, sentence1="left", sentence2="right", score="similarity")
    est = LayerCombination(str(tiny_bert)).fit(data.sentences1, data.sentences2, data.scores)
    out = est.save(tmp_path / "model")
    st = SentenceTransformer(str(out), device="cpu", trust_remote_code=False)
    assert np.abs(st.encode(SENTENCES, convert_to_numpy=True) - est.encode(SENTENCES)).max() < TOL


def test_the_embedding_output_alone_saves_and_loads(bert, env, tmp_path):
    """A subset of hidden state 0 alone cuts the encoder to no layers at all; both sides still agree."""
    from sentence_transformers import SentenceTransformer

    s1, s2, scores = _pairs()
    est = LayerCombination(str(bert), max_length=32, cache_dir=False).fit(s1, s2, scores)
    est.layers_ = (0,)  # as if the search had chosen it
    out = est.save(tmp_path / "lc0")
    st = SentenceTransformer(str(out), device="cpu")
    assert np.abs(st.encode(SENTENCES, convert_to_numpy=True) - est.encode(SENTENCES)).max() < TOL
    assert np.abs(LayerCombination.load(out).encode(SENTENCES) - est.encode(SENTENCES)).max() < TOL


# -- classification ---------------------------------------------------------------------------------------------


def test_classification_chooses_by_the_transfer_protocol_and_predicts(bert, env, tmp_path):
    from layerwise.evaluation.classification import inner_splits
    from layerwise.methods.lc.transfer import TransferFeatures, all_subsets, choose_subset

    texts, labels = _labeled()
    est = LayerCombination(str(bert), n_inner=3, max_length=32, cache_dir=False).fit(texts, labels)
    # the protocol's own choice on the same stacks (the slow way round: every step spelled out)
    y = np.array([0 if lab == "animals" else 1 for lab in labels])
    data = TransferFeatures(LayerEncoder(str(bert), max_length=32, cache_dir=False).encode(texts), y, 2)
    subsets = all_subsets(4, 4)
    layers, inner, screen, _ = choose_subset(data, np.arange(40), inner_splits(y, n_splits=3, seed=0), subsets,
                                             shortlist=1, seed=0)
    assert est.layers_ == tuple(layers) and est.score_ == pytest.approx(inner)
    np.testing.assert_allclose(est.scores_, screen)
    assert [tuple(np.flatnonzero(m)) for m in est.masks_] == subsets
    predicted = est.predict(texts)
    assert set(predicted) <= {"animals", "people"} and est.score(texts, labels) == pytest.approx(
        100 * np.mean(predicted == np.array(labels)))
    assert est.predict_proba(texts[:3]).shape == (3, 2)
    out = est.save(tmp_path / "clf")
    assert f"held-out accuracy x100 {est.score_:.2f}, mean over 3 splits" in (out / "README.md").read_text()
    back = LayerCombination.load(out)
    assert back.task_ == "classification" and list(back.classes_) == ["animals", "people"]
    np.testing.assert_array_equal(back.predict(texts), predicted)
    np.testing.assert_allclose(back.predict_proba(texts), est.predict_proba(texts), atol=1e-6)


def test_kfold_inner_with_every_subset_is_the_papers_exact_choice(bert, env, capsys):
    from layerwise.evaluation.classification import fit_logreg, inner_kfold
    from layerwise.methods.lc.transfer import TransferFeatures, all_subsets

    texts, labels = _labeled()
    est = LayerCombination(str(bert), n_inner=3, inner="kfold", shortlist=None, max_layers=2, max_length=32,
                           cache_dir=False).fit(texts, labels)
    # the slow twin: every subset's mean held-out accuracy over the 3 folds, one plain logistic regression each
    y = np.array([0 if lab == "animals" else 1 for lab in labels])
    data = TransferFeatures(LayerEncoder(str(bert), max_length=32, cache_dir=False).encode(texts), y, 2)
    folds = inner_kfold(y, n_splits=3, seed=0)
    assert sorted(np.concatenate([dev for _, dev in folds]).tolist()) == list(range(len(y)))  # each text held out once
    mean = {}
    for subset in all_subsets(4, 2):
        x = data.features(subset)
        mean[subset] = 100 * np.mean([fit_logreg(x[tr], y[tr], seed=0).score(x[dev], y[dev]) for tr, dev in folds])
    best = max(mean.values())
    assert mean[est.layers_] == pytest.approx(best) and est.score_ == pytest.approx(best)
    assert est.layers_ == next(s for s, v in mean.items() if v == best)  # ties: the first subset in order
    with pytest.raises(UsageError, match="n_inner=50 with inner='kfold'"):  # more folds than texts
        LayerCombination(str(bert), n_inner=50, inner="kfold", max_length=32, cache_dir=False).fit(texts, labels)


def test_pair_classification_takes_labels_by_keyword(bert, env):
    texts, labels = _labeled()
    order = random.Random(1).sample(range(len(texts)), len(texts))
    second = [texts[i] for i in order]
    same = [int(labels[i] == labels[j]) for i, j in enumerate(order)]
    est = LayerCombination(str(bert), n_inner=3, shortlist=2, max_length=32, cache_dir=False)
    est.fit(texts, second, labels=same)
    assert est.is_pair_ and est.predict(texts[:4], second[:4]).shape == (4,)
    assert 0 <= est.score(texts, second, labels=same) <= 100
    with pytest.raises(UsageError, match="classifies pairs"):
        est.predict(texts)


# -- refusals, before any model loads ----------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "kwargs", "match"), [
    ((["a b", "c d", "e f"], ["g h", "i j", "k l"]), {}, "distinct strings"),
    ((["a", "b", "c"], ["d", "e", "f"], [1, 2, 3]), {"labels": [0, 1, 0]}, "both scores and labels"),
    ((["a", "b", "c"], ["d", "e"], [1, 2, 3]), {}, "sentences2 has 2"),
    ((["a", "b", "c"], ["d", "e", "f"], [1, 2]), {}, "scores has 2 values"),
    ((["a", "b", "c"], ["d", "e", "f"], [1, 1, 1]), {}, "constant|all 3 gold scores"),
    ((["a", "b", "c"], ["d", "e", "f"], [1, "x", 3]), {}, "numbers"),
    ((["a", "b", "c"], ["x", "x", "x"]), {}, "one class"),
    ((["a", "b", "c"], ["x", 1, "x"]), {}, "mixes strings and numbers"),
    (("a text", [0]), {}, "single string"),
    ((["a", "b"], [0, 1, 0]), {}, "labels has 3 values"),
])
def test_fit_refuses_ambiguous_or_bad_input_naming_the_argument(env, args, kwargs, match):
    est = LayerCombination("/no/such/model")  # nothing is loaded before the input is checked
    with pytest.raises(UsageError, match=match):
        est.fit(*args, **kwargs)


@pytest.mark.parametrize(("params", "match"), [({"pooling": "max"}, "pooling='max'"),
                                               ({"max_layers": 0}, "max_layers=0"),
                                               ({"n_inner": 1.5}, "n_inner=1.5"),
                                               ({"ridge_alpha": -1}, "ridge_alpha=-1"),
                                               ({"seed": -3}, "seed=-3"),
                                               ({"inner": "loo"}, "inner='loo' is not a kind of inner split")])
def test_fit_refuses_bad_parameters_naming_them(env, params, match):
    s1, s2, scores = _pairs(6)
    with pytest.raises(UsageError, match=match):
        LayerCombination("/no/such/model", **params).fit(s1, s2, scores)


def test_sts_model_has_no_classifier_and_load_wants_an_lc_folder(bert, env, tmp_path):
    s1, s2, scores = _pairs()
    est = LayerCombination(str(bert), max_layers=1, max_length=32, cache_dir=False).fit(s1, s2, scores)
    with pytest.raises(UsageError, match="no classifier"):
        est.predict(s1)
    with pytest.raises(UsageError, match="layerwise_export.json"):
        LayerCombination.load(bert)


# -- the commands on the user's files ----------------------------------------------------------------------------


def write_table(path, columns: list[str], rows: list[tuple]) -> str:
    """``rows`` under ``columns`` in the format of ``path``'s suffix."""
    fmt = path.suffix[1:]
    if fmt in ("csv", "tsv"):
        with path.open("w", newline="") as f:
            writer = csv.writer(f, delimiter="," if fmt == "csv" else "\t")
            writer.writerow(columns)
            writer.writerows(rows)
    elif fmt == "jsonl":
        path.write_text("".join(json.dumps(dict(zip(columns, r))) + "\n" for r in rows))
    else:
        import pandas as pd

        pd.DataFrame(rows, columns=columns).to_parquet(path)
    return str(path)


PAIR_COLUMNS = ["left", "right", "similarity"]
PAIR_OPTIONS = ["--sentence1-column", "left", "--sentence2-column", "right", "--score-column", "similarity"]


def _pair_file(folder, name: str, fmt: str, n: int = 30, seed: int = 0) -> str:
    s1, s2, scores = _pairs(n, seed)
    return write_table(folder / f"{name}.{fmt}", PAIR_COLUMNS, list(zip(s1, s2, scores)))


def _run(argv, capsys):
    from layerwise.cli import main

    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("fmt", FORMATS)
def test_search_layers_and_ablate_on_the_users_pairs_in_each_format(bert, env, capsys, fmt):
    pairs = _pair_file(env, "my_pairs", fmt)
    common = ["--model", bert, "--max-length", "32", "--output", env / "runs", "-q", *PAIR_OPTIONS]
    code, out, err = _run(["search", "--pairs", pairs, "--dev-size", "20", "--splits", "2", *common], capsys)
    assert code == 0, err
    assert "data my_pairs" in out and "STS-B" not in out
    files = sorted(p.name for p in (env / "runs").iterdir())
    assert [f for f in files if f.startswith("search-varied-bert-my_pairs-all-all-")], files
    doc = json.loads(next((env / "runs").glob("search-*my_pairs*.json")).read_text())
    assert doc["data"]["name"] == "my_pairs" and doc["data"]["n_pairs"] == 30 and len(doc["lc"]["splits"]) == 2
    md = next((env / "runs").glob("search-*my_pairs*.md")).read_text()
    assert md.startswith("# Layer combination search: ") and "on my_pairs" in md.splitlines()[0]
    assert all(" " not in f and "(" not in f for f in files)
    code, out, err = _run(["layers", "--pairs", pairs, *common], capsys)
    assert code == 0, err
    assert list((env / "runs").glob("layers-varied-bert-my_pairs-*.json"))
    if fmt == "csv":  # the ablations are slower: one format is enough to see the file reach them
        code, out, err = _run(["ablate", "--pairs", pairs, "--dev-size", "20", "--splits", "2", *common], capsys)
        assert code == 0, err
        doc = json.loads(next((env / "runs").glob("ablations-varied-bert-my_pairs.json")).read_text())
        assert list(doc["sts"]) == ["my_pairs"] and not doc["transfer"] and not doc["limited"]
        for flag in ("--limited-seeds", "--max-denominator", "--outer-splits"):  # parts that do not run here
            code, out, err = _run(["ablate", "--pairs", pairs, "--dev-size", "20", flag, "4", *common], capsys)
            assert code == 2 and f"{flag} sets the ablation parts on SentEval tasks, and none runs here" in err


def test_search_tests_lc_against_the_last_layer_and_adds_max_pooling_on_request(bert, env, capsys):
    """``--bootstrap N`` prints each compared column's paired bootstrap against the last layer (the run's JSON holds
    the same tests) and ``--max-pooling`` adds LC (max); without them neither is computed."""
    pairs = _pair_file(env, "tested", "csv", 40, 3)
    common = ["search", "--pairs", pairs, "--dev-size", "20", "--splits", "2", "--model", bert, "--max-length", "32",
              "-q", *PAIR_OPTIONS]
    code, out, err = _run([*common, "--output", env / "plain"], capsys)
    assert code == 0, err
    assert "p against" not in out and "lc_max" not in out
    doc = json.loads(next((env / "plain").glob("search-*.json")).read_text())
    assert not doc["lc"]["significance"]
    code, out, err = _run([*common, "--output", env / "tested", "--bootstrap", "200", "--max-pooling"], capsys)
    assert code == 0, err
    doc = json.loads(next((env / "tested").glob("search-*.json")).read_text())
    tests = doc["lc"]["significance"]
    assert {"lc", "lc_max", "first0_last"} <= set(tests) and "lc_max" in doc["lc"]["splits"][0]["test"]
    block = out.split("p against the last layer (paired bootstrap over ")[1]
    assert block.startswith(f"{tests['lc']['n_units']} test pairs, 200 resamples; yes: p < 0.01):")
    for name, t in tests.items():  # each printed line is the stored test
        verdict = "yes" if t["p_value"] < 0.01 else "no"
        assert f"{name:{max(map(len, tests))}s} {t['difference']:+.2f}  p {t['p_value']:.4f} ({verdict})" in block


@pytest.mark.parametrize("fmt", FORMATS)
def test_search_chooses_on_dev_reports_on_test_and_saves_the_estimator(bert, env, capsys, fmt, tmp_path):
    from sentence_transformers import SentenceTransformer

    dev, test = _pair_file(env, "my_dev", fmt, 20, 1), _pair_file(env, "my_test", fmt, 20, 2)
    code, out, err = _run(["search", "--dev", dev, "--test", test, "--model", bert, "--max-length", "32",
                           "--output", env / "runs", "--save", tmp_path / "model", "-q", *PAIR_OPTIONS], capsys)
    assert code == 0, err
    doc = json.loads(next((env / "runs").glob("search-varied-bert-my_dev-my_test-dev-test-*.json")).read_text())
    (split,) = doc["lc"]["splits"]
    assert split["n_dev"] == 20 and split["n_test"] == 20 and doc["data"]["subsets"] == {"dev": 20, "test": 20}
    assert "per-layer Spearman x100 on the test file's pairs" in out  # not on all 40
    assert "saved LayerCombination fitted on my_dev (20 pairs)" in out
    assert "±" not in out.split("test Spearman x100")[1]  # one split: no spread to show
    md = next((env / "runs").glob("search-varied-bert-my_dev-my_test-dev-test-*.md")).read_text()
    assert "## Per-layer Spearman x100 (the test file's pairs)" in md and "±" not in md  # the markdown alike
    # the saved model is LayerCombination fitted on the dev file: the same choice as the protocol's
    s1, s2, scores = _pairs(20, 1)
    est = LayerCombination(str(bert), max_length=32, cache_dir=False).fit(s1, s2, scores)
    assert est.layers_ == tuple(split["layers"])
    st = SentenceTransformer(str(tmp_path / "model"), device="cpu")
    assert np.abs(st.encode(SENTENCES, convert_to_numpy=True) - est.encode(SENTENCES)).max() < TOL
    if fmt == "csv":
        code, out, err = _run(["ablate", "--dev", dev, "--test", test, "--model", bert, "--max-length", "32",
                               "--output", env / "abl", "-q", *PAIR_OPTIONS], capsys)
        assert code == 0, err
        doc = json.loads(next((env / "abl").glob("ablations-varied-bert-my_dev-my_test.json")).read_text())
        assert len(doc["sts"]["my_dev-my_test"]["result"]["best"]) == 1  # one split: dev file, test file
        # no --dev-size: the part is keyed on the default 350 as before, never on None
        keys = [json.loads(f.read_text())["key"] for f in (env / "abl").rglob("*.json") if f.parent.name != "abl"]
        assert keys and "'dev_size': None" not in repr(keys) and "'dev_size': 350" in repr(keys)


@pytest.mark.parametrize("fmt", FORMATS)
def test_transfer_on_the_users_labeled_texts_in_each_format(bert, env, capsys, fmt, tmp_path):
    texts, labels = _labeled(40)
    train = write_table(env / f"reviews.{fmt}", ["body", "tag"], list(zip(texts[:30], labels[:30])))
    test = write_table(env / f"held_out.{fmt}", ["body", "tag"], list(zip(texts[30:], labels[30:])))
    code, out, err = _run(["transfer", "--train", train, "--test", test, "--text-column", "body", "--label-column",
                           "tag", "--model", bert, "--max-length", "32", "--inner-splits", "3", "--output",
                           env / "runs", "--save", tmp_path / "clf", "-q"], capsys)
    assert code == 0, err
    doc = json.loads(next((env / "runs").glob("transfer-varied-bert-reviews-held_out-*.json")).read_text())
    assert doc["train"]["name"] == "reviews" and doc["test"]["n_texts"] == 10
    est = LayerCombination.load(tmp_path / "clf")
    assert tuple(doc["layers"]) == est.layers_
    assert doc["test"]["accuracy"] == pytest.approx(est.score(texts[30:], labels[30:]))
    # the same classifier as LC's row of the baselines table; the baselines are the paper's
    assert doc["test"]["methods"]["lc"] == pytest.approx(doc["test"]["accuracy"])
    assert set(doc["test"]["methods"]) == {"cls", "last", "last_four", "random", "lc"}
    if fmt == "csv":  # pairs of texts: --text2-column
        order = random.Random(1).sample(range(len(texts)), len(texts))
        rows = [(texts[i], texts[j], int(labels[i] == labels[j])) for i, j in enumerate(order)]
        pairs = write_table(env / "paraphrase.csv", ["first", "second", "same"], rows)
        code, out, err = _run(["transfer", "--train", pairs, "--text-column", "first", "--text2-column", "second",
                               "--label-column", "same", "--model", bert, "--max-length", "32", "--inner-splits", "2",
                               "--output", env / "runs", "-q"], capsys)
        assert code == 0, err
        assert json.loads(next((env / "runs").glob("transfer-varied-bert-paraphrase-*.json")).read_text())["train"][
            "pairs"]
        code, out, err = _run(["transfer", "--train", train, "--text-column", "body", "--label-column", "tag",
                               "--model", bert, "--max-length", "32", "--inner-splits", "3", "--inner", "kfold",
                               "--shortlist", "0", "--output", env / "kfold", "-q"], capsys)
        assert code == 0, err
        doc = json.loads(next((env / "kfold").glob("transfer-*.json")).read_text())
        assert doc["protocol"]["inner"] == "kfold" and doc["protocol"]["shortlist"] is None
        assert "- protocol: 3-fold inner cross-validation" in next((env / "kfold").glob("transfer-*.md")).read_text()


def _no_model_load(monkeypatch):
    import layerwise.encoders.layer_encoder as le

    def refuse(*a, **k):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(le, "_load", refuse)


@pytest.mark.parametrize("argv", [
    ["search", "--pairs", "{bad}", *PAIR_OPTIONS[:4], "--score-column", "nope"],
    ["search", "--pairs", "{empty}", *PAIR_OPTIONS],
    ["search", "--dev", "{good}", "--test", "{empty}", *PAIR_OPTIONS],
    ["layers", "--pairs", "{bad}", "--sentence1-column", "nope"],
    ["ablate", "--pairs", "{empty}", *PAIR_OPTIONS],
    ["transfer", "--train", "{labeled}", "--text-column", "nope"],
    ["transfer", "--train", "{empty}"],
    ["search", "--pairs", "{good}", *PAIR_OPTIONS, "--dev-size", "50"],
    ["search", "--pairs", "{good}", "--dataset", "stsb", *PAIR_OPTIONS],
    ["search", "--dev", "{good}", *PAIR_OPTIONS],
    ["transfer", "--test", "{labeled}"],
    ["transfer", "--train", "{labeled}", "--tasks", "mr"],
    ["transfer", "--train", "{labeled}", "--bootstrap", "100"],
])
def test_bad_files_and_options_give_one_line_and_exit_2_before_any_model_loads(bert, env, capsys, monkeypatch, argv):
    files = {"bad": _pair_file(env, "pairs", "csv"), "good": _pair_file(env, "good", "tsv"),
             "labeled": write_table(env / "labeled.csv", ["text", "label"], list(zip(*_labeled(20)))),
             "empty": str(env / "empty.csv")}
    (env / "empty.csv").write_text("")
    _no_model_load(monkeypatch)
    argv = [a.format(**files) for a in argv] + ["--model", bert, "--output", env / "runs", "-q"]
    code, out, err = _run(argv, capsys)
    assert code == 2, (out, err)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err and err.startswith("layerwise: error:")
    assert not (env / "runs").exists() or not any((env / "runs").iterdir())
