"""End-to-end runs behind ``layerwise train`` and ``layerwise retrieval`` (no CLI logic here)."""

from __future__ import annotations

import csv
import json
import logging
import os
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from layerwise.benchmarks.layer_attention.results import (
    IndexResult,
    RetrievalDataInfo,
    RetrievalResult,
    TrainHistory,
    TrainResult,
)
from layerwise.data import load_sts, load_wiki_head
from layerwise.data.nli import load_sentences
from layerwise.encoders.folder_code import check_no_code
from layerwise.encoders.trainable import UNPOOLED, SentenceModel, is_sentence_model_folder
from layerwise.errors import UsageError
from layerwise.evaluation.retrieval import (
    DEFAULT_NLIST,
    beir_retrieval,
    check_nlist,
    evaluate_retrieval,
    load_quora_retrieval,
)
from layerwise.export import load_sentence_transformer
from layerwise.export.sentence_transformers import EXPORT_MARKER
from layerwise.methods.layer_attention.estimator import LayerAttentionPooler
from layerwise.methods.layer_attention.train import ContrastiveConfig, nli_triplets, train_contrastive
from layerwise.training import prepare_output, seed_everything
from layerwise.training.distributed import run_on_main

logger = logging.getLogger(__name__)

__all__ = ["DataSources", "RetrievalResult", "SearchOptions", "TrainResult", "load_trained_model", "load_training_examples",
           "run_retrieval", "run_train"]


@dataclass(frozen=True)
class DataSources:
    """Where :func:`run_train` reads its data: the training examples and the data folder (also STS-B dev)."""

    train_data: str | os.PathLike | None = None  # see load_training_examples' ``path``; None: built from data_dir
    data_dir: str | os.PathLike | None = None  # data folder (None: $LAYERWISE_DATA or the built-in copies)


def load_training_examples(objective: str, path=None, *, data_dir=None) -> tuple[list, str]:
    """Examples for an objective and a description of where they came from.

    ``path``: one sentence per line (unsup), or a CSV with a header ``sent0,sent1[,hard_neg]`` (SimCSE's format:
    pairs for in_batch, triplets for sup_hard_neg). Without a path: the wiki1m head (unsup) or triplets / pairs built
    from the SNLI dev and test sets in ``data_dir`` (about 5.9k, not the 275k of SimCSE's NLI file).
    """
    if path is None:
        if objective == "unsup":
            return load_wiki_head(data_dir), "wiki1m head (11,914 sentences, not SimCSE's 1M)"
        trip = nli_triplets(data_dir)
        desc = f"{len(trip)} SNLI dev+test premises with an entailment and a contradiction (not SimCSE's 275k NLI triplets)"
        return (trip if objective == "sup_hard_neg" else [(a, b) for a, b, _ in trip]), desc
    path = Path(path)
    if path.suffix.lower() != ".csv":
        if objective != "unsup":
            raise ValueError(f"{objective} needs a CSV with columns sent0,sent1[,hard_neg]; got {path}")
        return load_sentences(path), str(path)
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    need = ["sent0", "sent1"] + (["hard_neg"] if objective == "sup_hard_neg" else [])
    if not rows or any(c not in rows[0] for c in need):
        raise ValueError(f"{path} needs the columns {', '.join(need)} (header line), found {list(rows[0]) if rows else 'no rows'}")
    if objective == "unsup":
        return [r["sent0"] for r in rows], str(path)
    return [tuple(r[c] for c in need) for r in rows], str(path)


def run_train(model: str, config: ContrastiveConfig, output, *, pooler: str = "layer_attention",
              data: DataSources = DataSources(), max_length: int = 32, resume: bool = False,
              overwrite: bool = False) -> TrainResult:
    """Train ``pooler`` (and the encoder unless frozen) with ``config``; dev = STS-B dev (built in).

    ``data`` says where the training examples (:func:`load_training_examples`) and STS-B dev are read.

    torch is seeded with ``config.seed`` before the pooler is built, so two runs with one seed are identical.
    An existing run in ``output`` needs ``resume`` (continue) or ``overwrite`` (start again; removes only its
    ``last/``, ``best/`` and ``train.json``).
    """
    if not overwrite or resume:  # refuse an existing run, a resume with nothing to resume, or both flags, first
        run_on_main(prepare_output, output, resume=resume, overwrite=overwrite)  # under torchrun: rank 0 checks
    examples, source = load_training_examples(config.objective, data.train_data, data_dir=data.data_dir)
    dev = load_sts("stsb", data_dir=data.data_dir, split="dev")
    seed_everything(config.seed)
    sm = SentenceModel.from_pretrained(model, pooler=pooler, max_length=max_length)
    if overwrite:  # everything loaded: only now remove the earlier run's own outputs
        run_on_main(prepare_output, output, resume=resume, overwrite=True)
    hist = train_contrastive(sm, examples, config, output, dev=dev, resume=resume)
    return TrainResult(model=str(model), pooler=pooler, training_data=source, n_examples=len(examples),
                       dev=f"STS-B dev ({len(dev)} pairs)", history=TrainHistory.from_dict(hist), output=str(output))


