"""The quadratic forms of every layer subset, built in tiles (the engine of :mod:`layerwise.methods.lc.search`).

For pair ``i`` the blocks ``G[l, m, :] = [<a_l, b_m> | <a_l, a_m> | <b_l, b_m>]`` (3n numbers for the n pairs) give
a subset ``D``'s three sums ``S(D) = x_D^T G x_D`` (x_D its indicator), and its cosine
``S_ab / sqrt(S_aa S_bb)``. The hidden states are split in two: B, the lowest ``k_B`` states, and A, the rest.
For ``D = a + b`` (a within A, b within B)

    S(a + b) = Q_B[b] + Q_A[a] + 2 sum_{j in b} U_a[j],      U_a[j] = sum_{i in a} G[i, j],

where ``Q_B`` holds ``x_b^T G_BB x_b`` for every subset b of B (a table of ``2**k_B`` rows of 3n numbers, built
once by doubling, with additions only). For each a the rows of a tile are then one matrix product,
``[x_b, 1] @ [2 U_a; Q_A[a]]`` (an inner dimension of ``k_B + 1``), plus the table's rows. ``k_B`` is about half
the states (8 for 13 states, 13 for 25; at most 13, and the table within :data:`TABLE_BYTES`), so both the table
and the A subsets stay small. Tiles of a few hundred subsets stay in the cache, a block of table rows serves a
group of A subsets in turn, and no (n_subsets, 3n) array is ever built. A size cap keeps, for each a, the table's
rows of at most ``max_layers - |a|`` states: the table's rows are sorted by size, so these are a prefix.

Bit ``l`` of a subset's ``bits`` (an int64) is set when hidden state ``l`` is in it.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Executor
from dataclasses import dataclass
from itertools import combinations

import numpy as np

__all__ = ["TABLE_BYTES", "SubsetGram", "Tile", "pair_gram", "popcount"]

TABLE_BYTES = 256 * 2**20  # the Q_B table's size limit (2**k_B rows of 3n doubles)


@dataclass
class Tile:
    """Rows of subsets to score together: their ``bits`` (m,) and, per A subset, a block of the B table's rows."""

    bits: np.ndarray  # (m,) int64
    segments: list[tuple[int, int, int, int]]  # (A subset's index in its group, tile rows lo:hi, first table row)
    w: np.ndarray | None  # (g, k_B + 1, 3n) [2 U_a; Q_A[a]] of the group's A subsets; None when A is empty


def popcount(bits: np.ndarray) -> np.ndarray:
    """Number of states in each subset: ``bits`` (m,) int64 -> (m,) int64."""
    octets = np.ascontiguousarray(bits, dtype=np.int64).view(np.uint8).reshape(-1, 8)
    return _BYTE_COUNTS[octets].sum(axis=1, dtype=np.int64)


_BYTE_COUNTS = np.array([bin(i).count("1") for i in range(256)], dtype=np.int64)


