"""A screen of ONNX Runtime dynamic int8 settings for one layer graph: how far each setting's sentence vectors move
from the float32 graph's, and what that does to STS-B dev Spearman.

The compress page quantizes every candidate's graph one way (``encoders.onnx_int8.INT8_QUANTIZATION``:
``quantize_dynamic``, 7-bit int8 weights per output channel, every matrix product with a constant weight,
activations quantized per batch); on all-mpnet-base-v2 its dev Spearman moved up to 1.57 points from float32 with
8-bit weights (issue 25's goal: 0.5), which on a CPU without VNNI saturate (``8-bit-weights``). This screen quantizes the same float32 graph (``model.onnx`` of a layer graph folder, e.g. the page's work
folder ``runs/compress/<model>/work/graphs/original-l12-*``) with one setting changed at a time, encodes the STS-B dev
sentences with each (mean of the last hidden state, as the page's original), and appends one JSON line per setting
to OUT: dev Spearman x100, its difference from float32, the cosine of each sentence's int8 vector with its float32
vector (mean, 1st percentile, min), the setting, and the run's environment (commit, machine, versions, command).

    PYTHONPATH=src python scripts/int8_variants.py runs/compress/all-mpnet-base-v2/work/graphs/original-l12-115719df \\
        all-mpnet-base-v2 --data-dir /work/shared/data --out docs/results/screens/compress-int8-variants.jsonl

A screen, not a results page: the page changes only through ``layerwise results run compress``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from layerwise.data import load_sts
from layerwise.encoders.layer_encoder import LayerEncoder
from layerwise.encoders.onnx_backend import FP32_FILE, INFO_FILE, INT8_FILE, LayerGraphSession
from layerwise.encoders.onnx_int8 import INT8_OPS, INT8_QUANTIZATION
from layerwise.evaluation.metrics import cosine_rows, spearman
from layerwise.methods.compress.int8_mixed import OUTLIER_RATIO, input_outlier_ratios
from layerwise.reports import environment


def _ffn_output(name: str) -> bool:
    return name.endswith("/output/dense/MatMul") and "/attention/" not in name  # BERT's attention has one too


#: MatMul nodes a variant keeps in float32, by name (the TorchScript export's module paths)
EXCLUDES = {
    "ffn-output": _ffn_output,  # the second FFN product: its inputs are post-GELU activations, with outliers
    "ffn": lambda name: _ffn_output(name) or name.endswith("/intermediate/dense/MatMul"),
    "attention": lambda name: "/attention/" in name,  # q, k, v and the output projection
}
#: one setting changed at a time against the page's (``page``)
VARIANTS = {
    "page": {},
    "per-tensor": {"per_channel": False},
    "8-bit-weights": {"reduce_range": False},  # saturates on a CPU without VNNI (encoders.onnx_int8)
    "uint8-weights": {"weight_type": "QUInt8", "per_channel": False},  # sentence-transformers' avx512_vnni default
    "fp32-ffn-output": {"exclude": "ffn-output"},
    "fp32-ffn": {"exclude": "ffn"},
    "fp32-attention": {"exclude": "attention"},
    # every product whose input, in a batch of the calibration sentences, has max |x| over OUTLIER_RATIO times its
    # 99.9th percentile (per-tensor int8 of such an input leaves the other values a few levels)
    "fp32-outliers": {"exclude": "outliers"},
}
CALIBRATION_SENTENCES = 256  # the first of the dev sentences


def outlier_nodes(model: str, texts: list[str], *, ratio: float, batch_size: int, max_length: int) -> dict:
    """``{MatMul node name: ratio}`` of the products whose input ratio on ``texts`` is over ``ratio``
    (:func:`~layerwise.methods.compress.int8_mixed.input_outlier_ratios` of the torch model, which the library's
    ``onnx-int8-mixed`` backend keeps float32)."""
    encoder = LayerEncoder(model, cache_dir=False, show_progress=False)
    ratios = input_outlier_ratios(encoder.model, encoder.tokenizer, texts, batch_size=batch_size,
                                  max_length=max_length)
    return {name: round(r, 2) for name, r in ratios.items() if r > ratio}


def quantize(fp32: Path, out: Path, variant: dict, outliers: dict | None = None) -> dict:
    """Write ``out`` from ``fp32`` with the page's settings and ``variant`` applied; the settings used.
    ``outliers``: :func:`outlier_nodes`, for the variant that keeps them in float32."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    page = {k: v for k, v in INT8_QUANTIZATION.items() if k != "op_types"}
    settings = {**page, "exclude": None, **variant}
    excluded = []
    if settings["exclude"]:
        keep = (lambda name: name in outliers) if settings["exclude"] == "outliers" else EXCLUDES[settings["exclude"]]
        graph = onnx.load(str(fp32), load_external_data=False).graph
        excluded = [n.name for n in graph.node if n.op_type == "MatMul" and keep(n.name)]
        if settings["exclude"] == "outliers":
            settings.update(outlier_ratio=OUTLIER_RATIO, outlier_ratios={n: outliers[n] for n in excluded})
    quantize_dynamic(fp32, out, weight_type=getattr(QuantType, settings["weight_type"]),
                     per_channel=settings["per_channel"], reduce_range=settings["reduce_range"],
                     op_types_to_quantize=list(INT8_OPS), nodes_to_exclude=excluded)
    return {**settings, "nodes_kept_fp32": len(excluded)}


