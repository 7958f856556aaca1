"""Every hidden state through ONNX Runtime: speed against torch and sentence-transformers, and what int8 costs.

In one process and one run, on the same sentences, batch size, maximum length and threads (torch and
onnxruntime alike):

1. ``LayerEncoder(model, backend=B, cache_dir=False).encode`` for B in torch, onnx (fp32 graph), onnx-int8 and
   openvino (the fp32 graph through OpenVINO) (every hidden state, mean and CLS pooled, and the pooler), against ``SentenceTransformer(<the same
   folder>).encode`` (the last layer only). Each is warmed up, then timed ``repeats`` times in rotating order; the
   best pass of each is compared, as ratios of sentences per second (absolute times depend on the machine's load;
   the ratios much less).
2. Agreement on those sentences: the fp32 graph against torch (max abs difference over every state, mean and
   CLS), the int8 graph's relative error per vector.
3. Quality: STS-B dev Spearman x100 of the last layer's mean (cosine) with each backend, and of
   sentence-transformers' embedding. Goal: int8 within 0.5 of torch fp32.

The ONNX graphs are exported (or taken from ``$LAYERWISE_HOME/onnx``) before anything is timed.

Run as ``layerwise results run onnx`` (the page ``docs/results/onnx.md``; ``--redo '*'`` measures again) or
``python -m layerwise.benchmarks.speed.bench_onnx [--redo]`` (the same, into the committed store).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from layerwise import LayerEncoder
from layerwise.benchmarks.page_parts import provenance_lines, run_record, sts_checksum
from layerwise.benchmarks.registry import PageContext, ResultsPage, register
from layerwise.benchmarks.speed._bench import REPO, pass_fail
from layerwise.benchmarks.speed.bench_encode import stsb_sentences
from layerwise.benchmarks.store import Part, ResultsStore
from layerwise.data import load_sts
from layerwise.encoders.registry import layerwise_home
from layerwise.evaluation.sts import sts_scores
from layerwise.keys import model_key
from layerwise.reports import write_text

logger = logging.getLogger(__name__)

__all__ = ["OnnxBenchConfig", "PAGE", "measure", "render"]

NAME = "onnx"
TITLE = "Every hidden state through ONNX Runtime: speed and int8 quality"
BACKENDS = ("torch", "onnx", "onnx-int8", "openvino")  # those timed (openvino where the config keeps it)
TARGET_INT8_VS_ST = 2.0  # int8, every state, sentences/s over sentence-transformers' encode (last layer only)
TARGET_FP32_VS_TORCH = 1.0  # the fp32 graph no slower than torch
TARGET_SPEARMAN_GAP = 0.5  # int8 STS-B dev Spearman x100 within this of torch fp32


@dataclass(frozen=True)
class OnnxBenchConfig:
    model: str = "all-MiniLM-L6-v2"
    n_sentences: int = 1000  # distinct STS-B test+dev sentences timed
    batch_size: int = 32
    threads: int = 2  # torch's and onnxruntime's intra-op threads
    max_length: int = 256
    repeats: int = 3  # timed passes of each encoder, in rotating order
    warmup: int = 64  # sentences each encoder encodes before the timing
    dev_pairs: int | None = None  # STS-B dev pairs scored (None: all 1,500; the tests take a few)
    openvino: bool = True  # time the fp32 graph through OpenVINO too (needs `pip install 'layerwise[openvino]'`)


def _backends(config: OnnxBenchConfig) -> tuple[str, ...]:
    return BACKENDS if config.openvino else BACKENDS[:-1]


def _encoders(config: OnnxBenchConfig) -> tuple[dict, object]:
    from sentence_transformers import SentenceTransformer

    encoders = {b: LayerEncoder(config.model, batch_size=config.batch_size, max_length=config.max_length,
                                cache_dir=False, show_progress=False, backend=b) for b in _backends(config)}
    st = SentenceTransformer(str(encoders["torch"].identity.path), device="cpu")
    st.max_seq_length = encoders["torch"].max_length
    return encoders, st


def _encode_fn(name: str, encoders: dict, st, batch_size: int):
    if name == "sentence-transformers":
        return lambda texts: st.encode(texts, batch_size=batch_size, show_progress_bar=False, convert_to_numpy=True)
    return encoders[name].encode


def _time(config: OnnxBenchConfig, fns: dict, sentences: list[str]) -> tuple[dict, dict, list]:
    for fn in fns.values():
        fn(sentences[: config.warmup])
    runs: dict[str, list[float]] = {name: [] for name in fns}
    outputs, orders = {}, []
    names = list(fns)
    for r in range(config.repeats):
        order = names[r % len(names):] + names[: r % len(names)]
        orders.append(order)
        for name in order:
            t0 = time.perf_counter()
            outputs[name] = fns[name](sentences)
            runs[name].append(time.perf_counter() - t0)
            print(f"  pass {r + 1} {name}: {runs[name][-1]:.2f} s")
    return runs, outputs, orders


def _agreement(outputs: dict) -> dict:
    ref, fp32, int8 = outputs["torch"], outputs["onnx"], outputs["onnx-int8"]
    ov = outputs.get("openvino")

    def rel(a, b):
        return np.linalg.norm(a - b, axis=-1) / np.linalg.norm(b, axis=-1)

    last = ref.mean[:, -1] / np.linalg.norm(ref.mean[:, -1], axis=1, keepdims=True)
    return {
        "fp32_max_abs_diff": {"mean": float(np.abs(fp32.mean - ref.mean).max()),
                              "cls": float(np.abs(fp32.cls - ref.cls).max())},
        "int8_relative_error": {"mean_max": float(rel(int8.mean, ref.mean).max()),
                                "mean_median": float(np.median(rel(int8.mean, ref.mean))),
                                "cls_max": float(rel(int8.cls, ref.cls).max())},
        "st_vs_torch_last_layer_max_abs_diff": float(np.abs(last - outputs["sentence-transformers"]).max()),
        **({} if ov is None else {"openvino_max_abs_diff": {"mean": float(np.abs(ov.mean - ref.mean).max()),
                                                            "cls": float(np.abs(ov.cls - ref.cls).max())}}),
    }


def _quality(fns: dict, data_dir, n_pairs: int | None) -> dict:
    dev = load_sts("stsb", split="dev", data_dir=data_dir)
    if n_pairs is not None:
        dev = dev.take(np.arange(min(n_pairs, len(dev.scores))))
    out = {"data": {"name": "stsb", "split": "dev", "pairs": len(dev.scores), "checksum": sts_checksum(dev)}}
    for name, fn in fns.items():
        a, b = fn(dev.sentences1), fn(dev.sentences2)
        if name != "sentence-transformers":
            a, b = a.mean[:, -1], b.mean[:, -1]
        out[name] = sts_scores(a, b, dev.scores)["spearman"]
        print(f"  STS-B dev Spearman, {name}: {out[name]:.2f}")
    return out


def _versions(config: OnnxBenchConfig) -> dict:
    """The runtimes' versions (the run record has torch's and transformers')."""
    import onnx
    import onnxruntime
    import sentence_transformers

    out = {"onnxruntime": onnxruntime.__version__, "onnx": onnx.__version__,
           "sentence_transformers": sentence_transformers.__version__}
    if config.openvino:
        import openvino

        out["openvino"] = openvino.__version__
    return out


