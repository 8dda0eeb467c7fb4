"""Exact k-NN searches that visit only the nearby cells (low dimension).

The fitted points are cut into cells along a Z-order (Morton) curve
(:class:`Cells`, :class:`Grid`); :class:`PrunedSearch` bounds each query
cell's K-th neighbour distance, then runs one block-sparse K-min reduction
over the pairs of cells within that bound, and certifies each query's result
(the few that fail are searched again). ``algorithm='auto'`` picks it for
euclidean metrics in at most ``PRUNE_MAX_DIM`` features.

Radius searches on the CPU (:meth:`PrunedSearch.radius_csr`) run the C
kernel of :func:`kerneltools.ranges.radius_csr` over the cell pairs within
the radii: every pair's squared distance in float64, summed as
scikit-learn's trees do, CSR rows written in place (measured at 10^5 blobs,
D = 3: 0.74 CPU s against the engine's route 1.65 s and scikit-learn's k-d
tree 1.59 s; ``asv_bench/lof_meanshift_compare_results.md``). On a GPU or
the NumPy backend the engine's route (a count, a masked K-min) re-tests its
candidates in float64 the same way (:meth:`PrunedSearch.within`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from .... import ranges as kr
from ....config import check_backend
from ....lazy import Vi
from ....selection import box_pairs

from ._blas import _gpu_visible, stack_rows
from .._metrics import Metric
from ._formula import FormulaSearch, masked

#: Cluster pruning (``algorithm='auto'`` picks it): at most this many
#: features, at least this many fitted points. Fitted points are cut into
#: cells of ``PRUNE_CELL_POINTS`` consecutive points along a Morton
#: (Z-order) curve, queries into cells of ``PRUNE_QUERY_POINTS``: balanced
#: cells whatever the density (uniform or clustered data). Smaller cells mean
#: fewer candidate pairs and more blocks; the C backend reduces every block
#: in one call.
PRUNE_MAX_DIM = 3
PRUNE_MIN_FIT = 1_000
#: ... and a search prunes only from this many pairs (queries x fitted
#: points): below, brute force is as fast (measured, K = 10, D = 3 float32,
#: fit + query: pruned / brute 0.9 at 1e5 x 1e3, 1.3 at 5e3 x 3e3, 2.4 at
#: 1e4 x 1e4; a fit with few queries never builds the cells).
PRUNE_MIN_PAIRS = 2**24
PRUNE_CELL_POINTS = 32
PRUNE_QUERY_POINTS = 32
#: Fitted cells nearest to a query cell's centre that bound its K-th
#: neighbour distance (besides the K / PRUNE_CELL_POINTS cells needed).
PRUNE_NEAR_CELLS = 8
#: The first pass visits the cells within this times the K-th neighbour
#: distance of a query cell's centre (queries farther out: a second pass).
PRUNE_RADIUS_FACTOR = 1.3
#: Queries per pruned pass (more: chunks consecutive in Z-order, which bound
#: the temporaries; each pass also gathers the fitted points once: measured
#: at 1e6 x 1e6, chunks of 2^18 took 11-12.7 s and 364 MB, one pass 8.0 s
#: and 643 MB).
PRUNE_QUERY_CHUNK = 2**20
#: A radius search (:meth:`PrunedSearch.radius_csr`) visits cells from this
#: many pairs (below, every point: measured, 3000 x 3000 blobs, D = 3, CPU
#: seconds of fit + query: cells 0.011, every point 0.030).
RADIUS_MIN_PAIRS = 2**20
#: Fewest queries per cell of a radius search (:meth:`PrunedSearch.radius_csr`).
RADIUS_MIN_QUERY_POINTS = 4
#: Relative slack on the pruning radii: the K-min values are rounded (float32).
_PRUNE_SLACK = 1e-4


#: Bit spreading for Z-order codes: (shift, mask) steps that put bit b of a
#: coordinate at bit d * b (the classic "part1by1" / "part1by2").
_SPREAD = {
    2: [(16, 0x0000FFFF0000FFFF), (8, 0x00FF00FF00FF00FF), (4, 0x0F0F0F0F0F0F0F0F),
        (2, 0x3333333333333333), (1, 0x5555555555555555)],
    3: [(32, 0x001F00000000FFFF), (16, 0x001F0000FF0000FF), (8, 0x100F00F00F00F00F),
        (4, 0x10C30C30C30C30C3), (2, 0x1249249249249249)],
}


def _morton(P: np.ndarray, lo: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Z-order codes of ``P`` on the grid ``(P - lo) * scale`` (clipped)."""
    d = P.shape[1]
    bits = {1: 62, 2: 31, 3: 21}[d]
    top = 2.0**bits - 1
    q = np.clip((P - lo) * scale * top, 0, top).astype(np.uint64)
    if d == 1:
        return q[:, 0]
    code = np.zeros(len(P), np.uint64)
    for c in range(d):
        x = q[:, c]
        for shift, mask in _SPREAD[d]:
            x = (x | (x << np.uint64(shift))) & np.uint64(mask)
        code |= x << np.uint64(c)
    return code


