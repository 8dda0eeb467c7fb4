"""Block-sparse reductions: cluster the points, keep the cluster pairs that matter.

In low dimension most pairs (i, j) are far apart: a Gaussian kernel with a
small bandwidth, the K nearest neighbours or a Sinkhorn iteration at a small
blur only need the pairs of nearby clusters. The helpers here cluster points
(:func:`grid_cluster`, :func:`kmeans_cluster`), summarise the clusters
(:func:`cluster_centroids`, :func:`cluster_radii`), decide which cluster pairs
to keep (:func:`distance_mask`: exact pruning for truncated kernels;
:func:`knn_mask`: enough candidates for exact K nearest neighbours) and build
the description that every reduction accepts as ``ranges=`` (or
``LazyTensor.with_ranges``)::

    import kerneltools as kt
    from kerneltools import ranges as kr

    lab_x, lab_y = kr.grid_cluster(x, 0.1), kr.grid_cluster(y, 0.1)
    cx, cy = kr.cluster_centroids(x, lab_x), kr.cluster_centroids(y, lab_y)
    rx, ry = kr.cluster_radii(x, lab_x, cx), kr.cluster_radii(y, lab_y, cy)
    keep = kr.distance_mask(cx, rx, cy, ry, 5 * sigma)     # exp(-d^2/2s^2), cut at 5 sigma
    bs = kr.block_sparsity(lab_x, lab_y, keep)
    a = (K_ij * kt.Vj(b)).sum(axis=1, ranges=bs)          # in the caller's order

:func:`block_sparsity` works on points in any order (outputs come back in the
caller's order); it takes the kept cluster pairs as a (Ci, Cj) mask or, for
many clusters, as index pairs (``distance_mask(..., pairs=True)``), with an
optional visiting priority (nearest clusters first helps K-min reductions).
:func:`from_sorted` builds KeOps' 6-tuple of ranges for data already sorted
by cluster (:func:`sort_clusters`). The C backend reduces either form in one
call of a block-sparse kernel (OpenMP over output blocks); the NumPy and CUDA
backends run one dense reduction per block.
"""

from __future__ import annotations

import numpy as np

from . import _docs
from ..backend._ranges import BlockSparsity, SortedSide, tuple_from_pairs

__all__ = [
    "BlockSparsity", "grid_cluster", "kmeans_cluster", "cluster_centroids", "cluster_radii",
    "cluster_counts", "distance_mask", "knn_mask", "block_sparsity", "sort_clusters",
    "cluster_ranges", "from_sorted", "radius_csr",
]


def _points(x, name: str) -> np.ndarray:
    a = np.asarray(x)
    if a.ndim != 2 or a.shape[0] == 0:
        raise ValueError(f"'{name}' must be a non-empty 2-D array (N, D), got shape {a.shape}")
    if a.dtype.kind not in "biuf":
        raise TypeError(f"'{name}' must be numeric, got dtype {a.dtype}")
    if not np.isfinite(a).all():
        raise ValueError(f"'{name}' contains NaN or inf")
    return a


def _labels(labels, n: int, name: str = "labels") -> np.ndarray:
    lab = np.asarray(labels)
    if lab.ndim != 1 or len(lab) != n or lab.dtype.kind not in "iu":
        raise ValueError(f"'{name}' must be {n} integer cluster labels, got shape {lab.shape} "
                         f"and dtype {lab.dtype}")
    if len(lab) and lab.min() < 0:
        raise ValueError(f"'{name}' must be >= 0")
    return lab.astype(np.int64)


