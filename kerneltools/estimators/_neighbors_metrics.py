"""Metrics as formulas, for the k-NN estimators of :mod:`.neighbors`.

A metric is reduced in its *reduced distance* form (``rdist``): a formula
that orders the points as the distance does and is cheaper to compute, such
as the squared distance for ``euclidean``; the searches
(:mod:`._neighbors_search`, :mod:`._neighbors_pruned`) keep the K smallest
``rdist`` of each query and convert only those to distances. This module
also resolves the metric's name and parameters as scikit-learn does
(:func:`effective_metric`), checks them, and tells a callable that builds a
formula from one of two 1-D arrays (:func:`is_lazy_callable`).
"""

from __future__ import annotations

import numbers
import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..lazy import LazyTensor, Pm, Vi, Vj, maximum

from ._param_validation import Interval

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
}
#: The metric names accepted (scikit-learn's spellings).
VALID_METRICS = tuple(sorted(_CANONICAL))
_METRIC_PARAMS = {"minkowski": ("p", "w")}
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


def make_metric(name_or_fn, params: dict) -> Metric:
    """The :class:`Metric` of a validated metric name, or of a LazyTensor callable."""
    if callable(name_or_fn):
        return Metric(lambda x, y: name_or_fn(x, y, **params), _identity, _identity)
    name = _CANONICAL[name_or_fn]
    if name in ("euclidean", "sqeuclidean"):
        conv = (np.sqrt, _square) if name == "euclidean" else (_identity, _identity)
        return Metric(lambda x, y: _sqeuclidean(x, y, params), *conv, squared_l2=True)
    if name == "minkowski":
        p = float(params["p"])
        return Metric(
            lambda x, y: _minkowski(x, y, params),
            lambda v: v ** (1.0 / p),
            lambda r: r**p,
        )
    if name == "cosine":
        return Metric(
            lambda x, y: _cosine(x, y, params),
            lambda v: np.clip(v, 0, 2),
            _identity,
            _unit_rows,
        )
    fn = _manhattan if name == "manhattan" else _chebyshev
    return Metric(lambda x, y: fn(x, y, params), _identity, _identity)


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
    if p < 1:
        warnings.warn(
            "Mind that for 0 < p < 1, Minkowski metrics are not distance "
            "metrics. Continuing the execution with `algorithm='brute'`.",
            stacklevel=4,
        )
    return "minkowski", {**params, "p": p, "w": w}


def check_metric_params(metric, params: dict, n_features: int) -> None:
    """Reject metric parameters that the metric does not take."""
    if callable(metric):
        return
    allowed = _METRIC_PARAMS.get(_CANONICAL[metric], ())
    extra = sorted(set(params) - set(allowed))
    if extra:
        raise ValueError(
            f"metric_params {extra} are not parameters of metric {metric!r}; "
            f"it takes {list(allowed) or 'none'}"
        )
    w = params.get("w")
    if w is not None:
        w = np.asarray(w)
        if w.shape != (n_features,) or not np.all(np.isfinite(w)) or np.any(w < 0):
            raise ValueError(
                "the minkowski weights metric_params['w'] must be a 1-D array of "
                f"{n_features} finite non-negative numbers (one per feature); "
                f"got shape {w.shape}"
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

