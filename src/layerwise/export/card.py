"""What an exported folder says about itself: provenance (``layerwise_export.json``) and a short README model card.

The provenance names the source model by its weight hash, the layers and pooling, the results file the subset came
from (with its sha256) and the layerwise version and git commit; the card repeats it in words, says how to load the
folder (with ``layerwise.load_sentence_transformer`` where a ``layerwise`` module class is in it: never with
``trust_remote_code``) and lists the scores measured for it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from layerwise._version import __version__
from layerwise.reports import source_revision

__all__ = ["ExportCard", "file_sha256", "render_card"]


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


@dataclass
class ExportCard:
    """The facts an export records; :meth:`provenance` is its JSON, :func:`render_card` its README."""

    kind: str  # layer_subset, lc_mlp, trained_pooler, multitask, tmft
    source: dict  # the source model: name, path, weights_sha256 (and other ModelIdentity fields where known)
    description: str  # one sentence: what the folder computes
    layers: list[int] | None = None  # hidden states used (0 = embedding output)
    pooling: str | None = None  # token pooling of the layers
    results_file: dict | None = None  # {"path", "sha256", ...} of the results file the subset was read from
    scores: dict[str, str] = field(default_factory=dict)  # measure -> value in words, e.g. "STS-B test Spearman x100"
    layerwise_module: bool = False  # the folder holds a module class of the installed layerwise package
    extra: dict = field(default_factory=dict)  # kind-specific settings (max length, pooler kind, ...)

    def provenance(self) -> dict:
        rev = source_revision()
        return {"kind": self.kind, "source": self.source, "layers": self.layers, "pooling": self.pooling,
                "results_file": self.results_file, "scores": self.scores, "layerwise_module": self.layerwise_module,
                **self.extra, "layerwise_version": __version__, "layerwise_git": rev}


def render_card(card: ExportCard, name: str) -> str:
    """README.md text for an exported folder called ``name``."""
    if card.layerwise_module:
        load = ["from layerwise import load_sentence_transformer", "",
                f'model = load_sentence_transformer("{name}")  # a SentenceTransformer']
    else:
        load = ["from sentence_transformers import SentenceTransformer", "", f'model = SentenceTransformer("{name}")']
    lines = [f"# {name}", "", card.description, "",
             "Exported by `layerwise export` (the layerwise package; version and commit in "
             "`layerwise_export.json`).", "", "## Use", "", "```python", *load,
             'embeddings = model.encode(["A sentence.", "Another."])', "```", ""]
    if card.layerwise_module:
        lines += ["This folder holds a module class of the installed `layerwise` package, named in `modules.json` by "
                  "import path, and no code of its own. sentence-transformers 6 imports a class outside its own "
                  "package only with `trust_remote_code=True`, which would also run any Python file placed in the "
                  "folder: do not pass it. `load_sentence_transformer` loads the folder with "
                  "`trust_remote_code=False`, resolving that class to the installed one, and refuses a folder that "
                  "names code.", ""]
    lines += ["## Provenance", "", f"- source model: `{card.source.get('name')}` (weights sha256 "
              f"`{card.source.get('weights_sha256')}`)"]
    if card.layers is not None:
        lines.append(f"- hidden states used: {', '.join(map(str, card.layers))} (0 = embedding output); pooling: "
                     f"{card.pooling}")
    if card.results_file:
        lines.append(f"- layers read from `{card.results_file['path']}` (sha256 `{card.results_file['sha256']}`)")
    for key, value in card.extra.items():
        lines.append(f"- {key.replace('_', ' ')}: {value}")
    lines += ["", "## Scores", ""]
    if card.scores:
        lines += [f"- {measure}: {value}" for measure, value in card.scores.items()]
    else:
        lines.append("No scores were measured for this export (give `--from RESULTS.json` to record them).")
    return "\n".join(lines) + "\n"
