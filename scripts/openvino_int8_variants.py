"""A screen of OpenVINO (NNCF) static int8 settings for one compress candidate: how far each setting's dev Spearman
moves from the float32 graph's, and how far its sentence vectors move.

The compress page's ``openvino-int8`` backend (:func:`layerwise.encoders.openvino_int8.quantize_openvino`) quantizes
every matrix product of the encoder, at each SmoothQuant alpha of ``SMOOTH_QUANT_ALPHAS``, and keeps the alpha whose
vectors agree best with float32 on the calibration sentences (no labels). On the page its dev Spearman moved more
than 0.5 from float32 for all-MiniLM-L6-v2's cut-l3 (+0.80) and cut-l4 (+0.61) and all-mpnet-base-v2's
every-depth-l11 (-0.84) (issue 25's goal: within 0.5). This screen builds a cut candidate (the encoder's first l
layers, mean of hidden state l: the page's ``cut-l<l>``; ``original``: every layer), exports its layer graph,
calibrates on the page's calibration sentences (the first 300 of its corpus: ``--corpus-limit`` and ``--seed`` as
the page's run), and quantizes it at each alpha, with and without the products whose inputs have outliers
(:func:`~layerwise.methods.compress.int8_mixed.input_outlier_ratios` over ``OUTLIER_RATIO``, as ``onnx-int8-mixed``
keeps them) left in float32 by NNCF's ignored scope. One JSON line per setting goes to OUT: dev Spearman x100, its
difference from float32, the cosine of each dev sentence's int8 vector with its float32 vector, the agreement the
library's alpha choice reads, the products kept float32, and the run's environment.

    PYTHONPATH=src python scripts/openvino_int8_variants.py all-MiniLM-L6-v2 3 --data-dir /work/shared/data \\
        --corpus-limit 30000 --out docs/results/screens/compress-openvino-int8-variants.jsonl

(the screen lines of 2026-11-28 were written to a scratch file by the same command and copied there)

A screen, not a results page: the page changes only through ``layerwise results run compress``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import openvino as ov

from layerwise.benchmarks.compress.data import CORPUS_SOURCES, page_data
from layerwise.encoders.layer_encoder import LayerEncoder
from layerwise.encoders.onnx_backend import FP32_FILE, INFO_FILE, LayerGraphSession, export_layer_graph
from layerwise.encoders.openvino_int8 import _IGNORED_PATTERN as IGNORED_POOLING  # the pooling stays float32
from layerwise.encoders.openvino_int8 import QUANTIZATION, calibration_feeds, require_nncf, similarity_agreement
from layerwise.encoders.openvino_int8 import _vectors as vectors  # the mean of these states' means, batch by batch
from layerwise.encoders.openvino_runtime import INT8_DIR, INT8_XML
from layerwise.evaluation.metrics import cosine_rows, spearman
from layerwise.methods.compress.backends import CALIBRATION_SENTENCES
from layerwise.methods.compress.int8_mixed import OUTLIER_RATIO, input_outlier_ratios
from layerwise.methods.truncated.model import TruncatedModel
from layerwise.reports import environment


def quantize(graph: Path, feeds: list[dict], alpha: float, keep: list[str]):
    """NNCF's static int8 of ``graph/model.onnx`` as the library quantizes it, at SmoothQuant ``alpha``, with the
    MatMul nodes ``keep`` also left in float32."""
    nncf = require_nncf()
    from nncf.quantization.advanced_parameters import AdvancedQuantizationParameters, AdvancedSmoothQuantParameters

    logging.getLogger("nncf").setLevel(logging.WARNING)
    return nncf.quantize(
        ov.Core().read_model(str(graph / FP32_FILE)), nncf.Dataset(feeds), preset=nncf.QuantizationPreset.MIXED,
        model_type=nncf.ModelType.TRANSFORMER, subset_size=len(feeds), fast_bias_correction=True,
        ignored_scope=nncf.IgnoredScope(patterns=[IGNORED_POOLING], names=list(keep), validate=False),
        advanced_parameters=AdvancedQuantizationParameters(
            smooth_quant_alphas=AdvancedSmoothQuantParameters(matmul=alpha)))


def dev_vectors(session: LayerGraphSession, model: TruncatedModel, texts: list[str], depth: int,
                max_length: int) -> np.ndarray:
    """The candidate's vectors of ``texts`` (in their order) from a session on the graph: the mean of state ``depth``."""
    return np.asarray(session.encode(model.tokenizer, texts, max_length=max_length).mean[:, depth], dtype=np.float32)


