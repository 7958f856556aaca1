"""The page's data: the distillation corpus (every unlabeled sentence available here, deduplicated), STS-B dev and
the test sets, read through the project's loaders.

The corpus pools the wiki head, the SentEval transfer sentences, the Quora questions and the SNLI sentences, keeps
each sentence once, and leaves out every sentence of the dev and test pairs (the students never see a sentence they
are scored on, even unlabeled); ``limit`` keeps a seeded sample.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from layerwise.benchmarks.page_parts import sts_checksum
from layerwise.data import available_sts, available_transfer, load_sts, load_transfer, load_wiki_head, snli_sentences
from layerwise.data.checksum import content_checksum
from layerwise.evaluation.retrieval import load_quora_retrieval

__all__ = ["CORPUS_SOURCES", "PageData", "page_data"]

CORPUS_SOURCES = ("wiki", "senteval", "quora", "snli")


def _source(name: str, data_dir) -> list[str]:
    if name == "wiki":
        return load_wiki_head(data_dir)
    if name == "snli":
        return snli_sentences(data_dir)
    if name == "quora":
        return load_quora_retrieval(data_dir, split="all").corpus
    if name == "senteval":
        texts: list[str] = []
        for task in available_transfer(data_dir):
            d = load_transfer(task, data_dir=data_dir)
            texts += list(d.sentences) + list(d.sentences2 or [])
        return texts
    raise ValueError(f"unknown corpus source {name!r}; valid: {', '.join(CORPUS_SOURCES)}")


@dataclass(frozen=True)
class PageData:
    corpus: list[str]
    counts: dict  # sentences per source (before deduplication), distinct, left out (in dev or test), kept
    dev: object  # STSData
    tests: dict  # name -> STSData

    def checksums(self) -> dict:
        return {"corpus": content_checksum(self.corpus), "dev": sts_checksum(self.dev),
                "tests": {name: sts_checksum(d) for name, d in sorted(self.tests.items())}}


def page_data(sources, tests, *, limit: int | None, seed: int, data_dir=None) -> PageData:
    """The corpus of ``sources``, STS-B dev, and each of ``tests`` that is present (SICK-R: all 9927 pairs, as
    MTEB; STS12-16: every subset pooled, aggregation ``all``)."""
    present = set(available_sts(data_dir)) | {"stsb"}
    dev = load_sts("stsb", split="dev", data_dir=data_dir)
    test_sets = {name: load_sts(name, split="all" if name == "sickr" else None, data_dir=data_dir)
                 for name in tests if name in present}
    counts: dict = {}
    pooled: list[str] = []
    for name in sources:
        texts = [t.strip() for t in _source(name, data_dir) if t.strip()]
        counts[name] = len(texts)
        pooled += texts
    distinct = list(dict.fromkeys(pooled))
    scored = {t for d in [dev, *test_sets.values()] for t in (*d.sentences1, *d.sentences2)}
    corpus = [t for t in distinct if t not in scored]
    counts.update({"distinct": len(distinct), "left_out_scored": len(distinct) - len(corpus)})
    if limit is not None and limit < len(corpus):
        keep = np.sort(np.random.default_rng(seed).choice(len(corpus), limit, replace=False))
        corpus = [corpus[i] for i in keep]
    counts["kept"] = len(corpus)
    return PageData(corpus=corpus, counts=counts, dev=dev, tests=test_sets)
