"""Brute-force searches behind the k-NN estimators, in linear memory.

:class:`FormulaSearch` keeps the K smallest ``rdist`` (see
:mod:`._neighbors_metrics`) of each query with a ``Kmin_argKmin``
reduction; queries go through the reduction in blocks, so memory stays
linear in the number of points whatever their number.

Euclidean searches in 20 or more features take a faster exact route,
:class:`ExpandedSearch`: candidates from the expanded form
``|y|^2 - 2 <x, y>`` (which the backends reduce with a matrix-product
micro-kernel), re-ranked by their exact distances, each row certified by a
rounding-error bound or else searched again in the direct form.

:func:`radius_search` runs on any of them (and on the pruned search of
:mod:`._neighbors_pruned`); the helpers at the end check the query methods'
arguments and shape their results as scikit-learn's.
"""

from __future__ import annotations

import numbers

import numpy as np

from ..lazy import LazyTensor, Vi, Vj

from ._neighbors_metrics import Metric

#: Rows x K of one query block: the block's outputs stay near 32 MB.
QUERY_BLOCK_ENTRIES = 2**21
#: Rows x candidates x features of one re-ranking block: 1 MB of float64
#: differences, which stay in cache (2x faster than 32 MB blocks).
RERANK_BLOCK_ENTRIES = 2**17


