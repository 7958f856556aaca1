"""End-to-end runs behind the CLI: encode a data set once, analyse layers, search layer subsets, write results.

Each function here is public and free of CLI logic; ``layerwise.cli`` only parses arguments and calls them.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from pathlib import Path

import numpy as np

from layerwise.data import load_sts
from layerwise.data.checksum import content_checksum
from layerwise.experiments.store import key_digest, model_key
from layerwise.encoders.layer_encoder import LayerEncoder
from layerwise.methods.lc.protocol import run_bert_lc
from layerwise.evaluation.sts import per_layer_scores
from layerwise.layers import LayerStack
from layerwise.reports import environment, fmt, plot_per_layer, write_json, write_text

logger = logging.getLogger(__name__)

__all__ = ["encode_pairs", "run_layers", "run_search", "write_search_outputs", "write_layers_outputs"]

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


def _data_info(data, aggregation: str) -> dict:
    return {
        "name": data.name,
        "split": data.split,
        "source": data.source,
        "checksum": content_checksum(data),
        "n_pairs": len(data),
        "subsets": {s: int((np.asarray(data.subsets) == s).sum()) for s in data.subset_names},
        "aggregation": aggregation,
    }


def _load(model, dataset, data_dir, split, encoder_options):
    data = load_sts(dataset, data_dir=data_dir, split=split)
    encoder = LayerEncoder(model, **(encoder_options or {}))
    return data, encoder


def run_layers(
    model: str = "all-MiniLM-L6-v2",
    dataset: str = "stsb",
    *,
    data_dir=None,
    split: str | None = None,
    aggregation: str = "all",
    encoder_options: dict | None = None,
) -> dict:
    """Per-layer analysis: Spearman of each hidden state alone (mean and CLS pooling) on all pairs."""
    data, encoder = _load(model, dataset, data_dir, split, encoder_options)
    s1, s2, enc_seconds = encode_pairs(encoder, data)
    groups = np.asarray(data.subsets)
    return {
        "kind": "layers",
        "model": encoder.identity.to_dict(),
        "encoder": {"max_length": encoder.max_length, "dtype": encoder.dtype, "batch_size": encoder.batch_size},
        "data": _data_info(data, aggregation),
        "per_layer": per_layer_scores(s1, s2, data.scores, groups=groups, aggregation=aggregation),
        "seconds": {"encode": enc_seconds},
        "cache": _cache_info(encoder),
    }


def run_search(
    model: str = "all-MiniLM-L6-v2",
    dataset: str = "stsb",
    *,
    data_dir=None,
    split: str | None = None,
    aggregation: str = "all",
    n_splits: int = 5,
    dev_size: int = 350,
    seed: int = 0,
    max_layers: int | None = None,
    head: bool = True,
    encoder_options: dict | None = None,
) -> dict:
    """BERT-LC on one STS data set: per-layer scores, then the dev/test protocol with baselines.

    ``head=True`` also reports LC + MLP where the checkpoint has a trained pooler head (``result["lc_mlp"]``
    says whether it ran and why not)."""
    data, encoder = _load(model, dataset, data_dir, split, encoder_options)
    s1, s2, enc_seconds = encode_pairs(encoder, data)
    groups = np.asarray(data.subsets)
    per_layer = per_layer_scores(s1, s2, data.scores, groups=groups, aggregation=aggregation)
    t0 = time.perf_counter()
    lc = run_bert_lc(
        s1, s2, data.scores, groups=groups, aggregation=aggregation,
        n_splits=n_splits, dev_size=dev_size, seed=seed, max_layers=max_layers,
        head=encoder.pooler_head()[:2] if head and encoder.identity.pooler_trained else None,
    )
    protocol_seconds = time.perf_counter() - t0
    return {
        "kind": "search",
        "model": encoder.identity.to_dict(),
        "encoder": {"max_length": encoder.max_length, "dtype": encoder.dtype, "batch_size": encoder.batch_size},
        "data": _data_info(data, aggregation),
        "protocol": {
            "name": "BERT-LC (Hosseini et al. 2023): pool all pairs, shuffle, first dev_size pairs dev, rest test",
            "n_splits": n_splits,
            "dev_size": dev_size,
            "seed": seed,
            "split_seeds": [seed + k for k in range(n_splits)],
            "max_layers": lc.max_layers,
            "selection_metric": f"Spearman on dev ({aggregation})",
        },
        "per_layer": per_layer,
        "lc": lc.to_dict(),
        "lc_mlp": encoder.head_status() if head else "not requested",
        "cache": _cache_info(encoder),
        "seconds": {
            "encode": enc_seconds,
            "protocol": protocol_seconds,
            "search_per_split": [s.search_seconds for s in lc.splits],
        },
    }


def _header(result: dict) -> list[str]:
    m, d = result["model"], result["data"]
    env = result.get("environment", {})
    return [
        f"- model: `{m['name']}`" + (f" ({m['hf_id']})" if m.get("hf_id") else "")
        + f", {m['model_type']}, {m['n_layers']} layers, hidden states 0..{m['n_layers']}"
        + f" (0 = embedding output), weights sha256 `{m['weights_sha256'][:16]}…`",
        f"- data: `{d['name']}`, split `{d['split']}`, {d['n_pairs']} pairs, source `{d['source']}`",
        f"- aggregation: `{d['aggregation']}`",
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


def render_search_markdown(result: dict) -> str:
    lc = result["lc"]
    summ = lc["summary"]["spearman"]
    lines = [f"# Layer combination search: {result['model']['name']} on {result['data']['name']}", ""]
    lines += _header(result)
    p = result["protocol"]
    lines += [
        f"- protocol: {p['name']}; dev_size {p['dev_size']}, {p['n_splits']} splits (seeds {p['split_seeds']}), "
        f"subsets of at most {p['max_layers']} hidden states, chosen by {p['selection_metric']}",
        f"- LC + MLP: {result.get('lc_mlp', 'not run')}",
        "",
        "## Per-layer Spearman x100 (all pairs)",
        "",
        *_per_layer_table(result["per_layer"]),
        "",
        f"## Test Spearman x100, mean ± std over {p['n_splits']} splits",
        "",
        "| method | Spearman | Pearson |",
        "|---|---|---|",
    ]
    pear = lc["summary"]["pearson"]
    for method, s in summ.items():
        lines.append(f"| {METHOD_LABELS.get(method, method)} | {fmt(s['mean'], s['std'])} | "
                     f"{fmt(pear[method]['mean'], pear[method]['std'])} |")
    lines += ["", "## Chosen subsets", "", "| split seed | chosen hidden states | dev | test LC | test last | random subset | search s |",
              "|---|---|---|---|---|---|---|"]
    for s in lc["splits"]:
        lines.append(
            f"| {s['seed']} | {tuple(s['layers'])} | {s['dev_spearman']:.2f} | {s['test']['lc']['spearman']:.2f} | "
            f"{s['test']['last']['spearman']:.2f} | {tuple(s['poolings']['random']['layers'])} | {s['search_seconds']:.2f} |"
        )
    sec = result["seconds"]
    lines += ["", f"Time: encoding {sec['encode']:.1f} s, protocol (search + scoring) {sec['protocol']:.1f} s.", ""]
    return "\n".join(lines)


def _chosen_counts(result: dict) -> dict[int, int]:
    return dict(Counter(l for s in result["lc"]["splits"] for l in s["layers"]))


def output_stem(result: dict) -> str:
    """``<kind>-<model>-<data>-<split>-<aggregation>-<digest>``: the digest covers the model hashes, the data
    (checksum, source folder), max length, dtype and the protocol, so runs that differ in any of them never
    overwrite each other's files."""
    m, d = result["model"], result["data"]
    key = {"model": model_key(_Identity(m)), "path": m.get("path"), "data": d, "encoder":
           {k: result["encoder"][k] for k in ("max_length", "dtype")}, "protocol": result.get("protocol")}
    return (f"{result['kind']}-{Path(m['name']).name}-{d['name']}-{d['split']}-{d['aggregation']}-"
            f"{key_digest(key)[:8]}")


