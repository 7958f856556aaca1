"""The ``export`` results page: a searched layer subset, exported, gives the same scores through sentence-transformers.

For each model, one part (computed by ``layerwise results run export``, rendered from the store alone):

1. ``layerwise search`` on STS-B *dev* (5 seeded splits of 350 dev pairs): its results file is written as the CLI
   writes it, and the subset is read back from that file as ``layerwise export --from`` reads it (the subset chosen
   on most dev splits). STS-B test is never seen by the choice.
2. The subset is exported (built-in sentence-transformers modules only; the encoder cut above the highest hidden
   state used) and loaded with ``SentenceTransformer(folder)`` (``trust_remote_code`` left at False).
3. STS-B test Spearman of the subset through ``layerwise`` (the layer stack) and through the exported folder, the
   largest difference between their vectors, and the original sentence-transformers model's own score.
4. Encoding throughput of the exported folder against the original model: same sentences, same batch size, the
   passes of the two models interleaved in one run, the median pass of each giving its rate.
"""

from __future__ import annotations

import logging
import os
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from layerwise.benchmarks.lc.run import SearchConfig, run_search, subset_from_results, write_search_outputs
from layerwise.benchmarks.page_parts import provenance_lines, run_record, sts_checksum
from layerwise.benchmarks.registry import SHARED_SOURCES, PageContext, ResultsPage, register
from layerwise.benchmarks.store import Part, model_key
from layerwise.data import load_sts
from layerwise.encode.embedders import PoolingSpec, SpecEmbedder
from layerwise.encoders.layer_encoder import LayerEncoder
from layerwise.encoders.registry import resolve_model
from layerwise.evaluation.sts import sts_scores
from layerwise.methods.lc.export import SubsetExport, export_layer_subset
from layerwise.reports import environment, write_text

logger = logging.getLogger(__name__)

__all__ = ["PAGE", "ExportPageConfig", "export_part"]

NAME = "export"
TITLE = "Export: a searched layer subset through sentence-transformers (same scores, measured speed)"
MODELS = ("all-MiniLM-L6-v2", "all-mpnet-base-v2")


@dataclass(frozen=True)
class ExportPageConfig:
    """The page's protocol (every field is part of each stored part's key)."""

    n_splits: int = 5  # seeded dev splits of STS-B dev for the search
    dev_size: int = 350  # dev pairs per split
    seed: int = 0
    max_length: int = 256  # tokens per text, the search's and the exported model's
    speed_sentences: int = 1000  # distinct STS-B test sentences timed
    speed_batch_size: int = 32
    speed_repeats: int = 3  # timed passes per model, interleaved
    folders: str = "runs/export"  # the search results files and exported folders (large; not in the repository)


def _config(ctx: PageContext) -> ExportPageConfig:
    known = set(ExportPageConfig.__dataclass_fields__) | {"models"}
    bad = sorted(set(ctx.options) - known)
    if bad:
        raise ValueError(f"unknown export page option(s) {bad}; valid: {', '.join(sorted(known))}")
    return ExportPageConfig(**{k: v for k, v in ctx.options.items() if k != "models"})


def _key(identity, config: ExportPageConfig, dev, test) -> dict:
    protocol = {k: v for k, v in asdict(config).items() if k != "folders"}
    return {"model": model_key(identity), "dev": sts_checksum(dev), "test": sts_checksum(test), "protocol": protocol}


def _st_vectors(model, texts: list[str], batch_size: int) -> np.ndarray:
    return model.encode(texts, batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False)


def _speed(models: dict, sentences: list[str], config: ExportPageConfig) -> dict:
    """Sentences/s of each sentence-transformers model: a warm-up batch, then interleaved timed passes."""
    seconds: dict[str, list[float]] = {name: [] for name in models}
    for model in models.values():
        _st_vectors(model, sentences[:config.speed_batch_size], config.speed_batch_size)
    for _ in range(config.speed_repeats):
        for name, model in models.items():
            t0 = time.perf_counter()
            _st_vectors(model, sentences, config.speed_batch_size)
            seconds[name].append(time.perf_counter() - t0)
    return {name: {"sentences_per_second": len(sentences) / statistics.median(s), "seconds": s}
            for name, s in seconds.items()}