def matmul_names(graph: Path) -> set[str]:
    return {op.get_friendly_name() for op in ov.Core().read_model(str(graph / FP32_FILE)).get_ops()
            if op.get_type_name() == "MatMul"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="built-in name or a local encoder folder")
    ap.add_argument("depth", help="the cut's depth l (1..L), or 'original'")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--corpus-limit", type=int, default=None, help="as the page's run (its calibration sentences)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--corpus", default=",".join(CORPUS_SOURCES),
                    help="the corpus' sources, comma-separated, as the page's run (default: the page's)")
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--out", type=Path, required=True, help="JSON lines, appended")
    args = ap.parse_args(argv)
    data = page_data(args.corpus.split(","), (), limit=args.corpus_limit, seed=args.seed, data_dir=args.data_dir)
    n = LayerEncoder(args.model, cache_dir=False, show_progress=False).identity.n_layers
    depth = n if args.depth == "original" else int(args.depth)
    if not 1 <= depth <= n:
        sys.exit(f"error: depth {depth} is outside 1..{n}")
    model = TruncatedModel.from_pretrained(args.model, (depth,), max_length=args.max_length)
    name = "original-l%d" % n if args.depth == "original" else f"cut-l{depth}"
    calibration = list(data.corpus[:CALIBRATION_SENTENCES])
    dev = data.dev
    texts = list(dict.fromkeys([*dev.sentences1, *dev.sentences2]))
    index = {t: i for i, t in enumerate(texts)}
    rows1, rows2 = [index[t] for t in dev.sentences1], [index[t] for t in dev.sentences2]
    gold = np.asarray(dev.scores)
    ratios = input_outlier_ratios(model.encoder, model.tokenizer, calibration, max_length=args.max_length)
    outliers = {k: round(r, 2) for k, r in ratios.items() if r > OUTLIER_RATIO}
    env = environment(["scripts/openvino_int8_variants.py", *(argv if argv is not None else sys.argv[1:])])
    with tempfile.TemporaryDirectory() as tmp:
        graph = export_layer_graph(model.encoder, Path(tmp) / "graph", quantize=False)
        missing = sorted(set(outliers) - matmul_names(graph))
        if missing:
            sys.exit(f"error: the OpenVINO model names no MatMul {missing[0]} ({len(missing)} of {len(outliers)})")
        inputs = tuple(json.loads((graph / INFO_FILE).read_text(encoding="utf-8"))["inputs"])
        feeds = calibration_feeds(model.tokenizer, calibration, inputs, max_length=args.max_length)
        fp32_cal = vectors(graph / FP32_FILE, feeds, [depth])
        fp32_dev = dev_vectors(LayerGraphSession(graph, runtime="openvino"), model, texts, depth, args.max_length)
        base = 100 * spearman(cosine_rows(fp32_dev[rows1], fp32_dev[rows2]), gold)
        for alpha in QUANTIZATION["smooth_quant_alphas"]:
            for kept in ({}, outliers) if outliers else ({},):  # no outlier product: the two are one
                t0 = time.perf_counter()
                q = quantize(graph, feeds, alpha, list(kept))
                seconds = time.perf_counter() - t0
                agreement = similarity_agreement(fp32_cal, vectors(q, feeds, [depth]))
                ov.save_model(q, str(graph / INT8_DIR / INT8_XML), compress_to_fp16=False)
                v = dev_vectors(LayerGraphSession(graph, quantized=True, runtime="openvino"), model, texts, depth,
                                args.max_length)
                score = 100 * spearman(cosine_rows(v[rows1], v[rows2]), gold)
                cos = cosine_rows(v, fp32_dev)
                row = {"candidate": name, "model": args.model, "smooth_quant_alpha": alpha,
                       "outliers_float32": len(kept), "outlier_ratio": OUTLIER_RATIO, "kept_float32": kept,
                       "calibration_sentences": len(calibration), "dev_spearman": round(float(score), 4),
                       "fp32_dev_spearman": round(float(base), 4), "difference": round(float(score - base), 4),
                       "agreement_on_calibration": round(agreement, 6),
                       "cosine_to_fp32": {"mean": float(cos.mean()), "p1": float(np.percentile(cos, 1)),
                                          "min": float(cos.min())},
                       "quantize_seconds": round(seconds, 1), "environment": env}
                with args.out.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(row) + "\n")
                print(f"{name} alpha {alpha} outliers fp32 {len(kept)}: dev {score:.2f} (fp32 {base:.2f}, "
                      f"{score - base:+.2f}); agreement {agreement:.5f}; cos mean {cos.mean():.5f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
