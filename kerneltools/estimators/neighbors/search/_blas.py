"""Exact euclidean radius searches by BLAS-shaped distance tiles (CPU).

In 16 or more features a matrix product computes the expanded values
``e_j = |y_j|^2 - 2 <x, y_j>`` of a tile of queries x fitted points faster
than a pair-by-pair loop: one GEMM of the (centred) queries with a column of
ones appended, against the centred fitted points scaled by -2 with their
squared norms appended (``[x, 1] . [-2 y, |y|^2]``), in float32 (also for
float64 data: half the time of a float64 GEMM, the margin below covers the
rounding), tile by tile (:data:`TILE_ROWS` queries, :data:`TILE_BYTES`: the
tile stays in cache; memory is linear in the number of points), one thread
per core. :meth:`BlasSearch.radius_csr` keeps the values within the
threshold widened by the rounding bound (one comparison and an
``np.flatnonzero`` per tile), tests them again by their exact float64
distances and returns CSR rows directly: one pass over the pairs, where the
engine's route takes two (a count, then a masked K-min).

From :data:`PRUNE_TILE_PAIRS` pairs, the tiles follow two partition trees
(:func:`_partition`: median splits along each node's principal direction),
of the queries (leaves of TILE_ROWS, the tiles' rows) and of the fitted
points (leaves of :data:`LEAF_POINTS`, runs of them the tiles' columns);
a tile whose leaves' balls lie farther apart than its largest radius is
never computed: on clustered data most are skipped, on data without
clusters the trees cost a few percent. Measured (CPU seconds, 20 float64
blobs in D = 32, radius of ~35 neighbours, X = None, shared machine at load
15): 3 * 10^4 points 0.80 s (float64 tiles, no trees: 2.65 s; float32
tiles: 1.88 s; scikit-learn's brute force 2.55 s), 10^5 points 4.0 s.

BlasSearch's own k-NN (:meth:`BlasSearch.kmin`) is the engine's K-min: a
tile-wise selection in NumPy (the K'-th value of the first tile as each
row's threshold, the values below it by ``np.flatnonzero``, tightened by a
sort of the kept ones) measured slower (CPU seconds, 3,000 x 3 * 10^4 blobs,
D = 32, tiles / engine / scikit-learn: float64 K = 21 0.42 / 0.42 / 0.41,
K = 91 0.79 / 0.71 / 0.50; float32 K = 21 0.30 / 0.23 / 0.40, K = 91
0.59 / 0.38 / 0.47). The estimators' k-NN queries in 16 or more features
run on its subclass :class:`~._gemm.GemmSearch` instead (the same
float32 tiles with a running selection in C and a float64 re-ranking).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

import numpy as np

from ....config import check_backend

from .._metrics import Metric
from ._formula import EXPANDED_MIN_DIM, ExpandedSearch, FormulaSearch, _sqnorms

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


def blas_serves(metric: Metric, n_features: int, backend) -> bool:
    """Whether BLAS tiles serve a metric of ``n_features`` on ``backend``."""
    return (metric.squared_l2  # rdist |x - y|^2: the tiles' expanded form
            # fewer features: the products do not pay for the tiles
            and n_features >= BLAS_MIN_DIM
            and _reductions_on_cpu(backend))


def _reductions_on_cpu(backend) -> bool:
    """Whether the reductions of ``backend`` would run on this host's CPU:
    the engine on a GPU is faster than this host's BLAS."""
    name = check_backend(backend, "NearestNeighbors")
    return name in ("cpu", "numpy") or (name == "auto" and not _gpu_visible())


