"""The layer-attention grid, run part by part into a :class:`~layerwise.benchmarks.store.ResultsStore`.

``run_frozen_grid``: every pooler x objective x seed on a frozen encoder, from layer vectors computed once (only
when some run is missing from the store). ``run_encoder_runs``: encoder and pooler trained together, one model
folder per run under ``config.checkpoints``. Each finished run is saved at once under its key
(:func:`~layerwise.benchmarks.layer_attention.grid.run_key`); a run whose key is stored is never recomputed.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from layerwise.benchmarks.layer_attention.attention_length import length_profile
from layerwise.benchmarks.layer_attention.grid import (
    SEARCH_OUTPUTS,
    GridConfig,
    RunResult,
    SearchRow,
    checkpoint_key,
    records_length,
    run_key,
    run_name,
)
from layerwise.benchmarks.layer_attention.run import load_training_examples
from layerwise.benchmarks.page_parts import run_record, sts_checksum
from layerwise.benchmarks.significance_parts import OUTPUTS_KEY, pack_predictions, save_gold
from layerwise.benchmarks.store import Part, ResultsStore, keyed_name, model_key
from layerwise.data import available_sts, load_sts
from layerwise.data.checksum import content_checksum
from layerwise.encoders.batching import token_lengths
from layerwise.encoders.layer_encoder import LayerEncoder
from layerwise.encoders.trainable import SentenceModel
from layerwise.evaluation.metrics import cosine_rows
from layerwise.evaluation.retrieval import FaissIndex, check_nlist, load_quora_retrieval, search
from layerwise.evaluation.sts import sts_scores
from layerwise.methods.layer_attention.frozen import (
    compute_features,
    embed_features,
    embed_features_with_weights,
    train_pooler_on_features,
    training_views,
)
from layerwise.methods.layer_attention.train import train_contrastive
from layerwise.modules.poolers import PoolerConfig, build_pooler
from layerwise.training import seed_everything
from layerwise.training.checkpoint import STATE_JSON

logger = logging.getLogger(__name__)

__all__ = ["PAGE_NAME", "UNTOUCHED_SEARCH", "GridData", "data_checksums", "load_grid_data", "run_encoder_runs",
           "run_frozen_grid", "save_test_gold", "sts_spearman", "untouched_search", "untouched_search_key"]

PAGE_NAME = "layer-attention"


@dataclass
class GridData:
    """Every data set a grid run reads, loaded once."""

    sts: dict  # name -> STSData (test sets, never trained on)
    dev: object  # STS-B dev STSData (checkpoint choice)
    examples: dict  # objective -> (training examples, description of their source)
    quora: object | None  # RetrievalData of the Quora split searched, or None


def load_grid_data(config: GridConfig, data_dir=None, *, quora: bool = True) -> GridData:
    here = available_sts(data_dir)
    sts = {n: load_sts(n, data_dir=data_dir) for n in config.sts_sets if n in here}
    examples = {}
    for obj in config.objectives:
        ex, source = load_training_examples(obj, data_dir=data_dir)
        examples[obj] = (ex[:config.train_limit] if config.train_limit else ex, source)
    search = quora and config.retrieval_poolers
    corpus = load_quora_retrieval(data_dir, config.retrieval.split) if search else None
    if corpus is not None:  # an IVF index of more cells than texts: refused before anything is encoded
        check_nlist(config.retrieval.nlist, len(corpus.corpus), indexes=config.retrieval.indexes)
    return GridData(sts=sts, dev=load_sts("stsb", data_dir=data_dir, split="dev"), examples=examples, quora=corpus)


def data_checksums(data: GridData) -> dict:
    """{"sts": {name: sha256}, "dev": ..., "train": {objective: ...}, "quora": ... or None} for the run keys."""
    quora = None
    if data.quora is not None:
        q = data.quora
        quora = content_checksum({"corpus": q.corpus, "queries": q.queries,
                                  "relevant": [sorted(r) for r in q.relevant], "split": q.split})
    return {"sts": {n: sts_checksum(d) for n, d in data.sts.items()}, "dev": sts_checksum(data.dev),
            "train": {o: content_checksum(ex) for o, (ex, _) in data.examples.items()}, "quora": quora}


def grid_model_key(config: GridConfig) -> dict:
    """Model identity (weights, tokenizer and config hashes) of ``config.model``."""
    return model_key(LayerEncoder(config.model, max_length=config.max_length, dtype=config.dtype,
                                  cache_dir=False).identity)


def sts_spearman(emb1: np.ndarray, emb2: np.ndarray, d) -> float:
    """Spearman x100 of cosine similarities (n, d) x (n, d) against the gold scores, aggregation ``all``."""
    return float(sts_scores(emb1, emb2, d.scores, groups=np.asarray(d.subsets), aggregation="all")["spearman"])


def _evaluate_sts(pairs: dict, data: GridData) -> tuple[dict[str, float], dict[str, str]]:
    """Spearman x100 per set and each test pair's predicted cosine (packed): ``pairs`` set -> (emb1, emb2)."""
    sts = {n: sts_spearman(a, b, data.sts[n]) for n, (a, b) in pairs.items()}
    return sts, pack_predictions({n: cosine_rows(a, b) for n, (a, b) in pairs.items()})


