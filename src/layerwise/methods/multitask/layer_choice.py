"""Training-free layer subsets per task (``layers="subset"``), chosen on the frozen encoder before training.

    STS   the exact search (``methods/lc/search.py`` :class:`LayerSubsetSearch`): the subset whose mean-vector
          cosine has the best Spearman with the STS-B training gold scores
    SST   the ridge screen (``methods/lc/transfer.py`` :class:`RidgeScreen`): the subset whose averaged mean vectors
          give the best held-out accuracy of a closed-form ridge classifier, on a seeded 80 / 20 split of SST train
    PARA  the same screen on Quora training pairs (features [u, v, |u - v|, u * v])

Subsets are capped at ``default_max_layers`` members for the screen (4 up to 13 hidden states, else 3) and searched
exhaustively for STS (at most 8 members beyond 13 states).
"""

from __future__ import annotations

import logging

import numpy as np
import torch

from layerwise.layers import LayerStack
from layerwise.methods.lc.search import LayerSubsetSearch
from layerwise.methods.lc.transfer import RidgeScreen, TransferFeatures, all_subsets, default_max_layers

logger = logging.getLogger(__name__)

__all__ = ["choose_subsets", "frozen_mean_vectors"]


@torch.inference_mode()
def frozen_mean_vectors(model, texts: list[str], *, batch_size: int = 64) -> np.ndarray:
    """(n, K, d) masked-mean vectors of every hidden state, in eval mode (no dropout)."""
    was = model.training
    model.eval()
    out = None
    try:
        for start in range(0, len(texts), batch_size):
            mean = model.encode_texts(texts[start:start + batch_size])[0].float().cpu().numpy()
            out = mean if out is None else np.concatenate([out, mean])
    finally:
        model.train(was)
    return out


def _holdout(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    perm = np.random.default_rng(seed).permutation(n)
    cut = max(1, int(round(0.8 * n)))
    return np.sort(perm[:cut]), np.sort(perm[cut:])


def _screen(first: np.ndarray, second: np.ndarray | None, labels: np.ndarray, n_classes: int, seed: int):
    stack = lambda m: LayerStack(mean=m, cls=m)  # noqa: E731 - the screen reads the mean vectors only
    feats = TransferFeatures(first=stack(first), labels=labels.astype(np.int64), n_classes=n_classes,
                             second=None if second is None else stack(second))
    subsets = all_subsets(feats.n_states, default_max_layers(feats.n_states))
    scores = RidgeScreen(feats).scores(np.arange(len(feats)), [_holdout(len(feats), seed)], subsets)[:, 0]
    best = int(np.argmax(scores))
    return subsets[best], float(scores[best])


def choose_subsets(model, data, *, seed: int = 0, batch_size: int = 64) -> dict[str, dict]:
    """{task: {"layers": [...], "score": ..., "method": ...}} chosen on ``data``'s training splits (frozen model)."""
    sts = data.sts.train
    a = frozen_mean_vectors(model, sts.first, batch_size=batch_size)
    b = frozen_mean_vectors(model, sts.second, batch_size=batch_size)
    search = LayerSubsetSearch(show_progress=False).fit(a, b, sts.targets)
    out = {"sts": {"layers": list(search.best_layers_), "score": float(search.best_score_),
                   "method": "exact search, Spearman on STS-B train"}}
    sst = data.sst.train
    layers, score = _screen(frozen_mean_vectors(model, sst.sentences, batch_size=batch_size), None, sst.labels,
                            data.n_classes, seed)
    out["sst"] = {"layers": list(layers), "score": score, "method": "ridge screen, 80/20 split of SST train"}
    para = data.para.train
    layers, score = _screen(frozen_mean_vectors(model, para.first, batch_size=batch_size),
                            frozen_mean_vectors(model, para.second, batch_size=batch_size),
                            (para.targets > 0.5).astype(np.int64), 2, seed)
    out["para"] = {"layers": list(layers), "score": score, "method": "ridge screen, 80/20 split of Quora train"}
    for task, choice in out.items():
        logger.info("%s: layers %s (%s %.3f)", task, choice["layers"], choice["method"], choice["score"])
    return out
