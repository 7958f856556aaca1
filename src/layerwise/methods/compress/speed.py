"""Throughput of a candidate against the original model, measured in one run.

Both encode the same sentences with the same batch size and max length; after one untimed pass of each, their timed
passes alternate (original, candidate, original, ...) so that a load change on the machine touches both alike, and
the ratio of the median passes is the candidate's speed-up. Timings are measured here and reported, never asserted.
"""

from __future__ import annotations

import time
from typing import Callable

import torch

__all__ = ["measure_speed"]


def measure_speed(encode: Callable[[list[str]], object], original: Callable[[list[str]], object],
                  sentences: list[str], *, batch_size: int, repeats: int) -> dict:
    """Seconds per pass of ``encode`` and of ``original`` over ``sentences`` (each a function of a list of texts
    that encodes them in batches of ``batch_size``), ``repeats`` interleaved passes each."""
    encode(sentences)  # warm-up: first-call costs (allocations, kernels per input shape) are not timed
    original(sentences)
    seconds, original_seconds = [], []
    for _ in range(repeats):
        for fn, out in ((original, original_seconds), (encode, seconds)):
            t0 = time.perf_counter()
            fn(sentences)
            out.append(time.perf_counter() - t0)
    return {"seconds": seconds, "original_seconds": original_seconds, "sentences": len(sentences),
            "batch_size": int(batch_size), "threads": torch.get_num_threads()}
