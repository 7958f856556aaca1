import json

import pytest

from conftest import write_stsb
from layerwise.cli import main


@pytest.fixture()
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("LAYERWISE_HOME", str(tmp_path / "home"))
    return tmp_path


def test_search_end_to_end_on_tiny_model(tiny_bert, env, capsys):
    data = write_stsb(env / "data", n_pairs=30)
    out = env / "out"
    args = ["search", "--model", str(tiny_bert), "--data-dir", str(data), "--split", "all",
            "--dev-size", "20", "--splits", "2", "--seed", "3", "--output", str(out), "-q"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "per-layer Spearman" in printed and "lc" in printed
    files = sorted(p.name for p in out.iterdir())
    assert any(f.endswith(".json") for f in files) and any(f.endswith(".md") for f in files)
    assert any(f.endswith(".png") for f in files)
    result = json.loads(next(out.glob("*.json")).read_text())
    assert result["data"]["n_pairs"] == 90 and result["data"]["aggregation"] == "all"
    assert result["protocol"]["split_seeds"] == [3, 4]
    assert result["model"]["weights_sha256"] and result["environment"]["versions"]["torch"]
    assert "layerwise search" in result["environment"]["command"]
    assert len(result["per_layer"]["mean"]) == 3
    assert set(result["lc"]["summary"]["spearman"]) >= {"cls", "last", "first0_last", "last_four", "random", "lc"}
    # second run hits the cache and gives the same numbers
    assert main(args) == 0
    again = json.loads(next(out.glob("*.json")).read_text())
    assert again["lc"]["summary"] == result["lc"]["summary"]
    assert result["cache"]["computed"] > 0 and again["cache"] == {**result["cache"], "stored": result["cache"]["distinct"], "computed": 0}
    md = next(out.glob("*.md")).read_text()
    assert "aggregation: `all`" in md and "Chosen subsets" in md
    assert result["lc_mlp"] == "pooler head from pre-training (in the checkpoint)" and "lc_mlp" in result["lc"]["summary"]["spearman"]
    assert "LC + MLP" in md
    # another split, max length or data folder is another file: nothing is overwritten
    assert main(args[:-1] + ["--split", "test", "-q"]) == 0
    assert main(args[:-1] + ["--max-length", "8", "-q"]) == 0
    (env / "data2").mkdir()
    import shutil
    shutil.copytree(data, env / "data2" / "copy")
    assert main(args[:args.index("--data-dir") + 1] + [str(env / "data2" / "copy")]
                + args[args.index("--data-dir") + 2:]) == 0
    stems = sorted(p.stem for p in out.glob("search-*.json"))
    assert len(stems) == 4 and len({s.rsplit("-", 1)[1] for s in stems}) == 4, stems
    assert any("-test-all-" in s for s in stems) and any("-all-all-" in s for s in stems)


def test_layers_command(tiny_bert, env, capsys):
    data = write_stsb(env / "data", n_pairs=20)
    assert main(["layers", "--model", str(tiny_bert), "--data-dir", str(data), "--output", str(env / "o"), "-q"]) == 0
    assert "mean" in capsys.readouterr().out
    assert list((env / "o").glob("layers-*.png"))


def test_clear_errors(env, capsys, tiny_bert):
    assert main(["search", "--model", "bert-base-uncased", "-q"]) == 2
    err = capsys.readouterr().err
    assert "unknown model 'bert-base-uncased'" in err and "local" in err
    with pytest.raises(SystemExit) as e:
        main(["search", "--dataset", "sts99"])
    assert e.value.code == 2
    assert "invalid choice" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["search", "--no-such-option"])
    assert main(["search", "--model", str(tiny_bert), "--data-dir", str(env / "missing"), "-q"]) == 2
    assert "missing" in capsys.readouterr().err