def measure(config: OnnxBenchConfig, data_dir=None) -> dict:
    """Time every encoder on the same sentences, check agreement and STS-B dev quality; a JSON-ready dict."""
    torch.set_num_threads(config.threads)  # before the encoders: their onnxruntime sessions take torch's count
    t0 = time.perf_counter()
    load_start = [round(x, 2) for x in os.getloadavg()]
    sentences = stsb_sentences(config.n_sentences)
    graphs = layerwise_home() / "onnx"
    before = set(graphs.iterdir()) if graphs.is_dir() else set()
    encoders, st = _encoders(config)
    exported = bool(set(graphs.iterdir()) - before)  # the export ran in this process (torch checked unchanged)
    fns = {name: _encode_fn(name, encoders, st, config.batch_size)
           for name in (*_backends(config), "sentence-transformers")}
    runs, outputs, orders = _time(config, fns, sentences)
    best = {name: min(times) for name, times in runs.items()}
    sps = {name: len(sentences) / s for name, s in best.items()}
    quality = _quality(fns, data_dir, config.dev_pairs)
    return {
        "model": encoders["torch"].identity.to_dict(), "n_states": encoders["torch"].n_states,
        "max_length": encoders["torch"].max_length, "n_sentences": len(sentences),
        "st_modules": [type(m).__name__ for m in st], "orders": orders, "seconds_runs": runs,
        "sentences_per_second_best": sps,
        "ratios": {"onnx_vs_torch": sps["onnx"] / sps["torch"], "onnx-int8_vs_torch": sps["onnx-int8"] / sps["torch"],
                   **{f"{b}_vs_st": sps[b] / sps["sentence-transformers"] for b in _backends(config)}},
        "agreement": _agreement(outputs), "quality": quality,
        "load_average": {"start": load_start, "end": [round(x, 2) for x in os.getloadavg()]},
        "threads": {"torch": torch.get_num_threads(), "onnxruntime_intra_op": config.threads},
        "graph_exported_in_this_run": exported, "versions": _versions(config),
        "seconds": time.perf_counter() - t0,
    }


