"""Exact euclidean k-NN by float32 BLAS tiles and a running selection (CPU).

In 16 or more features, :class:`GemmSearch` finds each query's K nearest
fitted points in three steps, whatever the dtype of the data:

1. Tiles of expanded values ``e_j = |y_j|^2 - 2 <x, y_j>``: one float32
   GEMM of a tile of queries (centred, scaled by a power of 2, a column of
   ones appended) by a tile of fitted points (``[-2 y, |y|^2]``), one thread
   per core, :data:`TILE_ROWS` x :data:`TILE_COLUMNS` values (1 MB: the tile
   stays in cache; memory is linear in the number of points).
2. Selection (:class:`kerneltools.selection.TileSelection`): each query
   keeps the points whose value is at most its K-th smallest so far plus a
   slack, twice the bound ``delta`` of :meth:`GemmSearch.slack` on
   ``|e_j + |x|^2 - |x - y_j|^2|`` (rounding to float32, and the product).
   One vector comparison rejects most values; the few others are appended
   to the query's slots, compacted by a quickselect when full.
3. Exact re-ranking: the candidates' squared distances, direct differences
   in float64, sorted with ties by index; K are kept.

Exact: a point j with ``|x - y_j|^2 <= d_K`` (the true K-th) has
``e_j <= e_K + 2 delta``, as ``d_K <= e_K + |x|^2 + delta`` (the K points of
smallest e lie within it), so every such point is a candidate, ties
included. A query whose band of values within the slack overflows its
slots (many equal distances, or data too fine for float32) is searched
again on the engine's route (:class:`~._neighbors_blas.BlasSearch`).

Float32 tiles for float64 data too: twice the products per second of a
float64 GEMM, and the float64 re-ranking makes the result exact. Measured
(CPU ns per query x point pair, 10^4 x 10^4 Gaussian blobs, D = 32, one
thread, load ~11): float32 tiles 1.2, float64 tiles 1.9; the engine's
expanded K-min (float64, two threads' CPU) 3.6 at K' = 29 and 12.9 at
K' = 99, where its sorted insertion dominates.
"""

from __future__ import annotations

import numpy as np

from ..config import check_backend
from ..selection import TileSelection

from ._neighbors_blas import BLAS_MIN_DIM, BlasSearch, _over_blocks
from ._neighbors_search import _sqnorms

#: Queries x fitted points of one float32 tile (1 MB: in cache).
TILE_ROWS = 256
TILE_COLUMNS = 1024
#: Fewest query x fitted pairs for the tiled search: below, the engine's
#: one reduction call costs less than the tiles' Python loop.
MIN_PAIRS = 2**22
#: Most neighbours per query (each query keeps 2 K + 64 slots).
MAX_K = 1024

_F32 = np.finfo(np.float32)


