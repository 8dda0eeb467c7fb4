"""pykeops' clustering helpers (``pykeops.numpy.cluster``, ``pykeops.torch.cluster``).

The same signatures and results as pykeops', computed by
:mod:`kerneltools.ranges` on NumPy arrays; ``wrap`` turns the results back
into the caller's array type (torch tensors for the torch module).

``grid_cluster`` differs between pykeops' two modules, and each binding
follows its own: pykeops.numpy's grid is anchored at the origin (cells
``floor(x / size)``), pykeops.torch's at the data's minimum (``floor((x -
min x) / size)``), so the same points can fall in different cells. Labels
number the non-empty cells from 0 in lexicographic order of their
coordinates, which is pykeops' order (its packed key ``sum_d cell_d
1024^(D-1-d)``) wherever pykeops' key is exact: each feature spanning fewer
than 1024 cells, D <= 3. Beyond, pykeops merges distinct cells or raises
``NotImplementedError``; here every D works and distinct cells stay distinct.
"""

from __future__ import annotations

import numpy as np

from .. import ranges as _ranges

__all__ = ["functions"]


def functions(to_numpy, wrap, origin: bool = False) -> dict:
    """{name: function} of pykeops' cluster module for one array type;
    ``origin``: ``grid_cluster``'s grid anchored at the origin (pykeops.numpy)
    rather than at the data's minimum (pykeops.torch)."""

    def grid_cluster(x, size):
        """Labels of the cells of side ``size`` (a number or one per feature) of
        a regular grid that hold the points ``x`` (M, D); the grid anchored
        at the origin (NumPy binding) or at the points' minimum (torch)."""
        size = _size(size, to_numpy)
        if origin:
            return wrap(_origin_grid_cluster(to_numpy(x), size), x, int)
        return wrap(_ranges.grid_cluster(to_numpy(x), size), x, int)

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


def _origin_grid_cluster(x, size) -> np.ndarray:
    """pykeops.numpy's cells ``floor(x / size)``, labelled 0..C-1 in
    lexicographic order of their coordinates (as :func:`kerneltools.ranges.
    grid_cluster` labels its cells)."""
    x = np.asarray(x)
    if x.ndim != 2 or x.dtype.kind not in "biuf" or not np.isfinite(x).all():
        raise ValueError(f"grid_cluster: 'x' must be a 2-D array (M, D) of finite "
                         f"real numbers; got shape {x.shape}, dtype {x.dtype}")
    try:
        s = np.broadcast_to(np.asarray(size, dtype=np.float64), (x.shape[1],))
    except (TypeError, ValueError):
        raise ValueError(f"grid_cluster: 'size' must be a number or {x.shape[1]} "
                         f"numbers (one per feature); got {size!r}") from None
    if not (np.isfinite(s) & (s > 0)).all():
        raise ValueError(f"grid_cluster: 'size' must be finite and > 0; got {size!r}")
    # pykeops.numpy's expression, in NumPy's dtype promotion of x / size
    with np.errstate(over="ignore"):
        cells = np.floor(x / (size if isinstance(size, (int, float)) else s))
    if not np.abs(cells).max(initial=0.0) < 2.0**62:
        raise ValueError(f"grid_cluster: 'size'={size!r} is too small for these points: "
                         "the cell indices would overflow int64; use a larger 'size'")
    _, labels = np.unique(cells.astype(np.int64), axis=0, return_inverse=True)
    return labels.reshape(-1).astype(np.int64)