def grid_cluster(x, size) -> np.ndarray:
    """Label each point with the cell of a regular grid that contains it.

    Parameters
    ----------
    x : array-like of shape (N, D)
        The points.
    size : float or array-like of shape (D,)
        The side of the cells, one for all features or one per feature.

    Returns
    -------
    ndarray of shape (N,), int64
        Labels 0..C-1, the cells numbered in lexicographic order of their
        coordinates.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools import ranges as kr
    >>> x = np.array([[0.0, 0.0], [0.5, 0.0], [3.0, 0.0], [3.5, 1.0]])
    >>> kr.grid_cluster(x, 2.0)
    array([0, 0, 1, 1])
    """
    x = _points(x, "x")
    cells = np.floor((x - x.min(axis=0)) / _cell_size(size, x.shape[1]))
    if not cells.max() < 2.0**62:  # then the products below overflow int64
        f = int(np.argmax(cells.max(axis=0)))
        raise ValueError(
            f"'size'={size!r} is too small for these points: feature {f} spans "
            f"{float(np.ptp(x[:, f])):.3g}, about {float(cells[:, f].max()):.3g} "
            "cells, and the cell indices would overflow int64; use a larger 'size'"
        )
    cells = cells.astype(np.int64)
    span = cells.max(axis=0) + 1
    if np.prod(span.astype(np.float64)) < 2.0**62:
        # one integer key per cell, in lexicographic order: a 1-D unique
        key = np.zeros(len(x), np.int64)
        for f in range(x.shape[1]):
            key = key * span[f] + cells[:, f]
        _, labels = np.unique(key, return_inverse=True)
    else:
        _, labels = np.unique(cells, axis=0, return_inverse=True)
    return labels.reshape(-1).astype(np.int64)


def _integer(v, name: str) -> int:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"'{name}' must be an integer, got {v!r}")
    return int(v)


def _cell_size(size, d: int) -> np.ndarray:
    try:
        s = np.asarray(size, dtype=np.float64)
        s = np.broadcast_to(s, (d,))
    except (TypeError, ValueError):
        raise ValueError(f"'size' must be a number or {d} numbers (one per feature), "
                         f"got {size!r}") from None
    if not (np.isfinite(s) & (s > 0)).all():
        raise ValueError(f"'size' must be finite and > 0, got {size!r}")
    return s


def kmeans_cluster(x, n_clusters: int, *, n_iter: int = 10, random_state=None, backend=None):
    """Cluster points with Lloyd's k-means, initialised on random points.

    Each assignment step is one ArgMin reduction (linear memory).

    Parameters
    ----------
    x : array-like of shape (N, D)
        The points.
    n_clusters : int
        The number of clusters, in [1, N].
    n_iter : int, default=10
        The number of Lloyd iterations.
    random_state : int, numpy.random.Generator or None, default=None
        Seeds the choice of the initial centroids.
    backend : str or None, default=None
        The backend of the reductions (None: the configured one).

    Returns
    -------
    labels : ndarray of shape (N,), int64
        The cluster of each point, 0..C-1 (empty clusters dropped).
    centroids : ndarray of shape (C, D), float64
        The clusters' means.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools import ranges as kr
    >>> x = np.array([[0.0, 0.0], [0.5, 0.0], [3.0, 0.0], [3.5, 1.0]])
    >>> labels, centroids = kr.kmeans_cluster(x, 2, random_state=0)
    >>> np.bincount(labels), centroids.shape
    (array([2, 2]), (2, 2))
    """
    from ..lazy import Vi, Vj

    x = _points(x, "x")
    n_clusters = _integer(n_clusters, "n_clusters")
    n_iter = _integer(n_iter, "n_iter")
    if not 1 <= n_clusters <= len(x):
        raise ValueError(f"'n_clusters' must be in [1, {len(x)}], got {n_clusters}")
    rng = np.random.default_rng(random_state)
    c = x[rng.choice(len(x), n_clusters, replace=False)].astype(np.float64)
    xf = np.asarray(x, dtype=np.float64)
    labels = np.zeros(len(x), np.int64)
    for _ in range(n_iter):
        labels = Vi(xf).sqdist(Vj(c)).argmin(axis=1, backend=backend)[:, 0]
        counts = np.bincount(labels, minlength=n_clusters)
        sums = np.zeros_like(c)
        np.add.at(sums, labels, xf)
        nonempty = counts > 0
        c[nonempty] = sums[nonempty] / counts[nonempty, None]
    used, labels = np.unique(labels, return_inverse=True)
    return labels.reshape(-1).astype(np.int64), c[used]


def cluster_counts(labels) -> np.ndarray:
    """Count the points of each cluster.

    Parameters
    ----------
    labels : array-like of shape (N,) of int
        The cluster labels, >= 0.

    Returns
    -------
    ndarray of shape (C,), int64
        The number of points with each label 0..C-1.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools import ranges as kr
    >>> kr.cluster_counts([0, 0, 1])
    array([2, 1])
    """
    lab = _labels(labels, len(np.asarray(labels)))
    return np.bincount(lab)


