"""Helpers shared by the benchmark scripts (imported as a sibling module: the script's folder is on the path)."""

from __future__ import annotations

import os
from pathlib import Path

from layerwise.reports import write_json, write_text

REPO = Path(__file__).resolve().parents[1]


def pass_fail(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def write_outputs(result: dict, output: Path, render) -> None:
    """Record the load average at the end, write ``output`` (markdown by ``render``) and the JSON beside it."""
    result["environment"]["machine"]["load_average_end"] = list(os.getloadavg())
    md = write_text(output, render(result))
    js = write_json(Path(output).with_suffix(".json"), result)
    print(f"wrote {md} and {js}")
