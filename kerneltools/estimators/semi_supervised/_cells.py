"""Cell pruning of the RBF graph (private): the cell pairs its reductions visit.

The points are cut into k-means cells
(:func:`kerneltools.estimators._shared._kmeans_cells.kmeans_labels`). For
two cells ``a`` and ``b`` with centres ``c_a``, ``c_b`` and ``u`` the unit
vector from ``c_a`` to ``c_b``, every pair ``x`` in ``a``, ``y`` in ``b`` is at
least ``max(L_ab, T_ab)`` apart, with

- ``L_ab = min_{y in b} y.u - max_{x in a} x.u`` (the gap between the two
  cells' projections on ``u``: one GEMM of the points with the centres), and
- ``T_ab = |c_a - c_b| - r_a - r_b`` (the triangle inequality, ``r`` the
  cells' radii),

so ``W_xy = exp(-gamma |x - y|^2) <= w_ab = exp(-gamma max(L, T, 0)^2)``.

Which pairs are left out: the graph's rows are ``W_ij / sqrt(d_i d_j)``
(spreading) or ``W_ij / d_i`` (propagation), ``d`` the degrees. A cell pair
is dropped only if, for every row ``i`` of ``a``, all the dropped terms
together weigh at most ``2^-53`` (float64's unit roundoff) of the row's
total: ``sum_{b dropped} w_ab |b| sqrt(d_max / d_min(b)) <= 2^-53 d_i``
(which bounds the dropped share of both normalisations' rows, whatever
labels they multiply: a row's product changes by less than the rounding of
its largest possible value). The degrees are computed first over the
candidate pairs (the bounds ``w_ab`` above ``2^-53 d / n``, ``d`` a low
quantile of the degrees of a sample of points); each cell then drops its
cheapest pairs within that budget, tested with the degrees found (lower
bounds of the exact ones: the test is only more severe); where that keeps a
pair the degrees left out, the degrees are summed again over the kept
pairs.

Of the kept pairs, :meth:`RbfCells.far` picks in the same way those whose
terms times a bound of their float32 rounding stay within another 2^-53 of
each row's total: the graph reduces them in float32.

Reductions on the CPU only (a GPU reduces one block per call), and from
:data:`MIN_POINTS` points.
"""

from __future__ import annotations

import numpy as np
from threadpoolctl import threadpool_limits

from ... import ranges as kr
from .._shared._kmeans_cells import kmeans_labels, on_cpu

__all__ = ["MAX_KEPT", "MIN_POINTS", "RbfCells", "on_cpu"]

#: Fewest points for which the cells are made.
MIN_POINTS = 4096
#: Points per cell, on average.
CELL_POINTS = 64
#: Most cells.
MAX_CELLS = 2048
#: The centres are fitted on this many sampled points per cell.
SAMPLE_PER_CELL = 16
#: Rows per GEMM block of the distance bounds.
_ROWS = 4096
#: float64's unit roundoff.
UNIT = 2.0**-53
#: Kept share of the pairs above which the dense pass is kept.
MAX_KEPT = 0.7


