"""The results store: a part is reused only under exactly its key, writes are atomic, other keys stay."""

import json

import numpy as np
import pytest

from layerwise.benchmarks import Part, ResultsStore, key_digest
from layerwise.benchmarks.catalog import get_page


def _key(**over):
    key = {"model": {"weights_sha256": "a" * 64, "tokenizer_sha256": "b" * 64}, "max_length": 256,
           "dtype": "float32", "data": {"name": "stsb", "checksum": "c" * 64}, "protocol": {"splits": 5, "seed": 0}}
    key.update(over)
    return key


def test_round_trip_and_digest_is_order_free(tmp_path):
    store = ResultsStore(tmp_path)
    key = _key()
    store.save(Part("page", "minilm/stsb", key, {"score": 81.5}))
    got = store.load("page", "minilm/stsb", dict(reversed(list(key.items()))))
    assert got.payload == {"score": 81.5} and got.complete
    assert key_digest(key) == key_digest(dict(reversed(list(key.items()))))


@pytest.mark.parametrize("change", [{"max_length": 8}, {"dtype": "bfloat16"},
                                    {"data": {"name": "stsb", "checksum": "d" * 64}},
                                    {"protocol": {"splits": 5, "seed": 1}},
                                    {"model": {"weights_sha256": "a" * 64, "tokenizer_sha256": "e" * 64}}])
def test_any_changed_setting_invalidates_and_keeps_the_old_part(tmp_path, change, caplog):
    store = ResultsStore(tmp_path)
    store.save(Part("page", "p", _key(), {"score": 1.0}))
    with caplog.at_level("INFO", logger="layerwise.benchmarks.store"):
        assert store.load("page", "p", _key(**change)) is None
    assert "other settings" in caplog.text
    assert store.load("page", "p", _key()).payload == {"score": 1.0}  # not overwritten, not deleted
    store.save(Part("page", "p", _key(**change), {"score": 2.0}))
    assert len(store.parts("page")) == 2


def test_the_log_names_only_the_settings_that_differ_not_a_tuple_stored_as_a_list(tmp_path, caplog):
    # a key built with tuples is stored as JSON lists: the log once named ('exact', 'ivf') now against the stored
    # ['exact', 'ivf'] as a difference beside the one that was
    store = ResultsStore(tmp_path)
    store.save(Part("page", "p", _key(protocol={"indexes": ("exact", "ivf"), "nlist": 100}), {"score": 1.0}))
    with caplog.at_level("INFO", logger="layerwise.benchmarks.store"):
        assert store.load("page", "p", _key(protocol={"indexes": ("exact", "ivf"), "nlist": 1024})) is None
    assert "protocol.nlist 100 stored, 1024 now" in caplog.text
    assert "indexes" not in caplog.text


def test_a_file_whose_key_was_edited_is_refused(tmp_path):
    store = ResultsStore(tmp_path)
    path = store.save(Part("page", "p", _key(), {"score": 1.0}))
    doc = json.loads(path.read_text())
    doc["key"]["max_length"] = 8
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="does not hold the part"):
        store.load("page", "p", _key())


def test_unknown_page_suggests_a_close_name():
    with pytest.raises(ValueError, match="no results page"):
        get_page("lc-stz")


def test_run_timer_and_time_rows_say_how_much_of_the_machine_a_run_had():
    from layerwise.benchmarks.page_parts import RunTimer, run_time_row, run_time_table

    timer = RunTimer()
    sum(i * i for i in range(200_000))  # some CPU work
    record = timer.record()
    assert record["wall_seconds"] > 0 and record["cpu_seconds"] > 0
    assert len(record["load_average_at_start"]) == len(record["load_average_at_end"]) == 3
    runs = [{"environment": {"machine": {"load_average_1_5_15": [9.0, 1.0, 0.5], "cpu_count": 2}}}]  # at save time
    part = Part("p", "run-a", {"k": 1}, {}, runs=runs)
    row = run_time_row(part, {"wall_seconds": 100.0, "cpu_seconds": 180.0, "load_average_at_start": [1.5, 1.0, 0.5],
                              "load_average_at_end": [2.25, 2.0, 1.0]})
    assert row == (100.0, 1.8, 1.5, 2.25, 2)
    # a part stored before the start load was recorded: its run record's load was taken at save time, not at start
    assert run_time_row(part, {"wall_seconds": 100.0, "load_average_at_end": [2.25, 2.0, 1.0]})[2] is None
    old = run_time_row(Part("p", "run-b", {"k": 2}, {}, runs=[]), {"wall_seconds": 60.0})  # stored before timing
    assert old == (60.0, None, None, None, None)
    lines = run_time_table({"run-a": row, "run-b": old})
    assert "| run-a | 1.7 | 1.8 | 1.5 | 2.2 | 2 |" in lines
    assert "| run-b | 1.0 | not recorded | not recorded | not recorded | ? |" in lines and lines[-1] == ""


