"""End-to-end runs behind the CLI: encode a data set once, analyse layers, search layer subsets, write results.

Each function here is public and free of CLI logic; ``layerwise.cli`` only parses arguments and calls them.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from layerwise.benchmarks.schema import check_schema, stamp
from layerwise.benchmarks.store import keyed_name, model_key
from layerwise.data import load_sts
from layerwise.data.checksum import content_checksum
from layerwise.data.sts import STSData
from layerwise.encoders.layer_encoder import LayerEncoder, ModelIdentity
from layerwise.encoders.registry import DEFAULT_MODEL
from layerwise.evaluation.sts import per_layer_scores
from layerwise.layers import LayerStack
from layerwise.methods.lc.export import SubsetChoice
from layerwise.methods.lc.protocol import LCProtocol, LCResult, run_bert_lc
from layerwise.reports import fmt, plot_per_layer, write_json, write_text

logger = logging.getLogger(__name__)

__all__ = ["STS_SCHEMA", "STSDataInfo", "STSRun", "SearchConfig", "encode_pairs", "output_stem", "run_layers", "run_search",
           "subset_from_results",
           "write_layers_outputs", "write_search_outputs"]

STS_SCHEMA = 1

METHOD_LABELS = {
    "cls": "CLS (last layer)",
    "pooler": "pooler output",
    "last": "mean, last layer",
    "first0_last": "mean, first+last {0, L}",
    "first1_last": "mean, first+last {1, L}",
    "last_four": "mean, last four",
    "all": "mean, all layers",
    "random": "mean, random subset",
    "lc": "**LC (subset chosen on dev)**",
    "lc_mlp": "LC + MLP (LC's subset through the pooler head)",
}


def _cache_info(encoder: LayerEncoder) -> dict | None:
    """How many distinct texts the last encode read from the cache and how many it computed (None: no cache)."""
    return None if encoder.cache is None else encoder.cache.last_stats


def encode_pairs(encoder: LayerEncoder, data) -> tuple[LayerStack, LayerStack, float]:
    """Encode both sides of an STS data set in one pass (each unique sentence once). Returns seconds too."""
    n = len(data)
    if n == 0:
        raise ValueError(f"data set {data.name!r} has no pairs")
    t0 = time.perf_counter()
    stack = encoder.encode(list(data.sentences1) + list(data.sentences2))
    seconds = time.perf_counter() - t0
    return stack.take(np.arange(n)), stack.take(np.arange(n, 2 * n)), seconds


@dataclass
class STSDataInfo:
    """Which pairs a run scored and how their subsets were combined."""

    name: str  # data set (loader name)
    split: str
    source: str  # the folder read
    n_pairs: int
    subsets: dict[str, int]  # subset name -> pairs
    aggregation: str  # all / wmean / mean
    checksum: str | None = None  # content_checksum of the loaded data (None: recorded before checksums existed)


def _data_info(data, aggregation: str) -> STSDataInfo:
    return STSDataInfo(name=data.name, split=data.split, source=data.source, n_pairs=len(data),
                       subsets={s: int((np.asarray(data.subsets) == s).sum()) for s in data.subset_names},
                       aggregation=aggregation, checksum=content_checksum(data))


@dataclass(frozen=True)
class SearchConfig:
    """What ``run_search`` / ``run_layers`` run: model, data set, protocol and encoder settings."""

    model: str = DEFAULT_MODEL  # built-in name or a local folder
    dataset: str = "stsb"
    split: str | None = None  # None: the data set's default split
    aggregation: str = "all"  # how STS12-16 subsets are combined
    n_splits: int = 5  # seeded dev/test splits; split k uses seed + k
    dev_size: int = 350  # dev pairs per split
    seed: int = 0
    max_layers: int | None = None  # largest subset searched (None: see LayerSubsetSearch)
    head: bool = True  # also LC + MLP where the checkpoint has a trained pooler head
    bootstrap: int = 0  # resamples of the paired bootstrap of LC (and the other compared columns) vs last; 0: none
    max_pooling: bool = False  # also LC's subset with max pooling ("lc_max")
    data_dir: str | None = None  # None: $LAYERWISE_DATA (STS-B is built in)
    encoder_options: dict = field(default_factory=dict)  # LayerEncoder keywords (max_length, dtype, ...)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "SearchConfig":
        return cls(**d)


@dataclass
class STSRun:
    """The result of ``run_layers`` (``kind="layers"``) or ``run_search`` (``kind="search"``, with ``lc``)."""

    kind: str
    model: ModelIdentity
    encoder: dict  # max_length, dtype, batch_size
    data: STSDataInfo
    per_layer: dict[str, list[float]]  # "mean" / "cls" -> Spearman x100 of each hidden state alone
    seconds: dict  # "encode" (and "protocol", "search_per_split" for a search)
    cache: dict | None  # layer-cache counts of the encode (None: no cache)
    protocol: dict | None = None  # the protocol in words and numbers (search)
    lc: LCResult | None = None  # the dev/test protocol (search)
    lc_mlp: str | None = None  # LC + MLP status (search)
    environment: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = {"model": self.model.to_dict(), "encoder": self.encoder, "data": asdict(self.data)}
        if self.kind == "search":
            d.update(protocol=self.protocol, per_layer=self.per_layer, lc=self.lc.to_dict(), lc_mlp=self.lc_mlp)
        else:
            d.update(per_layer=self.per_layer)
        d.update(seconds=self.seconds, cache=self.cache, environment=self.environment)
        return stamp(self.kind, STS_SCHEMA, d)

    @classmethod
    def from_dict(cls, d: dict) -> "STSRun":
        kind = d.get("kind")
        check_schema(d, kind if kind in ("search", "layers") else "search", STS_SCHEMA)
        return cls(kind, ModelIdentity.from_dict(d["model"]), d["encoder"], STSDataInfo(**d["data"]), d["per_layer"],
                   d["seconds"],
                   d.get("cache"), d.get("protocol"), LCResult.from_dict(d["lc"]) if d.get("lc") else None,
                   d.get("lc_mlp"), d.get("environment", {}))


def _load(config: SearchConfig, data=None):
    if data is None:
        data = load_sts(config.dataset, data_dir=config.data_dir, split=config.split)
    encoder = LayerEncoder(config.model, **config.encoder_options)
    return data, encoder


def _encoder_info(encoder: LayerEncoder) -> dict:
    return {"max_length": encoder.max_length, "dtype": encoder.dtype, "batch_size": encoder.batch_size,
            "backend": encoder.backend}


def run_layers(config: SearchConfig, data: STSData | None = None) -> STSRun:
    """Per-layer analysis: Spearman of each hidden state alone (mean and CLS pooling) on all pairs.

    ``data``: the pairs to use (e.g. the user's file read by :func:`layerwise.data.readers.read_pairs`) instead of
    ``config.dataset``."""
    data, encoder = _load(config, data)
    s1, s2, enc_seconds = encode_pairs(encoder, data)
    per_layer = per_layer_scores(s1, s2, data.scores, groups=np.asarray(data.subsets), aggregation=config.aggregation)
    return STSRun("layers", encoder.identity, _encoder_info(encoder), _data_info(data, config.aggregation), per_layer,
                  {"encode": enc_seconds}, _cache_info(encoder))


def run_search(config: SearchConfig, data: STSData | None = None, *,
               dev_test: tuple[np.ndarray, np.ndarray] | None = None) -> STSRun:
    """BERT-LC on one STS data set: per-layer scores, then the dev/test protocol with baselines.

    ``config.head`` also reports LC + MLP where the checkpoint has a trained pooler head (``lc_mlp`` says
    whether it ran and why not). ``data``: the pairs to use instead of ``config.dataset`` (e.g. the user's file);
    ``dev_test`` = (dev rows, test rows) of ``data``: the subset is chosen on those dev rows and reported on those
    test rows (one split, e.g. a dev file and a test file stacked) instead of ``config.n_splits`` seeded splits; the
    per-layer scores are then the test rows'."""
    c = config
    data, encoder = _load(c, data)
    s1, s2, enc_seconds = encode_pairs(encoder, data)
    groups = np.asarray(data.subsets)
    shown = np.arange(len(data)) if dev_test is None else np.asarray(dev_test[1])
    per_layer = per_layer_scores(s1.take(shown), s2.take(shown), data.scores[shown], groups=groups[shown],
                                 aggregation=c.aggregation)
    t0 = time.perf_counter()
    lc = run_bert_lc(
        s1, s2, data.scores, LCProtocol(c.aggregation, c.n_splits, c.dev_size, c.seed, c.max_layers, c.bootstrap,
                                        c.max_pooling), groups=groups,
        head=encoder.pooler_head()[:2] if c.head and encoder.identity.pooler_trained else None, dev_test=dev_test,
    )
    if dev_test is None:
        protocol = {
            "name": "BERT-LC (Hosseini et al. 2023): pool all pairs"
                    + (" of every split of the release" if c.split == "all" else f" of the {data.split} split")
                    + ", shuffle, first dev_size pairs dev, rest test",
            "n_splits": c.n_splits, "dev_size": c.dev_size, "seed": c.seed,
            "split_seeds": [c.seed + k for k in range(c.n_splits)], "max_layers": lc.max_layers,
            "selection_metric": f"Spearman on dev ({c.aggregation})",
        }
    else:
        protocol = {
            "name": f"BERT-LC (Hosseini et al. 2023): subset chosen on the {len(dev_test[0])} dev pairs, reported on "
                    f"the {len(dev_test[1])} test pairs",
            "n_splits": 1, "dev_size": len(dev_test[0]), "seed": c.seed, "split_seeds": [c.seed],
            "max_layers": lc.max_layers, "selection_metric": f"Spearman on dev ({c.aggregation})",
        }
    seconds = {"encode": enc_seconds, "protocol": time.perf_counter() - t0,
               "search_per_split": [s.search_seconds for s in lc.splits]}
    return STSRun("search", encoder.identity, _encoder_info(encoder), _data_info(data, c.aggregation), per_layer,
                  seconds, _cache_info(encoder), protocol, lc, encoder.head_status() if c.head else "not requested")


def _header(result: STSRun) -> list[str]:
    m, d = result.model, result.data
    env = result.environment
    return [
        f"- model: `{m.name}`" + (f" ({m.hf_id})" if m.hf_id else "")
        + f", {m.model_type}, {m.n_layers} layers, hidden states 0..{m.n_layers}"
        + f" (0 = embedding output), weights sha256 `{m.weights_sha256[:16]}…`",
        f"- data: `{d.name}`, split `{d.split}`, {d.n_pairs} pairs, source `{d.source}`",
        f"- aggregation: `{d.aggregation}`",
        f"- command: `{env.get('command', '')}`",
        f"- date: {env.get('date', '')}; machine: {env.get('machine', {}).get('platform', '')}, "
        f"{env.get('machine', {}).get('cpu_count', '')} CPUs; versions: "
        + ", ".join(f"{k} {v}" for k, v in env.get("versions", {}).items()),
    ]


def _per_layer_table(per_layer: dict) -> list[str]:
    n = len(per_layer["mean"])
    lines = ["| hidden state | " + " | ".join(str(i) for i in range(n)) + " |",
             "|---|" + "---|" * n]
    for kind in per_layer:
        lines.append(f"| {kind} | " + " | ".join(f"{v:.2f}" for v in per_layer[kind]) + " |")
    return lines


def render_search_markdown(result: STSRun) -> str:
    lc, p = result.lc, result.protocol
    summ, pear = lc.summary("spearman"), lc.summary("pearson")
    # with a dev file and a test file the subset is chosen on dev and every score is the test file's
    where = "the test file's pairs" if result.data.split == "dev-test" else "all pairs"
    lines = [f"# Layer combination search: {result.model.name} on {result.data.name}", "", *_header(result),
             f"- protocol: {p['name']}; dev_size {p['dev_size']}, {p['n_splits']} splits (seeds {p['split_seeds']}), "
             f"subsets of at most {p['max_layers']} hidden states, chosen by {p['selection_metric']}",
             f"- LC + MLP: {result.lc_mlp or 'not run'}",
             "", f"## Per-layer Spearman x100 ({where})", "", *_per_layer_table(result.per_layer), "",
             "## Test Spearman x100" + ("" if p["n_splits"] == 1 else f", mean ± std over {p['n_splits']} splits"),
             "",
             "| method | Spearman | Pearson |", "|---|---|---|"]
    one = p["n_splits"] == 1  # a single split has no spread (the pages' convention): no "± 0.00"
    for method, s in summ.items():
        lines.append(f"| {METHOD_LABELS.get(method, method)} | {fmt(s['mean'], None if one else s['std'])} | "
                     f"{fmt(pear[method]['mean'], None if one else pear[method]['std'])} |")
    lines += ["", "## Chosen subsets", "",
              "| split seed | chosen hidden states | dev | test LC | test last | random subset | search s |",
              "|---|---|---|---|---|---|---|"]
    for s in lc.splits:
        lines.append(f"| {s.seed} | {tuple(s.layers)} | {s.dev_spearman:.2f} | {s.test['lc']['spearman']:.2f} | "
                     f"{s.test['last']['spearman']:.2f} | {tuple(s.poolings['random']['layers'])} | "
                     f"{s.search_seconds:.2f} |")
    sec = result.seconds
    lines += ["", f"Time: encoding {sec['encode']:.1f} s, protocol (search + scoring) {sec['protocol']:.1f} s.", ""]
    return "\n".join(lines)


def output_stem(result: STSRun) -> str:
    """``<kind>-<model>-<data>-<split>-<aggregation>-<digest>``: the digest covers the model hashes and folder,
    the data (checksum, source folder), max length, dtype and the protocol, so runs that differ in any of them
    never overwrite each other's files."""
    m, d = result.model, result.data
    key = {"model": model_key(m), "path": m.path, "data": asdict(d), "protocol": result.protocol,
           "encoder": {k: result.encoder[k] for k in ("max_length", "dtype")},
           # a torch run's stem is as before backends existed
           **({"backend": b} if (b := result.encoder.get("backend", "torch")) != "torch" else {})}
    return keyed_name(f"{result.kind}-{Path(m.name).name}-{d.name}-{d.split}-{d.aggregation}", key)


def write_search_outputs(result: STSRun, output: str | Path) -> dict[str, Path]:
    """Write ``<stem>.json``, ``.md`` and ``.png`` into ``output`` (stem: :func:`output_stem`); returns their paths."""
    out = Path(output)
    summ = result.lc.summary("spearman")
    stem = output_stem(result)
    return {
        "json": write_json(out / f"{stem}.json", result.to_dict()),
        "markdown": write_text(out / f"{stem}.md", render_search_markdown(result)),
        "plot": plot_per_layer(
            result.per_layer, out / f"{stem}.png",
            title=f"{result.model.name} on {result.data.name} ({result.data.split}, "
            f"aggregation {result.data.aggregation}); circles: hidden states chosen by LC",
            chosen=dict(Counter(l for s in result.lc.splits for l in s.layers)),
            baselines={"lc": summ["lc"]["mean"], "last": summ["last"]["mean"]},
        ),
    }


def write_layers_outputs(result: STSRun, output: str | Path) -> dict[str, Path]:
    out = Path(output)
    stem = output_stem(result)
    md = [f"# Per-layer analysis: {result.model.name} on {result.data.name}", "", *_header(result),
          "", "## Spearman x100 of each hidden state alone", "", *_per_layer_table(result.per_layer), ""]
    return {
        "json": write_json(out / f"{stem}.json", result.to_dict()),
        "markdown": write_text(out / f"{stem}.md", "\n".join(md)),
        "plot": plot_per_layer(result.per_layer, out / f"{stem}.png",
                               title=f"{result.model.name} on {result.data.name}"),
    }


def subset_from_results(path: str | os.PathLike, *, head: bool = False) -> SubsetChoice:
    """The subset a ``layerwise search`` run chose on most of its dev splits (ties: the higher mean dev score)."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"the results file {path} cannot be read as JSON ({exc}); give a results file written by "
                         "`layerwise search`") from None
    run = STSRun.from_dict(doc)
    if run.kind != "search" or run.lc is None or not run.lc.splits:
        raise ValueError(f"the results file {path} is a {run.kind!r} results file with no layer search; give one written by "
                         "`layerwise search`")
    counts = Counter(s.layers for s in run.lc.splits)
    dev = {key: sum(s.dev_spearman for s in run.lc.splits if s.layers == key) / n for key, n in counts.items()}
    layers = max(counts, key=lambda key: (counts[key], dev[key]))
    method = "lc_mlp" if head else "lc"
    summary = run.lc.summary("spearman")
    if method not in summary:
        raise ValueError(f"the results file {path} has no {method} scores (LC + MLP was not run: {run.lc_mlp}); "
                         "pass head=False")
    where = f"{run.data.name} {run.data.split}, {len(run.lc.splits)} dev/test splits of {run.lc.dev_size} dev pairs"
    scores = {f"{name} test Spearman x100 ({where})": f"{summary[name]['mean']:.2f} ± {summary[name]['std']:.2f}"
              for name in dict.fromkeys((method, "last")) if name in summary}
    return SubsetChoice(tuple(layers), counts[layers], len(run.lc.splits), run.model.weights_sha256, scores,
                        str(path))
