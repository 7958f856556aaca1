"""Latte-Mix end to end: training text, token vectors, models per seed, zero-shot STS against poolings.

``prepare`` encodes everything once (training tokens and every evaluation sentence, for the hidden states
asked for); ``evaluate_baselines`` and ``evaluate_config`` then train and score without re-encoding, so
hyper-parameter sweeps and per-layer curves share one encoding pass.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace

import numpy as np

from layerwise.benchmarks.lattemix.results import (
    TRAIN_SOURCES,
    DataSetInfo,
    KindResult,
    LatteMixResult,
    LatteMixRun,
    TrainingText,
)
from layerwise.benchmarks.significance_parts import pack_predictions
from layerwise.data import load_snli, load_sts, load_wiki_head
from layerwise.encoders.batching import cut_texts
from layerwise.encoders.layer_encoder import LayerEncoder
from layerwise.encoders.tokens import TokenStack
from layerwise.evaluation.metrics import aggregate_correlation, cosine_rows, spearman
from layerwise.evaluation.unit_outputs import pack_ranks
from layerwise.layers import validate_layers
from layerwise.methods.lattemix.config import LatteMixConfig
from layerwise.methods.lattemix.principal import FirstComponent, fit_first_component, word_coordinates
from layerwise.methods.lattemix.similarity import SIMILARITIES, pair_similarity, sentence_mixtures
from layerwise.methods.lattemix.train import TrainConfig, train_on_token_stack

logger = logging.getLogger(__name__)

__all__ = ["LatteMixData", "LatteMixResult", "LatteMixRun", "baseline_similarities", "evaluate_baselines",
           "evaluate_config", "score_similarities",
           "evaluate_first_pc", "prepare",
           "run_lattemix", "training_sentences"]


def training_sentences(
    data_dir=None,
    *,
    sources=TRAIN_SOURCES,
    exclude: set[str] = frozenset(),
    limit: int | None = None,
    seed: int = 0,
) -> tuple[list[str], dict]:
    """Unlabeled training sentences: SNLI dev+test sentences and/or the wiki1m head, minus ``exclude``.

    Returns the sentences and a description (counts per source, how many were excluded) for results files.
    """
    bad = sorted(set(sources) - set(TRAIN_SOURCES))
    if bad or not sources:
        raise ValueError(f"unknown training sources {bad}; valid: {', '.join(TRAIN_SOURCES)}")
    pools: dict[str, list[str]] = {}
    if "snli" in sources:
        p = load_snli(data_dir, "all")
        pools["snli"] = list(dict.fromkeys(p.premises + p.hypotheses))
    if "wiki" in sources:
        pools["wiki"] = load_wiki_head(data_dir)
    seen: set[str] = set()
    out: list[str] = []
    n_excluded = 0
    for name in sources:
        for s in pools[name]:
            if not s or s in seen:
                continue
            seen.add(s)
            if s in exclude:
                n_excluded += 1
                continue
            out.append(s)
    if not out:
        raise ValueError(
            f"no training sentences left: all {n_excluded} sentences of {', '.join(sources)} are evaluation sentences"
        )
    if limit is not None and limit < len(out):
        rng = np.random.default_rng(seed)
        out = [out[i] for i in np.sort(rng.choice(len(out), size=limit, replace=False))]
    info = {
        "sources": {k: len(v) for k, v in pools.items()},
        "excluded_as_evaluation_sentences": n_excluded,
        "n_sentences": len(out),
        "limit": limit,
        "note": "SNLI dev+test (SentEval copy) and the 11,914-sentence wiki1m head; not the paper's training text",
    }
    return out, info


@dataclass
class LatteMixData:
    """Everything encoded once: training tokens and per data set the two sides' token stacks."""

    model: dict  # encoder identity
    layers: tuple[int, ...]
    train_tokens: TokenStack
    train_info: dict
    eval_tokens: TokenStack  # every unique evaluation sentence
    datasets: dict  # name -> (STSData, index of sentences1 in eval_tokens, index of sentences2)
    seconds: dict
    train_token_ids: np.ndarray | None = None  # the token id of every row of train_tokens (None: not read)
    token_names: dict | None = None  # token id -> the tokenizer's string for it, for the ids in train_token_ids


