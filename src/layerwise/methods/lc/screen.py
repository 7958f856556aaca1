"""The closed-form ridge screen of the BERT-LC transfer protocol: every layer subset scored in one pass.

See ``methods/lc/transfer.py`` for where it sits in the protocol and ``RidgeScreen`` for the algebra.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from scipy.linalg import blas

from layerwise.methods.lc.features import TransferFeatures

__all__ = ["DEFAULT_RIDGE_ALPHA", "ENGINES", "RidgeScreen"]

DEFAULT_RIDGE_ALPHA = 1e-3  # penalty relative to the mean feature variance (scale-free), see RidgeScreen
#: How pair tasks' screens are computed: "fast" (the default) or "reference", the earlier implementation kept as the
#: slow twin and as the baseline of the ``transfer-speed`` benchmark; both give the same scores (see RidgeScreen).
ENGINES = ("fast", "reference")


class RidgeScreen:
    """Held-out accuracy of a closed-form ridge classifier for every layer subset and every split.

    For a subset S the features are ``x_S = mean_{l in S} x_l`` (single-sentence tasks) or
    ``pair_features`` of the two sentences' ``x_S`` (pair tasks). The classifier regresses one-hot labels
    with an intercept: ``W = (X_c^T X_c + a I)^{-1} X_c^T Y_c`` on centred training features, predicting the
    arg-max column. The penalty is scale-free: ``a = alpha * trace(X_c^T X_c) / p`` (p features).

    Single-sentence tasks never build ``x_S``: the Gram matrix of the concatenated layers ``[x_0 .. x_L]``
    is computed once per part (train-dev, and the held-out part of each split, subtracted to get the
    training part), and ``X_S^T X_S`` is a weighted sum of its per-layer-pair blocks. Pair tasks build
    their features per subset. Either way the sums over *all* rows are kept (up to ``cache_bytes``), so a
    later call on a large part of the data (the next outer split's train-dev) costs only the rows left out.
    Gram matrices are float64 ``x.T @ x`` in numpy, which BLAS computes as a symmetric rank-k update.
    The slow twin the tests compare with is scikit-learn's ``Ridge`` on explicitly built features.

    Pair tasks cost one ``p x p`` held-out Gram and one Cholesky factorisation (p = 4d) per subset and inner split;
    neither can be shared (the features are not linear in the layers), so ``engine="fast"`` does the same float64
    arithmetic with less around it: each held-out Gram is subtracted inside BLAS (``dsyrk`` with beta = 1, one
    triangle, into buffers reused across subsets), the centring is a rank-1 update of that triangle, and the ten
    systems are solved by triangular solves on the batched factors. ``engine="reference"`` is the earlier code
    (full matrices, ``torch.cholesky_solve``); the two agree to float64 rounding (tests), so their accuracies and
    choices are equal unless a held-out prediction sits within ~1e-10 of a tie between two classes.
    """

    def __init__(self, data: TransferFeatures, *, alpha: float = DEFAULT_RIDGE_ALPHA, kind: str = "mean",
                 dim: int | None = None, chunk_bytes: float = 6e8, cache_bytes: float = 3e9, engine: str = "fast"):
        if dim is not None and (int(dim) < 1 or data.is_pair):
            raise ValueError(f"screen dim must be a positive int for single-sentence tasks (got {dim}; "
                             f"pair task: {data.is_pair}); use dim=None for the full vectors")
        if not (math.isfinite(alpha) and alpha > 0):
            raise ValueError(f"ridge alpha must be a finite number above 0, got {alpha}; e.g. 1e-3 (the default)")
        if engine not in ENGINES:
            raise ValueError(f"unknown screen engine {engine!r}; valid: {', '.join(ENGINES)}")
        self.engine = engine
        self.dim = None if dim is None else int(dim)
        self.data = data
        self.alpha = float(alpha)
        self.kind = kind
        self.chunk_bytes = chunk_bytes
        self.cache_bytes = cache_bytes
        self._full: dict = {}  # key -> sums over every row of the task (see _part_stats)
        self._cached_bytes = 0
        self._onehot = np.eye(data.n_classes)[data.labels]

    @staticmethod
    def _stats(x: np.ndarray, y: np.ndarray) -> tuple:
        x = np.ascontiguousarray(x, dtype=np.float64)
        return x.T @ x, x.sum(0), x.T @ y, y.sum(0), x.shape[0]

    def _part_stats(self, key, build, rows: np.ndarray) -> tuple:
        """Sums (Gram, feature sums, X^T Y, label sums, n) over ``rows`` of the features ``build(rows)``.

        When ``rows`` is most of the task, the sums over all rows are computed once (kept under ``key``) and
        the rows left out subtracted: exact up to float64 rounding, and much cheaper across outer splits.
        """
        n_all = len(self.data)
        rest = np.setdiff1d(np.arange(n_all), rows)
        if len(rest) >= len(rows) or len(np.unique(rows)) != len(rows):
            return self._stats(build(rows), self._onehot[rows])
        full = self._full.get(key)
        if full is None:
            full = self._stats(build(np.arange(n_all)), self._onehot)
            size = full[0].nbytes
            if self._cached_bytes + size <= self.cache_bytes:
                self._full[key] = full
                self._cached_bytes += size
        if not len(rest):
            return full
        return tuple(a - b for a, b in zip(full, self._stats(build(rest), self._onehot[rest])))

    def scores(self, rows: np.ndarray, splits: Sequence[tuple[np.ndarray, np.ndarray]],
               subsets: Sequence[tuple[int, ...]]) -> np.ndarray:
        """Accuracy (0..1) of shape (len(subsets), len(splits)); split positions index into ``rows``."""
        rows = np.asarray(rows, dtype=np.int64)
        if self.data.is_pair:
            pair = self._pair_scores if self.engine == "fast" else self._pair_scores_reference
            return pair(rows, splits, subsets)
        data = self.data
        y = self._onehot[rows]
        labels = torch.from_numpy(data.labels[rows])
        src = data.first.mean if self.kind == "mean" else data.first.cls
        n_states, d = src.shape[1], src.shape[2]
        x_all = np.asarray(src[rows], dtype=np.float64)  # (n, K, d)
        if self.dim is not None and self.dim < d:
            x_all = x_all @ self.basis(torch.from_numpy(x_all)).numpy()
            d = self.dim
            total = self._stats(x_all.reshape(len(rows), -1), y)
        else:
            total = self._part_stats(None, lambda r: src[r].reshape(len(r), -1), rows)
        flat = x_all.reshape(len(rows), n_states * d)
        flat_t = torch.from_numpy(flat)
        member = torch.zeros(len(subsets), n_states, dtype=torch.float64)
        for i, sub in enumerate(subsets):
            member[i, list(sub)] = 1.0
        member /= member.sum(1, keepdim=True)  # row i: the averaging weights of subset i
        coef = _pair_coefficients(member)
        out = np.zeros((len(subsets), len(splits)))
        chunk = max(1, int(self.chunk_bytes // (8 * d * d * 3)))
        for j, (_, dev) in enumerate(splits):
            held = self._stats(flat[dev], y[dev])
            g, sx, xy, ys, n = (torch.from_numpy(np.asarray(a - b)) for a, b in zip(total, held))
            blocks = _symmetric_blocks(g.view(n_states, d, n_states, d))
            x_dev, y_dev = flat_t[dev], labels[dev]
            for c0 in range(0, len(subsets), chunk):
                m = member[c0:c0 + chunk]
                gs = (coef[c0:c0 + chunk] @ blocks).view(len(m), d, d)
                ss = m @ sx.view(n_states, d)
                xys = torch.einsum("bk,kdc->bdc", m, xy.view(n_states, d, -1))
                w, b = self.solve(gs, ss, xys, ys, int(n))
                # x_S w = sum_k m_k x_k w: every subset's predictions from one product with the layer-wise weights
                wk = (m[:, :, None, None] * w[:, None, :, :]).permute(1, 2, 0, 3).reshape(n_states * d, -1)
                pred = ((x_dev @ wk).view(len(dev), len(m), -1) + b[None]).argmax(2)
                out[c0:c0 + len(m), j] = (pred == y_dev[:, None]).double().mean(0).numpy()
        return out

    def _pair_scores(self, rows, splits, subsets) -> np.ndarray:
        """Pair tasks: ``[u, v, |u - v|, u * v]`` is not linear in the layers, so each subset's features are built;
        the training Gram of each split is the train-dev Gram minus the held-out rows' (one ``dsyrk`` in place)."""
        y = self._onehot[rows]
        labels = self.data.labels[rows]
        devs = [np.asarray(dev, dtype=np.int64) for _, dev in splits]
        out = np.zeros((len(subsets), len(splits)))
        buf = None  # (splits, p, p) float64, reused by every subset
        for i, s in enumerate(subsets):
            def build(r, s=s):
                return self.data.features(s, self.kind, rows=r)

            total = self._part_stats(("pair", tuple(s)), build, rows)
            x = np.asarray(build(rows), dtype=np.float64)
            if buf is None:
                buf = torch.empty((len(devs), x.shape[1], x.shape[1]), dtype=torch.float64)
            w, b = self._pair_solve(buf, total, x, y, devs)
            for j, dev in enumerate(devs):
                pred = (x[dev] @ w[j] + b[j]).argmax(1)
                out[i, j] = float(np.mean(pred == labels[dev]))
        return out

    def _pair_solve(self, buf: torch.Tensor, total: tuple, x: np.ndarray, y: np.ndarray, devs) -> tuple:
        """Ridge weights (S, p, C) and intercepts (S, C), numpy, of the S training parts "train-dev minus ``devs[j]``",
        from the train-dev sums ``total`` and the features ``x`` (n, p) of train-dev. ``buf`` (S, p, p) is scratch.

        Only the lower triangle (row-major) of each Gram is formed; the Cholesky factorisation reads no other."""
        g_all, s_all, xy_all, ys_all, n_all = total
        p = x.shape[1]
        gb = buf.numpy()
        n = np.empty(len(devs))
        rhs = np.empty((len(devs), p, y.shape[1]))
        mus, ybars, ridge = [], [], np.empty(len(devs))
        for j, dev in enumerate(devs):
            xd, yd = x[dev], y[dev]
            np.copyto(gb[j], g_all)
            # the F-ordered view of a row-major array is its transpose: its upper triangle is our lower one
            _in_place(gb[j], blas.dsyrk(-1.0, xd.T, beta=1.0, c=gb[j].T, trans=0, lower=0, overwrite_c=1))
            n[j] = n_all - len(dev)
            s_j = s_all - xd.sum(0)
            mu, ybar = s_j / n[j], (ys_all - yd.sum(0)) / n[j]
            _in_place(gb[j], blas.dsyr(-1.0 / n[j], s_j, a=gb[j].T, lower=0, overwrite_a=1))  # G - s s^T / n
            diag = gb[j].reshape(-1)[::p + 1]  # a writable view of the diagonal
            ridge[j] = max(self.alpha * diag.sum() / p, 1e-12)
            diag += ridge[j]
            rhs[j] = (xy_all - xd.T @ yd) - n[j] * mu[:, None] * ybar[None, :]
            mus.append(mu)
            ybars.append(ybar)
        chol, info = torch.linalg.cholesky_ex(buf)
        r = torch.from_numpy(rhs)
        w = torch.linalg.solve_triangular(chol.mT, torch.linalg.solve_triangular(chol, r, upper=False), upper=True)
        w = w.numpy()
        for j in torch.nonzero(info).flatten().tolist():  # not positive definite in floating point: least squares
            low = np.tril(gb[j])
            w[j] = np.linalg.lstsq(low + np.tril(low, -1).T, rhs[j], rcond=None)[0]
        b = np.stack([ybars[j] - mus[j] @ w[j] for j in range(len(devs))])
        return w, b

    def _pair_scores_reference(self, rows, splits, subsets) -> np.ndarray:
        """Pair tasks, the earlier implementation (``engine="reference"``): full Gram matrices per split, batched
        ``torch.cholesky_solve``. The slow twin of :meth:`_pair_scores`."""
        y = self._onehot[rows]
        labels = torch.from_numpy(self.data.labels[rows])
        out = np.zeros((len(subsets), len(splits)))
        for i, s in enumerate(subsets):
            def build(r, s=s):
                return self.data.features(s, self.kind, rows=r)

            total = self._part_stats(("pair", tuple(s)), build, rows)
            x = np.asarray(build(rows), dtype=np.float64)
            p = x.shape[1]
            g = np.empty((len(splits), p, p))
            sx, xy = np.empty((len(splits), p)), np.empty((len(splits), p, y.shape[1]))
            ys, n = np.empty((len(splits), y.shape[1])), np.empty(len(splits))
            for j, (_, dev) in enumerate(splits):  # training part = train-dev minus the held-out part
                held = self._stats(x[dev], y[dev])
                np.subtract(total[0], held[0], out=g[j])
                sx[j], xy[j], ys[j], n[j] = (a - b for a, b in zip(total[1:], held[1:]))
            w, b = self.solve(*(torch.from_numpy(a) for a in (g, sx, xy, ys, n)))
            x_t = torch.from_numpy(x)
            for j, (_, dev) in enumerate(splits):
                pred = (x_t[dev] @ w[j] + b[j]).argmax(1)
                out[i, j] = float((pred == labels[dev]).double().mean())
        return out

    def basis(self, x_all: torch.Tensor) -> torch.Tensor:
        """(d, dim): the top principal directions of the training rows' vectors pooled over every hidden state.

        Projecting every layer with one basis keeps a subset's mean the mean of the projections, so the Gram-block
        trick still holds; the screen then solves dim x dim systems instead of d x d (an approximation, used for
        large models only when asked, see ``dim``).
        """
        v = x_all.reshape(-1, x_all.shape[-1]).numpy()
        v = v - v.mean(0)
        _, vecs = torch.linalg.eigh(torch.from_numpy(v.T @ v))
        return vecs[:, -self.dim:].flip(1)

    def solve(self, g, s, xy, ys, n) -> tuple[torch.Tensor, torch.Tensor]:
        """Ridge weights (B, p, C) and intercepts (B, C) of B problems from their training sums:
        Gram ``g`` (B, p, p, overwritten), feature sums ``s`` (B, p), ``xy`` = X^T Y (B, p, C), label sums ``ys``
        ((C,) or (B, C)) and row counts ``n`` (a number or (B,))."""
        n = torch.as_tensor(n, dtype=torch.float64).reshape(-1, 1)
        ys = ys.reshape(-1, ys.shape[-1])
        mu, ybar = s / n, ys / n  # (B, p), (B or 1, C)
        g.sub_(n[:, :, None] * mu[:, :, None] * mu[:, None, :])  # centred Gram, in place
        xyc = xy - n[:, :, None] * mu[:, :, None] * ybar[:, None, :]
        p = g.shape[-1]
        a = (self.alpha * torch.diagonal(g, dim1=1, dim2=2).sum(1) / p).clamp_min(1e-12)
        torch.diagonal(g, dim1=1, dim2=2).add_(a[:, None])
        chol, info = torch.linalg.cholesky_ex(g)
        w = torch.cholesky_solve(xyc, chol)
        for i in torch.nonzero(info).flatten().tolist():  # not positive definite in floating point: least squares
            w[i] = torch.linalg.lstsq(g[i], xyc[i]).solution
        return w, ybar - torch.einsum("bp,bpc->bc", mu, w)


def _in_place(target: np.ndarray, result: np.ndarray) -> None:
    """BLAS wrappers write into an F-ordered ``c`` in place; should one ever return a copy, take it."""
    if not np.shares_memory(target, result):
        target.T[...] = result


def _pair_coefficients(weights: torch.Tensor) -> torch.Tensor:
    """(B, P) coefficients w_a w_b of the layer pairs a <= b: a subset's Gram is their weighted sum of
    ``_symmetric_blocks`` (the a < b block holds both G_ab and G_ba)."""
    k = weights.shape[1]
    return torch.stack([weights[:, a] * weights[:, b] for a in range(k) for b in range(a, k)], 1)


def _symmetric_blocks(g4: torch.Tensor) -> torch.Tensor:
    """(P, d * d): G_aa for a == b and G_ab + G_ab^T for a < b, flattened, in the order of ``_pair_coefficients``."""
    k, d = g4.shape[0], g4.shape[1]
    out = torch.empty(k * (k + 1) // 2, d, d, dtype=g4.dtype)
    i = 0
    for a in range(k):
        for b in range(a, k):
            out[i] = g4[a, :, a, :] if a == b else g4[a, :, b, :] + g4[a, :, b, :].T
            i += 1
    return out.view(len(out), d * d)