def cluster_centroids(x, labels, weights=None) -> np.ndarray:
    """Compute the (weighted) mean of each cluster.

    Parameters
    ----------
    x : array-like of shape (N, D)
        The points.
    labels : array-like of shape (N,) of int
        The cluster labels, >= 0.
    weights : array-like of shape (N,), default=None
        The points' weights (None: all 1).

    Returns
    -------
    ndarray of shape (C, D), float64
        The centroids (0 for a cluster without weight).

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools import ranges as kr
    >>> x = np.array([[0.0, 0.0], [0.5, 0.0], [3.0, 0.0], [3.5, 1.0]])
    >>> kr.cluster_centroids(x, [0, 0, 1, 1])
    array([[0.25, 0.  ],
           [3.25, 0.5 ]])
    """
    x = _points(x, "x")
    lab = _labels(labels, len(x))
    w = np.ones(len(x)) if weights is None else np.asarray(weights, dtype=np.float64)
    n = lab.max() + 1
    sums = np.stack([np.bincount(lab, weights=x[:, f] * w, minlength=n)
                     for f in range(x.shape[1])], axis=1)
    tot = np.bincount(lab, weights=w, minlength=n)
    return sums / np.where(tot > 0, tot, 1)[:, None]


def cluster_radii(x, labels, centroids) -> np.ndarray:
    """Compute the largest distance from each cluster's centroid to its points.

    Parameters
    ----------
    x : array-like of shape (N, D)
        The points.
    labels : array-like of shape (N,) of int
        The cluster labels, >= 0.
    centroids : array-like of shape (C, D)
        The clusters' centroids (say from :func:`cluster_centroids`).

    Returns
    -------
    ndarray of shape (C,)
        The radii, rounded up (upper bounds).

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools import ranges as kr
    >>> x = np.array([[0.0, 0.0], [0.5, 0.0], [3.0, 0.0], [3.5, 1.0]])
    >>> np.round(kr.cluster_radii(x, [0, 0, 1, 1], [[0.25, 0.0], [3.25, 0.5]]), 3)
    array([0.25 , 0.559])
    """
    x = _points(x, "x")
    lab = _labels(labels, len(x))
    d = np.sqrt(((x - np.asarray(centroids)[lab]) ** 2).sum(axis=1))
    r = np.zeros(len(centroids))
    order = np.argsort(lab, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(lab[order]) != 0])
    r[lab[order][starts]] = np.maximum.reduceat(d[order], starts)
    return r * (1 + 1e-12) + 1e-300  # rounding: radii are upper bounds


def _centroid_distances(c_i, c_j) -> np.ndarray:
    c_i, c_j = np.asarray(c_i, np.float64), np.asarray(c_j, np.float64)
    d2 = (c_i ** 2).sum(1)[:, None] + (c_j ** 2).sum(1)[None, :] - 2 * c_i @ c_j.T
    return np.sqrt(np.maximum(d2, 0))


#: Cluster pairs per block of :func:`distance_mask` (32 MB of float64).
_MASK_BLOCK_ENTRIES = 2**22