def prepare(
    encoder: LayerEncoder,
    datasets=("stsb", "sickr"),
    *,
    layers=(-1,),
    data_dir=None,
    train_sources=TRAIN_SOURCES,
    train_limit: int | None = None,
    seed: int = 0,
) -> LatteMixData:
    """Load the data sets and the training text (never the evaluation sentences), encode token vectors once."""
    layers = validate_layers(layers, encoder.n_states)
    data = {name: load_sts(name, data_dir=data_dir) for name in datasets}
    eval_sentences = list(dict.fromkeys(s for d in data.values() for s in (*d.sentences1, *d.sentences2)))
    where = {s: i for i, s in enumerate(eval_sentences)}
    train, info = training_sentences(data_dir, sources=train_sources, exclude=set(eval_sentences),
                                     limit=train_limit, seed=seed)
    t0 = time.perf_counter()
    train_tokens = encoder.encode_tokens(train, layers)
    t1 = time.perf_counter()
    eval_tokens = encoder.encode_tokens(eval_sentences, layers)
    t2 = time.perf_counter()
    info["n_tokens"] = int(len(train_tokens.special))
    ids = train_token_ids(encoder, train, train_tokens)
    unique = [int(i) for i in np.unique(ids)]
    return LatteMixData(
        model=encoder.identity.to_dict(),
        layers=layers,
        train_tokens=train_tokens,
        train_info=info,
        eval_tokens=eval_tokens,
        datasets={
            name: (d, np.array([where[s] for s in d.sentences1]), np.array([where[s] for s in d.sentences2]))
            for name, d in data.items()
        },
        seconds={"encode_train": t1 - t0, "encode_eval": t2 - t1},
        train_token_ids=ids,
        token_names=dict(zip(unique, encoder.tokenizer.convert_ids_to_tokens(unique), strict=True)),
    )


def _similarities(data: LatteMixData, name: str, sim_fn) -> np.ndarray:
    """``sim_fn(i1, i2)`` on the pairs of data set ``name``: (n_pairs,)."""
    _, i1, i2 = data.datasets[name]
    return sim_fn(i1, i2)


def _correlation(data: LatteMixData, name: str, sim: np.ndarray, aggregation: str) -> float:
    d = data.datasets[name][0]
    return 100 * aggregate_correlation(sim, d.scores, np.asarray(d.subsets), aggregation, spearman)


def score_similarities(data: LatteMixData, sims: dict, aggregation: str = "all") -> dict:
    """method -> data set -> Spearman x100 of the similarities ``sims`` (method -> data set -> (n_pairs,))."""
    return {m: {n: _correlation(data, n, s, aggregation) for n, s in per.items()} for m, per in sims.items()}


def baseline_similarities(data: LatteMixData, layer: int) -> dict[str, dict[str, np.ndarray]]:
    """Cosines of CLS, mean (with and without special tokens) and max pooling of one hidden state: method -> data
    set -> (n_pairs,)."""
    poolings = {
        "cls": data.eval_tokens.pool(layer, "cls"),
        "mean": data.eval_tokens.pool(layer, "mean"),
        "mean_no_special": data.eval_tokens.pool(layer, "mean", include_special=False),
        "max": data.eval_tokens.pool(layer, "max"),
    }
    return {method: {name: _similarities(data, name, lambda a, b, e=emb: cosine_rows(e[a], e[b]))
                     for name in data.datasets} for method, emb in poolings.items()}


def evaluate_baselines(data: LatteMixData, layer: int, *, aggregation: str = "all") -> dict[str, dict[str, float]]:
    """CLS, mean (with and without special tokens) and max pooling of one hidden state: method -> data set -> Spearman."""
    return score_similarities(data, baseline_similarities(data, layer), aggregation)


