"""Exact euclidean k-NN and radius searches by BLAS-shaped distance tiles (CPU).

In 16 or more features a matrix product computes the expanded values
``e_j = |y_j|^2 - 2 <x, y_j>`` of a tile of queries x fitted points faster
than a pair-by-pair loop: one GEMM of the (centred) queries with a column of
ones appended, against the centred fitted points scaled by -2 with their
squared norms appended (``[x, 1] . [-2 y, |y|^2]``), in the data's dtype,
tile by tile (:data:`TILE_ROWS` x :data:`TILE_COLUMNS`: the tile stays in
cache; memory is linear in the number of points), one thread per core.

- k-NN (:meth:`BlasSearch.kmin`): K' = K + 8 candidates per row, kept by a
  threshold per row (the K'-th value of the first tile, tightened as
  candidates come): a tile costs one comparison and an ``np.flatnonzero``
  of the few values below. Candidates are re-ranked by exact float64
  distances and certified as in :class:`~._neighbors_search.ExpandedSearch`;
  failed rows go to the engine's direct form.
- Radius (:meth:`BlasSearch.radius_csr`): the values within the threshold
  widened by the rounding bound, in one pass, tested again by their exact
  float64 distances: CSR rows directly. The engine's route takes two passes
  (a count, then a masked K-min).

Measured (CPU seconds, float32 blobs / Gaussian points, D = 32, 10^5 fitted
points, shared machine at load 19-27, so within some 15%): radius, 5,000
queries, ~77 neighbours each: 1.2 s against the engine's 4.5 s and
scikit-learn's 1.8 s; k-NN (K = 20, 91), 4,000 queries: 1.2-1.7 s, the
engine 1.4-2.1 s, scikit-learn 1.6-1.9 s.
"""

from __future__ import annotations

import functools
import os

import numpy as np

from ..config import check_backend

from ._neighbors_metrics import Metric
from ._neighbors_search import (
    ExpandedSearch,
    FormulaSearch,
    _rerank,
    _sqnorms,
    n_candidates,
)

#: Fewest features for :class:`BlasSearch`.
BLAS_MIN_DIM = 16
#: Queries x fitted points of one tile: 256 x 4096 (4 MB in float32), in
#: cache. Measured on the tile-wise k-NN selection (module docstring),
#: 4096 x 10^5, D = 32, float32 (CPU ns per pair, one BLAS thread, loaded
#: machine): 2.44 at 256 x 2048, 2.60 at 256 x 4096, 2.90 at 512 x 4096,
#: 3.46 at 128 x 8192; the product alone of a 256 x 10^5 tile (100 MB, out
#: of cache) takes 1.0, its comparison 0.2.
TILE_ROWS = 256
TILE_COLUMNS = 4096


def _gpu_visible() -> bool:
    """Whether CuPy sees a GPU (the engine's "auto" then runs on CUDA)."""
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 (no CuPy, no driver)
        return False


