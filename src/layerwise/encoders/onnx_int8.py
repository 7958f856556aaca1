"""onnxruntime's dynamic int8 of a layer graph, under one setting every int8 graph of the library is written with.

:func:`quantize_int8` writes the int8 copy of a float32 graph (``quantize_dynamic``): the weights of every matrix
product (:data:`INT8_OPS`) as signed int8 with one scale per output column, the product's input as uint8 with its
scale taken from each batch at run time. The embedding lookups (Gather) stay float32: quantizing them saves memory,
not time, and moves hidden state 0.

The weights are quantized on 7 bits (``reduce_range``: symmetric, |w| <= 64), because an x86 CPU without VNNI (AVX2, or AVX-512
without ``avx512_vnni``) multiplies uint8 inputs by int8 weights with VPMADDUBSW, which adds each pair of products in
16 bits and saturates where 2 x 255 x 127 > 32767; with 7-bit weights (2 x 255 x 64 < 32768) it cannot. A graph
quantized on 8 bits is fine on the CPU that wrote it if that CPU has VNNI, and broken on one without: on an AMD EPYC
with AVX2 only (2026-12-01, onnxruntime 1.32.0) all-mpnet-base-v2's 8-bit graph scored 13.85 Spearman x100 on the
whole STS-B dev set (last-layer mean, max length 128) against float32's 88.11, and 88.71 on 7 bits;
all-MiniLM-L6-v2 scored 86.49 on 8 bits and 86.76 on 7 against float32's 86.72 (the lines of 2026-12-01 in
``docs/results/screens/compress-int8-variants.jsonl``, variants ``8-bit-weights`` and ``page``, written by
``scripts/int8_variants.py``, which screens the settings on a graph). The setting is recorded in the graph folder's
``layer_graph.json`` and in every cache key of an int8 result, so a graph or a result quantized otherwise is never
read as this one.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from pathlib import Path
from typing import Sequence

__all__ = ["INT8_OPS", "INT8_QUANTIZATION", "quantize_int8"]

INT8_OPS = ("MatMul",)
#: ``quantize_dynamic``'s arguments for every int8 graph (the weights' type, one scale per output column, 7-bit weights)
INT8_QUANTIZATION = {"weight_type": "QInt8", "per_channel": True, "reduce_range": True, "op_types": list(INT8_OPS)}


class _NoPreprocessingHint(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()


@contextmanager
def _quiet_preprocessing_hint():
    """quantize_dynamic logs to the root logger that the graph could be pre-processed (shape inference); that
    advice is for static quantization and not the user's to act on, so it is filtered while it runs."""
    hint = _NoPreprocessingHint()
    logging.getLogger().addFilter(hint)
    try:
        yield
    finally:
        logging.getLogger().removeFilter(hint)


def quantize_int8(src: Path, dst: Path, *, exclude: Sequence[str] = ()) -> None:
    """Write ``dst``, the float32 graph ``src`` quantized under :data:`INT8_QUANTIZATION`, with the matrix products
    named in ``exclude`` (node names) left float32. onnx and onnxruntime must be installed (``require_onnx``)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    q = INT8_QUANTIZATION
    with _quiet_preprocessing_hint():
        quantize_dynamic(Path(src), Path(dst), weight_type=getattr(QuantType, q["weight_type"]),
                         per_channel=q["per_channel"], reduce_range=q["reduce_range"],
                         op_types_to_quantize=list(q["op_types"]), nodes_to_exclude=list(exclude))
