"""The files each command writes into its ``--output`` folder, checked before any work and claimed while written.

Every command with an ``--output`` folder names here the files it writes there (shell patterns over the folder's
own files); ``main`` refuses a matching file layerwise did not write before the command starts
(:func:`layerwise.outputs.check_outputs`) and runs the command inside :func:`layerwise.outputs.guarded`, so every
write into the folder is listed in its manifest, and one to a file the tool did not write is refused even when a
pattern here missed it. Subfolders (checkpoints, stores, saved models) are folders with their own marker checks.
``encode`` and ``export`` write a path the user names (``OUTPUT``, ``DEST``) and refuse what they did not write
themselves (:mod:`layerwise.encode.writers`, :mod:`layerwise.export.sentence_transformers`).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

__all__ = ["OUTPUT_NAMES", "check_output_names", "guard_output", "output_patterns"]

#: command -> the names it writes into --output (for ``results``: see :func:`output_patterns`)
OUTPUT_NAMES: dict[str, tuple[str, ...]] = {
    "search": ("search-*",),
    "layers": ("layers-*",),
    "transfer": ("transfer-*",),
    "ablate": ("ablations-*",),
    "lattemix": ("lattemix-*",),
    "train": ("train.json",),
    "retrieval": ("retrieval-*",),
    "wordsim": ("wordsim-*",),
    "tmft": ("tmft.*", "tmft-*"),
    "multitask": ("multitask.*", "multitask-*"),
    "compress": ("report.md", "report.json", "frontier.png"),  # and model/, an export folder with its own check
}


def output_patterns(args) -> tuple[str, ...]:
    """The names ``args``' command writes into ``args.output`` (a results page: ``NAME.md``, ``NAME.json`` and its
    figures ``NAME-*.png``)."""
    command = getattr(args, "command", None)
    if command != "results":
        return OUTPUT_NAMES.get(command, ())
    if getattr(args, "action", None) == "list":
        return ()
    from layerwise.benchmarks.catalog import all_pages

    names = [p.name for p in all_pages()] if getattr(args, "all", False) or not args.name else [args.name]
    return tuple(f"{name}{suffix}" for name in names for suffix in (".md", ".json", "-*.png"))


def check_output_names(args) -> None:
    """Refuse now (before any model loads) a file of ``--output`` that the command would replace and did not write."""
    from layerwise.outputs import check_outputs

    output = getattr(args, "output", None)
    if output:
        check_outputs(output, output_patterns(args))


def guard_output(args) -> contextlib.AbstractContextManager:
    """The context the command runs in: its writes into ``--output`` are claimed in the folder's manifest."""
    from layerwise.outputs import guarded

    output = getattr(args, "output", None)
    return guarded(Path(output)) if output else contextlib.nullcontext()
