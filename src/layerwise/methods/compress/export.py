"""Write the chosen candidate of ``layerwise compress`` as a sentence-transformers folder of built-in modules.

Every candidate is a :class:`~layerwise.methods.truncated.model.TruncatedModel` (an encoder cut at its highest
hidden state used, mean-pooled; a layer subset through ``WeightedLayerPooling``), so the folder holds a
``Transformer`` with that many layers and a mean ``Pooling``: ``SentenceTransformer(folder)`` loads it without
``trust_remote_code``. Its ``layerwise_export.json`` carries the provenance (source model by weight hash, the
choice, every candidate measured) and its README the model card with the frontier table.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from layerwise.encoders.model_files import weights_sha256
from layerwise.export.card import ExportCard, render_card
from layerwise.export.kinds import Exporter, register_exporter
from layerwise.export.sentence_transformers import (
    EXPORT_MARKER,
    check_destination,
    pooling_modules,
    save_st_folder,
    transformer_options,
)
from layerwise.methods.compress.backends import ONNX_INT8_MIXED, graph_session
from layerwise.methods.compress.frontier import RECIPES, Candidate, frontier_table
from layerwise.methods.compress.int8_mixed import INT8_MIXED_DIR
from layerwise.methods.truncated.model import TruncatedModel
from layerwise.reports import write_json

__all__ = ["export_compressed", "is_compressed_folder", "write_compressed"]


def write_compressed(model: TruncatedModel, folder: str | os.PathLike, *, source: dict, report: dict,
                     graph: str | os.PathLike | None = None, overwrite: bool = False) -> Path:
    """Write ``model`` (the chosen candidate's torch model) to ``folder``. ``report``: ``{"chosen": Candidate dict,
    "original": Candidate dict, "candidates": [Candidate dict, ...], "budget": float}`` (JSON), kept in the
    provenance and shown in the card. ``graph``: the candidate's layer graph folder (an ONNX backend was chosen),
    copied to ``folder/onnx`` (run it with ``LayerGraphSession(folder / "onnx", quantized=...)``)."""
    check_destination(folder, overwrite)
    chosen = Candidate.from_dict(report["chosen"])
    original = Candidate.from_dict(report["original"])
    scores = {"dev Spearman x100": f"{chosen.dev:.2f} (the original: {original.dev:.2f})",
              "throughput": f"{chosen.ratio:.2f}x the original's (batch {chosen.speed['batch_size']}, max length "
                            f"{chosen.speed['max_length']}, {chosen.speed['threads']} torch threads)",
              **{f"{name} Spearman x100": f"{value:.2f}" for name, value in chosen.tests.items()}}
    top = int(model.encoder.config.num_hidden_layers)
    card = ExportCard(
        kind="compress", source=source, layers=list(model.layers), pooling="mean", scores=scores,
        description=f"The fastest model within {report['budget']:g} points of dev Spearman of its source, chosen by "
                    f"`layerwise compress`: {chosen.recipe} ({RECIPES[chosen.recipe]}), {top} layers.",
        extra={"max_length": model.max_length, "candidate": chosen.name, "budget": report["budget"]})
    candidates = [Candidate.from_dict(c) for c in report["candidates"]]
    readme = render_card(card, Path(folder).name) + "\n## Frontier\n\n" + "\n".join(
        frontier_table(candidates, chosen)) + "\n"
    modules, all_states = pooling_modules(model.encoder.config, pooling="mean", layers=model.layers)
    provenance = {"method": "compress", **card.provenance(), "layers": list(model.layers),
                  "max_length": model.max_length, "compress": report}
    if graph is not None:
        readme += ONNX_NOTE.format(session=_session_call(chosen.backend))
    dest = save_st_folder(model.encoder, model.tokenizer, folder, modules,
                          transformer_kwargs=transformer_options(model.max_length, all_hidden_states=all_states),
                          provenance=provenance, readme=readme, overwrite=overwrite)
    if graph is not None:
        _add_graph(dest, Path(graph))
    return dest


ONNX_NOTE = """
## ONNX

The chosen candidate runs on its ONNX layer graph: its layer graph (fp32 `onnx/model.onnx`, onnxruntime's int8
`onnx/model-int8.onnx`, OpenVINO's int8 `onnx/openvino-int8/model.xml` and onnxruntime's mixed int8
`onnx/onnx-int8-mixed/model.onnx` where those backends were measured; outputs every
hidden state's masked token mean) is in `onnx/`. The sentence vector is the mean of the hidden states
listed above:

```python
from pathlib import Path

from layerwise.encoders.onnx_backend import LayerGraphSession
from transformers import AutoTokenizer

session = {session}
stack = session.encode(AutoTokenizer.from_pretrained("."), ["A sentence."])
vectors = stack.mean[:, LAYERS].mean(axis=1)  # LAYERS: the hidden states above
```
"""


def _session_call(backend: str) -> str:
    """How the model card's snippet opens the chosen backend's graph."""
    if backend == ONNX_INT8_MIXED:
        return f'LayerGraphSession.from_file(Path("onnx/{INT8_MIXED_DIR}/model.onnx"))'
    kw = graph_session(backend)
    return f'LayerGraphSession("onnx", quantized={kw["quantized"]}, runtime="{kw["runtime"]}")'


def _add_graph(dest: Path, graph: Path) -> None:
    """Copy the graph folder into ``dest/onnx`` and list its files in the export manifest (so that a later export
    over ``dest`` knows them as its own)."""
    copy = dest / "onnx"
    if copy.exists():
        shutil.rmtree(copy)  # only an earlier export's graph can be here: the folder was just written
    shutil.copytree(graph, copy)
    info = json.loads((dest / EXPORT_MARKER).read_text())
    info["files"] = sorted(set(info["files"]) | {p.relative_to(dest).as_posix() for p in copy.rglob("*")
                                                 if p.is_file()})
    write_json(dest / EXPORT_MARKER, info)


def _marker(path: str | os.PathLike) -> dict:
    try:
        info = json.loads((Path(path) / EXPORT_MARKER).read_text())
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def is_compressed_folder(path: str | os.PathLike) -> bool:
    """A folder written by ``layerwise compress`` (its export marker names the method ``compress``)."""
    return _marker(path).get("method") == "compress"


def export_compressed(source: str | os.PathLike, folder: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Write the compressed model saved in ``source`` to ``folder`` again, with its card and provenance."""
    check_destination(folder, overwrite)
    info = _marker(source)
    model = TruncatedModel.load(source)
    src = info.get("source") or {"name": str(source), "weights_sha256": weights_sha256(source)}
    graph = Path(source) / "onnx" if (Path(source) / "onnx").is_dir() else None
    return write_compressed(model, folder, source=src, report=info["compress"], graph=graph, overwrite=overwrite)


EXPORTER = register_exporter(Exporter(kind="compress", detects=is_compressed_folder, export=export_compressed))
