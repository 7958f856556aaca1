"""Data loss in output folders (issue 27): no command replaces a file of its --output folder that it did not write.

Every command that writes results into a folder lists them in the folder's manifest (``layerwise.outputs``); a file
of one of its output names that the manifest does not list with its current bytes (the user's, or the tool's edited
since) is refused in one line before any model loads, with and without ``--overwrite``; the tool's own outputs are
replaced by a second run; a write killed at any point leaves every file whole and listed.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap

import pytest

from reliability_cases import child_env
from reliability_cases import no_model_load as _no_model_load

RELIABILITY_GROUP = "Data loss"

MINE = b"the user's own notes: not a layerwise output\n"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    from conftest import write_senteval, write_stsb, write_unlabeled

    return write_senteval(write_unlabeled(write_stsb(tmp_path_factory.mktemp("out-data") / "data", n_pairs=12)))


# command -> (argv after the command, with {model} {data} {out}; a name the command writes into --output)
COMMANDS = {
    "search": (["--model", "{model}", "--data-dir", "{data}", "--dev-size", "5", "--output", "{out}", "-q"],
               "search-tiny-bert-STS-B-test-all-5f1c2e9a.md"),
    "layers": (["--model", "{model}", "--data-dir", "{data}", "--output", "{out}", "-q"],
               "layers-tiny-bert-STS-B-test-all-5f1c2e9a.png"),
    "transfer": (["--model", "{model}", "--data-dir", "{data}", "--tasks", "cr", "--output", "{out}", "-q"],
                 "transfer-tiny-bert.json"),
    "ablate": (["--model", "{model}", "--data-dir", "{data}", "--sts", "stsb", "--tasks", "cr", "--limited-tasks",
                "cr", "--output", "{out}", "-q"], "ablations-tiny-bert.md"),
    "lattemix": (["--model", "{model}", "--data-dir", "{data}", "--datasets", "stsb", "--output", "{out}", "-q"],
                 "lattemix-tiny-bert-layer2.json"),
    "train": (["--model", "{model}", "--data-dir", "{data}", "--steps", "1", "--output", "{out}", "-q"], "train.json"),
    "retrieval": (["{model}", "--data-dir", "{data}", "--output", "{out}", "-q"], "retrieval-quora-dev.json"),
    "wordsim": (["--model", "{model}", "--data-dir", "{data}", "--output", "{out}", "-q"], "wordsim-tiny-bert.json"),
    "tmft": (["--model", "{model}", "--data-dir", "{data}", "--layers", "1", "--output", "{out}", "-q"], "tmft.json"),
    "multitask": (["--model", "{model}", "--data-dir", "{data}", "--output", "{out}", "-q"], "multitask.md"),
    "results": (["render", "lc-sts", "--output", "{out}"], "lc-sts.md"),
}
WITH_OVERWRITE = ("search", "transfer", "train", "multitask")  # the commands that take --overwrite


def _argv(command, tiny_bert, data, out, overwrite):
    args, name = COMMANDS[command]
    filled = [a.format(model=tiny_bert, data=data, out=out) for a in args]
    return [command, *filled, *(["--overwrite"] if overwrite else [])], name


CASES = [(c, o) for c in COMMANDS for o in ((False, True) if c in WITH_OVERWRITE else (False,))]


@pytest.mark.reliability("Data loss")
@pytest.mark.parametrize("command, overwrite", CASES, ids=[f"{c}{'-overwrite' if o else ''}" for c, o in CASES])
def test_a_user_file_of_an_output_name_is_never_replaced(command, overwrite, tiny_bert, data, env, case, capsys,
                                                         monkeypatch):
    _no_model_load(monkeypatch)
    out = env / "out"
    out.mkdir()
    argv, name = _argv(command, tiny_bert, data, out, overwrite)
    (out / name).write_bytes(MINE)
    case.cli_error(argv, capsys, outcome="refusal", match=(name, "not written by layerwise"),
                   what=f"{command}{' --overwrite' if overwrite else ''} with a file of the user's named {name} in "
                        "--output (was: replaced)")
    assert (out / name).read_bytes() == MINE
    assert sorted(p.name for p in out.iterdir()) == [name]  # nothing written, not even a manifest


@pytest.mark.reliability("Data loss")
def test_layers_replaces_its_own_outputs_and_refuses_an_edited_one(tiny_bert, data, env, case, capsys, monkeypatch):
    from layerwise.outputs import MANIFEST

    out = env / "out"
    argv, _ = _argv("layers", tiny_bert, data, out, False)
    assert case.run(argv, capsys).code == 0
    written = sorted(p.name for p in out.iterdir() if p.name != MANIFEST)
    assert len(written) == 3 and all(n.startswith("layers-") for n in written)
    listed = (out / MANIFEST).read_text().splitlines()
    assert sorted(line.split("  ")[1] for line in listed) == written
    (out / "notes.md").write_bytes(MINE)  # another name: never touched
    second = case.run(argv, capsys)
    assert second.code == 0, second.err
    assert sorted(p.name for p in out.iterdir()) == sorted([*written, MANIFEST, "notes.md"])  # no temp file left
    case.record("layers run twice into one --output (its own outputs, listed in the manifest)",
                "layerwise " + " ".join(map(str, argv)),
                "correct result", "the second run replaced its three files; notes.md of the user's kept; no temp "
                "file", code=second.code)
    md = next(out / n for n in written if n.endswith(".md"))
    md.write_text(md.read_text() + "\nmy own remark\n")
    edited = md.read_bytes()
    _no_model_load(monkeypatch)
    case.cli_error(argv, capsys, outcome="refusal", match=(md.name, "changed since"),
                   what="layers over its own output that the user edited since (was: replaced)")
    assert md.read_bytes() == edited and (out / "notes.md").read_bytes() == MINE


@pytest.mark.reliability("Data loss")
def test_train_overwrite_replaces_only_its_own_run(tiny_bert, data, env, case, capsys):
    out = env / "run"
    argv, _ = _argv("train", tiny_bert, data, out, False)
    assert case.run(argv, capsys).code == 0
    seen = case.run([*argv, "--overwrite"], capsys)
    assert seen.code == 0, seen.err
    case.record("train --overwrite over its own run (train.json listed in the manifest)",
                "layerwise " + " ".join(map(str, argv)) + " --overwrite", "correct result",
                "the run's train.json, last/ and best/ replaced", code=seen.code)
    (out / "train.json").write_bytes(MINE)
    best = sorted(p.name for p in (out / "best").iterdir())
    case.cli_error([*argv, "--overwrite"], capsys, outcome="refusal", match=("train.json", "not written by layerwise"),
                   what="train --overwrite where train.json was replaced by a file of the user's (was: deleted)")
    assert (out / "train.json").read_bytes() == MINE and sorted(p.name for p in (out / "best").iterdir()) == best


@pytest.mark.reliability("Data loss")
def test_train_overwrite_never_removes_a_user_folder_named_last(tiny_bert, data, env, case, capsys, monkeypatch):
    _no_model_load(monkeypatch)
    out = env / "run"
    (out / "last").mkdir(parents=True)
    (out / "last" / "plan.txt").write_bytes(MINE)
    argv, _ = _argv("train", tiny_bert, data, out, True)
    case.cli_error(argv, capsys, outcome="refusal", match=("last", "not written by layerwise"),
                   what="train --overwrite with a folder of the user's named last/ (was: removed with rmtree)")
    assert (out / "last" / "plan.txt").read_bytes() == MINE


@pytest.mark.reliability("Data loss")
def test_a_write_no_pattern_foresaw_is_refused_at_the_write(env, case):
    """The guard is on every write into the folder, not only on the names checked before the work."""
    from layerwise.outputs import ForeignFileError, guarded
    from layerwise.reports import write_json

    (env / "later.json").write_bytes(MINE)
    with guarded(env), pytest.raises(ForeignFileError, match="not written by layerwise") as info:
        write_json(env / "later.json", {"a": 1})
    assert (env / "later.json").read_bytes() == MINE
    assert not [p for p in env.iterdir() if p.name.startswith(".later.json")]
    case.record("a results write to a name of the user's that no pre-check named (library guard)",
                "write_json(OUT/later.json) inside outputs.guarded(OUT)", "refusal", str(info.value))


def test_outputs_outside_a_guarded_folder_are_plain_atomic_writes(env):
    from layerwise.outputs import MANIFEST, guarded
    from layerwise.reports import write_text

    with guarded(env / "results"):
        write_text(env / "elsewhere.md", "x")  # not in the guarded folder
        write_text(env / "results" / "sub" / "page.md", "y")  # a subfolder: its writer's own business
    assert not (env / MANIFEST).exists() and not (env / "results" / "sub" / MANIFEST).exists()


def test_a_damaged_manifest_is_refused_in_one_line(env):
    from layerwise.errors import UsageError
    from layerwise.outputs import MANIFEST, check_outputs

    (env / MANIFEST).write_text("not a manifest\n")
    with pytest.raises(UsageError, match="is not a '<sha256>  <name>' line"):
        check_outputs(env, ("*.json",))


@pytest.mark.reliability("Data loss")
def test_an_interrupted_write_leaves_the_old_file_whole_and_listed(env, case, monkeypatch):
    from layerwise import files
    from layerwise.outputs import MANIFEST, OutputManifest, guarded
    from layerwise.reports import write_json

    path = env / "search-x.json"
    with guarded(env):
        write_json(path, {"run": 1})
    before = path.read_bytes()

    def killed(src, dst):
        raise KeyboardInterrupt  # Ctrl-C between the temporary file and the rename

    monkeypatch.setattr(files.os, "replace", killed)
    with guarded(env), pytest.raises(KeyboardInterrupt):
        write_json(path, {"run": 2})
    monkeypatch.undo()
    assert path.read_bytes() == before and sorted(p.name for p in env.iterdir()) == [MANIFEST, path.name]
    assert not OutputManifest(env).foreign(path.name)  # still the tool's: the next run replaces it
    with guarded(env):
        write_json(path, {"run": 3})
    assert json.loads(path.read_text()) == {"run": 3} and len((env / MANIFEST).read_text().splitlines()) == 1
    case.record("Ctrl-C between an output's temporary file and its rename", "write_json inside outputs.guarded",
                "recovery", "the old file whole and still listed; no temporary file; the next write replaced it")


KILLED_WRITE = textwrap.dedent("""
    import os, signal, sys
    from layerwise import files
    from layerwise.outputs import guarded
    from layerwise.reports import write_json
    folder, step = sys.argv[1], sys.argv[2]
    real = files.os.replace
    def replace(src, dst):
        output = os.path.basename(dst) == "tmft.json"  # not the manifest's own writes
        if output and step == "before-rename":
            os.kill(os.getpid(), signal.SIGKILL)
        real(src, dst)
        if output and step == "after-rename":
            os.kill(os.getpid(), signal.SIGKILL)
    files.os.replace = replace
    with guarded(folder):
        write_json(os.path.join(folder, "tmft.json"), {"run": 2, "pad": "x" * 100000})
