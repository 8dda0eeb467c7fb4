"""Metrics and searches behind the k-NN estimators of :mod:`.neighbors`.

A metric is reduced in its *reduced distance* form (``rdist``): a formula
that orders the points as the distance does and is cheaper to compute, such
as the squared distance for ``euclidean``; the search keeps the K smallest
``rdist`` of each query with a ``Kmin_argKmin`` reduction and converts only
those to distances. Queries go through the reduction in blocks, so memory
stays linear in the number of points whatever their number.

A scikit-learn-style callable metric (two 1-D arrays in, a float out) has no
formula: :class:`DenseSearch` evaluates it pair by pair on blocks of queries,
as scikit-learn's brute force does.

This module also holds the constructor-parameter constraints of the
estimators (the checks behind ``_parameter_constraints``), written after
scikit-learn's, whose constraint classes are not public.
"""

from __future__ import annotations

import numbers
import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np

import kerneltools as kt
from kerneltools import LazyTensor, Vi, Vj

#: Rows x K of one query block: the block's outputs stay near 32 MB.
QUERY_BLOCK_ENTRIES = 2**21
#: Rows x fitted points of one block of dense distances (callable metrics).
DENSE_BLOCK_ENTRIES = 2**22

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
    # digit of their distance and reorders near neighbours.
    return ((x_i - y_j) ** 2).sum(-1)


def _manhattan(x_i, y_j, params):
    return (x_i - y_j).abs().sum(-1)


def _max_over_features(v: LazyTensor) -> LazyTensor:
    """The largest component of ``v``, by halving: log2(D) element-wise maxima."""
    while v.dim > 1:
        h = v.dim // 2
        m = kt.maximum(v[:h], v[h : 2 * h])
        v = m if v.dim % 2 == 0 else m.concat(v[2 * h :])
    return v


def _chebyshev(x_i, y_j, params):
    return _max_over_features((x_i - y_j).abs())


def _minkowski(x_i, y_j, params):
    p = float(params["p"])
    terms = (x_i - y_j).abs() ** p  # an integral p is an exact power
    if params.get("w") is not None:
        terms = kt.Pm(np.asarray(params["w"], dtype=x_i.dtype)) * terms
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


def _identity(v):
    return v


def _square(r):
    return r * r


def make_metric(name_or_fn, params: dict) -> Metric:
    """The :class:`Metric` of a validated metric name, or of a LazyTensor callable."""
    if callable(name_or_fn):
        return Metric(lambda x, y: name_or_fn(x, y, **params), _identity, _identity)
    name = _CANONICAL[name_or_fn]
    if name == "euclidean":
        return Metric(lambda x, y: _sqeuclidean(x, y, params), np.sqrt, _square)
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
    fn = {"sqeuclidean": _sqeuclidean, "manhattan": _manhattan}.get(name, _chebyshev)
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
    if not Interval(numbers.Real, 0, None, closed="right")(p):
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


