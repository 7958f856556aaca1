"""Results pages that stay current: the commit each part ran on, stale / current / unknown, the speed pages."""

import dataclasses
import json
import re
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from layerwise.benchmarks import Part, ResultsStore
from layerwise.benchmarks.catalog import get_page
from layerwise.benchmarks.page_parts import (
    freshness,
    latest_by_name,
    part_revisions,
    part_source,
    parts_by_commit,
    prune_superseded,
    stale_parts,
)
from layerwise.benchmarks.registry import PageContext, ResultsPage
from layerwise.benchmarks.speed.pages import SpeedPage, option_argv
from layerwise.reports import changed_files, changed_since, code_form

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "search.py").write_text("x = 1\n")
    (root / "src" / "other.py").write_text("y = 1\n")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "first")
    return root


def _part(name: str, source: dict | None, started: str = "2026-01-01 00:00:00 UTC") -> Part:
    env = {"source": source} if source is not None else {}
    return Part("p", name, {"k": name}, {"v": 1}, True, [{"started": started, "command": "c", "environment": env}])


@needs_git
def test_a_page_is_current_until_code_it_measures_changes(repo):
    head = _git(repo, "rev-parse", "HEAD")
    parts = [_part("a", {"commit": head, "dirty": False})]
    assert freshness(parts, ["src/pkg"], repo).status == "current"
    (repo / "src" / "other.py").write_text("y = 2\n")  # code the page does not measure
    _git(repo, "commit", "-qam", "other")
    assert freshness(parts, ["src/pkg"], repo).status == "current"
    (repo / "src" / "pkg" / "search.py").write_text("x = 2\n")  # uncommitted change to measured code: stale already
    got = freshness(parts, ["src/pkg"], repo)
    assert got.status == "stale" and got.commits == (head,) and head[:12] in got.detail
    assert got.detail.endswith(": src/pkg/search.py")  # which files changed, so a reader can judge
    _git(repo, "commit", "-qam", "search")
    assert freshness(parts, ["src/pkg/search.py"], repo).status == "stale"
    assert changed_since(head, ["src/other.py"], repo) is True and changed_since(head, ["src/none"], repo) is False
    assert changed_files(head, ["src"], repo) == ["src/other.py", "src/pkg/search.py"]
    assert changed_files("0" * 40, ["src"], repo) is None


