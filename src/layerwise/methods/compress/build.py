"""The compression run: every candidate built, scored, timed against the original and kept on disk.

:class:`Compression` is the method on given data (the estimator and the results page both run it):

1. the layer stacks of the dev pairs, the test pairs and the corpus are encoded once through the layer cache
   (:class:`~layerwise.encoders.LayerEncoder`); the teacher's embedding of a corpus sentence is the mean of its
   last hidden state (the original model's pooling);
2. one exact search over all subsets of hidden states on the dev pairs
   (:class:`~layerwise.methods.lc.search.LayerSubsetSearch`) gives, for each depth l, the best subset within
   0..l (the LC cut) - subsets are read from the one search, never searched again per depth;
3. per depth l (:mod:`.specs`): the plain cut (mean of hidden state l), the LC cut (where it differs from every cut
   listed already) and a distilled student (:mod:`.distill`); the original model (the full depth) is a candidate too;
   with ``every_depth``, the every-depth student (trained once at all of those depths together) cut at l; with
   ``stop_budget``, the depths deepest first, none after the first at which no candidate of at most that many layers
   is within that budget of the original on dev (:func:`.frontier.stop_record`);
4. each candidate on each backend: dev and test Spearman (a cut from the stacks, a student or another backend by
   encoding each distinct sentence once: the same numbers, see the tests) and parameters; with
   ``graph_test_scores="checked"`` a float32 graph (onnx, openvino) encodes the dev pairs and a sample of each test
   set, and takes the torch candidate's test scores where its vectors are the torch model's (:data:`GRAPH_TOLERANCE`);
5. then, every candidate scored, each one's throughput against the original in one run (:mod:`.speed`): the timings
   come last, in one block, so that they can be taken on a quiet machine while the training and scoring are not.

With a ``folder`` every scored candidate is a JSON file ``candidates/<name>-<digest>.json`` (the digest of the
model's identity, the data's checksums and every setting: :mod:`.candidate_files`) and every student a sentence-transformers folder
``students/<name>-<digest>/model`` (the every-depth student once, cut per depth in memory; its training checkpoints in ``train/`` beside it until it is done): a killed run
recomputes nothing finished (a scored candidate waiting for its timing is
timed) and continues a student's training from its last checkpoint.
"""

from __future__ import annotations

import json
import logging
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from layerwise._progress import progress
from layerwise.data.checksum import content_checksum
from layerwise.encoders.layer_encoder import LayerEncoder
from layerwise.encoders.openvino_int8 import smooth_quant_alpha
from layerwise.encoders.truncate import truncate_encoder
from layerwise.evaluation.metrics import cosine_rows, spearman
from layerwise.keys import keyed_name, model_key
from layerwise.methods.compress.backends import (
    CALIBRATED,
    CALIBRATION_SENTENCES,
    ONNX_INT8_MIXED,
    OPENVINO_INT8,
    graph_folder,
    int8_settings,
    mixed_int8_facts,
    runner,
    same_int8_settings,
)
from layerwise.methods.compress.candidate_files import FLOAT32_GRAPHS, CandidateFiles, candidate_key
from layerwise.methods.compress.config import CompressConfig
from layerwise.methods.compress.frontier import Candidate, CompressResult, stop_record
from layerwise.methods.compress.specs import depth_specs
from layerwise.methods.compress.speed import measure_speed
from layerwise.methods.compress.students import STUDENTS, Students
from layerwise.methods.lc.search import LayerSubsetSearch, subset_cosine
from layerwise.methods.truncated.model import TruncatedModel
from layerwise.methods.truncated.tasks import PairSet
from layerwise.reports import code_revision
from layerwise.training.distributed import local_device

logger = logging.getLogger(__name__)

__all__ = ["STUDENTS", "CompressData", "Compression", "pair_spearman", "pair_vectors"]

# graph_test_scores="checked": the distinct sentences of each test set (its first ones) whose graph vectors are compared
# with the torch model's, besides every dev sentence, and the largest absolute difference that lets the graph take the
# torch candidate's test scores (float32 graphs measured here differ by 1e-6 or less)
GRAPH_CHECK_SENTENCES = 64
GRAPH_TOLERANCE = 1e-4