# -- the page ---------------------------------------------------------------------------------------------------


def _config(ctx: PageContext) -> OnnxBenchConfig:
    known = set(OnnxBenchConfig.__dataclass_fields__)
    bad = sorted(set(ctx.options) - known)
    if bad:
        raise ValueError(f"unknown onnx page option(s) {', '.join(bad)}; valid: {', '.join(sorted(known))}")
    return OnnxBenchConfig(**ctx.options)


def _key(config: OnnxBenchConfig) -> dict:
    identity = LayerEncoder(config.model, max_length=config.max_length, cache_dir=False, show_progress=False).identity
    return {"model": model_key(identity), "settings": asdict(config)}


def run(ctx: PageContext) -> None:
    """Measure once per settings (a stored part is reused; ``--redo '*'`` measures again)."""
    config = _config(ctx)
    key, name = _key(config), Path(config.model).name
    if ctx.store.load(NAME, name, key) is None:
        payload = measure(config, ctx.data_dir)
        ctx.store.save(Part(NAME, name, key, payload, True, [run_record(ctx.command)]))


def _speed_rows(p: dict) -> list[str]:
    runs, sps, r = p["seconds_runs"], p["sentences_per_second_best"], p["ratios"]
    label = {"torch": f"layerwise, torch fp32, {p['n_states']} states", "onnx": "layerwise, ONNX fp32, every state",
             "onnx-int8": "layerwise, ONNX int8, every state", "openvino": "layerwise, OpenVINO fp32, every state",
             "sentence-transformers": "sentence-transformers `encode`, last layer only"}
    rows = ["| encoder | best (s) | sentences/s | vs sentence-transformers | vs torch | passes (s) |",
            "|---|---:|---:|---:|---:|---|"]
    for name in runs:
        vs_st = r.get(f"{name}_vs_st", 1.0)
        vs_torch = sps[name] / sps["torch"]
        rows.append(f"| {label[name]} | {min(runs[name]):.2f} | {sps[name]:.1f} | {vs_st:.2f}x | {vs_torch:.2f}x | "
                    f"{', '.join(f'{t:.2f}' for t in runs[name])} |")
    return rows


def _goal_lines(p: dict) -> list[str]:
    r, q = p["ratios"], p["quality"]
    diff = q["onnx-int8"] - q["torch"]
    return [
        f"- ONNX int8, every state, vs sentence-transformers' `encode` (last layer): **{r['onnx-int8_vs_st']:.2f}x**; "
        f"goal >= {TARGET_INT8_VS_ST:g}x: **{pass_fail(r['onnx-int8_vs_st'] >= TARGET_INT8_VS_ST)}**.",
        f"- ONNX fp32 vs torch fp32 (both every state): **{r['onnx_vs_torch']:.2f}x**; goal >= "
        f"{TARGET_FP32_VS_TORCH:g}x: **{pass_fail(r['onnx_vs_torch'] >= TARGET_FP32_VS_TORCH)}**.",
        f"- STS-B dev Spearman x100 of the last layer's mean: torch {q['torch']:.2f}, ONNX fp32 {q['onnx']:.2f}, "
        f"ONNX int8 {q['onnx-int8']:.2f}" + (f", OpenVINO fp32 {q['openvino']:.2f}" if "openvino" in q else "")
        + f" (sentence-transformers {q['sentence-transformers']:.2f}); int8 minus torch {diff:+.2f}, goal within "
        f"{TARGET_SPEARMAN_GAP:g}: **{pass_fail(abs(diff) <= TARGET_SPEARMAN_GAP)}**.",
    ]


