"""TMFT beside the students, on the compress page's own test sets: issue 25's goal "distilled students beat TMFT at the
same depth on the STS average" needs TMFT's scores on every test set, and the tmft page scores STS-B test alone.

One part per model and depth, ``<model>-tmft-l<depth>``: :func:`~layerwise.methods.truncated.run.run_tmft` with the
tmft page's settings (no pre-step, seed 0, :data:`TMFT_EPOCHS`, every other setting :class:`TMFTConfig`'s default,
as that page runs them), the kept checkpoint (best STS-B dev Spearman) then scored on every test set of the compress
page (each distinct sentence encoded once, the pairs' cosines, Spearman x100, as the candidates are). Keyed on the
model's identity, the dev and test sets' checksums and the TMFT settings (and kept only while STS-B's train, dev
and test files are those it was trained on), so a stored depth is never trained again; the models and checkpoints go under the page's work folder (a killed run resumes from them). No timing: a
TMFT model at depth l has the distilled student's architecture, whose throughput the depth part measured.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from layerwise.benchmarks.compress.stored import started
from layerwise.benchmarks.page_parts import RunTimer, run_record, sts_checksum
from layerwise.benchmarks.registry import PageContext
from layerwise.benchmarks.store import Part, model_key
from layerwise.data.checksum import content_checksum
from layerwise.evaluation.metrics import cosine_rows
from layerwise.methods.compress.build import pair_spearman, pair_vectors
from layerwise.methods.truncated.config import TMFTConfig
from layerwise.methods.truncated.model import TruncatedModel
from layerwise.methods.truncated.run import run_tmft, sts_pairs
from layerwise.methods.truncated.tasks import PairSet

__all__ = ["TMFT_EPOCHS", "pair_cosines", "stored_tmft", "tmft_config", "tmft_part_name", "tmft_parts"]

logger = logging.getLogger(__name__)

#: epochs of the tmft page's TMFT runs, per model (its ``epochs`` and ``mpnet_epochs``); other models: the first
TMFT_EPOCHS = {"all-MiniLM-L6-v2": 3, "all-mpnet-base-v2": 1}


def tmft_config(model: str, depth: int) -> TMFTConfig:
    """The tmft page's TMFT run of ``model`` at ``depth`` (seed 0, no pre-step)."""
    epochs = TMFT_EPOCHS.get(Path(model).name, TMFT_EPOCHS["all-MiniLM-L6-v2"])
    return TMFTConfig(model=model, layers=(depth,), pre_step="none", seed=0, epochs=epochs)


def tmft_part_name(model: str, depth: int) -> str:
    return f"{Path(model).name}-tmft-l{depth}"


def tmft_parts(ctx: PageContext, model: str, identity, data, depths, root: Path, *, device: str | None = None
               ) -> list[Part]:
    """Each depth's TMFT part: from the store, or trained (resuming under ``root/tmft``), scored and stored now."""
    tests = dict(sorted(data.tests.items()))
    key_base = {"model": model_key(identity), "data": {"dev": sts_checksum(data.dev),
                                                       "tests": {n: sts_checksum(d) for n, d in tests.items()}}}
    parts, files = [], None  # files: the STS-B checksum run_tmft records, read once
    for depth in depths:
        config = tmft_config(model, depth)
        key = {**key_base, "config": config.to_dict(), "tmft_depth": depth}
        part = ctx.store.load("compress", tmft_part_name(model, depth), key)
        if part is not None:
            files = files or _training_data(config, ctx.data_dir)
            if part.payload.get("data") != files:
                part = None  # trained on other STS-B train / dev / test files: trained again
        if part is None:
            timer = RunTimer()
            result = run_tmft(config, data_dir=ctx.data_dir, output=root / "tmft", device=device)
            scores = _test_scores(TruncatedModel.load(result.saved_model).eval(), tests)
            payload = {"model": model, "depth": depth, "dev": result.dev_spearman, "tests": scores,
                       "tmft_stsb_test": result.test_spearman, "steps": result.steps, "data": result.data,
                       "device": device or "cpu", **timer.record()}
            part = Part("compress", tmft_part_name(model, depth), key, payload, True, [run_record(ctx.command)])
            ctx.store.save(part)
            logger.info("compress page: %s TMFT at depth %d: dev %.2f, STS-B test %.2f", Path(model).name, depth,
                        result.dev_spearman, scores.get("stsb", float("nan")))
        parts.append(part)
    return parts


def _training_data(config: TMFTConfig, data_dir) -> dict:
    """The checksum of the pairs ``run_tmft`` trains, chooses and tests on (as its result's ``data`` records it)."""
    train, dev, test = sts_pairs(config.dataset, data_dir, config.train_limit)
    return {config.dataset: content_checksum([train, dev, test])}


def _test_scores(model: TruncatedModel, tests: dict) -> dict[str, float]:
    """Spearman x100 of the pairs' cosines against the gold scores, per test set, as the candidates are scored
    (:func:`~layerwise.methods.compress.build.pair_vectors`: each distinct sentence encoded once)."""
    pairs = [(name, _pair_set(name, d)) for name, d in tests.items()]
    vectors = pair_vectors(model.encode, pairs)
    return {name: pair_spearman(*vectors[name], p) for name, p in pairs}


def pair_cosines(model: TruncatedModel, pairs) -> np.ndarray:
    """(n,) cosine of each pair of ``pairs`` (``sentences1``, ``sentences2``) as :func:`_test_scores` encodes them."""
    return cosine_rows(*pair_vectors(model.encode, [("pairs", _pair_set("pairs", pairs))])["pairs"])


def _pair_set(name: str, d) -> PairSet:
    return PairSet(tuple(d.sentences1), tuple(d.sentences2), np.asarray(d.scores), name)

def stored_tmft(parts: list[Part], model: str) -> dict[int, dict]:
    """depth -> the payload of the newest stored TMFT part of ``model`` at that depth (with its runs' record)."""
    out: dict[int, tuple[str, dict]] = {}
    for part in parts:
        if "tmft_depth" in part.key and part.payload.get("model") == model:
            when = started(part)
            depth = int(part.key["tmft_depth"])
            if depth not in out or when > out[depth][0]:
                out[depth] = (when, {**part.payload, "started": when, "config": part.key["config"]})
    return {depth: payload for depth, (_, payload) in sorted(out.items())}