def last_mean(session: LayerGraphSession, tokenizer, texts: list[str], batch_size: int, max_length: int) -> np.ndarray:
    stack = session.encode(tokenizer, texts, batch_size=batch_size, max_length=max_length)
    return np.asarray(stack.mean[:, -1], dtype=np.float32)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("graph", type=Path, help="a layer graph folder (model.onnx, layer_graph.json)")
    ap.add_argument("model", help="the model whose tokenizer encodes (built-in name or folder)")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--out", type=Path, required=True, help="JSON lines, appended")
    ap.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated of {', '.join(VARIANTS)}")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--max-length", type=int, default=128)
    args = ap.parse_args(argv)
    names = args.variants.split(",")
    unknown = [n for n in names if n not in VARIANTS]
    if unknown or not (args.graph / FP32_FILE).is_file():
        sys.exit(f"error: unknown variant(s) {unknown} (valid: {', '.join(VARIANTS)})" if unknown else
                 f"error: {args.graph / FP32_FILE} is missing; pass a layer graph folder")
    dev = load_sts("stsb", split="dev", data_dir=args.data_dir)
    texts = list(dict.fromkeys([*dev.sentences1, *dev.sentences2]))
    index = {t: i for i, t in enumerate(texts)}
    rows1, rows2 = [index[t] for t in dev.sentences1], [index[t] for t in dev.sentences2]
    tokenizer = LayerEncoder(args.model, cache_dir=False, show_progress=False).tokenizer
    gold = np.asarray(dev.scores)
    fp32 = last_mean(LayerGraphSession(args.graph), tokenizer, texts, args.batch_size, args.max_length)
    base = 100 * spearman(cosine_rows(fp32[rows1], fp32[rows2]), gold)
    env = environment(["scripts/int8_variants.py", *(argv if argv is not None else sys.argv[1:])])
    outliers = (outlier_nodes(args.model, texts[:CALIBRATION_SENTENCES], ratio=OUTLIER_RATIO,
                              batch_size=args.batch_size, max_length=args.max_length)
                if "fp32-outliers" in names else None)
    for name in names:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            shutil.copy(args.graph / INFO_FILE, folder / INFO_FILE)
            t0 = time.perf_counter()
            settings = quantize(args.graph / FP32_FILE, folder / INT8_FILE, VARIANTS[name], outliers)
            seconds = time.perf_counter() - t0
            vectors = last_mean(LayerGraphSession(folder, quantized=True), tokenizer, texts, args.batch_size,
                                args.max_length)
        score = 100 * spearman(cosine_rows(vectors[rows1], vectors[rows2]), gold)
        cos = cosine_rows(vectors, fp32)
        row = {"variant": name, "settings": settings, "graph": str(args.graph), "sentences": len(texts),
               "dev_spearman": round(float(score), 4), "fp32_dev_spearman": round(float(base), 4),
               "difference": round(float(score - base), 4),
               "cosine_to_fp32": {"mean": float(cos.mean()), "p1": float(np.percentile(cos, 1)),
                                  "min": float(cos.min())},
               "quantize_seconds": round(seconds, 1), "environment": env}
        with args.out.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
        print(f"{name}: dev {score:.2f} (fp32 {base:.2f}, {score - base:+.2f}); cos to fp32 mean {cos.mean():.5f} "
              f"p1 {np.percentile(cos, 1):.5f} min {cos.min():.5f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
