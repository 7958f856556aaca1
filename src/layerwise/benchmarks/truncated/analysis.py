"""TMFT analyses beyond training: the zero-training frontier and measured encoding throughput per depth.

**Zero-training frontier.** For each depth ``l`` (the model truncated at hidden state ``l``), the best layer
combination within hidden states ``0..l`` is chosen on STS-B dev by the exact subset search
(:class:`~layerwise.methods.lc.search.LayerSubsetSearch` on the stacks restricted to states ``0..l``) and scored on
STS-B test with no training at all. Next to it, each row keeps the plain untrained score of hidden state ``l`` alone
(mean pooling, the starting point of TMFT at that depth), so a page can say how much of TMFT's gain over that start
the choice of layers alone reaches. The same on SICK-R (``dataset="sickr"``): chosen on its trial split, scored on
its test split, the splits TMFT on SICK-R keeps its checkpoint by and is tested on.

**Throughput.** Sentences per second of each truncated model and of the full one on the same sentences, batch size
and thread count: a warm-up batch first, then ``repeats`` timed passes (``time.perf_counter``), the median kept.
"""

from __future__ import annotations

import logging
import statistics
import time
from dataclasses import asdict, dataclass, fields

import numpy as np

from layerwise.benchmarks.store import model_key
from layerwise.data import load_sts
from layerwise.encoders.registry import resolve_model
from layerwise.encoders.truncate import count_parameters, truncate_encoder
from layerwise.evaluation.metrics import spearman
from layerwise.methods.lc.search import LayerSubsetSearch, subset_cosine
from layerwise.methods.truncated.model import TruncatedModel

logger = logging.getLogger(__name__)

__all__ = ["FRONTIER_SPLITS", "Frontier", "FrontierRow", "Throughput", "ThroughputRow", "depth_parameters", "throughput",
           "zero_training_frontier"]


#: data set -> the (dev, test) splits a frontier chooses and scores on: those TMFT keeps its checkpoint by and tests on
#: (``methods.truncated.run.sts_pairs``)
FRONTIER_SPLITS = {"stsb": ("dev", "test"), "sickr": ("trial", "test")}


@dataclass(frozen=True)
class FrontierRow:
    """One depth of the frontier; scores are Spearman x100 on the frontier's data set (STS-B unless it says)."""

    depth: int  # hidden state the model is truncated at (0 = embedding output)
    layers: tuple[int, ...]  # the subset of 0..depth chosen on dev
    dev_spearman: float  # of the chosen subset
    test_spearman: float  # of the chosen subset, no training
    single_test_spearman: float  # hidden state ``depth`` alone, no training (TMFT's starting point)
    parameters: int  # the model truncated at ``depth``, pooler excluded


@dataclass(frozen=True)
class Frontier:
    model: dict  # the model's identity (name and hashes)
    rows: tuple[FrontierRow, ...]  # one per depth, in increasing depth
    n_dev: int  # dev pairs the subsets were chosen on (STS-B dev; SICK-R trial)
    n_test: int
    dataset: str = "stsb"

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Frontier":
        """From :meth:`to_dict` output; other keys (a store's ``wall_seconds``) are ignored."""
        rows = tuple(FrontierRow(**{**r, "layers": tuple(r["layers"])}) for r in d["rows"])
        return cls(model=d["model"], rows=rows, n_dev=int(d["n_dev"]), n_test=int(d["n_test"]),
                   dataset=d.get("dataset", "stsb"))

    def row(self, depth: int) -> FrontierRow:
        for r in self.rows:
            if r.depth == depth:
                return r
        raise KeyError(f"depth {depth} is not in this frontier (depths {[r.depth for r in self.rows]})")


@dataclass(frozen=True)
class ThroughputRow:
    depth: int  # hidden state the model is truncated at; the model's last one is the full model
    parameters: int  # pooler excluded
    sentences_per_second: float  # median of the timed repeats
    seconds: tuple[float, ...]  # each timed repeat over all the sentences


@dataclass(frozen=True)
class Throughput:
    model: str
    n_layers: int  # the full model's depth (its row is the full model)
    rows: tuple[ThroughputRow, ...]
    n_sentences: int
    batch_size: int
    max_length: int
    threads: int  # torch CPU threads during the timing
    device: str

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Throughput":
        """From :meth:`to_dict` output; other keys (a store's ``wall_seconds``) are ignored."""
        rows = tuple(ThroughputRow(**{**r, "seconds": tuple(r["seconds"])}) for r in d["rows"])
        known = {f.name for f in fields(cls)}
        return cls(**{**{k: v for k, v in d.items() if k in known}, "rows": rows})

    def full(self) -> ThroughputRow:
        return next(r for r in self.rows if r.depth == self.n_layers)


def depth_parameters(model: str, depths) -> dict[int, int]:
    """depth -> parameters of ``model`` truncated there (pooler excluded), from its config (no weights read)."""
    from transformers import AutoConfig, AutoModel

    skeleton = AutoModel.from_config(AutoConfig.from_pretrained(resolve_model(model).path, local_files_only=True))
    return {int(d): count_parameters(truncate_encoder(skeleton, int(d))) for d in depths}


