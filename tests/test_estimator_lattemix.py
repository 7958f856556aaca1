"""``LatteMix``: the estimator contract, its measures against the method's functions, save/load and the CLI on files."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conftest import SENTENCES
from estimator_checks import check_estimator
from layerwise import LatteMix
from layerwise.errors import UsageError
from layerwise.methods.lattemix import pair_similarity

ST = pytest.importorskip("sentence_transformers")

CORPUS = SENTENCES * 3
SMALL = dict(layer=1, n_groups=3, n_classes=4, latent_dim=5, epochs=1, batch_size=32, lr_warmup_steps=2,
             beta_warmup_steps=5, show_progress=False)


def _make(model, **kw) -> LatteMix:
    return LatteMix(str(model), **{**SMALL, **kw})


@pytest.fixture(scope="module")
def fitted(tiny_bert) -> LatteMix:
    return _make(tiny_bert).fit(CORPUS)


def test_the_estimator_contract(tiny_bert):
    est = check_estimator(lambda: _make(tiny_bert), lambda e: e.fit(CORPUS))
    assert est.layer_ == 1 and est.training_["n_sentences"] == len(CORPUS)
    assert est.encode(SENTENCES[:2]).shape == (2, 3 * 4)
    assert len(est.history_["loss"]) == est.training_["steps"] > 0


def test_defaults_are_those_of_the_command_line():
    from layerwise.methods.lattemix import LatteMixConfig, TrainConfig

    p, c, t = LatteMix().get_params(), LatteMixConfig(), TrainConfig()
    assert (p["kind"], p["n_groups"], p["n_classes"], p["latent_dim"], p["depth"], p["tau"], p["beta"],
            p["beta_warmup_steps"]) == (c.kind, c.n_groups, c.n_classes, c.latent_dim, c.depth, c.tau, c.beta,
                                        c.beta_warmup_steps)
    assert (p["epochs"], p["batch_size"], p["lr"], p["layer"], p["include_special"]) == (t.epochs, t.batch_size, t.lr,
                                                                                         -1, False)


def test_mixtures_are_the_mean_posterior_of_the_non_special_tokens(fitted):
    """The slow obvious twin: run the encoder by hand, drop [CLS]/[SEP], average the posteriors token by token."""
    mix = fitted.mixtures(SENTENCES[:3])
    assert mix.probs.shape == (3, 3, 4)
    np.testing.assert_allclose(mix.probs.sum(-1), 1.0, atol=1e-6)
    enc = fitted.encoder_
    for i, text in enumerate(SENTENCES[:3]):
        batch = enc.tokenizer([text], return_tensors="pt")
        with torch.inference_mode():
            states = enc.model(**batch, output_hidden_states=True).hidden_states[1][0]
            rows = [fitted.latent_model_.posterior(states[t:t + 1])[0] for t in range(1, states.shape[0] - 1)]
        np.testing.assert_allclose(mix.probs[i], torch.stack(rows).mean(0).numpy(), atol=1e-6)
    np.testing.assert_allclose(fitted.encode(SENTENCES[:3]), mix.probs.reshape(3, -1), atol=1e-6)


def test_similarity_measures_match_the_method_and_cosine_matches_encode(fitted):
    a, b = SENTENCES[:4], SENTENCES[4:8]
    both = fitted.mixtures(a + b)
    for measure in ("cosine", "js", "l2"):
        want = pair_similarity(both.take(np.arange(4)), both.take(np.arange(4, 8)), measure)
        np.testing.assert_allclose(fitted.similarity(a, b, measure=measure), want, atol=1e-9)
    va, vb = fitted.encode(a), fitted.encode(b)
    cos = (va * vb).sum(1) / np.linalg.norm(va, axis=1) / np.linalg.norm(vb, axis=1)
    np.testing.assert_allclose(fitted.similarity(a, b), cos, atol=1e-5)
    same = fitted.similarity(a, a, measure="js")
    np.testing.assert_allclose(same, 0.0, atol=1e-9)  # minus the JS divergence: 0 for identical texts
    with pytest.raises(UsageError, match="measure='hellinger'"):
        fitted.similarity(a, b, measure="hellinger")
    with pytest.raises(UsageError, match="sentences1 has 4 texts and sentences2 3"):
        fitted.similarity(a, b[:3])


def test_save_loads_in_sentence_transformers_with_the_same_embeddings(fitted, tmp_path):
    from layerwise import load_sentence_transformer
    from layerwise.methods.lattemix.st_module import MODULE_TYPE

    out = fitted.save(tmp_path / "lm")
    want = fitted.encode(SENTENCES)
    assert not list(out.rglob("*.py")), "no code in the folder"
    assert MODULE_TYPE in (out / "modules.json").read_text()
    # sentence-transformers 6 imports a class outside its package only with trust_remote_code=True; the dotted path
    # names the installed class (never a file of the folder)
    with pytest.raises(ValueError, match="trust_remote_code"):
        ST.SentenceTransformer(str(out), device="cpu")
    st = ST.SentenceTransformer(str(out), device="cpu", trust_remote_code=True)
    assert np.abs(st.encode(SENTENCES, batch_size=5) - want).max() < 1e-5
    plain = load_sentence_transformer(out)  # no trust_remote_code: layerwise builds the modules
    assert np.abs(plain.encode(SENTENCES) - want).max() < 1e-5
    back = LatteMix.load(out)
    assert back.get_params() == fitted.get_params() and back.layer_ == fitted.layer_ and back.history_ is None
    assert np.abs(back.encode(SENTENCES) - want).max() < 1e-5
    np.testing.assert_allclose(back.similarity(SENTENCES[:3], SENTENCES[3:6], measure="js"),
                               fitted.similarity(SENTENCES[:3], SENTENCES[3:6], measure="js"), atol=1e-6)
    with pytest.raises(UsageError, match="already holds"):
        fitted.save(out)
    assert fitted.save(out, overwrite=True) == out


def test_save_refuses_a_folder_it_did_not_write(fitted, tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(UsageError, match="not written by layerwise"):
        fitted.save(tmp_path / "mine", overwrite=True)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
    with pytest.raises(UsageError, match="not a folder written by LatteMix.save"):
        LatteMix.load(tmp_path / "mine")


def test_ae_saves_and_normal_compares_gaussian_mixtures(tiny_bert, tmp_path):
    ae = _make(tiny_bert, kind="ae", include_special=True).fit(CORPUS)
    assert ae.encode(SENTENCES[:2]).shape == (2, 5)
    st = ST.SentenceTransformer(str(ae.save(tmp_path / "ae")), device="cpu", trust_remote_code=True)
    assert np.abs(st.encode(SENTENCES) - ae.encode(SENTENCES)).max() < 1e-5
    normal = _make(tiny_bert, kind="normal").fit(CORPUS)
    l2 = normal.similarity(SENTENCES[:3], SENTENCES[3:6], measure="l2")
    assert l2.shape == (3,) and (l2 <= 1e-9).all()
    assert normal.similarity(SENTENCES[:2], SENTENCES[:2], measure="cosine") == pytest.approx([1.0, 1.0])
    mix = normal.mixtures(SENTENCES[:2])
    assert mix.mu.shape[1] == 5 and len(mix.offsets) == 3
    with pytest.raises(UsageError, match="no sentence vector"):
        normal.encode(SENTENCES[:2])
    with pytest.raises(UsageError, match="no sentence vector"):
        normal.save(tmp_path / "normal")


@pytest.mark.parametrize("params, match", [
    ({"kind": "gaussian"}, "kind='gaussian'"),
    ({"lr": float("inf")}, "lr=inf"),
    ({"n_classes": 1}, "n_classes=1"),
    ({"layer": 7}, "layer=7"),
    ({"batch_size": 0}, "batch_size=0"),
    ({"device": "gpu7"}, "device='gpu7'"),
])
def test_bad_parameters_are_refused_in_fit_naming_the_argument(tiny_bert, params, match):
    est = _make(tiny_bert, **params)  # __init__ stores, fit validates
    with pytest.raises(UsageError, match=match):
        est.fit(CORPUS)


def test_bad_texts_name_the_argument(fitted, tiny_bert):
    with pytest.raises(UsageError, match="texts is empty"):
        _make(tiny_bert).fit([])
    with pytest.raises(UsageError, match="single string"):
        _make(tiny_bert).fit("a man is playing guitar .")
    with pytest.raises(UsageError, match=r"texts\[1\] .* no tokens besides special tokens"):
        fitted.mixtures(["a man .", ""])


# ---------------------------------------------------------------- the user's files, from Python and the CLI

CLI_SMALL = ["--layer", "1", "--n-groups", "3", "--n-classes", "4", "--latent-dim", "5", "--epochs", "1",
             "--train-batch-size", "32", "--beta-warmup-steps", "5", "--lr-warmup-steps", "2", "--seeds", "0", "-q"]


def _write_table(path, columns: dict[str, list]) -> None:
    """``columns`` as a csv, tsv, jsonl or parquet file (by ``path``'s suffix)."""
    import csv
    import json

    names = list(columns)
    rows = list(zip(*columns.values()))
    if path.suffix in (".csv", ".tsv"):
        with path.open("w", newline="") as f:
            writer = csv.writer(f, delimiter="," if path.suffix == ".csv" else "\t")
            writer.writerow(names)
            writer.writerows(rows)
    elif path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(dict(zip(names, r))) + "\n" for r in rows))
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table(columns), path)


