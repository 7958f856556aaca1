"""The students of a compression run: the teacher's embeddings of the corpus (the original model's mean of its last
hidden state, once, through the layer cache), each student trained once (:mod:`.distill`), kept in the run's folder
and loaded from it by a later run, on this machine or another (a GPU machine trains, the serving machine scores and
times: :meth:`Students.train_all`), and what its training did (steps, loss, device, time; its MSE to the teacher
against the plain cut's)."""

from __future__ import annotations

import json
import platform
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from layerwise.encoders.layer_encoder import LayerEncoder
from layerwise.keys import keyed_name
from layerwise.methods.compress.config import CompressConfig
from layerwise.methods.compress.distill import distill_student, embedding_mse
from layerwise.methods.truncated.model import TruncatedModel
from layerwise.methods.truncated.tasks import PairSet
from layerwise.reports import code_revision, write_json
from layerwise.training import seed_everything
from layerwise.training.checkpoint import tensors_sha256

__all__ = ["MSE_SENTENCES", "STUDENTS", "Students"]

#: recipes whose model is trained (a student), not cut from the original as it is
STUDENTS = ("distilled", "every-depth")
MSE_SENTENCES = 1000  # corpus sentences on which a student's MSE to the teacher is reported (before and after)
_CHUNK = 4096  # corpus sentences per layer-cache call (only the last hidden state's means are kept in memory)


