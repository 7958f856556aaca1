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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from layerwise.benchmarks.store import Part, ResultsStore
from layerwise.data.checksum import content_checksum
from layerwise.reports import INT8_DOT_FLAGS, changed_files, environment, save_figure

logger = logging.getLogger(__name__)

__all__ = ["BUSY", "SUPERSEDED", "CommitParts", "Freshness", "RunTimer", "code_line", "cpu_label", "freshness", "freshness_of",
           "latest_by_name", "machine_line", "merge_revisions", "part_revisions", "part_source", "parts_by_commit",
           "provenance_lines", "prune_superseded", "run_record", "run_time_row", "run_time_table", "save_png",
           "stale_parts", "sts_checksum"]


def run_record(command: Sequence[str] = ()) -> dict:
    """The record a part keeps of the run that computed it: start date, command line and environment."""
    env = environment(list(command) if command else None)
    # "t": seconds since the epoch, so that two runs started within one second are still ordered
    return {"started": env["date"], "t": time.time(), "command": env["command"], "environment": env}


class RunTimer:
    """Wall and CPU seconds of one training run, and the load average at its start and end: how much of the machine
    it had.

    CPU seconds are this process's (every thread): over wall seconds that is about the thread count when the run had
    the cores to itself, and less when other jobs shared them (its wall time is then longer than its own cost).
    """

    def __init__(self):
        self.t0, self.c0 = time.perf_counter(), time.process_time()
        self.load0 = [round(x, 2) for x in os.getloadavg()]

    def record(self) -> dict:
        return {"wall_seconds": time.perf_counter() - self.t0, "cpu_seconds": time.process_time() - self.c0,
                "load_average_at_start": self.load0, "load_average_at_end": [round(x, 2) for x in os.getloadavg()]}


def run_time_row(part: Part, timing: dict) -> tuple:
    """(wall seconds, CPU/wall, 1-minute load at start, at end, the machine's CPU count) of a part's run; ``timing``
    holds :meth:`RunTimer.record`'s fields (None where a part stored before they were recorded lacks one; the
    run record's own load average is taken when the part is saved, at the run's end, so it is no start load)."""
    wall, cpu = float(timing.get("wall_seconds") or 0.0), timing.get("cpu_seconds")
    machine = part.runs[-1].get("environment", {}).get("machine", {}) if part.runs else {}
    start = (timing.get("load_average_at_start") or [None])[0]
    end = (timing.get("load_average_at_end") or [None])[0]
    return wall, (cpu / wall if cpu is not None and wall > 0 else None), start, end, machine.get("cpu_count")


def run_time_table(rows: dict[str, tuple]) -> list[str]:
    """Markdown lines: each run's wall minutes, CPU/wall, load at start and end and CPUs (:func:`run_time_row`)."""
    fmt = lambda x: "not recorded" if x is None else f"{x:.1f}"  # noqa: E731
    lines = ["Time of each run. *CPU/wall*: the run's CPU seconds (all its threads) over its wall seconds, about the "
             "thread count when it had the cores to itself and lower when other jobs shared them (then its wall time "
             "is longer than its own cost); the 1-minute load average at its start and end, against the machine's "
             "CPU count. A run stored before a column was recorded shows \"not recorded\" there.", "",
             "| run | wall (min) | CPU/wall | load at start | load at end | CPUs |", "|---|---|---|---|---|---|"]
    for name, (wall, ratio, start, end, cpus) in rows.items():
        lines.append(f"| {name} | {wall / 60:.1f} | {fmt(ratio)} | {fmt(start)} | {fmt(end)} | {cpus or '?'} |")
    return lines + [""]  # the blank line ends the table


def sts_checksum(d) -> str:
    """Checksum of an STS set's content (texts, scores, subsets, split), not of where it was read from."""
    return content_checksum({"sentences1": d.sentences1, "sentences2": d.sentences2, "scores": d.scores,
                             "subsets": d.subsets, "split": d.split})


def _started(part: Part) -> tuple[str, float]:
    """(date string, epoch seconds) of the part's last run; older records have no epoch seconds (0)."""
    return max(((r.get("started", ""), float(r.get("t", 0.0))) for r in part.runs), default=("", 0.0))


def latest_by_name(parts: Iterable[Part], *, quiet: bool = False) -> dict[str, Part]:
    """part name -> the part of that name whose last run started last (dates are ``YYYY-mm-dd HH:MM:SS UTC``); each
    name stored under several keys is named in the log unless ``quiet``."""
    out: dict[str, Part] = {}
    for part in parts:
        have = out.get(part.name)
        if have is not None:
            part = part if _started(part) > _started(have) else have
            if not quiet:
                logger.info("%s/%s is stored under several keys; the page uses the one run at %s", part.page,
                            part.name, _started(part)[0])
        out[part.name] = part
    return out