def _is_trained(model_dir) -> bool:
    """A folder of a trained pooler (``train``'s ``best/``/``last/``, or :meth:`LayerAttentionPooler.save`'s), not
    another sentence-transformers folder (modules.json without the trained pooler's marker)."""
    folder = Path(model_dir)
    if is_sentence_model_folder(folder) or not (folder / "modules.json").is_file():
        return True  # (a folder that is neither is refused by load_trained_model, in one line)
    marker = folder / EXPORT_MARKER
    try:
        return json.loads(marker.read_text(encoding="utf-8")).get("kind") == "trained_pooler"
    except (OSError, ValueError, AttributeError):
        return False


def load_trained_model(model_dir) -> SentenceModel:
    """The encoder + pooler in ``model_dir``: a ``SentenceModel`` folder (``train``'s ``best/`` or ``last/``) or a
    folder written by :meth:`LayerAttentionPooler.save` (``train``'s ``model/``, or ``layerwise export``)."""
    if is_sentence_model_folder(model_dir):
        return SentenceModel.load(check_no_code(model_dir, name="model_dir"))
    return LayerAttentionPooler.load(model_dir).model_


@dataclass(frozen=True)
class SearchOptions:
    """How :func:`run_retrieval` embeds and searches."""

    indexes: tuple[str, ...] = ("exact", "flat", "ivf")  # "exact" = numpy reference; "flat", "ivf" = FAISS
    nlist: int = DEFAULT_NLIST  # IVF cells: the paper's 1024 (at most the corpus size)
    nprobe: int = 10  # IVF cells visited per query
    without_pooler: bool = False  # search with a last-layer vector, not the pooler ("search without it")
    unpooled: str = "mean"  # that vector: the last layer's token mean, or "cls" (the paper's "[CLS]_Last")
    batch_size: int = 128  # texts per forward pass


def run_retrieval(model_dir, *, data_dir=None, split: str = "dev", beir=None,
                  options: SearchOptions = SearchOptions()) -> RetrievalResult:
    """Semantic search with a trained model (see :func:`load_trained_model`): exact (numpy) and FAISS indexes.

    ``beir``: a :class:`~layerwise.data.readers.BeirData` (``read_beir(folder, split=...)``) searched with its own
    queries; None: Quora duplicate questions of ``split`` from ``data_dir``. ``options.without_pooler``: embed with
    the encoder's last layer instead of the trained pooler (the paper's "train with the pooler, search without it"):
    ``unpooled="mean"`` its token mean (the default here), ``"cls"`` its [CLS] vector (the paper's "[CLS]_Last").
    IVF ``nlist`` defaults to the paper's 1024; a corpus smaller than it is refused before the model loads.
    """
    o = options
    if o.unpooled not in UNPOOLED:
        raise UsageError(f"unpooled={o.unpooled!r}: use one of {', '.join(UNPOOLED)}")
    data = load_quora_retrieval(data_dir, split) if beir is None else beir_retrieval(beir)
    try:
        check_nlist(o.nlist, len(data.corpus), indexes=o.indexes)
    except ValueError as err:
        raise UsageError(str(err)) from None
    if _is_trained(model_dir):
        sm = load_trained_model(model_dir)
        encode = partial(sm.encode, use_pooler=not o.without_pooler, unpooled=o.unpooled, batch_size=o.batch_size)
        pooler = f"none (last-layer {'CLS' if o.unpooled == 'cls' else 'mean'})" if o.without_pooler else \
            sm.pooler.config.kind
    else:  # any other sentence-transformers folder (an LC export, a compressed model, ...): searched as it embeds
        if o.without_pooler:
            raise UsageError(f"{model_dir} holds no trained pooler to leave out; drop --without-pooler "
                             "(without_pooler=False), or pass a folder written by `layerwise train`")
        st = load_sentence_transformer(model_dir, device="cpu")
        encode = partial(st.encode, batch_size=o.batch_size, convert_to_numpy=True, show_progress_bar=False)
        pooler = "the folder's own (sentence-transformers)"
    results = [IndexResult.from_dict(r)
               for r in evaluate_retrieval(encode, data, indexes=o.indexes, nlist=o.nlist, nprobe=o.nprobe)]
    info = (RetrievalDataInfo(name="quora", split=split, corpus=len(data.corpus), queries=len(data.queries))
            if beir is None else RetrievalDataInfo(name=data.name, split=data.split, corpus=len(data.corpus),
                                                   queries=len(data.query_texts)))
    return RetrievalResult(model=str(model_dir), pooler=pooler, data=info, results=results)
