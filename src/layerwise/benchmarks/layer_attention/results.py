"""Typed results of ``layerwise train`` and ``layerwise retrieval`` and their versioned JSON edge.

:func:`~layerwise.benchmarks.layer_attention.run.run_train` returns a :class:`TrainResult` (``train.json``) and
:func:`~layerwise.benchmarks.layer_attention.run.run_retrieval` a :class:`RetrievalResult` (``retrieval.json``).
``to_dict`` writes ``{"kind": ..., "schema": 1, ...}`` (:func:`~layerwise.benchmarks.schema.stamp`) with the
keys these files have always had; ``from_dict`` reads it back after :func:`~layerwise.benchmarks.schema.check_schema`.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from layerwise.benchmarks.schema import check_schema, stamp
from layerwise.methods.layer_attention.train import ContrastiveConfig

__all__ = ["IndexResult", "RETRIEVAL_SCHEMA", "RetrievalDataInfo", "RetrievalResult", "TRAIN_SCHEMA", "TrainHistory",
           "TrainResult"]

TRAIN_SCHEMA = 1
RETRIEVAL_SCHEMA = 1


@dataclass(frozen=True)
class TrainHistory:
    """The whole training run (resumes included) and this invocation's timings."""

    step: list[int]  # optimisation steps done, 1-based
    loss: list[float]  # training loss per step
    dev: list[list]  # [step, STS-B dev Spearman x100] at each evaluation
    best_dev: float | None  # best dev Spearman (None: no evaluation)
    seconds: float  # this invocation, evaluations and checkpoints included
    train_seconds: float  # this invocation's optimisation steps only
    steps_this_run: int
    config: ContrastiveConfig

    def to_dict(self) -> dict:
        return asdict(self)  # the config becomes its field dict

    @classmethod
    def from_dict(cls, d: dict) -> "TrainHistory":
        """From :meth:`to_dict` or the history dict of ``train_contrastive``."""
        return cls(**{**d, "config": ContrastiveConfig(**d["config"])})


@dataclass
class TrainResult:
    """What ``run_train`` did: model and pooler, the training data, the dev set and the history."""

    model: str  # built-in name or folder trained from
    pooler: str  # pooler kind
    training_data: str  # where the examples came from, in words
    n_examples: int
    dev: str  # the dev set, in words
    history: TrainHistory
    output: str  # the run folder (``best/``, ``last/``, ``train.json``)
    environment: dict = field(default_factory=dict)  # reports.environment of the command (set by the CLI)

    def to_dict(self) -> dict:
        return stamp("train", TRAIN_SCHEMA, {
            "model": self.model, "pooler": self.pooler, "training_data": self.training_data,
            "n_examples": self.n_examples, "dev": self.dev, "history": self.history.to_dict(), "output": self.output,
            "environment": self.environment})

    @classmethod
    def from_dict(cls, d: dict, where: str = "training results") -> "TrainResult":
        check_schema(d, "train", TRAIN_SCHEMA, where)
        return cls(d["model"], d["pooler"], d["training_data"], d["n_examples"], d["dev"],
                   TrainHistory.from_dict(d["history"]), d["output"], d.get("environment", {}))


@dataclass(frozen=True)
class IndexResult:
    """One index searched with every query: quality (x100), speed and memory."""

    index: str  # "exact (numpy)", "faiss flat", "faiss ivf nlist=... nprobe=..."
    mrr_at_10: float
    recall: dict[int, float]  # k -> recall@k x100
    ms_per_query: float
    build_seconds: float
    index_bytes: int
    n_queries: int
    n_corpus: int
    ms_per_query_batch1: float | None = None  # one query at a time (None: results written before it was measured)
    n_latency_queries: int | None = None  # how many queries were timed one at a time
    index_resident_bytes: int | None = None  # the arrays the index holds in memory (None: not measured)
    # each query's rank of its first relevant result (0: none in the top 10), for a paired test between two runs
    first_relevant_ranks: list[int] | None = None

    def to_dict(self) -> dict:
        """The keys of :func:`layerwise.evaluation.retrieval.search`: ``mrr@10``, ``recall@k``, ...."""
        ranks = {} if self.first_relevant_ranks is None else {"first_relevant_ranks": self.first_relevant_ranks}
        return {"mrr@10": self.mrr_at_10, **{f"recall@{k}": v for k, v in self.recall.items()}, **ranks,
                "ms_per_query": self.ms_per_query, "build_seconds": self.build_seconds,
                "index_bytes": self.index_bytes, "n_queries": self.n_queries, "n_corpus": self.n_corpus,
                "ms_per_query_batch1": self.ms_per_query_batch1, "n_latency_queries": self.n_latency_queries,
                "index_resident_bytes": self.index_resident_bytes, "index": self.index}

    @classmethod
    def from_dict(cls, d: dict) -> "IndexResult":
        """From :meth:`to_dict` or the dict :func:`layerwise.evaluation.retrieval.search` returns."""
        recall = {int(m.group(1)): v for key, v in d.items() if (m := re.fullmatch(r"recall@(\d+)", key))}
        return cls(d["index"], d["mrr@10"], recall, d["ms_per_query"], d["build_seconds"], d["index_bytes"],
                   d["n_queries"], d["n_corpus"], d.get("ms_per_query_batch1"), d.get("n_latency_queries"),
                   d.get("index_resident_bytes"), d.get("first_relevant_ranks"))


@dataclass(frozen=True)
class RetrievalDataInfo:
    name: str  # "quora"
    split: str
    corpus: int  # questions in the corpus
    queries: int  # questions searched with


@dataclass
class RetrievalResult:
    """What ``run_retrieval`` measured: one :class:`IndexResult` per index, in the order asked for."""

    model: str  # the SentenceModel folder
    pooler: str  # pooler kind, or "none (last-layer mean)" / "none (last-layer CLS)"
    data: RetrievalDataInfo
    results: list[IndexResult]
    environment: dict = field(default_factory=dict)  # reports.environment of the command (set by the CLI)

    def to_dict(self) -> dict:
        return stamp("retrieval", RETRIEVAL_SCHEMA, {
            "model": self.model, "pooler": self.pooler, "data": asdict(self.data),
            "results": [r.to_dict() for r in self.results], "environment": self.environment})

    @classmethod
    def from_dict(cls, d: dict, where: str = "retrieval results") -> "RetrievalResult":
        check_schema(d, "retrieval", RETRIEVAL_SCHEMA, where)
        return cls(d["model"], d["pooler"], RetrievalDataInfo(**d["data"]),
                   [IndexResult.from_dict(r) for r in d["results"]], d.get("environment", {}))