def test_redo_computes_a_named_part_again_once_and_replaces_it(tmp_path, caplog):
    ResultsStore(tmp_path).save(Part("page", "throughput-m", _key(), {"rate": 1.0}))
    ResultsStore(tmp_path).save(Part("page", "run-m", _key(), {"score": 2.0}))
    store = ResultsStore(tmp_path, redo=("throughput-*",))
    with caplog.at_level("INFO", logger="layerwise.benchmarks.store"):
        assert store.load("page", "throughput-m", _key()) is None  # named: computed again
    assert "--redo" in caplog.text
    assert store.load("page", "run-m", _key()).payload == {"score": 2.0}  # not named: reused
    store.save(Part("page", "throughput-m", _key(), {"rate": 3.0}))
    assert store.load("page", "throughput-m", _key()).payload == {"rate": 3.0}  # redone once, then reused
    assert len(store.parts("page")) == 2  # replaced under its key, nothing added


def test_redo_is_refused_outside_run(tmp_path, capsys):
    from layerwise.cli import EXIT_USAGE, main

    assert main(["results", "render", "tmft", "--redo", "x", "--store", str(tmp_path)]) == EXIT_USAGE
    assert "--redo goes with `run` only" in capsys.readouterr().err


def _run(started: str) -> list[dict]:
    return [{"started": started, "command": "test"}]


def test_prune_moves_superseded_parts_aside_and_they_can_be_restored(tmp_path):
    import os

    from layerwise.benchmarks.page_parts import SUPERSEDED, latest_by_name, prune_superseded

    store = ResultsStore(tmp_path)
    old = store.save(Part("page", "a", _key(), {"v": 1}, runs=_run("2026-01-01 00:00:00 UTC")))
    new = store.save(Part("page", "a", _key(max_length=8), {"v": 2}, runs=_run("2026-02-01 00:00:00 UTC")))
    alone = store.save(Part("page", "b", _key(), {"v": 3}, runs=_run("2025-01-01 00:00:00 UTC")))
    before = {n: p.payload for n, p in latest_by_name(store.parts("page")).items()}
    assert prune_superseded(store, "page", dry_run=True) == [old.parent / SUPERSEDED / old.name]
    assert old.is_file()  # a dry run moves nothing
    moved = prune_superseded(store, "page")
    assert moved == [old.parent / SUPERSEDED / old.name] and moved[0].is_file() and not old.exists()
    assert new.is_file() and alone.is_file()
    assert {n: p.payload for n, p in latest_by_name(store.parts("page")).items()} == before  # the page is unchanged
    assert len(store.parts("page")) == 2 and prune_superseded(store, "page") == []  # nothing left to prune
    os.replace(moved[0], old)  # recoverable: moving the file back restores the part
    assert store.load("page", "a", _key()).payload == {"v": 1}


def test_results_prune_command_and_every_rendered_page_ends_with_the_conventions(tmp_path, capsys):
    from layerwise.benchmarks.registry import FOOTER
    from layerwise.cli import main

    store = ResultsStore(tmp_path / "store")
    store.save(Part("layer-attention", "x", _key(), {}, runs=_run("2026-01-01 00:00:00 UTC")))
    store.save(Part("layer-attention", "x", _key(dtype="bfloat16"), {}, runs=_run("2026-01-02 00:00:00 UTC")))
    assert main(["results", "prune", "layer-attention", "--store", str(tmp_path / "store")]) == 0
    assert "moved 1 superseded part(s)" in capsys.readouterr().out
    assert len(list((tmp_path / "store" / "layer-attention" / "superseded").glob("*.json"))) == 1
    from layerwise.benchmarks.registry import PageContext, ResultsPage, render_page

    def render(ctx):
        return [ctx.output / "p.md", ctx.output / "p.json"]

    (tmp_path / "p.md").write_text("# page\n\n| a | 1 |\n")
    (tmp_path / "p.json").write_text("{}")
    page = ResultsPage("p", "lc", "t", (), (), {}, {}, run=lambda ctx: None, render=render)
    render_page(page, PageContext(store=store, output=tmp_path))
    text = (tmp_path / "p.md").read_text()
    assert text.startswith("# page\n\n| a | 1 |\n\n*Code.* The numbers on this page were computed at no recorded "
                           "commit.") and text.endswith("\n\n" + "\n".join(FOOTER) + "\n")
    assert "ddof = 1" in text and (tmp_path / "p.json").read_text() == "{}"  # only markdown gets the footer


