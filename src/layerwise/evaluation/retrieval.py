"""Semantic search evaluation: exact and FAISS indexes, MRR@10 and recall@k, time per query, index memory.

Speed is measured two ways: every query in one batch (``ms_per_query``: the batch's time over its queries) and one
query at a time (``ms_per_query_batch1``: the mean over the first 1,000 queries, each searched alone, as a service
answering one request sees it). Memory is the serialised index (``index_bytes``) and the index's resident size
(``index_resident_bytes``: the bytes of the arrays it holds in memory, :meth:`FaissIndex.resident_bytes`; the
normalised matrix for the exact search). IVF indexes default to ``nlist = 1024`` cells, the paper's setting (Oh et al. 2022); a corpus smaller than
``nlist`` is refused by :func:`check_nlist` before anything is encoded.

Quora duplicate questions (BiMPM split): every question of the chosen split is in the corpus; each first question
of a duplicate pair is a query whose relevant items are its duplicate partners; the query itself is never counted
as a hit. A BEIR-style folder (:func:`layerwise.data.readers.read_beir`, :func:`beir_retrieval`): queries are
texts of their own, searched in the corpus; a document is relevant to a query when its judgement is > 0.
Embeddings are L2-normalised, so inner product = cosine.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np

from layerwise.data.nli import read_lines, require_dir

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_NLIST", "RetrievalData", "FaissIndex", "QueryRetrievalData", "beir_retrieval", "check_nlist",
           "evaluate_retrieval", "exact_topk", "first_relevant_ranks", "load_quora_retrieval", "reciprocal_ranks",
           "retrieval_metrics", "search"]

DEFAULT_NLIST = 1024  # IVF cells, as in the paper (Oh et al. 2022)
LATENCY_QUERIES = 1000  # queries timed one at a time (batch 1)


@dataclass(frozen=True)
class RetrievalData:
    corpus: list[str]  # (n,) unique texts
    queries: list[int]  # (m,) corpus index of each query text
    relevant: list[frozenset[int]]  # (m,) corpus indices relevant to each query
    split: str
    source: str


@dataclass(frozen=True)
class QueryRetrievalData:
    """Queries with texts of their own, searched in a corpus (a BEIR folder, see :func:`beir_retrieval`)."""

    corpus: list[str]  # (n,) document texts
    corpus_ids: list[str]  # (n,) their ids in the source
    query_texts: list[str]  # (m,) query texts
    query_ids: list[str]  # (m,) their ids in the source
    relevant: list[frozenset[int]]  # (m,) corpus indices relevant to each query (judgement > 0)
    split: str
    source: str
    name: str


def beir_retrieval(beir) -> QueryRetrievalData:
    """A :class:`~layerwise.data.readers.BeirData` as a search task: the queries with at least one document judged
    relevant (> 0); a ``ValueError`` when no query has one."""
    ids = list(beir.corpus)
    where = {d: i for i, d in enumerate(ids)}
    qids = [q for q in beir.queries if any(s > 0 for s in beir.qrels.get(q, {}).values())]
    if not qids:
        raise ValueError(f"{beir.source or beir.name}: no query of split {beir.split!r} has a document judged "
                         "relevant (score > 0); pass a split whose qrels hold positive judgements")
    relevant = [frozenset(where[d] for d, s in beir.qrels[q].items() if s > 0) for q in qids]
    return QueryRetrievalData(corpus=[beir.corpus[d] for d in ids], corpus_ids=ids,
                              query_texts=[beir.queries[q] for q in qids], query_ids=qids, relevant=relevant,
                              split=beir.split, source=str(beir.source), name=beir.name)


def load_quora_retrieval(data_dir=None, split: str = "dev") -> RetrievalData:
    """Quora BiMPM ``dev``, ``test`` or ``all`` (``label<TAB>q1<TAB>q2<TAB>pair_id``) as a retrieval task."""
    if split not in ("dev", "test", "all"):
        raise ValueError(f"unknown Quora split {split!r}; valid: 'dev', 'test', 'all'")
    folder = require_dir(data_dir, "quora")
    rows = []
    for part in ("dev", "test") if split == "all" else (split,):
        for i, line in enumerate(read_lines(folder / f"{part}.tsv"), 1):
            if not line:
                continue
            f = line.split("\t")
            if len(f) != 4 or f[0] not in ("0", "1"):
                raise ValueError(f"{folder / f'{part}.tsv'} line {i}: expected label<TAB>q1<TAB>q2<TAB>id")
            rows.append((f[0] == "1", f[1], f[2]))
    corpus = list(dict.fromkeys(t for _, a, b in rows for t in (a, b)))
    where = {t: i for i, t in enumerate(corpus)}
    partners: dict[int, set[int]] = {}
    for dup, a, b in rows:
        if dup and a != b:
            partners.setdefault(where[a], set()).add(where[b])
            partners.setdefault(where[b], set()).add(where[a])
    queries = list(dict.fromkeys(where[a] for dup, a, b in rows if dup and a != b))
    return RetrievalData(corpus, queries, [frozenset(partners[q]) for q in queries], split, str(folder))


def _normalise(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def exact_topk(queries: np.ndarray, corpus: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Reference top-k by cosine: (m, d), (n, d) -> scores (m, k), ids (m, k); ties go to the lower id."""
    return _topk_normalised(_normalise(queries), _normalise(corpus), k)


