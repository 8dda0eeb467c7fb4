"""The docstrings of some of ``kerneltools.ranges``' functions.

Kept here so that ``ranges/__init__.py`` stays within the layout's line
limit; ``__init__`` assigns each to its function's ``__doc__`` (the API
reference, ``help()`` and the doctests read them from there).
"""

_SETUP = """    >>> import numpy as np
    >>> from kerneltools import ranges as kr
    >>> x = np.array([[0.0, 0.0], [0.5, 0.0], [3.0, 0.0], [3.5, 1.0]])
    >>> labels = kr.grid_cluster(x, 2.0)
    >>> c = kr.cluster_centroids(x, labels)
    >>> r = kr.cluster_radii(x, labels, c)
"""

DISTANCE_MASK = """Find the cluster pairs that hold a pair of points within a distance.

    From the centroid distances minus the radii: exact pruning for kernels
    that vanish (or are truncated) beyond ``threshold``.

    Parameters
    ----------
    c_i : array-like of shape (Ci, D)
        The centroids of the clusters indexed by i.
    r_i : array-like of shape (Ci,)
        Their radii (say from :func:`cluster_radii`).
    c_j : array-like of shape (Cj, D)
        The centroids of the clusters indexed by j.
    r_j : array-like of shape (Cj,)
        Their radii.
    threshold : float
        The Euclidean distance, >= 0.
    pairs : bool, default=False
        Return the kept pairs as two index arrays instead of a mask
        (computed by blocks of rows: for many clusters, where the (Ci, Cj)
        mask would not fit in memory); :func:`block_sparsity` takes either.

    Returns
    -------
    ndarray of shape (Ci, Cj), bool, or tuple of two ndarray of int64
        The mask of the kept pairs, or ``(a, b)``: the kept pairs, sorted.

    See Also
    --------
    knn_mask : The cluster pairs that may hold K nearest neighbours.
    block_sparsity : The description a reduction takes, from the mask.

    Examples
    --------
""" + _SETUP + """\
    >>> kr.distance_mask(c, r, c, r, 1.0)
    array([[ True, False],
           [False,  True]])
    >>> kr.distance_mask(c, r, c, r, 1.0, pairs=True)
    (array([0, 1]), array([0, 1]))
    """

KNN_MASK = """Find the clusters that may hold one of the K nearest neighbours.

    For a query cluster a, the clusters b sorted by the largest possible
    distance ``|c_a - c_b| + r_a + r_b`` hold at least K points within some
    ``u``: every query in a has its K-th neighbour (Euclidean) within ``u``.
    A cluster whose smallest possible distance ``|c_a - c_b| - r_a - r_b``
    exceeds ``u`` cannot hold one of them; all others are kept (exact).

    Parameters
    ----------
    c_i : array-like of shape (Ci, D)
        The centroids of the query clusters.
    r_i : array-like of shape (Ci,)
        Their radii.
    c_j : array-like of shape (Cj, D)
        The centroids of the clusters of the points searched.
    r_j : array-like of shape (Cj,)
        Their radii.
    counts_j : array-like of shape (Cj,) of int
        The number of points of each (say from :func:`cluster_counts`).
    K : int
        The number of neighbours, in [1, sum(counts_j)].
    kth_i : array-like of shape (Ci,), default=None
        For each query cluster, an upper bound of the K-th neighbour distance
        of its centroid (the exact one, say, from a K-min reduction over the
        centroids): the K-th neighbour distance being 1-Lipschitz,
        ``kth_i + r_a`` then bounds it for every query of the cluster, often
        far more tightly.

    Returns
    -------
    ndarray of shape (Ci, Cj), bool
        The mask of the kept pairs.

    See Also
    --------
    distance_mask : The cluster pairs within a distance.

    Examples
    --------
""" + _SETUP + """\
    >>> kr.knn_mask(c, r, c, r, kr.cluster_counts(labels), 2)
    array([[ True, False],
           [False,  True]])
    """

