"""Local outlier factor: scikit-learn's ``LocalOutlierFactor`` on K-min reductions.

The K nearest neighbours of every point come from our
:class:`~kerneltools.estimators.NearestNeighbors` (exact, linear memory: a
``Kmin_argKmin`` reduction, block-sparse in low dimension, or on the CPU
from 16 features float32 BLAS tiles with a running selection and exact
re-ranking); the rest is
Breunig et al.'s definition (SIGMOD 2000), as scikit-learn computes it:

- ``reach_k(a, b) = max(d(a, b), k-distance(b))``;
- ``lrd(a) = 1 / (mean over the K neighbours b of reach_k(a, b) + 1e-10)``;
- ``LOF(a) = mean over the K neighbours b of lrd(b) / lrd(a)``, and
  ``negative_outlier_factor_ = -LOF`` on the training points.
"""

from __future__ import annotations

import warnings
from numbers import Integral, Real
from typing import ClassVar

import numpy as np
from sklearn.base import BaseEstimator, OutlierMixin
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_array, check_is_fitted

from .neighbors import _metrics as M
from ._shared._fallback import FallbackMixin, is_sparse
from .._utils._param_validation import Dtypes, Interval, StrOptions, validate_params
from .neighbors import NearestNeighbors
from .._utils._validation import validate_numeric

__all__ = ["LocalOutlierFactor"]

_FLOATS = [np.float64, np.float32]


def _novelty_only(method: str):
    """The availability check of a method for ``novelty=True`` only
    (scikit-learn's messages)."""
    def check(self):
        if not self.novelty:
            raise AttributeError(_NOT_NOVELTY[method])
        return True
    return check


_NOT_NOVELTY = {
    "predict": (
        "predict is not available when novelty=False, use fit_predict if you want "
        "to predict on training data. Use novelty=True if you want to use LOF for "
        "novelty detection and predict on new unseen data."),
    "decision_function": (
        "decision_function is not available when novelty=False. Use novelty=True "
        "if you want to use LOF for novelty detection and compute "
        "decision_function for new unseen data. Note that the opposite LOF of the "
        "training samples is always available by considering the "
        "negative_outlier_factor_ attribute."),
    "score_samples": (
        "score_samples is not available when novelty=False. The scores of the "
        "training samples are always available through the "
        "negative_outlier_factor_ attribute. Use novelty=True if you want to use "
        "LOF for novelty detection and compute score_samples for new unseen data."),
}


def _check_fit_predict(self):
    if self.novelty:
        raise AttributeError(
            "fit_predict is not available when novelty=True. Use novelty=False if "
            "you want to predict on the training set.")
    return True