def _topk_normalised(q: np.ndarray, c: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    k = min(int(k), len(c))
    sims = q @ c.T
    ids = np.argsort(-sims, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(sims, ids, axis=1), ids


def check_nlist(nlist: int, n_corpus: int, *, indexes=("ivf",)) -> None:
    """Refuse an IVF index of more cells than corpus texts (k-means needs a text per cell), naming the largest valid
    ``nlist``; nothing to check when ``indexes`` has no ``ivf``. Call it before encoding."""
    if "ivf" in indexes and int(nlist) > int(n_corpus):
        raise ValueError(f"nlist={nlist} IVF cells for a corpus of {n_corpus} texts: the largest valid nlist is "
                         f"{n_corpus} (one text per cell at least); give nlist <= {n_corpus} or leave out the ivf index")


class FaissIndex:
    """A FAISS inner-product index over L2-normalised vectors: ``flat`` (exact) or ``ivf`` (nlist cells, nprobe)."""

    def __init__(self, kind: str = "flat", *, nlist: int = DEFAULT_NLIST, nprobe: int = 10, seed: int = 0):
        if kind not in ("flat", "ivf"):
            raise ValueError(f"unknown index kind {kind!r}; valid: 'flat', 'ivf'")
        self.kind, self.nlist, self.nprobe, self.seed = kind, int(nlist), int(nprobe), int(seed)

    def fit(self, corpus: np.ndarray) -> "FaissIndex":
        try:
            import faiss
        except ImportError:
            raise ImportError("FAISS is required for FaissIndex: pip install 'layerwise[faiss]' (faiss-cpu)") from None
        c = _normalise(corpus)
        d = c.shape[1]
        if self.kind == "flat":
            index = faiss.IndexFlatIP(d)
        else:
            check_nlist(self.nlist, len(c))
            index = faiss.IndexIVFFlat(faiss.IndexFlatIP(d), d, self.nlist, faiss.METRIC_INNER_PRODUCT)
            index.cp.seed = self.seed
            index.train(c)
            index.nprobe = self.nprobe
        index.add(c)
        self.index_ = index
        return self

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        if not hasattr(self, "index_"):
            raise RuntimeError("FaissIndex is not fitted: call fit(corpus) first")
        return self.index_.search(_normalise(queries), int(k))

    def memory_bytes(self) -> int:
        """Size of the serialised index (vectors, centroids and lists)."""
        import faiss

        return int(faiss.serialize_index(self.index_).nbytes)

    def resident_bytes(self) -> int:
        """Bytes of the arrays the index holds in memory: the vectors (flat); the centroids, and per inverted list
        its codes and 8-byte ids (ivf). The allocator's spare capacity is not counted."""
        import faiss

        index = self.index_
        if self.kind == "flat":
            return int(index.ntotal) * int(index.d) * 4
        ivf = faiss.extract_index_ivf(index)
        lists = ivf.invlists
        held = sum(int(lists.list_size(i)) for i in range(ivf.nlist)) * (int(lists.code_size) + 8)
        return held + int(ivf.quantizer.ntotal) * int(ivf.d) * 4


def first_relevant_ranks(ids: np.ndarray, relevant: list[frozenset[int]], k: int = 10) -> np.ndarray:
    """Each query's rank (1..k) of its first relevant result among ``ids[:, :k]``, 0 where none is (m,) int64:
    the query's reciprocal rank@k is ``1 / rank`` (0 for none), so MRR@k is their mean."""
    if len(ids) != len(relevant):
        raise ValueError(f"{len(ids)} result rows for {len(relevant)} queries")
    out = np.zeros(len(ids), dtype=np.int64)
    for q, (row, rel) in enumerate(zip(ids, relevant)):
        out[q] = next((i + 1 for i, x in enumerate(row[:k]) if x in rel), 0)
    return out


def reciprocal_ranks(first_ranks: np.ndarray) -> np.ndarray:
    """Per-query reciprocal rank (float64) from :func:`first_relevant_ranks` (0 stays 0)."""
    r = np.asarray(first_ranks, dtype=np.float64)
    return np.divide(1.0, r, out=np.zeros_like(r), where=r > 0)


def retrieval_metrics(ids: np.ndarray, relevant: list[frozenset[int]], ks=(1, 5, 10), *,
                      first_ranks: np.ndarray | None = None) -> dict[str, float]:
    """MRR@10 and recall@k (x100) from ranked corpus ids (m, >= max k), query itself already removed;
    ``first_ranks``: :func:`first_relevant_ranks` at k = 10 where the caller has them already."""
    rr = reciprocal_ranks(first_relevant_ranks(ids, relevant, 10) if first_ranks is None else first_ranks)
    rec = {k: [len(rel & set(row[:k].tolist())) / len(rel) for row, rel in zip(ids, relevant)] for k in ks}
    out = {"mrr@10": 100 * float(np.mean(rr))}
    out.update({f"recall@{k}": 100 * float(np.mean(v)) for k, v in rec.items()})
    return out


def search(data: RetrievalData | QueryRetrievalData, corpus_emb: np.ndarray, *, index: FaissIndex | None = None,
           k: int = 10, query_emb: np.ndarray | None = None) -> dict:
    """Run every query; metrics, ms per query, index memory, and each query's ``first_relevant_ranks`` (a list).

    :class:`RetrievalData`: the queries are corpus rows (``query_emb`` None), each one's own row is dropped from its
    results. :class:`QueryRetrievalData`: ``query_emb`` (m, d) holds the queries' vectors.
    ``index=None`` uses :func:`exact_topk` (numpy), the reference the FAISS results are tested against.
    """
    if len(corpus_emb) != len(data.corpus):
        raise ValueError(f"{len(corpus_emb)} corpus embeddings for {len(data.corpus)} corpus texts")
    own = isinstance(data, RetrievalData)
    if own != (query_emb is None):
        raise ValueError("pass query_emb with a QueryRetrievalData (queries of their own), and only then")
    if own:
        q, skip = corpus_emb[np.asarray(data.queries)], list(data.queries)
    else:
        if len(query_emb) != len(data.relevant):
            raise ValueError(f"{len(query_emb)} query embeddings for {len(data.relevant)} queries")
        q, skip = np.asarray(query_emb), [None] * len(query_emb)
    extra = 1 if own else 0
    t0 = time.perf_counter()
    if index is None:
        normalised = _normalise(corpus_emb)  # the exact "index": built once, as FAISS builds its own
        build, memory = time.perf_counter() - t0, int(normalised.nbytes)
        resident = memory

        def run(x):
            return _topk_normalised(_normalise(x), normalised, k + extra)[1]
    else:
        index.fit(corpus_emb)
        build = time.perf_counter() - t0
        memory = index.memory_bytes()
        resident = index.resident_bytes()

        def run(x):
            return index.search(x, k + extra)[1]
    t0 = time.perf_counter()
    ids = run(q)
    seconds = time.perf_counter() - t0
    single = q[: min(len(q), LATENCY_QUERIES)]
    t0 = time.perf_counter()
    for i in range(len(single)):
        run(single[i : i + 1])
    batch1 = time.perf_counter() - t0
    rows = []
    for row, qi in zip(ids.tolist(), skip):
        kept = [x for x in row if x != qi][:k]
        rows.append(kept + [-1] * (k - len(kept)))  # FAISS pads missing results with -1 too
    rows = np.array(rows)
    first = first_relevant_ranks(rows, data.relevant, 10)
    out = retrieval_metrics(rows, data.relevant, first_ranks=first)
    out.update({"first_relevant_ranks": first.tolist(),  # for paired tests
                "ms_per_query": 1000 * seconds / max(1, len(q)), "build_seconds": build, "index_bytes": memory,
                "n_queries": len(q), "n_corpus": len(data.corpus),
                "ms_per_query_batch1": 1000 * batch1 / max(1, len(single)), "n_latency_queries": len(single),
                "index_resident_bytes": resident,
                "index": "exact (numpy)" if index is None else
                f"faiss {index.kind}" + (f" nlist={index.nlist} nprobe={index.nprobe}" if index.kind == "ivf" else "")})
    return out


INDEX_KINDS = ("exact", "flat", "ivf")


def evaluate_retrieval(encode, data: RetrievalData | QueryRetrievalData, *, indexes=("exact", "flat"),
                       nlist: int = DEFAULT_NLIST, nprobe: int = 10) -> list[dict]:
    """Embed ``data`` with ``encode`` (texts -> (n, d), e.g. an estimator's ``encode``) and :func:`search` it with
    each of ``indexes`` (``exact``: numpy; ``flat``, ``ivf``: FAISS); one :func:`search` dict per index.
    An ``nlist`` larger than the corpus is refused before anything is encoded (:func:`check_nlist`)."""
    unknown = [k for k in indexes if k not in INDEX_KINDS]
    if unknown or not indexes:
        raise ValueError(f"indexes={list(indexes)!r}: use one or more of {', '.join(INDEX_KINDS)}")
    check_nlist(nlist, len(data.corpus), indexes=indexes)
    corpus = np.asarray(encode(list(data.corpus)), dtype=np.float32)
    queries = None
    if isinstance(data, QueryRetrievalData):
        queries = np.asarray(encode(list(data.query_texts)), dtype=np.float32)
    return [search(data, corpus, query_emb=queries,
                   index=None if kind == "exact" else FaissIndex(kind, nlist=nlist, nprobe=nprobe))
            for kind in indexes]