def save_test_gold(store: ResultsStore, data: GridData, sums: dict, command=()) -> None:
    """The gold scores of the STS test sets, once per their checksums (the page's paired tests read them)."""
    save_gold(store, PAGE_NAME, {n: d.scores for n, d in data.sts.items()}, sums["sts"], [run_record(command)])


def _missing(config: GridConfig, store: ResultsStore, regime: str, model: dict, sums: dict) -> list[tuple]:
    out = []
    for obj, pooler, seed in config.runs(regime):
        key = run_key(config, model, sums, regime, obj, pooler, seed)
        if store.load(PAGE_NAME, run_name(regime, obj, pooler, seed), key) is None:
            out.append((obj, pooler, seed, key))
    return out


def _save(store: ResultsStore, result: RunResult, key: dict, command) -> None:
    name = run_name(result.regime, result.objective, result.pooler, result.seed)
    store.save(Part(PAGE_NAME, name, key, result.to_payload(), runs=[run_record(command)]))
    logger.info("%s: STS %s", name, ", ".join(f"{k} {v:.2f}" for k, v in result.sts.items()))


class _FrozenFeatures:
    """Layer vectors of everything the frozen grid reads, computed once with the untouched encoder."""

    def __init__(self, config: GridConfig, data: GridData, objectives):
        sm = SentenceModel.from_pretrained(config.model, pooler="last_cls", max_length=config.max_length)
        self.n_states, self.hidden = sm.encoder.config.num_hidden_layers + 1, sm.encoder.config.hidden_size

        show = logger.isEnabledFor(logging.INFO)

        def feats(texts, desc="layer vectors"):
            return compute_features(sm, list(texts), dropout=False, show_progress=show, desc=desc)

        self.sts = {n: (feats(d.sentences1, f"{n} 1"), feats(d.sentences2, f"{n} 2")) for n, d in data.sts.items()}
        self.max_length = config.max_length
        self.lengths = np.concatenate([token_lengths(sm.tokenizer, s, max_length=config.max_length)
                                       for d in data.sts.values() for s in (d.sentences1, d.sentences2)]
                                      or [np.zeros(0, dtype=np.int64)])  # in the order of _sts_embeddings
        self.dev = (feats(data.dev.sentences1), feats(data.dev.sentences2), data.dev.scores)
        self.views = {o: training_views(sm, o, data.examples[o][0], seed=0, show_progress=show) for o in objectives}
        self.quora = feats(data.quora.corpus, "quora") if data.quora is not None else None
        self.without = (SearchRow.from_search(search(data.quora, self.quora.mean[:, -1].numpy()))
                        if data.quora is not None else None)