def distance_mask(c_i, r_i, c_j, r_j, threshold, *, pairs: bool = False):
    threshold = float(threshold)
    if not threshold >= 0:
        raise ValueError(f"'threshold' must be >= 0, got {threshold}")
    c_i, c_j = np.asarray(c_i, np.float64), np.asarray(c_j, np.float64)
    r_i, r_j = np.asarray(r_i, np.float64), np.asarray(r_j, np.float64)
    if pairs and len(c_i) * len(c_j) > _MASK_BLOCK_ENTRIES and len(c_i) and len(c_j):
        return _distance_pairs_by_tree(c_i, r_i, c_j, r_j, threshold)
    rows = max(1, _MASK_BLOCK_ENTRIES // max(1, len(c_j)))
    parts = []
    for s in range(0, len(c_i), rows):
        d = _centroid_distances(c_i[s:s + rows], c_j)
        ri = r_i[s:s + rows, None]
        # slack for the rounding of the centroid distances
        slack = 1e-9 * (d + ri + r_j[None, :])
        keep = d - ri - r_j[None, :] <= threshold + slack
        if pairs:
            a, b = np.nonzero(keep)
            parts.append((a + s, b))
        else:
            parts.append(keep)
    if not pairs:
        return np.concatenate(parts) if parts else np.zeros((0, len(c_j)), bool)
    if not parts:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return (np.concatenate([a for a, _ in parts]).astype(np.int64),
            np.concatenate([b for _, b in parts]).astype(np.int64))


def _distance_pairs_by_tree(c_i, r_i, c_j, r_j, threshold: float):
    """:func:`distance_mask`'s pairs for many clusters: candidates from k-d
    trees of the centroids (scipy's; centroid distance at most threshold +
    the largest radii), then the rule pair by pair. Clusters of very unequal
    radii are searched in two classes each, so that the reach stays tight."""
    from scipy.spatial import cKDTree

    def classes(r):
        big = r > 2 * np.median(r)
        return [ids for ids in (np.flatnonzero(~big), np.flatnonzero(big)) if len(ids)]

    a_parts, b_parts = [], []
    for ia in classes(r_i):
        ta = cKDTree(c_i[ia])
        for jb in classes(r_j):
            reach = (threshold + r_i[ia].max() + r_j[jb].max()) * (1 + 1e-9) + 1e-300
            m = ta.sparse_distance_matrix(cKDTree(c_j[jb]), reach, output_type="ndarray")
            a_parts.append(ia[m["i"]])
            b_parts.append(jb[m["j"]])
    a, b = np.concatenate(a_parts), np.concatenate(b_parts)
    d = np.sqrt(((c_i[a] - c_j[b]) ** 2).sum(1))
    slack = 1e-9 * (d + r_i[a] + r_j[b])
    keep = d - r_i[a] - r_j[b] <= threshold + slack
    a, b = a[keep], b[keep]
    order = np.lexsort((b, a))
    return a[order].astype(np.int64), b[order].astype(np.int64)


def knn_mask(c_i, r_i, c_j, r_j, counts_j, K: int, kth_i=None) -> np.ndarray:
    K = _integer(K, "K")
    counts_j = np.asarray(counts_j)
    if K < 1 or K > counts_j.sum():
        raise ValueError(f"'K' must be between 1 and the number of points, got {K}")
    c_i, r_i = np.asarray(c_i), np.asarray(r_i)
    if len(c_i) > 256:  # by rows: the (Ci, Cj) temporaries stay small
        kth = None if kth_i is None else np.asarray(kth_i)
        return np.concatenate([
            knn_mask(c_i[s:s + 256], r_i[s:s + 256], c_j, r_j, counts_j, K,
                     None if kth is None else kth[s:s + 256])
            for s in range(0, len(c_i), 256)
        ])
    d = _centroid_distances(c_i, c_j)
    r_i, r_j = np.asarray(r_i)[:, None], np.asarray(r_j)[None, :]
    upper = d + r_i + r_j
    lower = d - r_i - r_j
    order = np.argsort(upper, axis=1, kind="stable")
    cum = np.cumsum(counts_j[order], axis=1)
    first = np.argmax(cum >= K, axis=1)
    u = np.take_along_axis(upper, order, axis=1)[np.arange(len(d)), first]
    if kth_i is not None:
        u = np.minimum(u, np.asarray(kth_i, np.float64) * (1 + 1e-9) + r_i[:, 0])
    slack = 1e-9 * (upper.max(axis=1) + 1)
    return lower <= (u + slack)[:, None]


def block_sparsity(labels_i, labels_j, keep, priority=None) -> BlockSparsity:
    lab_i = np.asarray(labels_i)
    lab_j = np.asarray(labels_j)
    lab_i, lab_j = _labels(lab_i, len(lab_i), "labels_i"), _labels(lab_j, len(lab_j), "labels_j")
    ci, cj = lab_i.max() + 1, lab_j.max() + 1
    if isinstance(keep, tuple) and len(keep) == 2:
        a, b = (np.asarray(k) for k in keep)
        if (a.shape != b.shape or a.ndim != 1 or a.dtype.kind not in "iu"
                or b.dtype.kind not in "iu"):
            raise ValueError("'keep' as pairs must be two 1-D integer arrays of one length")
        if len(a) and (a.min() < 0 or b.min() < 0):
            raise ValueError("'keep' pairs must be >= 0")
        for side, k, c in (("i", a, ci), ("j", b, cj)):
            if len(k) and k.max() >= c:
                raise ValueError(
                    f"'keep' pairs name cluster {int(k.max())} but labels_{side} has "
                    f"{c} clusters (0 to {c - 1}): the pairs must come from the same "
                    "clusterings as the labels"
                )
    else:
        keep = np.asarray(keep, dtype=bool)
        if keep.shape != (ci, cj):
            raise ValueError(
                f"'keep' must be a ({ci}, {cj}) boolean mask of cluster pairs "
                f"(labels_i has {ci} clusters, labels_j {cj}), got shape {keep.shape}"
            )
        a, b = np.nonzero(keep)
    n_a, n_b = ci, cj
    order_i = np.argsort(lab_i, kind="stable")
    order_j = np.argsort(lab_j, kind="stable")
    ranges_i = _bounds(lab_i[order_i], n_a)
    ranges_j = _bounds(lab_j[order_j], n_b)
    if priority is not None:
        priority = np.asarray(priority, dtype=np.float64)
        if not isinstance(keep, tuple) or priority.shape != np.shape(a):
            raise ValueError("'priority' needs 'keep' as pairs (a, b), one value per pair")
    return BlockSparsity.from_pairs((len(lab_i), len(lab_j)), order_i, order_j, a, b,
                                    ranges_i, ranges_j, priority)


def _bounds(sorted_labels: np.ndarray, n_clusters: int) -> np.ndarray:
    bounds = np.searchsorted(sorted_labels, np.arange(n_clusters + 1))
    return np.stack([bounds[:-1], bounds[1:]], axis=1)


def sort_clusters(x, labels):
    x = np.asarray(x)
    lab = _labels(labels, len(x))
    order = np.argsort(lab, kind="stable")
    return x[order], lab[order], order


def cluster_ranges(sorted_labels) -> np.ndarray:
    lab = _labels(sorted_labels, len(np.asarray(sorted_labels)), "sorted_labels")
    if len(lab) > 1 and (np.diff(lab) < 0).any():
        raise ValueError("'sorted_labels' must be sorted (see sort_clusters)")
    bounds = np.searchsorted(lab, np.arange(lab.max() + 2))
    return np.stack([bounds[:-1], bounds[1:]], axis=1)


def from_sorted(ranges_i, ranges_j, keep):
    ranges_i, ranges_j = np.asarray(ranges_i, np.int64), np.asarray(ranges_j, np.int64)
    keep = np.asarray(keep, dtype=bool)
    if keep.shape != (len(ranges_i), len(ranges_j)):
        raise ValueError(f"'keep' must have shape ({len(ranges_i)}, {len(ranges_j)}), "
                         f"got {keep.shape}")
    return tuple_from_pairs(*np.nonzero(keep), ranges_i, ranges_j)


def radius_csr(x, y, sq_radius, ranges: BlockSparsity, *, exclude=None,
               sort: str = "index", backend=None):
    """The points ``y[j]`` within squared distance ``sq_radius`` of each
    ``x[i]``, over the pairs that ``ranges`` keeps, as CSR rows.

    Each squared distance is computed in float64, feature by feature
    (``(x_0 - y_0)^2 + (x_1 - y_1)^2 + ...``, no fused multiply-add: the
    sum scikit-learn's k-d and ball trees compute) and kept where it is at
    most the query's ``sq_radius``: exact, with no cut-off by rounding of
    the cells' pruning. Memory is linear in the points and the result.

    Parameters
    ----------
    x : array-like of shape (N, D)
        The queries (converted to float64).
    y : array-like of shape (M, D)
        The points.
    sq_radius : float or array-like of shape (N,)
        The squared radius, one for all queries or one per query (>= 0; inf
        keeps every visited pair).
    ranges : BlockSparsity
        The pairs of clusters to visit, of shape (N, M) (say from
        :func:`block_sparsity` with a :func:`distance_mask` at the radius):
        a point outside them is never reported.
    exclude : array-like of shape (N,) of int, default=None
        Row i leaves point ``y[exclude[i]]`` out (-1: none); say
        ``np.arange(N)`` for the points' own neighbours, without themselves
        (x and y the same points).
    sort : {'index', 'distance'}, default='index'
        Each row by increasing index, or by increasing distance (equal
        distances by index).
    backend : {'auto', 'cpu', 'numpy'} or None, default=None
        'cpu': one kernel of the C backend (OpenMP over blocks); 'numpy':
        NumPy, block by block (the reference); 'auto' (None: the configured
        backend, if not 'cuda'): the C backend when a compiler works. The
        results are the same.

    Returns
    -------
    sqdist : ndarray of shape (nnz,), float64
        The squared distances; row i is ``sqdist[indptr[i]:indptr[i + 1]]``.
    indices : ndarray of shape (nnz,), int64
        The indices in ``y`` (same slices).
    indptr : ndarray of shape (N + 1,), int64
        Row offsets.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools import ranges as kr
    >>> x = np.array([[0.0, 0.0], [3.0, 0.0]])
    >>> y = np.array([[0.5, 0.0], [3.0, 1.0], [9.0, 9.0]])
    >>> lab_x, lab_y = kr.grid_cluster(x, 2.0), kr.grid_cluster(y, 2.0)
    >>> cx, cy = kr.cluster_centroids(x, lab_x), kr.cluster_centroids(y, lab_y)
    >>> rx, ry = kr.cluster_radii(x, lab_x, cx), kr.cluster_radii(y, lab_y, cy)
    >>> bs = kr.block_sparsity(lab_x, lab_y, kr.distance_mask(cx, rx, cy, ry, 1.0))
    >>> d, i, indptr = kr.radius_csr(x, y, 1.0, bs)
    >>> d, i, indptr
    (array([0.25, 1.  ]), array([0, 1]), array([0, 1, 2]))
    """
    from ..backend.cpu import _radius
    from ..backend._dispatch import check_backend_name
    from ..backend._errors import KernelStoreError

    x, y = _points(x, "x"), _points(y, "y")
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"'x' and 'y' must have the same number of features, got "
                         f"{x.shape[1]} and {y.shape[1]}")
    r2 = np.asarray(sq_radius, dtype=np.float64)
    if r2.ndim == 0:
        r2 = np.full(len(x), float(r2))
    if r2.shape != (len(x),) or not (r2 >= 0).all():
        raise ValueError(f"'sq_radius' must be a number >= 0 or {len(x)} such numbers "
                         f"(one per query), got {sq_radius!r}")
    if not isinstance(ranges, BlockSparsity) or tuple(ranges.shape) != (len(x), len(y)):
        raise ValueError(f"'ranges' must be a BlockSparsity of shape ({len(x)}, "
                         f"{len(y)}) (see block_sparsity), got {ranges!r}")
    if exclude is not None:
        exclude = np.asarray(exclude)
        if exclude.shape != (len(x),) or exclude.dtype.kind not in "iu":
            raise ValueError(f"'exclude' must be {len(x)} integers (one per query), "
                             f"got shape {exclude.shape} and dtype {exclude.dtype}")
        exclude = exclude.astype(np.int64)
    if sort not in ("index", "distance"):
        raise ValueError(f"'sort' must be 'index' or 'distance', got {sort!r}")
    name = check_backend_name(backend)
    if name not in ("auto", "cpu", "numpy"):
        if backend is not None:
            raise ValueError(f"'backend' of radius_csr must be 'auto', 'cpu' or "
                             f"'numpy' (it runs on the host), got {backend!r}")
        name = "auto"
    if name == "cpu" and not _radius.native_available():
        from ..config import check_backend

        check_backend("cpu", "radius_csr")  # raises, saying why
    side = ranges.side(1)
    kw = dict(exclude=exclude, by_distance=sort == "distance")
    if name != "numpy" and isinstance(side, SortedSide) and _radius.native_available():
        try:
            return _radius.radius_native(x, y, r2, side, **kw)
        except KernelStoreError:  # nowhere to store its kernel (full disks): NumPy
            if name == "cpu":
                raise
    blocks = side.blocks() if isinstance(side, SortedSide) else side
    return _radius.radius_blocks(x, y, r2, blocks, **kw)


for _f in (distance_mask, knn_mask, block_sparsity, sort_clusters, cluster_ranges,
           from_sorted):  # numpydoc text kept in _docs.py (line limit)
    _f.__doc__ = getattr(_docs, _f.__name__.upper())