#: The folder, under a page's store folder, that superseded parts are moved to (``parts`` does not read it).
SUPERSEDED = "superseded"
#: Parts read by their key, several at once (one per data checksum: ``significance_parts.GOLD_PART``): none of them
#: supersedes another, so pruning never moves them
NEVER_SUPERSEDED = ("gold-scores",)


def prune_superseded(store: ResultsStore, page: str, *, dry_run: bool = False,
                     shows: Callable[[list[Part]], list[Part]] | None = None) -> list[Path]:
    """Move every part of ``page`` that it does not show (``shows``, the page's
    :meth:`~layerwise.benchmarks.registry.ResultsPage.shown_parts`; by default the newest part of each name, so one
    that a newer part of the same name supersedes; never the :data:`NEVER_SUPERSEDED` ones) into
    ``<store>/<page>/superseded/``; nothing is deleted, and moving a file back restores it. Returns the files' new
    paths (where they would go, with ``dry_run``)."""
    parts = store.parts(page)
    kept = {id(p) for p in (shows(parts) if shows is not None else latest_by_name(parts).values())}
    moved = []
    for part in parts:
        if id(part) in kept or part.name in NEVER_SUPERSEDED:
            continue
        source = store.path(page, part.name, part.key)
        target = source.parent / SUPERSEDED / source.name
        if target.exists():
            raise FileExistsError(f"{target} exists already; move it away before pruning {page} again")
        if not dry_run:
            target.parent.mkdir(exist_ok=True)
            os.replace(source, target)
        moved.append(target)
    logger.info("%s: %d superseded part(s) %s %s", page, len(moved), "would move to" if dry_run else "moved to",
                store.root / page / SUPERSEDED)
    return moved


def provenance_lines(parts: Iterable[Part]) -> list[str]:
    """Markdown bullet lines: the commands that computed the parts (with their dates), and each machine they ran on
    (platform, CPUs, the GPU where one was used, library versions) with how many parts it computed."""
    by_command: dict[str, list[str]] = {}
    machines: dict[str, list[str]] = {}  # the machine's line -> start dates of the runs it made
    migrated = 0
    for part in parts:
        for r in part.runs:
            by_command.setdefault(r.get("command", "?"), []).append(r.get("started", "?"))
            if r.get("migrated_from"):
                migrated += 1
            if r.get("environment"):
                machines.setdefault(machine_line(r["environment"]), []).append(r.get("started", ""))
    lines = []
    for command, dates in sorted(by_command.items(), key=lambda kv: min(kv[1])):
        span = min(dates) if min(dates) == max(dates) else f"{min(dates)} to {max(dates)}"
        lines.append(f"- command: `{command}`; {len(dates)} part(s), date {span}")
    if migrated:
        lines.append(f"- {migrated} part(s) migrated from the earlier results files (each part records which)")
    several = len(machines) > 1
    for line, dates in sorted(machines.items(), key=lambda kv: max(kv[1])):
        lines.append(f"- machine{f' ({len(dates)} run(s))' if several else ''}: {line}")
    return lines


BUSY = "busy"  # a part whose run started with more runnable work than CPUs, by over half a process (a speed not to compare)


def part_cpus(part: Part) -> str:
    """The machine a part was computed on, as its CPU count ("2 CPUs"; "?" where not recorded), and ", busy" where
    the 1-minute load average at the run's start was more than half a process above that count (other work shared
    the machine): what a speed column needs to say when its rows come from machines of different sizes or states."""
    env = part.runs[-1].get("environment", {}) if part.runs else {}
    machine = env.get("machine", {})
    n, load = machine.get("cpu_count"), machine.get("load_average_1_5_15")
    if n is None:
        return "?"
    return f"{n} CPUs" + (f", {BUSY}" if load and load[0] > n + 0.5 else "")


def cpu_label(machine: dict) -> str:
    """A run's CPU in short, from its recorded ``machine``: platform, CPU model with family/model, int8 instructions,
    as far as recorded. Two runs of one platform string may be two CPU generations (a virtual machine's model name
    may be only "AMD EPYC"), whose speed-ups differ: their ratios do not compare."""
    isa = machine.get("int8_isa")
    return (machine.get("platform", "?") + _cpu_name(machine)
            + ("" if isa is None else f", int8 {' '.join(isa) or 'none'}"))


def _cpu_name(machine: dict) -> str:
    """" (AMD EPYC, family/model 26/2)" as far as recorded (the family since 2026-12-02), or ""."""
    if not machine.get("cpu_model"):
        return ""
    family = f", family/model {machine['cpu_family_model']}" if machine.get("cpu_family_model") else ""
    return f" ({machine['cpu_model']}{family})"


