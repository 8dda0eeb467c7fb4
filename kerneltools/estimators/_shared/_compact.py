"""Block-sparse pruning for kernels that vanish beyond a radius.

The compact kernels of :class:`~kerneltools.estimators.KernelDensity`
(``d < h``) and mean shift's flat kernel (``d <= bandwidth``) only need the
pairs of points within a radius. In low dimension, :func:`compact_ranges`
puts both point sets on grids, keeps the cell pairs whose bounding balls
come within that radius (:mod:`kerneltools.ranges`, exact: a kept pair
of cells is a superset of the pairs within the radius) and returns the
``ranges=`` of a reduction that visits only those; the result is the same
sum, in a different order of the terms.
"""

from __future__ import annotations

import numpy as np

from ... import ranges as kr

__all__ = ["compact_ranges", "euclidean_radius", "PRUNE_MAX_DIM", "PRUNE_MIN_PAIRS"]

#: Pruning applies in at most this many features (the cells a ball meets
#: grow as 3^D).
PRUNE_MAX_DIM = 3
#: ... and from this many query x fitted pairs (below, one dense pass wins).
PRUNE_MIN_PAIRS = 2**24
#: Points per cell, on average, at the least (tiny cells cost more in
#: bookkeeping than they prune).
_MIN_PER_CELL = 64
#: Kept share of the pairs above which the dense pass is kept.
_MAX_KEPT = 0.5


def euclidean_radius(metric: str, params: dict, radius: float, d: int) -> float | None:
    """A Euclidean radius that contains the ball ``metric(x, y) < radius``, or
    None where no such bound is used (other metrics, weights, transformed
    points).

    ``|.|_2 <= |.|_1`` and ``|.|_2 <= sqrt(D) |.|_inf <= sqrt(D) |.|_p``
    (``p >= 1``); for ``p < 1``, ``|.|_2 <= |.|_1 <= |.|_p``.
    """
    if metric in ("euclidean", "manhattan"):
        return radius
    if metric == "chebyshev":
        return radius * np.sqrt(d)
    if metric == "minkowski" and params.get("w") is None:
        return radius * (np.sqrt(d) if float(params["p"]) >= 1 else 1.0)
    return None


def compact_ranges(x: np.ndarray, y: np.ndarray, radius: float, cells: float = 1.0):
    """``ranges=`` for the pairs ``|x_i - y_j| <= radius`` (Euclidean), or None
    when pruning does not pay (high dimension, few pairs, most pairs kept).
    Grid cells of side ``radius / cells`` at the least (more per radius: a
    tighter cover of the balls, more cell pairs).
    """
    n, m = len(x), len(y)
    d = x.shape[1]
    if d > PRUNE_MAX_DIM or n * m < PRUNE_MIN_PAIRS or not np.isfinite(radius):
        return None
    lo = np.minimum(x.min(axis=0), y.min(axis=0))
    span = np.maximum(x.max(axis=0), y.max(axis=0)) - lo
    volume = float(np.prod(np.maximum(span, 1e-300)))
    side = max(float(radius) / cells, (volume * _MIN_PER_CELL / m) ** (1.0 / d))
    if not np.all(span / side < 2.0**20):
        return None
    lab_x, lab_y = kr.grid_cluster(x, side), kr.grid_cluster(y, side)
    cx, cy = kr.cluster_centroids(x, lab_x), kr.cluster_centroids(y, lab_y)
    rx, ry = kr.cluster_radii(x, lab_x, cx), kr.cluster_radii(y, lab_y, cy)
    a, b = kr.distance_mask(cx, rx, cy, ry, radius, pairs=True)
    counts_x, counts_y = np.bincount(lab_x), np.bincount(lab_y)
    if (counts_x[a] * counts_y[b]).sum() > _MAX_KEPT * n * m:
        return None
    return kr.block_sparsity(lab_x, lab_y, (a, b))
