"""Brute-force searches behind the k-NN estimators, in linear memory.

:class:`FormulaSearch` keeps the K smallest ``rdist`` (see
:mod:`.._metrics`) of each query with a ``Kmin_argKmin``
reduction; queries go through the reduction in blocks, so memory stays
linear in the number of points whatever their number.

Euclidean searches in 20 or more features take a faster exact route,
:class:`ExpandedSearch` (on the CPU from 16 features, the float32 BLAS
tiles of :mod:`._gemm` come first): candidates from the expanded form
``|y|^2 - 2 <x, y>`` (which the backends reduce with a matrix-product
micro-kernel), re-ranked by their exact distances, each row certified by a
rounding-error bound or else searched again in the direct form.

:func:`radius_search` runs on any of them (and on the pruned search of
:mod:`._pruned`); the helpers at the end check the query methods'
arguments and shape their results as scikit-learn's.
"""

from __future__ import annotations

import numbers

import numpy as np

from ....lazy import LazyTensor, Vi, Vj
from ...._utils._array_api import compat

from .._metrics import Metric

#: Rows x K of one query block: the block's outputs stay near 32 MB.
QUERY_BLOCK_ENTRIES = 2**21
#: Rows x candidates x features of one re-ranking block: 1 MB of float64
#: differences, which stay in cache (2x faster than 32 MB blocks).
RERANK_BLOCK_ENTRIES = 2**17


