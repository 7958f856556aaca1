"""``layerwise results list | run NAME | render NAME | prune NAME``: the results pages of docs/results, declared in the library."""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["add_parsers"]


def add_parsers(sub) -> None:
    p = sub.add_parser("results", help="results pages: list them, run what their store lacks, render them")
    p.add_argument("action", choices=["list", "run", "render", "prune"],
                   help="list: the declared pages; run: compute the missing parts, then render; render: write the "
                        "page from the store only; prune: move the parts the page does not show (by default those a "
                        "newer part of the same name supersedes) to <store>/<page>/superseded/ (nothing is deleted)")
    p.add_argument("name", nargs="?", default=None,
                   help="page name (see `layerwise results list`); with list: that page's parts by the commit they "
                        "ran on, and which are stale")
    p.add_argument("--all", action="store_true", help="render or prune: every page (nothing is computed)")
    p.add_argument("--data-dir", default=None, help="data folder (default: $LAYERWISE_DATA)")
    p.add_argument("--store", default="docs/results/state", help="results store folder (default: docs/results/state)")
    p.add_argument("--output", default="docs/results", help="folder the page is written to (default: docs/results)")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="page switch, repeatable; VALUE is JSON when it parses, else a string "
                        "(e.g. --option models='[\"all-MiniLM-L6-v2\"]' --option skip_mpnet=true)")
    p.add_argument("--redo", action="append", default=[], metavar="PATTERN",
                   help="run: compute the stored parts whose names (or file stems, <part>--<digest>: one key) match "
                        "this shell pattern again and replace them (repeatable; e.g. --redo 'throughput-*' to re-time "
                        "on a quiet machine)")
    p.add_argument("--stale", action="store_true",
                   help="run: also compute again the stored parts that `layerwise results list NAME` marks stale "
                        "(computed at a commit whose measured code changed since); a run stopped midway and started "
                        "again with --stale goes on with the parts still stale, not the ones it already redid")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    p.set_defaults(handler=run)


def parse_options(pairs: list[str]) -> dict:
    """``["a=1", "b=x"]`` -> ``{"a": 1, "b": "x"}``; a pair without ``=`` is an error naming it."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--option {pair!r} is not KEY=VALUE; write e.g. --option jobs=1")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def run(args, command) -> int:
    from layerwise.benchmarks import PageContext, ResultsStore
    from layerwise.benchmarks.catalog import all_pages, get_page
    from layerwise.benchmarks.page_parts import prune_superseded
    from layerwise.benchmarks.registry import render_page

    if args.action == "list":
        if args.name is not None:
            _list_parts(get_page(args.name), ResultsStore(args.store))
        else:
            _list(all_pages(), ResultsStore(args.store))
        return 0
    if args.redo and args.action != "run":
        raise ValueError("--redo goes with `run` only (render never computes); e.g. layerwise results run tmft "
                         "--redo 'throughput-*'")
    if args.stale and (args.action != "run" or args.all):
        raise ValueError("--stale goes with `run NAME` only (render never computes); e.g. layerwise results run "
                         "compress --stale")
    if args.all and args.action == "run":
        raise ValueError("--all goes with `render` or `prune` only (a run of every page takes many hours); name one page to run")
    if args.name is None and not args.all:
        raise ValueError(f"`layerwise results {args.action}` needs a page name or --all; see `layerwise results list`")
    pages = all_pages() if args.all else [get_page(args.name)]
    redo = tuple(args.redo) + (stale_patterns(pages[0], ResultsStore(args.store)) if args.stale else ())
    store = ResultsStore(args.store, redo=redo)
    if args.action == "prune":
        for page in pages:
            moved = prune_superseded(store, page.name, shows=page.shown_parts)
            print(f"{page.name}: moved {len(moved)} superseded part(s) to {store.root / page.name / 'superseded'}")
        return 0
    for page in pages:
        ctx = PageContext(store=store, output=Path(args.output), data_dir=args.data_dir,
                          command=tuple(command), options=parse_options(args.option))
        if args.action == "run":
            page.run(ctx)
        for path in render_page(page, ctx):
            print(f"wrote {path}")
    return 0


def stale_patterns(page, store) -> tuple[str, ...]:
    """``--redo`` patterns that match exactly the page's stale parts, each by its file stem ``<part>--<digest>`` (one
    key of a name: :func:`~layerwise.benchmarks.page_parts.stale_parts`), said on stdout; refused outside a git
    checkout, where staleness cannot be told."""
    from glob import escape

    from layerwise.benchmarks.page_parts import parts_by_commit, stale_parts
    from layerwise.reports import source_root

    root = source_root()
    if root is None:
        raise ValueError("--stale needs the layerwise git checkout (a part is stale by `git diff` against the commit "
                         "it ran on); run from the checkout, or name the parts with --redo PATTERN")
    names = stale_parts(parts_by_commit(page.shown_parts(store.parts(page.name)), page.sources(), root))
    print(f"{page.name}: {len(names)} stale part(s) to compute again" + (f": {', '.join(names)}" if names else ""))
    return tuple(escape(stem) for stem in names)  # a part is matched as itself, never as a pattern


def _list(pages, store) -> None:
    """One line per page: name, method, the commit its parts ran on, current / stale / unknown, title."""
    from layerwise.benchmarks.page_parts import freshness
    from layerwise.reports import source_root

    root = source_root()
    print(f"{'page':20s} {'method':16s} {'commit':13s} {'status':8s} title")
    for page in pages:
        f = freshness(page.shown_parts(store.parts(page.name)), page.sources(), root)
        commit = f.commits[0][:12] + (f" +{len(f.commits) - 1}" if len(f.commits) > 1 else "") if f.commits else "unknown"
        print(f"{page.name:20s} {page.method:16s} {commit:13s} {f.status:8s} {page.title} ({f.detail})")


def _list_parts(page, store) -> None:
    """The page's parts (the newest of each name) by the commit they ran on: per commit, current or stale with the
    measured files changed since, and the part names, which ``--redo`` takes to compute them again."""
    from layerwise.benchmarks.page_parts import freshness_of, parts_by_commit
    from layerwise.reports import source_root

    root = source_root()
    groups = parts_by_commit(page.shown_parts(store.parts(page.name)), page.sources(), root)  # one git diff a commit
    status = freshness_of(groups, git=root is not None).status
    print(f"{page.name}: {status}" + (f" (compute the stale parts again: layerwise results run {page.name} --stale)"
                                      if status == "stale" else ""))
    for group in groups:
        if group.commit is None:
            state = "no commit recorded"
        elif group.changed is None:
            state = "unknown (a commit this checkout does not hold, or no git)"
        elif group.changed:
            files = sorted(f.removeprefix("src/layerwise/") for f in group.changed)
            state = f"stale: {len(files)} measured file(s) changed since: {', '.join(files)}"
        else:
            state = "current" + (" (computed with uncommitted changes)" if group.dirty else "")
        print(f"  {(group.commit or '-')[:12]:12s}  {len(group.parts)} part(s)  {state}")
        print(f"    parts: {', '.join(group.parts)}")
