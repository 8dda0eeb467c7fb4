"""k-nearest neighbours: scikit-learn's estimators on K-min reductions.

:class:`NearestNeighbors`, :class:`KNeighborsClassifier` and
:class:`KNeighborsRegressor` take scikit-learn's constructor arguments and
methods, so that swapping the import keeps user code working. The search is
always brute force, but in linear memory: each query's K nearest points come
from a ``Kmin_argKmin`` reduction of the metric's formula over the fitted
points (metrics in :mod:`._neighbors_metrics`, searches in
:mod:`._neighbors_search`), queries taken in blocks; in low dimension a
pruned search visits only the nearby cells (:mod:`._neighbors_pruned`).

Beyond scikit-learn: ``metric`` may be a callable that builds a formula from
LazyTensors ``(x_i, y_j)`` (a custom metric at full speed); ``backend``
chooses where the reductions run and ``dtype`` the precision.
"""

from __future__ import annotations

import warnings
from numbers import Integral, Real
from typing import ClassVar

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassifierMixin,
    MultiOutputMixin,
    RegressorMixin,
)
from sklearn.exceptions import DataConversionWarning
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ..config import check_backend
from ..dask import rows_method
from . import _neighbors_metrics as M
from . import _neighbors_pruned as P
from . import _neighbors_search as S
from ._param_validation import Dtypes, Interval, StrOptions, validate_params

__all__ = ["KNeighborsClassifier", "KNeighborsRegressor", "NearestNeighbors"]

_FLOATS = [np.float64, np.float32]

_COMMON_DOC = """
    algorithm : {'auto', 'ball_tree', 'kd_tree', 'brute'}, default='auto'
        'brute' compares every pair, in linear memory. Otherwise, for the
        Euclidean metrics in at most 3 features and at least 1,000 fitted
        points, pruning is enabled (``_fit_method == 'block_sparse'``): a
        K-nearest search of at least 2^24 query x fitted pairs cuts the
        points into cells along a Z-order curve and visits only the cells
        that can hold a neighbour (one block-sparse reduction, exact; smaller
        searches run brute force); elsewhere every search is brute force
        (``_fit_method == 'brute'``).
    leaf_size : int, default=30
        Accepted for compatibility, unused (there is no tree).
    metric : str or callable, default='minkowski'
        'euclidean' ('l2'), 'sqeuclidean', 'manhattan' ('cityblock', 'l1'),
        'chebyshev' ('infinity'), 'minkowski' (with ``p``; p = 1, 2, inf
        become manhattan, euclidean, chebyshev as in scikit-learn), 'cosine',
        'correlation', 'braycurtis', 'canberra', 'seuclidean', 'mahalanobis',
        'haversine' (2 features: latitude, longitude in radians),
        'nan_euclidean' (the only one that accepts NaN in X), 'hamming', and
        the boolean metrics 'jaccard', 'dice', 'rogerstanimoto',
        'russellrao', 'sokalsneath', 'yule' (data converted to bool, nonzero
        True, with scikit-learn's DataConversionWarning). Each is a formula
        reduced by the engine; their definitions and 0/0 conventions, those of
        scikit-learn's brute force, are in ``_neighbors_metrics``. A callable
        is first called with LazyTensors ``(x_i, y_j,
        **metric_params)``: if it returns a scalar LazyTensor formula, that
        formula is the distance, reduced at full speed. Otherwise it is taken
        as scikit-learn's convention, a function of two 1-D arrays returning
        a float, called pair by pair (slow, as in scikit-learn).
    p : float, default=2
        Power of the Minkowski metric.
    metric_params : dict, default=None
        Extra metric arguments: ``p`` and ``w`` (per-feature weights) for
        'minkowski'; ``V`` (per-feature variances; default: those of the
        fitted X, ddof=1) for 'seuclidean'; ``VI`` (inverse covariance) or
        ``V`` (covariance) for 'mahalanobis' (default: from the covariance of
        the fitted X, as scikit-learn's ``kneighbors()``); keyword arguments
        of a callable metric.
    n_jobs : int, default=None
        Accepted for compatibility; the reductions use every OpenMP thread.
    backend : {'auto', 'cpu', 'cuda', 'numpy'} or None, default=None
        Where the reductions run; None: the configured backend
        (:func:`kerneltools.config_context`, else ``KERNELTOOLS_BACKEND``,
        else 'auto', the fastest available). ``fit`` raises
        :class:`~kerneltools.exceptions.BackendUnavailableError` for one that
        cannot run here.
    dtype : {'float32', 'float64'} or None, default=None
        Precision of the computation; None keeps float32 data in float32
        and computes everything else in float64.
"""
_ATTRIBUTES_DOC = """
    effective_metric_ : str or callable
        The metric used (minkowski with p = 1, 2, inf renamed).
    effective_metric_params_ : dict
        Its parameters.
    n_features_in_ : int
        Number of features seen during :meth:`fit`.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features, when X had string column names.
    n_samples_fit_ : int
        Number of fitted points.
"""


