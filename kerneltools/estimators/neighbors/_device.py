"""The k-NN estimators on Array API and device arrays (issue 24).

Where an input is computed follows :mod:`kerneltools._utils._array_api` (its
docstring is the design). The estimators' code is one path written with the
array namespace (``xp``); this module holds what only the device needs, and
says where the rest is:

- **Where.** :class:`~._base.NeighborsBase` validates device inputs on the
  device, keeps the fitted arrays (``_fit_X``, ``_y``) in the namespace and
  on the device of the inputs (scikit-learn's ``check_array_api_input``
  asks it), reads the fit's place back from an empty array of that
  namespace (``_fit_like``) at each query and refuses queries in another
  namespace or on another device (``check_same_place``). NumPy inputs with
  ``backend="cuda"`` are validated on the host and their fitted points
  copied to the device once, at the first query (kept with the search,
  never pickled); a pruned fit's NumPy queries stay on the host.
- **Which configurations.** :func:`device_serves`: the metrics whose formula
  and distance conversion need no host arithmetic (euclidean,
  sqeuclidean, manhattan, chebyshev, unweighted minkowski), as the effective
  metric of the estimator's parameters. Others (seuclidean, mahalanobis,
  cosine, ..., LazyTensor callables) compute a device array on the host: one
  copy of the queries per call, results moved back.
- **The searches** of device queries (:mod:`.search._device`): brute force
  on the device, or the pruned cells on host copies; the search package's
  :func:`~.search.choose` picks one.
- **Targets on the device**: :func:`check_targets` and :func:`encode_labels`
  (the host goes through scikit-learn's validation, which takes strings and
  object labels and converts to NumPy); :func:`accuracy_xp`. Weights, votes
  and means are in :mod:`._targets`, one version for every namespace.

Radius queries of a device fit run on the host (one copy of the fitted
points per fit, of the queries per call); their per-row arrays are moved
back to the input's namespace and device as views of one flat array each,
in a NumPy object array (the Array API has no ragged arrays; scikit-learn
1.9's k-NN estimators do not support ``array_api_dispatch`` at all). The
graph methods return SciPy sparse matrices, on the host.
"""

from __future__ import annotations

import numpy as np

from ..._utils._array_api import Space, compat
from . import _metrics

__all__ = ["DEVICE_METRICS", "accuracy_xp", "check_targets", "device_serves",
           "encode_labels"]

#: Effective metrics served on the device (see the module's docstring).
DEVICE_METRICS = frozenset({"euclidean", "sqeuclidean", "manhattan", "chebyshev",
                            "minkowski"})


def device_serves(est) -> bool:
    """Whether the device path serves ``est`` (its class, its metric: see
    the module's docstring)."""
    metric = est.metric
    if not (est._ARRAY_API and isinstance(metric, str)
            and metric in _metrics.VALID_METRICS):
        return False
    try:
        name, params = _metrics.effective_metric(est.metric, est.p, est.metric_params)
    except Exception:  # noqa: BLE001 - bad parameters: the host path reports them
        return False
    return name in DEVICE_METRICS and params.get("w") is None and set(params) <= {"p"}


# check_targets and encode_labels have host counterparts that are not
# twins: the host validates with scikit-learn's validate_data and
# check_classification_targets, and encodes with np.unique, which take
# strings and object labels (no array namespace holds them) and give
# scikit-learn's own messages.
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
    xp = compat().array_namespace(pred)
    hit = xp.astype(xp.reshape(y, pred.shape) == pred, xp.float64)
    if sample_weight is None:
        return float(xp.mean(hit))
    w = xp.asarray(np.asarray(sample_weight, np.float64), device=compat().device(pred))
    return float(xp.sum(w * hit) / xp.sum(w))
