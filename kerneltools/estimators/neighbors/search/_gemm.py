"""Exact euclidean k-NN by float32 BLAS tiles and a running selection (CPU).

In 16 or more features, :class:`GemmSearch` finds each query's K nearest
fitted points, whatever the dtype of the data, as follows.

1. Groups: the fitted points in compact groups of at most
   :data:`GROUP_POINTS` (:func:`compact_groups`: principal-direction
   splits, between clusters where they part), each with its centre and
   radius; queries in blocks of :data:`TILE_ROWS` by their nearest group.
2. Tiles of expanded values ``e_j = |y_j|^2 - 2 <x, y_j>`` of a block by a
   group: one float32 GEMM of the queries (centred, scaled by a power of 2,
   a column of ones appended) by the group's ``[-2 y, |y|^2]``, one thread
   per core (memory: linear in the number of points). Groups come nearest
   first, and a group whose lower bound on the distances
   (:func:`group_bounds`) fails every query's current threshold is never
   multiplied (:func:`_visits`): on clustered data most are skipped; on
   unclustered data in many dimensions none are, and the search is brute
   force at the GEMM's speed.
3. Selection (:class:`kerneltools.selection.TileSelection`): each query
   keeps the points whose value is at most its K-th smallest so far plus a
   slack, twice the bound ``delta`` of :meth:`GemmSearch.slack` on
   ``|e_j + |x|^2 - |x - y_j|^2|`` (rounding to float32, and the product).
   One vector comparison rejects most values; the others are appended to
   the query's slots, compacted when full.
4. Exact re-ranking: the candidates' squared distances, direct differences
   in float64, sorted with ties by index; K are kept.

Exact: a point j with ``|x - y_j|^2 <= d_K`` (the true K-th) has
``e_j <= e_K + 2 delta``, as ``d_K <= e_K + |x|^2 + delta`` (the K points of
smallest e lie within it), so every such point is a candidate, ties
included; a skipped group holds no value below the threshold. A query
whose band of values within the slack overflows its slots (many equal
distances, or data too fine for float32) is searched again on the
engine's route (:class:`~._blas.BlasSearch`).

Float32 tiles for float64 data too: twice the products per second of a
float64 GEMM, and the float64 re-ranking makes the result exact. Measured
(CPU ns per query x point pair, 10^4 x 10^4 Gaussian blobs, D = 32, one
thread, load ~11): float32 tiles 1.2, float64 tiles 1.9; the engine's
expanded K-min (float64, two threads' CPU) 3.6 at K' = 29 and 12.9 at
K' = 99, where its sorted insertion dominates.
"""

from __future__ import annotations

import functools

import numpy as np

from ....config import check_backend
from ....selection import TileSelection

from ._blas import BlasSearch, _over_blocks, blas_serves
from ._formula import _sqnorms

#: Queries x fitted points of one float32 tile (1.5 MB). Measured, CPU ns
#: per pair of a whole search (Gaussian 3e4 x 3e4, D = 32, K = 21, two
#: threads, load ~15): 2.08 at 256 x 768, 1.89 at 512 x 512, 1.91 at
#: 384 x 768, 1.74 at 512 x 768, 2.17 at 256 x 1024; the GEMM alone of
#: 256-row tiles: 1.22 at 1024 columns, 0.86-1.0 at 768.
TILE_ROWS = 512
TILE_COLUMNS = 768
#: Most points per group of fitted points (:func:`compact_groups`), one
#: tile's columns.
GROUP_POINTS = TILE_COLUMNS
#: Fewest query x fitted pairs for the tiled search: below, the engine's
#: one reduction call costs as little. Measured (CPU ms, median of 7,
#: fit + kneighbors(), Gaussian, D = 32, tiled / engine): N = 1000, K = 5:
#: 6.4 / 9.4; N = 2000: 31 / 32 at K = 5, 27 / 51 at K = 21; N = 4000, K = 5:
#: 69 / 63; N = 8000: 145 / 189 at K = 5, 174 / 314 at K = 21.
MIN_PAIRS = 2**20
#: Most neighbours per query (each query keeps 2 K + 64 slots).
MAX_K = 1024