def _weights(dist, weights):
    """Neighbour weights from distances (scikit-learn's ``weights`` rules)."""
    if weights is None or (isinstance(weights, str) and weights == "uniform"):
        return None
    if isinstance(weights, str):  # "distance": 1/d; exact matches take it all
        with np.errstate(divide="ignore"):
            w = 1.0 / dist
        inf_mask = np.isinf(w)
        inf_row = inf_mask.any(axis=1)
        w[inf_row] = inf_mask[inf_row]
        return w
    return weights(dist)


class _NeighborsBase(MultiOutputMixin, BaseEstimator):
    """Fitting, queries and K-nearest searches shared by the estimators."""

    _parameter_constraints: ClassVar[dict] = {
        # scikit-learn's (metric: the names we compute, or a callable)
        "n_neighbors": [Interval(Integral, 1, None, closed="left"), None],
        "algorithm": [StrOptions({"auto", "ball_tree", "kd_tree", "brute"})],
        "leaf_size": [Interval(Integral, 1, None, closed="left")],
        "p": [Interval(Real, 0, None, closed="right"), None],
        "metric": [StrOptions(M.VALID_METRICS), callable],
        "metric_params": [dict, None],
        "n_jobs": [Integral, None],
        # ours
        "backend": ["backend"],
        "dtype": [Dtypes(("float32", "float64")), None],
    }

    # -- fitting ---------------------------------------------------------------
    def _fit(self, X, y=None):
        validate_params(self)
        check_backend(self.backend, type(self).__name__)
        self._fit_is_bool = M.is_bool_data(X)
        finite = self._ensure_all_finite()
        if y is None and not self.__sklearn_tags__().target_tags.required:
            X = validate_data(
                self, X, dtype=_FLOATS, order="C", ensure_all_finite=finite
            )
        else:
            X, y = validate_data(
                self, X, y, multi_output=True, dtype=_FLOATS, order="C",
                ensure_all_finite=finite,
            )
        metric, params = M.effective_metric(self.metric, self.p, self.metric_params)
        M.check_metric_params(metric, params, X.shape[1])
        if self.dtype is not None:
            X = np.ascontiguousarray(X, dtype=np.dtype(self.dtype))
        self._lazy_metric = not callable(metric) or M.is_lazy_callable(
            metric, params, X
        )
        self.effective_metric_, self.effective_metric_params_ = metric, params
        # with the defaults that depend on X (seuclidean's V, mahalanobis' VI)
        self._metric_params = M.formula_params(metric, params, X)
        self._fit_X = X
        # scikit-learn's attribute: "block_sparse" where pruning is enabled
        # (low dimension, >= PRUNE_MIN_FIT points; a search of fewer than
        # PRUNE_MIN_PAIRS query x fitted pairs still runs brute force), else
        # "brute" (every pair, in linear memory).
        usable = self._lazy_metric and P.PrunedSearch.is_usable_for(
            M.make_metric(metric, self._metric_params), X, params)
        self._fit_method = "block_sparse" if usable and self.algorithm != "brute" else "brute"
        self._grid = P.Grid.fit(X) if self._fit_method == "block_sparse" else None
        self.n_samples_fit_ = X.shape[0]
        return y

    # -- queries -----------------------------------------------------------------
    def _query(self, X):
        """(queries, is_train): X validated, or the fitted points for X=None."""
        check_is_fitted(self)
        if X is None:
            M.warn_boolean_conversion(self.effective_metric_, self._fit_is_bool)
            return self._fit_X, True
        M.warn_boolean_conversion(
            self.effective_metric_, self._fit_is_bool, M.is_bool_data(X)
        )
        X = validate_data(
            self, X, reset=False, dtype=_FLOATS, order="C",
            ensure_all_finite=self._ensure_all_finite(),
        )
        return X, False

    def _ensure_all_finite(self):
        """NaN is allowed for metric='nan_euclidean' only (scikit-learn's rule)."""
        return "allow-nan" if self.metric == "nan_euclidean" else True

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = self.metric == "nan_euclidean"
        return tags

    def _search(self, X):
        """(search, X): the search over the fitted points, X in its dtype."""
        if self.dtype is not None:
            dtype = np.dtype(self.dtype)
        else:
            dtype = np.result_type(X.dtype, self._fit_X.dtype)
        X = np.ascontiguousarray(X, dtype=dtype)
        Y = np.ascontiguousarray(self._fit_X, dtype=dtype)
        metric, params = self.effective_metric_, self._metric_params
        if not self._lazy_metric:
            return S.DenseSearch(metric, params, Y), X
        backend = self.backend
        formula = M.make_metric(metric, params)
        if self._fit_method == "block_sparse":  # pruned where it was enabled at fit
            return P.PrunedSearch(formula, Y, backend, self._grid), X
        expanded = S.ExpandedSearch.is_usable_for(formula, Y)
        search = S.ExpandedSearch if expanded else S.FormulaSearch
        return search(formula, Y, backend), X

    @rows_method
    def kneighbors(self, X=None, n_neighbors=None, return_distance=True):
        """The K nearest fitted points of each query.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features), default=None
            The queries. None: the fitted points, each excluded from its own
            neighbours (a duplicate of it is not excluded).
        n_neighbors : int, default=None
            K; the constructor's ``n_neighbors`` by default.
        return_distance : bool, default=True
            Whether to return the distances too.

        Returns
        -------
        neigh_dist : ndarray of shape (n_queries, n_neighbors)
            The distances, increasing (only if ``return_distance``).
        neigh_ind : ndarray of shape (n_queries, n_neighbors)
            Indices of the neighbours in the fitted data; equal distances
            come in index order.
        """
        n_neighbors = S.check_n_neighbors(n_neighbors, self.n_neighbors)
        X, is_train = self._query(X)
        k = n_neighbors + is_train
        if k > self.n_samples_fit_:
            rel = (
                "n_neighbors < n_samples_fit"
                if is_train
                else "n_neighbors <= n_samples_fit"
            )
            raise ValueError(
                f"Expected {rel}, but n_neighbors = {n_neighbors}, n_samples_fit = "
                f"{self.n_samples_fit_}, n_samples = {X.shape[0]}"
            )
        search, X = self._search(X)
        vals, ind = search.kmin(X, k)
        if is_train:
            vals, ind = S.drop_self(vals, ind)
        return (search.metric.to_dist(vals), ind) if return_distance else ind

    def kneighbors_graph(self, X=None, n_neighbors=None, mode="connectivity"):
        """The graph of the K nearest neighbours, a sparse CSR matrix.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features), default=None
            The queries (None: the fitted points, excluding themselves).
        n_neighbors : int, default=None
            K; the constructor's by default.
        mode : {'connectivity', 'distance'}, default='connectivity'
            Ones, or the distances, as the entries.

        Returns
        -------
        A : sparse matrix of shape (n_queries, n_samples_fit)
            ``A[i, j]``: the edge from query i to fitted point j.
        """
        S.check_mode(mode)
        k = S.check_n_neighbors(n_neighbors, self.n_neighbors)
        out = self.kneighbors(X, k, return_distance=mode == "distance")
        dist, ind = out if mode == "distance" else (None, out)
        data = np.ones(ind.size) if dist is None else dist.ravel()
        indptr = np.arange(0, ind.size + 1, k)
        return S.csr(data, ind.ravel(), indptr, (ind.shape[0], self.n_samples_fit_))


