"""Metrics as formulas, for the k-NN estimators of :mod:`.neighbors`.

A metric is reduced in its *reduced distance* form (``rdist``): a formula
that orders the points as the distance does and is cheaper to compute, such
as the squared distance for ``euclidean``; the searches
(:mod:`.search._formula`, :mod:`.search._pruned`) keep the K smallest
``rdist`` of each query and convert only those to distances. A metric may
first ``prepare`` the points (once for the fitted ones, per block for the
queries): scaled, centred, bits and their counts, values and masks, so that
the formula per pair stays short. This module also resolves the metric's
name and parameters as scikit-learn does (:func:`effective_metric`), checks
them (:func:`check_metric_params`), fills the defaults that depend on the
fitted points (:func:`formula_params`), and tells a callable that builds a
formula from one of two 1-D arrays (:func:`is_lazy_callable`).

Every metric of scikit-learn's brute force is a formula here, with its
conventions in degenerate cases (checked against scikit-learn and scipy in
tests/estimators/neighbors/test_metrics.py):

- ``braycurtis`` ``sum|x-y| / (sum|x| + sum|y|)``, 0 for two zero rows;
  ``canberra`` ``sum |x-y| / (|x|+|y|)``, a 0/0 term counting 0: scikit-learn's
  ``DistanceMetric``, which its brute force uses for them (scipy's braycurtis
  divides by ``sum|x+y|`` instead: the same on non-negative data).
- ``correlation``: 1 - the cosine of the centred rows; NaN for a constant
  row (scipy's 0/0).
- ``seuclidean``: ``sqrt(sum (x-y)^2 / V)``; ``mahalanobis``:
  ``sqrt((x-y)^T VI (x-y))``. Without ``V`` (``VI``), the ones scikit-learn's
  ``pairwise_distances`` derives when the queries are the fitted points X:
  ``V = var(X, ddof=1)``, ``VI = inv(cov(X.T)).T``.
- ``haversine`` on (latitude, longitude) in radians: ``2 arcsin(sqrt(
  sin^2(dlat/2) + cos(lat1) cos(lat2) sin^2(dlon/2)))``.
- ``nan_euclidean``: ``sqrt(D / n * sum over the n coordinates present in
  both)``; NaN where no coordinate is present in both.
- ``hamming``: the fraction of coordinates that differ (any values).
- the boolean metrics, on nonzero = True as scikit-learn converts: with
  ``ntt`` the coordinates true in both, ``ndiff`` those that differ, ``nff``
  those false in both, ``D`` features: ``jaccard`` ``ndiff / (ntt + ndiff)``
  (0 for two all-false rows), ``dice`` ``ndiff / (2 ntt + ndiff)`` (NaN for
  two all-false rows), ``rogerstanimoto`` ``2 ndiff / (D + ndiff)``,
  ``russellrao`` ``(D - ntt) / D``, ``sokalsneath`` ``2 ndiff / (ntt + 2
  ndiff)`` (NaN for two all-false rows), ``yule`` ``2 ntf nft / (ntt nff +
  ntf nft)``, 0 where ``ntf nft = 0`` (scipy's conventions).
"""

from __future__ import annotations

import numbers
import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np
from sklearn.exceptions import DataConversionWarning

from ...lazy import LazyTensor, Pm, Vi, Vj, maximum

from ..._utils._param_validation import Interval

#: The metrics of two boolean vectors: scikit-learn converts data to bool
#: (nonzero is True) for them, with a DataConversionWarning.
BOOLEAN_METRICS = ("dice", "jaccard", "rogerstanimoto", "russellrao",
                   "sokalsneath", "yule")
_OWN_NAME = ("braycurtis", "canberra", "correlation", "hamming", "haversine",
             "mahalanobis", "nan_euclidean", "seuclidean", *BOOLEAN_METRICS)
_CANONICAL = {
    "euclidean": "euclidean",
    "l2": "euclidean",
    "sqeuclidean": "sqeuclidean",
    "manhattan": "manhattan",
    "cityblock": "manhattan",
    "l1": "manhattan",
    "chebyshev": "chebyshev",
    "infinity": "chebyshev",
    "minkowski": "minkowski",
    "cosine": "cosine",
    **{name: name for name in _OWN_NAME},
}
#: The metric names accepted (scikit-learn's spellings).
VALID_METRICS = tuple(sorted(_CANONICAL))
_METRIC_PARAMS = {
    "minkowski": ("p", "w"),
    "seuclidean": ("V",),
    "mahalanobis": ("V", "VI"),
}
_P_ALIASES = {1: "manhattan", 2: "euclidean", np.inf: "chebyshev"}


