"""Attention weight against sentence length (Appendix C of Oh et al. 2022), for the frozen-encoder runs.

A frozen-encoder run of an attention pooler in :data:`LENGTH_POOLERS` records, for every sentence of its STS test
sets (both sides of every pair), the number of tokens the encoder read (special tokens included, after truncation
to the grid's ``max_length``) and the weight each hidden state got in the pooled vector of that sentence, read
from the same forward pass that gave the evaluated embedding
(:func:`~layerwise.methods.layer_attention.frozen.embed_features_with_weights`: ``a_i`` of
``layer_attention_ratio``, ``mean_i a_ij`` of the K x K ``layer_attention``; each sums to 1 per sentence). The part
keeps only a summary (:func:`length_profile`): the sentences cut into token-length quantile buckets, the mean
weight per state in each bucket, and per state the Spearman correlation of weight and length over the sentences.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import spearmanr

__all__ = ["LENGTH_KEY", "LENGTH_POOLERS", "N_BUCKETS", "draw_length_figure", "length_profile", "length_section",
           "mean_profile"]

LENGTH_POOLERS = ("layer_attention", "layer_attention_ratio")  # the K x K form and the paper's per-layer ratio
N_BUCKETS = 4  # token-length quartiles
#: The key entry of a frozen run of a LENGTH_POOLERS pooler that records its weights by length (a run stored before
#: has none, so the next `results run layer-attention` recomputes it; the page says "not measured" until then).
LENGTH_KEY = {"what": "mean state weight per token-length quantile bucket, STS test sentences (both sides)",
              "buckets": N_BUCKETS}


def length_profile(lengths: np.ndarray, weights: np.ndarray, *, max_length: int, n_buckets: int = N_BUCKETS) -> dict:
    """The stored summary of per-sentence token ``lengths`` (n,) and state ``weights`` (n, K).

    Buckets: the distinct values among the ``n_buckets + 1`` quantiles of the lengths are the edges ``e``; bucket b
    holds the lengths in ``(e_b, e_b+1]`` (the first also ``e_0``). Returns ``{"n_sentences", "max_length",
    "at_max_length" (sentences cut at max_length), "buckets": [{"lo", "hi", "n", "mean_length", "weights" (K,)}],
    "spearman": (K,) correlation of each state's weight with the length}``."""
    lengths, weights = np.asarray(lengths, dtype=np.int64), np.asarray(weights, dtype=np.float64)
    if weights.ndim != 2 or len(weights) != len(lengths) or len(lengths) < 2:
        raise ValueError(f"need lengths (n,) and weights (n, K) with n >= 2, got {lengths.shape} and {weights.shape}")
    edges = np.unique(np.quantile(lengths, np.linspace(0, 1, n_buckets + 1), method="lower"))
    which = np.searchsorted(edges[1:-1], lengths, side="left") if len(edges) > 2 else np.zeros(len(lengths), int)
    buckets = []
    for b in range(max(1, len(edges) - 1)):
        mine = which == b
        if mine.any():
            buckets.append({"lo": int(lengths[mine].min()), "hi": int(lengths[mine].max()), "n": int(mine.sum()),
                            "mean_length": round(float(lengths[mine].mean()), 3),
                            "weights": [round(float(w), 6) for w in weights[mine].mean(axis=0)]})
    with np.errstate(invalid="ignore"):
        rho = [spearmanr(lengths, weights[:, k]).statistic if np.ptp(weights[:, k]) > 0 and np.ptp(lengths) > 0
               else float("nan") for k in range(weights.shape[1])]
    return {"n_sentences": int(len(lengths)), "max_length": int(max_length),
            "at_max_length": int((lengths >= max_length).sum()), "buckets": buckets,
            "spearman": [None if np.isnan(r) else round(float(r), 4) for r in rho]}


def mean_profile(profiles: list[dict]) -> dict | None:
    """The mean over seeds of profiles of the same sentences (same buckets); None when they differ or none."""
    if not profiles or any([(b["lo"], b["hi"], b["n"]) for b in p["buckets"]]
                           != [(b["lo"], b["hi"], b["n"]) for b in profiles[0]["buckets"]] for p in profiles):
        return None
    buckets = [{**b, "weights": np.mean([p["buckets"][i]["weights"] for p in profiles], axis=0).tolist()}
               for i, b in enumerate(profiles[0]["buckets"])]
    rho = [[np.nan if r is None else r for r in p["spearman"]] for p in profiles]
    return {**profiles[0], "buckets": buckets, "spearman": np.mean(rho, axis=0).tolist(), "seeds": len(profiles)}


def _centre(weights) -> float:
    w = np.asarray(weights, dtype=float)
    return float(np.dot(np.arange(len(w)), w) / w.sum())


def _profiles(runs, objectives) -> dict[tuple[str, str], dict | None]:
    """(pooler, objective) -> the mean profile over seeds of the frozen runs that recorded one."""
    out = {}
    for pooler in LENGTH_POOLERS:
        for obj in objectives:
            mine = [r for r in runs if r.regime == "frozen" and r.pooler == pooler and r.objective == obj]
            if mine:
                out[(pooler, obj)] = mean_profile([r.attention_by_length for r in mine if r.attention_by_length]
                                                  if all(r.attention_by_length for r in mine) else [])
    return out


def length_section(runs, objectives, model: str) -> list[str]:
    """The page's section: a table per (pooler, objective) of the mean state weight by token-length bucket."""
    lines = ["## Attention weight against sentence length (the paper's Appendix C)", ""]
    profiles = _profiles(runs, objectives)
    if not profiles:
        return lines + ["No frozen-encoder run of an attention pooler is stored.", ""]
    lines += [f"Frozen `{model}`, every STS test sentence (both sides of every pair); tokens = what the encoder "
              "read, special tokens included, after truncation to the grid's max length. Weight of hidden state j "
              "(0 = embedding output) in the pooled vector, read from the forward pass that gave the evaluated "
              "embedding: `layer_attention_ratio` a_j (its own softmax over the states), `layer_attention` "
              "mean_i a_ij (the K x K attention averaged over the queries i: h^L = sum_j (mean_i a_ij) W_v h_j); "
              "each sums to 1 per sentence. Mean over the sentences of each token-length quartile, then over seeds; "
              "centre = the weighted mean state index; rho = Spearman correlation of a state's weight with the "
              "length over the sentences (mean over seeds).", ""]
    if any(p is not None for p in profiles.values()):
        lines += ["![weights by length](layer-attention-length.png)", ""]
    for (pooler, obj), prof in profiles.items():
        lines += [f"### `{pooler}`, `{obj}`", ""]
        if prof is None:
            lines += ["Not measured: these runs were stored before the weights by length were recorded; `layerwise "
                      "results run layer-attention` computes them again.", ""]
            continue
        k = len(prof["buckets"][0]["weights"])
        lines += [f"{prof['n_sentences']:,} sentences, {prof['seeds']} seed(s); {prof['at_max_length']:,} cut at "
                  f"{prof['max_length']} tokens.", "",
                  "| tokens | sentences | " + " | ".join(f"state {j}" for j in range(k)) + " | centre |",
                  "|---|---|" + "---|" * (k + 1)]
        for b in prof["buckets"]:
            lines.append(f"| {b['lo']}-{b['hi']} | {b['n']:,} | " + " | ".join(f"{w:.3f}" for w in b["weights"])
                         + f" | {_centre(b['weights']):.2f} |")
        lines.append("| rho (weight, tokens) | | " + " | ".join("n/a" if np.isnan(r) else f"{r:+.2f}"
                                                             for r in prof["spearman"]) + " | |")
        first, last = _centre(prof["buckets"][0]["weights"]), _centre(prof["buckets"][-1]["weights"])
        lines += ["", f"From the shortest to the longest quartile the centre moves {last - first:+.2f} hidden states "
                  f"({first:.2f} -> {last:.2f}).", ""]
    return lines


def draw_length_figure(runs, objectives):
    """A matplotlib ``Figure``: mean weight per hidden state (x) for each length bucket (lines), one panel per
    (pooler, objective) with a measured profile; None when none is measured."""
    from matplotlib.figure import Figure

    profiles = {k: v for k, v in _profiles(runs, objectives).items() if v is not None}
    if not profiles:
        return None
    fig = Figure(figsize=(4.2 * len(profiles), 3.4), layout="constrained")
    axes = fig.subplots(1, len(profiles), squeeze=False)[0]
    for ax, ((pooler, obj), prof) in zip(axes, profiles.items(), strict=True):
        for b in prof["buckets"]:
            ax.plot(range(len(b["weights"])), b["weights"], marker="o", label=f"{b['lo']}-{b['hi']} tokens")
        ax.set_title(f"{pooler}, {obj}", fontsize=9)
        ax.set_xlabel("hidden state (0 = embeddings)")
        ax.set_ylabel("mean attention weight")
        ax.legend(fontsize=7)
    return fig