class NearestNeighbors(_NeighborsBase):
    __doc__ = (
        """Unsupervised nearest neighbours: K nearest and radius searches.

    Parameters
    ----------
    n_neighbors : int, default=5
        Number of neighbours of :meth:`kneighbors` by default.
    radius : float, default=1.0
        Radius of :meth:`radius_neighbors` by default."""
        + _COMMON_DOC
        + """
    Attributes
    ----------"""
        + _ATTRIBUTES_DOC
        + """
    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.estimators.neighbors import NearestNeighbors
    >>> X = np.array([[0.0, 0.0], [0.0, 1.0], [3.0, 0.0], [3.0, 1.5]])
    >>> nn = NearestNeighbors(n_neighbors=2).fit(X)
    >>> dist, ind = nn.kneighbors([[0.1, 0.2]])
    >>> ind
    array([[0, 1]])
    >>> [i.tolist() for i in nn.radius_neighbors([[3.0, 0.5]], radius=1.2)[1]]
    [[2, 3]]
    """
    )

    _parameter_constraints: ClassVar[dict] = {
        **_NeighborsBase._parameter_constraints,
        "radius": [Interval(Real, 0, None, closed="both"), None],
    }

    def __init__(
        self,
        *,
        n_neighbors=5,
        radius=1.0,
        algorithm="auto",
        leaf_size=30,
        metric="minkowski",
        p=2,
        metric_params=None,
        n_jobs=None,
        backend=None,
        dtype=None,
    ):
        self.n_neighbors = n_neighbors
        self.radius = radius
        self.algorithm = algorithm
        self.leaf_size = leaf_size
        self.metric = metric
        self.p = p
        self.metric_params = metric_params
        self.n_jobs = n_jobs
        self.backend = backend
        self.dtype = dtype

    def fit(self, X, y=None):
        """Store the points to search.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The points.
        y : None
            Ignored.

        Returns
        -------
        self : NearestNeighbors
            The fitted estimator.
        """
        self._fit(X)
        return self

    def radius_neighbors(
        self, X=None, radius=None, return_distance=True, sort_results=False
    ):
        """The fitted points within ``radius`` of each query.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features), default=None
            The queries (None: the fitted points, excluding themselves).
        radius : float, default=None
            The radius (distance <= radius); the constructor's by default.
        return_distance : bool, default=True
            Whether to return the distances too.
        sort_results : bool, default=False
            Accepted for compatibility: results are always sorted by
            increasing distance. True needs ``return_distance=True``.

        Returns
        -------
        neigh_dist : ndarray of shape (n_queries,) of arrays
            Distances of each query's neighbours (only if ``return_distance``).
        neigh_ind : ndarray of shape (n_queries,) of arrays
            Their indices in the fitted data.
        """
        if sort_results and not return_distance:
            raise ValueError("return_distance must be True if sort_results is True.")
        X, is_train = self._query(X)
        radius = self.radius if radius is None else radius
        if not Interval(Real, 0, None, closed="both").is_satisfied_by(radius):
            raise ValueError(f"radius must be a float >= 0; got {radius!r}")
        search, X = self._search(X)
        metric = search.metric
        threshold = metric.to_rdist(float(radius))
        vals, ind = S.radius_search(search, X, threshold, self.n_samples_fit_)
        if is_train:
            for r in range(len(ind)):
                keep = ind[r] != r
                vals[r], ind[r] = vals[r][keep], ind[r][keep]
        ind_out = S.object_array(ind)
        if not return_distance:
            return ind_out
        return S.object_array([metric.to_dist(v) for v in vals]), ind_out

    def radius_neighbors_graph(
        self, X=None, radius=None, mode="connectivity", sort_results=False
    ):
        """The graph of the neighbours within ``radius``, a sparse CSR matrix.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features), default=None
            The queries (None: the fitted points, excluding themselves).
        radius : float, default=None
            The radius; the constructor's by default.
        mode : {'connectivity', 'distance'}, default='connectivity'
            Ones, or the distances, as the entries.
        sort_results : bool, default=False
            Accepted for compatibility (entries are always sorted by distance).

        Returns
        -------
        A : sparse matrix of shape (n_queries, n_samples_fit)
            ``A[i, j]``: the edge from query i to fitted point j.
        """
        S.check_mode(mode)
        if mode == "distance":
            dist, ind = self.radius_neighbors(X, radius, return_distance=True)
            data = np.concatenate(list(dist))
        else:
            ind = self.radius_neighbors(X, radius, return_distance=False)
        indices = np.concatenate(list(ind)).astype(np.int64)
        if mode == "connectivity":
            data = np.ones(len(indices))
        counts = np.fromiter((len(a) for a in ind), dtype=np.int64, count=len(ind))
        indptr = np.concatenate(([0], np.cumsum(counts)))
        return S.csr(data, indices, indptr, (len(ind), self.n_samples_fit_))