@dataclass(frozen=True)
class CompressData:
    """The user's data: unlabeled ``corpus`` sentences (distillation, timing), ``dev`` pairs (the choice) and named
    ``tests`` pairs (reported only), whose gold scores are on any scale (only their ranks count); optionally
    ``train_pairs``, labelled pairs with targets in [0, 1] whose loss the students add to the MSE (:mod:`.distill`)."""

    corpus: tuple[str, ...]
    dev: PairSet
    tests: dict[str, PairSet]
    train_pairs: PairSet | None = None

    def checksums(self) -> dict:
        out = {"corpus": content_checksum(list(self.corpus)), "dev": content_checksum(self.dev),
               "tests": {name: content_checksum(p) for name, p in sorted(self.tests.items())}}
        if self.train_pairs is not None:  # absent otherwise: runs without them keep their keys
            out["train_pairs"] = content_checksum(self.train_pairs)
        return out


def pair_spearman(a: np.ndarray, b: np.ndarray, pairs: PairSet) -> float:
    """Spearman x100 of the cosines of ``a``'s and ``b``'s rows against ``pairs``' gold scores."""
    return 100.0 * spearman(cosine_rows(a, b), np.asarray(pairs.targets))


def pair_vectors(encode, pairs: list[tuple[str, PairSet]]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """name -> (vectors of texts1, of texts2) of every pair set, each distinct sentence encoded once by ``encode``
    (texts -> (n, d)): how every candidate that is not a torch cut is scored."""
    texts = list(dict.fromkeys(t for _, p in pairs for t in (*p.texts1, *p.texts2)))
    row = {t: i for i, t in enumerate(texts)}
    vectors = encode(texts)
    return {name: (vectors[[row[t] for t in p.texts1]], vectors[[row[t] for t in p.texts2]]) for name, p in pairs}


class Compression:
    """One compression run of ``config`` on ``data`` (see the module docstring); :meth:`run` measures, :meth:`model`
    gives a candidate's torch model."""

    def __init__(self, config: CompressConfig, data: CompressData, *, folder: str | Path | None = None,
                 cache_dir=None, show_progress: bool | None = None, device: str | None = None,
                 stop_budget: float | None = None):
        self.config, self.data, self.show_progress = config, data, show_progress
        # build the depths deepest first and stop after the first one outside this budget (None: build them all)
        self.stop_budget = stop_budget
        self.unbuilt_depths: list[int] = []  # the depths the last score() left out (stop_budget)
        self.folder = None if folder is None else Path(folder)
        self.device = local_device(device)
        self.encoder = LayerEncoder(config.model, max_length=config.max_length, batch_size=config.speed_batch_size,
                                    device=str(self.device), cache_dir=cache_dir, show_progress=show_progress)
        self.n_layers = int(self.encoder.identity.n_layers)
        self.files = CandidateFiles(self.folder, self._key)
        self.students = Students(config, data.corpus, self.encoder, folder=self.folder, device=self.device,
                                 key=self._key, show_progress=show_progress, pairs=data.train_pairs)
        self._cut: tuple[tuple, TruncatedModel] | None = None  # the last cut model: (recipe, layers), the model
        self._scores: dict[tuple, Candidate] = {}  # (recipe, layers, backend) -> scored this run (no folder needed)
        self._tmp: tempfile.TemporaryDirectory | None = None  # graphs, when there is no folder

    # -- the run ---------------------------------------------------------------------------------------------
    def score(self) -> list[Candidate]:
        """Train the students and score every candidate the folder lacks (each written as soon as it is scored);
        nothing is timed: the candidates' ``speed`` is empty until :meth:`run` times them. With ``stop_budget`` the
        depths go deepest first, and after the first depth at which no candidate of at most that many layers is
        within ``stop_budget`` of the original's dev Spearman the shallower ones are left out (``unbuilt_depths``)."""
        cfg, L = self.config, self.n_layers
        self._stacks = {name: self._pair_stack(p) for name, p in [("dev", self.data.dev), *self.data.tests.items()]}
        a, b = self._stacks["dev"]
        self._search = LayerSubsetSearch(show_progress=self.show_progress).fit(a, b, self.data.dev.targets)
        self._original = TruncatedModel.from_pretrained(cfg.model, (L,), max_length=cfg.max_length).to(self.device)
        groups = [(depth, [(recipe, layers, backend) for recipe, layers in specs for backend in cfg.backends])
                  for depth, specs in depth_specs(self._search, cfg, L, descending=self.stop_budget is not None)]
        if "torch" not in cfg.backends:  # the reference is always measured, and always a candidate
            groups[0][1].insert(0, ("original", (L,), "torch"))
        self.unbuilt_depths = []
        with progress(total=sum(len(jobs) for _, jobs in groups), desc="compress candidates: scores",
                      unit="candidate", disable=not self._show()) as bar:
            scored = []
            for i, (depth, jobs) in enumerate(groups):
                for job in jobs:
                    scored.append(self._scored(*job))
                    bar.update(1)
                stops = depth is not None and self.stop_budget is not None
                if stops and stop_record(scored, self.stop_budget, depth) is not None:
                    self.unbuilt_depths = sorted(d for d, _ in groups[i + 1:])
                    break
        return scored

    def train_students(self) -> list[str]:
        """Train every student of the run's depths into the folder, scoring and timing nothing (:meth:`.students.
        Students.train_all`): the same run elsewhere (the folder copied there) loads them. Returns their names."""
        return self.students.train_all()

    def run(self) -> CompressResult:
        """Score (:meth:`score`), then time every candidate against the original in one block; returns them all."""
        cfg, L = self.config, self.n_layers
        scored = self.score()
        with progress(total=len(scored), desc="compress candidates: throughput", unit="candidate",
                      disable=not self._show()) as bar:
            measured = []
            for c in scored:
                measured.append(self._timed(c))
                bar.update(1)
        original = next(c for c in measured if c.recipe == "original" and c.backend == "torch")
        data = {**self.data.checksums(), "corpus_sentences": len(self.data.corpus)}
        return CompressResult(config=cfg.to_dict(), model=model_key(self.encoder.identity), n_layers=L, data=data,
                              original=original, candidates=measured, unbuilt_depths=list(self.unbuilt_depths))

    def adopt(self, candidates) -> int:
        """Keep timed ``candidates`` (:class:`Candidate` or their dicts) that an earlier run measured on this model
        and data under these same settings (one with fewer backends, say) as finished candidates of this run's
        folder, where it has none: they are read back rather than measured again. Those on a backend this run
        does not use are left out, and so is a student's candidate unless its student is in this folder (the one
        its ``weights_sha256`` names, where it records one): a student trained again, on another machine say, is
        another model, whose candidates this run measures, every backend of them. Returns how many were kept."""
        if self.folder is None:
            raise ValueError("adopt() keeps candidates in the run's folder, which is None")
        kept = 0
        for c in (c if isinstance(c, Candidate) else Candidate.from_dict(c) for c in candidates):
            if c.backend == OPENVINO_INT8 and not same_int8_settings(c.extra.get("quantization")):
                continue  # quantized under other settings (or before they were recorded): another model
            if c.recipe in STUDENTS and not self._student_of(c):
                continue
            if c.speed and c.backend in (*self.config.backends, "torch") and not self.files.has(c):
                # marked, so that whoever reads the folder later (a run resumed, another protocol) can tell it from
                # a candidate measured here
                self.files.save(replace(c, extra={**c.extra, "carried_over": True}))
                kept += 1
        return kept

    def _student_of(self, c: Candidate) -> bool:
        """Whether the student that ``c`` (a student's candidate) was measured on is the one in this folder."""
        if c.recipe == "every-depth" and not self.config.every_depth:
            return False  # this run trains no every-depth student
        trained = c.layers[0] if c.recipe == "distilled" else max(self.config.every_depth)
        have = self.students.weights_sha256(c.recipe, trained)
        return have is not None and c.extra.get("weights_sha256", have) == have

    def forget_timings(self) -> int:
        """Empty the stored throughput of every candidate in the folder stored under this run's model, data and
        settings, whatever its depth (scores kept), so that :meth:`run` times them again, in one block against the
        original timed beside them. Returns how many timings were emptied."""
        if self.folder is None:
            raise ValueError("forget_timings() edits the run's folder, which is None")
        return self.files.forget_timings()

    def forget_computed(self, stale: Callable[[str], bool]) -> int:
        """Delete what this run's folder holds that code of a ``stale`` commit computed, as each records it: the
        candidates of this model, data and settings (``extra["computed"]``: whichever depth; a later run that needs
        one measures it again) and the students of this run's depths (``run.json``), which :meth:`run` then trains,
        scores and times again. Work recorded before it named its code is kept. Returns how many candidates and
        students were forgotten."""
        if self.folder is None:
            raise ValueError("forget_computed() edits the run's folder, which is None")
        forgotten = self.files.forget_computed(stale)
        for recipe, depth in self.students.planned():
            root = self.students.root(recipe, depth)
            if self.students.trained(recipe, depth):
                trained = json.loads((root / "run.json").read_text()).get("computed", {}).get("trained", {})
                if trained.get("commit") and stale(trained["commit"]):
                    (root / "run.json").unlink()  # written last: without it the student is trained again
                    forgotten += 1
        return forgotten

    def specs(self) -> list[tuple[str, tuple[int, ...]]]:
        """(recipe, hidden states) of every candidate, the original first (:func:`~.specs.depth_specs`)."""
        return [spec for _, specs in depth_specs(self._search, self.config, self.n_layers) for spec in specs]

    def _show(self) -> bool:
        return logger.isEnabledFor(logging.INFO) if self.show_progress is None else bool(self.show_progress)

    def _key(self, recipe: str, layers: tuple[int, ...], backend: str) -> dict:
        return candidate_key(self.config, self.data, self.encoder.identity, recipe, layers, backend)

    def _scored(self, recipe: str, layers: tuple[int, ...], backend: str) -> Candidate:
        """The candidate from its file, or scored now (and written to the folder, not timed yet: ``speed`` empty)."""
        stored = self.files.load(recipe, layers, backend)
        if stored is not None:
            return stored
        if (recipe, tuple(layers), backend) in self._scores:
            return self._scores[recipe, tuple(layers), backend]
        candidate = self._measure(recipe, layers, backend)
        self._scores[recipe, tuple(layers), backend] = candidate
        self.files.save(candidate)
        logger.info("%s: dev Spearman %.2f", candidate.name, candidate.dev)
        return candidate

    def _timed(self, c: Candidate) -> Candidate:
        """``c`` with its throughput against the original (measured now unless its file has it)."""
        if c.speed:
            return c
        cfg = self.config
        model = self.model(c.recipe, c.layers)
        encode = runner(model, c.backend, batch_size=cfg.speed_batch_size,
                        graph=self.graph(c.recipe, c.layers, c.backend))
        speed = measure_speed(encode, lambda t: self._original.encode(t, batch_size=cfg.speed_batch_size),
                              list(self.data.corpus[:cfg.speed_sentences]), batch_size=cfg.speed_batch_size,
                              repeats=cfg.speed_repeats)
        c = replace(c, speed={**speed, "max_length": cfg.max_length},
                    extra={**c.extra, "computed": {**c.extra.get("computed", {}), "timed": code_revision()}})
        self.files.save(c)
        logger.info("%s: %.2fx the original's throughput", c.name, c.ratio)
        return c

    def _measure(self, recipe: str, layers: tuple[int, ...], backend: str) -> Candidate:
        """Dev and test Spearman of a candidate (each distinct sentence encoded once), its parameters and facts."""
        cfg = self.config
        model = self.model(recipe, layers)
        graph = self.graph(recipe, layers, backend)
        encode = runner(model, backend, batch_size=cfg.speed_batch_size, graph=graph)
        extra = self.students.facts(model, recipe, layers[0]) if recipe in STUDENTS else {}
        checked = (self._checked_scores(recipe, layers, model, encode) if backend in FLOAT32_GRAPHS
                   and cfg.graph_test_scores == "checked" and "torch" in cfg.backends else None)
        if checked is not None:  # a float32 graph that gives the torch vectors: the torch candidate's test scores
            scores, extra["max_abs_diff_vs_torch"], extra["test_scores"] = checked
        elif recipe in STUDENTS or backend != "torch":
            vectors = pair_vectors(encode, self._all_pairs())
            scores = {name: pair_spearman(*vectors[name], p) for name, p in self._all_pairs()}
        else:  # a cut on torch: its scores from the layer stacks (the numbers its model gives: see the tests)
            scores = {name: 100.0 * spearman(subset_cosine(*self._stacks[name], layers), np.asarray(p.targets))
                      for name, p in self._all_pairs()}
        if backend != "torch" and checked is None:  # how far the backend's vectors are from torch's, on dev
            torch_vectors = model.encode(list(self.data.dev.texts1), batch_size=cfg.speed_batch_size)
            extra["max_abs_diff_vs_torch"] = float(np.abs(vectors["dev"][0] - torch_vectors).max())
        if backend == OPENVINO_INT8:  # the page states the quantizer's settings from the candidates themselves
            extra["quantization"] = {**int8_settings(), "smooth_quant_alpha": smooth_quant_alpha(graph)}
        if backend == ONNX_INT8_MIXED:
            extra["quantization"] = mixed_int8_facts(graph)
        tests = {k: v for k, v in scores.items() if k != "dev"}
        extra["computed"] = {**extra.get("computed", {}), "scored": code_revision()}  # (a student's: "trained" too)
        return Candidate(recipe=recipe, depth=max(layers), layers=tuple(layers), backend=backend,
                         parameters=model.n_parameters(), dev=scores["dev"], tests=tests, speed={}, extra=extra)

    def _checked_scores(self, recipe: str, layers: tuple[int, ...], model: TruncatedModel, encode):
        """(scores, max |difference| on the dev pairs' first sentences, what was checked) of a float32 graph whose
        vectors of every dev sentence and of the first :data:`GRAPH_CHECK_SENTENCES` distinct sentences of each test
        set are within :data:`GRAPH_TOLERANCE` of the torch model's: its own dev score, the torch candidate's test
        scores. None where they are not (every score is then measured)."""
        dev = self.data.dev
        texts = list(dict.fromkeys([*dev.texts1, *dev.texts2, *(
            t for name, p in self._all_pairs() if name != "dev"
            for t in list(dict.fromkeys((*p.texts1, *p.texts2)))[:GRAPH_CHECK_SENTENCES])]))
        graph_vectors = encode(texts)
        torch_vectors = model.encode(texts, batch_size=self.config.speed_batch_size)
        diff = float(np.abs(graph_vectors - torch_vectors).max())
        if diff > GRAPH_TOLERANCE:
            logger.info("%s-l%d: graph vectors differ from torch's by %.2g (> %g): every test set measured",
                        recipe, max(layers), diff, GRAPH_TOLERANCE)
            return None
        row = {t: i for i, t in enumerate(texts)}
        first = [row[t] for t in dev.texts1]
        dev_score = pair_spearman(graph_vectors[first], graph_vectors[[row[t] for t in dev.texts2]], dev)
        torch_scored = self._scored(recipe, layers, "torch")
        info = {"from": "torch", "checked_sentences": len(texts), "max_abs_diff": diff, "tolerance": GRAPH_TOLERANCE}
        dev_diff = float(np.abs(graph_vectors[first] - torch_vectors[first]).max())
        return {"dev": dev_score, **torch_scored.tests}, dev_diff, info

    def graph(self, recipe: str, layers: tuple[int, ...], backend: str) -> Path | None:
        """The layer graph folder of a candidate on an ONNX backend (exported once: fp32 and int8; OpenVINO's int8
        added there on first use), None on torch."""
        if backend == "torch":
            return None
        key = {k: v for k, v in self._key(recipe, layers, backend).items()
               if k not in ("backend", "calibration", "test_scores", "int8")}  # one folder for every backend
        if self.folder is not None:
            root = self.folder / "graphs"
        else:
            if self._tmp is None:
                self._tmp = tempfile.TemporaryDirectory(prefix="layerwise-compress-")
            root = Path(self._tmp.name)
        calibration = list(self.data.corpus[:CALIBRATION_SENTENCES]) if backend in CALIBRATED else None
        return graph_folder(self.model(recipe, layers), root / keyed_name(f"{recipe}-l{max(layers)}", key), key,
                            backend=backend, calibration=calibration)

    # -- models ----------------------------------------------------------------------------------------------
    def model(self, recipe: str, layers: tuple[int, ...]) -> TruncatedModel:
        """The torch model of a candidate: the encoder cut at max(layers) (a student trained, or loaded)."""
        if recipe == "distilled":
            return self.students.get("distilled", layers[0])
        if self._cut is None or self._cut[0] != (recipe, tuple(layers)):  # kept: each backend reuses it
            if recipe == "every-depth":  # the first l layers of the one student trained at every depth
                student = self.students.get("every-depth", max(self.config.every_depth))
                model = TruncatedModel(truncate_encoder(student.encoder, layers[0]), student.tokenizer, layers,
                                       max_length=self.config.max_length)
            else:
                model = TruncatedModel.from_pretrained(self.config.model, layers, max_length=self.config.max_length)
            self._cut = ((recipe, tuple(layers)), model.to(self.device).eval())
        return self._cut[1]

    # -- data through the layer cache ------------------------------------------------------------------------
    def _all_pairs(self) -> list[tuple[str, PairSet]]:
        return [("dev", self.data.dev), *self.data.tests.items()]

    def _pair_stack(self, pairs: PairSet) -> tuple[np.ndarray, np.ndarray]:
        stack = self.encoder.encode(list(pairs.texts1) + list(pairs.texts2))
        n = len(pairs)
        return stack.mean[:n], stack.mean[n:]