class Students:
    """The students of ``config`` on ``corpus``: from memory, from ``folder/students/<name>-<digest>``, or trained
    now (and written there, ``run.json`` last). ``key(recipe, layers, backend)`` is the run's candidate key, by
    which a student's folder is named (less the backend and the timing settings, which do not change a student)."""

    def __init__(self, config: CompressConfig, corpus: tuple[str, ...], encoder: LayerEncoder, *,
                 folder: Path | None, device, key: Callable[..., dict], show_progress: bool | None = None,
                 pairs: PairSet | None = None):
        self.config, self.corpus, self.encoder, self.folder = config, corpus, encoder, folder
        self.pairs = pairs  # labelled pairs whose loss every student adds to the MSE (None: the MSE alone)
        self.device, self.key, self.show_progress = device, key, show_progress
        self.n_layers = int(encoder.identity.n_layers)
        self._models: dict[tuple[str, int], TruncatedModel] = {}  # (recipe, depth): trained or loaded once per run
        self._facts: dict[tuple[str, int], dict] = {}  # each student's training: steps, final loss, device, time
        self._teacher: np.ndarray | None = None

    def get(self, recipe: str, depth: int) -> TruncatedModel:
        """The student of ``recipe`` ("distilled" at ``depth``, or "every-depth", trained at every depth of
        ``config.every_depth`` up to ``depth``, their maximum)."""
        if (recipe, depth) in self._models:
            return self._models[(recipe, depth)]
        cfg, root = self.config, self.root(recipe, depth)
        if self.trained(recipe, depth):
            student = TruncatedModel.load(root / "model").to(self.device)
            facts = json.loads((root / "run.json").read_text())
            if "weights_sha256" not in facts:  # saved before its weights were recorded: the tensors it saved
                facts["weights_sha256"] = tensors_sha256(student.encoder.state_dict())
            self._facts[(recipe, depth)], self._models[(recipe, depth)] = facts, student
            return student
        seed_everything(cfg.seed)
        t0 = time.perf_counter()
        student = TruncatedModel.from_pretrained(cfg.model, (depth,), max_length=cfg.max_length).to(self.device)
        run = distill_student(student, list(self.corpus), self.teacher(), config=cfg,
                              folder=None if root is None else root / "train", show_progress=self.show_progress,
                              depths=cfg.every_depth if recipe == "every-depth" else None, pairs=self.pairs)
        student.eval()
        facts = {"steps": len(run.step), "final_loss": float(np.mean(run.loss[-10:])), "device": str(self.device),
                 "seconds": time.perf_counter() - t0,  # where and how long (a resumed training: the last process)
                 "steps_this_run": run.steps_this_run,  # the steps of that process: fewer than steps where resumed
                 "machine": _machine(self.device),
                 "computed": {"trained": code_revision()},  # the code that trained it (a resumed one: that finished it)
                 # which student this is: its candidates carry it, so that a run adopting them (Compression.adopt)
                 # can tell this student from another trained under the same settings (on another machine, say)
                 "weights_sha256": tensors_sha256(student.encoder.state_dict())}
        if root is not None:
            student.save(root / "model")
            write_json(root / "run.json", facts)  # written last: the student is complete
            shutil.rmtree(root / "train", ignore_errors=True)  # its checkpoints (optimizer state: twice the model)
        self._facts[(recipe, depth)], self._models[(recipe, depth)] = facts, student
        return student

    def trained(self, recipe: str, depth: int) -> bool:
        """Whether the run's folder holds this student, finished (its ``run.json`` is written last)."""
        root = self.root(recipe, depth)
        return root is not None and (root / "model" / "config.json").is_file() and (root / "run.json").is_file()

    def weights_sha256(self, recipe: str, depth: int) -> str | None:
        """The checksum of the student's weights (:func:`~layerwise.training.checkpoint.tensors_sha256` of its
        encoder) where the run's folder holds it finished: as its ``run.json`` records it, or (saved before it was
        recorded) from the student loaded once; None where it does not (nothing trained)."""
        if (recipe, depth) not in self._models:
            if not self.trained(recipe, depth):
                return None
            recorded = json.loads((self.root(recipe, depth) / "run.json").read_text()).get("weights_sha256")
            if recorded is not None:
                return recorded
            self.get(recipe, depth)
        return self._facts[(recipe, depth)]["weights_sha256"]

    def root(self, recipe: str, depth: int) -> Path | None:
        """The folder of a student (None without a run folder), named by everything that changes it."""
        if self.folder is None:
            return None
        key = {k: v for k, v in self.key(recipe, (depth,), "torch").items() if k != "backend"}
        # the timing settings do not change a student: another timing protocol reuses it
        key["settings"] = {k: v for k, v in key["settings"].items() if not k.startswith("speed_")}
        return self.folder / "students" / keyed_name(f"{recipe}-l{depth}", key)

    def planned(self) -> list[tuple[str, int]]:
        """(recipe, depth) of every student of the config's depths: the distilled student of each depth below the
        full one (deepest first), the every-depth student once (at its deepest depth)."""
        wanted = [("distilled", d) for d in sorted(self.config.depths, reverse=True) if d < self.n_layers]
        return wanted + ([("every-depth", max(self.config.every_depth))] if self.config.every_depth else [])

    def train_all(self) -> list[str]:
        """Train (or find) every student of the config's depths: the distilled student of each depth below the full
        one, the every-depth student once. Returns their folder names."""
        if self.folder is None:
            raise ValueError("train_students() keeps the students in the run's folder, which is None")
        wanted = self.planned()
        for recipe, depth in wanted:
            self.get(recipe, depth)
        return [self.root(recipe, depth).name for recipe, depth in wanted]

    def facts(self, student: TruncatedModel, recipe: str, depth: int) -> dict:
        """The student's training and its MSE to the teacher on the first corpus sentences, against the cut's."""
        n = min(MSE_SENTENCES, len(self.corpus))
        # a student loaded from its folder needs only these sentences of the teacher (not the whole corpus)
        teacher = self._teacher[:n] if self._teacher is not None else self.corpus_means(self.n_layers, n)
        texts = list(self.corpus[:n])
        cut = self.corpus_means(depth, n)
        vectors = student.encode(texts, batch_size=self.config.speed_batch_size)
        trained = depth if recipe == "distilled" else max(self.config.every_depth)
        return {**self._facts.get((recipe, trained), {}), "mse_sentences": n,
                "mse_cut": embedding_mse(cut, teacher), "mse_distilled": embedding_mse(vectors, teacher)}

    def corpus_means(self, state: int, limit: int | None = None) -> np.ndarray:
        """(n, d) mean of hidden state ``state`` for the first ``limit`` corpus sentences (None: all), in chunks
        through the layer cache."""
        texts = list(self.corpus[:limit])
        return np.concatenate([self.encoder.encode(texts[i:i + _CHUNK]).mean[:, state]
                               for i in range(0, len(texts), _CHUNK)])

    def teacher(self) -> np.ndarray:
        """(n, d) the original model's embeddings of the corpus (mean of the last hidden state), computed once."""
        if self._teacher is None:
            self._teacher = self.corpus_means(self.n_layers)
        return self._teacher


def _machine(device) -> dict:
    """Where a student trained, for its ``run.json``: the accelerator's name (None on a CPU), torch's version, the
    platform (a student trained on a lent GPU machine is scored and timed on another)."""
    device = torch.device(device)
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else None
    return {"gpu": gpu, "torch": torch.__version__, "platform": platform.platform()}
