"""The layer-attention results grid: its settings, one run's typed result, and the store key of a run.

Two regimes share the steps, batch, learning rates and seeds: ``frozen`` (the encoder's layer vectors computed
once, only the pooler trains: :mod:`layerwise.methods.layer_attention.frozen`) and ``encoder`` (encoder and pooler
train together: :func:`~layerwise.methods.layer_attention.train.train_contrastive`). One run = one regime x
objective x pooler x seed; it is one part of the results store, keyed on the model identity (weights, tokenizer
and config hashes), the checksums of every data set it reads (STS test sets, STS-B dev, training examples, Quora
when it searches), max length, dtype and the full training config.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from layerwise.benchmarks.layer_attention.attention_length import LENGTH_KEY, LENGTH_POOLERS
from layerwise.benchmarks.significance_parts import OUTPUTS_KEY, without_outputs
from layerwise.evaluation.retrieval import DEFAULT_NLIST
from layerwise.evaluation.unit_outputs import pack_small
from layerwise.methods.layer_attention.train import ContrastiveConfig

__all__ = ["GRID_POOLERS", "GridConfig", "RetrievalSettings", "RunResult", "SearchRow", "checkpoint_key",
           "records_length", "run_key", "run_name"]

# Every pooler of the page; ``first0_last_mean`` = mean of hidden states {0, L} (0 = embedding output).
GRID_POOLERS = ("layer_attention", "attention_cls_only", "attention_mean_only", "attention_no_last_cls",
                "last_cls", "last_mean", "first0_last_mean", "scalar_mix",
                # the paper's per-layer-ratio attention (Eq. 1-5) and its Table 2's plain concatenations
                "layer_attention_ratio", "concat_last_cls_mean", "concat_last_cls_layer_mean")
REGIMES = ("frozen", "encoder")
STS_SETS = ("stsb", "sickr", "sts12", "sts13", "sts14", "sts15", "sts16")


@dataclass(frozen=True)
class RetrievalSettings:
    split: str = "dev"  # Quora split searched (BiMPM dev/test partition)
    indexes: tuple[str, ...] = ("exact", "ivf")  # "exact" = numpy reference; others = FAISS index kinds
    nlist: int = DEFAULT_NLIST  # IVF cells: the paper's 1024 (at most the corpus size: refused before encoding)
    nprobe: int = 10  # IVF cells visited per query


@dataclass(frozen=True)
class GridConfig:
    model: str = "all-MiniLM-L6-v2"  # built-in name or folder
    objectives: tuple[str, ...] = ("unsup", "sup_hard_neg")
    poolers: tuple[str, ...] = GRID_POOLERS  # frozen-encoder grid
    frozen_seeds: tuple[int, ...] = (0, 1, 2)
    # encoder-trained runs (10-20 min each): the library's operator, the paper's, its Table 2 baselines
    encoder_poolers: tuple[str, ...] = ("layer_attention", "last_cls", "layer_attention_ratio",
                                        "concat_last_cls_mean", "concat_last_cls_layer_mean")
    encoder_seeds: tuple[int, ...] = (0,)
    regimes: tuple[str, ...] = REGIMES
    steps: int = 250  # optimisation steps of every run
    batch_size: int = 64
    sts_sets: tuple[str, ...] = STS_SETS  # evaluated when present in the data folder (test data only)
    # searched at the first seed: the library's operator, the paper's, the last-layer CLS baseline
    retrieval_poolers: tuple[str, ...] = ("layer_attention", "last_cls", "layer_attention_ratio")
    retrieval: RetrievalSettings = RetrievalSettings()
    max_length: int = 32  # tokens per sentence (training and evaluation)
    dtype: str = "float32"
    train_limit: int | None = None  # first n training examples (None: all); for quick checks
    checkpoints: str = "runs/layer-attention"  # encoder-trained models (large; not in the repo; one per setting)

    def __post_init__(self) -> None:
        bad = sorted(set(self.regimes) - set(REGIMES))
        if bad:
            raise ValueError(f"unknown regimes {bad}; valid: {', '.join(REGIMES)}")
        bad = [p for p in (*self.poolers, *self.encoder_poolers, *self.retrieval_poolers) if p not in GRID_POOLERS]
        if bad:
            raise ValueError(f"unknown poolers {bad}; valid: {', '.join(GRID_POOLERS)}")
        if self.steps < 1 or self.batch_size < 2:
            raise ValueError(f"steps must be >= 1 and batch_size >= 2, got {self.steps} and {self.batch_size}")

    def contrastive(self, regime: str, objective: str, seed: int) -> ContrastiveConfig:
        """The training config of one run (checkpoint chosen on STS-B dev five times per run)."""
        return ContrastiveConfig(objective=objective, steps=self.steps, batch_size=self.batch_size, seed=seed,
                                 freeze_encoder=regime == "frozen", eval_every=max(1, self.steps // 5))

    def runs(self, regime: str) -> list[tuple[str, str, int]]:
        """(objective, pooler, seed) of every run of ``regime``, in page order."""
        poolers, seeds = (self.poolers, self.frozen_seeds) if regime == "frozen" else (self.encoder_poolers,
                                                                                         self.encoder_seeds)
        return [(o, p, s) for o in self.objectives for p in poolers for s in seeds]

    def searches(self, regime: str, pooler: str, seed: int) -> bool:
        seeds = self.frozen_seeds if regime == "frozen" else self.encoder_seeds
        return pooler in self.retrieval_poolers and seed == seeds[0]

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class SearchRow:
    """One Quora search: ranking metrics (x100), speed and index memory."""

    index: str  # "exact (numpy)" or "faiss ivf nlist=.. nprobe=.."
    mrr10: float
    recall1: float
    recall5: float
    recall10: float
    ms_per_query: float
    index_bytes: int
    build_seconds: float = 0.0
    n_queries: int = 0
    n_corpus: int = 0
    ms_per_query_batch1: float | None = None  # one query at a time (rows stored before it was measured: None)
    index_resident_bytes: int | None = None  # the arrays the index holds in memory (None: not measured)
    first_hits: str | None = None  # each query's rank of its first relevant result, packed (None: not kept)

    @classmethod
    def from_search(cls, out: dict) -> "SearchRow":
        """From :func:`layerwise.evaluation.retrieval.search`'s dict."""
        return cls(index=out["index"], mrr10=out["mrr@10"], recall1=out["recall@1"], recall5=out["recall@5"],
                   recall10=out["recall@10"], ms_per_query=out["ms_per_query"], index_bytes=int(out["index_bytes"]),
                   build_seconds=out.get("build_seconds", 0.0), n_queries=out.get("n_queries", 0),
                   n_corpus=out.get("n_corpus", 0), ms_per_query_batch1=out.get("ms_per_query_batch1"),
                   index_resident_bytes=out.get("index_resident_bytes"),
                   first_hits=pack_small(out["first_relevant_ranks"]) if "first_relevant_ranks" in out else None)


