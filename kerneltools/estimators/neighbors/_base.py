"""What every k-NN estimator of :mod:`.neighbors` shares: fitting, the
hand-over to scikit-learn, where inputs live, query validation and the
search over the fitted points.

:class:`NeighborsBase` fits (or hands the fit to scikit-learn's class of the
same name, :mod:`.._shared._fallback`, for what the engine does not serve:
sparse input, ``metric="precomputed"``, ``DistanceMetric`` objects, callables
of two 1-D arrays, metric names without a formula, trees and scikit-learn
estimators as ``X``), keeps the fitted arrays where the inputs live
(:mod:`._device` says how), and builds the search of a query
(:func:`.search.new_search`, which picks the strategy). The queries
themselves are in :mod:`._queries`.
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
from sklearn.base import is_classifier
from sklearn.neighbors._base import NeighborsBase as _SkNeighborsBase
from sklearn.utils.validation import check_is_fitted

from ...config import get_config
from ..._utils._array_api import (
    Placement,
    check_same_place,
    fitted_placement,
    host_array,
    placement,
    validate_on_device,
)
from ..._utils._param_validation import Dtypes, Interval, StrOptions, validate_params
from ..._utils._validation import validate_numeric
from .._shared._fallback import FallbackMixin, is_sparse
from . import _metrics
from ._device import check_targets, device_serves
from .search import SearchCase, new_search
from .search._pruned import Grid, prunes

__all__ = ["NeighborsBase"]

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


class NeighborsBase(FallbackMixin, MultiOutputMixin, BaseEstimator):
    """Fitting, where the inputs live and the search over the fitted points,
    shared by the estimators."""

    #: Whether the estimator keeps its fitted arrays and returns every output
    #: in the namespace and on the device of its inputs, and searches device
    #: arrays on the device (:mod:`._device`); the others compute on the host.
    _ARRAY_API = False

    _parameter_constraints: ClassVar[dict] = {
        # scikit-learn's (metric: the names we compute, or a LazyTensor callable;
        # the others go to scikit-learn, which checks them)
        "algorithm": [StrOptions({"auto", "ball_tree", "kd_tree", "brute"})],
        "leaf_size": [Interval(Integral, 1, None, closed="left")],
        "p": [Interval(Real, 0, None, closed="right"), None],
        "metric": [StrOptions(_metrics.VALID_METRICS), callable],
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
        if isinstance(metric, str) and metric not in _metrics.VALID_METRICS:
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
        params = dict(self.metric_params or {})
        return _metrics.is_lazy_callable(self.metric, params, probe)

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
                          device_ok=device_serves(self))
        sp = place.space
        # device arrays are validated there; NumPy ones (backend="cuda" too) on
        # the host, their fitted points copied to the device at the first query
        on_device = sp.on_device and place.xp is not None
        if on_device:
            X, y = self._validate_on_device(X, y, place, supervised)
        else:
            X, y = host_array(X), host_array(y)
            self._fit_is_bool = _metrics.is_bool_data(X)
            finite = self._ensure_all_finite()
            if not supervised:
                X = validate_numeric(self, X, dtype=_FLOATS, order="C",
                                     ensure_all_finite=finite)
            else:
                X, y = validate_numeric(self, X, y, multi_output=True,
                                        dtype=_FLOATS, order="C",
                                        ensure_all_finite=finite)
        self._check_algorithm_metric()
        metric, params = _metrics.effective_metric(self.metric, self.p,
                                                   self.metric_params)
        self._check_semimetric(metric, params)
        _metrics.check_metric_params(metric, params, X.shape[1])
        if self.dtype is not None:
            X = (sp.astype(X, np.dtype(self.dtype)) if on_device else
                 np.ascontiguousarray(X, dtype=np.dtype(self.dtype)))
        # where the fit's inputs live (an empty array there), for the queries;
        # X and the targets are kept in the space where they are computed
        self._fit_like = None if place.trivial else place.to_output(
            sp.put(np.zeros(0, sp.np_dtype(X))) if on_device else np.zeros(0, X.dtype))
        self.effective_metric_, self.effective_metric_params_ = metric, params
        # with the defaults that depend on X (seuclidean's V, mahalanobis' VI)
        self._metric_params = _metrics.formula_params(metric, params, X)
        self._fit_X = self._kept(X)
        self._searches = {}  # {(dtype, backends): search}, built at a query
        # scikit-learn's attribute: "block_sparse" where pruning is enabled
        # (:func:`.search._pruned.prunes`; a search of fewer than
        # PRUNE_MIN_PAIRS query x fitted pairs still runs brute force), else
        # "brute" (every pair, in linear memory).
        pruned = prunes(_metrics.make_metric(metric, self._metric_params), X, params,
                        self.algorithm)
        self._fit_method = "block_sparse" if pruned else "brute"
        # (on a device: built from a host copy at the first pruned query)
        self._grid = Grid.fit(X) if pruned and not on_device else None
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
            _metrics.warn_boolean_conversion(self.effective_metric_, self._fit_is_bool)
            return host_array(self._fit_X), True
        _metrics.warn_boolean_conversion(
            self.effective_metric_, self._fit_is_bool, _metrics.is_bool_data(X)
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
        # NumPy, CuPy and Array API arrays (:mod:`._device`); what
        # scikit-learn's estimator serves (precomputed, ...) takes NumPy only
        tags.array_api_support = self._ARRAY_API and not tags.input_tags.pairwise
        return tags

    def __getstate__(self):
        state = super().__getstate__()
        if "_searches" in state:  # rebuilt at the next query (lambdas inside)
            state["_searches"] = {}
        return state

    def _search(self, X, backend="estimator's", place: Placement | None = None):
        """(search, X): the search over the fitted points, X in its dtype.

        ``place``: where queries on a device are computed (None: X is a
        NumPy array). The search (the fitted points in that dtype, their
        norms, their symbolic variable) is kept for the next queries of the
        same dtype, backend and device: a query of a few points pays only
        for its own work.
        """
        backend = self.backend if backend == "estimator's" else backend
        if place is None:
            dtype = self._query_dtype(X.dtype)
            X = np.ascontiguousarray(X, dtype=dtype)
            _metrics.check_query_features(self.effective_metric_, X.shape[1])
            where = ()
        else:
            sp = place.space
            dtype = self._query_dtype(sp.np_dtype(X))
            X, where = sp.astype(X, dtype), (sp.kind, repr(sp.device))
        key = (dtype, backend, get_config()["backend"], *where)
        searches = self._searches  # updated in place: a query leaves __dict__ as it was
        search = searches.get(key)
        if search is None:
            metric = _metrics.make_metric(self.effective_metric_, self._metric_params)
            search = new_search(SearchCase(
                metric=metric, points=self._fit_X, dtype=dtype, backend=backend,
                pruned=self._fit_method == "block_sparse", grid=self._grid,
                place=place))
            searches.clear()
            searches[key] = search
        return search, X

    # -- where the inputs live (:mod:`._device`) ------------------------------
    def _validate_on_device(self, X, y, place: Placement, supervised: bool):
        """``(X, y)`` validated in the device space of ``place`` (y, which
        follows X, moved there): X float32 or float64, y in its dtype."""
        sp, who = place.space, f"{type(self).__name__}.fit"
        self._fit_is_bool = False  # the device's metrics are not boolean ones
        X, _ = validate_on_device(self, place.to_space(X), reset=True, space=sp,
                                  who=who)
        if supervised:
            y = check_targets(place.to_space(y), X.shape[0], sp, who,
                              labels=is_classifier(self))
        if sp.np_dtype(X) not in (np.float32, np.float64):
            X = sp.astype(X, np.float64)
        return X, y

    def _kept(self, a):
        """A fitted array (of the fit's compute space) as it is kept: in the
        namespace and on the device of the fit's inputs (NumPy ones: as is),
        as scikit-learn keeps the fitted arrays of array API inputs."""
        like = self.__dict__.get("_fit_like")
        if not self._ARRAY_API or like is None or isinstance(like, np.ndarray):
            return a
        return self._query_place(None, "fit").to_output(a)

    def _query_place(self, X, method: str) -> Placement:
        """Where the query ``X`` of ``method`` is computed: the fit's place
        (:func:`~._array_api.check_same_place`: X in the fit's namespace and
        on its device, else ValueError)."""
        check_is_fitted(self)
        like = self.__dict__.get("_fit_like")
        who = f"{type(self).__name__}.{method}"
        fitted = (Placement(backend=self.backend) if like is None else
                  fitted_placement(self, "_fit_like", who=who,
                                   device_ok=device_serves(self)))
        if (fitted.xp is None and fitted.space.on_device
                and self.__dict__.get("_fit_method") == "block_sparse"):
            # NumPy in, pruned (cells on the host): no round trip through the device
            fitted = fitted.on_host()
        return fitted if X is None else check_same_place(self, X, fitted, method)

    def _query_dtype(self, dtype) -> np.dtype:
        """The dtype of a search of queries of ``dtype`` (a NumPy dtype)."""
        if self.dtype is not None:
            return np.dtype(self.dtype)
        fit = self._fit_X.dtype  # a NumPy dtype, or a device namespace's
        if not isinstance(fit, np.dtype):
            fit = np.dtype(str(fit).rsplit(".", 1)[-1])
        return np.result_type(dtype, fit)

    # -- supervised fits ------------------------------------------------------
    def _fit_supervised(self, X, y):
        """``fit(X, y)`` of the classifiers and regressors: the points on the
        engine (or the fit handed over), then :meth:`_store_targets`."""
        self.__dict__.pop("_device_copies", None)  # DeviceCopies' (a previous fit's)
        delegated, y = self._fit(X, y)
        if not delegated:
            self._store_targets(y)
        return self

    def _store_targets(self, y) -> None:
        """A regressor's: the targets as validated (kept as the fitted points)."""
        self._y = self._kept(y)
