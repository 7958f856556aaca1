"""Data: loaders of the evaluation sets in the project's data directory (or built-in copies), and readers of the
user's own files (:mod:`layerwise.data.readers`: pairs, labelled texts, triplets, corpora, word pairs, BEIR)."""

from __future__ import annotations

from layerwise.data.nli import NLIPairs, load_sentences, load_snli, load_wiki_head, snli_sentences, snli_triplets
from layerwise.data.readers import (
    BeirData,
    DataFileError,
    TripletData,
    data_label,
    iter_texts,
    normalize_scores,
    read_beir,
    read_corpus,
    read_labeled,
    read_pairs,
    read_triplets,
    read_word_pairs,
)
from layerwise.data.senteval import TRANSFER_TASKS, TransferData, available_transfer, load_transfer
from layerwise.data.sts import (
    DATA_ENV_VAR,
    STS_DATASETS,
    STSData,
    available_sts,
    load_sts,
    resolve_data_dir,
)
from layerwise.data.wordsim import WORDSIM_FILES, WordSimData, available_wordsim, load_wordsim

__all__ = [
    "BeirData",
    "DataFileError",
    "TripletData",
    "data_label",
    "iter_texts",
    "normalize_scores",
    "read_beir",
    "read_corpus",
    "read_labeled",
    "read_pairs",
    "read_triplets",
    "read_word_pairs",
    "DATA_ENV_VAR",
    "STS_DATASETS",
    "TRANSFER_TASKS",
    "WORDSIM_FILES",
    "WordSimData",
    "available_wordsim",
    "load_wordsim",
    "NLIPairs",
    "STSData",
    "TransferData",
    "available_sts",
    "available_transfer",
    "load_sentences",
    "load_snli",
    "load_sts",
    "load_transfer",
    "load_wiki_head",
    "resolve_data_dir",
    "snli_sentences",
    "snli_triplets",
]