# -- searches ------------------------------------------------------------------


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
        X = self.metric.prepare(X)
        vals = np.empty((X.shape[0], k), dtype=X.dtype)
        idx = np.empty((X.shape[0], k), dtype=np.int64)
        rows = max(1, QUERY_BLOCK_ENTRIES // k)
        for s in range(0, X.shape[0], rows):
            v, i = self.rdist(X[s : s + rows]).Kmin_argKmin(
                k, axis=1, backend=self.backend
            )
            vals[s : s + rows], idx[s : s + rows] = v.reshape(-1, k), i.reshape(-1, k)
        return vals, idx

    def count(self, X: np.ndarray, threshold: float) -> np.ndarray:
        """Number of fitted points with rdist <= threshold (an estimate: see
        :func:`radius_search`)."""
        F = self.rdist(self.metric.prepare(X)) <= float(threshold)
        return np.rint(F.sum(axis=1, backend=self.backend)).astype(np.int64).ravel()


class DenseSearch:
    """The same searches for a scikit-learn-style callable, pair by pair."""

    def __init__(self, fn, params: dict, Y: np.ndarray):
        self.fn, self.params, self.Y = fn, params, Y
        self.metric = Metric(None, _identity, _identity)  # values are distances

    def _blocks(self, X: np.ndarray):
        from sklearn.metrics import pairwise_distances

        rows = max(1, DENSE_BLOCK_ENTRIES // self.Y.shape[0])
        for s in range(0, X.shape[0], rows):
            D = pairwise_distances(
                X[s : s + rows], self.Y, metric=self.fn, **self.params
            )
            yield s, D.astype(X.dtype, copy=False)

    def kmin(self, X: np.ndarray, k: int):
        vals = np.empty((X.shape[0], k), dtype=X.dtype)
        idx = np.empty((X.shape[0], k), dtype=np.int64)
        for s, D in self._blocks(X):
            order = np.argsort(D, axis=1, kind="stable")[:, :k]
            vals[s : s + len(D)] = np.take_along_axis(D, order, axis=1)
            idx[s : s + len(D)] = order
        return vals, idx

    def count(self, X: np.ndarray, threshold: float) -> np.ndarray:
        return np.concatenate(
            [(D <= threshold).sum(axis=1) for _, D in self._blocks(X)]
        )


def radius_search(search, X: np.ndarray, threshold: float, n_fit: int):
    """Points within ``threshold`` (in rdist units) of each query, increasing.

    Counts give each row's K; ``Kmin_argKmin`` with one more than the count
    then finds the points (rows grouped by K rounded up to 16, 64, 256, ...:
    each K is a kernel to compile, once). A row whose K-th value is still
    within the threshold is searched again with a larger K: the result does
    not rely on the count being computed exactly as the K-min values are.

    Returns per-row lists ``(values, indices)`` of arrays.
    """
    n = X.shape[0]
    vals, inds = [None] * n, [None] * n
    need = np.minimum(search.count(X, threshold) + 1, n_fit)
    todo = np.arange(n)
    while todo.size:
        ks = np.minimum(_k_bucket(need[todo]), n_fit)
        again = []
        for k in np.unique(ks):
            rows = todo[ks == k]
            v, i = search.kmin(X[rows], int(k))
            within = v <= threshold  # a prefix of each row (NaN sorts last)
            more = within[:, -1] & (k < n_fit)
            need[rows[more]] = 2 * k
            again.append(rows[more])
            for r, row_v, row_i, m in zip(rows, v, i, within):
                vals[r], inds[r] = row_v[m], row_i[m]
        todo = np.concatenate(again)
    return vals, inds


def _k_bucket(need: np.ndarray) -> np.ndarray:
    """``need`` rounded up to a power of 4, at least 16."""
    bits = np.ceil(np.log2(np.maximum(need, 16))).astype(np.int64)
    return np.left_shift(1, bits + bits % 2)


# -- results -------------------------------------------------------------------


def drop_self(vals, ind):
    """Remove each fitted point from its own neighbours (scikit-learn's rule).

    When more duplicates than neighbours hide the point itself, the first
    neighbour (a duplicate) is dropped instead.
    """
    n, k = ind.shape
    keep = ind != np.arange(n)[:, None]
    keep[keep.all(axis=1), 0] = False
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


# -- constructor parameters -------------------------------------------------------


class InvalidParameterError(ValueError, TypeError):
    """A constructor parameter of the wrong type or value (as scikit-learn's)."""


@dataclass(frozen=True)
class Interval:
    """Numbers of ``kind`` (``numbers.Integral`` or ``numbers.Real``) in a range."""

    kind: type
    left: float | None
    right: float | None
    closed: str = "left"  # "left", "right", "both" or "neither"

    def __call__(self, v) -> bool:
        if isinstance(v, bool) or not isinstance(v, self.kind):
            return False
        lo_ok = self.left is None or (
            v >= self.left if self.closed in ("left", "both") else v > self.left
        )
        hi_ok = self.right is None or (
            v <= self.right if self.closed in ("right", "both") else v < self.right
        )
        return bool(lo_ok and hi_ok)

    def __str__(self):
        what = "an int" if self.kind is numbers.Integral else "a float"
        lb = "[" if self.closed in ("left", "both") else "("
        rb = "]" if self.closed in ("right", "both") else ")"
        lo = "-inf" if self.left is None else self.left
        hi = "inf" if self.right is None else self.right
        return f"{what} in the range {lb}{lo}, {hi}{rb}"


@dataclass(frozen=True)
class Options:
    """One of a set of values (strings, or dtypes compared with ``np.dtype``)."""

    values: tuple
    dtypes: bool = False

    def __call__(self, v) -> bool:
        if self.dtypes:
            try:
                return v is not None and np.dtype(v).name in self.values
            except TypeError:
                return False
        return isinstance(v, str) and v in self.values

    def __str__(self):
        kind = "a dtype" if self.dtypes else "a str"
        return f"{kind} among {{{', '.join(repr(v) for v in self.values)}}}"


def _describe(constraint) -> str:
    if constraint is None:
        return "None"
    if constraint is callable:
        return "a callable"
    if constraint is dict:
        return "an instance of 'dict'"
    return str(constraint)


def _satisfied(constraint, value) -> bool:
    if constraint is None:
        return value is None
    if constraint is callable:
        return callable(value)
    if isinstance(constraint, type):
        return isinstance(value, constraint)
    return constraint(value)


def validate_params(estimator) -> None:
    """Check every constructor parameter against ``_parameter_constraints``."""
    for name, constraints in estimator._parameter_constraints.items():
        value = getattr(estimator, name)
        if any(_satisfied(c, value) for c in constraints):
            continue
        descr = [_describe(c) for c in constraints]
        allowed = descr[0] if len(descr) == 1 else ", ".join(descr[:-1])
        if len(descr) > 1:
            allowed += f" or {descr[-1]}"
        raise InvalidParameterError(
            f"The {name!r} parameter of {type(estimator).__name__} must be "
            f"{allowed}. Got {value!r} instead."
        )
