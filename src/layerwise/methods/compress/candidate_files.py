"""A compression run's scored candidates on disk: one JSON file each, named by the candidate's key.

:func:`candidate_key` is what makes a candidate the same one in another run: the model's identity, the data's
checksums, every setting that changes its numbers, its recipe, hidden states and backend, and what that backend
adds (the graph format, onnxruntime's int8 setting, a calibration). :class:`CandidateFiles` keeps the candidates of
one run folder under ``candidates/<recipe>-l<depth>-<backend>-<digest>.json`` (``{"key": ..., "candidate": ...}``,
written atomically), reads them back, and forgets what a later run is to measure again: the timings
(:meth:`~CandidateFiles.forget_timings`) or what code since changed computed (:meth:`~CandidateFiles.forget_computed`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

from layerwise.encoders.onnx_backend import GRAPH_FORMAT_VERSION, OPSET
from layerwise.encoders.onnx_int8 import INT8_QUANTIZATION
from layerwise.encoders.openvino_int8 import QUANTIZATION
from layerwise.keys import keyed_name, model_key
from layerwise.methods.compress.backends import CALIBRATION_SENTENCES, MIXED_SETTINGS, ONNX_INT8_MIXED, OPENVINO_INT8
from layerwise.methods.compress.config import CompressConfig
from layerwise.methods.compress.frontier import Candidate
from layerwise.methods.compress.students import STUDENTS
from layerwise.reports import write_json

__all__ = ["FLOAT32_GRAPHS", "STUDENT_SETTINGS", "CandidateFiles", "candidate_key"]

FLOAT32_GRAPHS = ("onnx", "openvino")  # backends that run the torch model's float32 function as a graph
STUDENT_SETTINGS = ("epochs", "batch_size", "lr", "seed")  # CompressConfig's distillation settings (and pairs_weight)
Key = Callable[[str, tuple[int, ...], str], dict]  # (recipe, hidden states, backend) -> the candidate's key


def candidate_key(config: CompressConfig, data, identity, recipe: str, layers: tuple[int, ...], backend: str) -> dict:
    """The key of one candidate of ``config`` on ``data`` (a ``CompressData``) for the model ``identity``."""
    # the distillation's settings and labelled pairs change the students only: a cut (or the original) is the same
    # candidate at any learning rate, with or without pairs, so another student's run reads it back
    student = recipe in STUDENTS
    pairs = data.train_pairs is not None and student
    settings = {k: v for k, v in config.to_dict().items()
                if k not in ("depths", "backends", "every_depth", "graph_test_scores")
                and (k not in STUDENT_SETTINGS or student) and (k != "pairs_weight" or pairs)}
    checksums = {k: v for k, v in data.checksums().items() if k != "train_pairs" or pairs}
    key = {"model": model_key(identity), "data": checksums, "settings": settings,
           "recipe": recipe, "layers": list(layers), "backend": backend}
    if backend in FLOAT32_GRAPHS and config.graph_test_scores != "measured":  # only their scores change
        key["test_scores"] = config.graph_test_scores
    if recipe == "every-depth":  # its student depends on every depth it was trained at
        key["every_depth"] = list(config.every_depth)
    if backend != "torch":  # a new graph format gives new graphs and new measurements
        key["graph"] = {"format": GRAPH_FORMAT_VERSION, "opset": OPSET}
    if backend in ("onnx-int8", ONNX_INT8_MIXED):  # onnxruntime's int8 setting (7-bit weights, say)
        key["int8"] = INT8_QUANTIZATION
    if backend == OPENVINO_INT8:  # its numbers depend on the calibration and the quantizer's settings
        key["calibration"] = {"sentences": CALIBRATION_SENTENCES, **QUANTIZATION}
    if backend == ONNX_INT8_MIXED:  # which products stay float32 depends on the calibration and the ratio
        key["calibration"] = {"sentences": CALIBRATION_SENTENCES, **MIXED_SETTINGS}
    return key


class CandidateFiles:
    """The candidate files of the run folder ``folder`` (None: a run that keeps nothing), named by ``key``."""

    def __init__(self, folder: Path | None, key: Key):
        self.folder, self.key = folder, key

    def path(self, recipe: str, layers: tuple[int, ...], backend: str) -> Path | None:
        if self.folder is None:
            return None
        name = keyed_name(f"{recipe}-l{max(layers)}-{backend}", self.key(recipe, layers, backend))
        return self.folder / "candidates" / f"{name}.json"

    def load(self, recipe: str, layers: tuple[int, ...], backend: str) -> Candidate | None:
        """The candidate stored under this key, or None."""
        path = self.path(recipe, layers, backend)
        if path is None or not path.is_file():
            return None
        return Candidate.from_dict(json.loads(path.read_text())["candidate"])

    def has(self, c: Candidate) -> bool:
        path = self.path(c.recipe, c.layers, c.backend)
        return path is not None and path.is_file()

    def save(self, c: Candidate) -> None:
        path = self.path(c.recipe, c.layers, c.backend)
        if path is not None:
            write_json(path, {"key": self.key(c.recipe, c.layers, c.backend), "candidate": c.to_dict()})

    def mine(self) -> Iterator[tuple[Path, Candidate]]:
        """(file, candidate) of every file stored under this run's model, data and settings, whatever its depth
        (a file of another key, an earlier protocol's say, is not this run's)."""
        if self.folder is None:
            raise ValueError("this run keeps no candidate files (its folder is None)")
        for path in sorted((self.folder / "candidates").glob("*.json")):
            stored = json.loads(path.read_text())
            c = Candidate.from_dict(stored["candidate"])
            if stored["key"] == self.key(c.recipe, c.layers, c.backend):
                yield path, c

    def forget_timings(self) -> int:
        """Empty the stored throughput of every candidate of :meth:`mine` (scores kept). Returns how many."""
        forgotten = 0
        for _, c in list(self.mine()):
            if c.speed:
                computed = {k: v for k, v in c.extra.get("computed", {}).items() if k != "timed"}
                self.save(replace(c, speed={}, extra={**c.extra, "computed": computed} if "computed" in c.extra
                                  else c.extra))
                forgotten += 1
        return forgotten

    def forget_computed(self, stale: Callable[[str], bool]) -> int:
        """Delete every candidate of :meth:`mine` that code of a ``stale`` commit trained, scored or timed, as it
        records them (``extra["computed"]``; one recorded before it named its code is kept). Returns how many."""
        forgotten = 0
        for path, c in list(self.mine()):
            if any(stale(rev["commit"]) for rev in c.extra.get("computed", {}).values() if rev.get("commit")):
                path.unlink()
                forgotten += 1
        return forgotten