def export_part(model: str, config: ExportPageConfig, data_dir=None, command=()) -> dict:
    """Search on STS-B dev, export, score STS-B test both ways, time both models: the part's payload."""
    import torch
    from sentence_transformers import SentenceTransformer

    t0 = time.perf_counter()
    root = Path(config.folders) / Path(model).name
    search = run_search(SearchConfig(model=model, dataset="stsb", split="dev", n_splits=config.n_splits,
                                     dev_size=config.dev_size, seed=config.seed, head=False, data_dir=data_dir,
                                     encoder_options={"max_length": config.max_length}))
    search.environment = environment(list(command) or None)
    results = write_search_outputs(search, root / "search")["json"]
    choice = subset_from_results(results)
    folder = export_layer_subset(SubsetExport(model=model, choice=choice, max_length=config.max_length),
                                 root / "model", overwrite=True)
    test = load_sts("stsb", split="test", data_dir=data_dir)
    encoder = LayerEncoder(model, max_length=config.max_length)
    ours = SpecEmbedder(encoder, PoolingSpec("mean", choice.layers))
    exported = SentenceTransformer(str(folder), device="cpu")
    original = SentenceTransformer(str(resolve_model(model).path), device="cpu")
    vectors = {"layerwise": [ours.encode(s) for s in (test.sentences1, test.sentences2)],
               "exported": [_st_vectors(exported, s, 64) for s in (test.sentences1, test.sentences2)],
               "original": [_st_vectors(original, s, 64) for s in (test.sentences1, test.sentences2)]}
    scores = {name: sts_scores(a, b, test.scores) for name, (a, b) in vectors.items()}
    diff = max(float(np.abs(x - y).max()) for x, y in zip(vectors["layerwise"], vectors["exported"]))
    sentences = list(dict.fromkeys(test.sentences1 + test.sentences2))[:config.speed_sentences]
    speed = _speed({"exported": exported, "original": original}, sentences, config)
    return {
        "model": model, "layers": list(choice.layers), "chosen_on": [choice.n_chosen, choice.n_splits],
        "search_scores": choice.scores, "n_layers": int(encoder.identity.n_layers),
        "layers_kept": int(exported[0].auto_model.config.num_hidden_layers),
        "parameters": {"exported": sum(p.numel() for p in exported.parameters()),
                       "original": sum(p.numel() for p in original.parameters())},
        "modules": [type(m).__module__ + "." + type(m).__name__ for m in exported],
        "test_pairs": len(test.scores), "scores": scores, "max_abs_difference": diff, "speed": speed,
        "speed_settings": {"sentences": len(sentences), "batch_size": config.speed_batch_size,
                           "repeats": config.speed_repeats, "threads": torch.get_num_threads()},
        "max_seq_length": {"exported": exported.max_seq_length, "original": original.max_seq_length},
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()], "seconds": time.perf_counter() - t0,
    }


def run(ctx: PageContext) -> None:
    """Compute the part of every model the store lacks; each is saved when done."""
    config = _config(ctx)
    dev = load_sts("stsb", split="dev", data_dir=ctx.data_dir)
    test = load_sts("stsb", split="test", data_dir=ctx.data_dir)
    for model in ctx.options.get("models") or MODELS:
        identity = LayerEncoder(model, max_length=config.max_length, cache_dir=False).identity
        key = _key(identity, config, dev, test)
        name = Path(model).name
        if ctx.store.load(NAME, name, key) is None:
            payload = export_part(model, config, ctx.data_dir, ctx.command)
            ctx.store.save(Part(NAME, name, key, payload, True, [run_record(ctx.command)]))
            logger.info("export page: %s done in %.0f s", name, payload["seconds"])


def _rows(parts: list[Part]) -> list[str]:
    head = ["| model | subset (chosen on) | layers run | parameters | STS-B test Spearman x100: layerwise / "
            "exported via sentence-transformers / original model | max abs difference of the vectors | "
            "sentences/s: exported / original (ratio) |", "|---|---|---|---|---|---|---|"]
    out = []
    for part in parts:
        p = part.payload
        s, v = p["scores"], p["speed"]
        ratio = v["exported"]["sentences_per_second"] / v["original"]["sentences_per_second"]
        out.append(
            f"| {Path(p['model']).name} | ({', '.join(map(str, p['layers']))}) ({p['chosen_on'][0]} of "
            f"{p['chosen_on'][1]} dev splits) | {p['layers_kept']} of {p['n_layers']} | "
            f"{p['parameters']['exported'] / 1e6:.1f} M / {p['parameters']['original'] / 1e6:.1f} M | "
            f"{s['layerwise']['spearman']:.2f} / {s['exported']['spearman']:.2f} / {s['original']['spearman']:.2f} | "
            f"{p['max_abs_difference']:.1e} | {v['exported']['sentences_per_second']:.1f} / "
            f"{v['original']['sentences_per_second']:.1f} ({ratio:.2f}x) |")
    return head + out


