"""The pruned k-NN of low dimensions with its block-sparse K-min in C.

:class:`~._pruned.PrunedSearch` pairs each cell of queries with
the fitted cells within its bound, nearest first, and reduces the pairs
with the engine's block-sparse ``Kmin_argKmin``. In 3 dimensions a
distance costs a few operations and the engine's sorted insertion (about K
steps per value that passes the K-th, nearest cells first or not)
dominates at large K. :class:`CellSearch` hands the same pairs to
:func:`kerneltools.selection.block_sparse_knn`: the distances in float64,
16 points at a time, against a running threshold, the few values that pass
appended, the K-th bounded by vector counts when the slots fill. Same
results: the K smallest squared distances by direct differences (float64,
then the query dtype), ties by index; the certificate and second pass of
``PrunedSearch`` unchanged.

Measured (CPU seconds, 10^5 Gaussian blobs, D = 3, K = 91, fit +
kneighbors(), load ~15): 3.17 through the engine, of which 2.25 in its
reduction; 2.0 here, of which 1.0 in the C K-min (a query visits about 35
of its cell's 106 fitted cells, ~1,000 points, the others skipped by their
box). Below :data:`MIN_K` the engine's K-min is as fast (its insertions are
short). Later (issue 25, TSNE's neighbour phase, 10^5 blobs, D = 3, K = 91,
load ~5): the query cells' pairs found in C
(:func:`kerneltools.selection.box_pairs`; the pairing 0.20-0.42 -> 0.12 CPU
s), the boxes tested 64 at a time, a query's first threshold from its cell's
previous query, its results ordered by value buckets: the C K-min 0.83 ->
0.48 CPU s on one thread (``asv_bench/tsne_compare_results.md``). Then:
branchless compactions, the distances of D = 2, 3 unrolled (the C K-min
0.59 -> 0.42 on one thread), the centres' bounds in C without infinite
ones (721,585 -> 479,803 pairs), the query cells of the fitted points
reused: the phase 0.94-1.13 -> 0.54-0.60 CPU s (medians, load 3-5).
"""

from __future__ import annotations

import numpy as np

from ....config import check_backend
from ....selection import block_sparse_knn

from ._blas import _gpu_visible
from ._pruned import (PRUNE_CELL_POINTS, PRUNE_NEAR_CELLS, PrunedSearch,
                                _near_cells)


#: Fewest neighbours for the C K-min. Measured (median CPU seconds of 3,
#: 10^5 uniform float32 queries and points, D = 3, fit + kneighbors(X), load
#: ~15, C / engine): K = 5 0.50 / 0.39, K = 10 0.51 / 0.40, K = 21 0.60 /
#: 0.54, K = 40 0.75 / 1.00.
MIN_K = 32


class CellSearch(PrunedSearch):
    """:class:`PrunedSearch` with its block-sparse K-min in C (module
    docstring), where the reductions would run on the CPU.

    Low dimension, a fit that enabled pruning: only the cells near each
    query are searched; the result is exact (the certificate of
    :class:`PrunedSearch`).

    Parameters
    ----------
    metric : Metric
        The metric's formula (``_metrics.make_metric``); ``rdist`` is what
        :meth:`kmin` returns (``|x - y|^2`` for the euclidean metric).
    Y : ndarray of shape (n_samples, n_features)
        The fitted points, on the host.
    backend : str or None
        Where the reductions run (as ``backend=`` of a reduction).
    grid : Grid
        The fitted points' cells (``Grid.fit(Y)``).

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.estimators.neighbors._metrics import make_metric
    >>> from kerneltools.estimators.neighbors.search import CellSearch
    >>> from kerneltools.estimators.neighbors.search._pruned import Grid
    >>> rng = np.random.default_rng(0)
    >>> Y, X = rng.random((300, 3)), rng.random((5, 3))
    >>> rdist, ind = CellSearch(make_metric("euclidean", {}), Y, "numpy",
    ...                           Grid.fit(Y)).kmin(X, 3)
    >>> d2 = ((X[:, None] - Y[None]) ** 2).sum(-1)  # dense NumPy
    >>> ind.shape, bool((ind == d2.argsort(1)[:, :3]).all())
    ((5, 3), True)
    >>> bool(np.allclose(rdist, np.sort(d2, 1)[:, :3]))
    True
    """

    def _on_host(self) -> bool:
        name = check_backend(self.backend, "NearestNeighbors")
        return name == "cpu" or (name == "auto" and not _gpu_visible())

    def _sorted_points(self) -> np.ndarray:
        """The fitted points in the cells' order, float64 (made once)."""
        if getattr(self, "_sorted_Y", None) is None:
            order = self.grid.cells.order
            self._sorted_Y = np.ascontiguousarray(self.Y[order], dtype=np.float64)
        return self._sorted_Y

    def _centre_kth(self, c: np.ndarray, k: int) -> np.ndarray:
        """:meth:`PrunedSearch._centre_kth` by
        :func:`~kerneltools.selection.block_sparse_knn` (float64; measured at
        10^5 blobs, D = 3, K = 92: the K-min of 4,484 centres 0.017 CPU s
        against 0.04-0.05 through the engine's)."""
        if k < MIN_K or not self._on_host():
            return super()._centre_kth(c, k)
        fc = self.grid.cells
        kth = np.full(len(c), np.inf)
        rows = np.arange(len(c))
        m = -(-k // PRUNE_CELL_POINTS) + PRUNE_NEAR_CELLS
        while len(rows):
            # the centres whose nearest cells held fewer than K points (cells
            # halved where the points are sparse) ask twice as many cells:
            # an infinite bound would pair their cell with every cell
            near = self.grid.nearest(c[rows], m)
            n, w = near.shape
            d, _ = block_sparse_knn(c[rows], self._sorted_points(), k,
                                    np.arange(n + 1), np.arange(0, n * w + 1, w),
                                    near.ravel(), fc.ranges, lo=fc.lo, hi=fc.hi,
                                    labels=fc.order, backend="cpu")
            kth[rows] = d[:, -1]
            if w == len(fc.counts):
                break
            rows, m = rows[np.isinf(d[:, -1])], 2 * m
        return np.sqrt(kth)

    def _pruned(self, X, order, ranges, lo, hi, radius, k: int):
        """:meth:`PrunedSearch._pruned` by
        :func:`~kerneltools.selection.block_sparse_knn`."""
        if k < MIN_K or not self._on_host():
            return super()._pruned(X, order, ranges, lo, hi, radius, k)
        pair_starts, b = _near_cells(lo, hi, radius, self.grid)  # nearest first
        fc = self.grid.cells
        query_starts = np.append(ranges[:, 0], ranges[-1, 1]) if len(ranges) else [0]
        d, i = block_sparse_knn(X[order], self._sorted_points(), k, query_starts,
                                pair_starts, b, fc.ranges, lo=fc.lo, hi=fc.hi,
                                labels=fc.order, rows=order, backend="cpu")
        return d.astype(X.dtype, copy=False), i
