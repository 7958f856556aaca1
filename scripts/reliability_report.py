"""Write docs/reliability.md from the reliability tests: every bad input and fault they try, with the outcome seen.

    PYTHONPATH=src python scripts/reliability_report.py            # runs the tests (~3 min), writes the page
    PYTHONPATH=src python scripts/reliability_report.py --from cases.json   # renders recorded cases only

The tests record each case through the ``case`` fixture (tests/reliability_cases.py) when
``LAYERWISE_RELIABILITY_REPORT`` names a file; a case is recorded only when its test passed, and the page is not
written when any test fails.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ["tests/test_reliability.py", "tests/test_reliability_models.py", "tests/test_faults.py",
         "tests/test_reliability_runs.py", "tests/test_reliability_scale.py", "tests/test_reliability_round3.py",
         "tests/test_reliability_files.py", "tests/test_reliability_code.py", "tests/test_reliability_outputs.py",
         "tests/test_reliability_ray.py", "tests/test_reliability_disk.py"]
OUTCOMES = ("clear error", "refusal", "recovery", "correct result")

RESUME = """## How an interrupted long run continues

Nothing finished is lost when a run is stopped (Ctrl-C prints one line and exits 130; a kill leaves no half
file, see *Faults during writes*). Run the same command again and it continues where it stopped:

- **encode** (every command): encoded sentences are written to the layer cache (`$LAYERWISE_HOME/cache` or
  `--cache-dir`) in shards of at most 4096 texts, each shard atomically (temp file, fsync, rename). A re-run
  reads the finished shards and encodes only the missing texts; the cache key holds the weights, tokenizer and
  config hashes, `max_length` and dtype, so a changed model never gets old vectors.
- **encode a corpus** (`layerwise encode`, with `--model` or an exported `--folder`): each finished chunk is also
  kept, atomically and with its sha256, in a hidden work folder beside the output (`.OUTPUT.partial-<key>/`, keyed
  on the corpus rows, the embedder's identity and the chunk size); the same command again reads the finished chunks
  back (a chunk whose bytes no longer match its sha256 is encoded again), encodes the rest, writes the output and
  removes the work folder. `--no-cache` keeps nothing. While it runs the output is locked (`.OUTPUT.lock`): a
  second encode of the same output is refused.
- **transfer, ablate**: each finished part (a task, an ablation) is kept in the output folder's results store,
  keyed on every setting; a re-run with the same settings skips finished parts (different settings never reuse
  them).
- **train**: checkpoints (safetensors and JSON, never a pickle) are written atomically to `OUTPUT/last` at every
  evaluation; `layerwise train --resume` continues from the last one and ends equal to an uninterrupted run. A
  resume with another model, training data or setting is refused, naming what differs; an output folder that
  holds a run needs `--resume` or `--overwrite`.

## Output folders

Every command that writes results into an `--output` folder lists the files it wrote there, with their sha256, in
`.layerwise-outputs.sha256` (the format of `sha256sum`). A file of one of the command's output names that is not
listed with its current bytes (yours, or one of the tool's that you edited) is never replaced: the command stops in
one line before any model loads, and `--overwrite` replaces only listed files. A write lists the new bytes before
the file is renamed into place, so a kill at any moment leaves every file whole and listed.
"""


def run_tests(record: Path) -> int:
    env = {**os.environ, "LAYERWISE_RELIABILITY_REPORT": str(record)}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH", "")) if p)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS],
                          cwd=ROOT, env=env).returncode


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render(cases: list[dict]) -> str:
    counts = Counter(c["outcome"] for c in cases)
    silent = sum(1 for c in cases if c["outcome"] in ("clear error", "refusal") and c["exit_code"] == 0)
    tracebacks = sum(1 for c in cases if c["traceback"])
    lines = [
        "# Reliability: bad input and faults, and what layerwise does with them",
        "",
        "Written by `scripts/reliability_report.py` from the cases the reliability tests try "
        f"({', '.join(f'`{t}`' for t in TESTS)}); do not edit by hand.",
        "",
        f"**{len(cases)} cases**: " + ", ".join(f"{counts[o]} × {o}" for o in OUTCOMES)
        + f"; **{silent} silent wrong results, {tracebacks} tracebacks.**",
        "",
        "- *clear error*: exit 2 and one line naming the value, what is wrong and the fix, before any model is "
        "loaded where the input allows it;",
        "- *refusal*: a damaged or altered model, or a folder the tool did not create, is refused (exit 2, one line);",
        "- *recovery*: after a kill or a damaged file, a re-run gives the same numbers as an uninterrupted run;",
        "- *correct result*: the input is handled (e.g. capped, re-encoded) and the result is checked.",
        "",
        "Exit codes: 0 done, 2 user error, 130 interrupted (what was kept is said), 1 internal error (a bug: "
        "`layerwise --debug ...` shows the traceback).",
        "",
    ]
    lines += _totals(cases)
    for group in dict.fromkeys(c["group"] for c in cases):
        lines += [f"## {group}", "", "| case | input | outcome | observed |", "|---|---|---|---|"]
        for c in (c for c in cases if c["group"] == group):
            code = f" (exit {c['exit_code']})" if c["exit_code"] is not None else ""
            lines.append(f"| {_cell(c['case'])} | `{_cell(c['input'])}` | {c['outcome']}{code} | "
                         f"{_cell(c['observed'])} |")
        lines.append("")
    return "\n".join(lines) + "\n" + RESUME


def _totals(cases: list[dict]) -> list[str]:
    """The totals table: per group (the issue classes of round 3 are groups too), the good outcomes and the bad ones
    (a refusal or error with exit 0, i.e. a silent wrong result, or a traceback)."""
    head = ["group", "cases", *OUTCOMES, "silent wrong", "tracebacks"]
    lines = ["## Totals", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    groups = [*dict.fromkeys(c["group"] for c in cases), None]
    for group in groups:
        mine = [c for c in cases if group is None or c["group"] == group]
        counts = Counter(c["outcome"] for c in mine)
        silent = sum(1 for c in mine if c["outcome"] in ("clear error", "refusal") and c["exit_code"] == 0)
        tracebacks = sum(1 for c in mine if c["traceback"])
        cells = [group or "**all**", len(mine), *(counts[o] for o in OUTCOMES), silent, tracebacks]
        lines.append("| " + " | ".join(str(x) for x in cells) + " |")
    return [*lines, ""]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="source", default=None, help="render these recorded cases (JSON)")
    parser.add_argument("--output", default=str(ROOT / "docs" / "reliability.md"))
    args = parser.parse_args()
    if args.source is None:
        with tempfile.TemporaryDirectory() as tmp:
            record = Path(tmp) / "cases.json"
            if run_tests(record) != 0:
                print("reliability tests failed: page not written", file=sys.stderr)
                return 1
            cases = json.loads(record.read_text())["cases"]
    else:
        cases = json.loads(Path(args.source).read_text())["cases"]
    from layerwise.reports import write_text

    print(f"wrote {write_text(args.output, render(cases))} ({len(cases)} cases)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