# -- metrics as formulas --------------------------------------------------------


def _sqeuclidean(x_i, y_j, params):
    # The direct form is exact up to rounding: no |x|^2 - 2 x.y + |y|^2
    # cancellation, which for nearby points far from the origin loses every
    # digit of their distance and reorders near neighbours. (ExpandedSearch
    # takes the expanded form for candidates only, under a certificate.)
    return ((x_i - y_j) ** 2).sum(-1)


def _manhattan(x_i, y_j, params):
    return (x_i - y_j).abs().sum(-1)


def _max_over_features(v: LazyTensor) -> LazyTensor:
    """The largest component of ``v``, by halving: log2(D) element-wise maxima."""
    while v.dim > 1:
        h = v.dim // 2
        m = maximum(v[:h], v[h : 2 * h])
        v = m if v.dim % 2 == 0 else m.concat(v[2 * h :])
    return v


def _chebyshev(x_i, y_j, params):
    return _max_over_features((x_i - y_j).abs())


def _minkowski(x_i, y_j, params):
    p = float(params["p"])
    terms = (x_i - y_j).abs() ** p  # an integral p is an exact power
    if params.get("w") is not None:
        terms = Pm(np.asarray(params["w"], dtype=x_i.dtype)) * terms
    return terms.sum(-1)


def _cosine(x_i, y_j, params):
    return 1 - (x_i | y_j)  # on unit vectors (see _unit_rows)


def _unit_rows(a: np.ndarray) -> np.ndarray:
    """Rows scaled to norm 1; zero rows stay zero (scikit-learn's ``normalize``)."""
    norms = np.sqrt(np.einsum("ij,ij->i", a, a, dtype=np.float64))
    norms[norms == 0] = 1
    return (a / norms[:, None]).astype(a.dtype, copy=False)


def _ratio_or_zero(num: LazyTensor, den: LazyTensor) -> LazyTensor:
    """``num / den``, and 0 where ``den <= 0`` (the 0/0 = 0 conventions)."""
    return (-den).ifelse(0.0, num / den)


def _with_l1_norms(a: np.ndarray) -> np.ndarray:
    """(x, sum |x|): the braycurtis points, their norms once per point."""
    norms = np.abs(a).sum(axis=1, keepdims=True, dtype=np.float64)
    return np.concatenate([a, norms], axis=1).astype(a.dtype, copy=False)


def _braycurtis(x_i, y_j, params):
    d = x_i.dim - 1
    num = (x_i[:d] - y_j[:d]).abs().sum(-1)
    return _ratio_or_zero(num, x_i[d] + y_j[d])


def _canberra(x_i, y_j, params):
    return _ratio_or_zero((x_i - y_j).abs(), x_i.abs() + y_j.abs()).sum(-1)


def _seuclidean(x_i, y_j, params):
    return ((x_i - y_j) ** 2 / Pm(np.asarray(params["V"], dtype=x_i.dtype))).sum(-1)


def _mahalanobis(x_i, y_j, params):
    # the quadratic form itself, for a VI whose symmetric part is not positive
    # definite (else the points are prepared by its Cholesky factor)
    vi = Pm(np.asarray(params["VI"], dtype=x_i.dtype).ravel())
    return x_i.weightedsqdist(y_j, vi)


def _centred_unit_rows(a: np.ndarray) -> np.ndarray:
    """Rows minus their mean, scaled to norm 1; a constant row becomes NaN
    (scipy's 0/0 correlation)."""
    c = a - a.mean(axis=1, dtype=np.float64, keepdims=True)
    norms = np.sqrt(np.einsum("ij,ij->i", c, c))
    with np.errstate(invalid="ignore", divide="ignore"):
        c /= norms[:, None]
    c[norms == 0] = np.nan
    return c.astype(a.dtype, copy=False)


def _haversine_prepare(a: np.ndarray) -> np.ndarray:
    """(lat, lon) -> (lat, lon, cos(lat)): the cosines once per point."""
    return np.concatenate([a, np.cos(a[:, :1])], axis=1).astype(a.dtype, copy=False)