class BlasSearch(ExpandedSearch):
    """:class:`ExpandedSearch` with its radius sets from BLAS tiles (see the
    module's docstring).

    The points are centred on the fitted points' mean first. The rounding
    bound of :meth:`ExpandedSearch.error_bound` covers the product here:
    the D + 1 products ``[x, 1] . [-2 y, |y|^2]`` summed in any
    order err by ``gamma_(D+1) (2 |x| |y| + |y|^2) <= (D + 1) u (1 + O(u))
    (|x|^2 + 2 |y|^2)``, plus ``u |y|^2`` for |y|^2 rounded into the dtype;
    that is below its ``(D + 4) eps (2 |x|^2 + max |y|^2 + thr)``.
    """

    def __init__(self, metric: Metric, Y: np.ndarray, backend):
        super().__init__(metric, Y, backend)
        # centred points (in float64, then rounded): the expanded values of
        # data far from the origin keep their digits; [-2 y, |y|^2] times
        # [x, 1] is e_j (-2 y is exact)
        self._centre = self.Y.mean(axis=0, dtype=np.float64)
        Yc = (self.Y - self._centre).astype(self.Y.dtype)
        y2c = _sqnorms(Yc)
        self._y2c_max = float(y2c.max(initial=0.0))
        self._Ya = np.concatenate([-2 * Yc, y2c.astype(Yc.dtype)[:, None]], axis=1)

    @staticmethod
    def is_usable_for(metric: Metric, Y: np.ndarray, backend=None) -> bool:
        """Squared euclidean rdist, at least :data:`BLAS_MIN_DIM` features,
        and the reductions would run on the CPU (the engine on a GPU is
        faster than this host's BLAS)."""
        if not (metric.squared_l2 and Y.shape[1] >= BLAS_MIN_DIM):
            return False
        name = check_backend(backend, "NearestNeighbors")
        return name in ("cpu", "numpy") or (name == "auto" and not _gpu_visible())

    def _tiles(self, Xa: np.ndarray):
        """(c0, tile) for each tile of columns: ``Xa @ Ya[c0:c0 + C].T``."""
        Ya = self._Ya
        for c0 in range(0, len(Ya), TILE_COLUMNS):
            yield c0, Xa @ Ya[c0 : c0 + TILE_COLUMNS].T

    def kmin(self, X: np.ndarray, k: int):
        """(rdist, indices), (n, k), increasing, ties by index: candidates
        from the tiles (:meth:`candidates`), re-ranked by exact float64
        distances and certified (:meth:`_certified`); the rows that fail go
        to the engine's direct form."""
        kc = n_candidates(k, len(self.Y))
        Xc = (X - self._centre).astype(X.dtype)
        x2 = _sqnorms(Xc)
        fi = np.finfo(X.dtype)
        if kc > TILE_COLUMNS or max(float(x2.max(initial=0)), self._y2c_max) > fi.max / 8:
            return FormulaSearch.kmin(self, X, k)
        e, cand = self.candidates(Xc, kc)
        d, ind = _rerank(X, self.Y, cand, k)
        vals = d.astype(X.dtype)
        redo = np.flatnonzero(~self._certified(e.max(axis=1), x2, d[:, -1]))
        if len(redo) and kc < len(self.Y):
            vals[redo], ind[redo] = self.fallback(X[redo], k)
        return vals, ind

    def _certified(self, e_max, x2, d_k) -> np.ndarray:
        """Rows whose K-th exact squared distance ``d_k`` lies strictly below
        that of every point outside the candidates.

        Such a point has a computed value at least ``e_max``, so its centred
        squared distance is at least ``e_max + |x_c|^2 - err`` (the product's
        bound, class docstring), and its distance at least the root of that
        minus ``eta`` (the centring, :meth:`_tile_bounds`).
        """
        fi = np.finfo(self.Y.dtype)
        err = (self.Y.shape[1] + 4) * (fi.eps * (2 * x2 + self._y2c_max + d_k) + fi.tiny)
        eta = fi.eps * (np.sqrt(x2) + np.sqrt(self._y2c_max)) * (1 + fi.eps)
        lower = np.sqrt(np.maximum(e_max.astype(np.float64) + x2 - err, 0)) - eta
        return np.sqrt(d_k) < lower

    def candidates(self, Xc: np.ndarray, kc: int):
        """(e, idx), both (n, kc): for each centred query, kc fitted points of
        smallest tile values (ties broken arbitrarily: every point left out
        has a value at least the largest kept)."""
        parts = _over_blocks(lambda s: self._block_candidates(
            self._augmented(Xc[s : s + TILE_ROWS]), kc), range(0, len(Xc), TILE_ROWS))
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    def _block_candidates(self, Xa: np.ndarray, kc: int):
        """The first tile's kc smallest per row give thresholds; a later
        tile contributes its values below them (one comparison, one
        ``np.flatnonzero``), and the thresholds tighten to the kc-th value
        kept whenever more than kc per row have come."""
        best_e = best_i = thr = None
        found, n_found = [], 0  # (rows, values, indices) below thr
        for c0, E in self._tiles(Xa):
            if best_e is None:  # the first tile holds at least kc columns
                part = np.argpartition(E, kc - 1, axis=1)[:, :kc]
                best_e, best_i = np.take_along_axis(E, part, axis=1), part + c0
                thr = best_e.max(axis=1)
                continue
            flat = np.flatnonzero(E < thr[:, None])
            if len(flat):
                r, c = np.divmod(flat, E.shape[1])
                found.append((r, E.ravel()[flat], c + c0))
                n_found += len(flat)
            if n_found > len(Xa) * kc:
                best_e, best_i = _keep_smallest(best_e, best_i, found)
                thr, found, n_found = best_e[:, -1], [], 0
        if found:
            best_e, best_i = _keep_smallest(best_e, best_i, found)
        return best_e, best_i

    def _tile_bounds(self, Xc: np.ndarray, thr: np.ndarray):
        """t, one per centred query: a point within rdist ``thr`` of the query
        has a computed tile value at most ``t``; None near overflow.

        Centring rounds each point by at most ``u |p - c|`` (u: the unit
        roundoff), so that a distance moves by at most ``eta = 2 u (|x_c| +
        max |y_c|)``: the centred points are within ``(sqrt(thr) + eta)^2``,
        and their computed values within that minus ``|x_c|^2`` plus the
        product's rounding bound (class docstring).
        """
        x2 = _sqnorms(Xc)
        fi = np.finfo(Xc.dtype)
        if max(float(x2.max(initial=0)), self._y2c_max, float(np.max(thr))) > fi.max / 8:
            return None
        eta = fi.eps * (np.sqrt(x2) + np.sqrt(self._y2c_max)) * (1 + fi.eps)
        wide = (np.sqrt(thr) + eta) ** 2
        err = (Xc.shape[1] + 4) * (fi.eps * (2 * x2 + self._y2c_max + wide) + fi.tiny)
        return np.nextafter((wide - x2 + err).astype(Xc.dtype), Xc.dtype.type(np.inf))

    @staticmethod
    def _augmented(X: np.ndarray) -> np.ndarray:
        return np.concatenate([X, np.ones((len(X), 1), X.dtype)], axis=1)

    def radius_csr(self, X: np.ndarray, thr: np.ndarray, *, exclude_self: bool,
                   by_index: bool):
        """:func:`~._neighbors_search.radius_search` by tiles: ``(values,
        indices, indptr)`` of the points within rdist ``thr`` (one per
        query), or None where the norms come near overflow (the caller
        then takes the general route)."""
        Xc = (X - self._centre).astype(X.dtype)
        t = self._tile_bounds(Xc, thr)
        if t is None:
            return None

        def block(s):  # candidates (rows, columns) of queries s to s + TILE_ROWS
            Xa, ts = self._augmented(Xc[s : s + TILE_ROWS]), t[s : s + TILE_ROWS, None]
            rows, cols = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
            for c0, E in self._tiles(Xa):
                r, c = np.divmod(np.flatnonzero(E <= ts), E.shape[1])
                rows.append(r + s)
                cols.append(c + c0)
            return np.concatenate(rows), np.concatenate(cols)

        parts = _over_blocks(block, range(0, len(X), TILE_ROWS))
        r = np.concatenate([p[0] for p in parts])
        c = np.concatenate([p[1] for p in parts])
        d = _pair_sqdist(X, self.Y, r, c)
        keep = d <= thr[r]
        if exclude_self:
            keep &= c != r
        r, c, d = r[keep], c[keep], d[keep]
        # by row, then index (by_index) or exact distance, ties by index
        order = np.lexsort((c, r)) if by_index else np.lexsort((c, d, r))
        r, c, d = r[order], c[order], d[order]
        indptr = np.zeros(len(X) + 1, np.int64)
        np.cumsum(np.bincount(r, minlength=len(X)), out=indptr[1:])
        return d.astype(X.dtype), c, indptr