class FormulaSearch:
    """K-smallest and radius searches of a :class:`Metric` over fitted points."""

    def __init__(self, metric: Metric, Y: np.ndarray, backend):
        self.metric, self.backend = metric, backend
        self.Y = metric.prepare(Y)
        self._y_j = Vj(self.Y)

    def rdist(self, X: np.ndarray) -> LazyTensor:
        return self.metric.rdist(Vi(X), self._y_j)

    def kmin(self, X: np.ndarray, k: int):
        """(rdist, indices), both (n, k), increasing; ties by index."""
        return self._kmin(self.rdist, self.metric.prepare(X), k)

    def _kmin(self, formula, X: np.ndarray, k: int):
        """The K-min reduction of ``formula(X block)``, by blocks of queries."""
        vals = np.empty((X.shape[0], k), dtype=X.dtype)
        idx = np.empty((X.shape[0], k), dtype=np.int64)
        rows = max(1, QUERY_BLOCK_ENTRIES // k)
        for s in range(0, X.shape[0], rows):
            v, i = formula(X[s : s + rows]).Kmin_argKmin(
                k, axis=1, backend=self.backend
            )
            vals[s : s + rows], idx[s : s + rows] = v.reshape(-1, k), i.reshape(-1, k)
        return vals, idx

    def kmin_within(self, X: np.ndarray, k: int, threshold):
        """:meth:`kmin`; a pruned search may visit only the points within
        ``threshold`` (:func:`radius_search` needs no others)."""
        return self.kmin(X, k)

    def count(self, X: np.ndarray, threshold) -> np.ndarray:
        """Number of fitted points with rdist <= threshold (a float, or one per
        query; an estimate: see :func:`radius_search`)."""
        if np.ndim(threshold):
            threshold = Vi(np.asarray(threshold, dtype=X.dtype)[:, None])
        else:
            threshold = float(threshold)
        F = self.rdist(self.metric.prepare(X)) <= threshold
        return np.rint(F.sum(axis=1, backend=self.backend)).astype(np.int64).ravel()


#: Fewest features for :class:`ExpandedSearch`. The C backend computes dot
#: products of 16 or more features with a matrix-product micro-kernel (pair by
#: pair below). Measured, NearestNeighbors(10).fit(Y).kneighbors(X), 1e4 x 1e4
#: Gaussian float32, median of 4 (load 5.5-6.6), expanded vs direct: 0.84x at
#: D = 8, 0.75x at 12, 0.99x at 16, 1.10x at 20, 1.21x at 24, 1.43x at 32 and
#: 2.99x at 64: below 20 the certificate and re-ranking eat the gain.
EXPANDED_MIN_DIM = 20
#: Most candidates per row. Measured at D = 64, 4e3 x 1e4 float32: the
#: expanded search is 1.3x faster than the direct one at K = 64, even at
#: K = 248 (K' = 256), and slower at K = 256, where the C backend keeps K-min
#: states of one row per block instead of IB: the K-min updates, not the
#: distances, take the time there (radius searches ask for such K).
EXPANDED_MAX_CANDIDATES = 256


def n_candidates(k: int, n_fit: int) -> int:
    """K' for K: 8 extra candidates, so that the certificate rarely fails.

    Measured (K = 5 and 10, float32, each point's neighbours among 1797 to
    5000): with 8 extra, at most 0.1% of the rows fall back, on digits + 100
    and on integer data in {0..3}^64 (many ties); with 4 extra, up to 6%;
    on digits, Gaussian or clustered data, none. 2K candidates cost 5-10%
    more time in the reduction than K + 8 for K = 10, and failed no fewer rows.
    """
    return min(n_fit, k + 8)


def _sqnorms(a: np.ndarray) -> np.ndarray:
    return np.einsum("ij,ij->i", a, a, dtype=np.float64)


class ExpandedSearch(FormulaSearch):
    """Exact K-min squared euclidean distances through the expanded form.

    1. Candidates: the K' smallest ``e_j = |y_j|^2 - 2 <x, y_j>`` of each
       query, reduced by the backend's dot-product micro-kernel (``|x|^2`` is
       left out: it does not change the order within a row).
    2. Re-ranking: the exact squared distances of the candidates, direct
       differences in float64, sorted with ties by index; K are kept.
    3. Certificate: a point outside the candidates has a computed value at
       least e_max, the largest candidate's, so its squared distance is at
       least ``e_max + |x|^2 - err`` (:meth:`error_bound`). A row whose K-th
       re-ranked distance lies strictly below that is exact (ties included);
       the other rows are searched again in the direct form
       (:meth:`fallback`).
    """

    def __init__(self, metric: Metric, Y: np.ndarray, backend):
        super().__init__(metric, Y, backend)
        y2 = _sqnorms(self.Y)
        self._y2_j = Vj(y2.astype(self.Y.dtype)[:, None])
        self._y2_max = float(y2.max())

    @staticmethod
    def is_usable_for(metric: Metric, Y: np.ndarray) -> bool:
        """Squared euclidean rdist, and enough features for the micro-kernel."""
        return metric.squared_l2 and Y.shape[1] >= EXPANDED_MIN_DIM

    def expanded(self, X: np.ndarray) -> LazyTensor:
        return self._y2_j - 2 * (Vi(X) | self._y_j)

    def kmin(self, X: np.ndarray, k: int):
        kc = n_candidates(k, self.Y.shape[0])
        x2 = _sqnorms(X)
        # norms near overflow make the expanded values inf - inf: direct form
        big = max(float(x2.max()), self._y2_max) > np.finfo(X.dtype).max / 8
        if kc > EXPANDED_MAX_CANDIDATES or big:
            return super().kmin(X, k)
        e, cand = self._kmin(self.expanded, X, kc)
        d, ind = _rerank(X, self.Y, cand, k)
        lower = e.max(axis=1).astype(np.float64) + x2  # outside the candidates
        exact = d[:, -1] + self.error_bound(x2, d[:, -1]) < lower
        vals = d.astype(X.dtype)
        redo = np.flatnonzero(~exact) if kc < self.Y.shape[0] else []
        if len(redo):
            vals[redo], ind[redo] = self.fallback(X[redo], k)
        return vals, ind

    def error_bound(self, x2: np.ndarray, d_k: np.ndarray) -> np.ndarray:
        """A bound, per row, on the rounding errors that the certificate meets.

        With u the unit roundoff of the dtype (eps / 2), D features, and
        Higham's gamma_D = D u / (1 - D u) (Accuracy and Stability of
        Numerical Algorithms, 2nd ed., section 3.1), e_j is off by at most:

        - 2 u |y_j|^2 from |y_j|^2, summed in float64 and rounded once;
        - 2 gamma_D |x| |y_j| from the dot product: D products summed in any
          order, with FMA or not (the factor 2 is exact);
        - u (|y_j|^2 + 2 |x| |y_j|) (1 + O(u)) from the subtraction.

        As 2 |x| |y| <= |x|^2 + |y|^2, that is (D + 4) u (|x|^2 + |y_j|^2) to
        first order; twice it, (D + 4) eps (|x|^2 + max |y|^2), covers the
        higher-order terms while D u < 1/2. The float64 sums (|x|^2, the
        candidates' distances) err by (D + 2) u64 relative, covered by
        (D + 4) eps (|x|^2 + d_K) as eps >= eps64; underflow costs at most
        ``tiny`` per operation.
        """
        D, fi = self.Y.shape[1], np.finfo(self.Y.dtype)
        return (D + 4) * (fi.eps * (2 * x2 + self._y2_max + d_k) + fi.tiny)

    def fallback(self, X: np.ndarray, k: int):
        """The direct-form search, for the rows that failed the certificate."""
        return super().kmin(X, k)


def _rerank(X: np.ndarray, Y: np.ndarray, cand: np.ndarray, k: int):
    """The ``k`` nearest candidates by exact squared distance: (float64, index).

    Candidates are put in index order first, so that the stable sort by
    distance leaves ties in index order, as the direct reduction does.
    """
    n, kc = cand.shape
    d, ind = np.empty((n, k)), np.empty((n, k), dtype=np.int64)
    rows = max(1, RERANK_BLOCK_ENTRIES // (kc * X.shape[1]))
    for s in range(0, n, rows):
        c = np.sort(cand[s : s + rows], axis=1)
        diff = np.subtract(Y[c], X[s : s + rows, None, :], dtype=np.float64)
        dist = np.einsum("rcf,rcf->rc", diff, diff)
        order = np.argsort(dist, axis=1, kind="stable")[:, :k]
        d[s : s + rows] = np.take_along_axis(dist, order, axis=1)
        ind[s : s + rows] = np.take_along_axis(c, order, axis=1)
    return d, ind


def radius_search(search, X: np.ndarray, threshold, n_fit: int):
    """Points within ``threshold`` (in rdist units; a float, or one per query)
    of each query, by increasing rdist, equal values in index order.

    Counts give each row's K; ``Kmin_argKmin`` with one more than the count
    then finds the points (rows grouped by K rounded up to 16, 32, 64, ...:
    each K is a kernel to compile, once). A row whose K-th value is still
    within the threshold is searched again with a larger K: the result does
    not rely on the count being computed exactly as the K-min values are.

    Returns per-row lists ``(values, indices)`` of arrays.
    """
    n = X.shape[0]
    vals, inds = [None] * n, [None] * n
    thr = np.broadcast_to(np.asarray(threshold, dtype=np.float64), (n,))
    need = np.minimum(search.count(X, threshold) + 1, n_fit)
    todo = np.arange(n)
    while todo.size:
        ks = np.minimum(_k_bucket(need[todo]), n_fit)
        again = []
        for k in np.unique(ks):
            rows = todo[ks == k]
            v, i = search.kmin_within(X[rows], int(k), thr[rows])
            within = v <= thr[rows, None]  # a prefix of each row (NaN sorts last)
            more = within[:, -1] & (k < n_fit)
            need[rows[more]] = 2 * k
            again.append(rows[more])
            for r, row_v, row_i, m in zip(rows, v, i, within):
                vals[r], inds[r] = row_v[m], row_i[m]
        todo = np.concatenate(again)
    return vals, inds


def _k_bucket(need: np.ndarray) -> np.ndarray:
    """``need`` rounded up to a power of 2, at least 16 (the K-min updates
    cost about K per candidate: measured, a pruned K = 32 search 1.7-2x
    faster than K = 64 at 2e4 x 2e4, D = 3, ~20 neighbours per query)."""
    bits = np.ceil(np.log2(np.maximum(need, 16))).astype(np.int64)
    return np.left_shift(1, bits)


# -- results -------------------------------------------------------------------


def drop_self(vals, ind):
    """Remove each fitted point from its own neighbours (scikit-learn's rule).

    When more duplicates than neighbours hide the point itself, the first
    neighbour (a duplicate) is dropped instead. When the point is missing
    because its distance to itself is not 0 (NaN for a constant row under
    correlation, 1 for a zero row under cosine), the last is dropped: the
    others are then the K nearest, as in scikit-learn, whose brute force
    takes a point's distance to itself as 0.
    """
    n, k = ind.shape
    keep = ind != np.arange(n)[:, None]
    missing = keep.all(axis=1)
    at_zero = vals[:, 0] <= 0  # False for NaN
    keep[missing & at_zero, 0] = False
    keep[missing & ~at_zero, -1] = False
    return vals[keep].reshape(n, k - 1), ind[keep].reshape(n, k - 1)


def csr(data, indices, indptr, shape):
    """A CSR matrix of the sparse interface that scikit-learn is set to return."""
    from scipy.sparse import csr_array, csr_matrix
    from sklearn import get_config

    interface = get_config().get("sparse_interface", "spmatrix")
    cls = csr_array if interface == "sparray" else csr_matrix
    return cls((data, indices, indptr), shape=shape)


def object_array(parts):
    out = np.empty(len(parts), dtype=object)
    for r, a in enumerate(parts):
        out[r] = a
    return out


def check_n_neighbors(n, default) -> int:
    """K of a query: ``n``, or the constructor's ``default`` for None."""
    n = default if n is None else n
    if n is None:
        raise ValueError("n_neighbors must be given (the constructor's is None)")
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise TypeError(f"n_neighbors must be an integer, got {n!r}")
    if n <= 0:
        raise ValueError(f"Expected n_neighbors > 0. Got {n}")
    return int(n)


def check_mode(mode) -> None:
    if mode not in ("connectivity", "distance"):
        raise ValueError(
            'Unsupported mode, must be one of "connectivity", or "distance" '
            f'but got "{mode}" instead'
        )
