"""Bad input, as a demanding or hostile user gives it: each gets a clear one-line error (exit 2), a refusal, or a
correct result; never a traceback, never exit 0 with a meaningless number. Models: tests/conftest.py.

Faults during writes (kills, damaged files) are in test_faults.py; model files in test_reliability_models.py.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from conftest import write_senteval, write_stsb

RELIABILITY_GROUP = "Options and data"


@pytest.fixture()
def data(env):
    return write_senteval(write_stsb(env / "data", n_pairs=20))


def _no_model_load(monkeypatch):
    """Make any model load fail the test: the checks must come first."""
    from layerwise.encoders import layer_encoder

    def boom(*a, **k):
        raise AssertionError("a model was loaded before the arguments were checked")

    monkeypatch.setattr(layer_encoder, "_load", boom)


# -- numeric options: checked by argparse, before anything is loaded -------------------------------------

BAD_OPTIONS = [
    ("transfer --inner-splits 0", ["transfer", "--inner-splits", "0"], "--inner-splits"),
    ("transfer --outer-splits 0", ["transfer", "--outer-splits", "0"], "--outer-splits"),
    ("ablate --splits 0", ["ablate", "--splits", "0"], "--splits"),
    ("ablate --limited-seeds 0", ["ablate", "--limited-seeds", "0"], "--limited-seeds"),
    ("--max-length 2", ["layers", "--max-length", "2"], "--max-length"),
    ("--seed -1", ["search", "--seed", "-1"], "--seed"),
    ("--seed 2**32", ["search", "--seed", str(2**32)], "--seed"),
    ("--ridge-alpha nan", ["transfer", "--ridge-alpha", "nan"], "--ridge-alpha"),
    ("--ridge-alpha -1", ["transfer", "--ridge-alpha", "-1"], "--ridge-alpha"),
    ("lattemix --epochs 0", ["lattemix", "--epochs", "0"], "--epochs"),
    ("lattemix --lr inf", ["lattemix", "--lr", "inf"], "--lr"),
    ("--batch-size zero", ["layers", "--batch-size", "zero"], "--batch-size"),
    ("retrieval --nprobe 0", ["retrieval", "somewhere", "--nprobe", "0"], "--nprobe"),
    ("transfer --shortlist -2", ["transfer", "--shortlist", "-2"], "--shortlist"),
]


@pytest.mark.reliability("Numeric options")
@pytest.mark.parametrize("what, argv, option", BAD_OPTIONS, ids=[b[0] for b in BAD_OPTIONS])
def test_bad_numeric_option_is_one_line_before_any_work(what, argv, option, env, case, capsys, monkeypatch):
    _no_model_load(monkeypatch)
    seen = case.cli_error(argv, capsys, what=what, match=(option, "pass"))
    assert seen.seconds < 5


@pytest.mark.reliability("Numeric options")
def test_lattemix_layer_out_of_range_before_the_model_is_loaded(tiny_bert, data, env, case, capsys, monkeypatch):
    from conftest import write_unlabeled

    _no_model_load(monkeypatch)
    write_unlabeled(data)
    case.cli_error(["lattemix", "--model", tiny_bert, "--data-dir", data, "--datasets", "stsb", "--layer", "7",
                    "--output", env / "o", "-q"], capsys, what="lattemix --layer 7 on a 2-layer model",
                   match=("--layer 7", "3 (0 = embedding output .. 2 = last layer"))


@pytest.mark.reliability("Numeric options")
def test_search_dev_size_larger_than_the_data(tiny_bert, data, env, case, capsys, monkeypatch):
    _no_model_load(monkeypatch)
    case.cli_error(["search", "--model", tiny_bert, "--data-dir", data, "--dev-size", "350", "--output", env / "o",
                    "-q"], capsys, what="search --dev-size 350 on 20 test pairs (was found after encoding)",
                   match=("--dev-size 350", "from 2 to 18"))


@pytest.mark.reliability("Numeric options")
def test_search_without_dev_size_halves_a_small_data_set(tiny_bert, data, env, case, capsys):
    # --dev-size defaulted to 350 whatever the data: a file of fewer than 352 pairs failed until it was set
    seen = case.run(["search", "--model", tiny_bert, "--data-dir", data, "--splits", "1", "--no-head", "--output",
                     env / "o", "-q"], capsys)
    assert seen.code == 0, seen.err
    assert "splits (dev 10 pairs" in seen.out  # half of STS-B test's 20 pairs
    case.record("search on 20 pairs without --dev-size", "layerwise search --model M --data-dir D --splits 1",
                "correct result", "dev 10 pairs a split (350, or half a data set under 700)", code=0)


@pytest.mark.reliability("Unclear errors")
def test_a_built_in_data_set_without_a_data_folder(env, case, capsys, monkeypatch):
    _no_model_load(monkeypatch)
    case.cli_error(["search", "--dataset", "sts12", "--output", env / "o", "-q"], capsys,
                   what="search --dataset sts12 with no --data-dir nor $LAYERWISE_DATA (said 'not found in no data "
                        "folder')", match=("STS12", "none is given", "--data-dir", "--pairs"))
    case.cli_error(["transfer", "--tasks", "mr", "--output", env / "o", "-q"], capsys,
                   what="transfer --tasks mr with no data folder", match=("mr", "none is given", "--train"))


# -- paths ----------------------------------------------------------------------------------------------


@pytest.fixture()
def unwritable(tmp_path):
    """A folder this process cannot write to (chmod for a normal user; a read-only system folder for root)."""
    import os
    from pathlib import Path

    folder = tmp_path / "readonly"
    folder.mkdir()
    folder.chmod(0o555)
    candidates = [folder, Path("/sys/kernel"), Path("/proc/sys")]
    for c in candidates:
        try:
            (c / ".probe").write_text("x")
        except OSError:
            yield c
            break
        os.unlink(c / ".probe")
    else:
        pytest.skip("no unwritable folder on this machine")
    folder.chmod(0o755)


@pytest.mark.reliability("Paths")
def test_unwritable_output_is_refused_before_encoding(tiny_bert, data, env, unwritable, case, capsys, monkeypatch):
    _no_model_load(monkeypatch)
    case.cli_error(["layers", "--model", tiny_bert, "--data-dir", data, "--output", unwritable / "out", "-q"],
                   capsys, what="read-only --output (results would be computed, then lost)",
                   match=("--output", "not writable"))


@pytest.mark.reliability("Paths")
def test_unwritable_cache_is_refused_before_encoding(tiny_bert, data, env, unwritable, case, capsys, monkeypatch):
    _no_model_load(monkeypatch)
    case.cli_error(["layers", "--model", tiny_bert, "--data-dir", data, "--cache-dir", unwritable / "c",
                    "--output", env / "o", "-q"], capsys, what="read-only --cache-dir",
                   match=("--cache-dir", "not writable"))


@pytest.mark.reliability("Paths")
@pytest.mark.parametrize("option", ["--output", "--cache-dir", "--data-dir"])
def test_path_option_naming_a_file(option, tiny_bert, data, env, case, capsys, monkeypatch):
    _no_model_load(monkeypatch)
    a_file = env / "a-file.txt"
    a_file.write_text("not a folder")
    argv = ["layers", "--model", tiny_bert, "--data-dir", data, "--output", env / "o", "-q", option, a_file]
    case.cli_error(argv, capsys, what=f"{option} naming a file", match=(option, "is a file"))
    assert a_file.read_text() == "not a folder"


@pytest.mark.reliability("Paths")
def test_cuda_device_without_gpu(tiny_bert, data, env, case, capsys, monkeypatch):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    _no_model_load(monkeypatch)
    case.cli_error(["layers", "--model", tiny_bert, "--data-dir", data, "--device", "cuda", "--output", env / "o"],
                   capsys, what="--device cuda without a GPU", match=("--device cuda", "--device cpu"))


@pytest.mark.reliability("Paths")
def test_missing_data_set_found_before_the_model_is_loaded(tiny_bert, data, env, case, capsys, monkeypatch):
    _no_model_load(monkeypatch)
    case.cli_error(["ablate", "--model", tiny_bert, "--data-dir", data, "--sts", "stsb", "sickr", "--tasks", "cr",
                    "--limited-tasks", "cr", "--output", env / "o", "-q"], capsys,
                   what="ablate with SICK-R absent (was found after finishing STS-B)", match=("SICK-R", "not found"))
    case.cli_error(["transfer", "--model", tiny_bert, "--data-dir", data, "--tasks", "cr", "trec",
                    "--output", env / "o", "-q"], capsys, what="transfer with a task absent", match=("trec",))


# -- gold scores ----------------------------------------------------------------------------------------


def _set_scores(data_dir, scores):
    path = data_dir / "sts" / "STSB" / "sts-test.csv"
    rows = path.read_text().splitlines()
    for i, s in scores.items():
        fields = rows[i].split("\t")
        fields[4] = s
        rows[i] = "\t".join(fields)
    path.write_text("\n".join(rows) + "\n")


@pytest.mark.reliability("Gold scores")
@pytest.mark.parametrize("score", ["42", "-7", "inf"])
def test_gold_score_outside_the_range_is_refused(score, tiny_bert, data, env, case, capsys, monkeypatch):
    _set_scores(data, {3: score})
    _no_model_load(monkeypatch)
    case.cli_error(["layers", "--model", tiny_bert, "--data-dir", data, "--output", env / "o", "-q"], capsys,
                   what=f"STS-B gold score {score}", match=("STSB", score))


@pytest.mark.reliability("Gold scores")
def test_constant_gold_is_a_clear_error(tiny_bert, data, env, case, capsys):
    path = data / "sts" / "STSB" / "sts-test.csv"
    _set_scores(data, {i: "2.000" for i in range(len(path.read_text().splitlines()))})
    case.cli_error(["layers", "--model", tiny_bert, "--data-dir", data, "--output", env / "o", "-q"], capsys,
                   what="every gold score equal (was 'All-NaN slice encountered')", match=("constant", "gold"))


@pytest.mark.reliability("Gold scores")
def test_nan_or_inf_gold_in_sts_scores(case):
    from layerwise import sts_scores

    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(10, 4)), rng.normal(size=(10, 4))
    gold = rng.uniform(0, 5, size=10)
    for bad in (np.nan, np.inf):
        g = gold.copy()
        g[6] = bad
        with pytest.raises(ValueError, match="gold score 6 is") as err:
            sts_scores(a, b, g)
        case.record(f"sts_scores with one {bad} gold score (was nan without a word)",
                    f"sts_scores(emb1, emb2, gold) with gold[6] = {bad}", "clear error", str(err.value))


@pytest.mark.reliability("Library arguments")
def test_run_bert_lc_groups_of_the_wrong_length(case):
    from layerwise import LayerStack, run_bert_lc
    from layerwise.methods.lc.protocol import LCProtocol

    rng = np.random.default_rng(0)
    s1, s2 = (LayerStack(mean=rng.normal(size=(30, 3, 4)), cls=rng.normal(size=(30, 3, 4))) for _ in range(2))
    gold = rng.uniform(0, 5, size=30)
    with pytest.raises(ValueError, match=r"groups has shape \(29,\) but there are 30 pairs") as err:
        run_bert_lc(s1, s2, gold, LCProtocol(aggregation="wmean", dev_size=10), groups=np.array(["a"] * 29))
    case.record("run_bert_lc with 29 groups for 30 pairs", "run_bert_lc(..., groups=29 labels)", "clear error",
                str(err.value))


@pytest.mark.reliability("Library arguments")
def test_search_on_constant_cosines_and_too_short_max_length(tiny_bert, case):
    from layerwise import LayerEncoder, LayerSubsetSearch

    a = np.ones((10, 3, 4))
    with pytest.raises(ValueError, match="every subset's correlation is undefined") as err:
        LayerSubsetSearch().fit(a, a, np.arange(10.0))
    case.record("subset search where every pair has the same cosine (was 'All-NaN slice encountered')",
                "LayerSubsetSearch().fit(a, a, gold)", "clear error", str(err.value))
    with pytest.raises(ValueError, match="leaves no token for text") as err:
        LayerEncoder(tiny_bert, max_length=2, cache_dir=False)
    case.record("LayerEncoder(max_length=2) (was an all-NaN table)", "LayerEncoder(model, max_length=2)",
                "clear error", str(err.value))


@pytest.mark.reliability("Library arguments")
def test_library_ridge_alpha_nan_and_zero_splits(case):
    from layerwise.evaluation.classification import inner_splits, outer_splits
    from layerwise.layers import LayerStack
    from layerwise.methods.lc.screen import RidgeScreen
    from layerwise.methods.lc.transfer import TransferFeatures

    labels = np.array([0, 1] * 20)
    stack = LayerStack(mean=np.random.default_rng(0).normal(size=(40, 3, 4)), cls=np.zeros((40, 3, 4)))
    with pytest.raises(ValueError, match="ridge alpha must be a finite number above 0") as err:
        RidgeScreen(TransferFeatures(first=stack, labels=labels, n_classes=2), alpha=float("nan"))
    case.record("RidgeScreen(alpha=nan) (was a PyTorch internal assert)", "RidgeScreen(features, alpha=nan)",
                "clear error", str(err.value))
    for fn, name in ((outer_splits, "outer"), (inner_splits, "inner")):
        with pytest.raises(ValueError, match=f"{name} splits must be") as err:
            fn(labels, n_splits=0)
        case.record(f"{name}_splits(n_splits=0) (was a NaN screen picking (0,))", f"{name}_splits(labels, n_splits=0)",
                    "clear error", str(err.value))


# -- one scale for scores -------------------------------------------------------------------------------


@pytest.mark.reliability("Results")
def test_search_scores_are_on_the_sts_scores_scale(case):
    from layerwise import LayerSubsetSearch, layer_mean, sts_scores
    from layerwise.layers import LayerStack

    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(40, 4, 8)), rng.normal(size=(40, 4, 8))
    gold = rng.uniform(0, 5, size=40)
    s = LayerSubsetSearch().fit(a, b, gold)
    direct = sts_scores(layer_mean(LayerStack(mean=a, cls=a), s.best_layers_),
                        layer_mean(LayerStack(mean=b, cls=b), s.best_layers_), gold)["spearman"]
    assert s.best_score_ == pytest.approx(direct, abs=1e-8)
    assert s.top(1)[0][1] == pytest.approx(direct, abs=1e-8)
    case.record("best_score_ of the search against sts_scores (was 0-1 vs x100)", "LayerSubsetSearch().fit(...)",
                "correct result", f"best_score_ {s.best_score_:.4f} == sts_scores spearman {direct:.4f}")


# -- exit codes: interrupt, bugs, --debug, --version, provenance ----------------------------------------


@pytest.mark.reliability("Exit codes")
def test_ctrl_c_prints_one_line_and_keeps_the_cache(tiny_bert, data, env, case, capsys, monkeypatch):
    from layerwise.cache import LayerCache
    from layerwise.encoders.layer_encoder import LayerEncoder

    monkeypatch.setitem(LayerCache.get_or_compute.__kwdefaults__, "chunk_size", 8)  # several shards
    real = LayerEncoder._encode_unique
    calls = []

    def interrupted(self, texts):
        calls.append(len(texts))
        if len(calls) > 1:
            raise KeyboardInterrupt
        return real(self, texts)

    monkeypatch.setattr(LayerEncoder, "_encode_unique", interrupted)
    argv = ["layers", "--model", tiny_bert, "--data-dir", data, "--output", env / "o", "-q"]
    seen = case.cli_error(argv, capsys, what="Ctrl-C while encoding (was a KeyboardInterrupt traceback)",
                          match=("interrupted", "layer cache", "continues"), code=130, outcome="recovery")
    assert "error" not in seen.err
    assert len(list((env / "home" / "cache").rglob("shard-*.safetensors"))) == 1  # the chunk finished before
    monkeypatch.setattr(LayerEncoder, "_encode_unique", real)
    assert case.run(argv, capsys).code == 0
    assert case.run([*argv[:-3], "--output", env / "fresh", "--cache-dir", env / "c2", "-q"], capsys).code == 0
    resumed = json.loads(next((env / "o").glob("*.json")).read_text())
    fresh = json.loads(next((env / "fresh").glob("*.json")).read_text())
    assert resumed["per_layer"] == fresh["per_layer"]


@pytest.mark.reliability("Exit codes")
def test_library_bug_is_reported_as_a_bug(tiny_bert, data, env, case, capsys, monkeypatch):
    from layerwise.benchmarks.lc import run

    def bug(*a, **k):
        return {}["lc"]

    monkeypatch.setattr(run, "run_layers", bug)
    argv = ["layers", "--model", tiny_bert, "--data-dir", data, "--output", env / "o", "-q"]
    case.cli_error(argv, capsys, what="a library bug (KeyError) (was 'error: 'lc'' with exit 2)",
                   match=("internal error (KeyError: 'lc')", "this is a bug", "--debug"), code=1,
                   outcome="correct result")
    with pytest.raises(KeyError):
        case.run(["--debug", *argv], capsys)


def test_version_flag_and_provenance(tiny_bert, data, env, case, capsys):
    from layerwise import __version__

    seen = case.run(["--version"], capsys)
    assert seen.code == 0 and seen.out.startswith(f"layerwise {__version__}")
    assert case.run(["layers", "--model", tiny_bert, "--data-dir", data, "--output", env / "o", "-q"], capsys).code == 0
    result = json.loads(next((env / "o").glob("*.json")).read_text())
    versions = result["environment"]["versions"]
    assert versions["layerwise"] == __version__ and versions["scikit-learn"]
    assert "faiss" in versions
    source = result["environment"]["source"]
    if source is not None:  # a git checkout: the commit and whether it is dirty
        assert len(source["commit"]) == 40 and isinstance(source["dirty"], bool)


def test_progress_bars_are_rare_without_a_terminal():
    import io

    from layerwise._progress import FILE_MININTERVAL, progress

    stream = io.StringIO()
    with progress(total=1000, file=stream, desc="x") as bar:
        assert bar.mininterval == FILE_MININTERVAL
        for _ in range(1000):
            bar.update(1)
    assert stream.getvalue().count("\r") <= 3  # start, end: not one line per update


@pytest.mark.reliability("Paths")
def test_retrieval_model_dir_missing(env, case, capsys):
    case.cli_error(["retrieval", env / "no-model", "--output", env / "o", "-q"], capsys,
                   what="retrieval with a model folder that does not exist", match=("MODEL_DIR", "does not exist"))


@pytest.mark.reliability("Paths")
def test_unknown_path_in_data_dir_keeps_files(tiny_bert, env, case, capsys):
    target = env / "missing"
    case.cli_error(["layers", "--model", tiny_bert, "--data-dir", target, "--output", env / "o", "-q"], capsys,
                   what="--data-dir that does not exist", match=("--data-dir", "does not exist"))
    assert not target.exists()


@pytest.mark.reliability("Paths")
def test_models_assemble_never_deletes_a_users_folder(env, case, capsys):
    dest = env / "mine"
    dest.mkdir()
    (dest / "notes.txt").write_text("keep me")
    case.cli_error(["models", "assemble", "--dest", dest], capsys,
                   what="models assemble --dest on a folder of the user's (was shutil.rmtree)",
                   match=("never deleted", "new or empty folder"), outcome="refusal")
    assert (dest / "notes.txt").read_text() == "keep me"
    shutil.rmtree(dest)