def _keep_smallest(best_e, best_i, found):
    """The kc smallest values of each row (and their indices) among
    ``best_*`` (b, kc) and the ``found`` (rows, values, indices), by row
    then value: the last column is each row's new threshold."""
    b, kc = best_e.shape
    r = np.concatenate([np.repeat(np.arange(b), kc)] + [f[0] for f in found])
    v = np.concatenate([best_e.ravel()] + [f[1] for f in found])
    i = np.concatenate([best_i.ravel()] + [f[2] for f in found])
    order = np.lexsort((v, r))
    r, v, i = r[order], v[order], i[order]
    keep = np.arange(len(r)) - np.searchsorted(r, np.arange(b))[r] < kc
    return v[keep].reshape(b, kc), i[keep].reshape(b, kc)  # kc per row: best_*


def _over_blocks(block, starts) -> list:
    """``[block(s) for s in starts]``: one thread per core, each with a
    one-thread BLAS (the small products of a tile gain nothing from BLAS
    threads, which busy-wait: measured 6x the CPU time of one thread on a
    loaded machine); a single block runs in the caller's thread."""
    from concurrent.futures import ThreadPoolExecutor

    starts = list(starts)
    workers = min(len(starts), os.cpu_count() or 1)
    if workers <= 1:
        return [block(s) for s in starts]
    with _blas_controller().limit(limits=1, user_api="blas"):
        with ThreadPoolExecutor(workers) as pool:
            return list(pool.map(block, starts))


@functools.cache
def _blas_controller():
    """threadpoolctl's view of the loaded BLAS libraries (found once: 2 ms)."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


#: Pairs per block of :func:`_pair_sqdist` (float64 differences in cache).
_PAIR_BLOCK = 2**15


def _pair_sqdist(X: np.ndarray, Y: np.ndarray, r: np.ndarray, c: np.ndarray):
    """``|X[r] - Y[c]|^2`` pair by pair, direct differences in float64."""
    out = np.empty(len(r))
    for s in range(0, len(r), _PAIR_BLOCK):
        diff = np.subtract(Y[c[s : s + _PAIR_BLOCK]], X[r[s : s + _PAIR_BLOCK]],
                           dtype=np.float64)
        out[s : s + _PAIR_BLOCK] = np.einsum("pf,pf->p", diff, diff)
    return out
