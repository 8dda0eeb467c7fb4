"""Exact euclidean radius searches by BLAS-shaped distance tiles (CPU).

In 16 or more features a matrix product computes the expanded values
``e_j = |y_j|^2 - 2 <x, y_j>`` of a tile of queries x fitted points faster
than a pair-by-pair loop: one GEMM of the (centred) queries with a column of
ones appended, against the centred fitted points scaled by -2 with their
squared norms appended (``[x, 1] . [-2 y, |y|^2]``), in the data's dtype,
tile by tile (:data:`TILE_ROWS` queries, :data:`TILE_BYTES`: the tile stays
in cache; memory is linear in the number of points), one thread per core.
:meth:`BlasSearch.radius_csr` keeps the values within the threshold widened
by the rounding bound (one comparison and an ``np.flatnonzero`` per tile),
tests them again by their exact float64 distances and returns CSR rows
directly: one pass over the pairs, where the engine's route takes two (a
count, then a masked K-min). Measured (CPU seconds, Gaussian float32 points,
D = 32, 5,000 queries x 10^5 fitted points, ~77 neighbours each, shared
machine at load 19-22): 1.2 s against the engine's 4.5 s and scikit-learn's
1.8 s.

k-NN queries stay on the engine (:class:`~._neighbors_search.ExpandedSearch`).
A tile-wise selection (the K'-th value of the first tile as each row's
threshold, the values below it by ``np.flatnonzero``, tightened by a sort
of the kept ones) measured slower: CPU seconds, 3,000 x 3 * 10^4 blobs,
D = 32, tiles / engine / scikit-learn: float64 K = 21 0.42 / 0.42 / 0.41,
K = 91 0.79 / 0.71 / 0.50; float32 K = 21 0.30 / 0.23 / 0.40, K = 91
0.59 / 0.38 / 0.47 (the tightening sorts cost more than the engine's
K-min updates).
"""

from __future__ import annotations

import functools
import os

import numpy as np

from ..config import check_backend

from ._neighbors_metrics import Metric
from ._neighbors_search import EXPANDED_MIN_DIM, ExpandedSearch, FormulaSearch, _sqnorms

#: Fewest features for :class:`BlasSearch`.
BLAS_MIN_DIM = 16
#: Queries per tile, and bytes of one tile (its columns follow: 1024 fitted
#: points in float32, 512 in float64): the tile stays in cache. Measured,
#: radius search on blobs, 3000 x 3e4, D = 32, one thread, CPU ns per pair
#: (loaded machine): float64 4.44 at 256 x 4096, 4.01 at 256 x 1024, 3.34
#: at 256 x 512, 4.37 at 512 x 512; float32 2.60 at 256 x 4096, 2.16 at
#: 256 x 1024, 2.06 at 512 x 512, 2.68 at 64 x 2048.
TILE_ROWS = 256
TILE_BYTES = 2**20


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

    def _tile_columns(self) -> int:
        return max(1, TILE_BYTES // (TILE_ROWS * self._Ya.itemsize))

    def _tiles(self, Xa: np.ndarray):
        """(c0, tile) for each tile of columns: ``Xa @ Ya[c0:c0 + C].T``."""
        Ya, C = self._Ya, self._tile_columns()
        for c0 in range(0, len(Ya), C):
            yield c0, Xa @ Ya[c0 : c0 + C].T

    def kmin(self, X: np.ndarray, k: int):
        """The engine's K-min (module docstring: measured faster than a
        tile-wise selection): ExpandedSearch's from EXPANDED_MIN_DIM
        features, the direct form below."""
        if self.Y.shape[1] < EXPANDED_MIN_DIM:
            return FormulaSearch.kmin(self, X, k)
        return super().kmin(X, k)

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
        if max(float(x2.max(initial=0)), self._y2c_max, float(np.max(thr))) > (
                fi.max / 8):
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


def _over_blocks(block, starts) -> list:
    """``[block(s) for s in starts]``: one thread per core, each with a
    one-thread BLAS (the small products of a tile gain nothing from BLAS
    threads, which busy-wait: measured 6x the CPU time of one thread on a
    loaded machine, 10x the wall time); a single block runs in the
    caller's thread."""
    from concurrent.futures import ThreadPoolExecutor

    starts = list(starts)
    workers = min(len(starts), os.cpu_count() or 1)
    with _blas_controller().limit(limits=1, user_api="blas"):
        if workers <= 1:
            return [block(s) for s in starts]
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