def _haversine(x_i, y_j, params):
    dlat, dlon = (x_i[0] - y_j[0]) / 2, (x_i[1] - y_j[1]) / 2
    return dlat.sin() ** 2 + x_i[2] * y_j[2] * dlon.sin() ** 2


def _haversine_to_dist(v):
    return 2 * np.arcsin(np.sqrt(np.clip(v, 0, 1)))


def _haversine_to_rdist(r):
    return np.sin(r / 2) ** 2 if r < np.pi else np.inf  # pi: antipodes


def _values_and_masks(a: np.ndarray) -> np.ndarray:
    """(values with NaN as 0, 1 where present): the nan_euclidean points."""
    missing = np.isnan(a)
    return np.concatenate([np.where(missing, 0, a), ~missing], axis=1).astype(a.dtype)


def _nan_euclidean(x_i, y_j, params):
    d = x_i.dim // 2
    both = x_i[d:] * y_j[d:]  # 1 where present in both
    sq = (both * (x_i[:d] - y_j[:d]) ** 2).sum(-1)
    return d * sq / both.sum(-1)  # 0/0 = NaN: nothing present in both


def _hamming(x_i, y_j, params):
    differ = (x_i < y_j) + (x_i > y_j)  # no subtraction: exact for any values
    return differ.sum(-1) / x_i.dim


def _bits_and_counts(a: np.ndarray) -> np.ndarray:
    """(nonzero as 1, number of nonzeros): the boolean metrics' points."""
    bits = a != 0
    return np.concatenate([bits, bits.sum(axis=1, keepdims=True)], axis=1).astype(
        a.dtype
    )


def _boolean(name: str):
    """The formula of a boolean metric, on prepared bits and counts."""

    def rdist(x_i, y_j, params):
        d = x_i.dim - 1
        ntt, nx, ny = x_i[:d] | y_j[:d], x_i[d], y_j[d]
        ndiff = nx + ny - 2 * ntt
        if name == "jaccard":
            return _ratio_or_zero(ndiff, ntt + ndiff)
        if name == "dice":
            return ndiff / (2 * ntt + ndiff)
        if name == "rogerstanimoto":
            return 2 * ndiff / (d + ndiff)
        if name == "russellrao":
            return (d - ntt) / d
        if name == "sokalsneath":
            return 2 * ndiff / (ntt + 2 * ndiff)
        half = (nx - ntt) * (ny - ntt)  # yule: ntf nft
        return _ratio_or_zero(2 * half, ntt * (d - nx - ny + ntt) + half)

    return rdist


@dataclass(frozen=True)
class Metric:
    """A metric as a formula: ``rdist`` orders points as the distance does."""

    rdist: Callable[[LazyTensor, LazyTensor], LazyTensor]
    to_dist: Callable[[np.ndarray], np.ndarray]  # rdist values -> distances
    to_rdist: Callable[[float], float]  # a radius -> the rdist threshold
    prepare: Callable[[np.ndarray], np.ndarray] = lambda a: a
    squared_l2: bool = False  # rdist is |x - y|^2: ExpandedSearch applies


def _identity(v):
    return v


def _square(r):
    return r * r


def _sqrt(v):
    with np.errstate(invalid="ignore"):  # a negative quadratic form: NaN
        return np.sqrt(v)


def _cholesky_factor(vi: np.ndarray):
    """L with L L^T the symmetric part of ``vi``, or None if not positive definite."""
    try:
        return np.linalg.cholesky((vi + vi.T) / 2)
    except np.linalg.LinAlgError:
        return None


def _mahalanobis_metric(params) -> Metric:
    vi = np.asarray(params["VI"], dtype=np.float64)
    L = _cholesky_factor(vi)
    if L is None:
        return Metric(lambda x, y: _mahalanobis(x, y, params), _sqrt, _square)
    # (x - y)^T VI (x - y) = |L^T (x - y)|^2: D x D work per point, not per pair
    return Metric(
        lambda x, y: _sqeuclidean(x, y, params),
        _sqrt,
        _square,
        lambda a: (a @ L).astype(a.dtype, copy=False),
    )


def _bind(fn, params):
    return lambda x, y: fn(x, y, params)


#: The metrics whose rdist is the distance itself (no conversion).
_DIRECT = {
    "manhattan": _manhattan,
    "chebyshev": _chebyshev,
    "canberra": _canberra,
    "hamming": _hamming,
}


