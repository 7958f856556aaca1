"""Per-layer word similarity of any encoder: each hidden state's Spearman on each word-similarity set.

A word is encoded alone (``[CLS] word [SEP]``); its vector at hidden state l is the mean of its sub-word tokens' vectors
there (special tokens left out). For each set, the cosine of every pair's vectors is ranked against the gold scores.
TMFT's word-similarity pre-step trains on these pairs; this analysis says, with no training, which layers already
hold lexical similarity.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from layerwise.data.checksum import content_checksum
from layerwise.data.wordsim import WordSimData
from layerwise.evaluation.metrics import cosine_rows, spearman

logger = logging.getLogger(__name__)

__all__ = ["WordSimLayers", "per_layer_wordsim", "word_vectors"]


@dataclass(frozen=True)
class WordSimLayers:
    """Spearman x100 of every hidden state (0 = embedding output) on every word-similarity set."""

    model: dict  # ModelIdentity as a dict
    scores: dict[str, list[float]]  # set name -> (L + 1) Spearman x100
    n_pairs: dict[str, int]
    data: dict[str, dict]  # set name -> {"source": file, "checksum": content sha256}
    n_words: int  # distinct words encoded

    def best_layer(self, name: str) -> int:
        return int(np.nanargmax(self.scores[name]))

    def to_dict(self) -> dict:
        return {"kind": "wordsim", "schema": 1, **asdict(self)}


def word_vectors(encoder, words: Sequence[str]) -> np.ndarray:
    """(n_words, L + 1, d): the mean of each word's sub-word token vectors at every hidden state, specials left out."""
    layers = tuple(range(encoder.n_states))
    tokens = encoder.encode_tokens(list(words), layers)
    return np.stack([tokens.pool(layer, "mean", include_special=False) for layer in layers], axis=1)


def per_layer_wordsim(encoder, datasets: Sequence[WordSimData]) -> WordSimLayers:
    """Score every hidden state of ``encoder`` (a :class:`~layerwise.encoders.LayerEncoder`) on every set."""
    if not datasets:
        raise ValueError("no word-similarity sets given")
    words = sorted({w for d in datasets for w in (*d.words1, *d.words2)})
    index = {w: i for i, w in enumerate(words)}
    vecs = word_vectors(encoder, words)  # (n_words, K, d)
    scores, n_pairs, data = {}, {}, {}
    for d in datasets:
        a = vecs[[index[w] for w in d.words1]]
        b = vecs[[index[w] for w in d.words2]]
        scores[d.name] = [100.0 * spearman(cosine_rows(a[:, k], b[:, k]), d.scores) for k in range(vecs.shape[1])]
        n_pairs[d.name] = len(d)
        data[d.name] = {"source": d.source, "checksum": content_checksum(d)}
    return WordSimLayers(model=encoder.identity.to_dict(), scores=scores, n_pairs=n_pairs, data=data,
                         n_words=len(words))