def zero_training_frontier(encoder, data_dir=None, *, depths=None, dataset: str = "stsb") -> Frontier:
    """The frontier of ``encoder`` (a :class:`~layerwise.encoders.LayerEncoder`) on ``dataset``'s dev / test pairs
    (the splits TMFT trains with: STS-B dev / test, SICK-R trial / test).

    ``depths``: hidden states to truncate at (default: every one, 0..L). The search at depth ``l`` sees the
    stacks ``(n, l + 1, d)`` of states 0..l only.
    """
    if dataset not in FRONTIER_SPLITS:
        raise ValueError(f"dataset={dataset!r}: the frontier is searched on {', '.join(FRONTIER_SPLITS)}")
    dev, test = (load_sts(dataset, data_dir=data_dir, split=s) for s in FRONTIER_SPLITS[dataset])
    n_states = encoder.n_states
    depths = tuple(range(n_states)) if depths is None else tuple(int(d) for d in depths)
    bad = [d for d in depths if not 0 <= d < n_states]
    if bad:
        raise ValueError(f"depths {bad} are not hidden states of {encoder.identity.name} (0..{n_states - 1})")
    a_dev, b_dev = encoder.encode(dev.sentences1).mean, encoder.encode(dev.sentences2).mean  # (n, L+1, d)
    a_test, b_test = encoder.encode(test.sentences1).mean, encoder.encode(test.sentences2).mean
    params = depth_parameters(encoder.identity.path, depths)
    rows = []
    for d in sorted(set(depths)):
        search = LayerSubsetSearch(show_progress=False).fit(a_dev[:, : d + 1], b_dev[:, : d + 1], dev.scores)
        chosen = search.best_layers_
        test_score = 100.0 * spearman(subset_cosine(a_test, b_test, chosen), test.scores)
        single = 100.0 * spearman(subset_cosine(a_test, b_test, (d,)), test.scores)
        rows.append(FrontierRow(d, chosen, float(search.best_score_), float(test_score), float(single), params[d]))
        logger.info("frontier depth %d: %s dev %.2f test %.2f", d, chosen, search.best_score_, test_score)

    return Frontier(model_key(encoder.identity), tuple(rows), len(dev), len(test), dataset)


def throughput(model: str, depths, sentences, batch_size: int = 32, *, repeats: int = 3,
               max_length: int = 128) -> Throughput:
    """Sentences/s of ``model`` truncated at each of ``depths`` and of the full model, same sentences and batch.

    Each model encodes ``sentences`` with :meth:`TruncatedModel.encode` (length-sorted batches, inference mode):
    one warm-up batch, then ``repeats`` timed passes over all the sentences; the median pass gives the rate.
    """
    import torch
    from transformers import AutoModel, AutoTokenizer

    sentences = list(sentences)
    if not sentences or repeats < 1 or batch_size < 1:
        raise ValueError(f"throughput needs sentences, repeats >= 1 and batch_size >= 1; got {len(sentences)} "
                         f"sentences, repeats {repeats}, batch_size {batch_size}")
    path = resolve_model(model).path
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    full = AutoModel.from_pretrained(path, local_files_only=True).eval()
    n_layers = int(full.config.num_hidden_layers)
    depths = sorted({int(d) for d in depths} | {n_layers})
    if depths[0] < 0 or depths[-1] > n_layers:
        raise ValueError(f"depths {depths} are not hidden states of {model} (0..{n_layers})")
    rows = []
    for d in depths:
        m = TruncatedModel(truncate_encoder(full, d), tok, (d,), max_length=max_length)
        m.encode(sentences[:batch_size], batch_size=batch_size)  # warm-up
        seconds = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            m.encode(sentences, batch_size=batch_size)
            seconds.append(time.perf_counter() - t0)
        rate = len(sentences) / statistics.median(seconds)
        rows.append(ThroughputRow(d, m.n_parameters(), float(rate), tuple(float(s) for s in seconds)))
        logger.info("throughput depth %d: %.1f sentences/s", d, rate)
    return Throughput(model=str(model), n_layers=n_layers, rows=tuple(rows), n_sentences=len(sentences),
                      batch_size=int(batch_size), max_length=int(max_length), threads=int(torch.get_num_threads()),
                      device="cpu")


def pareto_front(points) -> list[int]:
    """Indices of the points ``(cost, quality)`` that no other point beats (cost <=, quality >=, one strictly)."""
    pts = np.asarray(points, dtype=float)
    keep = []
    for i, (c, q) in enumerate(pts):
        dominated = np.any((pts[:, 0] <= c) & (pts[:, 1] >= q) & ((pts[:, 0] < c) | (pts[:, 1] > q)))
        if not dominated:
            keep.append(i)
    return sorted(keep, key=lambda i: (pts[i, 0], pts[i, 1]))
