"""pykeops' clustering helpers (``pykeops.numpy.cluster``, ``pykeops.torch.cluster``).

The same signatures and results as pykeops', computed by
:mod:`kerneltools.ranges` on NumPy arrays; ``wrap`` turns the results back
into the caller's array type (torch tensors for the torch module).
"""

from __future__ import annotations

import numpy as np

from .. import ranges as _ranges

__all__ = ["functions"]


def functions(to_numpy, wrap) -> dict:
    """{name: function} of pykeops' cluster module for one array type."""

    def grid_cluster(x, size):
        """Labels of the cells of side ``size`` (a number or one per feature) of
        a regular grid that hold the points ``x`` (M, D)."""
        return wrap(_ranges.grid_cluster(to_numpy(x), _size(size, to_numpy)), x, int)

    def sort_clusters(x, lab):
        """``(x, lab)`` sorted by label (``x`` may be a tuple or list of arrays)."""
        labels = to_numpy(lab)
        order = np.argsort(labels, kind="stable")
        if isinstance(x, (tuple, list)):
            xs = type(x)(wrap(to_numpy(a)[order], a) for a in x)
        else:
            xs = wrap(to_numpy(x)[order], x)
        return xs, wrap(labels[order], lab, int)

    def cluster_ranges(lab, Nlab=None):
        """(C, 2) ``[start, end)`` of each label's run in the sorted labels."""
        labels = to_numpy(lab)
        counts = np.bincount(labels, minlength=0 if Nlab is None else len(to_numpy(Nlab)))
        ends = np.cumsum(counts)
        return wrap(np.stack([ends - counts, ends], 1), lab, int)

    def cluster_centroids(x, lab, Nlab=None, weights=None, weights_c=None):
        """(C, D) barycenters of the clusters (weighted by ``weights``)."""
        w = None if weights is None else to_numpy(weights).reshape(-1)
        c = _ranges.cluster_centroids(to_numpy(x), to_numpy(lab), w)
        return wrap(c.astype(to_numpy(x).dtype), x)

    def cluster_ranges_centroids(x, lab, weights=None, min_weight=1e-9):
        """(ranges, centroids, total weight per cluster), as pykeops."""
        labels = to_numpy(lab)
        w = np.ones(len(labels)) if weights is None else to_numpy(weights).reshape(-1)
        w_c = np.bincount(labels, weights=w)
        xa = to_numpy(x)
        return (cluster_ranges(lab), cluster_centroids(x, lab, weights=weights),
                wrap(w_c.astype(xa.dtype), x))

    def from_matrix(ranges_i, ranges_j, keep):
        """pykeops' 6-tuple of block-sparsity ranges from cluster ranges and the
        (Ci, Cj) boolean mask of the cluster pairs to keep."""
        out = _ranges.from_sorted(to_numpy(ranges_i), to_numpy(ranges_j), to_numpy(keep))
        return tuple(wrap(np.asarray(r), ranges_i, int) for r in out)

    def swap_axes(ranges):
        """The 6-tuple of the transposed problem."""
        r = tuple(ranges)
        return r[3:6] + r[0:3]

    return {f.__name__: f for f in (grid_cluster, sort_clusters, cluster_ranges,
                                    cluster_centroids, cluster_ranges_centroids,
                                    from_matrix, swap_axes)}


def _size(size, to_numpy):
    return size if isinstance(size, (int, float)) else to_numpy(size)