def make_metric(name_or_fn, params: dict) -> Metric:
    """The :class:`Metric` of a validated metric name, or of a LazyTensor callable.

    ``params``: for seuclidean and mahalanobis, as :func:`formula_params`
    completes them.
    """
    if callable(name_or_fn):
        return Metric(lambda x, y: name_or_fn(x, y, **params), _identity, _identity)
    name = _CANONICAL[name_or_fn]
    if name in ("euclidean", "sqeuclidean"):
        conv = (np.sqrt, _square) if name == "euclidean" else (_identity, _identity)
        return Metric(_bind(_sqeuclidean, params), *conv, squared_l2=True)
    if name == "minkowski":
        p = float(params["p"])
        return Metric(_bind(_minkowski, params), lambda v: v ** (1.0 / p),
                      lambda r: r**p)
    if name == "cosine":
        return Metric(_bind(_cosine, params), lambda v: np.clip(v, 0, 2),
                      _identity, _unit_rows)
    if name == "correlation":
        return Metric(_bind(_cosine, params), lambda v: np.clip(v, 0, 2),
                      _identity, _centred_unit_rows)
    if name == "braycurtis":
        return Metric(_bind(_braycurtis, params), _identity, _identity,
                      _with_l1_norms)
    if name == "seuclidean":
        return Metric(_bind(_seuclidean, params), _sqrt, _square)
    if name == "mahalanobis":
        return _mahalanobis_metric(params)
    if name == "haversine":
        return Metric(_bind(_haversine, params), _haversine_to_dist,
                      _haversine_to_rdist, _haversine_prepare)
    if name == "nan_euclidean":
        return Metric(_bind(_nan_euclidean, params), _sqrt, _square,
                      _values_and_masks)
    if name in BOOLEAN_METRICS:
        return Metric(_bind(_boolean(name), params), _identity, _identity,
                      _bits_and_counts)
    return Metric(_bind(_DIRECT[name], params), _identity, _identity)


def effective_metric(metric, p, metric_params) -> tuple:
    """(effective_metric_, effective_metric_params_), as scikit-learn sets them.

    Minkowski with p = 1, 2 or inf and no weights becomes manhattan,
    euclidean or chebyshev; a ``p`` in ``metric_params`` wins over ``p``.
    """
    params = dict(metric_params or {})
    if "p" in params and p is not None:
        warnings.warn(
            "Parameter p is found in metric_params. The corresponding parameter "
            "from __init__ is ignored.",
            SyntaxWarning,
            stacklevel=4,
        )
    if metric != "minkowski":
        return metric, params
    p = params.pop("p", p)
    p = 2 if p is None else p
    if not Interval(numbers.Real, 0, None, closed="right").is_satisfied_by(p):
        raise ValueError(f"metric_params['p'] must be a float > 0; got {p!r}")
    w = params.pop("w", None)
    if w is None and p in _P_ALIASES:
        return _P_ALIASES[p], params
    return "minkowski", {**params, "p": p, "w": w}


def _check_vector(params, key, what, n_features):
    v = np.asarray(params[key])
    ok = v.shape == (n_features,) and v.dtype.kind in "biuf"
    if not ok or not np.all(np.isfinite(v)) or np.any(v < 0):
        raise ValueError(
            f"the {what} metric_params[{key!r}] must be a 1-D array of "
            f"{n_features} finite non-negative numbers (one per feature); "
            f"got shape {v.shape}"
        )


def _check_matrix(params, key, n_features):
    m = np.asarray(params[key])
    shape = (n_features, n_features)
    if m.shape != shape or m.dtype.kind not in "biuf" or not np.all(np.isfinite(m)):
        raise ValueError(
            f"the mahalanobis metric_params[{key!r}] must be a {shape} array of "
            f"finite numbers (features x features); got shape {m.shape}"
        )


