"""What the pages' ``run`` and ``render`` share around the store: a part's run record, one part per name, provenance.

A part's ``runs`` list gets one record per run that computed (or migrated) it: ``{"started", "command",
"environment"}`` (:func:`run_record`). ``render`` reads the store alone; when a part name is stored under several
keys (a setting changed between runs), :func:`latest_by_name` keeps the one whose last run started last and says
so in the log, so a page never mixes two versions of one part silently.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from layerwise.experiments.store import Part

logger = logging.getLogger(__name__)

__all__ = ["latest_by_name", "provenance_lines", "run_record", "save_png", "sts_checksum"]


def run_record(command: Sequence[str] = ()) -> dict:
    """The record a part keeps of the run that computed it: start date, command line and environment."""
    from layerwise.reports import environment

    env = environment(list(command) if command else None)
    # "t": seconds since the epoch, so that two runs started within one second are still ordered
    return {"started": env["date"], "t": time.time(), "command": env["command"], "environment": env}


def sts_checksum(d) -> str:
    """Checksum of an STS set's content (texts, scores, subsets, split), not of where it was read from."""
    from layerwise.data.checksum import content_checksum

    return content_checksum({"sentences1": d.sentences1, "sentences2": d.sentences2, "scores": d.scores,
                             "subsets": d.subsets, "split": d.split})


def _started(part: Part) -> tuple[str, float]:
    """(date string, epoch seconds) of the part's last run; older records have no epoch seconds (0)."""
    return max(((r.get("started", ""), float(r.get("t", 0.0))) for r in part.runs), default=("", 0.0))


def latest_by_name(parts: Iterable[Part]) -> dict[str, Part]:
    """part name -> the part of that name whose last run started last (dates are ``YYYY-mm-dd HH:MM:SS UTC``)."""
    out: dict[str, Part] = {}
    for part in parts:
        have = out.get(part.name)
        if have is not None:
            part = part if _started(part) > _started(have) else have
            logger.info("%s/%s is stored under several keys; the page uses the one run at %s", part.page, part.name,
                        _started(part)[0])
        out[part.name] = part
    return out


def provenance_lines(parts: Iterable[Part]) -> list[str]:
    """Markdown bullet lines: the commands that computed the parts (with their dates), and the latest environment."""
    by_command: dict[str, list[str]] = {}
    latest_env, latest = None, ""
    migrated = 0
    for part in parts:
        for r in part.runs:
            by_command.setdefault(r.get("command", "?"), []).append(r.get("started", "?"))
            if r.get("migrated_from"):
                migrated += 1
            if r.get("environment") and r.get("started", "") >= latest:
                latest_env, latest = r["environment"], r.get("started", "")
    lines = []
    for command, dates in sorted(by_command.items(), key=lambda kv: min(kv[1])):
        span = min(dates) if min(dates) == max(dates) else f"{min(dates)} to {max(dates)}"
        lines.append(f"- command: `{command}`; {len(dates)} part(s), date {span}")
    if migrated:
        lines.append(f"- {migrated} part(s) migrated from the earlier results files (each part records which)")
    if latest_env:
        lines.append(f"- machine: {latest_env['machine']['platform']}, {latest_env['machine']['cpu_count']} CPUs; "
                     + ", ".join(f"{k} {v}" for k, v in latest_env["versions"].items()))
    return lines


def save_png(fig, path: str | os.PathLike) -> Path:
    """Write a matplotlib ``Figure`` as PNG atomically (:func:`layerwise.reports.save_figure`, as drawn)."""
    from layerwise.reports import save_figure

    return save_figure(fig, path, tight=False)