class _SupervisedNeighbors(_NeighborsBase):
    _parameter_constraints: ClassVar[dict] = {
        **_NeighborsBase._parameter_constraints,
        "weights": [StrOptions({"uniform", "distance"}), callable, None],
    }

    def __init__(
        self,
        n_neighbors=5,
        *,
        weights="uniform",
        algorithm="auto",
        leaf_size=30,
        p=2,
        metric="minkowski",
        metric_params=None,
        n_jobs=None,
        backend=None,
        dtype=None,
    ):
        self.n_neighbors = n_neighbors
        self.weights = weights
        self.algorithm = algorithm
        self.leaf_size = leaf_size
        self.p = p
        self.metric = metric
        self.metric_params = metric_params
        self.n_jobs = n_jobs
        self.backend = backend
        self.dtype = dtype

    def _neighbors_and_weights(self, X):
        """(neighbour indices, weights or None) of each query."""
        if self.weights in (None, "uniform"):
            return self.kneighbors(X, return_distance=False), None
        dist, ind = self.kneighbors(X)
        w = _weights(dist, self.weights)
        if w is not None and np.any(np.all(w == 0, axis=1)):
            raise ValueError(
                "All neighbors of some sample is getting zero weights. Please modify "
                "'weights' to avoid this case if you are using a user-defined function."
            )
        return ind, w