class RbfCells:
    """The cells of ``X`` and the bounds ``log w_ab`` of the RBF kernel
    ``exp(-gamma |x - y|^2)`` between them (module docstring)."""

    def __init__(self, X: np.ndarray, gamma: float, backend=None):
        X = np.asarray(X, dtype=np.float64)
        self.labels = kmeans_labels(X, cell_points=CELL_POINTS, max_cells=MAX_CELLS,
                                    sample_per_cell=SAMPLE_PER_CELL, backend=backend)
        self.counts = np.bincount(self.labels)
        c = self.centres = kr.cluster_centroids(X, self.labels)
        r = kr.cluster_radii(X, self.labels, c)
        self.log_w = -float(gamma) * _distance_bound(X, self.labels, c, r) ** 2

    def candidates(self, d_guess: float):
        """The cell pairs the degrees are summed over: those whose bound
        ``w_ab`` is above ``2^-53 d_guess / n``."""
        return self.log_w > np.log(UNIT * d_guess / len(self.labels))

    def keep(self, degrees):
        """The kept cell pairs, a (C, C) mask: for each row cell ``a``, its
        column cells of the smallest ``w_ab |b| sqrt(d_max / d_min(b))`` are
        dropped while their total stays within ``2^-53 d_min(a)`` (module
        docstring); ``degrees`` are lower bounds of the exact ones."""
        cost, d_min = self._cost(degrees)
        return ~self._cheapest(cost, UNIT * d_min)

    def far(self, keep, degrees, rel_err: float):
        """The kept cell pairs whose terms may be computed in float32: for
        each row cell, its kept column cells of the smallest bounds (as
        :meth:`keep`) while their total times ``rel_err`` (a bound of a
        float32 term's relative error) stays within ``2^-53 d_min(a)``: their
        rounding weighs no more than the pairs dropped. A (C, C) mask."""
        cost, d_min = self._cost(degrees)
        cost = np.where(keep, cost * rel_err, np.inf)
        return self._cheapest(cost, UNIT * d_min) & keep

    def _cost(self, degrees):
        """``(w_ab |b| sqrt(d_max / d_min(b)), d_min)``: the bounds of the cell
        pairs' terms, inf on the diagonal (a cell always meets itself), and
        the least degree of each cell."""
        d = np.maximum(np.asarray(degrees, np.float64), 0.0)
        d_min = np.full(len(self.counts), np.inf)
        np.minimum.at(d_min, self.labels, d)
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            weight = self.counts * np.sqrt(float(d.max()) / d_min)
            cost = np.exp(self.log_w) * weight[None, :]
        cost = np.where(np.isfinite(cost), cost, np.inf)
        np.fill_diagonal(cost, np.inf)
        return cost, d_min

    @staticmethod
    def _cheapest(cost, budget):
        """Per row, the columns of the smallest ``cost`` whose running total
        stays within the row's ``budget`` (a (C, C) mask)."""
        order = np.argsort(cost, axis=1, kind="stable")
        total = np.cumsum(np.take_along_axis(cost, order, axis=1), axis=1)
        chosen = np.zeros(cost.shape, dtype=bool)
        np.put_along_axis(chosen, order, total <= budget[:, None], axis=1)
        return chosen

    def kept_share(self, keep) -> float:
        """The share of all pairs that ``keep`` visits."""
        cnt = self.counts.astype(np.float64)
        return float(cnt @ keep @ cnt) / float(cnt.sum()) ** 2

    def ranges(self, keep):
        """``ranges=`` of the pairs of ``keep``."""
        return kr.block_sparsity(self.labels, self.labels, keep)


def _distance_bound(X, labels, c, r):
    """The (C, C) lower bounds ``max(L, T, 0)`` of the distances between the
    points of two cells (module docstring)."""
    C = len(c)
    # G[a, b] = max_{x in a} x.(c_b - c_a): GEMMs of blocks of rows sorted by
    # cell, maxima over each cell's run of rows (BLAS on one thread: small
    # products, which its threads would spin between)
    order = np.argsort(labels, kind="stable")
    G = np.full((C, C), -np.inf)
    with threadpool_limits(1, user_api="blas"):
        for s in range(0, len(X), _ROWS):
            rows = order[s : s + _ROWS]
            lab = labels[rows]
            P = X[rows] @ c.T
            P -= P[np.arange(len(rows)), lab][:, None]
            starts = np.flatnonzero(np.r_[True, lab[1:] != lab[:-1]])
            part = np.maximum.reduceat(P, starts, axis=0)
            G[lab[starts]] = np.maximum(G[lab[starts]], part)
    delta = np.sqrt(np.maximum(
        (c * c).sum(1)[:, None] + (c * c).sum(1)[None, :] - 2 * c @ c.T, 0.0))
    with np.errstate(invalid="ignore", divide="ignore"):
        gap = -(G + G.T) / delta
    gap = np.where(delta > 0, gap, 0.0)
    # rounding of the projections: a relative margin of the points' norms
    scale = float(np.sqrt((X * X).sum(1)).max()) + float(np.sqrt((c * c).sum(1)).max())
    gap -= 1e-12 * scale * (1 + scale) / np.where(delta > 0, delta, 1.0)
    tri = delta - r[:, None] - r[None, :] - 1e-12 * scale
    bound = np.maximum(np.maximum(gap, tri), 0.0)
    np.fill_diagonal(bound, 0.0)
    return bound