class _Identity:
    def __init__(self, d: dict):
        self.__dict__.update({k: d.get(k) for k in ("name", "weights_sha256", "tokenizer_sha256", "config_sha256")})


def write_search_outputs(result: dict, output: str | Path) -> dict[str, Path]:
    """Write ``<stem>.json``, ``.md`` and ``.png`` into ``output`` (stem: :func:`output_stem`); returns their paths."""
    out = Path(output)
    summ = result["lc"]["summary"]["spearman"]
    stem = output_stem(result)
    paths = {
        "json": write_json(out / f"{stem}.json", result),
        "markdown": write_text(out / f"{stem}.md", render_search_markdown(result)),
        "plot": plot_per_layer(
            result["per_layer"], out / f"{stem}.png",
            title=f"{result['model']['name']} on {result['data']['name']} ({result['data']['split']}, "
            f"aggregation {result['data']['aggregation']}); circles: hidden states chosen by LC",
            chosen=_chosen_counts(result),
            baselines={"lc": summ["lc"]["mean"], "last": summ["last"]["mean"]},
        ),
    }
    return paths


def write_layers_outputs(result: dict, output: str | Path) -> dict[str, Path]:
    out = Path(output)
    stem = output_stem(result)
    md = [f"# Per-layer analysis: {result['model']['name']} on {result['data']['name']}", "", *_header(result),
          "", "## Spearman x100 of each hidden state alone", "", *_per_layer_table(result["per_layer"]), ""]
    return {
        "json": write_json(out / f"{stem}.json", result),
        "markdown": write_text(out / f"{stem}.md", "\n".join(md)),
        "plot": plot_per_layer(result["per_layer"], out / f"{stem}.png",
                               title=f"{result['model']['name']} on {result['data']['name']}"),
    }


def add_environment(result: dict, command: list[str] | None = None) -> dict:
    result["environment"] = environment(command)
    return result
