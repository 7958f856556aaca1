"""The library code a results page's numbers go through, read from its packages' imports.

A page that declares no ``measures`` (:class:`~layerwise.benchmarks.registry.ResultsPage`) measures its method's
package, its benchmark package and the shared floors; its code also calls into other packages (the compress page
trains TMFT through ``methods/truncated`` and searches LC cuts with ``methods/lc/search.py``), and a change there
changes its numbers as surely. :func:`library_imports` finds those modules: every ``layerwise`` module that the
given packages import, directly or through each other, at module level or inside a function, read from the source
with :mod:`ast` (nothing is imported). Only modules under :data:`LIBRARY_ROOTS` count: the code that computes, not
the benchmarks' bookkeeping (the store, keys, atomic writes, reports, errors, progress bars).

A module of a page's benchmark package that only writes the page from its store says so itself, with a module-level
``RENDER_ONLY = True`` (:func:`render_only_modules` finds them): the page's sources leave it out, so a change to the
page's text, or a new module for it, marks no stored number stale. Its page's ``run`` must not import it (the
tests hold the benchmark packages to that).
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

__all__ = ["LIBRARY_ROOTS", "RENDER_ONLY_MARK", "library_imports", "render_only_modules"]

#: Paths (relative to the checkout) of the code that computes numbers; an import elsewhere is bookkeeping.
LIBRARY_ROOTS = ("src/layerwise/methods/", "src/layerwise/export/", "src/layerwise/encode/",
                 "src/layerwise/base.py")

#: The module-level assignment by which a benchmark module declares that it only renders its page from the store.
RENDER_ONLY_MARK = "RENDER_ONLY"

_PACKAGE_DIR = Path(__file__).resolve().parents[1]  # src/layerwise
_CHECKOUT_PREFIX = "src/layerwise/"


def _module_file(name: str) -> Path | None:
    """The source file of module ``name`` (``layerwise.x.y``), or None when it is no module (a function's name)."""
    path = _PACKAGE_DIR.joinpath(*name.split(".")[1:])
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    return path.with_suffix(".py") if path.with_suffix(".py").is_file() else None


def _imported_names(path: Path) -> set[str]:
    """Every ``layerwise`` name ``path`` imports anywhere (``from a.b import c`` gives ``a.b`` and ``a.b.c``; the
    library's imports are all absolute, ruff's TID252 holds them so)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in names if name.startswith("layerwise.")}


def _checkout_path(path: Path) -> str:
    return _CHECKOUT_PREFIX + path.relative_to(_PACKAGE_DIR).as_posix()


@cache
def _closure(start: tuple[Path, ...], through: tuple[str, ...]) -> frozenset[Path]:
    """``start`` and every module they import, following a module's own imports only where it is under
    ``through`` (checkout paths): a bookkeeping module's imports (the package's ``__init__`` re-exporting every
    estimator, say) are not the page's code."""
    seen: set[Path] = set()
    todo = list(start)
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        if path not in start and not _checkout_path(path).startswith(through):
            continue
        todo.extend(found for name in _imported_names(path)
                    if (found := _module_file(name)) is not None and found not in seen)
    return frozenset(seen)


def library_imports(packages: tuple[str, ...], through: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The modules under :data:`LIBRARY_ROOTS` that the modules of ``packages`` (checkout paths of folders or
    files, ``src/layerwise/...``) import, transitively through modules under :data:`LIBRARY_ROOTS` and ``through``
    (the shared floors, say), as sorted checkout paths; ``packages``' own files included where under the roots."""
    start: list[Path] = []
    for package in packages:
        path = _PACKAGE_DIR / package.removeprefix(_CHECKOUT_PREFIX)
        start.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path] if path.is_file() else [])
    roots = tuple(LIBRARY_ROOTS) + tuple(p if p.endswith(".py") else p.rstrip("/") + "/" for p in through)
    found = (_checkout_path(path) for path in _closure(tuple(start), roots))
    return tuple(sorted(path for path in found if path.startswith(LIBRARY_ROOTS)))


def _declares_render_only(path: Path) -> bool:
    """Whether ``path`` assigns ``RENDER_ONLY = True`` at module level."""
    text = path.read_text(encoding="utf-8")
    if RENDER_ONLY_MARK not in text:  # most modules: no parse
        return False
    return any(isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value is True
               and any(isinstance(t, ast.Name) and t.id == RENDER_ONLY_MARK for t in node.targets)
               for node in ast.parse(text).body)


@cache
def render_only_modules(paths: tuple[str, ...]) -> tuple[str, ...]:
    """The modules under ``paths`` (checkout paths of folders or files) in the benchmark packages
    (``src/layerwise/benchmarks/``) that declare ``RENDER_ONLY = True``, as sorted checkout paths."""
    found: set[str] = set()
    for entry in paths:
        if not (entry + "/").startswith(_CHECKOUT_PREFIX + "benchmarks/"):
            continue
        path = _PACKAGE_DIR / entry.removeprefix(_CHECKOUT_PREFIX)
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path] if path.is_file() else []
        found.update(_checkout_path(f) for f in files if _declares_render_only(f))
    return tuple(sorted(found))