class GemmSearch(BlasSearch):
    """:class:`BlasSearch` with its k-NN from float32 BLAS tiles and a
    running selection (see the module's docstring)."""

    def __init__(self, metric, Y: np.ndarray, backend):
        super().__init__(metric, Y, backend)
        Yc = self.Y - self._centre  # float64 (the centre is)
        top = float(np.sqrt(_sqnorms(Yc).max(initial=0.0)))
        # a power of 2: exact, and the largest |y'| in [0.5, 1)
        self._scale = 2.0 ** -np.frexp(top)[1] if top > 0 else 1.0
        Y32 = (Yc * self._scale).astype(np.float32)
        y2 = _sqnorms(Y32)
        self._y2_max32 = float(y2.max(initial=0.0))
        self._Ya32 = np.concatenate([-2 * Y32, y2.astype(np.float32)[:, None]], axis=1)
        self._Y64 = None  # the fitted points in float64, at the first re-ranking

    def slack(self, x2: np.ndarray) -> np.ndarray:
        """Twice ``delta``, a bound per query on ``|e_j + |x'|^2 - s^2 |x - y_j|^2|``
        (``x'``, ``y'``: the centred points scaled by s and rounded to
        float32, ``x2 = |x'|^2``; u the float32 unit roundoff, D features).

        - Rounding the points moves ``|x' - y'|`` by at most ``eta = u
          (|x'| + |y'|) (1 + 2u)`` from ``s |x - y|`` (float64 centring and
          scaling err far less), so the squared distance by at most ``2 eta
          (|x'| + |y'|) + eta^2 <= 4 u (|x'|^2 + |y'|^2) (1 + O(u))``.
        - ``|y'|^2`` rounded to float32: ``u |y'|^2``; the D + 1 products of
          ``[x', 1] . [-2 y', |y'|^2]``, summed in any order (BLAS blocking,
          FMA or not): ``gamma_(D+1) (2 |x'| |y'| + |y'|^2) <= (D + 1) u
          (|x'|^2 + 2 |y'|^2) (1 + O(u))`` (Higham, Accuracy and Stability of
          Numerical Algorithms, 2nd ed., section 3.1).
        - The float64 re-ranking's own sums err by ``(D + 2) u64`` relative.

        In all less than ``(2 D + 8) u (|x'|^2 + max |y'|^2)`` to first order;
        ``delta = (D + 8) eps (|x'|^2 + max |y'|^2)`` (eps = 2 u) covers the
        higher orders, plus ``tiny`` per operation for underflow.
        """
        D = self.Y.shape[1]
        delta = (D + 8) * (_F32.eps * (x2 + self._y2_max32) + 4 * _F32.tiny)
        return 2 * delta

    def kmin(self, X: np.ndarray, k: int):
        """The K nearest by tiles (module docstring); the engine's route for
        few pairs, large K, or queries whose norms come near float32's range."""
        n, m = len(X), len(self.Y)
        if n * m < MIN_PAIRS or k > MAX_K:
            return super().kmin(X, k)
        X32 = ((X - self._centre) * self._scale).astype(np.float32)
        x2 = _sqnorms(X32)
        if float(x2.max(initial=0.0)) > _F32.max / 16 or not np.isfinite(x2).all():
            return super().kmin(X, k)
        Xa = np.concatenate([X32, np.ones((n, 1), np.float32)], axis=1)
        slack = self.slack(x2)
        backend = check_backend(self.backend, "NearestNeighbors")  # this thread's
        cap = 2 * k + 64 if m > 2 * k + 64 else m + 1  # (m + 1: never full)
        if self._Y64 is None:
            self._Y64 = np.ascontiguousarray(self.Y, dtype=np.float64)
        X64 = np.asarray(X, dtype=np.float64)

        def block(s):
            rows = slice(s, s + TILE_ROWS)
            sel = TileSelection(len(Xa[rows]), k, slack=slack[rows], capacity=cap,
                                backend=backend)
            out = np.empty((len(Xa[rows]), TILE_COLUMNS), np.float32)
            for c0 in range(0, m, TILE_COLUMNS):
                Yt = self._Ya32[c0 : c0 + TILE_COLUMNS]
                tile = out[:, : len(Yt)]
                np.matmul(Xa[rows], Yt.T, out=tile)
                sel.update(tile, c0)
            return (*sel.rerank(X64[rows], self._Y64), sel.overflow)

        parts = _over_blocks(block, range(0, n, TILE_ROWS))
        d = np.concatenate([p[0] for p in parts])
        ind = np.concatenate([p[1] for p in parts])
        redo = np.flatnonzero(np.concatenate([p[2] for p in parts]))
        vals = d.astype(X.dtype)
        if len(redo):
            vals[redo], ind[redo] = super().kmin(X[redo], k)
        return vals, ind

    @staticmethod
    def is_usable_for(metric, Y: np.ndarray, backend=None) -> bool:
        """As :meth:`BlasSearch.is_usable_for` (from :data:`BLAS_MIN_DIM`
        features, reductions on the CPU)."""
        return (Y.shape[1] >= BLAS_MIN_DIM
                and BlasSearch.is_usable_for(metric, Y, backend))