def _user_files(folder, fmt: str):
    """A corpus (column ``body``; txt: one per line) and pairs (``left``, ``right``, ``sim`` on a 0-1 scale)."""
    rnd = np.random.default_rng(0)
    corpus = folder / f"my_corpus.{fmt}"
    if fmt == "txt":
        corpus.write_text("".join(s + "\n" for s in CORPUS))
    else:
        _write_table(corpus, {"body": CORPUS})
    pair_fmt = "csv" if fmt == "txt" else fmt
    pairs = folder / f"my_pairs.{pair_fmt}"
    left = [SENTENCES[i] for i in rnd.integers(0, len(SENTENCES), 10)]
    right = [SENTENCES[i] for i in rnd.integers(0, len(SENTENCES), 10)]
    _write_table(pairs, {"left": left, "right": right, "sim": [round(float(x), 3) for x in rnd.uniform(0, 1, 10)]})
    return corpus, pairs


@pytest.mark.parametrize("fmt", ["txt", "csv", "tsv", "jsonl", "parquet"])
def test_python_and_cli_on_the_users_files(fmt, tiny_bert, tmp_path, capsys):
    import json

    from layerwise.cli import main
    from layerwise.data.readers import data_label, read_corpus, read_pairs
    from layerwise.evaluation.metrics import spearman

    corpus_file, pairs_file = _user_files(tmp_path, fmt)
    column = {} if fmt == "txt" else {"column": "body"}  # a .txt corpus has no columns (naming one is refused)
    corpus = read_corpus(corpus_file, **column)
    pairs = read_pairs(pairs_file, sentence1="left", sentence2="right", score="sim")
    assert corpus == CORPUS
    est = _make(tiny_bert).fit(corpus)
    rho = {m: 100 * spearman(est.similarity(pairs.sentences1, pairs.sentences2, measure=m), pairs.scores)
           for m in ("cosine", "js")}

    out = tmp_path / "out"
    code = main(["lattemix", "--model", str(tiny_bert), "--train", str(corpus_file),
                 *([] if fmt == "txt" else ["--text-column", "body"]), "--pairs", str(pairs_file), "--sentence1-column", "left", "--sentence2-column", "right",
                 "--score-column", "sim", "--kinds", "categorical", "--output", str(out), *CLI_SMALL])
    assert code == 0
    printed = capsys.readouterr().out
    label = data_label(pairs_file)
    assert label in printed and data_label(corpus_file) in printed and "categorical js" in printed
    (results,) = out.glob(f"lattemix-{data_label(corpus_file)}-*.json")  # named by the settings and the files
    result = json.loads(results.read_text())
    assert [p["label"] for p in result["pairs"]] == [label]
    for m in ("cosine", "js"):  # the command is the estimator: the same fit (seed 0), the same scores
        assert result["spearman_x100"][f"categorical {m}"][label] == pytest.approx([rho[m]], abs=1e-6)
    assert " " not in results.name