@dataclass(frozen=True)
class RunResult:
    """One trained pooler: zero-shot STS Spearman x100 per test set, training history, optional Quora search."""

    regime: str
    objective: str
    pooler: str
    seed: int
    sts: dict[str, float]  # data set -> Spearman x100 (aggregation "all")
    history: dict  # the trainer's history: step, loss, dev, best_dev, train_seconds, steps_this_run, config
    training_data: str  # where the training examples came from
    n_examples: int
    search_with_pooler: tuple[SearchRow, ...] = ()
    search_without_pooler: tuple[SearchRow, ...] = ()  # last-layer mean of the same encoder
    # encoder regime: the fine-tuned encoder's last-layer [CLS] without its pooler ("[CLS]_Last", the vector the
    # paper searches with in Table 3); () for frozen runs (their encoder is the untouched one, searched once) and
    # for the encoder runs stored before it was searched
    search_cls_last: tuple[SearchRow, ...] = ()
    checkpoint: str | None = None  # encoder regime: the model folder (not kept in the repo)
    extra: dict = field(default_factory=dict)  # anything else the run recorded
    # data set -> the dense rank of every test pair's predicted cosine (benchmarks.significance_parts); {}: a
    # run stored before they were kept (its paired test renders "not tested")
    predictions: dict[str, str] = field(default_factory=dict)
    # frozen runs of the attention_length.LENGTH_POOLERS: state weight by token-length bucket of the test sentences
    # (attention_length.length_profile); {}: not measured
    attention_by_length: dict = field(default_factory=dict)

    @property
    def steps_per_second(self) -> float | None:
        """Training speed with evaluation excluded (steps this run / training seconds); None where this run trained
        nothing (an encoder-trained model an earlier run had trained, evaluated again)."""
        steps = self.history["steps_this_run"]
        return steps / self.history["train_seconds"] if steps else None

    def to_payload(self) -> dict:
        return asdict(self)

    @classmethod
    def from_payload(cls, doc: dict) -> "RunResult":
        doc = dict(doc)
        for k in ("search_with_pooler", "search_without_pooler", "search_cls_last"):
            doc[k] = tuple(SearchRow(**r) for r in doc.get(k, ()))
        return cls(**doc)


