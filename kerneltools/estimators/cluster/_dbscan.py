"""DBSCAN (Ester et al., KDD 1996) as scikit-learn computes it, in linear memory.

scikit-learn stores every point's eps-neighbourhood, then walks them from
each unlabelled core point in index order (``_dbscan_inner.pyx``): a cluster
is a connected component of the core points (two core points are joined
when within ``eps``), clusters are numbered in the order of their first
(smallest-index) core point, and a border point (not core, within ``eps`` of
a core point) joins the first cluster that reaches it, which is the
smallest-numbered cluster among its core neighbours. The same results come
here from reductions over pairs of points, none of which stores a pair:

1. the weighted neighbour count ``sum_j w_j [d(x_i, x_j) <= eps]`` (the
   point itself included) of every point, a ``Sum``: core points have at
   least ``min_samples``;
2. the components of the core points, by rounds of hooking
   (:mod:`._hooking`), each round one ``Min`` reduction of the neighbours'
   labels (the first ones over a sample of the columns); they end labelled
   by their smallest core point;
3. each other point's smallest cluster among its core neighbours, one
   ``Min`` reduction (none: noise).

The metric is the k-NN family's formula (:mod:`..neighbors._metrics`: every
metric it has, resolved as scikit-learn does), its ``rdist`` tested against
``eps`` converted once, in float64 by default (float32 data too, as
scikit-learn's trees test them); euclidean counts of 4,096 points or more
run on a float32 bracket of that test and count again in float64 only the
points it leaves undecided (:mod:`._near`). Euclidean fits of 4,096 points
or more cut the points into k-means cells and every pass reduces over the
pairs of cells within ``eps`` only (:mod:`._cells`; the bound is widened by
the rounding, so the results are those over all pairs). Memory is O(n) at
any ``eps`` (the cell pairs: O(cells^2), at most 1,024 cells).

Measured (``asv_bench/density_compare_results.md``), 3e4 x 9 blobs, ~1,100
neighbours per point: 5.4 CPU s over all pairs (4 passes), 0.3 s over the
cells (the counts, then rounds over 1/35 of the columns).
"""

from __future__ import annotations

import sys
import time
from numbers import Integral, Real
from typing import ClassVar

import numpy as np
import sklearn.metrics.pairwise
from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.utils import check_array

from .._shared._fallback import FallbackMixin, is_sparse
from ...lazy import Vi, Vj
from ..neighbors import _metrics as M
from ..._utils._param_validation import Dtypes, Interval, StrOptions, validate_params
from ..._utils._validation import validate_numeric
from . import _cells
from ._hooking import components, min_label
from ._near import Near

__all__ = ["DBSCAN"]

#: The metric names scikit-learn's DBSCAN accepts (its own constraint's list;
#: those the k-NN estimators lack go to it).
#: scikit-learn's metric names for DBSCAN (a private list of its
#: ``sklearn.metrics.pairwise``; these, its 1.9 list, if it moves)
_SKLEARN_METRICS = set(getattr(sklearn.metrics.pairwise, "_VALID_METRICS", (
    "euclidean", "l2", "l1", "manhattan", "cityblock", "braycurtis", "canberra",
    "chebyshev", "correlation", "cosine", "dice", "hamming", "jaccard",
    "mahalanobis", "matching", "minkowski", "rogerstanimoto", "russellrao",
    "seuclidean", "sokalsneath", "sqeuclidean", "yule",
    "wminkowski", "nan_euclidean", "haversine")))
#: The first hooking rounds read every stride-th core point, the stride
#: giving about this many neighbours to the median point
#: (:func:`._hooking.components`).
HOOK_NEIGHBOURS = 32
#: The counts first read the points of every stride-th cell, the stride
#: giving the median point about ``COUNT_MARGIN * min_samples`` neighbours
#: there (its median from ``PILOT_ROWS`` points). Measured, 1.8e5 x 9 blobs,
#: ~1,000 neighbours, min_samples=10, CPU s of the counts: all pairs 2.0;
#: every stride-th point, margin 4: 1.0; every stride-th cell, margin 4:
#: 0.94, 8: 0.75, 16: 0.74 (small blocks cost more per pair).
COUNT_MARGIN = 8
PILOT_ROWS = 1000