def machine_line(env: dict) -> str:
    """One run's machine and versions, from its recorded ``environment``: platform, CPU model, CPUs, the int8
    instructions (VNNI or not), the GPU, then the package versions."""
    m = env["machine"]
    gpu = f", GPU {m['gpu']}" if m.get("gpu") else ""
    cpu = _cpu_name(m)
    # the int8 kernels' instruction sets (recorded since 2026-12-01): without VNNI they can saturate
    isa = m.get("int8_isa")
    vnni = "" if isa is None else f", int8 instructions {' '.join(isa) or 'none'}" + (
        "" if INT8_DOT_FLAGS & set(isa) else " (no VNNI)")
    return (f"{m['platform']}{cpu}, {m['cpu_count']} CPUs{vnni}{gpu}; "
            + ", ".join(f"{k} {v}" for k, v in env["versions"].items()))


def save_png(fig, path: str | os.PathLike) -> Path:
    """Write a matplotlib ``Figure`` as PNG atomically (:func:`layerwise.reports.save_figure`, as drawn)."""
    return save_figure(fig, path, tight=False)


@dataclass(frozen=True)
class Freshness:
    """Whether a page's stored numbers are of the code as it is now."""

    status: str  # "current", "stale", "unknown" or "not run"
    commits: tuple[str, ...]  # the commits its parts were computed on (those recorded)
    detail: str  # why, in a few words


def part_source(part: Part) -> dict | None:
    """``{"commit", "dirty"}`` of the run that last computed ``part``; ``None`` where that run recorded no commit."""
    if not part.runs:
        return None
    run = max(part.runs, key=lambda r: (r.get("started", ""), float(r.get("t", 0.0))))
    # where pages keep it: in the run entry, in the payload, or in the payload's one stamped body ({"part": {...}})
    bodies = [v for v in part.payload.values() if isinstance(v, dict)]
    nested = bodies[0].get("environment") if len(bodies) == 1 and isinstance(bodies[0].get("environment"), dict) else {}
    for env in (run.get("environment") or {}, part.payload.get("environment") or {}, nested):
        if env.get("source"):
            return {"commit": env["source"]["commit"], "dirty": bool(env["source"].get("dirty"))}
        if env.get("git"):  # the speed benchmarks' older record: git_state of the checkout
            return {"commit": env["git"]["commit"], "dirty": bool(env["git"].get("src_changes"))}
    return None


def part_revisions(part: Part) -> list[dict]:
    """Every ``{"commit", "dirty"}`` that computed ``part``'s numbers: the run that stored it (:func:`part_source`),
    every earlier run of a part that several runs computed in turn (a transfer task's outer splits, each run entry's
    ``source``) and, where a page re-stores results an earlier process computed (the compress page's work folder:
    students, scores, timings), the revisions its payload lists under ``computed_at``; empty where none is
    recorded."""
    runs = [r.get("source") or (r.get("environment") or {}).get("source") for r in part.runs]
    return merge_revisions((part_source(part), *runs, *part.payload.get("computed_at", ())))


def merge_revisions(revisions: Iterable[dict | None]) -> list[dict]:
    """Each commit of ``revisions`` (``{"commit", "dirty"}`` records; None and those without a commit skipped) once, in
    first-seen order, dirty where any of its records is."""
    out: dict[str, dict] = {}
    for rev in revisions:
        if rev and rev.get("commit"):
            key = rev["commit"]
            out[key] = {"commit": key, "dirty": bool(rev.get("dirty")) or out.get(key, {}).get("dirty", False)}
    return list(out.values())