def render_part(part: Part) -> str:
    p, config = part.payload, part.key["settings"]
    a, ident = p["agreement"], p["model"]
    load = p["load_average"]
    return "\n".join([
        f"# {TITLE}", "",
        "Made by `layerwise results run onnx` (measures what the store lacks; `--redo '*'` measures again) and "
        "`layerwise results render onnx` (this page, from `docs/results/state/onnx/` alone).", "",
        f"Model `{ident['name']}` ({ident['n_layers']} layers, {p['n_states']} hidden states, d = "
        f"{ident['hidden_size']}); {p['n_sentences']:,} distinct STS-B sentences (test then dev), batch "
        f"{config['batch_size']}, max length {p['max_length']}, {config['threads']} threads for torch and for "
        f"onnxruntime; each encoder warmed up on {config['warmup']} sentences, then {config['repeats']} passes in "
        "rotating order; the best pass is compared. The ONNX graph outputs every hidden state's mean and CLS (and the "
        "pooler), so all layerwise rows compute the same (n, L+1, d) stacks; sentence-transformers computes "
        "the last layer's mean only.", "",
        "## Goals", "", *_goal_lines(p), "",
        "## Speed", "", *_speed_rows(p), "",
        f"Load average (1, 5, 15 min) at the start {load['start']}, at the end {load['end']}: the machine is shared, "
        "so absolute times vary between runs; the ratios come from passes interleaved in one run."
        + (" The load was above the machine's cores during this run: torch's threads (and sentence-transformers', "
           "also torch) lose more time to other processes than onnxruntime's and OpenVINO's, so the ratios over "
           "torch are larger than a quiet machine gives; compare runs at similar load."
           if min(load["start"][0], load["end"][0]) > (os.cpu_count() or 1) else ""), "",
        "## Agreement", "",
        f"- ONNX fp32 vs torch, every state: max abs difference {a['fp32_max_abs_diff']['mean']:.1e} (mean), "
        f"{a['fp32_max_abs_diff']['cls']:.1e} (CLS)."
        + ("" if "openvino_max_abs_diff" not in a else f" OpenVINO fp32 vs torch: {a['openvino_max_abs_diff']['mean']:.1e} "
           f"(mean), {a['openvino_max_abs_diff']['cls']:.1e} (CLS)."),
        f"- ONNX int8 vs torch: relative error |int8 - fp32| / |fp32| per vector, mean pooling: median "
        f"{a['int8_relative_error']['mean_median']:.1e}, max {a['int8_relative_error']['mean_max']:.1e}; CLS max "
        f"{a['int8_relative_error']['cls_max']:.1e}. Int8: the weights of every matrix product, per output channel "
        "on 7 bits (`quantize_dynamic` with `reduce_range`: 8-bit weights saturate on a CPU without VNNI), dynamic "
        "activations; embeddings stay fp32.",
        f"- torch's L2-normalised last-layer mean vs sentence-transformers' embedding: max abs difference "
        f"{a['st_vs_torch_last_layer_max_abs_diff']:.1e}.", "",
        "## Provenance", "", *provenance_lines([part]),
        "- runtimes: " + ", ".join(f"{k} {v}" for k, v in p.get("versions", {}).items()),
        f"- measured in {p['seconds']:.0f} s; threads {p['threads']}; the ONNX graph was "
        + ("exported in this run (the export works on a deep copy and checks that the torch model's outputs did not "
           "change)" if p.get("graph_exported_in_this_run") else "read from the graph cache ($LAYERWISE_HOME/onnx)")
        + ".", "",
    ])


def render(ctx: PageContext) -> list[Path]:
    config = _config(ctx)
    settings = json.loads(json.dumps(asdict(config)))
    parts = [p for p in ctx.store.parts(NAME) if p.key["settings"] == settings]
    if not parts:
        raise FileNotFoundError(f"no onnx parts in {ctx.store.root}; run `layerwise results run onnx` first")
    return [write_text(ctx.output / f"{NAME}.md", render_part(parts[0]))]


PAGE = register(ResultsPage(
    name=NAME, method="speed", title=TITLE, models=(OnnxBenchConfig.model,), data=("stsb",),
    grid={"backends": list(BACKENDS)}, settings=asdict(OnnxBenchConfig()), run=run, render=render,
    measures=("src/layerwise/encoders", "src/layerwise/cache", "src/layerwise/evaluation/metrics.py",
              "src/layerwise/benchmarks/speed/bench_onnx.py")))


def main(argv=None) -> int:
    """``python -m layerwise.benchmarks.speed.bench_onnx [--redo]``: measure into the committed store and render."""
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--redo", action="store_true", help="measure again even if the store holds a result")
    args = ap.parse_args(argv)
    docs = REPO / "docs" / "results"
    ctx = PageContext(store=ResultsStore(docs / "state", redo=("*",) if args.redo else ()), output=docs,
                      command=tuple(["python", "-m", "layerwise.benchmarks.speed.bench_onnx",
                                     *(sys.argv[1:] if argv is None else argv)]))
    run(ctx)
    for path in render(ctx):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