_SUPERVISED_DOC = """
    Parameters
    ----------
    n_neighbors : int, default=5
        Number of neighbours that vote.
    weights : {'uniform', 'distance'}, callable or None, default='uniform'
        'uniform' (or None): equal votes; 'distance': votes weighted by
        1 / distance (a query that matches fitted points exactly takes the
        votes of those points only); a callable maps the (n_queries, K)
        distances to weights of the same shape."""


class KNeighborsClassifier(ClassifierMixin, _SupervisedNeighbors):
    __doc__ = (
        """Classifier voting among the K nearest neighbours."""
        + _SUPERVISED_DOC
        + _COMMON_DOC
        + """
    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,) or list of such arrays
        The class labels (one array per output for multi-output y).
    outputs_2d_ : bool
        Whether y was 2-D (several outputs) at fit."""
        + _ATTRIBUTES_DOC
        + """
    Examples
    --------
    >>> from kerneltools.estimators.neighbors import KNeighborsClassifier
    >>> X, y = [[0.0], [1.0], [2.0], [3.0]], [0, 0, 1, 1]
    >>> clf = KNeighborsClassifier(n_neighbors=3).fit(X, y)
    >>> clf.predict([[1.1]])
    array([0])
    >>> clf.predict_proba([[0.9]]).round(3)
    array([[0.667, 0.333]])
    """
    )

    def fit(self, X, y):
        """Store the training points and their labels.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training points.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Their labels.

        Returns
        -------
        self : KNeighborsClassifier
            The fitted estimator.
        """
        y = np.asarray(self._fit(X, y))
        if y.ndim == 2 and y.shape[1] == 1:
            warnings.warn(
                "A column-vector y was passed when a 1d array was expected. Please "
                "change the shape of y to (n_samples,), for example using ravel().",
                DataConversionWarning,
                stacklevel=2,
            )
        self.outputs_2d_ = y.ndim == 2 and y.shape[1] != 1
        y2 = y.reshape(len(y), -1)
        check_classification_targets(y2)
        pairs = [np.unique(y2[:, k], return_inverse=True) for k in range(y2.shape[1])]
        self.classes_ = [c for c, _ in pairs]
        self._y = np.stack([inv.ravel() for _, inv in pairs], axis=1).astype(np.intp)
        if not self.outputs_2d_:
            self.classes_, self._y = self.classes_[0], self._y[:, 0]
        return self

    @rows_method
    def predict_proba(self, X):
        """Class probabilities: the neighbours' (weighted) votes, normalised.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features) or None
            The queries (None: the fitted points, each excluded from its own
            neighbours).

        Returns
        -------
        p : ndarray of shape (n_queries, n_classes), or a list of such arrays
            (one per output); classes in the order of ``classes_``.
        """
        ind, w = self._neighbors_and_weights(X)
        w = np.ones(ind.shape) if w is None else w
        labels = self._y.reshape(len(self._y), -1)[ind]  # (n, K, n_outputs)
        classes = self.classes_ if self.outputs_2d_ else [self.classes_]
        out = [_votes(labels[..., k], w, len(c)) for k, c in enumerate(classes)]
        return out if self.outputs_2d_ else out[0]

    @rows_method
    def predict(self, X):
        """The class with the most (weighted) votes among the K neighbours.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features) or None
            The queries (None: the fitted points, each excluded from its own
            neighbours).

        Returns
        -------
        y : ndarray of shape (n_queries,) or (n_queries, n_outputs)
            Predicted labels; ties go to the first class of ``classes_``.
        """
        proba = self.predict_proba(X)
        if not self.outputs_2d_:
            return self.classes_[np.argmax(proba, axis=1)]
        return np.stack(
            [c[np.argmax(p, axis=1)] for c, p in zip(self.classes_, proba)], axis=1
        )

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_label = True
        return tags


