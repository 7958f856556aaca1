"""No folder's code ever runs: check, strip and load sentence-transformers folders without ``trust_remote_code``.

A folder can name code in two ways: an ``auto_map`` in a JSON config (``config.json``, ``tokenizer_config.json``, a
module's config) makes transformers import a ``.py`` file beside it, and a ``modules.json`` ``type`` outside
``sentence_transformers`` makes sentence-transformers import that class (from a file in the folder first, when
``trust_remote_code=True``). layerwise writes neither: its trained modules (the layer-attention pooler, Latte-Mix)
are classes of the installed ``layerwise`` package named in ``modules.json`` by import path, and an export holds
no ``.py`` file.

sentence-transformers 6 imports any class outside its own package only with ``trust_remote_code=True``, which
would also run a ``.py`` file someone placed in the folder. :func:`load_sentence_transformer` loads such a folder
with ``trust_remote_code=False``: it refuses a folder that names code (:func:`code_references`), then resolves each
``layerwise.*`` type to the installed class itself (sentence-transformers' ``module_classes`` hook, the one its
trainer uses to reload a model it has in memory) and every other type as sentence-transformers always does.
Nothing from the folder is imported or executed. With sentence-transformers 5 and older, which import an installed
class for a local folder without the flag, it is a plain ``SentenceTransformer(folder)``.
"""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path

from layerwise.errors import UsageError

__all__ = ["ALLOWED_TYPE_PREFIXES", "code_references", "check_no_code", "layerwise_module_class",
           "load_sentence_transformer", "strip_auto_map"]

ALLOWED_TYPE_PREFIXES = ("sentence_transformers.", "layerwise.")  # modules.json types that name no folder code
_MAX_JSON_BYTES = 16 << 20  # a config larger than this is not read (it is not a config)


def _json_files(folder: Path) -> list[Path]:
    """The JSON files of ``folder`` and of its module subfolders (one level down, as sentence-transformers lays
    them out)."""
    files = sorted(folder.glob("*.json"))
    for sub in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        files += sorted(sub.glob("*.json"))
    return files


def _read_json(path: Path):
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
        data = _read_json(path)
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
        data = _read_json(path)
        if isinstance(data, dict) and "auto_map" in data:
            del data["auto_map"]
            path.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n", encoding="utf-8")
            changed.append(path)
    return changed


def layerwise_module_class(type_name: str) -> type:
    """The installed layerwise class a ``modules.json`` type names (``layerwise.<module>.<Class>``), or a
    :class:`UsageError`: only sentence-transformers module classes of the installed ``layerwise`` package qualify."""
    from sentence_transformers.base.modules.module import Module as STModule

    module_path, _, class_name = type_name.rpartition(".")
    if not type_name.startswith("layerwise.") or not class_name:
        raise UsageError(f"module type {type_name!r} is not a layerwise class (layerwise.<module>.<Class>)")
    try:
        cls = getattr(importlib.import_module(module_path), class_name)
    except (ImportError, AttributeError):
        raise UsageError(f"module type {type_name!r} is not in this layerwise installation: export the model again "
                         "with this version, or install the layerwise version that wrote it") from None
    if not (isinstance(cls, type) and issubclass(cls, STModule) and cls.__module__.startswith("layerwise.")):
        raise UsageError(f"module type {type_name!r} is not a sentence-transformers module class of layerwise")
    return cls


def load_sentence_transformer(folder: str | os.PathLike, **kwargs):
    """``SentenceTransformer(folder, **kwargs)`` for an exported folder, with ``trust_remote_code=False``.

    Refuses a folder that names code (:func:`check_no_code`); resolves its ``layerwise.*`` module types to the
    installed classes (see the module docstring). ``kwargs`` go to ``SentenceTransformer`` (``device``, ...).
    """
    from sentence_transformers import SentenceTransformer

    if kwargs.pop("trust_remote_code", False):
        raise UsageError("trust_remote_code=True is refused: layerwise never runs a folder's code; leave it out")
    folder = Path(folder)
    if not (folder / "modules.json").is_file():
        raise UsageError(f"folder={str(folder)!r} is not a sentence-transformers folder (no modules.json); pass a "
                         "folder written by save(...) or `layerwise export`")
    check_no_code(folder)
    entries = _read_json(folder / "modules.json")
    if not isinstance(entries, list):
        raise UsageError(f"{folder / 'modules.json'} is not a list of modules; export the model again")
    classes = {e["type"]: layerwise_module_class(e["type"]) for e in entries if e["type"].startswith("layerwise.")}
    loader = getattr(SentenceTransformer, "_load_with_module_classes", None)
    if classes and loader is not None:  # sentence-transformers >= 6: installed classes need this hook
        return loader(str(folder), classes, trust_remote_code=False, **kwargs)
    return SentenceTransformer(str(folder), trust_remote_code=False, **kwargs)
