"""Benchmark the exact layer-subset search against the paper's "Method 2".

Three parts, all on CPU:

(a) 13 hidden states of width 768 (BERT-base / MPNet-base sized), ``--n-pairs`` pairs, all 8,191 subsets:
    ``LayerSubsetSearch().fit`` (best of ``--repeats`` runs) against ``naive_subset_scores`` (the paper's
    "Method 2": average each subset's layers, cosine, Spearman; timed once), and the largest absolute
    difference of their scores over every subset.
(b) 25 hidden states of width 1024 (BERT-large sized), subsets of at most 8 states (1,807,780 subsets):
    ``LayerSubsetSearch(max_layers=8).fit`` timed once. Method 2 is not run; its time is extrapolated
    from the per-subset time measured in (a).
(c) Real vectors: the first ``--real-pairs`` STS-B test pairs (built-in copy) encoded with all-MiniLM-L6-v2
    (7 hidden states), fast search against Method 2, if that model is installed.
(d) The data of (b), every subset of its 25 states (33,554,431 subsets), in a fresh process (spawned), so that its
    peak resident memory is the search's own (with the interpreter, the libraries and the data): time and peak
    memory, one run, with the progress bar.

Synthetic stacks (a, b): ``a ~ N(0, 1)``, ``b = 0.7 a + noise_scale * N(0, 1)`` (float32), gold scores
uniform on [0, 5] rounded to steps of 0.2 (ties, as STS gold scores have).

Usage::

    layerwise results run search-speed                                         # docs/results/search-speed.md (+ .json)
    .venv/bin/python -m layerwise.benchmarks.speed.bench_search_speed --output /tmp/s.md   # the same, outside the store

Writes the markdown file named by ``--output`` and a JSON file with the raw figures beside it.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import sys
import tempfile
import time
from math import comb
from pathlib import Path

import numpy as np
import torch

from layerwise import LayerEncoder, LayerSubsetSearch, naive_subset_scores
from layerwise.benchmarks.speed._bench import REPO, check_output, write_outputs
from layerwise.benchmarks.speed.search_speed_page import (
    AGREEMENT_TOL,
    PAPER_FAST_SECONDS,
    PAPER_METHOD2_SECONDS,
    TARGET_BASE_SECONDS,
    TARGET_BASE_SPEEDUP,
    TARGET_FULL_GB,
    TARGET_LARGE_SECONDS,
    print_summary,
    render,
)
from layerwise.data import load_sts
from layerwise.errors import ModelNotFoundError
from layerwise.methods.lc.search import count_subsets
from layerwise.reports import command_line, environment, git_state

DEFAULT_OUTPUT = REPO / "docs" / "results" / "search-speed.md"



def mean_subset_size(n_states: int, max_layers: int | None = None) -> float:
    """Average size of the non-empty subsets of ``n_states`` states with at most ``max_layers`` members."""
    k = n_states if max_layers is None else min(max_layers, n_states)
    return sum(s * comb(n_states, s) for s in range(1, k + 1)) / count_subsets(n_states, max_layers)


def peak_rss_gb() -> float:
    """Peak resident memory of this process so far (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9


def synthetic_pairs(
    n_pairs: int, n_states: int, dim: int, *, seed: int, noise_scale: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stacks ``a, b`` of shape (n_pairs, n_states, dim) float32 and gold (n_pairs,) on a 0.2 grid in [0, 5]."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n_pairs, n_states, dim), dtype=np.float32)
    b = 0.7 * a + np.float32(noise_scale) * rng.standard_normal((n_pairs, n_states, dim), dtype=np.float32)
    gold = np.round(rng.uniform(0.0, 5.0, size=n_pairs) / 0.2) * 0.2
    return a, b.astype(np.float32, copy=False), gold


def time_fast(a, b, gold, *, max_layers: int | None, repeats: int) -> tuple[list[float], list[float], LayerSubsetSearch]:
    """Wall-clock and CPU seconds (this process, every thread) of ``repeats`` fits (a fresh searcher each time), and
    the last fitted searcher. On a loaded machine wall seconds grow while CPU seconds stay about the work done."""
    times, cpu, search = [], [], None
    for _ in range(repeats):
        search = LayerSubsetSearch(max_layers=max_layers, show_progress=False)
        t0, c0 = time.perf_counter(), time.process_time()
        search.fit(a, b, gold)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return times, cpu, search


def time_naive(a, b, gold) -> tuple[float, dict[tuple[int, ...], float]]:
    t0 = time.perf_counter()
    scores = naive_subset_scores(a, b, gold)
    return time.perf_counter() - t0, scores


def agreement(search: LayerSubsetSearch, naive: dict[tuple[int, ...], float]) -> dict:
    """Largest |fast - Method 2| over every subset, and whether both chose the same best subset."""
    subsets = search.subsets_
    if len(subsets) != len(naive) or set(subsets) != set(naive):
        raise RuntimeError(
            f"the fast search scored {len(subsets)} subsets and Method 2 {len(naive)}: the subset lists differ"
        )
    ref = np.array([naive[s] for s in subsets])
    diff = np.abs(search.scores_ - ref)
    naive_best = max(naive, key=naive.get)
    return {
        "max_abs_diff": float(np.nanmax(diff)),
        "n_nan_fast": int(np.isnan(search.scores_).sum()),
        "n_nan_method2": int(np.isnan(ref).sum()),
        "fast_best_layers": list(search.best_layers_),
        "fast_best_score": search.best_score_,
        "method2_best_layers": list(naive_best),
        "method2_best_score": naive[naive_best],
        "same_best": tuple(search.best_layers_) == tuple(naive_best),
    }


def compare(a, b, gold, *, repeats: int) -> dict:
    """Fast search (``repeats`` runs) and Method 2 (one run) on all subsets, with their agreement."""
    fast_times, fast_cpu, search = time_fast(a, b, gold, max_layers=None, repeats=repeats)
    naive_time, naive = time_naive(a, b, gold)
    best = min(fast_times)
    agree = agreement(search, naive)
    return {
        "n_pairs": int(a.shape[0]),
        "n_states": int(a.shape[1]),
        "dim": int(a.shape[2]),
        "n_subsets": len(naive),
        "mean_subset_size": mean_subset_size(a.shape[1]),
        "fast_seconds_runs": fast_times,
        "fast_cpu_seconds_runs": fast_cpu,
        "fast_seconds_best": best,
        "method2_seconds": naive_time,
        "method2_seconds_per_subset": naive_time / len(naive),
        "speedup": naive_time / best,
        "agreement": agree,
        "agreement_pass": bool(agree["max_abs_diff"] <= AGREEMENT_TOL),
    }


def run_base(args) -> dict:
    a, b, gold = synthetic_pairs(
        args.n_pairs, args.base_states, args.base_dim, seed=args.seed, noise_scale=args.noise_scale
    )
    res = compare(a, b, gold, repeats=args.repeats)
    res["seed"] = args.seed
    res["time_pass"] = bool(res["fast_seconds_best"] <= TARGET_BASE_SECONDS)
    res["speedup_pass"] = bool(res["speedup"] >= TARGET_BASE_SPEEDUP)
    res["peak_rss_gb_so_far"] = peak_rss_gb()
    return res


def run_large(args, method2_seconds_per_subset: float | None) -> dict:
    a, b, gold = synthetic_pairs(
        args.n_pairs, args.large_states, args.large_dim, seed=args.seed_large, noise_scale=args.noise_scale
    )
    times, cpu, search = time_fast(a, b, gold, max_layers=args.large_max_layers, repeats=1)
    n_subsets = len(search.scores_)
    expected = count_subsets(args.large_states, args.large_max_layers)
    if n_subsets != expected:
        raise RuntimeError(f"the search scored {n_subsets} subsets, expected {expected}")
    res = {
        "n_pairs": args.n_pairs,
        "n_states": args.large_states,
        "dim": args.large_dim,
        "max_layers": args.large_max_layers,
        "n_subsets": n_subsets,
        "mean_subset_size": mean_subset_size(args.large_states, args.large_max_layers),
        "seed": args.seed_large,
        "fast_seconds": times[0],
        "fast_cpu_seconds": cpu[0],
        "time_pass": bool(times[0] <= TARGET_LARGE_SECONDS),
        "best_layers": list(search.best_layers_),
        "best_score": search.best_score_,
        "peak_rss_gb_so_far": peak_rss_gb(),
    }
    if method2_seconds_per_subset is not None:
        est = method2_seconds_per_subset * n_subsets
        res["method2_seconds_extrapolated"] = est
        res["speedup_extrapolated"] = est / times[0]
    return res


def _full_child(args) -> dict:
    """(d) in the spawned process: the search of every subset, its time and the process's peak memory."""
    a, b, gold = synthetic_pairs(
        args.n_pairs, args.large_states, args.large_dim, seed=args.seed_large, noise_scale=args.noise_scale
    )
    data_gb = (a.nbytes + b.nbytes) / 1e9
    rss_before = peak_rss_gb()
    t0, c0 = time.perf_counter(), time.process_time()
    search = LayerSubsetSearch(max_layers=args.large_states, show_progress=True).fit(a, b, gold)
    seconds = time.perf_counter() - t0
    return {"n_subsets": len(search.scores_), "fast_seconds": seconds, "fast_cpu_seconds": time.process_time() - c0,
            "data_gb": data_gb,
            "peak_rss_gb_before_search": rss_before, "peak_rss_gb": peak_rss_gb(),
            "best_layers": list(search.best_layers_), "best_score": search.best_score_}


def run_full(args) -> dict:
    """(d): every subset of (b)'s states, in a spawned process (its peak memory is the search's)."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        res = pool.apply(_full_child, (args,))
    expected = count_subsets(args.large_states)
    if res["n_subsets"] != expected:
        raise RuntimeError(f"the search scored {res['n_subsets']} subsets, expected {expected}")
    res.update(n_pairs=args.n_pairs, n_states=args.large_states, dim=args.large_dim, seed=args.seed_large,
               memory_pass=bool(res["peak_rss_gb"] <= TARGET_FULL_GB))
    return res


def run_real(args) -> dict:
    """Fast vs Method 2 on real all-MiniLM-L6-v2 stacks; ``{"skipped": reason}`` if the model is missing."""
    try:
        with tempfile.TemporaryDirectory(prefix="bench-search-cache-") as tmp:
            cache_dir = args.cache_dir if args.cache_dir is not None else tmp
            enc = LayerEncoder(args.model, cache_dir=cache_dir, show_progress=False)
            data = load_sts("stsb", split="test")
            n = min(args.real_pairs, len(data))
            data = data.take(np.arange(n))
            t0 = time.perf_counter()
            a = enc.encode(data.sentences1).mean
            b = enc.encode(data.sentences2).mean
            encode_seconds = time.perf_counter() - t0
    except ModelNotFoundError as err:
        return {"skipped": str(err)}
    res = compare(a, b, data.scores, repeats=args.repeats)
    res.update(
        model=enc.identity.to_dict(),
        data=f"STS-B {data.split} (built-in copy), first {n} pairs, mean pooling",
        encode_seconds=encode_seconds,
        encode_cache=str(args.cache_dir) if args.cache_dir is not None else "temporary directory",
    )
    return res


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n-pairs", type=int, default=1000, help="pairs in the synthetic data (a) and (b)")
    ap.add_argument("--base-states", type=int, default=13, help="hidden states in (a)")
    ap.add_argument("--base-dim", type=int, default=768, help="vector width in (a)")
    ap.add_argument("--large-states", type=int, default=25, help="hidden states in (b)")
    ap.add_argument("--large-dim", type=int, default=1024, help="vector width in (b)")
    ap.add_argument("--large-max-layers", type=int, default=8, help="largest subset size in (b)")
    ap.add_argument("--noise-scale", type=float, default=1.0, help="b = 0.7 a + noise_scale * N(0, 1)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the synthetic data in (a)")
    ap.add_argument("--seed-large", type=int, default=1, help="seed of the synthetic data in (b)")
    ap.add_argument("--repeats", type=int, default=3, help="runs of the fast search in (a) and (c); best is reported")
    ap.add_argument("--model", default="all-MiniLM-L6-v2", help="encoder for the real-data part (c)")
    ap.add_argument("--real-pairs", type=int, default=1000, help="first STS-B test pairs used in (c)")
    ap.add_argument("--cache-dir", type=Path, default=None, help="layer cache for (c); default: a temporary folder")
    ap.add_argument("--skip-large", action="store_true", help="skip (b) (about two minutes)")
    ap.add_argument("--skip-real", action="store_true", help="skip (c)")
    ap.add_argument("--skip-full", action="store_true", help="skip (d) (minutes)")
    ap.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="markdown file; the JSON goes beside it")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    check_output(args.output)  # a file there that layerwise did not write: refused before measuring
    t_start = time.perf_counter()
    result: dict = {
        "environment": environment(command_line()),
        "parameters": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k != "output"},
        "targets": {
            "base_fast_seconds": TARGET_BASE_SECONDS,
            "base_speedup": TARGET_BASE_SPEEDUP,
            "large_fast_seconds": TARGET_LARGE_SECONDS,
            "full_peak_rss_gb": TARGET_FULL_GB,
            "agreement_max_abs_diff": AGREEMENT_TOL,
        },
        "paper": {"fast_seconds": PAPER_FAST_SECONDS, "method2_seconds": PAPER_METHOD2_SECONDS,
                  "machine": "18-core desktop (the paper's)"},
    }
    result["environment"]["machine"]["torch_threads"] = torch.get_num_threads()
    result["environment"]["machine"]["load_average_start"] = list(os.getloadavg())
    result["environment"]["git"] = git_state(REPO)
    result["base"] = run_base(args)
    print_summary({"base": result["base"]})
    if not args.skip_large:
        result["large"] = run_large(args, result["base"]["method2_seconds_per_subset"])
        print_summary({"large": result["large"]})
    if not args.skip_real:
        result["real"] = run_real(args)
        print_summary({"real": result["real"]})
    if not args.skip_full:
        result["full"] = run_full(args)
        print_summary({"full": result["full"]})
    result["total_seconds"] = time.perf_counter() - t_start
    write_outputs(result, args.output, render)
    return 0


if __name__ == "__main__":
    sys.exit(main())