def _votes(labels, weights, n_classes):
    """Per-query sums of the weights of each class, normalised: (n, n_classes)."""
    n = labels.shape[0]
    flat = (np.arange(n)[:, None] * n_classes + labels).ravel()
    votes = np.bincount(flat, weights=np.ravel(weights), minlength=n * n_classes)
    votes = votes.reshape(n, n_classes)
    return votes / votes.sum(axis=1, keepdims=True)


class KNeighborsRegressor(RegressorMixin, _SupervisedNeighbors):
    __doc__ = (
        """Regression by the (weighted) mean of the K nearest neighbours' targets."""
        + _SUPERVISED_DOC
        + _COMMON_DOC
        + """
    Attributes
    ----------"""
        + _ATTRIBUTES_DOC
        + """
    Examples
    --------
    >>> from kerneltools.estimators.neighbors import KNeighborsRegressor
    >>> X, y = [[0.0], [1.0], [2.0], [3.0]], [0.0, 0.0, 1.0, 1.0]
    >>> reg = KNeighborsRegressor(n_neighbors=2).fit(X, y)
    >>> reg.predict([[1.5]])
    array([0.5])
    """
    )

    def fit(self, X, y):
        """Store the training points and their targets.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training points.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Their targets.

        Returns
        -------
        self : KNeighborsRegressor
            The fitted estimator.
        """
        self._y = self._fit(X, y)
        return self

    @rows_method
    def predict(self, X):
        """The (weighted) mean target of the K nearest neighbours.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features) or None
            The queries (None: the fitted points, each excluded from its own
            neighbours).

        Returns
        -------
        y : ndarray of shape (n_queries,) or (n_queries, n_outputs)
            Predicted targets.
        """
        ind, w = self._neighbors_and_weights(X)
        y = self._y.reshape(len(self._y), -1)
        if w is None:
            pred = np.mean(y[ind], axis=1)
        else:
            w = np.asarray(w, dtype=np.float64)
            pred = np.einsum("nk,nko->no", w, y[ind]) / w.sum(axis=1)[:, None]
        return pred.ravel() if self._y.ndim == 1 else pred
