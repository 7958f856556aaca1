"""``Compressor``: the fastest model within your quality budget, from any encoder, as a scikit-learn estimator.

    >>> comp = Compressor("my-encoder", budget=1.0)                   # parameters only: clone() works
    >>> comp.fit(corpus, dev=(s1, s2, scores), tests={"sts": test})   # every candidate built, scored and timed
    >>> comp.chosen_.name, comp.chosen_.ratio, comp.chosen_.dev       # e.g. "distilled-l3-torch", 2.0, 81.5
    >>> comp.frontier_                                                # the Pareto front, fastest first
    >>> comp.encode(["A sentence."]).shape                            # (1, d): the chosen model's embeddings
    >>> comp.save("my-fast-encoder")                                  # SentenceTransformer("my-fast-encoder")

``fit`` runs :class:`~layerwise.methods.compress.build.Compression`: per depth l the plain cut, the LC cut and a
student distilled from the full model on ``corpus``, each measured on every backend against the original model.
With ``output_dir`` every finished candidate (and student) is kept there, so a killed ``fit`` resumes.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from layerwise.base import SentenceEstimator, check_int, check_number, check_scored_pairs, check_texts
from layerwise.data.readers import normalize_scores
from layerwise.encoders.model_files import weights_sha256
from layerwise.encoders.registry import DEFAULT_MODEL, resolve_model
from layerwise.errors import UsageError
from layerwise.export.sentence_transformers import EXPORT_MARKER
from layerwise.methods.compress.backends import check_backends, runner
from layerwise.methods.compress.build import CompressData, Compression
from layerwise.methods.compress.config import GRAPH_TEST_SCORES, CompressConfig
from layerwise.methods.compress.export import write_compressed
from layerwise.methods.compress.frontier import Candidate, choose, pareto_front
from layerwise.methods.truncated.model import TruncatedModel
from layerwise.methods.truncated.tasks import PairSet

logger = logging.getLogger(__name__)

__all__ = ["CompressSettings", "Compressor"]


@dataclass(frozen=True)
class CompressSettings:
    """How candidates are trained and timed (all but ``device`` and ``cache_dir`` change a number)."""

    epochs: int = 1  # distillation: passes over the corpus
    batch_size: int = 32  # distillation: sentences per step; the corpus must hold at least one batch
    lr: float = 1e-4  # distillation: AdamW learning rate
    max_length: int = 128  # tokens per sentence (every candidate, the teacher, the timing)
    seed: int = 0  # distillation batches and dropout
    speed_sentences: int = 256  # the first corpus sentences, encoded per timed pass
    speed_batch_size: int = 32  # sentences per forward pass when timing (the original's too)
    speed_repeats: int = 3  # timed passes per model, interleaved with the original's (the median counts)
    # the float32 graph backends' (onnx, openvino) test scores: "measured" (each test set encoded by the graph) or
    # "checked" (the torch candidate's, once the graph gives the torch vectors on the dev sentences and a sample of
    # each test set; measured after all where it does not, or without torch among the backends): a float32 graph
    # computes the same function, so this spares an encoding of every test set per graph; the dev score is its own
    graph_test_scores: str = "measured"
    pairs_weight: float = 1.0  # distillation with ``train_pairs``: the weight of their loss against the MSE
    device: str | None = None  # where models train and run (None: cpu)
    cache_dir: str | None = None  # the layer cache (None: $LAYERWISE_HOME/cache)


class Compressor(SentenceEstimator):
    """Cut, LC-cut and distilled candidates of an encoder at every depth; the fastest within ``budget``.

    Parameters
    ----------
    model : str
        A built-in name or a local Hugging Face encoder folder (the original, and the teacher).
    depths : tuple of int or None
        Depths l (transformer layers kept) to build candidates at, each in 1..L; None: every depth 1..L.
    every_depth : bool or tuple of int
        Also train one student at several depths at once (its mean at each of them towards the original's
        embeddings, :mod:`layerwise.methods.compress.distill`), a candidate at each of ``depths`` among them, cut
        there. True: at ``depths``; a tuple: at those depths (in 1..L; e.g. every depth while ``depths`` holds one).
    budget : float
        Points of dev Spearman x100 the chosen model may lose against the original (>= 0).
    backends : tuple of str
        How each candidate is run and timed: ``"torch"`` (float32), ``"onnx"``, ``"onnx-int8"`` (onnxruntime: the
        ``onnx`` extra), ``"openvino"`` (float32) and ``"openvino-int8"`` (NNCF's static int8, calibrated on the
        corpus' first 300 sentences, SmoothQuant's alpha chosen per candidate as the one that keeps the float32
        model's similarities of those sentences best: :func:`~layerwise.encoders.openvino_int8.quantize_openvino`):
        the ``openvino`` extra; ``"onnx-int8-mixed"``: ``onnx-int8`` but for the products whose inputs have outliers on
        those sentences (max |x| over 16 times the 99.9th percentile), kept float32
        (:mod:`~layerwise.methods.compress.int8_mixed`).
    settings : CompressSettings or None
        Training and timing settings (None: the defaults).
    output_dir : str or None
        Folder keeping every finished candidate and student (a cut-off ``fit`` resumes from it); None: in memory.
    stop_outside_budget : bool
        Build the depths deepest first and stop after the first depth at which no candidate of at most that many
        layers is within ``budget`` on dev: the shallower depths (whose students cost the most hours, and whose
        candidates are cut from, or trained as, still smaller models) are not built (``unbuilt_depths_``). The
        choice is then among the depths built; False (the default): every depth of ``depths``.
    show_progress : bool or None
        Progress bars (None: when the logger is at INFO).

    Attributes
    ----------
    candidates_ : list of Candidate
        Every candidate measured (the original among them), with dev and test Spearman x100, parameters and
        throughput ratio.
    frontier_ : list of Candidate
        The Pareto front (dev Spearman against throughput), fastest first.
    chosen_ : Candidate
        The fastest candidate within ``budget`` of the original's dev Spearman.
    original_ : Candidate
        The original model (all layers, mean of the last hidden state) on torch.
    result_ : CompressResult
        The whole run (settings, data checksums, every candidate), JSON round trip.
    model_ : TruncatedModel
        The chosen candidate's torch model (what :meth:`save` writes; :meth:`encode` runs it on the chosen backend).
    graph_ : Path or None
        The chosen candidate's ONNX layer graph folder (fp32 and int8) where an ONNX backend was chosen, else None.
    n_layers_ : int
        Transformer layers of the chosen model.
    unbuilt_depths_ : list of int
        Depths of ``depths`` left out by ``stop_outside_budget`` (empty otherwise).
    source_ : dict
        The original: ``name`` and ``weights_sha256``.
    """

    _fitted_attributes = ("chosen_",)

    def __init__(self, model: str = DEFAULT_MODEL, *, depths=None, every_depth: bool = False, budget: float = 1.0,
                 backends=("torch",), settings: CompressSettings | None = None, output_dir: str | None = None,
                 stop_outside_budget: bool = False, show_progress: bool | None = None):
        self.model = model
        self.depths = depths
        self.every_depth = every_depth
        self.budget = budget
        self.backends = backends
        self.settings = settings
        self.output_dir = output_dir
        self.stop_outside_budget = stop_outside_budget
        self.show_progress = show_progress

    # ------------------------------------------------------------------------------------------------ fit
    def fit(self, corpus, dev, *, tests: dict | None = None, train_pairs=None) -> "Compressor":
        """Build, score and time every candidate; choose the fastest within ``budget``. Returns ``self``.

        Parameters
        ----------
        corpus : list of str
            Unlabeled sentences: the distillation data (and the first ``speed_sentences`` are timed).
        dev : pairs
            ``(sentences1, sentences2, scores)`` or an object with those attributes
            (:func:`layerwise.data.readers.read_pairs`): scores the candidates and makes the choice.
        tests : dict of name -> pairs, or None
            Test pairs, scored for every candidate and reported (never used to choose).
        train_pairs : pairs or None
            Labelled pairs (``(sentences1, sentences2, scores)`` or an object with those attributes, scores on any
            scale, mapped linearly from their minimum and maximum to [0, 1]): every student adds TMFT's loss on them,
            ``settings.pairs_weight * mean (cos - target)^2``, to the MSE towards the original (the issue's "user's
            labelled pairs as a second loss"). Never the dev or test pairs. None: the MSE alone.
        """
        run, budget = self._compression(corpus, dev, tests, train_pairs)
        result = run.run()
        self.result_ = result
        self.candidates_ = list(result.candidates)
        self.original_ = result.original
        self.frontier_ = pareto_front(self.candidates_)
        self.chosen_ = choose(self.candidates_, result.original.dev, budget)
        self.unbuilt_depths_ = list(result.unbuilt_depths)
        self.model_ = run.model(self.chosen_.recipe, self.chosen_.layers)
        self.graph_ = run.graph(self.chosen_.recipe, self.chosen_.layers, self.chosen_.backend)
        self._run = run  # keeps a temporary graph folder alive (no output_dir)
        self.n_layers_ = int(self.model_.encoder.config.num_hidden_layers)
        self.source_ = {"name": str(self.model), "weights_sha256": weights_sha256(resolve_model(self.model).path)}
        logger.info("chose %s: dev Spearman %.2f (original %.2f), %.2fx the original's throughput",
                    self.chosen_.name, self.chosen_.dev, self.original_.dev, self.chosen_.ratio)
        return self

    def prepare(self, corpus, dev, *, tests: dict | None = None, train_pairs=None) -> list[Candidate]:
        """Train the students and score every candidate into ``output_dir``, timing nothing; a later :meth:`fit`
        with the same parameters and data reads them back and only times them. For a busy machine: the scores do
        not depend on the load, the throughput does. Returns the scored candidates (``speed`` empty)."""
        if self.output_dir is None:
            raise UsageError("prepare() keeps its work in output_dir, which is None; pass output_dir=FOLDER (fit() "
                             "then reads the scored candidates back from it)")
        run, _ = self._compression(corpus, dev, tests, train_pairs)
        return run.score()

    def train_students(self, corpus, dev, *, tests: dict | None = None, train_pairs=None) -> list[str]:
        """Train every student of these parameters into ``output_dir`` (the distilled student of each depth below the
        full one; the every-depth student once), scoring and timing nothing: on a machine with a GPU, say, before
        the scoring and timing on the machine the model will run on. A later :meth:`prepare` or :meth:`fit` with the
        same parameters and data (``output_dir`` copied there) loads them instead of training. Returns the students'
        folder names under ``output_dir/students``."""
        if self.output_dir is None:
            raise UsageError("train_students() keeps the students in output_dir, which is None; pass "
                             "output_dir=FOLDER")
        run, _ = self._compression(corpus, dev, tests, train_pairs)
        return run.train_students()

    def adopt(self, candidates, corpus, dev, *, tests: dict | None = None, train_pairs=None) -> int:
        """Keep timed ``candidates`` (e.g. ``result_.candidates`` of an earlier fit, or their dicts) measured on this
        model and data under these same settings, but fewer ``backends`` or without ``every_depth``, in
        ``output_dir``: the next :meth:`fit` or :meth:`prepare` reads them back instead of measuring them again.
        Their numbers are the earlier run's (its timing too: each ratio is against the original timed beside it).
        Returns how many were kept (those already there, or on a backend not used now, are not)."""
        if self.output_dir is None:
            raise UsageError("adopt() keeps candidates in output_dir, which is None; pass output_dir=FOLDER")
        run, _ = self._compression(corpus, dev, tests, train_pairs)
        return run.adopt(candidates)

    def retime(self, corpus, dev, *, tests: dict | None = None, train_pairs=None) -> int:
        """Forget the throughput of every candidate this model, data and settings stored in ``output_dir`` (their
        scores stay), so that the next :meth:`fit` times them all again in one block: for ratios carried over from
        earlier runs (:meth:`adopt`), or measured on a busy machine. Returns how many timings were forgotten."""
        if self.output_dir is None:
            raise UsageError("retime() edits the candidates in output_dir, which is None; pass output_dir=FOLDER")
        run, _ = self._compression(corpus, dev, tests, train_pairs)
        return run.forget_timings()

    def forget_computed(self, stale, corpus, dev, *, tests: dict | None = None, train_pairs=None) -> int:
        """Delete from ``output_dir`` the students, scores and timings of this fit's candidates that code of a commit
        ``stale(commit)`` calls stale computed (each records its code: ``extra["computed"]``), so that the next
        :meth:`fit` computes them again rather than reading them back: for a results page whose measured code
        changed since. Work recorded before it named its code is kept. Returns how many were forgotten."""
        if self.output_dir is None:
            raise UsageError("forget_computed() edits output_dir, which is None; pass output_dir=FOLDER")
        run, _ = self._compression(corpus, dev, tests, train_pairs)
        return run.forget_computed(stale)

    def _compression(self, corpus, dev, tests, train_pairs=None) -> tuple[Compression, float]:
        """The run of these parameters on this data (every argument checked before any work), and the budget."""
        config, budget = self._config()
        data = CompressData(corpus=tuple(self._corpus(corpus, config)), dev=_pairs(dev, "dev"),
                            tests={str(k): _pairs(v, f"tests[{k!r}]") for k, v in (tests or {}).items()},
                            train_pairs=None if train_pairs is None else _train_pairs(train_pairs))
        run = Compression(config, data, folder=self.output_dir, cache_dir=self._settings().cache_dir,
                          show_progress=self.show_progress, device=self._settings().device,
                          stop_budget=budget if self.stop_outside_budget else None)
        return run, budget

    def __getstate__(self) -> dict:
        """Pickled (joblib, copy) without the run's encoder and models; what was learned is kept."""
        state = super().__getstate__()
        state.pop("_run", None)
        return state

    def _settings(self) -> CompressSettings:
        settings = CompressSettings() if self.settings is None else self.settings
        if not isinstance(settings, CompressSettings):
            raise UsageError(f"settings must be a CompressSettings or None, got {type(settings).__name__}")
        return settings

    def _config(self) -> tuple[CompressConfig, float]:
        """The run's config and the budget, every parameter checked before any work (the model's config only read)."""
        s = self._settings()
        for name, low in (("epochs", 1), ("batch_size", 1), ("max_length", 3), ("seed", 0), ("speed_sentences", 1),
                          ("speed_batch_size", 1), ("speed_repeats", 1)):
            check_int(getattr(s, name), f"settings.{name}", low=low)
        check_number(s.lr, "settings.lr", positive=True)
        check_number(s.pairs_weight, "settings.pairs_weight", positive=True)
        if s.graph_test_scores not in GRAPH_TEST_SCORES:
            raise UsageError(f"settings.graph_test_scores={s.graph_test_scores!r} is not one of "
                             f"{', '.join(GRAPH_TEST_SCORES)}")
        budget = check_number(self.budget, "budget", positive=False)
        if not isinstance(self.stop_outside_budget, (bool, np.bool_)):
            raise UsageError(f"stop_outside_budget={self.stop_outside_budget!r} must be True or False")
        backends = check_backends(self.backends)
        n_layers = _n_layers(self.model)
        depths = tuple(range(1, n_layers + 1)) if self.depths is None else self.depths
        if isinstance(depths, (int, str)) or not depths:
            raise UsageError(f"depths={self.depths!r} must be None or a tuple of depths, e.g. (2, 3)")
        for d in depths:
            if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or not 1 <= d <= n_layers:
                raise UsageError(f"depth {d!r} is outside 1..{n_layers}: {self.model} has {n_layers} layers; pass "
                                 f"depths between 1 and {n_layers}")
        fields = {k: v for k, v in asdict(s).items() if k not in ("device", "cache_dir")}
        depths = tuple(sorted({int(d) for d in depths}))
        config = CompressConfig(model=str(self.model), depths=depths, backends=backends,
                                every_depth=self._every_depth(depths, n_layers), **fields)
        return config, budget

    def _every_depth(self, depths: tuple[int, ...], n_layers: int) -> tuple[int, ...]:
        e = self.every_depth
        if isinstance(e, (bool, np.bool_)):
            return depths if e else ()
        if isinstance(e, (tuple, list)) and e and all(isinstance(d, (int, np.integer)) and not isinstance(d, bool)
                                                      and 1 <= d <= n_layers for d in e):
            return tuple(sorted({int(d) for d in e}))
        raise UsageError(f"every_depth={e!r} must be True, False or a non-empty tuple of depths in 1..{n_layers}, "
                         "e.g. (1, 2, 3)")

    def _corpus(self, corpus, config: CompressConfig) -> list[str]:
        texts = list(dict.fromkeys(check_texts(corpus, name="corpus")))
        if len(texts) < config.batch_size:
            raise UsageError(f"corpus has {len(texts)} distinct sentences, fewer than one batch "
                             f"(settings.batch_size={config.batch_size}); give more sentences or a smaller batch")
        return texts

    # --------------------------------------------------------------------------------- encode, save, load
    def _encode(self, texts: list[str], *, batch_size: int | None) -> np.ndarray:
        """The chosen candidate's vectors on its backend (torch, or its ONNX graph in onnxruntime)."""
        bs = batch_size or self._settings().speed_batch_size
        return runner(self.model_, self.chosen_.backend, batch_size=bs, graph=self.graph_)(texts)

    def report(self) -> dict:
        """The choice and every candidate as JSON: ``chosen``, ``original``, ``candidates``, ``budget`` and
        ``unbuilt_depths`` (``stop_outside_budget``)."""
        self._check_fitted()
        return {"chosen": self.chosen_.to_dict(), "original": self.original_.to_dict(),
                "candidates": [c.to_dict() for c in self.candidates_], "budget": float(self.budget),
                "unbuilt_depths": list(self.unbuilt_depths_)}

    def save(self, folder: str | os.PathLike, *, overwrite: bool = True) -> Path:
        """Write the chosen model as a sentence-transformers folder (built-in modules only), with the provenance and
        a model card showing the frontier. Replaces a folder this package wrote, refuses others."""
        self._check_fitted()
        return write_compressed(self.model_, folder, source=self.source_, report=self.report(), graph=self.graph_,
                                overwrite=overwrite)

    @classmethod
    def load(cls, folder: str | os.PathLike, *, device: str | None = None) -> "Compressor":
        """The fitted compressor saved by :meth:`save` (the chosen model and the measured candidates)."""
        folder = Path(folder)
        marker = folder / EXPORT_MARKER
        info = json.loads(marker.read_text()) if marker.is_file() else {}
        if info.get("method") != "compress":
            raise UsageError(f"folder={str(folder)!r} holds no saved Compressor ({EXPORT_MARKER} of method "
                             "'compress' missing); pass a folder written by Compressor.save")
        report = info["compress"]
        est = cls(str(info["source"]["name"]), budget=report["budget"],
                  settings=replace(CompressSettings(), device=device))
        est.model_ = TruncatedModel.load(folder)
        if device is not None:
            est.model_.to(device)
        est.chosen_, est.original_ = Candidate.from_dict(report["chosen"]), Candidate.from_dict(report["original"])
        est.candidates_ = [Candidate.from_dict(c) for c in report["candidates"]]
        est.frontier_ = pareto_front(est.candidates_)
        est.unbuilt_depths_ = list(report.get("unbuilt_depths", []))  # folders saved before it was reported: none
        est.n_layers_ = int(est.model_.encoder.config.num_hidden_layers)
        est.graph_ = folder / "onnx" if est.chosen_.backend != "torch" else None
        est.source_ = info["source"]
        return est


def _n_layers(model) -> int:
    """The model's transformer layers, read from its config.json (nothing loaded)."""
    path = resolve_model(str(model)).path
    try:
        return int(json.loads((path / "config.json").read_text())["num_hidden_layers"])
    except (OSError, ValueError, KeyError) as exc:
        raise UsageError(f"model={model!r}: {path} has no readable config.json with num_hidden_layers ({exc}); pass "
                         "a Hugging Face encoder folder") from None


def _pairs(pairs, name: str) -> PairSet:
    """Scored pairs given as a tuple or an object with ``sentences1``, ``sentences2``, ``scores``."""
    s1, s2, values = check_scored_pairs(pairs, name=name, min_pairs=3)
    return PairSet(tuple(s1), tuple(s2), values, name)


def _train_pairs(pairs) -> PairSet:
    """Labelled pairs for the students, their scores mapped linearly from their minimum and maximum to [0, 1]."""
    s1, s2, values = check_scored_pairs(pairs, name="train_pairs", min_pairs=2,
                                        purpose="their scores are mapped to [0, 1] from their minimum and maximum",
                                        fix="give labelled pairs whose scores differ")
    return PairSet(tuple(s1), tuple(s2), normalize_scores(values), "train_pairs")
