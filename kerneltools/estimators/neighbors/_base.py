"""What every k-NN estimator of :mod:`.neighbors` shares: fitting, the
hand-over to scikit-learn, query validation and the K-nearest and radius
queries.

:class:`NeighborsBase` fits (or hands the fit to scikit-learn's class of the
same name, :mod:`._fallback`, for what the engine does not serve: sparse
input, ``metric="precomputed"``, ``DistanceMetric`` objects, callables of two
1-D arrays, metric names without a formula, trees and scikit-learn
estimators as ``X``). :class:`KNeighborsQueries` and :class:`RadiusQueries`
hold the queries; they derive from scikit-learn's ``KNeighborsMixin`` and
``RadiusNeighborsMixin`` only so that ``issubclass`` / ``isinstance``
checks against them (scikit-learn's ``kneighbors_graph(estimator)``, its
tests) hold for ours, and override every public method of them.
"""

from __future__ import annotations

import warnings
from numbers import Integral, Real
from typing import ClassVar

import numpy as np
from sklearn.base import BaseEstimator, MultiOutputMixin
from sklearn.metrics import DistanceMetric
from sklearn.neighbors import VALID_METRICS, BallTree, KDTree

# scikit-learn's query mixins are private; they are base classes here for
# the isinstance / issubclass checks that user code and scikit-learn make.
from sklearn.neighbors._base import KNeighborsMixin as _SkKNeighborsMixin
from sklearn.neighbors._base import NeighborsBase as _SkNeighborsBase
from sklearn.neighbors._base import RadiusNeighborsMixin as _SkRadiusMixin
from sklearn.utils.validation import check_is_fitted

from ...config import get_config
from ...dask import rows_method
from .search import _cells as Cl
from . import _device as Dv
from .search import _gemm as G
from . import _metrics as M
from .search import _pruned as P
from .search import _formula as S
from ..._utils._array_api import (
    Placement,
    host_array,
    placement,
    validate_on_device,
)
from .._shared._fallback import FallbackMixin, is_sparse
from ._targets import csr_weights, store_labels, weights_of
from ..._utils._param_validation import Dtypes, Interval, StrOptions, validate_params
from ..._utils._validation import validate_numeric

__all__ = ["KNeighborsQueries", "NeighborsBase", "RadiusQueries", "SupervisedFit",
           "csr_weights", "store_labels", "weights_of"]

_FLOATS = [np.float64, np.float32]

#: The private attributes of a fitted scikit-learn estimator that code reads
#: (scikit-learn's own helpers among them); a delegating estimator reads
#: them from ``fallback_``.
_FALLBACK_PRIVATE = ("_fit_X", "_fit_method", "_tree", "_y", "_n_features_out")
#: What a fit on the engine leaves besides the public attributes.
_ENGINE_STATE = ("_fit_X", "_fit_method", "_grid", "_y", "_metric_params",
                 "_fit_is_bool", "_n_features_out", "_searches", "_fit_like")


def _unwrap(X):
    """A fitted kerneltools estimator as ``X``: its scikit-learn twin when it
    delegated, else its fitted points (scikit-learn reuses an estimator's)."""
    if isinstance(X, NeighborsBase) and hasattr(X, "n_samples_fit_"):
        return X.fallback_ if X._delegating() else X._fit_X
    return X