def _frozen_run(config, data, feats: _FrozenFeatures, obj, pooler, seed) -> RunResult:
    torch.manual_seed(seed)
    pool = build_pooler(PoolerConfig(kind=pooler, hidden_size=feats.hidden, n_states=feats.n_states))
    hist = train_pooler_on_features(pool, feats.views[obj], config.contrastive("frozen", obj, seed), dev=feats.dev)
    pairs, by_length = _sts_embeddings(pool, feats, records_length("frozen", pooler))
    sts, predictions = _evaluate_sts(pairs, data)
    with_pooler, without = (), ()
    if feats.quora is not None and config.searches("frozen", pooler, seed):
        emb = embed_features(pool, feats.quora)
        r = config.retrieval
        with_pooler = tuple(SearchRow.from_search(search(data.quora, emb, index=None if kind == "exact" else
                                                         FaissIndex(kind, nlist=r.nlist, nprobe=r.nprobe)))
                            for kind in r.indexes)
        without = (feats.without,)
    return RunResult("frozen", obj, pooler, seed, sts, hist, data.examples[obj][1], len(feats.views[obj][0]),
                     with_pooler, without, predictions=predictions, attention_by_length=by_length)


def _sts_embeddings(pool, feats: _FrozenFeatures, by_length: bool) -> tuple[dict, dict]:
    """(set -> (emb1, emb2), the weights-by-length profile or {}); with ``by_length`` each sentence's state weights
    come from the same pass as its embedding, in the order of ``feats.lengths`` (set by set, side 1 then 2)."""
    if not by_length:
        return {n: (embed_features(pool, a), embed_features(pool, b)) for n, (a, b) in feats.sts.items()}, {}
    pairs, weights = {}, []
    for n, (a, b) in feats.sts.items():
        (ea, wa), (eb, wb) = embed_features_with_weights(pool, a), embed_features_with_weights(pool, b)
        pairs[n] = (ea, eb)
        weights += [wa, wb]
    return pairs, length_profile(feats.lengths, np.concatenate(weights), max_length=feats.max_length)


def run_frozen_grid(config: GridConfig, store: ResultsStore, *, data_dir=None, command=()) -> int:
    """Train and evaluate every frozen-encoder run missing from ``store``, and the search without a pooler
    (:func:`untouched_search`); returns how many parts were computed."""
    data = load_grid_data(config, data_dir)
    model, sums = grid_model_key(config), data_checksums(data)
    todo = _missing(config, store, "frozen", model, sums)
    skey = untouched_search_key(config, model, sums, len(data.quora.corpus)) if data.quora is not None else None
    search_todo = skey is not None and store.load(PAGE_NAME, UNTOUCHED_SEARCH, skey) is None
    feats = _FrozenFeatures(config, data, sorted({t[0] for t in todo})) if todo else None
    if todo:
        save_test_gold(store, data, sums, command)
    for obj, pooler, seed, key in todo:
        _save(store, _frozen_run(config, data, feats, obj, pooler, seed), key, command)
    if search_todo:
        if feats is not None:
            quora = feats.quora
        else:
            sm = SentenceModel.from_pretrained(config.model, pooler="last_cls", max_length=config.max_length)
            quora = compute_features(sm, data.quora.corpus, dropout=False, desc="quora")
        rows = untouched_search(config, data.quora, quora)
        store.save(Part(PAGE_NAME, UNTOUCHED_SEARCH, skey, {"rows": rows}, runs=[run_record(command)]))
    return len(todo) + int(search_todo)


UNTOUCHED_SEARCH = "search-untouched-encoder"
UNTOUCHED_NLISTS = (100, 1024)  # the grid's IVF cells and the paper's


def _nlists(n_corpus: int) -> tuple[int, ...]:
    """The IVF sizes a corpus of ``n_corpus`` texts allows (a smaller corpus, as in tests, searches fewer)."""
    return tuple(n for n in UNTOUCHED_NLISTS if n <= n_corpus)