def evaluate_first_pc(data: LatteMixData, layer: int, *, aggregation: str = "all",
                      keep_predictions: bool = False) -> dict:
    """Mean pooling (no special tokens) with and without the first principal component of the training tokens.

    Returns {"share", "n_tokens", "scores": {"mean" | "mean_pc1_removed": {set: Spearman x100}}} (and, with
    ``keep_predictions``, "predictions": the same keys -> set -> each pair's cosine, packed as dense ranks); the
    component is fitted on the training tokens of ``layer`` (never the evaluation sentences). The mean of the vectors
    with the component removed is the mean vector with it removed (the removal is affine), so it is removed after
    pooling.
    """
    pc = fit_first_component(data.train_tokens.token_vectors(layer, include_special=False))
    mean = data.eval_tokens.pool(layer, "mean", include_special=False)
    sims = {label: {name: _similarities(data, name, lambda a, b, e=emb: cosine_rows(e[a], e[b]))
                    for name in data.datasets} for label, emb in (("mean", mean), ("mean_pc1_removed", pc.remove(mean)))}
    out = {"share": pc.share, "n_tokens": pc.n_tokens, "scores": score_similarities(data, sims, aggregation)}
    if data.train_token_ids is not None:
        out["words"] = first_pc_words(pc, data, layer)
    return {**out, "predictions": {k: pack_predictions(v) for k, v in sims.items()}} if keep_predictions else out


def train_token_ids(encoder: LayerEncoder, texts, stack: TokenStack) -> np.ndarray:
    """The token id of every row of ``stack``, the token vectors :meth:`LayerEncoder.encode_tokens` gave for
    ``texts``: ``texts`` tokenized again as the encoder does (:func:`~layerwise.encoders.batching.cut_texts`, its
    tokenizer, truncated to its max length). Raises where a sentence's ids and rows differ in number (the two would
    not line up)."""
    ids = encoder.tokenizer(cut_texts(list(texts), encoder.max_length), truncation=True,
                            max_length=encoder.max_length)["input_ids"]
    lengths = np.diff(stack.offsets)
    if len(ids) != len(lengths) or any(len(a) != n for a, n in zip(ids, lengths, strict=True)):
        raise RuntimeError("the tokenizer's ids of the training sentences do not line up with their token vectors")
    return np.concatenate([np.asarray(a, dtype=np.int64) for a in ids])


WORDS_MIN_COUNT = 5  # a word type read at word level occurs at least this often in the training text
WORDS_SHOWN = 10  # types listed at each end of the component
WORDS_BINS = 5  # equal-sized bins of the types by their count


def first_pc_words(pc: FirstComponent, data: LatteMixData, layer: int) -> dict:
    """The first principal component read per word type (``principal.word_coordinates`` on the training tokens,
    special tokens left out), over the types that occur at least :data:`WORDS_MIN_COUNT` times: Spearman's rho of
    their coordinate with their log count, their mean coordinate per count bin (rarest first), and the
    :data:`WORDS_SHOWN` types at each end of the component as [token, count, coordinate]."""
    tokens = data.train_tokens
    types, counts, coords = word_coordinates(pc, tokens.token_vectors(layer, include_special=False),
                                             data.train_token_ids[~tokens.special])
    often = counts >= WORDS_MIN_COUNT
    types, counts, coords = types[often], counts[often], coords[often]
    order = np.argsort(coords, kind="stable")
    by_count = np.array_split(np.argsort(counts, kind="stable"), WORDS_BINS)

    def row(i: int) -> list:
        return [data.token_names[int(types[i])], int(counts[i]), round(float(coords[i]), 4)]

    return {"min_count": WORDS_MIN_COUNT, "n_types": int(often.size), "n_types_read": int(len(types)),
            "spearman_log_count": spearman(coords, np.log(counts)) if len(types) > 2 else None,
            "count_bins": [{"counts": [int(counts[b].min()), int(counts[b].max())], "n_types": int(len(b)),
                            "mean_coordinate": round(float(coords[b].mean()), 4)} for b in by_count if len(b)],
            "highest": [row(i) for i in order[::-1][:WORDS_SHOWN]], "lowest": [row(i) for i in order[:WORDS_SHOWN]]}