class FormulaSearch:
    """K-smallest and radius searches of a :class:`Metric` over fitted points.

    Brute force: the metric's formula, a K-min over every fitted point.

    Parameters
    ----------
    metric : Metric
        The metric's formula (``_metrics.make_metric``); ``rdist`` is what
        :meth:`kmin` returns (``|x - y|^2`` for the euclidean metric).
    Y : ndarray of shape (n_samples, n_features)
        The fitted points, on the host.
    backend : str or None
        Where the reductions run (as ``backend=`` of a reduction).

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.estimators.neighbors._metrics import make_metric
    >>> from kerneltools.estimators.neighbors.search import FormulaSearch
    >>> rng = np.random.default_rng(0)
    >>> Y, X = rng.random((300, 3)), rng.random((5, 3))
    >>> rdist, ind = FormulaSearch(make_metric("euclidean", {}), Y, "numpy").kmin(X, 3)
    >>> d2 = ((X[:, None] - Y[None]) ** 2).sum(-1)  # dense NumPy
    >>> ind.shape, bool((ind == d2.argsort(1)[:, :3]).all())
    ((5, 3), True)
    >>> bool(np.allclose(rdist, np.sort(d2, 1)[:, :3]))
    True
    """

    def __init__(self, metric: Metric, Y: np.ndarray, backend):
        self.metric, self.backend = metric, backend
        self.Y = metric.prepare(Y)
        self._y_j = Vj(self.Y)

    @staticmethod
    def is_usable_for(case) -> bool:
        """Every case: any metric's formula, any number of features, on any
        backend (the last strategy of :data:`~.STRATEGIES`)."""
        return True

    @classmethod
    def build(cls, case):
        """The search over ``case``'s fitted points, on the host."""
        return cls(case.metric, case.host_points(), case.backend)

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

    def within(self, X: np.ndarray, k: int, thr: np.ndarray):
        """The fitted points within ``thr`` (rdist, one per row) of each query,
        in the K slots of a masked K-min (:func:`masked`).

        Returns ``(values, indices, kept, full)``, each (n, k) but ``full``
        (n,): rows by increasing rdist, ``kept`` marks the entries within
        ``thr``, ``full`` the rows whose K slots all hold such points (more
        may exist: search again with a larger K).

        Squared Euclidean rdists are re-tested in float64 as scikit-learn's
        trees test them: the reduction keeps the points within ``thr``
        widened by its rounding bound, whose distances are then computed
        again (:func:`sqdist_seq`) and tested against ``thr``; rows by those
        distances, ties by index. The reduction's squared distances, D
        differences squared and summed in the data's dtype, err by at most
        ``(D + 2) u`` relative to first order (u the unit roundoff, every
        term >= 0), and so do the float64 ones by (D + 2) u64; 4 (D + 2) u,
        plus the smallest normal per term, bounds both.
        """
        if not self.metric.squared_l2:
            return self._within_reduced(X, k, thr)
        fi = np.finfo(X.dtype)
        wide = thr * (1 + 2 * (X.shape[1] + 2) * fi.eps) + X.shape[1] * fi.tiny
        _, i, kept, full = self._within_reduced(X, k, wide)
        cand = np.where(kept, i, 0)
        d = np.where(kept, sqdist_seq(self.metric.prepare(X), self.Y, cand), np.inf)
        kept = d <= thr[:, None]
        order = np.lexsort((np.where(kept, cand, len(self.Y)), d), axis=1)
        d, cand, kept = (np.take_along_axis(a, order, axis=1) for a in (d, cand, kept))
        return d.astype(X.dtype), cand, kept, full

    def _within_reduced(self, X: np.ndarray, k: int, thr: np.ndarray):
        """:meth:`within` in the reduction's own arithmetic."""
        bounds = masking_bounds(thr, X.dtype)
        if bounds is None:  # thresholds near overflow: a plain K-min
            v, i = self.kmin_within(X, k, thr)
            kept = v <= thr[:, None]
            return v, i, kept, kept[:, -1]
        X = self.metric.prepare(X)
        v, i = self._masked_kmin(self.rdist_over(X, k), X, k, *bounds)
        real = i >= k
        kept = real & (v <= thr[:, None])
        return v, i - k, kept, real[:, -1]

    def rdist_over(self, X: np.ndarray, k: int):
        """(value(rows), w_j): the rdist of query rows over ``k`` sentinels
        followed by the fitted points, and the sentinels' marks."""
        (y_j,), w_j = with_sentinels(k, self.Y)
        return (lambda rows: self.metric.rdist(Vi(X[rows]), y_j)), w_j

    def _masked_kmin(self, value, X: np.ndarray, k: int, t, fill: float,
                     sentinel: float):
        """K-min of the masked ``value`` (from :meth:`rdist_over`) over k
        sentinels and the fitted points (indices shifted by k), by blocks of
        queries."""
        value, w_j = value
        vals = np.empty((X.shape[0], k), dtype=X.dtype)
        idx = np.empty((X.shape[0], k), dtype=np.int64)
        rows = max(1, QUERY_BLOCK_ENTRIES // k)
        for s in range(0, X.shape[0], rows):
            sl = slice(s, s + rows)
            F = masked(value(sl), Vi(t[sl, None]), w_j, fill, sentinel)
            v, i = F.Kmin_argKmin(k, axis=1, backend=self.backend)
            vals[sl], idx[sl] = v.reshape(-1, k), i.reshape(-1, k)
        return vals, idx

    def count(self, X: np.ndarray, threshold) -> np.ndarray:
        """Number of fitted points with rdist <= threshold (a float, or one per
        query; an estimate: see :func:`radius_search`)."""
        if np.ndim(threshold):
            threshold = Vi(np.asarray(threshold, dtype=X.dtype)[:, None])
        else:
            threshold = float(threshold)
        F = self.rdist(self.metric.prepare(X)) <= threshold
        return np.rint(F.sum(axis=1, backend=self.backend)).astype(np.int64).ravel()


def masking_bounds(thr: np.ndarray, dtype):
    """``(t, fill, sentinel)`` of a masked K-min (:func:`masked`) for rdist
    thresholds ``thr``: t, thr rounded up in ``dtype`` (no point within thr
    is masked by rounding; the caller tests thr again in float64), and two
    values above every t, sentinel < fill; None where they would overflow."""
    dtype = np.dtype(dtype)
    t = np.nextafter(np.asarray(thr).astype(dtype), dtype.type(np.inf))
    top = 2.0 * (float(np.abs(t).max(initial=0.0)) + 1.0)  # 2A, A > |t|
    if not np.isfinite(t).all() or 2 * top > np.finfo(dtype).max / 4:
        return None
    return t, 2 * top, top


def masked(value: LazyTensor, t, w_j: LazyTensor, fill: float, sentinel: float):
    """The value where it is at most ``t``, ``fill`` elsewhere, and
    ``sentinel`` (``t < sentinel < fill``) at the points where ``w_j = 1``.

    A K-min of it over ``K`` sentinel points followed by the fitted points
    gives the points within t first (by value, ties by index) and
    sentinels after them; the points beyond t rank after every sentinel,
    so that once a row's K slots are filled (sentinels: in the first tile)
    they fail the reduction's vectorised threshold test and are never
    inserted: the cost of a radius search no longer grows with the points
    near, but beyond, the radius. A row whose K-th slot is not a sentinel
    may have more points within t.
    """
    return (-w_j).ifelse((t - value).ifelse(value, fill), sentinel)


def with_sentinels(k: int, *arrays: np.ndarray):
    """((a_j, ...), w_j): each array after k copies of its first row
    (sentinels, ``w = 1``: a finite rdist for every metric; ``w = 0`` for
    the rows of the arrays), as j-variables."""
    w = np.zeros((k + len(arrays[0]), 1), dtype=arrays[0].dtype)
    w[:k] = 1
    return tuple(Vj(np.concatenate([np.repeat(a[:1], k, axis=0), a]))
                 for a in arrays), Vj(w)


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

    Parameters
    ----------
    metric : Metric
        The metric's formula, euclidean (see :class:`FormulaSearch`).
    Y : ndarray of shape (n_samples, n_features)
        The fitted points, on the host.
    backend : str or None
        Where the reductions run.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.estimators.neighbors._metrics import make_metric
    >>> from kerneltools.estimators.neighbors.search import ExpandedSearch
    >>> rng = np.random.default_rng(0)
    >>> Y, X = rng.random((300, 32)), rng.random((5, 32))
    >>> rdist, ind = ExpandedSearch(make_metric("euclidean", {}), Y, "numpy").kmin(X, 3)
    >>> d2 = ((X[:, None] - Y[None]) ** 2).sum(-1)  # dense NumPy
    >>> ind.shape, bool((ind == d2.argsort(1)[:, :3]).all())
    ((5, 3), True)
    """

    def __init__(self, metric: Metric, Y: np.ndarray, backend):
        super().__init__(metric, Y, backend)
        y2 = _sqnorms(self.Y)
        self._y2 = y2.astype(self.Y.dtype)[:, None]
        self._y2_j = Vj(self._y2)
        self._y2_max = float(y2.max())

    @staticmethod
    def is_usable_for(case) -> bool:
        """Euclidean, from :data:`EXPANDED_MIN_DIM` features, on the host."""
        return (case.metric.squared_l2  # rdist |x - y|^2: the expanded form's
                # fewer features: the direct form costs as little as the
                # micro-kernel, and needs no re-ranking
                and case.n_features >= EXPANDED_MIN_DIM
                and not case.on_device)  # the re-ranking reads NumPy points

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

    def _expanded_bounds(self, X: np.ndarray, thr):
        """(|x|^2, t): a point within rdist ``thr`` of a query has a computed
        expanded value at most ``t = thr - |x|^2 + err`` (:meth:`error_bound`);
        None where the norms or thresholds come near overflow."""
        x2 = _sqnorms(X)
        thr = np.broadcast_to(np.asarray(thr, dtype=np.float64), x2.shape)
        top = np.finfo(X.dtype).max / 8
        if max(float(x2.max(initial=0)), self._y2_max, float(np.max(thr))) > top:
            return None
        return x2, thr - x2 + self.error_bound(x2, thr)

    def count(self, X: np.ndarray, threshold) -> np.ndarray:
        """An upper bound of each query's points within ``threshold``: the
        expanded values within ``t`` (:meth:`_expanded_bounds`), counted on
        the dot-product micro-kernel."""
        bounds = self._expanded_bounds(X, threshold)
        if bounds is None:
            return super().count(X, threshold)
        t = np.nextafter(bounds[1].astype(X.dtype), X.dtype.type(np.inf))
        F = self.expanded(X) <= Vi(t[:, None])
        return np.rint(F.sum(axis=1, backend=self.backend)).astype(np.int64).ravel()

    def rdist_over(self, X: np.ndarray, k: int):
        (y_j, y2_j), w_j = with_sentinels(k, self.Y, self._y2)
        return (lambda rows: y2_j - 2 * (Vi(X[rows]) | y_j)), w_j

    def within(self, X: np.ndarray, k: int, thr: np.ndarray):
        """:meth:`FormulaSearch.within` from the expanded values within ``t``
        (:meth:`_expanded_bounds`: every point within ``thr`` among them),
        re-ranked by their exact distances (float64)."""
        bounds = self._expanded_bounds(X, thr)
        masking = None if bounds is None else masking_bounds(bounds[1], X.dtype)
        if masking is None:
            return FormulaSearch.within(self, X, k, thr)  # the direct form
        _, i = self._masked_kmin(self.rdist_over(X, k), X, k, *masking)
        real = i >= k
        cand = np.where(real, i - k, 0)
        d = np.where(real, _exact_sqdist(X, self.Y, cand), np.inf)
        kept = d <= thr[:, None]
        order = np.lexsort((cand, d), axis=1)  # by exact distance, ties by index
        d, cand, kept = (np.take_along_axis(a, order, axis=1) for a in (d, cand, kept))
        return d.astype(X.dtype), cand, kept, real[:, -1]

    def error_bound(self, x2: np.ndarray, d_k: np.ndarray) -> np.ndarray:
        """A bound, per row, on the rounding errors that the certificate meets.

        With u the unit roundoff of the dtype (eps / 2), D features, and
        Higham's gamma_D = D u / (1 - D u) (Accuracy and Stability of
        Numerical Algorithms, 2nd ed., section 3.1), e_j is off by at most::

            - 2 u |y_j|^2 from |y_j|^2, summed in float64 and rounded once;
            - 2 gamma_D |x| |y_j| from the dot product: D products summed in any
              order, with FMA or not (the factor 2 is exact);
            - u (|y_j|^2 + 2 |x| |y_j|) (1 + O(u)) from the subtraction.

            As 2 |x| |y| <= |x|^2 + |y|^2, that is (D + 4) u (|x|^2 + |y_j|^2) to
            first order; twice it, (D + 4) eps (|x|^2 + max |y|^2), covers the
            higher-order terms while D u < 1/2. The float64 sums (|x|^2, the
            candidates' distances) err by (D + 2) u64 relative, covered by
            (D + 4) eps (|x|^2 + d_K) as eps >= eps64; underflow costs at most
            tiny per operation.
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
    c = np.sort(cand, axis=1)
    dist = _exact_sqdist(X, Y, c)
    order = np.argsort(dist, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(dist, order, axis=1), np.take_along_axis(c, order, axis=1)


def sqdist_seq(X: np.ndarray, Y: np.ndarray, cand: np.ndarray) -> np.ndarray:
    """(n, k) squared distances of each query to ``Y[cand]`` in float64, feature
    by feature (the sum of :func:`kerneltools.ranges.radius_csr` and of
    scikit-learn's trees)."""
    out = np.zeros(cand.shape)
    for f in range(X.shape[1]):
        u = X[:, f, None].astype(np.float64) - Y[:, f].astype(np.float64)[cand]
        out += u * u
    return out


def _exact_sqdist(X: np.ndarray, Y: np.ndarray, cand: np.ndarray) -> np.ndarray:
    """(n, kc) squared distances of each query to its candidates ``Y[cand]``,
    direct differences in float64, by blocks of rows that stay in cache."""
    n, kc = cand.shape
    out = np.empty((n, kc))
    rows = max(1, RERANK_BLOCK_ENTRIES // (kc * X.shape[1]))
    for s in range(0, n, rows):
        diff = np.subtract(Y[cand[s : s + rows]], X[s : s + rows, None, :],
                           dtype=np.float64)
        out[s : s + rows] = np.einsum("rcf,rcf->rc", diff, diff)
    return out


def radius_search(search, X: np.ndarray, threshold, n_fit: int, *,
                  exclude_self: bool = False, by_index: bool = False):
    """Points within ``threshold`` (in rdist units; a float, or one per query)
    of each query, as CSR arrays, without Python work per query.

    Counts give each row's K; a masked ``Kmin_argKmin`` (``search.within``:
    K sentinels, then the points, those beyond the threshold never inserted)
    with one more than the count then finds the points (rows grouped by K
    rounded up to 16, 32, 64, ...: each K is a kernel to compile, once). A
    row whose K slots all hold points within the threshold is searched
    again with a larger K: the result does not rely on the count being
    computed exactly as the K-min values are.

    ``exclude_self``: query r is fitted point r, left out of its own row
    (scikit-learn's rule for ``X=None``). Each row comes by increasing rdist
    (equal values in index order), or by index with ``by_index``.

    Returns ``(values, indices, indptr)``: row r's entries are
    ``values[indptr[r]:indptr[r + 1]]`` (X's dtype) and the same slice of
    ``indices`` (int64).
    """
    n = X.shape[0]
    thr = np.broadcast_to(np.asarray(threshold, dtype=np.float64), (n,))
    tiles = getattr(search, "radius_csr", None)  # BLAS tiles (many features)
    out = None if tiles is None else tiles(X, thr, exclude_self=exclude_self,
                                           by_index=by_index)
    if out is not None:
        return out
    need = np.minimum(search.count(X, threshold) + 1, n_fit)
    todo = np.arange(n)
    pieces = []  # (rows, values, indices, kept), the K-min of finished rows
    while todo.size:
        ks = np.minimum(_k_bucket(need[todo]), n_fit)
        again = []
        for k in np.unique(ks):
            rows = todo[ks == k]
            v, i, kept, full = search.within(X[rows], int(k), thr[rows])
            more = full & (k < n_fit)
            need[rows[more]] = 2 * k
            again.append(rows[more])
            done = ~more
            pieces.append((rows[done], v[done], i[done], kept[done]))
        todo = np.concatenate(again)
    return _rows_to_csr(pieces, n, X.dtype, exclude_self, by_index)


def _rows_to_csr(pieces, n: int, dtype, exclude_self: bool, by_index: bool):
    """CSR arrays from padded (rows, K) blocks and the masks of their entries
    (vectorised: a block's kept entries, row-major, are its rows' CSR runs)."""
    counts = np.zeros(n, dtype=np.int64)
    ready = []
    for rows, v, i, keep in pieces:
        if exclude_self:
            keep = keep & (i != rows[:, None])
        if by_index:  # kept entries first, by index (one vectorised sort)
            big = np.iinfo(np.int32 if i.size and i.max() < 2**31 - 1 else np.int64)
            order = np.argsort(np.where(keep, i, big.max).astype(big.dtype), axis=1)
            v = np.take_along_axis(v, order, axis=1)
            i = np.take_along_axis(i, order, axis=1)
            c = keep.sum(axis=1)
            keep = np.arange(keep.shape[1]) < c[:, None]
        else:
            c = keep.sum(axis=1)
        counts[rows] = c
        ready.append((rows, v[keep], i[keep], c))
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    vals = np.empty(indptr[-1], dtype=dtype)
    inds = np.empty(indptr[-1], dtype=np.int64)
    for rows, v, i, c in ready:
        pos = np.repeat(indptr[rows] - (np.cumsum(c) - c), c) + np.arange(len(v))
        vals[pos], inds[pos] = v, i
    return vals, inds, indptr


def split_rows(a, indptr: np.ndarray) -> np.ndarray:
    """The NumPy object array of the rows ``a[indptr[r]:indptr[r + 1]]``
    (views) of a flat array of any namespace (the Array API has no ragged
    arrays; scikit-learn returns object arrays)."""
    bounds = np.asarray(indptr).tolist()
    return object_array([a[s:e] for s, e in zip(bounds[:-1], bounds[1:])])


def _k_bucket(need: np.ndarray) -> np.ndarray:
    """``need`` rounded up to a power of 2, at least 16 (the K-min updates
    cost about K per candidate: measured, a pruned K = 32 search 1.7-2x
    faster than K = 64 at 2e4 x 2e4, D = 3, ~20 neighbours per query)."""
    bits = np.ceil(np.log2(np.maximum(need, 16))).astype(np.int64)
    return np.left_shift(1, bits)


# -- results -------------------------------------------------------------------


def drop_self(vals, ind, xp=None):
    """Remove each fitted point from its own neighbours (scikit-learn's rule),
    in the namespace ``xp`` of the (n, K) arrays (that of ``ind`` for None).

    When more duplicates than neighbours hide the point itself, the first
    neighbour (a duplicate) is dropped instead. When the point is missing
    because its distance to itself is not 0 (NaN for a constant row under
    correlation, 1 for a zero row under cosine), the last is dropped: the
    others are then the K nearest, as in scikit-learn, whose brute force
    takes a point's distance to itself as 0.
    """
    xp = compat().array_namespace(ind) if xp is None else xp
    n, k = ind.shape
    dev = compat().device(ind)
    own = xp.reshape(xp.arange(n, dtype=ind.dtype, device=dev), (n, 1))
    keep = ind != own
    missing = xp.reshape(xp.all(keep, axis=1), (n, 1))
    at_zero = xp.reshape(vals[:, 0] <= 0, (n, 1))  # False for NaN
    # the first column without the rows that drop it, the last likewise
    # (k >= 2: the point and at least one neighbour)
    keep = xp.concat([keep[:, :1] & ~(missing & at_zero), keep[:, 1:k - 1],
                      keep[:, k - 1:] & ~(missing & ~at_zero)], axis=1)
    return xp.reshape(vals[keep], (n, k - 1)), xp.reshape(ind[keep], (n, k - 1))


def own_distances(metric, vals, xp=None):
    """``metric.to_dist(vals)`` for (n, K) rdist values of the namespace
    ``xp`` (NumPy for None). A NumPy array of the euclidean metric is written
    over: ``vals`` must be the caller's own (a search's fresh output). One
    (n, K) array less: at 10^5 x 92, 74 MB and its page faults, ~0.01-0.2
    CPU s."""
    if metric.to_dist is not np.sqrt:  # the others' conversions are operators
        return metric.to_dist(vals)
    if isinstance(vals, np.ndarray) and vals.dtype.kind == "f" and vals.flags.writeable:
        return np.sqrt(vals, out=vals)
    return np.sqrt(vals) if xp is None else xp.sqrt(vals)


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
