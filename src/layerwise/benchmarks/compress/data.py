"""The page's data: the distillation corpus (every unlabeled sentence available here, deduplicated), STS-B dev and
the test sets, read through the project's loaders.

The corpus pools the wiki head, the SentEval transfer sentences, the Quora questions and the SNLI sentences, keeps
each sentence once, and leaves out every sentence of the dev and test pairs (the students never see a sentence they
are scored on, even unlabeled); ``limit`` keeps a seeded sample. ``train_pairs="stsb"`` adds STS-B's train pairs
(5,749; scores 0-5, which the Compressor maps to [0, 1]) as the students' second loss (``Compressor(train_pairs=)``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from layerwise.benchmarks.page_parts import sts_checksum
from layerwise.data import available_sts, available_transfer, load_sts, load_transfer, load_wiki_head, snli_sentences
from layerwise.data.checksum import content_checksum
from layerwise.evaluation.retrieval import load_quora_retrieval

__all__ = ["CORPUS_SOURCES", "TRAIN_PAIRS", "PageData", "page_data"]

CORPUS_SOURCES = ("wiki", "senteval", "quora", "snli")
TRAIN_PAIRS = ("stsb",)  # labelled pairs the page can give its students: the train split of these sets


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
    train_pairs: object = None  # STSData: the students' labelled pairs (None: the MSE alone)

    def checksums(self) -> dict:
        out = {"corpus": content_checksum(self.corpus), "dev": sts_checksum(self.dev),
               "tests": {name: sts_checksum(d) for name, d in sorted(self.tests.items())}}
        if self.train_pairs is not None:  # absent otherwise: the parts stored before it keep their key
            out["train_pairs"] = sts_checksum(self.train_pairs)
        return out

    def inputs(self) -> dict:
        """The Compressor's data arguments beside the corpus and dev: ``tests`` (and ``train_pairs`` when given)."""
        return {"tests": self.tests, **({} if self.train_pairs is None else {"train_pairs": self.train_pairs})}


def page_data(sources, tests, *, limit: int | None, seed: int, data_dir=None, train_pairs: str | None = None
              ) -> PageData:
    """The corpus of ``sources``, STS-B dev, and each of ``tests`` that is present (SICK-R: all 9927 pairs, as
    MTEB; STS12-16: every subset pooled, aggregation ``all``); ``train_pairs``: a name of :data:`TRAIN_PAIRS`, whose
    train split the students also learn from (None: none)."""
    if train_pairs is not None and train_pairs not in TRAIN_PAIRS:
        raise ValueError(f"train_pairs={train_pairs!r} is not one of {', '.join(TRAIN_PAIRS)}")
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
    train = None if train_pairs is None else load_sts(train_pairs, split="train", data_dir=data_dir)
    return PageData(corpus=corpus, counts=counts, dev=dev, tests=test_sets, train_pairs=train)