def _findings(parts: list[Part]) -> list[str]:
    out = []
    for part in parts:
        p = part.payload
        s = p["scores"]
        same = abs(s["layerwise"]["spearman"] - s["exported"]["spearman"]) < 0.005
        gain = s["exported"]["spearman"] - s["original"]["spearman"]
        ratio = p["speed"]["exported"]["sentences_per_second"] / p["speed"]["original"]["sentences_per_second"]
        out.append(
            f"- **{Path(p['model']).name}**: the exported folder gives {'the same' if same else 'a DIFFERENT'} STS-B "
            f"test Spearman as layerwise ({s['exported']['spearman']:.2f} vs {s['layerwise']['spearman']:.2f}); the "
            f"subset is {abs(gain):.2f} points {'above' if gain >= 0 else 'below'} the original model's own pipeline "
            f"({s['original']['spearman']:.2f}), and the export encodes {ratio:.2f}x as many sentences per second "
            f"({p['layers_kept']} of {p['n_layers']} layers run)."
            + (" The subset ends at the last layer, so nothing can be cut and the export runs every layer, as the "
               "original does; the cut pays for subsets that stop early (`tmft.md` measures the speed of each depth)."
               if p["layers_kept"] == p["n_layers"] else ""))
    return out


def render(ctx: PageContext) -> list[Path]:
    """Write ``export.md`` from the store alone."""
    config = _config(ctx)
    parts = [p for p in ctx.store.parts(NAME) if p.key["protocol"] == {k: v for k, v in asdict(config).items()
                                                                        if k != "folders"}]
    if not parts:
        raise FileNotFoundError(f"no export parts in {ctx.store.root}; run `layerwise results run export` first")
    first = parts[0].payload
    lines = [
        f"# {TITLE}", "",
        "Made by `layerwise results run export` (computes what the store lacks) and `layerwise results render "
        "export` (this page, from `docs/results/state/export/` alone). Per model: `layerwise search` on STS-B dev "
        f"({config.n_splits} seeded splits of {config.dev_size} dev pairs; STS-B test is never seen by the choice), "
        "the subset read back from its results file as `layerwise export --from` reads it (the one chosen on most dev "
        "splits), exported with built-in sentence-transformers modules only, and loaded with "
        "`SentenceTransformer(folder)` (no `trust_remote_code`).", "",
        "## Results", "", *_rows(parts), "",
        f"STS-B test: {first['test_pairs']} pairs, cosine of the two vectors against the gold score. \"original\" is "
        "the installed sentence-transformers model with its own modules (mean of the last layer, normalized). Speed: "
        f"the first {first['speed_settings']['sentences']} distinct STS-B test sentences, batch "
        f"{first['speed_settings']['batch_size']}, {first['speed_settings']['repeats']} timed passes per model "
        f"interleaved with the other's, the median pass; {first['speed_settings']['threads']} torch threads on CPU. "
        "The ratio comes from one run: the load average at its end is in each part's record (another job on the "
        "2 cores slows both models alike, but not exactly).", "",
        "## What this shows", "", *_findings(parts), "",
        "Exported modules: " + ", ".join(f"`{m}`" for m in first["modules"]) + ".", "",
        "## The same by hand", "",
        "```bash",
        "layerwise search --model all-MiniLM-L6-v2 --dataset stsb --split dev --no-head --output runs/search",
        "layerwise export all-MiniLM-L6-v2 runs/minilm-lc --from runs/search/<the .json it wrote>",
        "python -c \"from sentence_transformers import SentenceTransformer as S; "
        "print(S('runs/minilm-lc').encode(['a sentence']).shape)\"",
        "```", "",
        "## Provenance", "", *provenance_lines(parts),
        *[f"- {Path(p.payload['model']).name}: load average at the end "
          f"{p.payload['load_average_at_end']}, {p.payload['seconds']:.0f} s" for p in parts], "",
    ]
    return [write_text(ctx.output / f"{NAME}.md", "\n".join(lines))]


PAGE = register(ResultsPage(
    name=NAME, method="export", title=TITLE, models=MODELS, data=("stsb",),
    grid={"models": list(MODELS)}, settings=asdict(ExportPageConfig()), run=run, render=render,
    # the exporter and what it exports (there is no methods/export package): the subset search of the LC method,
    # the folder writers, the embedder the exported folder is compared with, and the shared floors
    measures=("src/layerwise/export", "src/layerwise/methods/lc", "src/layerwise/benchmarks/export_page.py",
              "src/layerwise/benchmarks/lc/run.py", "src/layerwise/encode/embedders.py", *SHARED_SOURCES)))