@needs_git
def test_comments_docstrings_and_layout_are_not_a_change_of_code(repo):
    code = 'def f(x):\n    return x + 1  # one\n\n\nclass C:\n    """A class."""\n\n    y = "z"\n'
    (repo / "src" / "pkg" / "search.py").write_text(code)
    _git(repo, "commit", "-qam", "code")
    head = _git(repo, "rev-parse", "HEAD")
    parts = [_part("a", {"commit": head, "dirty": False})]
    same = ('"""The module, documented now."""\n\n\ndef f(x):\n    """Add one."""\n    # a comment\n'
            '    return (x +\n            1)\n\n\nclass C:\n    """A class, reworded."""\n\n    y = "z"\n')
    (repo / "src" / "pkg" / "search.py").write_text(same)
    assert changed_files(head, ["src"], repo) == [] and freshness(parts, ["src/pkg"], repo).status == "current"
    _git(repo, "commit", "-qam", "docs")  # committed, too
    assert changed_since(head, ["src/pkg"], repo) is False
    # a string that is a value, a number, a statement added: each a change of code
    for changed in (same.replace('y = "z"', 'y = "w"'), same.replace("x +", "x -"),
                    same.replace("    return", "    z = 'a'\n    return")):
        (repo / "src" / "pkg" / "search.py").write_text(changed)
        assert changed_files(head, ["src"], repo) == ["src/pkg/search.py"], changed
    (repo / "src" / "pkg" / "search.py").write_text("def f(:\n")  # does not parse: counted as changed
    assert changed_files(head, ["src"], repo) == ["src/pkg/search.py"]
    (repo / "src" / "pkg" / "search.py").unlink()  # removed
    assert changed_files(head, ["src"], repo) == ["src/pkg/search.py"]
    (repo / "src" / "pkg" / "new.py").write_text("")  # added (untracked files are not in git diff; once added, counted)
    _git(repo, "add", "-A")
    assert sorted(changed_files(head, ["src"], repo)) == ["src/pkg/new.py", "src/pkg/search.py"]
    (repo / "src" / "pkg" / "data.txt").write_text("1\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "data")
    second = _git(repo, "rev-parse", "HEAD")
    (repo / "src" / "pkg" / "data.txt").write_text("1 \n")  # not Python: any change counts
    assert changed_files(second, ["src"], repo) == ["src/pkg/data.txt"]
    assert code_form('"""doc"""\nx = 1  # c\n') == code_form("x = (\n    1)\n") != code_form("x = 2\n")


@needs_git
def test_unknown_when_a_commit_cannot_be_told_and_never_a_crash(repo, monkeypatch):
    head = _git(repo, "rev-parse", "HEAD")
    assert freshness([_part("a", None)], ["src"], repo).status == "unknown"  # a page that recorded no commit
    assert freshness([_part("a", {"commit": head, "dirty": True})], ["src"], repo).status == "unknown"
    assert freshness([_part("a", {"commit": "0" * 40, "dirty": False})], ["src"], repo).status == "unknown"
    assert freshness([_part("a", {"commit": head, "dirty": False})], ["src"], None).status == "unknown"
    assert freshness([], ["src"], repo).status == "not run"
    (repo / "src" / "pkg" / "search.py").write_text("x = 3\n")
    mixed = [_part("a", None), _part("b", {"commit": head, "dirty": False})]
    assert freshness(mixed, ["src"], repo).status == "stale"  # a known change wins over an unknown part
    monkeypatch.setenv("PATH", "")  # no git at all
    assert changed_since(head, ["src"], repo) is None
    assert freshness([_part("a", {"commit": head, "dirty": False})], ["src"], repo).status == "unknown"


def test_part_source_reads_the_last_run_and_the_older_git_record():
    old = _part("a", {"commit": "1" * 40, "dirty": False}, "2026-01-01 00:00:00 UTC")
    old.runs.append({"started": "2026-02-01 00:00:00 UTC", "environment": {"source": {"commit": "2" * 40}}})
    assert part_source(old) == {"commit": "2" * 40, "dirty": False}
    legacy = Part("p", "a", {}, {"environment": {"git": {"commit": "3" * 40, "src_changes": ["M src/x.py"]}}}, True,
                  [{"started": "2026-01-01 00:00:00 UTC"}])
    assert part_source(legacy) == {"commit": "3" * 40, "dirty": True}
    # a stamped payload ({"kind", "schema", "part": {...}}, the ablations page) keeps it in its one body
    stamped = Part("p", "a", {}, {"kind": "k", "schema": 1, "part": {"environment": {"source": {"commit": "4" * 40}}}},
                   True, [{"started": "2026-01-01 00:00:00 UTC"}])
    assert part_source(stamped) == {"commit": "4" * 40, "dirty": False}
    assert part_source(Part("p", "a", {}, {}, True, [])) is None


def test_option_argv():
    assert option_argv({"skip_real": True, "skip_large": False, "repeats": 5, "model": "m"}) == [
        "--skip-real", "--repeats", "5", "--model", "m"]


def test_a_speed_page_stores_its_run_and_renders_from_the_store_alone(tmp_path):
    calls = []

    def main(argv):
        calls.append(argv)
        out = Path(argv[argv.index("--output") + 1])
        result = {"environment": {"source": None}, "parameters": {"n": int(argv[argv.index("--n") + 1])}, "x": 3.5}
        out.with_suffix(".json").write_text(json.dumps(result))
        out.write_text("written by the benchmark itself\n")

    module = SimpleNamespace(__name__="fake_bench", main=main, render=lambda r: f"# fake\n\nx = {r['x']}\n")
    page = SpeedPage("fake-speed", module, "Fake", (), (), ("src/layerwise/x.py",), argv=("--n", "2"))
    ctx = PageContext(store=ResultsStore(tmp_path / "state"), output=tmp_path / "out", options={"verbose": True})
    with pytest.raises(ValueError, match="layerwise results run fake-speed"):
        page.render(ctx)
    page.run(ctx)
    assert calls[0][:3] == ["--n", "2", "--verbose"]
    (part,) = ctx.store.parts("fake-speed")
    assert part.payload["x"] == 3.5 and part.key == {"benchmark": "fake-speed", "parameters": {"n": 2}}
    assert part.runs[-1]["environment"]["date"]
    md, js = page.render(ctx)
    assert md.read_text() == "# fake\n\nx = 3.5\n" and json.loads(js.read_text())["x"] == 3.5


@needs_git
def test_a_change_to_a_module_that_only_renders_the_page_leaves_it_current(repo):
    head = _git(repo, "rev-parse", "HEAD")
    (repo / "src" / "pkg" / "report.py").write_text("z = 1\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "report")
    parts = [_part("a", {"commit": _git(repo, "rev-parse", "HEAD"), "dirty": False})]
    sources = ["src/pkg", ":(exclude)src/pkg/report.py"]
    (repo / "src" / "pkg" / "report.py").write_text("z = 2\n")
    assert freshness(parts, sources, repo).status == "current"  # the render's module changed: nothing measured did
    (repo / "src" / "pkg" / "search.py").write_text("x = 2\n")
    got = freshness(parts, sources, repo)
    assert got.status == "stale" and got.detail.endswith(": src/pkg/search.py")  # the measured file, named alone
    assert changed_files(head, sources, repo) == ["src/pkg/search.py"]


def test_the_compress_page_leaves_out_only_its_render_modules():
    page = get_page("compress")
    root = Path(__file__).resolve().parents[1]
    excluded = [p.removeprefix(":(exclude)") for p in page.sources() if p.startswith(":(exclude)")]
    assert excluded and all((root / p).is_file() for p in excluded)
    assert "src/layerwise/methods/compress" in page.sources() and "src/layerwise/benchmarks/compress" in page.sources()
    pages_code = (root / "src/layerwise/benchmarks/compress/pages.py").read_text()
    # run() stores nothing that these modules compute: pages.py takes only the page writer and its title from them
    assert "from layerwise.benchmarks.compress.goals" not in pages_code
    assert "from layerwise.benchmarks.compress.report import TITLE, write_page" in pages_code


def test_a_benchmark_module_that_declares_it_only_renders_is_left_out_of_its_pages_sources(tmp_path, monkeypatch):
    from layerwise.benchmarks import measured_code

    compress = get_page("compress").sources()
    assert ":(exclude)src/layerwise/benchmarks/compress/students_report.py" in compress  # declared by itself alone
    assert len([p for p in compress if p.startswith(":(exclude)")]) == len(set(compress))  - len(
        [p for p in compress if not p.startswith(":(exclude)")])  # each excluded path once
    # the twin, by hand: only a module-level RENDER_ONLY = True counts, not a comment, a False or a nested one
    package = tmp_path / "layerwise"
    bench = package / "benchmarks" / "fake"
    bench.mkdir(parents=True)
    (bench / "render.py").write_text("RENDER_ONLY = True\n")
    (bench / "comment.py").write_text("# RENDER_ONLY = True\nx = 1\n")
    (bench / "false.py").write_text("RENDER_ONLY = False\n")
    (bench / "nested.py").write_text("def f():\n    RENDER_ONLY = True\n")
    monkeypatch.setattr(measured_code, "_PACKAGE_DIR", package)
    measured_code.render_only_modules.cache_clear()
    try:
        found = measured_code.render_only_modules(("src/layerwise/benchmarks/fake", "src/layerwise/encoders"))
    finally:
        measured_code.render_only_modules.cache_clear()
    assert found == ("src/layerwise/benchmarks/fake/render.py",)


def test_no_benchmark_module_that_computes_imports_one_that_only_renders():
    # a render-only module is left out of its page's sources: were the page's run to import it, its numbers could
    # change with no page going stale. Only render-only modules import them, and a page module its page writer.
    from layerwise.benchmarks.measured_code import render_only_modules

    root = Path(__file__).resolve().parents[1]
    render_only = set(render_only_modules(("src/layerwise/benchmarks",)))
    assert "src/layerwise/benchmarks/compress/report.py" in render_only
    modules = {"src/" + p.relative_to(root / "src").with_suffix("").as_posix().replace("/", "."): p
               for p in (root / "src/layerwise/benchmarks").rglob("*.py")}
    for path in (root / "src/layerwise").rglob("*.py"):
        importer = path.relative_to(root).as_posix()
        if importer in render_only:
            continue
        for line in re.findall(r"^\s*from (layerwise\.[\w.]+) import ([^\n(]+|\([^)]*\))", path.read_text(), re.M):
            target = modules.get("src/" + line[0])
            if target is None or target.relative_to(root).as_posix() not in render_only:
                continue
            names = {n.strip() for n in line[1].strip("()").split(",") if n.strip()}
            assert names <= {"TITLE", "write_page"}, (importer, line)


def test_every_page_measures_paths_that_exist():
    # a measured path that names nothing (the export page once declared methods/export, a package that never
    # existed) makes the page current whatever its real code does
    from layerwise.benchmarks.catalog import all_pages

    root = Path(__file__).resolve().parents[1]
    for page in all_pages():
        missing = [p for p in page.sources() if not (root / p.removeprefix(":(exclude)")).exists()]
        assert not missing, (page.name, missing)
    assert "src/layerwise/export" in get_page("export").sources()


def test_a_page_measures_the_library_code_its_packages_import():
    # the compress page trains TMFT through methods/truncated and searches its LC cuts with methods/lc/search.py:
    # a change there changes its numbers as surely as one in methods/compress
    compress = set(get_page("compress").sources())
    assert {"src/layerwise/methods/truncated/run.py", "src/layerwise/methods/lc/search.py"} <= compress
    root = Path(__file__).resolve().parents[1]
    # the twin, by text: every library module a line of the page's own packages imports is measured
    named = set()
    for package in ("src/layerwise/methods/compress", "src/layerwise/benchmarks/compress"):
        for path in (root / package).rglob("*.py"):
            named.update(re.findall(r"from (layerwise\.(?:methods|export)\.[\w.]+) import", path.read_text()))
    files = {"src/" + name.replace(".", "/") + (".py" if (root / "src" / name.replace(".", "/")).with_suffix(".py").is_file() else "")
             for name in named}
    assert files and all(any(f == s or f.startswith(s + "/") for s in compress) for f in files), files - compress
    # bookkeeping is not followed: the registry imports the package whose __init__ re-exports every estimator
    lc_sts = get_page("lc-sts").sources()
    assert not any(p.startswith(("src/layerwise/methods/lattemix", "src/layerwise/methods/compress")) for p in lc_sts)


def test_speed_benchmarks_are_registered_pages_that_declare_what_they_measure():
    for name in ("search-speed", "encoding", "encoding-mpnet", "encode-engines", "ddp"):
        page = get_page(name)
        assert page.method == "speed" and page.sources() == page.measures  # nothing left out: no renders
        root = Path(__file__).resolve().parents[1]
        assert all((root / p).exists() for p in page.measures), name
    assert "src/layerwise/methods/lc/search.py" in get_page("search-speed").sources()
    assert "src/layerwise/methods/lc" in get_page("lc-sts").sources()  # a page that declares none: its method's code


def test_results_list_shows_each_pages_commit_and_status(tmp_path, capsys):
    from layerwise.cli import main

    assert main(["results", "list", "--store", str(tmp_path / "empty")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:4] == ["page", "method", "commit", "status"]
    rows = {line.split()[0]: line for line in out[1:]}
    assert "search-speed" in rows and "not run" in rows["search-speed"]


@needs_git
def test_parts_by_commit_says_which_parts_a_change_made_stale(repo):
    """A page whose parts ran on two commits, code measured changed after the first only: those parts are named
    stale with the file, the second commit's current; the newest part of a name counts, a part without a commit
    is grouped apart."""
    first = _git(repo, "rev-parse", "HEAD")
    (repo / "src" / "pkg" / "search.py").write_text("x = 2\n")
    _git(repo, "commit", "-qam", "search")
    second = _git(repo, "rev-parse", "HEAD")
    parts = [_part("b", {"commit": first, "dirty": False}), _part("a", {"commit": first, "dirty": False}),
             _part("c", {"commit": first, "dirty": False}, started="2026-01-01 00:00:00 UTC"),
             _part("c", {"commit": second, "dirty": False}, started="2026-01-02 00:00:00 UTC"),  # c run again
             _part("d", None)]
    shown = latest_by_name(parts)  # what a page shows by default: the newest part of each name
    groups = {g.commit: g for g in parts_by_commit(shown.values(), ["src/pkg"], repo)}
    assert groups[first].parts == ("a", "b") and groups[first].changed == ("src/pkg/search.py",)
    assert groups[first].files == (f"a--{shown['a'].digest}", f"b--{shown['b'].digest}")
    assert groups[second].parts == ("c",) and groups[second].changed == ()
    assert groups[None].parts == ("d",) and groups[None].changed is None
    assert list(groups)[-1] is None  # the parts without a commit last
    # c ran again after the change; d cannot be told
    assert stale_parts(list(groups.values())) == (f"a--{shown['a'].digest}", f"b--{shown['b'].digest}")
    assert all(g.changed is None for g in parts_by_commit(parts, ["src/pkg"], None))  # no checkout: cannot tell
    # a page that shows every part (compress's protocols): c's first run is stale too
    every = [g for g in parts_by_commit(parts, ["src/pkg"], repo) if g.commit == first]
    assert every[0].parts == ("a", "b", "c") and len(stale_parts(every)) == 3
    # freshness reads the same groups: stale, named by the first commit's change
    got = freshness(shown.values(), ["src/pkg"], repo)
    assert got.status == "stale" and got.commits == tuple(sorted((first, second)))


@needs_git
def test_a_part_stored_now_from_results_an_older_commit_computed_is_as_stale_as_they_are(repo):
    """The compress page re-stores a depth part from its work folder: the run is new, the numbers were computed
    earlier (its payload's ``computed_at``). The part stands under both commits and is stale when the older is."""
    first = _git(repo, "rev-parse", "HEAD")
    (repo / "src" / "pkg" / "search.py").write_text("x = 2\n")
    _git(repo, "commit", "-qam", "search")
    second = _git(repo, "rev-parse", "HEAD")
    restored = _part("a", {"commit": second, "dirty": False})
    restored = Part("p", "a", restored.key, {"computed_at": [{"commit": first, "dirty": False},
                                                              {"commit": second, "dirty": True}]}, True, restored.runs)
    assert part_revisions(restored) == [{"commit": second, "dirty": True}, {"commit": first, "dirty": False}]
    groups = {g.commit: g for g in parts_by_commit([restored], ["src/pkg"], repo)}
    assert groups[first].parts == groups[second].parts == ("a",) and groups[first].changed == ("src/pkg/search.py",)
    assert stale_parts(list(groups.values())) == (f"a--{restored.digest}",)  # named once
    assert freshness([restored], ["src/pkg"], repo).status == "stale"
    # computed at the run's own commit, clean: current
    fresh = Part("p", "a", restored.key, {"computed_at": [{"commit": second, "dirty": False}]}, True, restored.runs)
    assert freshness([fresh], ["src/pkg"], repo).status == "current"
    assert part_revisions(_part("b", None)) == []  # nothing recorded: the group of parts without a commit
    # a part that several runs computed in turn (a transfer task's outer splits): as stale as its first run's code
    resumed = Part("p", "c", {"k": "c"}, {}, False, [
        {"started": "2026-01-01 00:00:00 UTC", "source": {"commit": first, "dirty": False}},
        {"started": "2026-01-02 00:00:00 UTC", "environment": {"source": {"commit": second, "dirty": False}}}])
    assert part_revisions(resumed) == [{"commit": second, "dirty": False}, {"commit": first, "dirty": False}]
    assert freshness([resumed], ["src/pkg"], repo).status == "stale"


def test_results_list_of_one_page_names_its_parts_by_commit(tmp_path, capsys):
    from layerwise.cli import main

    store = ResultsStore(tmp_path / "store")
    store.save(Part("search-speed", "run", {"k": 1}, {"v": 1}, True,
                    [{"started": "2026-01-01 00:00:00 UTC", "environment": {"source": {"commit": "0" * 40}}}]))
    assert main(["results", "list", "search-speed", "--store", str(tmp_path / "store")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "search-speed: unknown"  # a commit this checkout does not hold
    assert out[1].split()[:3] == ["000000000000", "1", "part(s)"] and "unknown" in out[1]
    assert out[2].strip() == "parts: run"



@needs_git
def test_run_stale_redoes_exactly_the_stale_parts_once(repo, tmp_path, monkeypatch, capsys):
    """``results run NAME --stale``: the parts computed before a change to measured code are computed again (each
    matched by its file stem, never as a pattern), the current ones and the ones without a commit are not; once a
    redone part is saved under the new commit, a second ``--stale`` run leaves it alone. A page that shows a name
    under two keys (compress's protocols) has only the stale key redone."""
    from layerwise.cli import results as cli_results

    first = _git(repo, "rev-parse", "HEAD")
    (repo / "src" / "pkg" / "search.py").write_text("x = 2\n")
    _git(repo, "commit", "-qam", "search")
    second = _git(repo, "rev-parse", "HEAD")
    store = ResultsStore(tmp_path / "store")

    def save(name, commit, key=None, started="2026-01-01 00:00:00 UTC"):
        part = _part(name, {"commit": commit, "dirty": False} if commit else None, started=started)
        store.save(Part("p", name, key or part.key, part.payload, True, part.runs))
        return Part("p", name, key or part.key, part.payload, True, part.runs).digest

    a1, _, b, _ = (save(name, commit) for name, commit in (("a[1]", first), ("a1", second), ("b", first), ("c", None)))
    page = ResultsPage(name="p", method="pkg", title="t", models=(), data=(), grid={}, settings={}, run=print,
                       render=print, measures=("src/pkg",))
    monkeypatch.setattr("layerwise.reports.source_root", lambda: repo)
    cli_results._list_parts(page, store)
    assert capsys.readouterr().out.splitlines()[0] == "p: stale (compute the stale parts again: layerwise results " \
                                                      "run p --stale)"
    patterns = cli_results.stale_patterns(page, store)
    assert capsys.readouterr().out.strip() == f"p: 2 stale part(s) to compute again: a[1]--{a1}, b--{b}"
    redo = ResultsStore(tmp_path / "store", redo=patterns)
    got = [n for n in ("a[1]", "a1", "b", "c") if redo._redoing("p", n, {"k": n})]
    assert got == ["a[1]", "b"] and not redo._redoing("p", "b", {"k": "another key"})
    save("b", second, started="2026-01-02 00:00:00 UTC")  # b computed again: the same key, the new commit
    assert cli_results.stale_patterns(page, store) == (f"a[[]1]--{a1}",)  # only a[1] is left, escaped
    other = save("b", first, key={"k": "b", "protocol": 2})  # b under a second protocol, from before the change
    assert cli_results.stale_patterns(page, store) == (f"a[[]1]--{a1}",)  # by default the page shows b's newest
    every = dataclasses.replace(page, shows=list)  # a page showing every key
    assert cli_results.stale_patterns(every, store) == (f"a[[]1]--{a1}", f"b--{other}")
    redo = ResultsStore(tmp_path / "store", redo=cli_results.stale_patterns(every, store))
    assert redo._redoing("p", "b", {"k": "b", "protocol": 2}) and not redo._redoing("p", "b", {"k": "b"})
    # prune keeps what the page shows: the second protocol's b is superseded only on a page showing the newest
    assert [t.name for t in prune_superseded(store, "p", dry_run=True, shows=page.shown_parts)] == [f"b--{other}.json"]
    assert prune_superseded(store, "p", dry_run=True, shows=every.shown_parts) == []
    monkeypatch.setattr("layerwise.reports.source_root", lambda: None)
    with pytest.raises(ValueError, match="--stale needs the layerwise git checkout"):
        cli_results.stale_patterns(page, store)


def test_stale_goes_with_run_of_one_page(tmp_path, capsys):
    from layerwise.cli import EXIT_USAGE, main

    assert main(["results", "render", "tmft", "--stale", "--store", str(tmp_path)]) == EXIT_USAGE
    assert "--stale goes with `run NAME` only" in capsys.readouterr().err