@dataclass(frozen=True)
class Cells:
    """Points cut into cells of consecutive points along a Z-order curve:
    ``order`` (sorted -> caller's index), ``labels`` (cell of each point, in
    the caller's order), ``ranges`` (C, 2) in sorted order, bounding boxes
    ``lo``, ``hi`` (float64), ``radii``: the largest distance from a box's
    centre to its points.

    A run of consecutive Z-order points may jump across the space; cells
    whose box is much larger than most are halved (a few rounds), so that
    boxes stay compact."""

    order: np.ndarray
    labels: np.ndarray
    ranges: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    radii: np.ndarray

    @classmethod
    def cut(cls, P: np.ndarray, per_cell: int, frame) -> Cells:
        order = np.argsort(_morton(P, *frame), kind="stable")
        Ps = P[order].astype(np.float64)
        starts = np.arange(0, len(P), per_cell)
        for _ in range(4):
            ends = np.append(starts[1:], len(P))
            half = _half_diagonals(Ps, starts)
            split = (half > 2 * np.median(half)) & (ends - starts > 1)
            if not split.any():
                break
            starts = np.sort(np.concatenate([starts, (starts + ends)[split] // 2]))
        ends = np.append(starts[1:], len(P))
        lo, hi = np.minimum.reduceat(Ps, starts), np.maximum.reduceat(Ps, starts)
        counts = ends - starts
        d2 = ((Ps - np.repeat((lo + hi) / 2, counts, axis=0)) ** 2).sum(1)
        labels = np.empty(len(P), np.int64)
        labels[order] = np.repeat(np.arange(len(starts)), counts)
        return cls(order, labels, np.stack([starts, ends], 1), lo, hi,
                   np.sqrt(np.maximum.reduceat(d2, starts)) * (1 + 1e-12))

    @property
    def centers(self) -> np.ndarray:
        return (self.lo + self.hi) / 2

    @property
    def counts(self) -> np.ndarray:
        return self.ranges[:, 1] - self.ranges[:, 0]


def _half_diagonals(Ps: np.ndarray, starts: np.ndarray) -> np.ndarray:
    lo, hi = np.minimum.reduceat(Ps, starts), np.maximum.reduceat(Ps, starts)
    return np.sqrt((((hi - lo) / 2) ** 2).sum(1))


#: Cells per group in the search for near cells: groups of 8 consecutive
#: cells (query side and fitted side) are paired first, through k-d trees of
#: the fitted groups' centres, then their cells box by box.
_GROUP = 8


class Grid:
    """The fitted points in Z-order cells (:class:`Cells`), the frame of
    their Z-order codes, the cells' groups (``_GROUP`` consecutive cells:
    ``first`` cell of each, bounding boxes ``glo``, ``ghi``), a k-d tree of
    the cells' centres and k-d trees of the groups' centres (scipy's, on
    n / 256 points: they find the groups near a group of query cells; the
    point pairs go through the block-sparse reduction). One tree per class
    of group radius (the smaller three quarters, the others): a search
    reaches out by the largest radius of the tree's groups.

    Built at the first pruned search (``Grid.fit`` only stores the points):
    a fit followed by a few queries stays as cheap as brute force."""

    def __init__(self, Y: np.ndarray):
        self._Y = Y

    @classmethod
    def fit(cls, Y: np.ndarray) -> Grid:
        return cls(Y)

    @functools.cached_property
    def _built(self) -> tuple:
        from scipy.spatial import cKDTree

        Y = self._Y
        lo = Y.min(axis=0).astype(np.float64)
        extent = Y.max(axis=0).astype(np.float64) - lo
        scale = 1 / np.maximum(extent.max(), 1e-300) * np.ones_like(extent)
        frame = (lo, scale)
        cells = Cells.cut(Y, PRUNE_CELL_POINTS, frame)
        first = np.arange(0, len(cells.counts) + _GROUP, _GROUP)
        first[-1] = len(cells.counts)
        first = np.unique(first)
        glo = np.minimum.reduceat(cells.lo, first[:-1])
        ghi = np.maximum.reduceat(cells.hi, first[:-1])
        radii = np.sqrt((((ghi - glo) / 2) ** 2).sum(1))
        small = radii <= np.quantile(radii, 0.75)
        trees = tuple(
            (cKDTree((glo[ids] + ghi[ids]) / 2), ids, radii[ids].max())
            for ids in (np.flatnonzero(small), np.flatnonzero(~small)) if len(ids)
        )
        return frame, cells, first, glo, ghi, trees, cKDTree((cells.lo + cells.hi) / 2)

    frame = property(lambda self: self._built[0])
    cells = property(lambda self: self._built[1])
    first = property(lambda self: self._built[2])  # first cell of each group
    glo = property(lambda self: self._built[3])  # groups' boxes
    ghi = property(lambda self: self._built[4])
    trees = property(lambda self: self._built[5])  # (tree, group ids, largest radius)
    cell_tree = property(lambda self: self._built[6])  # the cells' centres

    def query_cells(self, X: np.ndarray, per_cell: int) -> Cells:
        """``Cells.cut(X, per_cell, self.frame)``: the fitted cells themselves
        when X holds the fitted points (a transform of the training set, as
        TSNE's neighbour graph: the same cut, not made twice)."""
        Y = self._Y
        if (per_cell == PRUNE_CELL_POINTS and X.shape == Y.shape
                and X.dtype == Y.dtype and np.array_equal(X, Y)):
            return self.cells
        return Cells.cut(X, per_cell, self.frame)

    def nearest(self, c: np.ndarray, m: int) -> np.ndarray:
        """(len(c), m) labels of the cells of nearest centres to points ``c``."""
        m = min(m, len(self.cells.counts))
        return self.cell_tree.query(c, k=m)[1].reshape(len(c), m)


def _box_dist(a, lo_a, hi_a, b, lo_b, hi_b) -> np.ndarray:
    """Smallest distance between points of boxes ``[lo_a[a], hi_a[a]]`` and
    ``[lo_b[b], hi_b[b]]``, feature by feature (1-D gathers: 6x faster than
    gathering rows)."""
    acc = np.zeros(len(a))
    col = np.ascontiguousarray
    for f in range(lo_a.shape[1]):
        g = np.maximum(col(lo_b[:, f]).take(b) - col(hi_a[:, f]).take(a),
                       col(lo_a[:, f]).take(a) - col(hi_b[:, f]).take(b))
        np.maximum(g, 0, out=g)
        acc += g * g
    return np.sqrt(acc, out=acc)


def _group_pairs(lo, hi, radius, g: Grid):
    """(A, B): the groups of boxes ``[lo[A], hi[A]]`` and fitted groups
    ``B`` within ``radius[A]``, through k-d trees of centres (within radius
    + both radii); boxes are grouped by that reach (classes a factor sqrt(2)
    apart), so that no search reaches much farther than it needs to."""
    from scipy.spatial import cKDTree

    c = (lo + hi) / 2
    reach = radius + np.sqrt((((hi - lo) / 2) ** 2).sum(1))
    finite = np.isfinite(reach)
    cls = np.full(len(c), -1, np.int64)  # -1: no bound, every group
    if finite.any():
        base = max(reach[finite].min(), 1e-300)
        # in log space: a zero reach (duplicate points) or a huge ratio stays finite
        octaves = np.log2(np.maximum(reach[finite], base)) - np.log2(base)
        cls[finite] = np.floor(2 * octaves).astype(np.int64)
    n_groups = len(g.first) - 1
    a_parts, b_parts = [], []
    for k in np.unique(cls):
        rows = np.flatnonzero(cls == k)
        if k < 0:
            a_parts.append(np.repeat(rows, n_groups))
            b_parts.append(np.tile(np.arange(n_groups), len(rows)))
            continue
        qtree = cKDTree(c[rows])
        for tree, ids, r_max in g.trees:
            m = qtree.sparse_distance_matrix(
                tree, (reach[rows].max() + r_max) * (1 + 1e-9) + 1e-300,
                output_type="ndarray")
            a_parts.append(rows[m["i"]])
            b_parts.append(ids[m["j"]])
    a, b = np.concatenate(a_parts), np.concatenate(b_parts)
    near = _box_dist(a, lo, hi, b, g.glo, g.ghi) <= radius[a]
    return a[near], b[near]


def _expand(outer, first, n_inner):
    """(outer index, inner index) of every member ``first[outer] + t``,
    ``t < n_inner`` (vectorised, for groups of varying sizes)."""
    reps = np.repeat(np.arange(len(outer)), n_inner)
    t = np.arange(len(reps)) - np.repeat(np.cumsum(n_inner) - n_inner, n_inner)
    return reps, first[reps] + t


def _near_cells(lo, hi, radius, g: Grid):
    """(starts, b): the fitted cells ``b[starts[a]:starts[a + 1]]`` within
    ``radius[a]`` of box ``[lo[a], hi[a]]`` (boxes in an order where
    neighbours follow each other: cells of a Z-order), box to box, nearest
    first: pairs of groups of ``_GROUP`` boxes first (:func:`_group_pairs`),
    then query groups and fitted cells (vectorised), then boxes and the
    cells of their group's pairs, in C
    (:func:`kerneltools.selection.box_pairs`; NumPy without a compiler)."""
    fc = g.cells
    starts = np.arange(0, len(lo), _GROUP)
    glo, ghi = np.minimum.reduceat(lo, starts), np.maximum.reduceat(hi, starts)
    grad = np.maximum.reduceat(radius, starts)
    A, B = _group_pairs(glo, ghi, grad, g)
    # query groups x fitted cells, grouped by query group, nearest first
    k, b = _expand(B, g.first[B], g.first[B + 1] - g.first[B])
    A = A[k]
    dist = _box_dist(A, glo, ghi, b, fc.lo, fc.hi)
    near = dist <= grad[A]
    A, b, dist = A[near], b[near], dist[near]
    order = np.argsort(A + dist / (2 * dist.max(initial=0) + 1e-300))
    A, b = A[order], b[order]
    return box_pairs(lo, hi, radius, np.append(starts, len(lo)),
                     np.searchsorted(A, np.arange(len(starts) + 1)), b, fc.lo, fc.hi,
                     backend="auto")


def _near_pairs(lo, hi, radius, g: Grid):
    """(a, b): the pairs of :func:`_near_cells`, grouped by a, nearest first."""
    first, b = _near_cells(lo, hi, radius, g)
    return np.repeat(np.arange(len(lo)), np.diff(first)), b


def prunes(metric: Metric, X: np.ndarray, params: dict, algorithm: str) -> bool:
    """Whether a fit on ``X`` enables pruning (scikit-learn's ``_fit_method``
    is then ``"block_sparse"``): the searches of its queries visit cells."""
    return (algorithm != "brute"  # the user asked for every pair
            and metric.squared_l2  # the cells' bounds are euclidean
            and params.get("w") is None  # (a weighted minkowski's are not)
            # in more dimensions the cells near a query hold most points
            and X.shape[1] <= PRUNE_MAX_DIM
            # fewer fitted points: brute force is as fast, the cells cost
            and X.shape[0] >= PRUNE_MIN_FIT)


class PrunedSearch(FormulaSearch):
    """Exact K-smallest searches that visit only the nearby cells.

    Fitted points and queries are cut into cells along a Z-order curve
    (:class:`Cells`). For each query cell a, a radius ``u_a``: the K-th
    neighbour distance of its centre among the points of the nearest fitted
    cells (a first, small block-sparse K-min), times
    ``PRUNE_RADIUS_FACTOR``. The K-min reduction then runs block-sparse on
    the pairs of cells within ``u_a`` box to box, in one call of the C
    backend, nearest cells first (the K-th value falls early and most tiles
    are skipped whole).

    The result of a query q at depth ``delta`` inside its cell's box is
    exact if its K-th distance is at most ``u_a + delta``: every point
    closer than that lies in a visited cell. The other queries (a few
    percent) are searched again, each alone, within their K-th distance
    found, which bounds the true one. Same results as the dense search
    (exact; ties by index).
    """

    def __init__(self, metric: Metric, Y: np.ndarray, backend, grid: Grid):
        super().__init__(metric, Y, backend)
        self.grid = grid

    @staticmethod
    def is_usable_for(case) -> bool:
        """The fit enabled pruning (:func:`prunes`), queries on the host (a
        device's: :class:`~._device.HostSearch`). Where the reductions run
        on a GPU, :class:`~._cells.CellSearch` reduces the cell pairs with
        the engine's block-sparse K-min instead of its C K-min."""
        return case.pruned and not case.on_device

    @classmethod
    def build(cls, case):
        """The search over ``case``'s fitted points and the fit's cells."""
        Y = case.host_points()
        return cls(case.metric, Y, case.backend, case.cells(Y))

    def _centre_kth(self, c: np.ndarray, k: int) -> np.ndarray:
        """The K-th neighbour distance of points ``c`` among the points of
        their nearest fitted cells (an upper bound of the true one; inf
        where these cells hold fewer than K points)."""
        fc = self.grid.cells
        near = self.grid.nearest(c, -(-k // PRUNE_CELL_POINTS) + PRUNE_NEAR_CELLS)
        m = near.shape[1]
        one = np.arange(len(c))
        bs = kr.BlockSparsity.from_pairs(
            (len(c), len(self.Y)), one, fc.order, np.repeat(one, m), near.ravel(),
            np.stack([one, one + 1], 1), fc.ranges, priority=np.arange(len(c) * m))
        kth = Vi(c.astype(self.Y.dtype)).sqdist(self._y_j).Kmin(
            k, axis=1, backend=self.backend, ranges=bs)[:, -1]
        return np.sqrt(kth.astype(np.float64))

    def _pruned(self, X, order, ranges, lo, hi, radius, k: int):
        """K-min of the queries ``X`` (cells ``ranges`` of ``X[order]`` with
        boxes ``lo``, ``hi``) over the fitted cells within ``radius`` of
        their cell, nearest cells first (the K-th value falls early, most
        tiles are skipped)."""
        a, b = _near_pairs(lo, hi, radius, self.grid)
        fc = self.grid.cells
        bs = kr.BlockSparsity.from_pairs((len(X), len(self.Y)), order, fc.order, a, b,
                                         ranges, fc.ranges, priority=np.arange(len(a)))
        v, i = self.rdist(X).Kmin_argKmin(k, axis=1, backend=self.backend, ranges=bs)
        return v.reshape(-1, k), i.reshape(-1, k)

    def kmin(self, X: np.ndarray, k: int):
        X = self.metric.prepare(X)
        if len(X) * len(self.Y) < PRUNE_MIN_PAIRS or k >= len(self.Y) // 2:
            return super().kmin(X, k)  # brute force pays here
        if len(X) <= PRUNE_QUERY_CHUNK:
            return self._kmin_chunk(X, k)
        # chunks of queries consecutive in Z-order (compact regions): the
        # temporaries of the cell pairs stay bounded
        order = np.argsort(_morton(X, *self.grid.frame), kind="stable")
        v = np.empty((len(X), k), X.dtype)
        i = np.empty((len(X), k), np.int64)
        for s in range(0, len(X), PRUNE_QUERY_CHUNK):
            rows = order[s:s + PRUNE_QUERY_CHUNK]
            v[rows], i[rows] = self._kmin_chunk(X[rows], k)
        return v, i

    def count(self, X: np.ndarray, threshold) -> np.ndarray:
        """Fitted points within ``threshold`` (rdist, a float or one per
        query) of each query, counted over the cells within the radius only
        (an estimate for :func:`radius_search`, which checks the K-min)."""
        X = self.metric.prepare(X)
        if len(X) * len(self.Y) < PRUNE_MIN_PAIRS:
            return super().count(X, threshold)
        out = np.empty(len(X), np.int64)
        thr = np.broadcast_to(np.asarray(threshold, np.float64), (len(X),))
        order = np.argsort(_morton(X, *self.grid.frame), kind="stable")
        for s in range(0, len(X), PRUNE_QUERY_CHUNK):
            rows = order[s:s + PRUNE_QUERY_CHUNK]
            out[rows] = self._count_chunk(X[rows], thr[rows], np.ndim(threshold))
        return out

    def _within(self, X: np.ndarray, thr: np.ndarray, sentinels: int = 0,
                per_cell: int = PRUNE_QUERY_POINTS):
        """The block sparsity of the pairs of query cells (of ``per_cell``
        queries) and fitted cells within the (rdist) thresholds ``thr`` of
        the queries, box to box; with ``sentinels``, over that many points
        before the fitted ones (:func:`~._formula.with_sentinels`),
        one cell that every query cell visits first."""
        qc = Cells.cut(X, per_cell, self.grid.frame)
        cell_thr = np.maximum.reduceat(thr[qc.order], qc.ranges[:, 0])
        radius = np.sqrt(np.maximum(cell_thr, 0)) * (1 + _PRUNE_SLACK) + 1e-30
        a, b = _near_pairs(qc.lo, qc.hi, radius, self.grid)
        fc = self.grid.cells
        order_j, ranges_j = fc.order, fc.ranges
        if sentinels:
            first = np.arange(len(qc.ranges))
            a, b = np.concatenate([first, a]), np.concatenate([0 * first, b + 1])
            order_j = np.concatenate([np.arange(sentinels), fc.order + sentinels])
            ranges_j = np.concatenate([[[0, sentinels]], fc.ranges + sentinels])
        return kr.BlockSparsity.from_pairs((len(X), len(self.Y) + sentinels),
                                           qc.order, order_j, a, b, qc.ranges,
                                           ranges_j, priority=np.arange(len(a)))

    def _masked_kmin(self, value, X: np.ndarray, k: int, t, fill: float,
                     sentinel: float):
        """:meth:`FormulaSearch._masked_kmin` over the cells within ``t`` only."""
        if len(X) * len(self.Y) < PRUNE_MIN_PAIRS or k >= len(self.Y) // 2:
            return super()._masked_kmin(value, X, k, t, fill, sentinel)
        value, w_j = value
        t = np.broadcast_to(t, (len(X),))
        v = np.empty((len(X), k), X.dtype)
        i = np.empty((len(X), k), np.int64)
        order = np.argsort(_morton(X, *self.grid.frame), kind="stable")
        for s in range(0, len(X), PRUNE_QUERY_CHUNK):
            rows = order[s:s + PRUNE_QUERY_CHUNK]
            bs = self._within(X[rows], t[rows].astype(np.float64), sentinels=k)
            F = masked(value(rows), Vi(t[rows, None]), w_j, fill, sentinel)
            vr, ir = F.Kmin_argKmin(k, axis=1, backend=self.backend, ranges=bs)
            v[rows], i[rows] = vr.reshape(-1, k), ir.reshape(-1, k)
        return v, i

    def kmin_within(self, X: np.ndarray, k: int, threshold) -> tuple:
        """The K smallest rdist of each query among the fitted points of the
        cells within its threshold (exact for every point within it; the
        others may be missing, or come as +inf): one block-sparse pass."""
        X = self.metric.prepare(X)
        if len(X) * len(self.Y) < PRUNE_MIN_PAIRS or k >= len(self.Y) // 2:
            return FormulaSearch.kmin(self, X, k)
        thr = np.broadcast_to(np.asarray(threshold, np.float64), (len(X),))
        v = np.empty((len(X), k), X.dtype)
        i = np.empty((len(X), k), np.int64)
        order = np.argsort(_morton(X, *self.grid.frame), kind="stable")
        for s in range(0, len(X), PRUNE_QUERY_CHUNK):
            rows = order[s:s + PRUNE_QUERY_CHUNK]
            bs = self._within(X[rows], thr[rows])
            vr, ir = self.rdist(X[rows]).Kmin_argKmin(k, axis=1, backend=self.backend,
                                                      ranges=bs)
            v[rows], i[rows] = vr.reshape(-1, k), ir.reshape(-1, k)
        return v, i

    def radius_csr(self, X: np.ndarray, thr: np.ndarray, *, exclude_self: bool,
                   by_index: bool):
        """:func:`~._formula.radius_search` in one pass on the host:
        ``(rdist, indices, indptr)`` of the points within ``thr`` (one per
        query), from :func:`kerneltools.ranges.radius_csr` over the cells
        within the thresholds (or, below :data:`RADIUS_MIN_PAIRS` pairs,
        over every point: the cells are not built). Every distance is
        computed in float64 (float32 data too: the sets are scikit-learn's),
        none pruned by rounding. None where the reductions would run on a
        GPU or the NumPy backend (the caller then takes the engine's
        route)."""
        name = check_backend(self.backend, "NearestNeighbors")
        if not (name == "cpu" or (name == "auto" and not _gpu_visible())):
            return None
        X = self.metric.prepare(X)
        n, m = len(X), len(self.Y)
        sort = "index" if by_index else "distance"
        own = np.arange(n) if exclude_self else None
        if n * m < RADIUS_MIN_PAIRS:
            first = np.arange(0, n, PRUNE_QUERY_POINTS)
            rows = np.stack([first, np.minimum(first + PRUNE_QUERY_POINTS, n)], 1)
            bs = kr.BlockSparsity.from_pairs((n, m), np.arange(n), np.arange(m),
                                             np.arange(len(first)), 0 * first, rows,
                                             [[0, m]])
            d, i, indptr = kr.radius_csr(X, self.Y, thr, bs, exclude=own, sort=sort,
                                         backend=name)
            return d.astype(X.dtype), i, indptr
        # query cells about as large as the fitted ones: fewer queries per
        # cell where they are sparser (measured, 10^4 queries x 10^5 blobs,
        # D = 3: 32 per cell 0.13 CPU s, 8 per cell 0.095 s)
        per_cell = int(np.clip(PRUNE_QUERY_POINTS * min(n, PRUNE_QUERY_CHUNK) // m,
                               RADIUS_MIN_QUERY_POINTS, PRUNE_QUERY_POINTS))
        if n <= PRUNE_QUERY_CHUNK:
            bs = self._within(X, thr, per_cell=per_cell)
            d, i, indptr = kr.radius_csr(X, self.Y, thr, bs, exclude=own, sort=sort,
                                         backend=name)
            return d.astype(X.dtype), i, indptr
        order = np.argsort(_morton(X, *self.grid.frame), kind="stable")
        parts = []  # queries by chunks consecutive in Z-order (as kmin)
        for s in range(0, n, PRUNE_QUERY_CHUNK):
            rows = order[s:s + PRUNE_QUERY_CHUNK]
            bs = self._within(X[rows], thr[rows], per_cell=per_cell)
            d, i, indptr = kr.radius_csr(X[rows], self.Y, thr[rows], bs, sort=sort,
                                         backend=name,
                                         exclude=None if own is None else rows)
            parts.append((rows, np.diff(indptr), d, i))
        d, i, indptr = stack_rows(parts, n, np.float64)
        return d.astype(X.dtype), i, indptr

    def _count_chunk(self, X: np.ndarray, thr: np.ndarray, per_row: bool):
        bs = self._within(X, thr)
        bound = Vi(thr.astype(X.dtype)[:, None]) if per_row else float(thr[0])
        F = self.rdist(X) <= bound
        n = F.sum(axis=1, backend=self.backend, ranges=bs)
        return np.rint(n).astype(np.int64).ravel()

    def _kmin_chunk(self, X: np.ndarray, k: int):
        qc = self.grid.query_cells(X, PRUNE_QUERY_POINTS)
        u = self._centre_kth(qc.centers, k) * PRUNE_RADIUS_FACTOR
        v, i = self._pruned(X, qc.order, qc.ranges, qc.lo, qc.hi, u, k)
        # the certificate: the K-th distance (rounded up) within u + depth
        Xd = X.astype(np.float64)
        depth = np.minimum(Xd - qc.lo[qc.labels], qc.hi[qc.labels] - Xd).min(1)
        dk = np.sqrt(v[:, -1].astype(np.float64)) * (1 + _PRUNE_SLACK) + 1e-30
        again = np.flatnonzero(~(dk <= u[qc.labels] + depth))
        if len(again):
            # (in the queries' Z-order, so that groups of them are compact)
            rank = np.empty(len(X), np.int64)
            rank[qc.order] = np.arange(len(X))
            again = again[np.argsort(rank[again])]
            P = Xd[again]
            one = np.arange(len(again))
            ranges = np.stack([one, one + 1], 1)
            v[again], i[again] = self._pruned(X[again], one, ranges, P, P, dk[again], k)
        return v, i