def pair_gram(a: np.ndarray, b: np.ndarray, cols: np.ndarray, pool: Executor | None = None) -> np.ndarray:
    """G (K, K, 3n) float64 of the pairs ``cols`` of ``a, b`` (n, K, d): ``[<a_l, b_m> | <a_l, a_m> | <b_l, b_m>]``.

    Computed a few pairs at a time (float64 copies of a chunk; in ``pool``'s threads when given), symmetrised:
    x^T G x only sees the symmetric part. Each block is computed the same way, so a pair whose sides are equal gets
    three equal columns everywhere below, and its cosine is exactly 1.0.
    """
    n, k, d = len(cols), a.shape[1], a.shape[2]
    out = np.empty((3, n, k, k))
    step = max(1, 2**18 // (k * d))  # pairs per chunk: 2 MB of float64 per side

    def chunk(lo: int) -> None:
        idx = cols[lo : lo + step]
        ca, cb = a[idx].astype(np.float64), b[idx].astype(np.float64)
        for blk, (x, y) in enumerate(((ca, cb), (ca, ca), (cb, cb))):
            np.matmul(x, y.transpose(0, 2, 1), out=out[blk, lo : lo + len(idx)])

    starts = range(0, n, step)
    for _ in (pool.map(chunk, starts) if pool is not None else map(chunk, starts)):
        pass
    out = 0.5 * (out + out.transpose(0, 1, 3, 2))
    return np.ascontiguousarray(out.transpose(2, 3, 0, 1)).reshape(k, k, 3 * n)


class SubsetGram:
    """Per-pair Gram blocks of the chosen pairs, the B table, and tiles of subset quadratic forms.

    ``a, b``: per-layer vectors (n, K, d); ``cols``: the pairs to keep, in the order the cosines' columns take;
    ``pool``: threads for the Gram blocks.
    """

    def __init__(self, a: np.ndarray, b: np.ndarray, cols: np.ndarray, pool: Executor | None = None):
        self.G = pair_gram(a, b, cols, pool)
        self.n = len(cols)
        self.k = a.shape[1]
        fits = max(1, int(np.log2(max(2, TABLE_BYTES // (24 * self.n)))))  # the largest table within TABLE_BYTES
        self.k_b = min(self.k, fits, max(8, (self.k + 1) // 2), 13)  # about half the states (A stays small), at most
        # 13 (8,191 rows: a size cap uses only the table's small subsets)
        self.k_a = self.k - self.k_b
        masks = np.arange(2 ** self.k_b, dtype=np.int64)
        sizes = popcount(masks)
        self.b_order = masks[np.lexsort((masks, sizes))]  # B subsets by size, then mask
        self.b_count = np.searchsorted(sizes[self.b_order], np.arange(self.k_b + 1), side="right")  # size <= s
        x_b = ((self.b_order[:, None] >> np.arange(self.k_b)) & 1).astype(np.float64)
        self.x_b = np.hstack([x_b, np.ones((len(x_b), 1))])  # (2**k_B, k_B + 1): [x_b, 1], rows in b_order
        self.q_b = self._table()[self.b_order]  # (2**k_B, 3n), rows in b_order: a size cap keeps a prefix

    def _table(self) -> np.ndarray:
        """``Q_B`` (2**k_B, 3n): row ``mask`` holds x^T G_BB x of that subset of B, by doubling (additions only)."""
        G = self.G
        table = np.zeros((2 ** self.k_b, G.shape[2]))
        cross = np.zeros((2 ** max(0, self.k_b - 1), G.shape[2]))  # sum_{j in mask} G[k, j], masks of states < k
        for k in range(self.k_b):
            half = 2**k
            for j in range(k):
                np.add(cross[: 2**j], G[k, j], out=cross[2**j : 2 ** (j + 1)])
            np.multiply(cross[:half], 2.0, out=table[half : 2 * half])
            table[half : 2 * half] += G[k, k]
            table[half : 2 * half] += table[:half]
        return table

    def cosines(self, S: np.ndarray) -> np.ndarray:
        """Quadratic forms S (m, 3n) -> cosines (m, n)."""
        n = self.n
        den = np.multiply(S[:, n : 2 * n], S[:, 2 * n :])
        np.maximum(den, 1e-300, out=den)
        np.sqrt(den, out=den)
        return np.divide(S[:, :n], den, out=den)

    def quadratic_forms(self, tile: Tile) -> np.ndarray:
        """S (m, 3n) of a tile's subsets."""
        if tile.w is None and len(tile.segments) == 1:  # A is empty: the table's rows themselves (read only)
            _, lo, hi, t = tile.segments[0]
            return self.q_b[t : t + hi - lo]
        S = np.empty((len(tile.bits), self.q_b.shape[1]))
        for g, lo, hi, t in tile.segments:
            if tile.w is None:
                S[lo:hi] = self.q_b[t : t + hi - lo]
            else:
                np.matmul(self.x_b[t : t + hi - lo], tile.w[g], out=S[lo:hi])
                S[lo:hi] += self.q_b[t : t + hi - lo]
        return S

    def _weights(self, a_masks: np.ndarray) -> np.ndarray:
        """[2 U_a; Q_A[a]] (g, k_B + 1, 3n) for the A subsets ``a_masks`` (bit i: state k_B + i)."""
        kb, ka, G = self.k_b, self.k_a, self.G
        x = ((a_masks[:, None] >> np.arange(ka)) & 1).astype(np.float64)  # (g, k_A)
        u = x @ G[kb:, :kb].reshape(ka, -1)  # (g, k_B * 3n)
        pairs = (x[:, :, None] * x[:, None, :]).reshape(len(x), ka * ka)
        q_a = pairs @ G[kb:, kb:].reshape(ka * ka, -1)  # (g, 3n)
        return np.concatenate([2.0 * u.reshape(len(x), kb, -1), q_a[:, None, :]], axis=1)

    def tiles(self, max_layers: int, rows: int, group: int = 64) -> Iterator[Tile]:
        """Tiles of at most ``rows`` subsets covering every non-empty subset of at most ``max_layers`` states.

        A subsets are taken ``group`` at a time (their weights computed together); within a group, a block of
        ``rows`` table rows serves every A subset in turn, so the block is read from the cache, not from memory.
        """
        a_all = np.sort(np.array([sum(1 << i for i in c) for s in range(min(max_layers, self.k_a) + 1)
                                  for c in combinations(range(self.k_a), s)], dtype=np.int64))
        for g0 in range(0, len(a_all), group):
            a_masks = a_all[g0 : g0 + group]
            w = self._weights(a_masks) if self.k_a else None
            lo_a = (a_masks == 0).astype(np.int64)  # the empty subset is not searched
            hi_a = self.b_count[np.minimum(self.k_b, max_layers - popcount(a_masks))]
            tile = _TileBuilder(rows, w)
            for start in range(0, int(hi_a.max()), rows):
                for g, a_mask in enumerate(a_masks):
                    lo, hi = max(int(lo_a[g]), start), min(int(hi_a[g]), start + rows)
                    while lo < hi:
                        lo = tile.add(g, (int(a_mask) << self.k_b) | self.b_order[lo:hi], lo)
                        if tile.full:
                            yield tile.take()
            if tile.fill:
                yield tile.take()


class _TileBuilder:
    """Collects segments (one A subset, a run of table rows) into tiles of ``rows`` subsets."""

    def __init__(self, rows: int, w: np.ndarray | None):
        self.rows, self.w = rows, w
        self.bits: list[np.ndarray] = []
        self.segments: list[tuple[int, int, int, int]] = []
        self.fill = 0

    @property
    def full(self) -> bool:
        return self.fill == self.rows

    def add(self, g: int, bits: np.ndarray, lo: int) -> int:
        """Add as many of the run's subsets (table rows ``lo``...) as fit; returns the next table row."""
        take = min(len(bits), self.rows - self.fill)
        self.segments.append((g, self.fill, self.fill + take, lo))
        self.bits.append(bits[:take])
        self.fill += take
        return lo + take

    def take(self) -> Tile:
        tile = Tile(np.concatenate(self.bits), self.segments, self.w)
        self.bits, self.segments, self.fill = [], [], 0
        return tile