def code_line(page: str, parts: Iterable[Part]) -> str:
    """One markdown paragraph naming the commits ``parts`` (the ones a page shows) were computed at, with how many
    parts each computed (a part several runs computed counts for each), the parts that recorded none, and the
    command that says whether the code they measure changed since."""
    counts: dict[str, int] = {}
    dirty: set[str] = set()
    unknown = 0
    for part in parts:
        revisions = part_revisions(part)
        unknown += not revisions
        for rev in revisions:
            counts[rev["commit"]] = counts.get(rev["commit"], 0) + 1
            if rev["dirty"]:
                dirty.add(rev["commit"])
    named = [f"`{c[:12]}`{' (with uncommitted changes)' if c in dirty else ''} ({n} part{'s' * (n != 1)})"
             for c, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    where = ("computed at commit " + ", ".join(named)) if named else "computed at no recorded commit"
    none = f"; {unknown} part{'s' * (unknown != 1)} recorded no commit" if named and unknown else ""
    return (f"*Code.* The numbers on this page were {where}{none}. `layerwise results list {page}` says whether the "
            f"code they measure changed since (stale) and `layerwise results run {page} --stale` computes them again.")


@dataclass(frozen=True)
class CommitParts:
    """The parts of a page (the newest of each name) that one commit computed, and what changed since under the
    page's sources: which of them ``layerwise results run NAME --redo PATTERN`` would compute again."""

    commit: str | None  # None: parts that recorded no commit
    parts: tuple[str, ...]  # their names, sorted (a name once, where the page shows it under several keys)
    files: tuple[str, ...]  # their file stems, <part>--<digest>: one per stored key
    changed: tuple[str, ...] | None  # measured files that differ now from the commit; None: cannot be told
    dirty: bool  # a run of one of them had uncommitted changes


def parts_by_commit(parts: Iterable[Part], sources: Sequence[str], root: str | os.PathLike | None
                    ) -> list[CommitParts]:
    """``parts`` (the ones a page shows: :meth:`~layerwise.benchmarks.registry.ResultsPage.shown_parts`) grouped by
    the commit they were computed on (sorted by commit hash, the parts without one last), each group with the files
    under ``sources`` changed since (``git diff`` in the checkout ``root``; None without git or for an unknown
    commit). A part whose numbers several revisions computed (:func:`part_revisions`) stands in each one's group:
    it is stale when any of them is."""
    groups: dict[str | None, list[tuple[Part, bool]]] = {}
    for part in parts:
        for found in part_revisions(part) or [None]:
            groups.setdefault(found and found["commit"], []).append((part, bool(found and found["dirty"])))
    out = []
    for commit in sorted(groups, key=lambda c: (c is None, c or "")):
        changed = None if commit is None or root is None else changed_files(commit, sources, root)
        members = sorted(groups[commit], key=lambda m: (m[0].name, m[0].digest))
        out.append(CommitParts(commit, tuple(dict.fromkeys(p.name for p, _ in members)),
                               tuple(f"{p.name}--{p.digest}" for p, _ in members),
                               None if changed is None else tuple(changed), any(d for _, d in members)))
    return out


def stale_parts(groups: Sequence[CommitParts]) -> tuple[str, ...]:
    """The file stems (``<part>--<digest>``: one key of a name) of the parts in ``groups`` (:func:`parts_by_commit`)
    computed at a commit whose measured files changed since, sorted: what ``layerwise results run NAME --stale``
    computes again where the run's settings give that key. Parts whose staleness cannot be told (no commit recorded,
    a commit the checkout does not hold) are not among them."""
    return tuple(sorted({stem for g in groups if g.changed for stem in g.files}))


def freshness(parts: Iterable[Part], sources: Sequence[str], root: str | os.PathLike | None) -> Freshness:
    """Stale when code under ``sources`` changed after a commit a part was computed on (``git diff``, in the checkout
    ``root``); current when none did and every part recorded a clean commit; unknown otherwise (no git, a part
    without a commit, a run with uncommitted changes). Never raises for want of git."""
    return freshness_of(parts_by_commit(parts, sources, root), git=root is not None)


def freshness_of(groups: Sequence[CommitParts], *, git: bool) -> Freshness:
    """:func:`freshness` of parts already grouped by :func:`parts_by_commit` (``git``: they were read in a git
    checkout), for a caller that shows the groups too and must not run ``git diff`` twice."""
    if not groups:
        return Freshness("not run", (), "no stored part")
    commits = tuple(g.commit for g in groups if g.commit is not None)
    if not git:
        return Freshness("unknown", commits, "not a git checkout")
    changed = {g.commit: g.changed for g in groups if g.commit is not None}
    stale = [c for c, v in changed.items() if v]
    if stale:  # named by the newest stale commit (the fewest files changed since): even its parts are stale
        newest = min(stale, key=lambda c: len(changed[c]))
        files = sorted(f.removeprefix("src/layerwise/") for f in changed[newest])
        named = ", ".join(files[:4]) + (f" and {len(files) - 4} more" if len(files) > 4 else "")
        return Freshness("stale", commits, f"code it measures changed since {newest[:12]}: {named}")
    missing = sum(len(g.parts) for g in groups if g.commit is None)
    if missing:
        total = len({name for g in groups for name in g.parts})  # a part several revisions computed counts once
        return Freshness("unknown", commits, f"{missing} of {total} part(s) recorded no commit")
    if any(v is None for v in changed.values()):
        return Freshness("unknown", commits, "a commit this checkout does not hold, or no git")
    if any(g.dirty for g in groups):
        return Freshness("unknown", commits, "computed with uncommitted changes")
    return Freshness("current", commits, "no change since")