BLOCK_SPARSITY = """Describe the pairs of points whose clusters a mask keeps.

    For points in any order: pass the result as ``ranges=`` to a reduction.
    The points are sorted by cluster (stable, so that equal labels keep the
    caller's order) and the kept pairs become KeOps' 6-tuple on the sorted
    positions (adjacent clusters merged into one interval), which the C
    backend reduces natively.

    Parameters
    ----------
    labels_i : array-like of shape (N,) of int
        The clusters of the points indexed by i.
    labels_j : array-like of shape (M,) of int
        The clusters of the points indexed by j.
    keep : array-like of shape (Ci, Cj) of bool, or tuple of two arrays
        The kept cluster pairs: a mask ``keep[a, b]``, or two index arrays
        ``(a, b)`` (sparse: for many clusters).
    priority : array-like of shape (n_pairs,), default=None
        With pairs: each cluster visits the other side's clusters in
        increasing priority, say their distance, so that a K-min reduction
        meets the nearest points first and skips most of the others; results
        do not depend on it.

    Returns
    -------
    BlockSparsity
        The description, of shape (N, M).

    See Also
    --------
    distance_mask, knn_mask : Masks of cluster pairs.

    Examples
    --------
""" + _SETUP + """\
    >>> from kerneltools.lazy import Vi, Vj
    >>> bs = kr.block_sparsity(labels, labels, kr.distance_mask(c, r, c, r, 1.0))
    >>> bs
    BlockSparsity(shape=(4, 4), blocks=2, density=0.5)
    >>> K = (-((Vi(x) - Vj(x)) ** 2).sum()).exp()
    >>> K.sum(axis=1, ranges=bs).shape
    (4, 1)
    """

SORT_CLUSTERS = """Sort points by cluster (stable).

    Parameters
    ----------
    x : array-like of shape (N, D)
        The points.
    labels : array-like of shape (N,) of int
        Their clusters, >= 0.

    Returns
    -------
    x_sorted : ndarray of shape (N, D)
        ``x[order]``.
    labels_sorted : ndarray of shape (N,), int64
        ``labels[order]``, increasing.
    order : ndarray of shape (N,), int64
        The permutation.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools import ranges as kr
    >>> x = np.array([[3.0], [0.0], [2.0]])
    >>> x_sorted, labels_sorted, order = kr.sort_clusters(x, [1, 0, 1])
    >>> labels_sorted, order
    (array([0, 1, 1]), array([1, 0, 2]))
    """

CLUSTER_RANGES = """Find the ``[start, end)`` of each cluster in sorted labels.

    Parameters
    ----------
    sorted_labels : array-like of shape (N,) of int
        Cluster labels in increasing order (say from :func:`sort_clusters`).

    Returns
    -------
    ndarray of shape (C, 2), int64
        Row c: the start and end of cluster c.

    Examples
    --------
    >>> from kerneltools import ranges as kr
    >>> kr.cluster_ranges([0, 0, 1, 1, 1])
    array([[0, 2],
           [2, 5]])
    """

FROM_SORTED = """Build KeOps' 6-tuple of ranges for data sorted by cluster.

    The tuple is ``(ranges_i, slices_i, redranges_j, ranges_j, slices_j,
    redranges_i)``; adjacent kept clusters are merged into one interval.

    Parameters
    ----------
    ranges_i : array-like of shape (Ci, 2) of int
        The ``[start, end)`` of the clusters indexed by i (say from
        :func:`cluster_ranges`).
    ranges_j : array-like of shape (Cj, 2) of int
        The same for the clusters indexed by j.
    keep : array-like of shape (Ci, Cj) of bool
        The kept cluster pairs.

    Returns
    -------
    tuple of six ndarray of int64
        KeOps' ranges, for ``ranges=`` of a reduction on the sorted data.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools import ranges as kr
    >>> rg = kr.cluster_ranges([0, 0, 1, 1])
    >>> ranges = kr.from_sorted(rg, rg, np.eye(2, dtype=bool))
    >>> len(ranges), ranges[1]
    (6, array([1, 2]))
    """
