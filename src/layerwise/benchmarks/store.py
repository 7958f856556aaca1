"""The results store: one resume mechanism for every long run.

A run is cut into *parts* (one model on one data set, one task, one training run...). Each part is saved as one
JSON file under ``root/<page>/``, named by the part and by a digest of its **key**: every setting that changes the
part's numbers (model weights, tokenizer and config hashes, max length, dtype, data checksum, protocol options,
seeds...). A re-run with the same key finds the file and skips the work; a re-run with any setting changed gets
another digest, so it never reuses a number computed under other settings, and the earlier file is left in place
(no file is overwritten by a result computed under other settings). Writes are atomic (a temporary file, then a
rename), so a run killed while writing keeps the previous version of the part.

File layout (format 1)::

    root/<page>/<part>--<digest>.json
    {"format": 1, "page": ..., "part": ..., "key": {...}, "digest": "...", "complete": true|false,
     "runs": [{"started": ..., "command": ..., "load_at_start": [...], "load_at_save": [...]}, ...],
     "payload": {...}}

``complete = false`` marks a part saved mid-way (a transfer task after some of its outer splits, say): the run that
needs it resumes from its payload.

``redo`` (``layerwise results run NAME --redo 'throughput-*'``) names parts, by shell-style pattern on the part's
name or on its file's stem ``<part>--<digest>`` (one key of the name only), to compute again under the same key:
``load`` ignores their stored file until this store has saved a new one, which then replaces it (timings
re-measured on a quiet machine, say). Parts that keep their own checkpoints (training runs) resume from
those, so a redo of a finished training run evaluates its kept model again rather than retraining it.
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path

from layerwise.keys import key_digest, keyed_name, model_key
from layerwise.reports import write_json

logger = logging.getLogger(__name__)

__all__ = ["STORE_FORMAT", "Part", "ResultsStore", "key_digest", "keyed_name", "model_key", "read_part_file"]

STORE_FORMAT = 1
_SAFE = re.compile(r"[^A-Za-z0-9._+-]+")


@dataclass
class Part:
    """One stored part: its key, whether it is finished, its run history and its payload (plain JSON)."""

    page: str
    name: str
    key: dict
    payload: dict
    complete: bool = True
    runs: list[dict] = field(default_factory=list)

    @property
    def digest(self) -> str:
        return key_digest(self.key)


class ResultsStore:
    """Parts of results pages under ``root`` (``docs/results/state`` for the committed pages)."""

    def __init__(self, root: str | os.PathLike, redo: tuple[str, ...] = ()):
        self.root = Path(root)
        if self.root.exists() and not self.root.is_dir():
            raise NotADirectoryError(f"results store {self.root} is a file; give a folder")
        self.redo = tuple(redo)  # part-name patterns to compute again (see the module docstring)
        self._saved: set[tuple[str, str]] = set()  # (page, part) saved by this store: a redo is done once

    def named_for_redo(self, name: str, key: dict) -> bool:
        """Whether a ``redo`` pattern names this part: its name, or its file's stem ``name--digest`` (one key of a
        name that a page stores under several, as ``results run --stale`` names them). A page that builds on an
        earlier stored part (compress's candidates carried over from a run of fewer backends) asks this too: a part
        named for redo is not reused, neither as itself nor as the base of another."""
        stem = f"{name}--{key_digest(key)}"
        return any(fnmatchcase(name, pat) or fnmatchcase(stem, pat) for pat in self.redo)

    def _redoing(self, page: str, name: str, key: dict) -> bool:
        return (page, name) not in self._saved and self.named_for_redo(name, key)  # once per run

    def path(self, page: str, name: str, key: dict) -> Path:
        return self.root / _SAFE.sub("_", page) / f"{_SAFE.sub('_', name)}--{key_digest(key)}.json"

    def load(self, page: str, name: str, key: dict) -> Part | None:
        """The part stored under exactly this key, or ``None``; other keys for the same part are named in the log."""
        path = self.path(page, name, key)
        stored_form = json.loads(json.dumps(key, default=str))  # the key as a file holds it: tuples as lists
        if path.is_file() and self._redoing(page, name, key):
            logger.info("%s/%s: stored, but --redo names it: computing it again", page, name)
            return None
        if not path.is_file():
            others = self.other_keys(page, name, key)
            if others:
                logger.info("%s/%s: %d stored result(s) under other settings (%s), not reused",
                            page, name, len(others), "; ".join(_differences(stored_form, o) for o in others))
            return None
        doc = read_part_file(path)
        if doc.get("key") != stored_form:
            raise ValueError(f"results store file {path} does not hold the part its name says (format or key "
                             "differs); move it away to recompute that part")
        return Part(page, name, doc["key"], doc["payload"], bool(doc.get("complete", True)), list(doc.get("runs", [])))

    def save(self, part: Part) -> Path:
        """Write ``part`` atomically under its key."""
        path = self.path(part.page, part.name, part.key)
        write_json(path, {"format": STORE_FORMAT, "page": part.page, "part": part.name, "key": part.key,
                          "digest": part.digest, "complete": part.complete, "runs": part.runs,
                          "payload": part.payload})
        self._saved.add((part.page, part.name))
        return path

    def other_keys(self, page: str, name: str, key: dict) -> list[dict]:
        """Keys of the same part stored under other settings."""
        folder = self.root / _SAFE.sub("_", page)
        mine = self.path(page, name, key).name
        found = []
        for f in sorted(folder.glob(f"{_SAFE.sub('_', name)}--*.json")) if folder.is_dir() else []:
            if f.name == mine:
                continue
            try:
                found.append(read_part_file(f)["key"])
            except ValueError:
                continue
        return found

    def parts(self, page: str) -> list[Part]:
        """Every part stored for ``page`` (any key), in file-name order."""
        folder = self.root / _SAFE.sub("_", page)
        out = []
        for f in sorted(folder.glob("*--*.json")) if folder.is_dir() else []:
            doc = read_part_file(f)
            out.append(Part(page, doc["part"], doc["key"], doc["payload"], bool(doc.get("complete", True)),
                            list(doc.get("runs", []))))
        return out


_PART_FIELDS = {"format": int, "part": str, "key": dict, "payload": dict}


def read_part_file(path: Path) -> dict:
    """The JSON document of a stored part, checked against the format above; anything else (unreadable, not JSON, a
    foreign JSON file) is one ``ValueError`` line naming the file and the fix."""
    fix = "move it away (the store holds only files layerwise writes; that part is then computed again)"
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"results store file {path} is unreadable ({' '.join(str(exc).split())}); {fix}") from None
    if not isinstance(doc, dict):
        raise ValueError(f"results store file {path} holds a JSON {type(doc).__name__}, not a stored part; {fix}")
    wrong = [k for k, kind in _PART_FIELDS.items() if not isinstance(doc.get(k), kind)]
    if wrong or doc["format"] != STORE_FORMAT or not isinstance(doc.get("runs", []), list):
        what = f"lacks or mistypes {', '.join(wrong)}" if wrong else f"has format {doc.get('format')!r}"
        raise ValueError(f"results store file {path} is not a stored part of format {STORE_FORMAT} ({what}); {fix}")
    return doc


def _differences(want: dict, have: dict, prefix: str = "") -> str:
    """'max_length 256 stored, 8 now, data.checksum ...' for the first few settings that differ (``want`` in its
    stored JSON form, so that a tuple now and the list it was stored as are not a difference)."""
    diffs = []
    for k in sorted(set(want) | set(have)):
        a, b = want.get(k), have.get(k)
        if isinstance(a, dict) and isinstance(b, dict):
            sub = _differences(a, b, f"{prefix}{k}.")
            if sub:
                diffs.append(sub)
        elif a != b:
            diffs.append(f"{prefix}{k} {b!r} stored, {a!r} now")
    return ", ".join(diffs[:4])
