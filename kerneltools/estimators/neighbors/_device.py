"""The k-NN estimators on Array API and device arrays (issue 24).

Where an input is computed follows :mod:`._array_api` (its docstring is the
design); this module holds what the k-NN estimators do on a device:

- **Where.** :class:`DevicePlacement` (a base of ``NeighborsBase``):
  device inputs validated on the device, fitted arrays (``_fit_X``, ``_y``)
  kept in the namespace and on the device of the inputs (scikit-learn's
  ``check_array_api_input`` asks it), the fit's place read back from an
  empty array of that namespace (``_fit_like``) at each query, queries in
  another namespace or on another device refused by ``check_same_place``.
  NumPy inputs with ``backend="cuda"`` are validated on the host and their
  fitted points copied to the device once, at the first query (kept with
  the search, never pickled); a pruned fit's NumPy queries stay on the host.
- **Which configurations.** :func:`device_serves`: the metrics whose formula
  and distance conversion need no host arithmetic (euclidean,
  sqeuclidean, manhattan, chebyshev, unweighted minkowski), as the effective
  metric of the estimator's parameters. Others (seuclidean, mahalanobis,
  cosine, ..., LazyTensor callables) compute a device array on the host: one
  copy of the queries per call, results moved back.
- **Brute force on the device.** :class:`DeviceSearch` keeps the fitted
  points on the device and reduces blocks of queries with one
  ``Kmin_argKmin`` each, fed device arrays (CuPy, or the NumPy views of the
  simulated device): distances and indices stay there. It always uses the
  direct form ``sum (x - y)^2`` (exact up to rounding); the expanded-form
  candidates with a float64 re-ranking and the float32 BLAS tiles of the
  host (:mod:`._neighbors_search`, :mod:`._neighbors_gemm`) are host-only.
- **The pruned low-D route** (``_fit_method_ == "block_sparse"``):
  :class:`HostSearch` runs the host's cell search on a host copy of the
  fitted points (made once per fit, at the first query) and of the queries
  (one copy per call), its results copied back to the device. The
  engine's block-sparse reductions take device arrays, but the cells, the
  pairs of cells and the certificate are computed on the host from the
  points' coordinates: for D <= 3 the copies are 12-24 bytes per point each
  way, besides the K-wide results.
- **Votes and means** (:func:`votes`, :func:`weighted_mean`): in the
  array's namespace, class by class (no ``bincount`` in the Array API).

Radius queries of a device fit run on the host (one copy of the fitted
points per fit, of the queries per call); their per-row arrays are moved
back to the input's namespace and device as views of one flat array each,
in a NumPy object array (the Array API has no ragged arrays; scikit-learn
1.9's k-NN estimators do not support ``array_api_dispatch`` at all). The
graph methods return SciPy sparse matrices, on the host.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import is_classifier
from sklearn.utils.validation import check_is_fitted

from ...config import get_config
from ...lazy import Vi, Vj
from . import _metrics as M
from ..._utils._array_api import (
    Placement,
    Space,
    check_same_place,
    fitted_placement,
    validate_on_device,
)
from .search._formula import QUERY_BLOCK_ENTRIES

__all__ = ["DEVICE_METRICS", "DevicePlacement", "DeviceSearch", "HostSearch",
           "accuracy_xp", "check_targets", "device_serves", "drop_self",
           "encode_labels", "gather_rows", "split_rows", "to_dist", "votes",
           "weighted_mean", "weights_of"]

#: Effective metrics served on the device (see the module's docstring).
DEVICE_METRICS = frozenset({"euclidean", "sqeuclidean", "manhattan", "chebyshev",
                            "minkowski"})


def device_serves(est) -> bool:
    """Whether the device path serves ``est`` (its class, its metric: see
    the module's docstring)."""
    metric = est.metric
    if not (est._ARRAY_API and isinstance(metric, str) and metric in M.VALID_METRICS):
        return False
    try:
        name, params = M.effective_metric(est.metric, est.p, est.metric_params)
    except Exception:  # noqa: BLE001 - bad parameters: the host path reports them
        return False
    return name in DEVICE_METRICS and params.get("w") is None and set(params) <= {"p"}


def to_dist(est, vals, xp):
    """The distances of the rdist values ``vals`` (an array of ``xp``)."""
    name = est.effective_metric_
    if name == "euclidean":
        return xp.sqrt(vals)
    if name == "minkowski":
        return vals ** (1.0 / float(est.effective_metric_params_["p"]))
    return vals


class DevicePlacement:
    """What :class:`~._neighbors_base.NeighborsBase` does about where its
    inputs live: their validation on a device, the fitted arrays kept in the
    inputs' namespace, the placement of a query, the device searches (for
    the estimators whose ``_ARRAY_API`` is true)."""

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

    def _device_search(self, X, place: Placement):
        """(search, X): :meth:`_search` for queries ``X`` of a device space
        (:mod:`._neighbors_device`; the pruned route on the host)."""
        sp = place.space
        dtype = self._query_dtype(sp.np_dtype(X))
        key = (dtype, self.backend, get_config()["backend"], sp.kind, repr(sp.device))
        search = self._searches.get(key)
        if search is None:
            if self._fit_method == "block_sparse":
                search = HostSearch(self._new_search(dtype, place.backend), sp)
            else:
                formula = M.make_metric(self.effective_metric_, self._metric_params)
                Y = sp.astype(place.to_space(self._fit_X), dtype)
                search = DeviceSearch(formula, Y, sp, place.backend)
            self._searches.clear()
            self._searches[key] = search
        return search, sp.astype(X, dtype)



class DeviceSearch:
    """Brute-force K-min of a metric's rdist over fitted points on a device.

    ``Y`` is an array of the device space ``sp``; :meth:`kmin` takes and
    returns arrays of it.
    """

    def __init__(self, metric: M.Metric, Y, sp: Space, backend):
        self.metric, self.sp, self.backend = metric, sp, backend
        self.Y = Y
        self._y_j = Vj(sp.engine(Y))

    def kmin(self, X, k: int):
        """(rdist, indices), both (n, k), increasing; ties by index."""
        sp, xp = self.sp, self.sp.xp
        n = X.shape[0]
        rows = max(1, QUERY_BLOCK_ENTRIES // k)
        vals, idx = [], []
        for s in range(0, n, rows):
            x_i = Vi(sp.engine(X[s:min(n, s + rows), :]))
            v, i = self.metric.rdist(x_i, self._y_j).Kmin_argKmin(
                k, axis=1, backend=self.backend)
            vals.append(xp.reshape(sp.from_engine(v), (-1, k)))
            idx.append(xp.reshape(sp.from_engine(i), (-1, k)))
        if len(vals) == 1:
            return vals[0], idx[0]
        return xp.concat(vals, axis=0), xp.concat(idx, axis=0)


class HostSearch:
    """A host search (pruned cells) behind the device interface: the queries
    copied to the host per call, the results back to the device."""

    def __init__(self, search, sp: Space):
        self.search, self.sp = search, sp

    def kmin(self, X, k: int):
        sp = self.sp
        X = np.ascontiguousarray(sp.host(X), self.search.Y.dtype)
        v, i = self.search.kmin(X, k)
        return sp.put(v), sp.put(i)


def drop_self(vals, ind, xp):
    """:func:`._neighbors_search.drop_self` in the namespace ``xp``: each
    fitted point removed from its own neighbours (a duplicate first
    neighbour instead when it is missing at distance 0, the last one
    otherwise)."""
    n, k = ind.shape
    dev = _device(ind)
    own = xp.reshape(xp.arange(n, dtype=ind.dtype, device=dev), (n, 1))
    col = xp.reshape(xp.arange(k, device=dev), (1, k))
    keep = ind != own
    missing = xp.reshape(xp.all(keep, axis=1), (n, 1))
    at_zero = xp.reshape(vals[:, 0] <= 0, (n, 1))  # False for NaN
    first, last = missing & at_zero & (col == 0), missing & ~at_zero & (col == k - 1)
    keep = keep & ~first & ~last
    return (xp.reshape(vals[keep], (n, k - 1)), xp.reshape(ind[keep], (n, k - 1)))


def _device(a):
    from ..._utils._array_api import compat  # noqa: PLC0415 - scikit-learn's vendored copy

    return compat().device(a)


def weights_of(dist, weights, xp):
    """The weights of scikit-learn's ``weights`` rules on an (n, K) array of
    distances of ``xp``, as float64, or None for 'uniform': 'distance' gives
    1/d, and a query at distance 0 of some fitted points takes their votes
    only; a callable gets ``dist`` (an array of the device) and returns
    weights of its shape."""
    if weights is None or (isinstance(weights, str) and weights == "uniform"):
        return None
    if not isinstance(weights, str):
        return xp.astype(xp.asarray(weights(dist)), xp.float64)
    zero = dist == 0
    zero_row = xp.reshape(xp.any(zero, axis=1), (-1, 1))
    # 1/d in the distances' dtype, as the host path (then float64)
    inverse = xp.astype(1.0 / xp.where(zero, xp.ones_like(dist), dist), xp.float64)
    return xp.where(zero_row, xp.astype(zero, xp.float64), inverse)


def votes(codes, w, n_classes: int, xp):
    """(n, n_classes) float64: per query, the weights of each class among its
    neighbours' label ``codes`` (n, K), normalised (class by class)."""
    if w is None:
        w = xp.ones(codes.shape, dtype=xp.float64, device=_device(codes))
    cols = [xp.sum(w * xp.astype(codes == c, xp.float64), axis=1)
            for c in range(n_classes)]
    out = xp.stack(cols, axis=1)
    return out / xp.sum(out, axis=1, keepdims=True)


def weighted_mean(Yk, w, xp):
    """(n, n_outputs): the mean of the neighbours' targets ``Yk`` (n, K,
    n_outputs), weighted by ``w`` (n, K, float64) unless None (then in
    ``Yk``'s dtype, as the host path)."""
    if w is None:  # integer targets: a float64 mean, as NumPy's
        floating = xp.isdtype(Yk.dtype, "real floating")
        return xp.mean(Yk if floating else xp.astype(Yk, xp.float64), axis=1)
    num = xp.sum(xp.reshape(w, w.shape + (1,)) * xp.astype(Yk, xp.float64), axis=1)
    return num / xp.reshape(xp.sum(w, axis=1), (-1, 1))


def gather_rows(a, ind, xp):
    """``a[ind]`` for a 1-D or 2-D ``a`` and (n, K) indices: (n, K) or (n, K, E)."""
    flat = xp.take(a, xp.reshape(ind, (-1,)), axis=0)
    return xp.reshape(flat, tuple(ind.shape) + tuple(a.shape[1:]))


def check_targets(y, n: int, sp: Space, who: str, *, labels: bool):
    """``y`` on the device, checked as scikit-learn's ``validate_data`` (and,
    for a classifier's ``labels``, ``check_classification_targets``) check it:
    1-D or 2-D, n rows, numeric, finite (labels: no continuous values); its
    dtype kept, as on the host."""
    xp = sp.xp
    kind = sp.np_dtype(y).kind
    if kind not in "biuf":
        raise ValueError(f"{who}: 'y' must be numeric on a device, got dtype {y.dtype}")
    if y.ndim not in (1, 2):
        raise ValueError(f"{who}: 'y' must be 1-D or 2-D, got a {y.ndim}-D array of "
                         f"shape {tuple(y.shape)}")
    if y.shape[0] != n:
        raise ValueError("Found input variables with inconsistent numbers of samples: "
                         f"[{n}, {y.shape[0]}]")
    if kind == "f":
        if not bool(xp.all(xp.isfinite(y))):
            raise ValueError("Input y contains NaN or infinity.")
        if labels and bool(xp.any(y != xp.round(y))):
            raise ValueError(
                "Unknown label type: continuous. Maybe you are trying to fit a "
                "classifier, which expects discrete classes on a regression target "
                "with continuous values.")
    return y


def encode_labels(y, xp):
    """``(classes, codes)`` of each output column of ``y`` (2-D): the sorted
    distinct labels and every label's position among them (int64)."""
    classes, codes = [], []
    for c in range(y.shape[1]):
        col = y[:, c]
        values = xp.sort(xp.unique_values(col))
        classes.append(values)
        codes.append(xp.astype(xp.searchsorted(values, col), xp.int64))
    return classes, xp.stack(codes, axis=1)


def accuracy_xp(y, pred, sample_weight=None):
    """scikit-learn's ``accuracy_score`` of 1-D labels, in the arrays'
    namespace (CuPy without ``array_api_dispatch``)."""
    from ..._utils._array_api import compat  # noqa: PLC0415

    xp = compat().array_namespace(pred)
    hit = xp.astype(xp.reshape(y, pred.shape) == pred, xp.float64)
    if sample_weight is None:
        return float(xp.mean(hit))
    w = xp.asarray(np.asarray(sample_weight, np.float64), device=_device(pred))
    return float(xp.sum(w * hit) / xp.sum(w))


def split_rows(flat, indptr: np.ndarray) -> np.ndarray:
    """The object array of the rows ``flat[indptr[r]:indptr[r + 1]]`` of an
    array of any namespace (views)."""
    bounds = np.asarray(indptr).tolist()
    out = np.empty(len(bounds) - 1, dtype=object)
    for r, (s, e) in enumerate(zip(bounds[:-1], bounds[1:])):
        out[r] = flat[s:e]
    return out