def evaluate_config(
    data: LatteMixData,
    config: LatteMixConfig,
    train: TrainConfig,
    *,
    layer: int,
    seeds=(0, 1, 2),
    include_special: bool = False,
    aggregation: str = "all",
    save_dir=None,
) -> KindResult:
    """Train one model per seed on ``layer``'s training tokens and score every similarity on every data set.

    Returns the scores (metric -> data set -> [per seed]), training seconds, final loss and KL per seed, and each
    pair's similarity as dense ranks in the same layout (``predictions``, for the results page's paired tests).
    """
    config = replace(config, input_dim=int(data.train_tokens.vectors.shape[-1]))
    metrics = SIMILARITIES[config.kind]
    scores = {m: {name: [] for name in data.datasets} for m in metrics}
    predictions = {m: {name: [] for name in data.datasets} for m in metrics}
    seconds, losses, kls = [], [], []
    for seed in seeds:
        model, hist = train_on_token_stack(config, data.train_tokens, layer, replace(train, seed=int(seed)),
                                           include_special=include_special)
        seconds.append(hist["seconds"])
        tail = max(1, len(hist["loss"]) // 20)
        losses.append(float(np.mean(hist["loss"][-tail:])))
        kls.append(float(np.mean(hist["kl"][-tail:])))
        if save_dir is not None:
            model.save(f"{save_dir}/{config.kind}-layer{layer}-seed{seed}")
        mix = sentence_mixtures(model, data.eval_tokens, layer, include_special=include_special)
        for m in metrics:
            for name in data.datasets:
                sim = _similarities(data, name, lambda a, b, mix=mix, m=m: pair_similarity(mix.take(a), mix.take(b), m))
                scores[m][name].append(_correlation(data, name, sim, aggregation))
                predictions[m][name].append(pack_ranks(sim))
    return KindResult(config=config.to_dict(), train=train.to_dict(), seeds=list(seeds), layer=layer,
                      include_special=include_special, scores=scores, train_seconds=seconds, final_loss=losses,
                      final_kl=kls, predictions=predictions)


def run_lattemix(run: LatteMixRun, *, data_dir=None, encoder_options: dict | None = None,
                 save_dir=None) -> LatteMixResult:
    """Train each model kind on ``layer``'s token vectors (one per seed) and compare with the layer's poolings."""
    encoder = LayerEncoder(run.model, **(encoder_options or {}))
    (layer,) = validate_layers([run.layer], encoder.n_states)
    data = prepare(encoder, run.datasets, layers=(layer,), data_dir=data_dir, train_sources=run.train_sources,
                   train_limit=run.train_limit, seed=int(run.seeds[0]))
    aggregation = run.aggregation
    runs = {}
    for kind in run.kinds:
        kept = evaluate_config(data, replace(run.config, kind=kind), run.train, layer=layer, seeds=run.seeds,
                               include_special=run.include_special, aggregation=aggregation, save_dir=save_dir)
        runs[kind] = replace(kept, predictions={})  # the command's results file keeps scores only
    return LatteMixResult(
        settings=run, model=encoder.identity, layer=layer, aggregation=aggregation,
        data={name: DataSetInfo(split=d.split, n_pairs=len(d), source=d.source)
              for name, (d, _, _) in data.datasets.items()},
        training_text=TrainingText.from_dict(data.train_info),
        baselines=evaluate_baselines(data, layer, aggregation=aggregation), runs=runs, seconds=data.seconds,
    )