""")


@pytest.mark.reliability("Data loss")
@pytest.mark.parametrize("step", ["before-rename", "after-rename"])
def test_a_killed_write_leaves_no_partial_file_and_the_next_run_replaces_it(step, env, case):
    from layerwise.outputs import MANIFEST, OutputManifest, guarded
    from layerwise.reports import write_json

    path = env / "tmft.json"
    with guarded(env):
        write_json(path, {"run": 1})
    run = subprocess.run([sys.executable, "-c", KILLED_WRITE, str(env), step], capture_output=True, text=True,
                         env=child_env())
    assert run.returncode == -signal.SIGKILL, run.stderr
    doc = json.loads(path.read_text())  # whole: the old file, or the new one
    assert doc["run"] == (1 if step == "before-rename" else 2)
    assert not OutputManifest(env).foreign(path.name)
    with guarded(env):
        write_json(path, {"run": 3})  # the next run: replaces it and clears the killed writer's temporary file
    assert sorted(p.name for p in env.iterdir()) == [MANIFEST, path.name]
    case.record(f"SIGKILL during an output write ({step.replace('-', ' ')})", "write_json inside outputs.guarded",
                "recovery", f"the {'old' if doc['run'] == 1 else 'new'} file whole and listed; the next write "
                "replaced it and removed the dead writer's temporary file", code=run.returncode)



@pytest.mark.reliability("Data loss")
def test_a_speed_benchmark_refuses_an_output_of_the_users_before_measuring(env, case):
    from layerwise.benchmarks.speed._bench import check_output, write_outputs
    from layerwise.outputs import ForeignFileError

    (env / "speed.json").write_bytes(MINE)  # the JSON a benchmark writes beside its markdown
    with pytest.raises(ForeignFileError, match="speed.json exists and was not written by layerwise") as info:
        check_output(env / "speed.md")
    assert (env / "speed.json").read_bytes() == MINE and not (env / "speed.md").exists()
    case.record("a speed benchmark's --output whose JSON sibling is the user's (was: replaced after the run)",
                "python -m layerwise.benchmarks.speed.bench_encode --output OUT/speed.md", "refusal", str(info.value))
    (env / "speed.json").unlink()
    result = {"environment": {"machine": {}}}
    write_outputs(result, env / "speed.md", lambda r: "# speed\n")
    write_outputs(result, env / "speed.md", lambda r: "# speed again\n")  # its own outputs: replaced
    assert (env / "speed.md").read_text() == "# speed again\n"


def test_every_page_of_docs_results_is_listed_with_its_bytes():
    """`layerwise results render` replaces only listed pages: the committed pages must be listed as committed."""
    from pathlib import Path

    from layerwise.outputs import MANIFEST, OutputManifest

    results = Path(__file__).resolve().parents[1] / "docs" / "results"
    manifest = OutputManifest(results)
    unlisted = [p.name for p in sorted(results.iterdir())
                if p.is_file() and p.name != MANIFEST and manifest.foreign(p.name)]
    assert not unlisted, (f"{unlisted} in docs/results are not listed with their bytes in {MANIFEST}; pages written "
                          "by an older layerwise: check them, then list them with `cd docs/results && sha256sum "
                          f"*.md *.json *.png > {MANIFEST}`")


def test_a_link_of_an_output_name_is_never_followed_or_replaced(env):
    from layerwise.outputs import ForeignFileError, guarded
    from layerwise.reports import write_json

    target = env / "elsewhere.json"
    target.write_bytes(MINE)
    (env / "out").mkdir()
    (env / "out" / "train.json").symlink_to(target)
    with guarded(env / "out"), pytest.raises(ForeignFileError):
        write_json(env / "out" / "train.json", {"a": 1})
    assert (env / "out" / "train.json").is_symlink() and target.read_bytes() == MINE


def _pairs_csv(path, n=24):
    from conftest import SENTENCES

    rows = [f"{SENTENCES[i % len(SENTENCES)]},{SENTENCES[(i * 7 + 3) % len(SENTENCES)]},{i % 5}" for i in range(n)]
    path.write_text("sentence1,sentence2,score\n" + "\n".join(rows) + "\n")
    return path


def _labels_csv(path, n=24):
    from conftest import SENTENCES

    path.write_text("text,label\n" + "\n".join(f"{SENTENCES[i % len(SENTENCES)]},{'ab'[i % 2]}" for i in range(n))
                    + "\n")
    return path


@pytest.mark.reliability("Data loss")
@pytest.mark.parametrize("command", ["search", "transfer"])
def test_a_save_folder_of_the_users_is_refused_before_the_work(command, tiny_bert, env, case, capsys, monkeypatch):
    # was: the whole search (or fit) ran and wrote its results, then the save refused the folder
    _no_model_load(monkeypatch)
    mine = env / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_bytes(MINE)
    data = (["--pairs", str(_pairs_csv(env / "pairs.csv")), "--dev-size", "8"] if command == "search"
            else ["--train", str(_labels_csv(env / "labels.csv"))])
    argv = [command, "--model", str(tiny_bert), *data, "--save", str(mine), "--output", str(env / "out"), "-q"]
    case.cli_error(argv, capsys, outcome="refusal", match=("mine exists and was not written by layerwise",),
                   what=f"{command} --save into a folder of the user's (was: refused only after the work)")
    assert (mine / "notes.txt").read_bytes() == MINE and [p.name for p in mine.iterdir()] == ["notes.txt"]
    assert not (env / "out").exists() or not any((env / "out").iterdir())  # nothing computed, nothing written


@pytest.mark.reliability("Data loss")
def test_a_lattemix_model_folder_of_the_users_is_refused_before_training(tiny_bert, env, case, capsys, monkeypatch):
    import shutil

    from layerwise.cli import main

    corpus = env / "corpus.txt"
    corpus.write_text("\n".join(f"sentence number {i} about a dog ." for i in range(40)) + "\n")
    pairs = _pairs_csv(env / "pairs.csv")
    argv = ["lattemix", "--model", str(tiny_bert), "--train", str(corpus), "--pairs", str(pairs), "--kinds",
            "categorical", "--seeds", "0", "--n-groups", "2", "--n-classes", "2", "--latent-dim", "4", "--epochs", "1", "--max-length", "16", "--save-models", "--output", str(env / "out"), "-q"]
    assert main(argv) == 0
    (folder,) = (env / "out" / "models").iterdir()
    assert main(argv) == 0  # the same settings again: its own model replaced
    shutil.rmtree(folder)  # now a folder of the user's at that name
    folder.mkdir()
    (folder / "notes.txt").write_bytes(MINE)
    _no_model_load(monkeypatch)
    capsys.readouterr()
    case.cli_error(argv, capsys, outcome="refusal", match=(folder.name, "not written by layerwise"),
                   what="lattemix --save-models onto a folder of the user's (was: refused only after training)")
    assert [p.name for p in folder.iterdir()] == ["notes.txt"]
