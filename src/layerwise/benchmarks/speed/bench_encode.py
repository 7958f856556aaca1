"""Benchmark encoding speed: the layer-stack encoder against sentence-transformers, and the layer cache.

1. ``LayerEncoder(model, batch_size=B, cache_dir=False).encode`` (every hidden state, mean and CLS pooled)
   against ``SentenceTransformer(<the same model folder>, device="cpu").encode(sentences, batch_size=B)``
   with the same sentences, batch size and maximum length. Both are warmed up on ``--warmup`` sentences,
   then run ``--repeats`` times each in alternating order; the best run of each is compared. The last
   layer's mean, L2-normalised, is checked against sentence-transformers' embedding (the all-* models end
   with a Normalize module).
2. The cached path: ``LayerEncoder(model, cache_dir=<temporary folder>)`` encodes the sentences once (cold:
   computes and writes the cache) and again (hot: reads the cache).

Sentences: the first ``--n-sentences`` distinct sentences of the built-in STS-B copy, test split then dev
split, in file order (sentence 1 then sentence 2 of each pair).

Usage::

    .venv/bin/python -m layerwise.benchmarks.speed.bench_encode                                   # docs/results/encoding.md
    .venv/bin/python -m layerwise.benchmarks.speed.bench_encode --model all-mpnet-base-v2 --n-sentences 500 \\
        --output docs/results/encoding-mpnet.md

Writes the markdown file named by ``--output`` and a JSON file with the raw figures beside it.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from layerwise import LayerEncoder
from layerwise.benchmarks.speed._bench import REPO, check_output, pass_fail, write_outputs
from layerwise.data import load_sts
from layerwise.reports import command_line, environment, git_state, run_section

DEFAULT_OUTPUT = REPO / "docs" / "results" / "encoding.md"


TARGET_RATIO = 1.0  # layerwise sentences/s divided by sentence-transformers sentences/s


def stsb_sentences(n: int) -> list[str]:
    """The first ``n`` distinct sentences of STS-B test then dev (sentence 1, sentence 2 of each pair)."""
    seen: dict[str, None] = {}
    for split in ("test", "dev"):
        data = load_sts("stsb", split=split)
        for s1, s2 in zip(data.sentences1, data.sentences2):
            seen.setdefault(s1)
            seen.setdefault(s2)
    sentences = list(seen)
    if len(sentences) < n:
        raise ValueError(f"STS-B test+dev has only {len(sentences)} distinct sentences, asked for {n}")
    return sentences[:n]


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def compare_with_st(args, sentences: list[str]) -> dict:
    from sentence_transformers import SentenceTransformer

    enc = LayerEncoder(
        args.model, batch_size=args.batch_size, max_length=args.max_length, cache_dir=False, show_progress=False
    )
    st = SentenceTransformer(enc.identity.path, device="cpu")
    st.max_seq_length = enc.max_length

    def run_lw():
        return enc.encode(sentences)

    def run_st():
        return st.encode(sentences, batch_size=args.batch_size, show_progress_bar=False, convert_to_numpy=True)

    warm = sentences[: args.warmup]
    enc.encode(warm)
    st.encode(warm, batch_size=args.batch_size, show_progress_bar=False)

    runs: dict[str, list[float]] = {"layerwise": [], "sentence_transformers": []}
    order_log = []
    stack = emb = None
    for r in range(args.repeats):
        order = ["layerwise", "sentence_transformers"] if r % 2 == 0 else ["sentence_transformers", "layerwise"]
        order_log.append(order)
        for name in order:
            if name == "layerwise":
                seconds, stack = timed(run_lw)
            else:
                seconds, emb = timed(run_st)
            runs[name].append(seconds)
            print(f"  run {r + 1} {name}: {seconds:.2f} s ({len(sentences) / seconds:.1f} sentences/s)")

    last = stack.mean[:, -1, :].astype(np.float64)
    last /= np.maximum(np.linalg.norm(last, axis=1, keepdims=True), 1e-12)
    st_norms = np.linalg.norm(emb, axis=1)
    n = len(sentences)
    best_lw, best_st = min(runs["layerwise"]), min(runs["sentence_transformers"])
    ratio = (n / best_lw) / (n / best_st)
    return {
        "model": enc.identity.to_dict(),
        "st_modules": [type(m).__name__ for m in st],
        "st_max_seq_length": st.max_seq_length,
        "encoder_max_length": enc.max_length,
        "n_states": enc.n_states,
        "stack_shape": list(stack.mean.shape),
        "order": order_log,
        "seconds_runs": runs,
        "seconds_best": {"layerwise": best_lw, "sentence_transformers": best_st},
        "sentences_per_second_best": {"layerwise": n / best_lw, "sentence_transformers": n / best_st},
        "ratio": ratio,
        "ratio_pass": bool(ratio >= TARGET_RATIO),
        "last_layer_max_abs_diff": float(np.abs(last - emb.astype(np.float64)).max()),
        "st_embedding_norm_range": [float(st_norms.min()), float(st_norms.max())],
    }


def cached_runs(args, sentences: list[str]) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-encode-cache-") as tmp:
        root = Path(args.cache_dir) if args.cache_dir is not None else Path(tmp)
        enc = LayerEncoder(
            args.model, batch_size=args.batch_size, max_length=args.max_length, cache_dir=root, show_progress=False
        )
        stored_before = len(enc.cache)
        cold, first = timed(lambda: enc.encode(sentences))
        hot, second = timed(lambda: enc.encode(sentences))
        same = float(np.abs(first.mean - second.mean).max())
    n = len(sentences)
    print(f"  cached: cold {cold:.2f} s, hot {hot:.3f} s ({n / hot:.0f} sentences/s)")
    return {
        "cache_dir": str(args.cache_dir) if args.cache_dir is not None else "temporary directory",
        "stored_before": stored_before,
        "cold_seconds": cold,
        "hot_seconds": hot,
        "cold_sentences_per_second": n / cold,
        "hot_sentences_per_second": n / hot,
        "hot_vs_cold_max_abs_diff": same,
    }


# -- report -----------------------------------------------------------------------------------------


def render(result: dict) -> str:
    env, p, cmp_ = result["environment"], result["parameters"], result["compare"]
    ident = cmp_["model"]
    n = result["n_sentences"]
    lw_runs = ", ".join(f"{t:.2f}" for t in cmp_["seconds_runs"]["layerwise"])
    st_runs = ", ".join(f"{t:.2f}" for t in cmp_["seconds_runs"]["sentence_transformers"])
    sps = cmp_["sentences_per_second_best"]
    return "\n".join(
        [
            f"# Encoding speed: layerwise vs sentence-transformers ({ident['name']})",
            "",
            "Generated by `python -m layerwise.benchmarks.speed.bench_encode`; every number below is measured by that script in the run",
            "described here (none is typed by hand).",
            "",
            f"Target: layerwise's `LayerEncoder` (every hidden state, mean and CLS pooled) encodes at least "
            f"{TARGET_RATIO:g} times as many sentences per second as sentence-transformers' `SentenceTransformer.encode` "
            "(last layer only) on the same model, sentences, batch size and maximum length.",
            "",
            f"Model `{ident['name']}` ({ident['hf_id']}), folder `{ident['path']}`, weights sha256 "
            f"`{ident['weights_sha256']}`; {ident['n_layers']} layers, {cmp_['n_states']} hidden states, "
            f"d = {ident['hidden_size']}. Sentence-transformers modules: {', '.join(cmp_['st_modules'])}.",
            "",
            f"{n:,} distinct sentences from the built-in STS-B (test then dev split), batch size {p['batch_size']}, "
            f"max length {cmp_['encoder_max_length']} tokens for both (`st_model.max_seq_length = "
            f"{cmp_['st_max_seq_length']}`). Both warmed up on {p['warmup']} sentences; {p['repeats']} runs each, "
            "alternating which goes first; the best run is compared.",
            "",
            "## Uncached encoding",
            "",
            "| | best (s) | sentences/s (best) | runs (s) |",
            "|---|---:|---:|---|",
            f"| layerwise `LayerEncoder(cache_dir=False)`, {cmp_['n_states']} hidden states | "
            f"{cmp_['seconds_best']['layerwise']:.2f} | {sps['layerwise']:.1f} | {lw_runs} |",
            f"| sentence-transformers `encode` | {cmp_['seconds_best']['sentence_transformers']:.2f} | "
            f"{sps['sentence_transformers']:.1f} | {st_runs} |",
            "",
            f"- Ratio (layerwise / sentence-transformers, sentences/s): **{cmp_['ratio']:.3f}**, target >= "
            f"{TARGET_RATIO:g}: **{pass_fail(cmp_['ratio_pass'])}**.",
            f"- Run order: {'; '.join(' then '.join(o) for o in cmp_['order'])}.",
            f"- Agreement: max |L2-normalised last-layer mean - sentence-transformers embedding| = "
            f"{cmp_['last_layer_max_abs_diff']:.2e} (sentence-transformers' embedding norms "
            f"{cmp_['st_embedding_norm_range'][0]:.6f}..{cmp_['st_embedding_norm_range'][1]:.6f}).",
            "",
            *_cached_section(result["cached"], n),
            *run_section(env, p, result["total_seconds"]),
        ]
    )


def _cached_section(cache: dict, n: int) -> list[str]:
    """The page's section on the layer cache: the same sentences encoded cold, then read hot."""
    cached_note = ("(the cache already held sentences, so the first run was not fully cold)" if cache["stored_before"]
                   else "(empty cache before the first run)")
    return [
        "## Cached encoding",
        "",
        f"`LayerEncoder(model, cache_dir=<temporary folder>)`, the same {n:,} sentences encoded twice {cached_note}.",
        "",
        "| | seconds | sentences/s |",
        "|---|---:|---:|",
        f"| cold (encode and write the cache) | {cache['cold_seconds']:.2f} | {cache['cold_sentences_per_second']:.1f} |",
        f"| hot (read the cache) | {cache['hot_seconds']:.3f} | {cache['hot_sentences_per_second']:,.0f} |",
        "",
        f"- Hot vs cold stacks: max abs difference {cache['hot_vs_cold_max_abs_diff']:.1e}.",
        "",
    ]


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="all-MiniLM-L6-v2", help="built-in model name or local model folder")
    ap.add_argument("--n-sentences", type=int, default=2000, help="distinct STS-B sentences to encode")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--max-length", type=int, default=256, help="tokens per sentence, for both encoders")
    ap.add_argument("--warmup", type=int, default=64, help="sentences encoded once by each before timing")
    ap.add_argument("--repeats", type=int, default=2, help="timed runs of each encoder, alternating order")
    ap.add_argument("--cache-dir", type=Path, default=None, help="cache for the cached runs; default: a temporary folder")
    ap.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="markdown file; the JSON goes beside it")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    check_output(args.output)  # a file there that layerwise did not write: refused before measuring
    import sentence_transformers
    import tokenizers

    t_start = time.perf_counter()
    env = environment(command_line())
    env["machine"]["torch_threads"] = torch.get_num_threads()
    env["machine"]["load_average_start"] = list(os.getloadavg())
    env["git"] = git_state(REPO)
    env["versions"]["sentence_transformers"] = sentence_transformers.__version__
    env["versions"]["tokenizers"] = tokenizers.__version__
    sentences = stsb_sentences(args.n_sentences)
    print(f"{args.model}: {len(sentences)} sentences, batch size {args.batch_size}")
    result = {
        "environment": env,
        "parameters": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k != "output"},
        "target_ratio": TARGET_RATIO,
        "n_sentences": len(sentences),
        "compare": compare_with_st(args, sentences),
    }
    cmp_ = result["compare"]
    print(
        f"  best: layerwise {cmp_['sentences_per_second_best']['layerwise']:.1f} sentences/s, "
        f"sentence-transformers {cmp_['sentences_per_second_best']['sentence_transformers']:.1f} sentences/s, "
        f"ratio {cmp_['ratio']:.3f} [{pass_fail(cmp_['ratio_pass'])}], "
        f"last-layer max abs diff {cmp_['last_layer_max_abs_diff']:.2e}"
    )
    result["cached"] = cached_runs(args, sentences)
    result["total_seconds"] = time.perf_counter() - t_start
    write_outputs(result, args.output, render)
    return 0


if __name__ == "__main__":
    sys.exit(main())
