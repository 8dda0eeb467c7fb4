"""DBSCAN's pairs of cells: which blocks of pairs its reductions visit.

The points are cut into k-means cells (centres fitted on a sample, every
point then assigned to its nearest centre: one ``ArgMin`` reduction); a
cell's radius is the largest distance from its centre to its points. Two
cells hold a pair within ``eps`` only if the distance of their centres
minus their radii is at most ``eps``: :class:`Cells` keeps those cell pairs,
once, and every pass of DBSCAN (the counts, the rounds of the components,
the border points) reduces over them only
(:func:`kerneltools.ranges.block_sparsity`), restricted to the rows and
columns it needs. The test is widened by a bound ``m`` of the rounding of
the distances (the float32 bracket's bound of :mod:`._near`, or float64's),
so no pair that the exact test keeps is ever left out: the results are
those of the reductions over all pairs.

Euclidean only, reductions on the CPU (other metrics and GPUs reduce over
all pairs); in 9 features on
clustered data the cells separate the clusters (measured, 3e4 points in 10
blobs: the kept cell pairs hold 10% of the pairs).
"""

from __future__ import annotations

import numpy as np

from ... import ranges as kr
from .._shared._kmeans_cells import kmeans_labels, on_cpu

__all__ = ["Cells", "MIN_POINTS", "on_cpu"]

#: Fewest points for which the cells are made (below, every pass over all
#: pairs takes milliseconds).
MIN_POINTS = 4096
#: Points per cell, on average.
CELL_POINTS = 256
#: Most cells.
MAX_CELLS = 1024
#: The centres are fitted on a sample of this many points per cell
#: (measured at 3e4 x 9, 117 cells: a sample of 20,000 points took 0.19 CPU
#: s, of 8,000 0.07 s, keeping the same pairs).
SAMPLE_PER_CELL = 32


class Cells:
    """The cells of the points and the cell pairs within ``eps`` (+ margin)."""

    def __init__(self, X: np.ndarray, eps: float, dtype, backend=None):
        X = np.asarray(X, dtype=np.float64)
        n, d = X.shape
        self.labels = kmeans_labels(X, cell_points=CELL_POINTS, max_cells=MAX_CELLS,
                                    sample_per_cell=SAMPLE_PER_CELL, backend=backend)
        c = kr.cluster_centroids(X, self.labels)
        r = kr.cluster_radii(X, self.labels, c)
        u = 2.0**-24 if np.dtype(dtype) == np.float32 else 2.0**-50
        R = float(np.sqrt((X * X).sum(1)).max())
        margin = 8 * u * (R + (d + 3) * eps) + 1e-9 * (R + eps)
        self.a, self.b = kr.distance_mask(c, r, c, r, eps + 2 * margin, pairs=True)
        self.n_cells = len(c)
        self.kept = float((np.bincount(self.labels, minlength=self.n_cells)[self.a]
                           * np.bincount(self.labels, minlength=self.n_cells)[self.b]
                           ).sum()) / n**2

    def ranges(self, rows, cols, skip=None):
        """The block sparsity of the kept pairs of ``rows`` x ``cols`` (index
        arrays or slices of the points), less the cell pairs where ``skip``
        (a bool per kept pair) holds; None: every pair of points."""
        li, lj = self.labels[rows], self.labels[cols]
        a, b = self.a, self.b
        if skip is not None:
            a, b = a[~skip], b[~skip]
        ci, cj = li.max() + 1, lj.max() + 1
        ok = (a < ci) & (b < cj)
        return kr.block_sparsity(li, lj, (a[ok], b[ok]))