def test_the_code_line_names_each_commit_with_its_parts_and_the_parts_that_recorded_none():
    from layerwise.benchmarks.page_parts import code_line

    def part(name, *commits, dirty=False):
        runs = [{"started": f"2026-01-0{i + 1} 00:00:00 UTC", "environment": {"source": {"commit": c, "dirty": dirty}}}
                for i, c in enumerate(commits)]
        return Part("page", name, _key(), {}, runs=runs or _run("2026-01-01 00:00:00 UTC"))

    a, b = "a" * 40, "b" * 40
    line = code_line("page", [part("x", a), part("y", a), part("z", b, dirty=True), part("w")])
    assert line.startswith(f"*Code.* The numbers on this page were computed at commit `{'a' * 12}` (2 parts), "
                           f"`{'b' * 12}` (with uncommitted changes) (1 part); 1 part recorded no commit.")
    assert "`layerwise results list page`" in line and "`layerwise results run page --stale`" in line
    # a part several runs computed in turn (a transfer task's splits) counts for each run's commit
    assert f"`{'a' * 12}` (1 part), `{'b' * 12}` (1 part)." in code_line("page", [part("s", a, b)])


def test_provenance_names_every_machine_and_the_gpu_a_part_used():
    from layerwise.benchmarks.page_parts import provenance_lines
    from layerwise.reports import environment

    cpu = environment(["layerwise", "results", "run", "x"])
    gpu = json.loads(json.dumps(cpu))
    gpu["machine"].update(platform="Linux-gpu-host", cpu_count=16, gpu="NVIDIA H100 80GB HBM3", cpu_model=None,
                          int8_isa=None)  # a record from before the CPU facts were kept
    runs = [[{"started": "2026-01-01", "command": "a", "environment": cpu}],
            [{"started": "2026-01-02", "command": "b", "environment": gpu}],
            [{"started": "2026-01-03", "command": "b", "environment": gpu}]]
    parts = [Part("p", f"n{i}", {}, {}, runs=r) for i, r in enumerate(runs)]
    lines = provenance_lines(parts)
    machines = [line for line in lines if line.startswith("- machine")]
    assert len(machines) == 2 and machines[1].startswith("- machine (2 run(s)): Linux-gpu-host, 16 CPUs, GPU NVIDIA H100")
    assert "GPU" not in machines[0] and machines[0].startswith("- machine (1 run(s)): ")
    assert provenance_lines(parts[:1])[-1].startswith(f"- machine: {cpu['machine']['platform']}")  # one: no count


def test_the_machine_records_its_cpu_and_int8_instructions_and_the_page_says_when_vnni_is_missing():
    from layerwise.benchmarks.page_parts import provenance_lines
    from layerwise.reports import cpu_facts, environment

    avx2 = "processor\t: 0\ncpu family\t: 26\nmodel\t\t: 2\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse avx avx2 fma\n"
    vnni = "model name\t: Intel Xeon\nflags\t\t: avx2 avx512f avx512_vnni\n"
    assert cpu_facts(avx2) == {"cpu_model": "AMD EPYC", "cpu_family_model": "26/2", "int8_isa": ["avx2"]}
    assert cpu_facts(vnni) == {"cpu_model": "Intel Xeon", "cpu_family_model": None,
                               "int8_isa": ["avx2", "avx512f", "avx512_vnni"]}
    env = environment(["layerwise", "results", "run", "x"])
    assert {"cpu_model", "int8_isa"} <= set(env["machine"]) and {"onnxruntime", "openvino", "nncf"} <= set(env["versions"])
    lines = []
    for text in (avx2, vnni):
        e = json.loads(json.dumps(env))
        e["machine"].update(platform="host", cpu_count=2, gpu=None, **cpu_facts(text))
        e["versions"] = {"torch": "2.13.0+cpu"}
        lines.append(provenance_lines([Part("p", "n", {}, {}, runs=[{"started": "x", "environment": e}])])[-1])
    assert lines == ["- machine: host (AMD EPYC, family/model 26/2), 2 CPUs, int8 instructions avx2 (no VNNI); torch 2.13.0+cpu",
                     "- machine: host (Intel Xeon), 2 CPUs, int8 instructions avx2 avx512f avx512_vnni; torch 2.13.0+cpu"]


def test_a_copy_without_git_records_the_declared_commit_marked_as_declared(monkeypatch):
    from layerwise import reports

    monkeypatch.setattr(reports, "source_root", lambda: None)
    monkeypatch.delenv(reports.SOURCE_COMMIT_ENV, raising=False)
    assert reports.source_revision() is None
    monkeypatch.setenv(reports.SOURCE_COMMIT_ENV, "2dc771c")
    assert reports.source_revision() == {"commit": "2dc771c", "dirty": False, "declared": "LAYERWISE_SOURCE_COMMIT"}


def test_pruning_never_moves_the_gold_scores_of_other_data(tmp_path):
    from layerwise.benchmarks.page_parts import NEVER_SUPERSEDED, prune_superseded
    from layerwise.benchmarks.significance_parts import GOLD_PART, save_gold

    assert GOLD_PART in NEVER_SUPERSEDED
    store = ResultsStore(tmp_path)
    save_gold(store, "page", {"stsb": np.arange(3.0)}, {"stsb": "old data"})
    save_gold(store, "page", {"stsb": np.arange(4.0)}, {"stsb": "new data"})  # both still read, by their checksums
    assert prune_superseded(store, "page") == [] and len(store.parts("page")) == 2