def check_metric_params(metric, params: dict, n_features: int) -> None:
    """Reject metric parameters that the metric does not take, or bad values."""
    if callable(metric):
        return
    name = _CANONICAL[metric]
    allowed = _METRIC_PARAMS.get(name, ())
    extra = sorted(set(params) - set(allowed))
    if extra:
        raise ValueError(
            f"metric_params {extra} are not parameters of metric {metric!r}; "
            f"it takes {list(allowed) or 'none'}"
        )
    if params.get("w") is not None:
        _check_vector(params, "w", "minkowski weights", n_features)
    if name == "seuclidean" and "V" in params:
        _check_vector(params, "V", "seuclidean variances", n_features)
    if name == "mahalanobis":
        if "V" in params and "VI" in params:
            raise ValueError(
                "metric_params of metric 'mahalanobis' must give either 'V' "
                "(the covariance) or 'VI' (its inverse), not both"
            )
        for key in set(params) & {"V", "VI"}:
            _check_matrix(params, key, n_features)
        if "V" in params and np.linalg.matrix_rank(np.asarray(params["V"],
                                                              float)) < n_features:
            raise ValueError(
                "the mahalanobis covariance metric_params['V'] is singular; "
                "give its (pseudo-)inverse as metric_params['VI'] instead"
            )


def check_query_features(metric, n_features: int) -> None:
    """The metrics defined for some number of features only (checked, as in
    scikit-learn, when a query is made, not at fit)."""
    if metric == "haversine" and n_features != 2:
        raise ValueError(
            "Haversine distance only valid in 2 dimensions (latitude, longitude "
            f"in radians); X has {n_features} features"
        )


def formula_params(metric, params: dict, X: np.ndarray) -> dict:
    """The parameters of the metric's formula: ``params`` (checked) with the
    defaults derived from the fitted points ``X``.

    seuclidean without ``V``: ``var(X, ddof=1)``; mahalanobis: ``VI`` from
    ``V``, else ``inv(cov(X.T)).T``; these are what
    scikit-learn's ``pairwise_distances(X)`` derives (its k-NN estimators
    raise without them, except mahalanobis for ``kneighbors()``).
    """
    if callable(metric):
        return params
    name = _CANONICAL[metric]
    if name == "seuclidean" and "V" not in params:
        return {**params, "V": np.var(X, axis=0, ddof=1, dtype=np.float64)}
    if name == "mahalanobis":
        if "VI" in params:
            return params
        if "V" in params:
            return {"VI": np.linalg.inv(np.asarray(params["V"], dtype=np.float64))}
        cov = np.cov(X.T.astype(np.float64, copy=False))
        return {"VI": np.linalg.inv(np.atleast_2d(cov)).T}
    return params


def is_bool_data(X) -> bool:
    """Whether ``X`` (array-like, before validation) holds booleans only."""
    if hasattr(X, "dtypes") and not hasattr(X, "dtype"):  # a DataFrame
        # pandas' extension dtypes (nullable Float64, Int64, boolean) are no
        # NumPy dtypes: read their kind ("b" for bool and boolean)
        return all(getattr(t, "kind", None) == "b" for t in X.dtypes)
    dtype = getattr(X, "dtype", None)
    return (dtype if dtype is not None else np.asarray(X).dtype) == bool


def warn_boolean_conversion(metric, *are_bool: bool) -> None:
    """scikit-learn's warning when a boolean metric meets non-boolean data."""
    if isinstance(metric, str) and metric in BOOLEAN_METRICS and not all(are_bool):
        warnings.warn(
            f"Data was converted to boolean for metric {metric}",
            DataConversionWarning,
            stacklevel=4,
        )


def is_lazy_callable(fn, params: dict, X: np.ndarray) -> bool:
    """Whether ``fn`` builds a formula from LazyTensors (else: two 1-D arrays).

    A callable is first called on LazyTensors ``(x_i, y_j)``; returning a
    scalar LazyTensor makes it a formula. Anything else (an exception, a
    number) makes it a scikit-learn-style metric of two 1-D arrays, which must
    then return a number.
    """
    try:
        out = fn(Vi(X[:1]), Vj(X[:1]), **params)
    except Exception as exc:  # noqa: BLE001 (the array convention is tried next)
        lazy_error = exc
    else:
        if isinstance(out, LazyTensor):
            if out.dim != 1:
                raise ValueError(
                    "a callable metric must return a scalar formula (dimension 1);"
                    f" it returned a formula of dimension {out.dim}"
                )
            return True
        lazy_error = None
    try:
        value = fn(X[0], X[0], **params)
        float(value)
    except Exception as exc:  # noqa: BLE001 (reported with both attempts)
        raise TypeError(
            "the callable metric must take LazyTensors (x_i, y_j) and return a "
            "scalar formula, or take two 1-D arrays and return a number; it "
            f"does neither (with arrays: {type(exc).__name__}: {exc})"
        ) from (lazy_error or exc)
    return False