class LocalOutlierFactor(FallbackMixin, OutlierMixin, BaseEstimator):
    """Unsupervised outlier detection by the local outlier factor (LOF).

    A drop-in for scikit-learn's ``LocalOutlierFactor``: same parameters,
    attributes, results and errors. The neighbours come from kerneltools'
    :class:`~kerneltools.estimators.NearestNeighbors`; sparse input,
    ``metric='precomputed'``, callables and metrics it does not compute are
    handed to scikit-learn (said at ``verbose``).

    Parameters
    ----------
    n_neighbors : int, default=20
        K; ``n_samples - 1`` when larger than that (with a warning).
    algorithm : {'auto', 'ball_tree', 'kd_tree', 'brute'}, default='auto'
        As in :class:`~kerneltools.estimators.NearestNeighbors` (no tree).
    leaf_size : int, default=30
        Accepted for compatibility, unused.
    metric : str or callable, default='minkowski'
        The distance: the metrics of
        :class:`~kerneltools.estimators.NearestNeighbors` on the engine.
    p : float, default=2
        Power of the Minkowski metric.
    metric_params : dict, default=None
        Extra metric arguments.
    contamination : 'auto' or float in (0, 0.5], default='auto'
        Expected share of outliers: sets ``offset_`` (-1.5 for 'auto', else
        that percentile of the training scores).
    novelty : bool, default=False
        False: outlier detection on the training set (``fit_predict``);
        True: novelty detection on new data (``predict``,
        ``decision_function``, ``score_samples``).
    n_jobs : int, default=None
        Accepted for compatibility.
    backend : {'auto', 'cpu', 'cuda', 'numpy'} or None, default=None
        Where the reductions run; None: the configured backend.
    dtype : {'float32', 'float64'} or None, default=None
        Precision of the neighbour search; None keeps float32 data in
        float32 and computes everything else in float64.
    verbose : int, default=0
        Whether to say when a fit goes to scikit-learn.

    Attributes
    ----------
    negative_outlier_factor_ : ndarray of shape (n_samples,)
        ``-LOF`` of the training points (the lower, the more abnormal).
    n_neighbors_ : int
        The K used.
    offset_ : float
        Threshold on the scores: below it, an outlier.
    effective_metric_ : str or callable
        The metric used.
    effective_metric_params_ : dict
        Its parameters.
    n_features_in_ : int
        Number of features seen during :meth:`fit`.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features, when X had string column names.
    n_samples_fit_ : int
        Number of training points.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.estimators import LocalOutlierFactor
    >>> X = [[-1.1], [0.2], [101.1], [0.3]]
    >>> clf = LocalOutlierFactor(n_neighbors=2)
    >>> clf.fit_predict(X)
    array([ 1,  1, -1,  1])
    >>> clf.negative_outlier_factor_.round(2)
    array([ -0.98,  -1.04, -73.37,  -0.98])
    """

    _sklearn_class = "sklearn.neighbors.LocalOutlierFactor"
    _parameter_constraints: ClassVar[dict] = {
        "n_neighbors": [Interval(Integral, 1, None, closed="left"), None],
        "algorithm": [StrOptions({"auto", "ball_tree", "kd_tree", "brute"})],
        "leaf_size": [Interval(Integral, 1, None, closed="left")],
        "p": [Interval(Real, 0, None, closed="right"), None],
        "metric": [StrOptions(set(M.VALID_METRICS) | {"precomputed"}), callable],
        "metric_params": [dict, None],
        "contamination": [StrOptions({"auto"}), Interval(Real, 0, 0.5, closed="right")],
        "novelty": ["boolean"],
        "n_jobs": [Integral, None],
        "backend": ["backend"],
        "dtype": [Dtypes(("float32", "float64")), None],
        "verbose": ["verbose"],
    }

    def __init__(self, n_neighbors=20, *, algorithm="auto", leaf_size=30,
                 metric="minkowski", p=2, metric_params=None, contamination="auto",
                 novelty=False, n_jobs=None, backend=None, dtype=None, verbose=0):
        self.n_neighbors = n_neighbors
        self.algorithm = algorithm
        self.leaf_size = leaf_size
        self.metric = metric
        self.p = p
        self.metric_params = metric_params
        self.contamination = contamination
        self.novelty = novelty
        self.n_jobs = n_jobs
        self.backend = backend
        self.dtype = dtype
        self.verbose = verbose

    def _engine_refuses(self, X, y=None):
        if is_sparse(X):
            return "sparse X"
        if not isinstance(self.metric, str):
            return "a metric that is not a name"
        if self.metric not in M.VALID_METRICS:
            return f"metric={self.metric!r}"
        if not hasattr(X, "__array__") and not isinstance(X, (list, tuple)):
            return f"X of type {type(X).__name__}"
        return None

    # -- fitting -----------------------------------------------------------------
    def fit(self, X, y=None):
        """Find each training point's K neighbours and its local outlier factor.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training points.
        y : None
            Ignored.

        Returns
        -------
        self : LocalOutlierFactor
            The fitted estimator.
        """
        validate_params(self)
        reason = self._engine_refuses(X)
        if reason:
            return self._fit_fallback(reason, X)
        self._drop_fallback()
        finite = "allow-nan" if self.metric == "nan_euclidean" else True
        X = validate_numeric(self, X, dtype=_FLOATS, order="C", ensure_all_finite=finite)
        n_samples = X.shape[0]
        if self.n_neighbors > n_samples:
            warnings.warn(
                f"n_neighbors ({self.n_neighbors}) is greater than the total number "
                f"of samples ({n_samples}). n_neighbors will be set to (n_samples - 1)"
                " for estimation.")
        self.n_neighbors_ = max(1, min(self.n_neighbors, n_samples - 1))
        self._nn = NearestNeighbors(
            n_neighbors=self.n_neighbors_, algorithm=self.algorithm,
            leaf_size=self.leaf_size, metric=self.metric, p=self.p,
            metric_params=self.metric_params, n_jobs=self.n_jobs,
            backend=self.backend, dtype=self.dtype,
        ).fit(X)
        self.effective_metric_ = self._nn.effective_metric_
        self.effective_metric_params_ = self._nn.effective_metric_params_
        self.n_samples_fit_ = self._nn.n_samples_fit_
        self._fit_X = self._nn._fit_X
        dist, ind = self._nn.kneighbors(None, n_neighbors=self.n_neighbors_)
        self._distances_fit_X_ = dist.astype(X.dtype, copy=False)
        self._lrd = self._local_reachability_density(self._distances_fit_X_, ind)
        self.negative_outlier_factor_ = -np.mean(
            self._lrd[ind] / self._lrd[:, np.newaxis], axis=1)
        if self.contamination == "auto":
            self.offset_ = -1.5
        else:
            self.offset_ = np.percentile(self.negative_outlier_factor_,
                                         100.0 * self.contamination)
        if np.min(self.negative_outlier_factor_) < -1e7 and not self.novelty:
            warnings.warn(
                "Duplicate values are leading to incorrect results. Increase the "
                "number of neighbors for more accurate results.")
        return self

    def _local_reachability_density(self, distances_X, neighbors_indices):
        """``1 / (mean reachability distance + 1e-10)`` of each row."""
        dist_k = self._distances_fit_X_[neighbors_indices, self.n_neighbors_ - 1]
        reach = np.maximum(distances_X, dist_k)
        return 1.0 / (np.mean(reach, axis=1) + 1e-10)

    # -- neighbours (scikit-learn's KNeighborsMixin methods) ---------------------
    def _checked(self, X):
        if X is None:
            return None
        if is_sparse(X):  # scikit-learn's brute force takes a sparse query
            X = X.toarray()
        finite = "allow-nan" if self.metric == "nan_euclidean" else True
        return validate_numeric(self, X, reset=False, dtype=_FLOATS, order="C",
                             ensure_all_finite=finite)

    def kneighbors(self, X=None, n_neighbors=None, return_distance=True):
        """The K nearest training points of each query.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features), default=None
            The queries (None: the training points, each excluding itself).
        n_neighbors : int, default=None
            K; the constructor's ``n_neighbors`` by default.
        return_distance : bool, default=True
            Whether to return the distances too.

        Returns
        -------
        neigh_dist : ndarray of shape (n_queries, n_neighbors)
            The distances, increasing (only if ``return_distance``).
        neigh_ind : ndarray of shape (n_queries, n_neighbors)
            Indices of the neighbours.
        """
        if self._delegating():
            return self.fallback_.kneighbors(X, n_neighbors, return_distance)
        check_is_fitted(self)
        k = self.n_neighbors if n_neighbors is None else n_neighbors
        return self._nn.kneighbors(self._checked(X), k, return_distance)

    def kneighbors_graph(self, X=None, n_neighbors=None, mode="connectivity"):
        """The graph of the K nearest neighbours, a sparse CSR matrix.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features), default=None
            The queries (None: the training points, each excluding itself).
        n_neighbors : int, default=None
            K; the constructor's by default.
        mode : {'connectivity', 'distance'}, default='connectivity'
            Ones, or the distances, as the entries.

        Returns
        -------
        A : sparse matrix of shape (n_queries, n_samples_fit)
            ``A[i, j]``: the edge from query i to training point j.
        """
        if self._delegating():
            return self.fallback_.kneighbors_graph(X, n_neighbors, mode)
        check_is_fitted(self)
        k = self.n_neighbors if n_neighbors is None else n_neighbors
        return self._nn.kneighbors_graph(self._checked(X), k, mode)

    # -- outlier detection ---------------------------------------------------------
    @available_if(_check_fit_predict)
    def fit_predict(self, X, y=None):
        """Fit on X and label its points: 1 inlier, -1 outlier.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training points.
        y : None
            Ignored.

        Returns
        -------
        is_inlier : ndarray of shape (n_samples,)
            1 for inliers, -1 for outliers.
        """
        return self.fit(X)._predict()

    @available_if(_novelty_only("predict"))
    def predict(self, X=None):
        """Label new points by their LOF: 1 inlier, -1 outlier (novelty=True).

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            The points.

        Returns
        -------
        is_inlier : ndarray of shape (n_queries,)
            1 for inliers, -1 for outliers.
        """
        return self._predict(X)

    def _predict(self, X=None):
        if self._delegating():
            return self.fallback_._predict(X)
        check_is_fitted(self)
        if X is None:
            is_inlier = np.ones(self.n_samples_fit_, dtype=int)
            is_inlier[self.negative_outlier_factor_ < self.offset_] = -1
            return is_inlier
        scores = self.decision_function(X)
        is_inlier = np.ones(scores.shape[0], dtype=int)
        is_inlier[scores < 0] = -1
        return is_inlier

    @available_if(_novelty_only("decision_function"))
    def decision_function(self, X):
        """Shifted opposite LOF of new points: negative for outliers (novelty=True).

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            The points.

        Returns
        -------
        shifted_opposite_lof_scores : ndarray of shape (n_queries,)
            ``score_samples(X) - offset_``.
        """
        return self.score_samples(X) - self.offset_

    @available_if(_novelty_only("score_samples"))
    def score_samples(self, X):
        """Opposite LOF of new points, against the training set (novelty=True).

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            The points.

        Returns
        -------
        opposite_lof_scores : ndarray of shape (n_queries,)
            ``-LOF``: the lower, the more abnormal.
        """
        if self._delegating():
            return self.fallback_.score_samples(X)
        check_is_fitted(self)
        X = check_array(X, accept_sparse="csr")
        dist, ind = self.kneighbors(X, n_neighbors=self.n_neighbors_)
        if X.dtype == np.float32:
            dist = dist.astype(X.dtype, copy=False)
        lrd = self._local_reachability_density(dist, ind)
        return -np.mean(self._lrd[ind] / lrd[:, np.newaxis], axis=1)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.pairwise = self.metric == "precomputed"
        tags.input_tags.allow_nan = self.metric == "nan_euclidean"
        return tags