def run_name(regime: str, objective: str, pooler: str, seed: int) -> str:
    """The part name of one run."""
    return f"{regime}-{objective}-{pooler}-seed{seed}"


def run_key(config: GridConfig, model: dict, data: dict, regime: str, objective: str, pooler: str,
            seed: int) -> dict:
    """The store key of one run. ``model``: :func:`layerwise.benchmarks.store.model_key`; ``data``: the
    checksums from :func:`~layerwise.benchmarks.layer_attention.experiment.data_checksums`."""
    search = config.searches(regime, pooler, seed)
    key = {
        "model": model,
        "data": {"sts": data["sts"], "dev": data["dev"], "train": data["train"][objective],
                 "quora": data.get("quora") if search else None},
        "max_length": config.max_length,
        "dtype": config.dtype,
        "regime": regime,
        "pooler": pooler,
        # the grid never accumulates gradients (grad_accumulation = 1, as before the setting existed)
        "training": {k: v for k, v in asdict(config.contrastive(regime, objective, seed)).items()
                     if k != "grad_accumulation"},
        "train_limit": config.train_limit,
        "retrieval": asdict(config.retrieval) if search else None,
        # an encoder run searches without its pooler with the last-layer mean and [CLS]_Last (the paper's): only
        # these runs' keys change, so that the next run computes the [CLS]_Last rows they lacked
        **({"without_pooler": ["mean", "cls"]} if search and regime == "encoder" else {}),
        # views computed in batches sorted by token count (encoders.batching): the dropout masks depend on the batches
        "features": {"view_seed": 0, "dropout_once_per_example": True, "batches": "token_length"}
        if regime == "frozen" else None,
        # the run keeps each test pair's predicted cosine (the paired test against layer_attention reads them); a
        # run stored before had no such key, so the next `results run` recomputes it and the newer part wins
        OUTPUTS_KEY: f"{OUTPUTS}; {SEARCH_OUTPUTS}" if search else OUTPUTS,  # only searching runs' keys change
    }
    if records_length(regime, pooler):  # only these runs' keys change: the rest of the grid is not recomputed
        key[LENGTH_ENTRY] = LENGTH_KEY
    return key


def records_length(regime: str, pooler: str) -> bool:
    """Whether a run records its attention weights by sentence length (frozen runs of the LENGTH_POOLERS)."""
    return regime == "frozen" and pooler in LENGTH_POOLERS


OUTPUTS = "per-pair cosine ranks"
SEARCH_OUTPUTS = "per-query rank of the first relevant result"  # what a searching run keeps for the MRR tests
LENGTH_ENTRY = "attention_by_length"  # the key entry of a run that records its attention weights by sentence length


#: the entries of a run's key that say how its model is evaluated, not how it is trained
EVALUATION_ENTRIES = (LENGTH_ENTRY, "retrieval", "without_pooler")


def checkpoint_key(key: dict) -> dict:
    """What names an encoder-trained run's model folder: the run's key without what only its evaluation reads
    (outputs kept, weights by length, the Quora search and its data), so that a model trained before an evaluation
    setting changed (IVF cells, say) is evaluated again rather than trained again."""
    out = {k: v for k, v in without_outputs(key).items() if k not in EVALUATION_ENTRIES}
    return {**out, "data": {k: v for k, v in out["data"].items() if k != "quora"}} if "data" in out else out