def test_cli_two_pairs_files_every_kind_and_saved_models(tiny_bert, tmp_path, capsys):
    import json

    from layerwise.cli import main

    corpus_file, pairs_a = _user_files(tmp_path, "txt")
    pairs_b = tmp_path / "more_pairs.tsv"
    _write_table(pairs_b, {"left": SENTENCES[:6], "right": SENTENCES[6:], "sim": [0, 1, 2, 3, 4, 5]})
    out = tmp_path / "out"
    assert main(["lattemix", "--model", str(tiny_bert), "--train", str(corpus_file), "--pairs", str(pairs_a),
                 str(pairs_b), "--sentence1-column", "left", "--sentence2-column", "right", "--score-column", "sim",
                 "--output", str(out), "--save-models", *CLI_SMALL]) == 0  # --kinds: all three by default
    printed = capsys.readouterr().out
    (results,) = out.glob("lattemix-*.json")
    result = json.loads(results.read_text())
    assert {"categorical cosine", "categorical js", "categorical l2", "normal l2", "normal cosine", "ae cosine"} <= set(
        result["spearman_x100"])
    assert len(result["pairs"]) == 2 and "normal l2" in printed
    saved = sorted(p.name for p in (out / "models").iterdir())
    assert len(saved) == 2 and not any("normal" in name for name in saved)  # a normal model has no vector to save
    st = ST.SentenceTransformer(str(out / "models" / saved[0]), device="cpu", trust_remote_code=True)
    assert st.encode(SENTENCES[:2]).shape[0] == 2


@pytest.mark.parametrize("case", ["wrong column", "empty corpus", "empty pairs", "pairs without train",
                                  "benchmark option"])
def test_cli_bad_files_give_one_line_and_exit_2_before_any_model_loads(case, tiny_bert, tmp_path, capsys,
                                                                      monkeypatch):
    from layerwise.cli import main
    from layerwise.methods.lattemix import estimator

    def no_model(*args, **kwargs):
        raise AssertionError("a model was loaded before the files were checked")

    monkeypatch.setattr(estimator, "LayerEncoder", no_model)
    corpus_file, pairs_file = _user_files(tmp_path, "csv")
    args = ["lattemix", "--model", str(tiny_bert), "--train", str(corpus_file), "--text-column",
            "body", "--pairs", str(pairs_file), "--sentence1-column", "left", "--sentence2-column", "right",
            "--score-column", "sim", "--output", str(tmp_path / "out"), *CLI_SMALL]
    if case == "wrong column":
        args[args.index("left")] = "first"
    elif case == "empty corpus":
        corpus_file.write_text("")
    elif case == "empty pairs":
        pairs_file.write_text("")
    elif case == "pairs without train":
        i = args.index("--train")
        del args[i:i + 4]
    else:
        args += ["--train-limit", "5"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()