def _check_weight(sample_weight, n: int) -> np.ndarray | None:
    """``sample_weight`` as a finite float64 array of shape (n,), not all
    zero (None stays None), as scikit-learn's DBSCAN checks it."""
    if sample_weight is None:
        return None
    if isinstance(sample_weight, Real):
        w = np.full(n, float(sample_weight))
    else:
        w = check_array(sample_weight, ensure_2d=False, dtype=np.float64,
                        input_name="sample_weight")
    if w.shape != (n,):
        raise ValueError(
            f"sample_weight.shape == {w.shape}, expected {(n,)}!")
    if not np.any(w):
        raise ValueError("Sample weights must contain at least one non-zero number.")
    return w


class DBSCAN(FallbackMixin, ClusterMixin, BaseEstimator):
    """Density-based clustering (DBSCAN) without storing neighbourhoods.

    The constructor, attributes and labels are scikit-learn's
    :class:`sklearn.cluster.DBSCAN`'s (the same ``labels_``, border points
    included); the eps-neighbourhoods are reduced over, one block of pairs
    at a time (nearby k-means cells only, for the euclidean metric), and
    never stored, so memory stays
    linear in the number of points at any ``eps``.

    Parameters
    ----------
    eps : float, default=0.5
        Radius of a neighbourhood (distance <= eps).
    min_samples : int, default=5
        Weighted neighbours (the point itself included) that make a point
        core.
    metric : str or callable, default='euclidean'
        A metric of :class:`~kerneltools.estimators.NearestNeighbors`;
        ``"precomputed"``, callables and the names it lacks go to
        scikit-learn's DBSCAN (see Notes).
    metric_params : dict, default=None
        Parameters of the metric.
    algorithm : {'auto', 'ball_tree', 'kd_tree', 'brute'}, default='auto'
        Accepted for compatibility (every pass is a reduction over the
        pairs).
    leaf_size : int, default=30
        Accepted for compatibility.
    p : float, default=None
        Power of the Minkowski metric (None: 2).
    n_jobs : int, default=None
        Accepted for compatibility (the reductions use every core).
    backend : {'auto', 'cpu', 'cuda', 'numpy'} or None, default=None
        Where the searches run; None: the configured backend.
    dtype : {'float32', 'float64'} or None, default=None
        Precision of the distances tested against ``eps``; None: float64
        (scikit-learn's trees test float32 data in float64 too).
    verbose : int, default=0
        Print the passes' progress (blocks, core points, clusters).

    Attributes
    ----------
    core_sample_indices_ : ndarray of shape (n_core_samples,)
        Indices of the core points, increasing.
    components_ : ndarray of shape (n_core_samples, n_features)
        The core points.
    labels_ : ndarray of shape (n_samples,)
        Cluster of each point, numbered from 0; -1 for noise.
    n_features_in_ : int
        Number of features seen during :meth:`fit`.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features, when X had string column names.

    Notes
    -----
    Sparse ``X``, ``metric="precomputed"``, callables and metric names the
    k-NN estimators lack are fitted by scikit-learn's own DBSCAN with the
    same parameters; its attributes are copied here and it is kept in
    ``fallback_`` (``verbose`` says so).

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.estimators import DBSCAN
    >>> X = np.array([[1, 2], [2, 2], [2, 3], [8, 7], [8, 8], [25, 80]])
    >>> clustering = DBSCAN(eps=3, min_samples=2).fit(X)
    >>> clustering.labels_
    array([ 0,  0,  0,  1,  1, -1])
    >>> clustering.core_sample_indices_
    array([0, 1, 2, 3, 4])
    """

    _sklearn_class = "sklearn.cluster.DBSCAN"
    _parameter_constraints: ClassVar[dict] = {
        "eps": [Interval(Real, 0.0, None, closed="neither")],
        "min_samples": [Interval(Integral, 1, None, closed="left")],
        "metric": [StrOptions(_SKLEARN_METRICS | {"precomputed"}), callable],
        "metric_params": [dict, None],
        "algorithm": [StrOptions({"auto", "ball_tree", "kd_tree", "brute"})],
        "leaf_size": [Interval(Integral, 1, None, closed="left")],
        "p": [Interval(Real, 0.0, None, closed="left"), None],
        "n_jobs": [Integral, None],
        "backend": ["backend"],
        "dtype": [Dtypes(("float32", "float64")), None],
        "verbose": ["verbose"],
    }

    def __init__(self, eps=0.5, *, min_samples=5, metric="euclidean",
                 metric_params=None, algorithm="auto", leaf_size=30, p=None,
                 n_jobs=None, backend=None, dtype=None, verbose=0):
        self.eps = eps
        self.min_samples = min_samples
        self.metric = metric
        self.metric_params = metric_params
        self.algorithm = algorithm
        self.leaf_size = leaf_size
        self.p = p
        self.n_jobs = n_jobs
        self.backend = backend
        self.dtype = dtype
        self.verbose = verbose

    def _engine_refuses(self, X, y=None):
        if is_sparse(X):
            return "sparse X"
        if not isinstance(self.metric, str):
            return "a callable metric"
        if self.metric not in M.VALID_METRICS:
            return f"metric={self.metric!r}"
        return None

    def fit(self, X, y=None, sample_weight=None):
        """Find the core points, the clusters and the noise.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The points (or, with ``metric='precomputed'``, their distances:
            scikit-learn's DBSCAN then fits).
        y : None
            Ignored.
        sample_weight : array-like of shape (n_samples,), default=None
            Weight of each point in its neighbours' counts (negative
            weights allowed, as in scikit-learn).

        Returns
        -------
        self : DBSCAN
            The fitted estimator.
        """
        validate_params(self)
        reason = self._engine_refuses(X)
        if reason:
            return self._fit_fallback(reason, X, y, sample_weight=sample_weight)
        self._drop_fallback()
        # (scikit-learn's DBSCAN refuses NaN, nan_euclidean or not)
        X = validate_numeric(self, X, dtype="numeric")
        w = _check_weight(sample_weight, X.shape[0])
        t0 = self._t0 = time.perf_counter()
        self._typical = 0.0
        near = self._near(X)
        self._cells = self._make_cells(X, near)
        core = self._core_mask(near, X.shape[0], w)
        self.core_sample_indices_ = np.flatnonzero(core)
        self._say(f"{len(self.core_sample_indices_)} core points of "
                  f"{X.shape[0]}", t0)
        self.labels_ = self._labels(near, core, t0)
        del self._cells, self._typical
        if len(self.core_sample_indices_):
            self.components_ = X[self.core_sample_indices_].copy()
        else:
            self.components_ = np.empty((0, X.shape[1]))
        return self

    def fit_predict(self, X, y=None, sample_weight=None):
        """:meth:`fit`, then ``labels_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The points.
        y : None
            Ignored.
        sample_weight : array-like of shape (n_samples,), default=None
            Weight of each point.

        Returns
        -------
        labels : ndarray of shape (n_samples,)
            Cluster of each point; -1 for noise.
        """
        self.fit(X, sample_weight=sample_weight)
        return self.labels_

    # -- the passes ----------------------------------------------------------------
    def _metric(self, X: np.ndarray):
        """(Metric, threshold on its rdist) of ``eps``, as the k-NN family
        resolves the metric's name and parameters."""
        name, params = M.effective_metric(self.metric, self.p, self.metric_params)
        M.check_metric_params(name, params, X.shape[1])
        M.check_query_features(name, X.shape[1])
        M.warn_boolean_conversion(name, M.is_bool_data(X))
        metric = M.make_metric(name, M.formula_params(name, params, X))
        return metric, metric.to_rdist(float(self.eps))

    def _near(self, X: np.ndarray) -> Near:
        """The eps test of pairs of points (:class:`._near.Near`)."""
        metric, thr = self._metric(X)
        name, _ = M.effective_metric(self.metric, self.p, self.metric_params)
        return Near(X, metric, thr, name=name, eps=float(self.eps), dtype=self.dtype)

    def _make_cells(self, X: np.ndarray, near: Near):
        """The kept cell pairs (:class:`._cells.Cells`) of euclidean fits of
        ``MIN_POINTS`` points or more on the CPU; None (every pair)
        otherwise."""
        if (near.name != "euclidean" or len(X) < _cells.MIN_POINTS
                or not _cells.on_cpu(self.backend)):
            return None
        cells = _cells.Cells(X, float(self.eps), near.dtype, self.backend)
        self._say(f"{cells.n_cells} cells, {100 * cells.kept:.1f}% of the pairs "
                  "kept", self._t0)
        return cells

    def _ranges(self, rows, cols):
        return None if self._cells is None else self._cells.ranges(rows, cols)

    def _core_mask(self, near, n: int, w) -> np.ndarray:
        """Pass 1: whether each point's weighted neighbour count,
        ``sum_j w_j [rdist_ij <= thr]``, reaches ``min_samples``."""
        if w is None and near.bracket(slice(0, 1), slice(0, 1)) is not None:
            return self._core_mask_bracketed(near, n)
        every = np.arange(n)
        F = near(every, every)
        if w is not None:
            F = F * Vj(w[:, None].astype(near.dtype))
        counts = F.sum(axis=1, backend=self.backend,
                       ranges=self._ranges(every, every)).ravel()
        if w is None:
            counts = np.rint(counts)
            self._typical = float(np.median(counts))
        return counts >= self.min_samples

    def _core_mask_bracketed(self, near: Near, n: int) -> np.ndarray:
        """Pass 1 on the float32 bracket; the undecided points in float64.

        Where points have many neighbours (a pilot count of every
        ``n // PILOT_ROWS``-th point), first a count over every
        ``stride``-th point with the bracket's ``eps - m`` test: a lower
        bound of the count, so the points it gives ``min_samples`` are core;
        only the others are counted over all points."""
        every = np.arange(n)
        ms = self.min_samples
        self._typical = self._pilot_count(near, n)
        core = np.zeros(n, bool)
        stride = max(1, int(self._typical) // (COUNT_MARGIN * ms))
        if stride > 1:
            cols = self._sample_columns(n, stride)
            lo = near.certain(every, cols).sum(
                axis=1, backend=self.backend, ranges=self._ranges(every, cols))
            core = np.rint(lo.ravel()) >= ms
        rest = np.flatnonzero(~core)
        if not len(rest):
            return core
        lo, hi = near.bracket(rest, every).sum(
            axis=1, backend=self.backend, ranges=self._ranges(rest, every)).T
        core[rest] = np.rint(hi) >= ms
        again = rest[(np.rint(lo) >= ms) != core[rest]]
        if len(again):
            exact = near(again, every).sum(
                axis=1, backend=self.backend,
                ranges=self._ranges(again, every)).ravel()
            core[again] = np.rint(exact) >= ms
        return core

    def _sample_columns(self, n: int, stride: int) -> np.ndarray:
        """About 1/stride of the points: those of every stride-th cell (few
        large blocks), or every stride-th point without cells."""
        if self._cells is None:
            return np.arange(0, n, stride)
        lab = self._cells.labels
        return np.flatnonzero(lab % stride == 0)

    def _pilot_count(self, near: Near, n: int) -> float:
        """The median neighbour count (``eps - m`` test) of every
        ``n // PILOT_ROWS``-th point."""
        rows, every = np.arange(0, n, max(1, n // PILOT_ROWS)), np.arange(n)
        lo = near.certain(rows, every).sum(
            axis=1, backend=self.backend, ranges=self._ranges(rows, every))
        return float(np.median(lo))

    def _labels(self, near, core: np.ndarray, t0: float) -> np.ndarray:
        """Pass 2: the components of the core points (hooking rounds), then
        the border points (one reduction)."""
        labels = np.full(len(core), -1, dtype=np.intp)
        core_idx = np.flatnonzero(core)
        if not len(core_idx):
            return labels
        stride = max(1, int(self._typical) // HOOK_NEIGHBOURS)
        lab = components(near, core_idx, self.backend, self._say, t0,
                          self._cells, stride)
        roots, cluster = np.unique(lab, return_inverse=True)
        labels[core_idx] = cluster  # numbered by their smallest core point
        self._say(f"{len(roots)} clusters", t0)
        other = np.flatnonzero(~core)
        if len(other):
            first = min_label(near, other, core_idx, cluster, self.backend,
                               self._ranges(other, core_idx))
            has = first < len(roots)
            labels[other[has]] = first[has].astype(np.intp)
        return labels

    def _say(self, what: str, t0: float) -> None:
        if self.verbose:
            print(f"DBSCAN: {what} ({time.perf_counter() - t0:.2f} s)",
                  file=sys.stderr, flush=True)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = self.metric == "precomputed"
        tags.input_tags.sparse = True
        return tags