def untouched_search_key(config: GridConfig, model: dict, sums: dict, n_corpus: int) -> dict:
    return {"model": model, "quora": sums["quora"], "max_length": config.max_length, "dtype": config.dtype,
            "split": config.retrieval.split, "vectors": ["mean", "cls"], "nlists": list(_nlists(n_corpus)),
            "nprobe": config.retrieval.nprobe, "what": "Quora search with the untouched encoder's last layer",
            OUTPUTS_KEY: SEARCH_OUTPUTS}


def untouched_search(config: GridConfig, quora_data, quora) -> list[dict]:
    """Quora search with the untouched encoder's last-layer mean and its [CLS] ("[CLS]_Last", the paper's vector
    once the pooler is removed), exact and IVF at each of :data:`UNTOUCHED_NLISTS` cells: one
    :class:`SearchRow` dict (with ``vector``) per vector and index (an IVF size above the corpus size is left out).
    ``quora``: the corpus's layer vectors."""
    rows = []
    for vector, emb in (("last-layer mean", quora.mean[:, -1]), ("[CLS]_Last", quora.cls[:, -1])):
        ivf = (FaissIndex("ivf", nlist=n, nprobe=config.retrieval.nprobe) for n in _nlists(len(quora_data.corpus)))
        for index in (None, *ivf):
            rows.append({"vector": vector, **asdict(SearchRow.from_search(search(quora_data, emb.numpy(),
                                                                                  index=index)))})
    return rows


def _encoder_run(config: GridConfig, data: GridData, obj, pooler, seed, key: dict) -> RunResult:
    folder = Path(config.checkpoints) / obj / pooler / keyed_name(f"seed{seed}", checkpoint_key(key))
    seed_everything(seed)  # before the pooler is built: one seed, one initialisation
    sm = SentenceModel.from_pretrained(config.model, pooler=pooler, max_length=config.max_length)
    hist = train_contrastive(sm, data.examples[obj][0], config.contrastive("encoder", obj, seed), folder,
                             dev=data.dev, resume=(folder / "last" / STATE_JSON).is_file())
    best = SentenceModel.load(folder / "best")
    sts, predictions = _evaluate_sts({n: (best.encode(list(d.sentences1)), best.encode(list(d.sentences2)))
                                      for n, d in data.sts.items()}, data)
    with_pooler, without, cls_last = (), (), ()
    if data.quora is not None and config.searches("encoder", pooler, seed):
        r = config.retrieval
        quora = compute_features(best, data.quora.corpus, dropout=False, desc="quora")  # one pass, three vectors
        emb = embed_features(best.pooler, quora)
        with_pooler = tuple(SearchRow.from_search(search(data.quora, emb, index=None if kind == "exact" else
                                                         FaissIndex(kind, nlist=r.nlist, nprobe=r.nprobe)))
                            for kind in r.indexes)
        without, cls_last = ((SearchRow.from_search(search(data.quora, v[:, -1].numpy())),)
                             for v in (quora.mean, quora.cls))
    return RunResult("encoder", obj, pooler, seed, sts, hist, data.examples[obj][1], len(data.examples[obj][0]),
                     with_pooler, without, search_cls_last=cls_last, checkpoint=str(folder), predictions=predictions)


def run_encoder_runs(config: GridConfig, store: ResultsStore, *, data_dir=None, command=(),
                     train: bool = True) -> list[str]:
    """Train and evaluate every encoder-trained run missing from ``store`` (resumable inside a run too, from its
    checkpoint folder). ``train=False`` computes nothing. Returns the names of the runs still missing."""
    data = load_grid_data(config, data_dir)
    model, sums = grid_model_key(config), data_checksums(data)
    left = []
    for obj, pooler, seed, key in _missing(config, store, "encoder", model, sums):
        if not train:
            left.append(run_name("encoder", obj, pooler, seed))
            continue
        save_test_gold(store, data, sums, command)
        _save(store, _encoder_run(config, data, obj, pooler, seed, key), key, command)
    return left
