"""Recording of reliability cases: each bad input or fault a test tries, and what was observed.

A test takes the ``case`` fixture and calls one of its methods; each asserts the behaviour and then records the
case. With ``LAYERWISE_RELIABILITY_REPORT=path`` set, the cases of passing tests are written to ``path`` as JSON
at the end of the session; ``scripts/reliability_report.py`` turns them into ``docs/reliability.md``.

Outcomes: ``clear error`` (exit 2, one line naming the value and the fix, no traceback), ``refusal`` (a damaged or
unsafe model, file or folder refused), ``recovery`` (an interrupted or damaged run continues with the same
numbers), ``correct result`` (the input is handled and the result is right).
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPORT_ENV = "LAYERWISE_RELIABILITY_REPORT"
OUTCOMES = ("clear error", "refusal", "recovery", "correct result")
_RECORDED: list[dict] = []


@dataclass
class Observed:
    code: int  # exit code of main(...)
    out: str
    err: str
    seconds: float

    @property
    def traceback(self) -> bool:
        return "Traceback (most recent call last)" in self.out + self.err


@dataclass
class Case:
    group: str
    test: str
    records: list[dict] = field(default_factory=list)

    def run(self, argv: list[str], capsys) -> Observed:
        from layerwise.cli import main

        t0 = time.perf_counter()
        try:
            code = main([str(a) for a in argv])
        except SystemExit as exc:  # argparse errors exit from inside parse_args
            code = int(exc.code or 0)
        captured = capsys.readouterr()
        return Observed(code, captured.out, captured.err, time.perf_counter() - t0)

    def cli_error(self, argv, capsys, *, what: str, match: tuple[str, ...] = (), outcome: str = "clear error",
                  code: int = 2) -> Observed:
        """Run ``layerwise ARGV``; assert exit ``code``, one stderr line with every ``match``, no traceback."""
        seen = self.run(argv, capsys)
        lines = [ln for ln in seen.err.splitlines() if ln.strip() and not ln.startswith(("INFO ", "WARNING "))]
        assert seen.code == code, (seen.code, seen.err)
        assert not seen.traceback, seen.err
        assert len(lines) == 1, seen.err
        for m in match:
            assert m in lines[0], (m, lines[0])
        self.record(what, _command(argv), outcome, lines[0], code=seen.code)
        return seen

    def record(self, what: str, given: str, outcome: str, observed: str, *, code: int | None = None) -> None:
        assert outcome in OUTCOMES, outcome
        self.records.append({"group": self.group, "test": self.test, "case": what, "input": _scrub(given),
                             "outcome": outcome, "observed": _scrub(" ".join(observed.split()))[:400],
                             "exit_code": code,
                             "traceback": "Traceback (most recent call last)" in observed})


_TMP = re.compile(r"/(?:private/)?(?:var/folders/[^\s']+?/T|tmp)/pytest-of-[^/]+/pytest-\d+/[^/\s']+")


_DIGEST = re.compile(r"((?:search|layers)-[^\s/]*-)[0-9a-f]{8}(\.(?:md|png|json))")


def _scrub(text: str) -> str:
    """Temporary test folders as ``$TMP``, and the digest of a keyed output name (it covers the data folder's path)
    as ``<digest>``: the page should not change with every run's folder names."""
    return _DIGEST.sub(r"\1<digest>\2", _TMP.sub("$TMP", text))


def _command(argv) -> str:
    return "layerwise " + " ".join(str(a) for a in argv)


def case_fixture(request):
    group = getattr(request.module, "RELIABILITY_GROUP", request.module.__name__)
    marker = request.node.get_closest_marker("reliability")
    if marker is not None:
        group = marker.args[0]
    c = Case(group=group, test=request.node.nodeid)
    yield c
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.passed:
        _RECORDED.extend(c.records)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call":
        item.rep_call = rep


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get(REPORT_ENV)
    if path and _RECORDED:
        Path(path).write_text(json.dumps({"exit_status": int(exitstatus), "cases": _RECORDED}, indent=1) + "\n")


case = pytest.fixture(case_fixture, name="case")


@pytest.fixture()
def corpus(env):
    """A three-line text corpus in the test's folder."""
    path = env / "corpus.txt"
    path.write_text("a man is playing a guitar .\nthe dog runs in the park .\ntwo people sit .\n", encoding="utf-8")
    return path


@pytest.fixture()
def no_bars():
    """transformers' own weight bars off (export has no --quiet): the error must be the only stderr line."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    yield
    hf_logging.enable_progress_bar()


def child_env() -> dict:
    """The environment of a child process that runs this checkout's layerwise (its sources first on PYTHONPATH)."""
    import layerwise

    src = str(Path(layerwise.__file__).resolve().parents[1])
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH", "")) if p)}


def no_model_load(monkeypatch):
    """Make any model load fail the test: what is checked must be checked before a model loads."""
    from layerwise.encoders import layer_encoder

    def boom(*a, **k):
        raise AssertionError("a model was loaded before the arguments were checked")

    monkeypatch.setattr(layer_encoder, "_load", boom)