def test_lattemix_end_to_end_on_tiny_model(tiny_bert, env, capsys):
    from conftest import write_unlabeled

    data = write_unlabeled(write_stsb(env / "data", n_pairs=15))
    out = env / "lm"
    args = ["lattemix", "--model", str(tiny_bert), "--data-dir", str(data), "--datasets", "stsb",
            "--seeds", "0", "1", "--n-classes", "8", "--latent-dim", "4", "--beta-warmup-steps", "5",
            "--output", str(out), "--save-models", "-q"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "Latte-Mix: categorical VAE, -JS" in printed and "mean pooling" in printed
    from layerwise.benchmarks.lattemix.results import LatteMixResult, LatteMixRun

    doc = json.loads(next(out.glob("lattemix-*.json")).read_text())
    assert (doc["kind"], doc["schema"]) == ("lattemix", 1)
    result = LatteMixResult.from_dict(doc)
    assert json.loads(json.dumps(result.to_dict())) == doc  # the file reads back to the same result
    assert result.layer == 2 and result.training_text.n_sentences > 0 and result.training_text.n_tokens > 0
    assert set(result.runs) == {"categorical", "normal", "ae"} and result.seeds == [0, 1]
    assert len(result.runs["categorical"].scores["js"]["stsb"]) == 2  # one score per seed
    settings = result.settings
    assert isinstance(settings, LatteMixRun) and settings.seeds == (0, 1) and settings.datasets == ("stsb",)
    assert settings.config.n_classes == 8 and result.runs["normal"].model_config.latent_dim == 4
    assert "lattemix" in result.environment["command"]
    assert list(out.glob("lattemix-*.png")) and list(out.glob("lattemix-*.md"))
    assert (out / "models" / "categorical-layer2-seed1" / "model.safetensors").is_file()


def test_train_then_retrieval_on_tiny_model(tiny_bert, env, capsys):
    from conftest import write_unlabeled

    data = write_unlabeled(write_stsb(env / "data", n_pairs=12))
    q = data / "quora"
    q.mkdir()
    (q / "dev.tsv").write_text(
        "1\ta man is playing guitar .\ta man plays the guitar .\t1\n"
        "0\ta child eats food .\tthe dog is swimming in the water .\t2\n"
        "1\ta woman plays piano .\ta woman is riding a bike in the park .\t3\n"
    )
    out = env / "train"
    args = ["train", "--model", str(tiny_bert), "--objective", "sup_hard_neg", "--data-dir", str(data),
            "--steps", "3", "--batch-size", "4", "--eval-every", "2", "--output", str(out), "-q"]
    assert main(args) == 0
    assert "STS-B dev Spearman" in capsys.readouterr().out
    from layerwise.benchmarks.layer_attention.results import RetrievalResult, TrainResult

    doc = json.loads((out / "train.json").read_text())
    assert (doc["kind"], doc["schema"]) == ("train", 1)
    result = TrainResult.from_dict(doc)
    assert json.loads(json.dumps(result.to_dict())) == doc  # the file reads back to the same result
    assert result.n_examples > 0 and "SNLI" in result.training_data and result.output == str(out)
    h = result.history
    assert h.step == [1, 2, 3] and len(h.loss) == 3 and [s for s, _ in h.dev] == [2, 3]
    assert h.best_dev == max(v for _, v in h.dev) and h.config.objective == "sup_hard_neg" and h.config.batch_size == 4
    assert main(["retrieval", str(out / "best"), "--data-dir", str(data), "--index", "exact", "flat",
                 "--output", str(env / "ret"), "-q"]) == 0
    printed = capsys.readouterr().out
    assert "MRR@10" in printed and "faiss flat" in printed
    doc = json.loads((env / "ret" / "retrieval-quora-dev.json").read_text())
    assert (doc["kind"], doc["schema"]) == ("retrieval", 1) and doc["results"][0]["index"] == "exact (numpy)"
    ret = RetrievalResult.from_dict(doc)
    assert json.loads(json.dumps(ret.to_dict())) == doc
    assert [r.index for r in ret.results] == ["exact (numpy)", "faiss flat"] and ret.data.queries == 2
    assert ret.results[0].mrr_at_10 == ret.results[1].mrr_at_10  # exact and flat agree
    assert ret.results[0].recall == ret.results[1].recall and set(ret.results[0].recall) == {1, 5, 10}
    capsys.readouterr()
    before = (out / "train.json").read_text()
    assert main(args) == 2  # an existing run is not overwritten without --resume / --overwrite
    assert "pass resume=True" in capsys.readouterr().err and (out / "train.json").read_text() == before
    assert main([*args, "--output", str(env / "fresh"), "--resume"]) == 2  # nothing to resume
    assert "nothing to resume" in capsys.readouterr().err and not (env / "fresh" / "last").exists()
    assert main(["train", "--model", str(tiny_bert), "--train-data", str(env / "none.txt"),
                 "--data-dir", str(data), "--steps", "1", "--output", str(out), "--overwrite", "-q"]) == 2
    assert (out / "last").is_dir()  # the failed start removed nothing: the data error came first


def test_transfer_bootstrap_prints_lc_against_each_baseline_as_stored(tiny_bert, env, capsys):
    from conftest import write_senteval

    data, out = write_senteval(env / "data", n=60), env / "out"
    args = ["transfer", "--model", str(tiny_bert), "--data-dir", str(data), "--tasks", "CR", "--outer-splits", "2",
            "--inner-splits", "2", "--jobs", "1", "--output", str(out), "-q"]
    assert main([*args, "--bootstrap", "50"]) == 0
    printed = capsys.readouterr().out
    (state,) = (out / "transfer").glob("tiny-bert-cr--*.json")
    tests = json.loads(state.read_text())["payload"]["result"]["significance"]
    assert set(tests) == {"cls", "last", "last_four", "random", "lc_mlp"}
    n = tests["last"]["n_units"]  # the test examples of the outer splits, pooled
    assert f"p against each baseline (paired bootstrap over {n} test examples, 50 resamples; yes: p < 0.01):" in printed
    for name, t in tests.items():
        verdict = "yes" if t["p_value"] < 0.01 else "no"
        assert f"lc vs {name:9s} {t['difference']:+.2f}  p {t['p_value']:.4f} ({verdict})" in printed
    assert main(args) == 0  # no --bootstrap: another part, and nothing tested or printed
    assert "p against" not in capsys.readouterr().out


def test_transfer_end_to_end_and_resume(tiny_bert, env, capsys):
    from conftest import write_senteval

    data = write_senteval(env / "data", n=60)
    out = env / "out"
    args = ["transfer", "--model", str(tiny_bert), "--data-dir", str(data), "--tasks", "CR", "mrpc",
            "--outer-splits", "3", "--inner-splits", "2", "--jobs", "1", "--output", str(out), "-q"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "cr" in printed and "lc" in printed
    summary = json.loads((out / "transfer-tiny-bert.json").read_text())
    cr = summary["tasks"]["cr"]
    assert cr["n_examples"] == 60 and summary["tasks"]["mrpc"]["n_examples"] == 90
    # the tiny BERT's checkpoint holds pooler weights, so LC + MLP runs (random weights, but stored ones)
    assert set(cr["result"]["summary"]) == {"cls", "last", "last_four", "random", "lc", "lc_mlp"}
    assert cr["head"] == "pooler head from pre-training (in the checkpoint)"
    assert summary["protocol"]["classifier"]["C"] == 10 and "regularization parameter 10" in summary["protocol"]["classifier"]["note"]
    assert len(cr["result"]["splits"]) == 3 and cr["result"]["splits"][0]["seed"] == 0
    md = (out / "transfer-tiny-bert.md").read_text()
    assert "| method | CR | MRPC | avg |" in md and "Relative error reduction" in md
    assert "nan" not in md  # an undefined reduction (a baseline without error on MRPC's tiny test parts) is n/a
    # cut the CR run back to one finished split, as if interrupted: the next run computes only the rest
    (state,) = (out / "transfer").glob("tiny-bert-cr--*.json")
    cut = json.loads(state.read_text())
    cut["payload"]["result"]["splits"] = cut["payload"]["result"]["splits"][:1]
    cut["complete"] = False
    assert [r["splits"] for r in cut["runs"]] == [[0, 3]]
    cut["runs"][0]["splits"] = [0, 1]
    state.write_text(json.dumps(cut))
    assert main(args) == 0
    again = json.loads((out / "transfer-tiny-bert.json").read_text())
    assert again["tasks"]["cr"]["result"]["summary"] == cr["result"]["summary"]
    assert again["tasks"]["cr"]["result"]["splits"][0]["seconds"] == cut["payload"]["result"]["splits"][0]["seconds"]
    resumed = json.loads(state.read_text())
    assert resumed["complete"] and [r["splits"] for r in resumed["runs"]] == [[0, 1], [1, 3]]  # who computed which
    from layerwise.reports import source_revision

    assert resumed["runs"][1]["source"] == source_revision()  # and with which code (page_parts.part_revisions)
    assert main(args) == 0  # nothing left to compute: the history and environment stay as they were
    assert json.loads(state.read_text())["runs"] == resumed["runs"]
    assert json.loads(state.read_text())["payload"]["environment"] == resumed["payload"]["environment"]
    # a setting that changes the numbers (ridge alpha, max length) is a new part: nothing reused, the old one kept
    assert main(args + ["--ridge-alpha", "10", "--max-length", "8"]) == 0
    assert len(list((out / "transfer").glob("tiny-bert-cr--*.json"))) == 2
    other = json.loads((out / "transfer-tiny-bert.json").read_text())
    assert other["tasks"]["cr"]["result"]["ridge_alpha"] == 10 and other["encoder"]["max_length"] == 8
    assert other["tasks"]["cr"]["result"]["splits"][0]["seconds"] != again["tasks"]["cr"]["result"]["splits"][0]["seconds"]
    # the paper's exact protocol (k-fold inner CV, every subset by SAGA): a part of its own beside the default
    exact = ["transfer", "--model", str(tiny_bert), "--data-dir", str(data), "--tasks", "CR", "--outer-splits", "1",
             "--inner-splits", "2", "--inner", "kfold", "--shortlist", "0", "--jobs", "1", "--output", str(out), "-q"]
    assert main(exact) == 0
    (exact_state,) = (out / "transfer").glob("tiny-bert-cr-exact--*.json")
    assert json.loads(exact_state.read_text())["key"]["protocol"]["inner"] == "kfold"
    assert "2-fold inner cross-validation" in json.loads((out / "transfer-tiny-bert.json").read_text())["protocol"][
        "name"]
    state.write_text("{not json")
    assert main(args) == 2
    assert "move it away" in capsys.readouterr().err
    assert main(["transfer", "--model", str(tiny_bert), "--data-dir", str(data), "--tasks", "cr", "sst9", "-q"]) == 2
    assert "Unknown transfer task 'sst9'" in capsys.readouterr().err


def test_ablate_end_to_end(tiny_bert, env, capsys):
    from conftest import write_senteval

    data = write_senteval(write_stsb(env / "data", n_pairs=20), n=64)
    out = env / "abl"
    args = ["ablate", "--model", str(tiny_bert), "--data-dir", str(data), "--sts", "stsb", "--tasks", "cr",
            "--limited-tasks", "cr", "--max-denominator", "4", "--limited-seeds", "2", "--splits", "2",
            "--dev-size", "8", "--outer-splits", "2", "--inner-splits", "2", "--jobs", "1", "--output", str(out), "-q"]
    assert main(args) == 0
    result = json.loads((out / "ablations-tiny-bert.json").read_text())
    sts = result["sts"]["stsb"]["result"]
    assert set(sts["by_size"]) == {"1", "2", "3"} and set(sts["without"]) == {"0", "1", "2"}
    assert len(sts["best"]) == 2
    # the best subset of any size is at least as good on dev as each size's best, so it is one of them
    for choice in sts["choices"]:
        assert choice["best"] in choice["by_size"].values()
    lim = result["limited"]["cr"]["result"]
    assert list(lim) == ["0.5", "0.25"] and len(lim["0.5"]["lc"]) == 2
    assert lim["0.25"]["n_train"] < lim["0.5"]["n_train"]
    for name in ("n_layers_sts", "exclude_sts", "n_layers_transfer", "exclude_transfer", "limited"):
        assert (out / f"ablations-tiny-bert-{name}.png").is_file()
    md = (out / "ablations-tiny-bert.md").read_text()
    assert "(a) Number of layers N, STS" in md and "(c) Limited training data" in md and "| 1/4 |" in md
    parts = sorted(p.name.split("--")[0] for p in (out / "ablations").glob("*.json"))
    assert parts == ["tiny-bert-limited-cr", "tiny-bert-sts-stsb", "tiny-bert-transfer-cr"]
    assert main(args) == 0  # every part reused
    assert json.loads((out / "ablations-tiny-bert.json").read_text())["sts"] == result["sts"]
    assert len(list((out / "ablations").glob("*.json"))) == 3
    assert main(args + ["--max-length", "8", "--sts"]) == 0  # another key: computed again, the first kept
    assert len(list((out / "ablations").glob("*.json"))) == 5


@pytest.mark.parametrize("module", ["layerwise", "layerwise.cli"])
def test_python_dash_m_runs_the_command(module):
    # `python -m layerwise` said "'layerwise' is a package and cannot be directly executed"
    import subprocess
    import sys

    from layerwise import __version__

    done = subprocess.run([sys.executable, "-m", module, "--version"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert __version__ in done.stdout
