"""Folder code: what in a model folder names code that loading it would import, found before anything loads.

A folder can name code in two ways: an ``auto_map`` in a JSON config (``config.json``, ``tokenizer_config.json``, a
module's config) makes transformers import a ``.py`` file beside it, and a ``modules.json`` ``type`` outside
``sentence_transformers`` makes sentence-transformers import that class. layerwise never runs a folder's code:
every model folder it loads passes :func:`check_no_code` first (``model_files.check_model_folder``), and every export
is cleaned by :func:`strip_auto_map` (its trained modules are classes of the installed package, named by import
path in ``modules.json``; see :mod:`layerwise.export.no_code`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from layerwise.errors import UsageError

__all__ = ["ALLOWED_TYPE_PREFIXES", "check_no_code", "code_references", "read_small_json", "strip_auto_map"]

ALLOWED_TYPE_PREFIXES = ("sentence_transformers.", "layerwise.")  # modules.json types that name no folder code
_MAX_JSON_BYTES = 16 << 20  # a config larger than this is not read (it is not a config)


def _json_files(folder: Path) -> list[Path]:
    """The JSON files of ``folder`` and of its module subfolders (one level down, as sentence-transformers lays
    them out)."""
    files = sorted(folder.glob("*.json"))
    for sub in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        files += sorted(sub.glob("*.json"))
    return files


def read_small_json(path: Path):
    if path.stat().st_size > _MAX_JSON_BYTES:
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def code_references(folder: str | os.PathLike) -> list[str]:
    """What in ``folder`` names code that loading it would import: ``auto_map`` entries, ``modules.json`` types
    outside :data:`ALLOWED_TYPE_PREFIXES`, and ``.py`` files (each as ``"FILE: what"``); empty when none."""
    folder = Path(folder)
    found = []
    for path in _json_files(folder):
        data = read_small_json(path)
        rel = path.relative_to(folder)
        if isinstance(data, dict) and "auto_map" in data:
            found.append(f"{rel}: auto_map")
        if path.name == "modules.json" and isinstance(data, list):
            for entry in data:
                kind = entry.get("type") if isinstance(entry, dict) else None
                if not isinstance(kind, str) or not kind.startswith(ALLOWED_TYPE_PREFIXES):
                    found.append(f"{rel}: module type {kind!r}")
    found += [f"{p.relative_to(folder)}: Python file" for p in sorted(folder.rglob("*.py"))]
    return found


def check_no_code(folder: str | os.PathLike, *, name: str = "folder") -> Path:
    """``folder`` as a Path, or a :class:`UsageError` (argument ``name``) when it names code (see
    :func:`code_references`)."""
    folder = Path(folder)
    found = code_references(folder)
    if found:
        raise UsageError(f"{name}={str(folder)!r} names code that loading it would run ({'; '.join(found[:3])}"
                         f"{'; ...' if len(found) > 3 else ''}); layerwise never runs a folder's code: remove those "
                         "entries, or export the model again with layerwise")
    return folder


def strip_auto_map(folder: str | os.PathLike) -> list[Path]:
    """Remove every ``auto_map`` key from the JSON configs of ``folder`` (in place); returns the files changed."""
    changed = []
    for path in _json_files(Path(folder)):
        data = read_small_json(path)
        if isinstance(data, dict) and "auto_map" in data:
            del data["auto_map"]
            path.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n", encoding="utf-8")
            changed.append(path)
    return changed