class BlasSearch(ExpandedSearch):
    """:class:`ExpandedSearch` with its radius sets from BLAS tiles (see the
    module's docstring).

    The points are centred on the fitted points' mean first and rounded to
    the tiles' dtype (:meth:`_tile_bounds` covers both). The rounding
    bound of :meth:`ExpandedSearch.error_bound` covers the product here:
    the D + 1 products ``[x, 1] . [-2 y, |y|^2]`` summed in any
    order err by ``gamma_(D+1) (2 |x| |y| + |y|^2) <= (D + 1) u (1 + O(u))
    (|x|^2 + 2 |y|^2)``, plus ``u |y|^2`` for |y|^2 rounded into the dtype;
    that is below its ``(D + 4) eps (2 |x|^2 + max |y|^2 + thr)``.
    """

    def __init__(self, metric: Metric, Y: np.ndarray, backend):
        super().__init__(metric, Y, backend)
        # centred points (in float64, then rounded to the tiles' dtype): the
        # expanded values of data far from the origin keep their digits;
        # [-2 y, |y|^2] times [x, 1] is e_j (-2 y is exact)
        self._centre = self.Y.mean(axis=0, dtype=np.float64)
        Yc = self.Y - self._centre
        self._tile_dtype = _tile_dtype(Yc)
        Yc = Yc.astype(self._tile_dtype)
        y2c = _sqnorms(Yc)
        self._y2c_max = float(y2c.max(initial=0.0))
        self._Ya = np.concatenate([-2 * Yc, y2c.astype(Yc.dtype)[:, None]], axis=1)
        self._leaves = None  # the fitted points' partition (first pruned search)

    @staticmethod
    def is_usable_for(metric: Metric, Y: np.ndarray, backend=None) -> bool:
        """:func:`blas_serves` for the points ``Y`` (MeanShift's radius sums;
        not a k-NN strategy of :data:`~.STRATEGIES`, which holds its
        subclass :class:`~._gemm.GemmSearch`)."""
        return blas_serves(metric, Y.shape[1], backend)

    def _tile_columns(self) -> int:
        return max(1, TILE_BYTES // (TILE_ROWS * self._Ya.itemsize))

    def kmin(self, X: np.ndarray, k: int):
        """The engine's K-min (module docstring; GemmSearch overrides it):
        ExpandedSearch's from EXPANDED_MIN_DIM features, the direct form
        below."""
        if self.Y.shape[1] < EXPANDED_MIN_DIM:
            return FormulaSearch.kmin(self, X, k)
        return super().kmin(X, k)

    def _tile_bounds(self, Xc: np.ndarray, thr: np.ndarray, inside: bool = False):
        """t, one per centred query: a point within rdist ``thr`` of the query
        has a computed tile value at most ``t``; None near overflow. With
        ``inside``, a lower bound instead: a computed value at most ``t``
        means a point within ``thr (1 - 1e-9)`` (so within ``thr`` in
        float64 too).

        Centring and the rounding to the tiles' dtype move each point by at
        most ``u |p - c|`` (u: the tiles' unit roundoff), so that a distance
        moves by at most ``eta = 2 u (|x_c| + max |y_c|)``: the centred
        points are within ``(sqrt(thr) + eta)^2``, and their computed values
        within that minus ``|x_c|^2`` plus the product's rounding bound
        (class docstring).
        """
        x2 = _sqnorms(Xc)
        fi = np.finfo(Xc.dtype)
        if max(float(x2.max(initial=0)), self._y2c_max, float(np.max(thr))) > (
                fi.max / 8):
            return None
        eta = fi.eps * (np.sqrt(x2) + np.sqrt(self._y2c_max)) * (1 + fi.eps)
        wide = (np.sqrt(thr) + eta) ** 2
        err = (Xc.shape[1] + 4) * (fi.eps * (2 * x2 + self._y2c_max + wide) + fi.tiny)
        if inside:
            near = np.maximum(np.sqrt(thr * (1 - 1e-9)) - eta, 0) ** 2
            t = np.where(near > 0, near - x2 - err, -np.inf)
            return np.nextafter(t.astype(Xc.dtype), Xc.dtype.type(-np.inf))
        return np.nextafter((wide - x2 + err).astype(Xc.dtype), Xc.dtype.type(np.inf))

    @staticmethod
    def _augmented(X: np.ndarray) -> np.ndarray:
        return np.concatenate([X, np.ones((len(X), 1), X.dtype)], axis=1)

    def radius_csr(self, X: np.ndarray, thr: np.ndarray, *, exclude_self: bool,
                   by_index: bool):
        """:func:`~._formula.radius_search` by tiles: ``(values,
        indices, indptr)`` of the points within rdist ``thr`` (one per
        query), or None where the norms come near overflow (the caller
        then takes the general route)."""
        Xc = (X - self._centre).astype(self._tile_dtype)
        t = self._tile_bounds(Xc, thr)
        if t is None:
            return None
        plan = self._tile_plan(X, thr)
        Ya, C = self._Ya, self._tile_columns()

        def block(k):
            """Tile k of queries q: its rows (in q's order) of the points
            within thr, from the candidates of each span of columns tested
            again by their exact distances."""
            q = plan.rows[plan.row_bounds[k] : plan.row_bounds[k + 1]]
            Xa, ts = self._augmented(Xc[q]), t[q, None]
            rows, cols = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
            for c0, c1 in plan.spans(k, C):
                r, c = np.divmod(np.flatnonzero(Xa @ Ya[c0:c1].T <= ts), c1 - c0)
                rows.append(r)
                cols.append(c + c0)
            r, c = np.concatenate(rows), np.concatenate(cols)
            if plan.cols is not None:
                c = plan.cols[c]
            d = _pair_sqdist(X, self.Y, q[r], c)
            keep = d <= thr[q[r]]
            if exclude_self:
                keep &= c != q[r]
            r, c, d = r[keep], c[keep], d[keep]
            # by row, then index (by_index) or exact distance, ties by index
            order = np.lexsort((c, r)) if by_index else np.lexsort((c, d, r))
            return q, np.bincount(r, minlength=len(q)), d[order], c[order]

        parts = _over_blocks(block, range(len(plan.row_bounds) - 1))
        return stack_rows(parts, len(X), X.dtype)

    def radius_sums(self, X: np.ndarray, thr: np.ndarray, B: np.ndarray):
        """``(sums, counts)``: for each query, the sum of the rows ``B[j]``
        (float64, one per fitted point) over the fitted points within rdist
        ``thr`` (one per query), and their number; None near overflow (as
        :meth:`radius_csr`). Linear memory: no neighbour list is stored.

        Each tile's mask of the pairs within ``thr`` (float64 0/1) comes from
        its float32 values: those at most a lower bound (:meth:`_tile_bounds`
        with ``inside``: surely within) and, between that and the upper
        bound, the pairs whose exact float64 distance is within; the sums
        are one more product, ``mask @ B`` (float64), per tile."""
        Xc = (X - self._centre).astype(self._tile_dtype)
        t = self._tile_bounds(Xc, thr)
        t_in = self._tile_bounds(Xc, thr, inside=True)
        if t is None or t_in is None:
            return None
        plan = self._tile_plan(X, thr)
        Ya, C = self._Ya, self._tile_columns()
        Bs = np.ascontiguousarray(B if plan.cols is None else B[plan.cols],
                                  dtype=np.float64)
        ones = np.ones((Bs.shape[0], 1))

        def block(k):
            q = plan.rows[plan.row_bounds[k] : plan.row_bounds[k + 1]]
            Xa, hi, lo = self._augmented(Xc[q]), t[q, None], t_in[q, None]
            out = np.zeros((len(q), Bs.shape[1] + 1))
            for c0, c1 in plan.spans(k, C):
                E = Xa @ Ya[c0:c1].T
                mask = (E <= lo).astype(np.float64)
                r, c = np.nonzero((E <= hi) & (E > lo))
                cols = c + c0 if plan.cols is None else plan.cols[c + c0]
                mask[r, c] = _pair_sqdist(X, self.Y, q[r], cols) <= thr[q[r]]
                out[:, :-1] += mask @ Bs[c0:c1]
                out[:, -1:] += mask @ ones[c0:c1]
            return q, out

        sums = np.empty((len(X), Bs.shape[1] + 1))
        for q, out in _over_blocks(block, range(len(plan.row_bounds) - 1)):
            sums[q] = out
        return sums[:, :-1], np.rint(sums[:, -1]).astype(np.int64)

    def _tile_plan(self, X: np.ndarray, thr: np.ndarray) -> _TilePlan:
        """Which tiles to compute: all of them, or, from
        :data:`PRUNE_TILE_PAIRS` pairs, those of the leaves of two partition
        trees (:func:`_partition`: queries, fitted points, the latter's
        sorted once into ``self._Ya``) whose balls come within the tile's
        largest radius."""
        n, m = len(X), len(self.Y)
        if n * m < PRUNE_TILE_PAIRS or not np.isfinite(thr).all():
            bounds = np.append(np.arange(0, n, TILE_ROWS), n)
            cols = None if self._leaves is None else self._leaves[0]
            return _TilePlan(np.arange(n), bounds, m, cols, None, None)
        if self._leaves is None:
            order, bounds = _partition(self.Y - self._centre, LEAF_POINTS)
            self._Ya = self._Ya[order]
            balls = _balls(self.Y - self._centre, order, bounds)
            self._leaves = (order, bounds, *balls)
        cols, col_bounds, c_centre, c_radius = self._leaves
        rows, row_bounds = _partition(X - self._centre, TILE_ROWS)
        r_centre, r_radius = _balls(X - self._centre, rows, row_bounds)
        reach = np.sqrt(np.maximum.reduceat(thr[rows], row_bounds[:-1]))
        keep = _balls_within(r_centre, r_radius, c_centre, c_radius, reach)
        return _TilePlan(rows, row_bounds, m, cols, col_bounds, keep)


#: Queries x fitted points from which :meth:`BlasSearch.radius_csr` prunes
#: tiles (below: every tile, the partition trees cost more than they save).
PRUNE_TILE_PAIRS = 2**24
#: Fitted points per leaf of its partition tree: the column tiles are runs
#: of consecutive kept leaves.
LEAF_POINTS = 128


@dataclass(frozen=True)
class _TilePlan:
    """Tiles of queries ``rows[row_bounds[k]:row_bounds[k + 1]]``; ``m``
    fitted points in the order ``cols`` (None: as given), in leaves
    ``col_bounds``; ``keep[k]``: the leaves that tile k visits (None: every
    point)."""

    rows: np.ndarray
    row_bounds: np.ndarray
    m: int
    cols: np.ndarray | None
    col_bounds: np.ndarray | None
    keep: np.ndarray | None

    def spans(self, k: int, width: int):
        """(c0, c1): the column ranges of tile k, at most ``width`` wide
        (runs of kept leaves merged)."""
        if self.keep is None:
            return [(c0, min(c0 + width, self.m)) for c0 in range(0, self.m, width)]
        kept = np.flatnonzero(self.keep[k])
        if not len(kept):
            return []
        b = self.col_bounds
        starts, ends = b[kept], b[kept + 1]
        new = np.ones(len(kept), bool)
        new[1:] = starts[1:] != ends[:-1]
        run_s, run_e = starts[new], ends[np.append(new[1:], True)]
        return [(c0, min(c0 + width, e)) for s0, e in zip(run_s, run_e)
                for c0 in range(s0, e, width)]


def _partition(P: np.ndarray, leaf: int):
    """(order, bounds): a permutation of the points ``P`` whose runs
    ``order[bounds[k]:bounds[k + 1]]`` (at most ``leaf`` points) are the
    leaves of a binary tree, each node split at the median of its points
    along their principal direction (two power iterations on at most 512
    of them, from the coordinate of largest spread): compact leaves,
    separated clusters in separate leaves."""
    P = np.asarray(P, dtype=np.float64)
    order = np.arange(len(P))
    bounds, stack = [], [(0, len(P))]
    rng = np.random.default_rng(0)
    while stack:
        s, e = stack.pop()
        if e - s <= leaf:
            bounds.append(s)
            continue
        idx = order[s:e]
        Q = P[idx]
        sub = Q if len(Q) <= 512 else Q[rng.choice(len(Q), 512, replace=False)]
        sub = sub - sub.mean(axis=0)
        v = np.zeros(P.shape[1])
        v[np.argmax(np.ptp(sub, axis=0))] = 1.0
        for _ in range(2):
            v = sub.T @ (sub @ v)
            v /= max(np.linalg.norm(v), 1e-300)
        half = (e - s) // 2
        part = np.argpartition(Q @ v, half)
        order[s:e] = idx[part]
        stack += [(s + half, e), (s, s + half)]
    bounds = np.array(sorted(bounds) + [len(P)], dtype=np.int64)
    return order, bounds


def _balls(P: np.ndarray, order: np.ndarray, bounds: np.ndarray):
    """(centres, radii) of the leaves: their means and largest distances
    to them (float64, rounded up)."""
    Ps = np.asarray(P, dtype=np.float64)[order]
    counts = np.diff(bounds)
    centres = np.add.reduceat(Ps, bounds[:-1], axis=0) / counts[:, None]
    d2 = _sqnorms(Ps - np.repeat(centres, counts, axis=0))
    return centres, np.sqrt(np.maximum.reduceat(d2, bounds[:-1])) * (1 + 1e-12) + 1e-300


def _balls_within(ca, ra, cb, rb, reach) -> np.ndarray:
    """(A, B) bool: the pairs of balls with points within ``reach[a]`` of
    each other (centre distance minus the radii, with a slack for their
    rounding); direct differences, by blocks of rows."""
    keep = np.empty((len(ca), len(cb)), bool)
    rows = max(1, 2**20 // max(1, len(cb) * ca.shape[1]))
    for s in range(0, len(ca), rows):
        diff = ca[s : s + rows, None, :] - cb[None, :, :]
        d = np.sqrt(np.einsum("abf,abf->ab", diff, diff))
        gap = d - ra[s : s + rows, None] - rb[None, :]
        keep[s : s + rows] = gap <= reach[s : s + rows, None] * (1 + 1e-9) + 1e-9 * (
            d + ra[s : s + rows, None] + rb[None, :])
    return keep


def stack_rows(parts, n: int, dtype):
    """``(values, indices, indptr)``: one CSR of ``n`` rows from parts
    ``(rows, counts, values, indices)``, each the consecutive entries of its
    rows ``rows`` (``counts`` per row; every row in one part at most)."""
    total = np.zeros(n, np.int64)
    for rows, counts, _, _ in parts:
        total[rows] = counts
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(total, out=indptr[1:])
    vals = np.empty(indptr[-1], dtype)
    inds = np.empty(indptr[-1], np.int64)
    for rows, counts, v, i in parts:
        pos = np.repeat(indptr[rows] - (np.cumsum(counts) - counts), counts)
        pos += np.arange(len(v))
        vals[pos], inds[pos] = v, i
    return vals, inds, indptr


def _tile_dtype(Yc: np.ndarray):
    """float32 for the tiles, also of float64 data (half the GEMM time; the
    candidates' margin covers the rounding to float32 and every candidate
    is tested again in float64), unless the centred points come near
    float32's overflow."""
    top = float(np.abs(Yc).max(initial=0.0))
    return np.dtype(np.float32 if top < 1e15 else Yc.dtype)


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