class NeighborsBase(Dv.DevicePlacement, FallbackMixin, MultiOutputMixin,
                    BaseEstimator):
    """Fitting and the search over the fitted points, shared by the estimators."""

    #: Whether the estimator keeps its fitted arrays and returns every output
    #: in the namespace and on the device of its inputs, and searches device
    #: arrays on the device (:mod:`._neighbors_device`); the others compute
    #: on the host.
    _ARRAY_API = False

    _parameter_constraints: ClassVar[dict] = {
        # scikit-learn's (metric: the names we compute, or a LazyTensor callable;
        # the others go to scikit-learn, which checks them)
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

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if not cls.__name__.startswith("_"):  # the class of the same name
            cls._sklearn_class = f"sklearn.neighbors.{cls.__name__}"

    # -- the one decision: engine or scikit-learn ---------------------------------
    def _engine_refuses(self, X, y=None) -> str | None:
        """Why the engine does not serve ``fit(X)``, or None (types only)."""
        metric = self.metric
        if isinstance(X, (KDTree, BallTree)):
            return f"a {type(X).__name__} as X"
        if isinstance(X, _SkNeighborsBase):
            return f"a fitted scikit-learn {type(X).__name__} as X"
        if isinstance(metric, str) and metric == "precomputed":
            return "metric='precomputed'"
        if isinstance(metric, DistanceMetric):
            return "a DistanceMetric object as metric"
        if isinstance(metric, str) and metric not in M.VALID_METRICS:
            return f"metric={metric!r}"
        if is_sparse(X):
            return "sparse X"
        if callable(metric) and not self._is_lazy_callable(X):
            return "a callable metric of two 1-D arrays"
        return None

    def _is_lazy_callable(self, X) -> bool:
        """Whether the callable metric builds a LazyTensor formula (it raises
        if it does neither that nor take two 1-D arrays)."""
        try:
            probe = np.asarray(host_array(X[:1]), dtype=np.float64)
        except Exception:  # noqa: BLE001 (scikit-learn's fit reports bad X)
            return False
        if probe.ndim != 2 or probe.size == 0:
            return False
        return M.is_lazy_callable(self.metric, dict(self.metric_params or {}), probe)

    def __getattr__(self, name):
        # only for the private attributes of a delegating fit
        fallback = self.__dict__.get("fallback_")
        if fallback is not None and name in _FALLBACK_PRIVATE:
            return getattr(fallback, name)
        raise AttributeError(
            f"{type(self).__name__!r} object has no attribute {name!r}"
        )

    # -- fitting ---------------------------------------------------------------
    def _fit(self, X, y=None):
        """Fit on the engine, or hand the fit to scikit-learn.

        Returns ``(delegated, y)``: y validated when the engine serves it.
        """
        X = _unwrap(X)
        supervised = self.__sklearn_tags__().target_tags.required
        reason = self._engine_refuses(X, y)
        if reason:  # scikit-learn's k-NN takes NumPy only (no array API support)
            for name in _ENGINE_STATE:  # a previous fit's, on the engine
                self.__dict__.pop(name, None)
            X, y = host_array(X), host_array(y)
            self._fit_fallback(reason, *((X, y) if supervised else (X,)))
            return True, None
        self._drop_fallback()
        validate_params(self)
        # where X lives and is computed (the backend checked, as check_backend does)
        place = placement(X, backend=self.backend, who=f"{type(self).__name__}.fit",
                          device_ok=Dv.device_serves(self))
        sp = place.space
        # device arrays are validated there; NumPy ones (backend="cuda" too) on
        # the host, their fitted points copied to the device at the first query
        on_device = sp.on_device and place.xp is not None
        if on_device:
            X, y = self._validate_on_device(X, y, place, supervised)
        else:
            X, y = host_array(X), host_array(y)
            self._fit_is_bool = M.is_bool_data(X)
            finite = self._ensure_all_finite()
            if not supervised:
                X = validate_numeric(self, X, dtype=_FLOATS, order="C",
                                     ensure_all_finite=finite)
            else:
                X, y = validate_numeric(self, X, y, multi_output=True,
                                        dtype=_FLOATS, order="C",
                                        ensure_all_finite=finite)
        self._check_algorithm_metric()
        metric, params = M.effective_metric(self.metric, self.p, self.metric_params)
        self._check_semimetric(metric, params)
        M.check_metric_params(metric, params, X.shape[1])
        if self.dtype is not None:
            X = (sp.astype(X, np.dtype(self.dtype)) if on_device else
                 np.ascontiguousarray(X, dtype=np.dtype(self.dtype)))
        # where the fit's inputs live (an empty array there), for the queries;
        # X and the targets are kept in the space where they are computed
        self._fit_like = None if place.trivial else place.to_output(
            sp.put(np.zeros(0, sp.np_dtype(X))) if on_device else np.zeros(0, X.dtype))
        self.effective_metric_, self.effective_metric_params_ = metric, params
        # with the defaults that depend on X (seuclidean's V, mahalanobis' VI)
        self._metric_params = M.formula_params(metric, params, X)
        self._fit_X = self._kept(X)
        self._searches = {}  # {(dtype, backends): search}, built at a query
        # scikit-learn's attribute: "block_sparse" where pruning is enabled
        # (low dimension, >= PRUNE_MIN_FIT points; a search of fewer than
        # PRUNE_MIN_PAIRS query x fitted pairs still runs brute force), else
        # "brute" (every pair, in linear memory).
        usable = P.PrunedSearch.is_usable_for(
            M.make_metric(metric, self._metric_params), X, params)
        self._fit_method = "block_sparse" if usable and self.algorithm != "brute" else "brute"
        # (on a device: built from a host copy at the first pruned query)
        self._grid = (P.Grid.fit(X) if self._fit_method == "block_sparse"
                      and not on_device else None)
        self.n_samples_fit_ = X.shape[0]
        return False, y

    def _check_algorithm_metric(self) -> None:
        """scikit-learn's errors for a metric its chosen algorithm lacks.

        We search every metric by brute force, but a user who asks for
        ``algorithm='kd_tree'`` with a metric KDTree lacks gets scikit-learn's
        ValueError (and 'auto' accepts the names its ball tree knows).
        """
        metric, algorithm = self.metric, self.algorithm
        if callable(metric):
            if algorithm == "kd_tree":
                raise ValueError(
                    f"kd_tree does not support callable metric '{metric}'"
                    "Function call overhead will resultin very poor performance."
                )
            return
        check = algorithm
        if algorithm == "auto":
            check = "ball_tree" if metric in VALID_METRICS["ball_tree"] else "brute"
        if metric not in VALID_METRICS[check]:
            raise ValueError(
                f"Metric '{metric}' not valid. Use "
                f"sorted(sklearn.neighbors.VALID_METRICS['{check}']) to get valid "
                "options. Metric can also be a callable function."
            )

    def _check_semimetric(self, metric, params) -> None:
        """Minkowski with p < 1 (not a metric): scikit-learn's trees refuse it,
        its brute force warns; a weighted one is refused by its KD tree."""
        if metric != "minkowski":
            return
        tree = self.algorithm in ("kd_tree", "ball_tree")
        if params["p"] < 1:
            if tree:
                raise ValueError(
                    f'algorithm="{self.algorithm}" does not support 0 < p < 1 for the '
                    'Minkowski metric. To resolve this problem either set p >= 1 or '
                    'algorithm="brute".'
                )
            warnings.warn(
                "Mind that for 0 < p < 1, Minkowski metrics are not distance "
                "metrics. Continuing the execution with `algorithm='brute'`.",
                stacklevel=4,
            )
        elif self.algorithm == "kd_tree" and params.get("w") is not None:
            raise ValueError(
                "algorithm='kd_tree' is not valid for metric='minkowski' with a "
                "weight parameter 'w': try algorithm='ball_tree' or "
                "algorithm='brute' instead."
            )

    # -- queries -----------------------------------------------------------------
    def _query(self, X):
        """(queries, is_train): X validated, or the fitted points for X=None."""
        check_is_fitted(self)
        if X is None:
            M.warn_boolean_conversion(self.effective_metric_, self._fit_is_bool)
            return host_array(self._fit_X), True
        M.warn_boolean_conversion(
            self.effective_metric_, self._fit_is_bool, M.is_bool_data(X)
        )
        X = validate_numeric(
            self, X, reset=False, dtype=_FLOATS, order="C", accept_sparse="csr",
            ensure_all_finite=self._ensure_all_finite(),
        )
        if is_sparse(X):  # a sparse query of a dense fit, as scikit-learn's brute
            if self.algorithm in ("kd_tree", "ball_tree"):
                raise ValueError(
                    f"{self.algorithm} does not work with sparse matrices. Densify "
                    "the data, or set algorithm='brute'"
                )
            X = np.ascontiguousarray(X.toarray())
        return X, False

    def _ensure_all_finite(self):
        """NaN is allowed for metric='nan_euclidean' only (scikit-learn's rule)."""
        return "allow-nan" if self.metric == "nan_euclidean" else True

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.pairwise = isinstance(self.metric, str) and (
            self.metric == "precomputed")
        tags.input_tags.positive_only = tags.input_tags.pairwise
        tags.input_tags.allow_nan = self.metric == "nan_euclidean"
        # NumPy, CuPy and Array API arrays (:mod:`._neighbors_device`); what
        # scikit-learn's estimator serves (precomputed, ...) takes NumPy only
        tags.array_api_support = self._ARRAY_API and not tags.input_tags.pairwise
        return tags

    def __getstate__(self):
        state = super().__getstate__()
        if "_searches" in state:  # rebuilt at the next query (lambdas inside)
            state["_searches"] = {}
        return state

    def _search(self, X, backend="estimator's"):
        """(search, X): the search over the fitted points, X in its dtype.

        The search (the fitted points in that dtype, their norms, their
        symbolic variable) is kept for the next queries of the same dtype
        and backend: a query of a few points pays only for its own work.
        """
        dtype = self._query_dtype(X.dtype)
        X = np.ascontiguousarray(X, dtype=dtype)
        M.check_query_features(self.effective_metric_, X.shape[1])
        backend = self.backend if backend == "estimator's" else backend
        key = (dtype, backend, get_config()["backend"])
        searches = self._searches  # updated in place: a query leaves __dict__ as it was
        search = searches.get(key)
        if search is None:
            search = self._new_search(dtype, backend)
            searches.clear()
            searches[key] = search
        return search, X

    def _new_search(self, dtype, backend="estimator's"):
        Y = np.ascontiguousarray(host_array(self._fit_X), dtype=dtype)
        backend = self.backend if backend == "estimator's" else backend
        formula = M.make_metric(self.effective_metric_, self._metric_params)
        if self._fit_method == "block_sparse":  # pruned where it was enabled at fit
            grid = self._grid if self._grid is not None else P.Grid.fit(Y)
            return Cl.CellSearch(formula, Y, backend, grid)
        if G.GemmSearch.is_usable_for(formula, Y, backend):
            return G.GemmSearch(formula, Y, backend)
        expanded = S.ExpandedSearch.is_usable_for(formula, Y)
        search = S.ExpandedSearch if expanded else S.FormulaSearch
        return search(formula, Y, backend)


class SupervisedFit:
    """``fit(X, y)`` of the classifiers and regressors: the points on the
    engine (or the fit handed over), then :meth:`_store_targets`."""

    def fit(self, X, y):
        """Store the training points and their targets.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training points.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Their targets (labels for a classifier).

        Returns
        -------
        self : estimator
            The fitted estimator.
        """
        self.__dict__.pop("_device_copies", None)  # DeviceCopies' (a previous fit's)
        delegated, y = self._fit(X, y)
        if not delegated:
            self._store_targets(y)
        return self

    def _store_targets(self, y) -> None:
        """A regressor's: the targets as validated (kept as the fitted points)."""
        self._y = self._kept(y)


class KNeighborsQueries(_SkKNeighborsMixin):
    """:meth:`kneighbors` and :meth:`kneighbors_graph` on the engine."""

    _parameter_constraints: ClassVar[dict] = {
        **NeighborsBase._parameter_constraints,
        "n_neighbors": [Interval(Integral, 1, None, closed="left"), None],
    }

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
        neigh_dist : array of shape (n_queries, n_neighbors)
            The distances, increasing (only if ``return_distance``); in the
            namespace and on the device of X (of the fit's X for X=None).
        neigh_ind : array of shape (n_queries, n_neighbors)
            Indices of the neighbours in the fitted data; equal distances
            come in index order (as scikit-learn's brute force).
        """
        if self._delegating():
            return self.fallback_.kneighbors(X, n_neighbors, return_distance)
        check_is_fitted(self)
        place = self._query_place(X, "kneighbors")
        dist, ind = self._kneighbors_in(place, X, n_neighbors, return_distance)
        if not return_distance:
            return place.to_output(ind)
        return place.to_output(dist), place.to_output(ind)

    def _kneighbors_in(self, place: Placement, X, n_neighbors, return_distance: bool):
        """(distances or None, indices) of :meth:`kneighbors`, arrays of the
        space where ``place`` computes (NumPy on the host)."""
        n_neighbors = S.check_n_neighbors(n_neighbors, self.n_neighbors)
        sp = place.space
        if not sp.on_device:
            X, is_train = self._query(host_array(X))
        elif X is None:
            X, is_train = place.to_space(self._fit_X), True
        else:
            X, _ = validate_on_device(self, place.to_space(X), reset=False, space=sp)
            is_train = False
        k = n_neighbors + is_train
        if k > self.n_samples_fit_:
            rel = "n_neighbors < n_samples_fit" if is_train else (
                "n_neighbors <= n_samples_fit")
            raise ValueError(
                f"Expected {rel}, but n_neighbors = {n_neighbors}, n_samples_fit = "
                f"{self.n_samples_fit_}, n_samples = {X.shape[0]}"
            )
        if sp.on_device:
            search, X = self._device_search(X, place)
            vals, ind = search.kmin(X, k)
            if is_train:
                vals, ind = Dv.drop_self(vals, ind, sp.xp)
            return (Dv.to_dist(self, vals, sp.xp) if return_distance else None), ind
        search, X = self._search(X, place.backend)
        vals, ind = search.kmin(X, k)
        if is_train:
            vals, ind = S.drop_self(vals, ind)
        return (S.own_distances(search.metric, vals) if return_distance else None), ind

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
            ``A[i, j]``: the edge from query i to fitted point j; each row's
            entries in increasing distance (explicit zeros kept).
        """
        if self._delegating():
            return self.fallback_.kneighbors_graph(X, n_neighbors, mode)
        check_is_fitted(self)
        S.check_mode(mode)
        k = S.check_n_neighbors(n_neighbors, self.n_neighbors)
        place = self._query_place(X, "kneighbors_graph")  # a SciPy matrix: on the host
        dist, ind = self._kneighbors_in(place, X, k, mode == "distance")
        ind = place.space.host(ind)
        data = np.ones(ind.size) if dist is None else place.space.host(dist).ravel()
        indptr = np.arange(0, ind.size + 1, k)
        return S.csr(data, ind.ravel(), indptr, (ind.shape[0], self.n_samples_fit_))


class RadiusQueries(_SkRadiusMixin):
    """:meth:`radius_neighbors` and :meth:`radius_neighbors_graph` on the engine."""

    _parameter_constraints: ClassVar[dict] = {
        **NeighborsBase._parameter_constraints,
        "radius": [Interval(Real, 0, None, closed="both"), None],
    }

    def radius_neighbors(
        self, X=None, radius=None, return_distance=True, sort_results=False
    ):
        """The fitted points within ``radius`` of each query.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features), default=None
            The queries (None: the fitted points, each excluding itself).
        radius : float or array-like of shape (n_queries,), default=None
            The radius (distance <= radius), one for all queries or one per
            query; the constructor's by default.
        return_distance : bool, default=True
            Whether to return the distances too.
        sort_results : bool, default=False
            True: each query's neighbours by increasing distance (equal
            distances in index order); False: in index order. True needs
            ``return_distance=True``.

        Returns
        -------
        neigh_dist : ndarray of shape (n_queries,) of arrays
            Distances of each query's neighbours (only if ``return_distance``).
        neigh_ind : ndarray of shape (n_queries,) of arrays
            Their indices in the fitted data.
        """
        if self._delegating():
            return self.fallback_.radius_neighbors(X, radius, return_distance,
                                                   sort_results)
        check_is_fitted(self)
        if sort_results and not return_distance:
            raise ValueError("return_distance must be True if sort_results is True.")
        place = self._query_place(X, "radius_neighbors")
        dist, ind, indptr = self._radius_csr(host_array(X), host_array(radius),
                                             sort_results, place.backend)
        split = S.split_rows if place.trivial else (
            lambda a, ptr: Dv.split_rows(_host_to_output(place, a), ptr))
        ind_out = split(ind, indptr)
        if not return_distance:
            return ind_out
        return split(dist, indptr), ind_out

    def _radius_csr(self, X, radius, sort_results: bool, backend="estimator's"):
        """(distances, indices, indptr) of the neighbours within ``radius``,
        CSR rows by increasing distance (``sort_results``) or by index."""
        X, is_train = self._query(X)
        radius = self.radius if radius is None else radius
        search, X = self._search(X, backend)
        threshold = _thresholds(search.metric, radius, X.shape[0])
        vals, ind, indptr = S.radius_search(
            search, X, threshold, self.n_samples_fit_, exclude_self=is_train,
            by_index=not sort_results)  # scikit-learn's brute force: index order
        return search.metric.to_dist(vals), ind, indptr

    def radius_neighbors_graph(
        self, X=None, radius=None, mode="connectivity", sort_results=False
    ):
        """The graph of the neighbours within ``radius``, a sparse CSR matrix.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features), default=None
            The queries (None: the fitted points, excluding themselves).
        radius : float or array-like of shape (n_queries,), default=None
            The radius; the constructor's by default.
        mode : {'connectivity', 'distance'}, default='connectivity'
            Ones, or the distances, as the entries.
        sort_results : bool, default=False
            With ``mode='distance'``: each row's entries by increasing
            distance (else in index order).

        Returns
        -------
        A : sparse matrix of shape (n_queries, n_samples_fit)
            ``A[i, j]``: the edge from query i to fitted point j.
        """
        if self._delegating():
            return self.fallback_.radius_neighbors_graph(X, radius, mode, sort_results)
        check_is_fitted(self)
        S.check_mode(mode)
        place = self._query_place(X, "radius_neighbors_graph")  # SciPy's: on the host
        dist, ind, indptr = self._radius_csr(host_array(X), host_array(radius),
                                             sort_results and mode == "distance",
                                             place.backend)
        data = dist if mode == "distance" else np.ones(len(ind))
        return S.csr(data, ind, indptr, (len(indptr) - 1, self.n_samples_fit_))


def _host_to_output(place: Placement, a: np.ndarray):
    """A host result in the namespace and on the device of ``place``'s input."""
    return place.to_output(place.space.put(a) if place.space.on_device else a)


def _thresholds(metric, radius, n_queries: int):
    """The rdist threshold(s) of a radius: a float, or one per query."""
    if np.ndim(radius) == 0:
        if not Interval(Real, 0, None, closed="both").is_satisfied_by(radius):
            raise ValueError(f"radius must be a float >= 0; got {radius!r}")
        return metric.to_rdist(float(radius))
    r = np.asarray(radius, dtype=np.float64)
    if r.shape != (n_queries,) or not np.all(r >= 0):
        raise ValueError(
            "radius must be a float >= 0 or an array of one such per query "
            f"({n_queries}); got an array of shape {r.shape}"
        )
    return np.array([metric.to_rdist(float(v)) for v in r])
