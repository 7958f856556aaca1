"""Which export a source folder calls for: a registry that each method's ``export`` module fills.

``export/`` imports no method. Each method's ``methods/<m>/export.py`` registers an :class:`Exporter` (its kind, a
``detects(folder)`` predicate on the files of a folder, and the function that writes the export); importing
``layerwise`` (any of its modules) imports :mod:`layerwise.methods`, whose ``__init__`` imports every method's
exporter, so the registry is full before :func:`source_kind` or :func:`export_trained` can be called. Each kind is
told by files only that kind writes, so at most one exporter detects a folder (:func:`source_kind` checks); a source
that none detects (a built-in name or a Hugging Face folder) is a ``layer_subset``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FALLBACK_KIND", "Exporter", "export_kinds", "export_trained", "exporters", "register_exporter",
           "source_kind"]

FALLBACK_KIND = "layer_subset"  # a source no exporter detects: a pretrained model (built-in name or HF folder)


@dataclass(frozen=True)
class Exporter:
    """One kind of export, registered by the method that makes such folders."""

    kind: str  # the name source_kind returns (and the export card's kind)
    detects: Callable[[Path], bool] | None  # True for a folder of this kind; None: the fallback kind (never detected)
    export: Callable[..., Path]  # the function that writes the sentence-transformers folder
    # how export_trained(source, folder, overwrite=...) calls it: True when those three arguments are all it needs;
    # else the one-line reason it needs more (said to a caller of export_trained)
    from_folder: bool | str = True


_EXPORTERS: dict[str, Exporter] = {}


def register_exporter(exporter: Exporter) -> Exporter:
    """Add ``exporter`` (its kind must be new); returns it."""
    if exporter.kind in _EXPORTERS:
        raise ValueError(f"an exporter of kind {exporter.kind!r} is registered twice")
    _EXPORTERS[exporter.kind] = exporter
    return exporter


def exporters() -> tuple[Exporter, ...]:
    """The registered exporters."""
    return tuple(_EXPORTERS.values())


def export_kinds() -> tuple[str, ...]:
    """The kinds of export the registered methods offer."""
    return tuple(_EXPORTERS)


def source_kind(source: str | os.PathLike) -> str:
    """The kind of the registered exporter that detects the folder ``source`` (``trained_pooler``: a
    ``layerwise train`` SentenceModel folder; ``multitask``: a ``layerwise multitask`` folder; ``lattemix``: a saved
    Latte-Mix token model; ``tmft``: a ``layerwise tmft`` folder), else ``layer_subset`` (a built-in name or Hugging
    Face folder)."""
    path = Path(source).expanduser()
    if not path.is_dir():
        return FALLBACK_KIND
    kinds = [e.kind for e in _EXPORTERS.values() if e.detects is not None and e.detects(path)]
    if len(kinds) > 1:
        raise ValueError(f"{source} looks like a folder of each of the kinds {', '.join(kinds)}: it holds files that "
                         "more than one method writes; export from a folder one method wrote")
    return kinds[0] if kinds else FALLBACK_KIND


def export_trained(source: str | os.PathLike, folder: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Export a trained folder: any kind whose exporter needs only the source folder (``layer_subset`` and
    ``lattemix`` take more arguments: call their exporters)."""
    kind = source_kind(source)
    exporter = _EXPORTERS.get(kind)
    if exporter is None or exporter.detects is None:
        trained = [e.kind for e in _EXPORTERS.values() if e.detects is not None and e.from_folder is True]
        raise ValueError(f"{source} is not a folder of a trained model ({', '.join(trained)}); for a pretrained "
                         "model export a layer subset (export_layer_subset with the layers)")
    if exporter.from_folder is not True:
        raise ValueError(f"{source} is a {kind} folder: {exporter.from_folder}")
    return exporter.export(source, folder, overwrite=overwrite)
