"""The versioned JSON edge of typed results: every results file says its kind and schema version.

A results dataclass writes ``{"kind": ..., "schema": N, ...}`` with :func:`stamp` and reads it back after
:func:`check_schema`, which refuses another kind or an unknown version with an error that names both.
"""

from __future__ import annotations

__all__ = ["check_schema", "stamp"]


def stamp(kind: str, version: int, body: dict) -> dict:
    """``body`` with its kind and schema version first."""
    return {"kind": kind, "schema": version, **body}


def check_schema(doc: dict, kind: str, versions: tuple[int, ...] | int, where: str = "results") -> int:
    """The schema version of ``doc`` if it is a ``kind`` document this library reads; else ValueError."""
    versions = (versions,) if isinstance(versions, int) else tuple(versions)
    if not isinstance(doc, dict) or doc.get("kind") != kind:
        got = doc.get("kind") if isinstance(doc, dict) else type(doc).__name__
        raise ValueError(f"{where} is not a {kind!r} results document (kind {got!r}); give a file written by "
                         f"`layerwise` for {kind}")
    if doc.get("schema") not in versions:
        raise ValueError(f"{where} has {kind} schema {doc.get('schema')!r}; this layerwise reads schema "
                         f"{', '.join(map(str, versions))}; upgrade layerwise or re-run to rewrite it")
    return doc["schema"]
