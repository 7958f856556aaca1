"""The layer-attention and Latte-Mix pages: rendered from the committed store alone they keep every number of the
committed pages; a run reuses exactly the parts whose key is stored and computes the others."""

import re
from pathlib import Path

import pytest

from layerwise.experiments import ResultsStore, get_page
from layerwise.experiments.registry import PageContext

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"
NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?![\w.])")  # numbers, not digits inside names (sts12)


def table_rows(markdown: str) -> list[list[str]]:
    """Every row of every markdown table (separator rows dropped), as stripped cells."""
    rows = []
    for line in markdown.splitlines():
        line = line.strip()
        if not (line.startswith("|") and line.endswith("|")) or set(line) <= set("|-: "):
            continue
        rows.append([c.strip() for c in line[1:-1].split("|")])
    return rows


def row_numbers(rows):
    return [[n for c in row for n in NUMBER.findall(c)] for row in rows]


def test_table_parser_reads_cells_and_skips_separators():
    md = "text 1.5\n\n| a | b |\n|---|---|\n| x | 71.25 ± 0.15 |\n"
    assert table_rows(md) == [["a", "b"], ["x", "71.25 ± 0.15"]]
    assert row_numbers(table_rows(md)) == [[], ["71.25", "0.15"]]


@pytest.mark.parametrize("name", ["layer-attention", "lattemix"])
def test_render_from_the_committed_store_keeps_every_number(name, tmp_path):
    page = get_page(name)
    ctx = PageContext(store=ResultsStore(RESULTS / "state"), output=tmp_path)
    written = page.render(ctx)
    assert tmp_path / f"{name}.md" in written and (tmp_path / f"{name}.json").is_file()
    before = table_rows((RESULTS / f"{name}.md").read_text(encoding="utf-8"))
    after = table_rows((tmp_path / f"{name}.md").read_text(encoding="utf-8"))
    assert len(before) > 20 and len(after) == len(before)
    assert row_numbers(after) == row_numbers(before)
    renamed = {"first_last_mean": "first0_last_mean"}
    assert [[renamed.get(c, c) for c in r] for r in before] == after
