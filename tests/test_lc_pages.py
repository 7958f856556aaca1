"""The BERT-LC results pages: rendered from the committed store they show the committed numbers; resume keys."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from layerwise.experiments import PageContext, ResultsStore, get_page

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"
_NUMBER = re.compile(r"[-+−]?\d+(?:\.\d+)?")


def table_numbers(markdown: str) -> list[tuple[str, list[str]]]:
    """(first cell, numbers of the other cells) of every table row, in order; separator rows skipped.

    Cells naming a run's time of day, load average or date (history columns) are left out: they describe when a
    part was computed, which a re-render does not change but a migration may format differently."""
    rows = []
    for line in markdown.splitlines():
        if not line.startswith("|") or set(line) <= set("|-: "):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows.append((cells[0], [n for c in cells[1:] for n in _NUMBER.findall(c)]))
    return rows


@pytest.mark.parametrize("page", ["lc-sts", "transfer", "ablations"])
def test_page_renders_the_committed_numbers(page, tmp_path):
    committed = (RESULTS / f"{page}.md").read_text(encoding="utf-8")
    ctx = PageContext(store=ResultsStore(RESULTS / "state"), output=tmp_path, command=("layerwise", "test"))
    get_page(page).render(ctx)
    again = (tmp_path / f"{page}.md").read_text(encoding="utf-8")
    want, got = table_numbers(committed), table_numbers(again)
    assert len(want) > 10 and len(got) == len(want)
    for w, g in zip(want, got):
        assert g == w, f"{page}: row {w[0]!r} differs"


def test_table_numbers_sees_a_changed_number():
    a = "| x | 1.00 ± 0.20 | 3 |\n|---|---|---|\n| y | 5 | 6 |"
    assert table_numbers(a) == [("x", ["1.00", "0.20", "3"]), ("y", ["5", "6"])]
    assert table_numbers(a.replace("0.20", "0.21")) != table_numbers(a)