_F32 = np.finfo(np.float32)


class GemmSearch(BlasSearch):
    """:class:`BlasSearch` with its k-NN from float32 BLAS tiles and a
    running selection (see the module's docstring).

    Euclidean metrics from 16 features, reductions on the CPU: candidates
    from float32 matrix products of centred, scaled points, re-ranked
    exactly in float64.

    Parameters
    ----------
    metric : Metric
        The metric's formula, euclidean (see :class:`FormulaSearch`).
    Y : ndarray of shape (n_samples, n_features)
        The fitted points, on the host.
    backend : str or None
        Where the reductions run.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.estimators.neighbors._metrics import make_metric
    >>> from kerneltools.estimators.neighbors.search import GemmSearch
    >>> rng = np.random.default_rng(0)
    >>> Y, X = rng.random((300, 32)), rng.random((5, 32))
    >>> rdist, ind = GemmSearch(make_metric("euclidean", {}), Y, "numpy").kmin(X, 3)
    >>> d2 = ((X[:, None] - Y[None]) ** 2).sum(-1)  # dense NumPy
    >>> ind.shape, bool((ind == d2.argsort(1)[:, :3]).all())
    ((5, 3), True)
    >>> bool(np.allclose(rdist, np.sort(d2, 1)[:, :3]))
    True
    """

    def __init__(self, metric, Y: np.ndarray, backend):
        super().__init__(metric, Y, backend)
        Yc = self.Y - self._centre  # float64 (the centre is)
        top = float(np.sqrt(_sqnorms(Yc).max(initial=0.0)))
        # a power of 2: exact, and the largest |y'| in [0.5, 1)
        self._scale = 2.0 ** -np.frexp(top)[1] if top > 0 else 1.0
        # max |y'|^2 of the rounded points (the tiles' rows, built in _groups)
        Y32 = (Yc * self._scale).astype(np.float32)
        self._y2_max32 = float(_sqnorms(Y32).max(initial=0.0))

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

    @functools.cached_property
    def _groups(self):
        """The fitted points in compact groups of at most GROUP_POINTS:
        (order, starts, centres, radii), in the centred, scaled
        float64 coordinates; the tiles' rows ``[-2 y', |y'|^2]`` and the
        points in float64, in that order (the re-ranking reads the visited
        groups' points: they stay in cache). Built at the first tiled search."""
        P = (self.Y - self._centre) * self._scale
        order, starts = compact_groups(P, GROUP_POINTS)
        P = P[order]
        centres = np.add.reduceat(P, starts[:-1]) / np.diff(starts)[:, None]
        far = np.sqrt(_sqnorms(P - np.repeat(centres, np.diff(starts), axis=0)))
        radii = np.maximum.reduceat(far, starts[:-1])
        Y32 = P.astype(np.float32)
        del P, far
        y2 = _sqnorms(Y32).astype(np.float32)[:, None]  # |y'|^2, rounded once
        Ya = np.concatenate([-2 * Y32, y2], axis=1)
        Y64 = np.ascontiguousarray(self.Y[order], dtype=np.float64)
        return order, starts, centres, radii, Ya, Y64

    def _query_order(self, Xs: np.ndarray, centres: np.ndarray) -> np.ndarray:
        """The queries by their nearest group centre: a block of consecutive
        ones is compact, and visits few groups."""
        near = np.empty(len(Xs), np.int64)
        c2 = _sqnorms(centres)
        step = max(1, 2**20 // len(centres))
        for s in range(0, len(Xs), step):
            block = Xs[s : s + step]
            near[s : s + step] = np.argmin(c2 - 2 * block @ centres.T, axis=1)
        return np.argsort(near, kind="stable")

    def kmin(self, X: np.ndarray, k: int):
        """The K nearest by tiles (module docstring); the engine's route for
        few pairs, large K, or queries whose norms come near float32's range."""
        n, m = len(X), len(self.Y)
        if n * m < MIN_PAIRS or k > MAX_K:
            return super().kmin(X, k)
        Xs = (X - self._centre) * self._scale  # float64
        X32 = Xs.astype(np.float32)
        x2 = _sqnorms(X32)
        if float(x2.max(initial=0.0)) > _F32.max / 16 or not np.isfinite(x2).all():
            return super().kmin(X, k)
        Xa = np.concatenate([X32, np.ones((n, 1), np.float32)], axis=1)
        slack = self.slack(x2)
        backend = check_backend(self.backend, "NearestNeighbors")  # this thread's
        cap = 2 * k + 64  # (TileSelection's default: at least k + 32)
        X64 = np.asarray(X, dtype=np.float64)
        order, starts, centres, radii, Ya, Y64 = self._groups
        queries = order if X is self.Y else self._query_order(Xs, centres)

        def block(s):
            rows = queries[s : s + TILE_ROWS]
            # lower bounds of e_j over each group (see group_bounds)
            low = group_bounds(Xs[rows], centres, radii) - (
                x2[rows] + slack[rows] / 2)[:, None]
            sel = TileSelection(len(rows), k, slack=slack[rows], capacity=cap,
                                backend=backend)
            for sub, g in _visits(low, sel, starts):
                a, b = starts[g], starts[g + 1]
                # (a new array: measured faster than matmul's out= here)
                tile = (Xa[rows] if sub is None else Xa[rows[sub]]) @ Ya[a:b].T
                sel.update(tile, a, rows=sub)  # columns: positions in `order`
            vals[rows], ind[rows] = sel.rerank(X64[rows], Y64, labels=order)
            return rows[sel.overflow]  # (each block writes its own rows)

        vals = np.empty((n, k), X.dtype)
        ind = np.empty((n, k), np.int64)
        redo = np.concatenate(_over_blocks(block, range(0, n, TILE_ROWS)))
        if len(redo):
            vals[redo], ind[redo] = super().kmin(X[redo], k)
        return vals, ind

    @staticmethod
    def is_usable_for(case) -> bool:
        """Euclidean, from :data:`BLAS_MIN_DIM` features, reductions on the
        CPU, queries on the host (:func:`~._blas.blas_serves`)."""
        return (not case.on_device  # the tiles are NumPy's (BLAS) products
                and blas_serves(case.metric, case.n_features, case.backend))


#: Groups whose bounds are tested at a time against the current thresholds.
_WINDOW = 16


def _visits(low: np.ndarray, sel: TileSelection, starts: np.ndarray):
    """The tiles of a block of queries, one group each: ``(rows, g)``,
    ``rows`` None (all) or the few that need group g.

    Groups come nearest first (by the smallest of their lower bounds
    ``low``, one row per query); a group is visited only while some row's
    threshold (``sel``, lowered as tiles come in) is at least its bound:
    its values would all fail the test. The bounds are tested a window of
    groups at a time (a group found useless stays so: thresholds only
    drop).
    """
    todo = np.argsort(low.min(axis=0), kind="stable")
    half = len(low) / 2
    pos = 0
    while pos < len(todo):
        window = todo[pos : pos + _WINDOW]
        need = low[:, window] <= sel.threshold[:, None]
        count = need.sum(axis=0)
        live = np.flatnonzero(count)
        if not len(live):
            pos += len(window)
            continue
        q = int(live[0])
        pos += q + 1
        yield (None if count[q] > half else np.flatnonzero(need[:, q])), window[q]


#: Power iterations for a split direction, on at most this many points.
_SPLIT_ITERATIONS = 4
_SPLIT_SAMPLE = 2048
#: Lloyd iterations of a split's 1-D 2-means, and the separation (squared
#: gap between the two means over the variance) above which its cut is
#: kept: a unimodal spread gives about 2.5, well-parted clusters far more.
_SPLIT_LLOYD = 8
_SPLIT_SEPARATION = 4.0


def compact_groups(P: np.ndarray, size: int):
    """``(order, starts)``: the rows of P in an order whose runs
    ``order[starts[g]:starts[g + 1]]`` hold at most ``size`` nearby points.

    A tree of splits, each along the principal direction of its points
    (power iterations on a sample). Where a 1-D 2-means of the projections
    finds two well-parted clusters, the cut falls between them (clusters
    stay whole; at least ``size / 4`` points on either side); elsewhere at
    the median rounded to whole groups of ``size`` (full groups: the
    widest tiles). Cost: a few passes over the points per level, about
    log2(n / size) levels.
    """
    rng = np.random.default_rng(0)
    order = np.arange(len(P))
    bounds, todo = [], [(0, len(P))]
    while todo:
        lo, hi = todo.pop()
        if hi - lo <= size:
            bounds.append(lo)
            continue
        idx = order[lo:hi]
        Q = P[idx]
        sample = Q[rng.choice(len(Q), min(len(Q), _SPLIT_SAMPLE), replace=False)]
        sample = sample - sample.mean(axis=0)
        v = sample[np.argmax(_sqnorms(sample))]
        for _ in range(_SPLIT_ITERATIONS):
            v = sample.T @ (sample @ v)
            v /= max(float(np.linalg.norm(v)), 1e-300)
        proj = Q @ v
        cut = _cut(proj, size)
        order[lo:hi] = idx[np.argpartition(proj, cut - 1)]
        todo += [(lo + cut, hi), (lo, lo + cut)]
    return order, np.append(np.sort(bounds), len(P))


def _cut(proj: np.ndarray, size: int) -> int:
    """How many of the projected points go below the split (see
    :func:`compact_groups`)."""
    n = len(proj)
    t = float(np.median(proj))
    below = proj < t
    for _ in range(_SPLIT_LLOYD):
        if below.all() or not below.any():
            break
        t = (proj[below].mean() + proj[~below].mean()) / 2
        below = proj < t
    var = float(proj.var())
    if below.any() and not below.all() and var > 0 and (
            proj[below].mean() - proj[~below].mean()) ** 2 > _SPLIT_SEPARATION * var:
        side = max(1, min(size // 4, n // 2))
        return min(max(int(below.sum()), side), n - side)
    return max(1, min(n - 1, round(n / 2 / size) * size)) if n > size else n // 2


def group_bounds(Xs: np.ndarray, centres: np.ndarray, radii: np.ndarray):
    """(n, groups): lower bounds of ``|x - y|^2`` over the points y of each
    group (within ``radii`` of ``centres``), for the rows x of ``Xs``; all
    float64, in one frame.

    ``(|x - c| - r)^2`` where ``|x - c| > r``, else 0; ``|x - c|^2`` from the
    expanded form minus its rounding bound (D + 4) eps (|x|^2 + |c|^2), the
    radius widened by 1e-12 relative and 1e-12 (|x| + 1) absolute (the
    rounding of the centring and scaling, far smaller), the square shrunk by
    1e-12 relative (its own rounding).
    """
    x2, c2 = _sqnorms(Xs)[:, None], _sqnorms(centres)[None, :]
    eps = np.finfo(np.float64).eps
    g = x2 + c2 - 2 * Xs @ centres.T
    g -= (Xs.shape[1] + 4) * eps * (x2 + c2)
    dist = np.sqrt(np.maximum(g, 0))
    gap = dist - radii * (1 + 1e-12) - 1e-12 * (np.sqrt(x2) + 1)
    return np.maximum(gap, 0) ** 2 * (1 - 1e-12)
