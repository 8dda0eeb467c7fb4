"""Targets of the k-NN estimators: the neighbours' weights (scikit-learn's
``weights`` rules, per query and per CSR entry), their votes and means, and
a classifier's labels (``classes_`` and their codes).

The per-query functions take arrays of any namespace (``xp``: NumPy on the
host, the device's namespace on a device; scikit-learn's ``get_namespace``
pattern); :func:`votes` keeps a NumPy twin (its docstring says why)."""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import DataConversionWarning
from sklearn.utils.multiclass import check_classification_targets

from ..._utils._array_api import compat
from .search._formula import split_rows

__all__ = ["csr_weights", "gather_rows", "store_labels", "votes",
           "warn_column_vector", "weighted_mean", "weights_of"]


def weights_of(dist, weights, xp=None):
    """Neighbour weights from an (n, K) array of distances of the namespace
    ``xp`` (scikit-learn's ``weights`` rules), float64, or None for
    'uniform': 'distance' gives 1/d, and a query at distance 0 of some
    fitted points (1/d infinite) takes their votes only; a callable maps
    ``dist`` to weights of its shape."""
    if weights is None or (isinstance(weights, str) and weights == "uniform"):
        return None
    xp = compat().array_namespace(dist) if xp is None else xp
    if not isinstance(weights, str):
        return xp.astype(xp.asarray(weights(dist)), xp.float64)
    with np.errstate(divide="ignore", over="ignore"):  # 1/d, in their dtype
        inverse = 1.0 / dist
    inf = xp.isinf(inverse)
    inf_row = xp.reshape(xp.any(inf, axis=1), (-1, 1))
    return xp.astype(xp.where(inf_row, xp.astype(inf, inverse.dtype), inverse),
                     xp.float64)


def votes(codes, w, n_classes: int, xp):
    """(n, n_classes) float64: per query, the weights ``w`` (n, K, or None:
    ones) of each class among its neighbours' label ``codes`` (n, K),
    normalised."""
    if isinstance(codes, np.ndarray):
        # NumPy's one bincount; the Array API has none, hence the loop over
        # the classes below (n_classes passes over the (n, K) codes)
        return _votes_numpy(codes, w, n_classes)
    if w is None:
        w = xp.ones(codes.shape, dtype=xp.float64, device=compat().device(codes))
    cols = [xp.sum(w * xp.astype(codes == c, xp.float64), axis=1)
            for c in range(n_classes)]
    out = xp.stack(cols, axis=1)
    return out / xp.sum(out, axis=1, keepdims=True)


def _votes_numpy(codes, w, n_classes: int):
    n = codes.shape[0]
    w = np.ones(codes.shape) if w is None else w
    flat = (np.arange(n)[:, None] * n_classes + codes).ravel()
    out = np.bincount(flat, weights=np.ravel(w), minlength=n * n_classes)
    out = out.reshape(n, n_classes)
    return out / out.sum(axis=1, keepdims=True)


def weighted_mean(Yk, w, xp):
    """(n, n_outputs): the mean of the neighbours' targets ``Yk`` (n, K,
    n_outputs), weighted by ``w`` (n, K, float64) unless None (then in
    ``Yk``'s dtype; integer targets: float64, as NumPy's mean)."""
    if w is None:
        floating = xp.isdtype(Yk.dtype, "real floating")
        return xp.mean(Yk if floating else xp.astype(Yk, xp.float64), axis=1)
    num = xp.sum(xp.reshape(w, w.shape + (1,)) * xp.astype(Yk, xp.float64), axis=1)
    return num / xp.reshape(xp.sum(w, axis=1), (-1, 1))


def gather_rows(a, ind, xp):
    """``a[ind]`` for a 1-D or 2-D ``a`` and (n, K) indices: (n, K) or (n, K, E)."""
    flat = xp.take(a, xp.reshape(ind, (-1,)), axis=0)
    return xp.reshape(flat, tuple(ind.shape) + tuple(a.shape[1:]))


def csr_weights(dist, indptr, weights):
    """The weights of the CSR entries ``dist`` (rows ``indptr``), flat, or None.

    The rules of :func:`weights_of` per row, vectorised: 'distance' gives 1/d,
    except in a row holding a distance 0, whose entries weigh 1 at distance 0
    and 0 elsewhere (scikit-learn's rule); a callable gets, as in
    scikit-learn, the object array of per-query distance arrays and returns
    one array of weights per query.
    """
    if weights is None or (isinstance(weights, str) and weights == "uniform"):
        return None
    if isinstance(weights, str):
        rows = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
        zero = dist == 0
        has_zero = np.zeros(len(indptr) - 1, dtype=bool)
        has_zero[rows[zero]] = True
        with np.errstate(divide="ignore"):
            w = 1.0 / dist
        at = has_zero[rows]
        w[at] = zero[at]
        return w
    rows = weights(split_rows(dist, indptr))
    counts = np.diff(indptr)
    if len(rows) != len(counts) or any(
            np.shape(r) != (c,) for r, c in zip(rows, counts.tolist())):
        raise ValueError(
            "The 'weights' callable must return one array of weights per query, "
            "of the shape of that query's distances (an object array, as the "
            "distances it was given)."
        )
    return np.concatenate([np.asarray(r) for r in rows])


def warn_column_vector(y, stacklevel: int) -> None:
    """scikit-learn's warning for labels given as an (n, 1) column."""
    if y.ndim == 2 and y.shape[1] == 1:
        warnings.warn(
            "A column-vector y was passed when a 1d array was expected. Please "
            "change the shape of y to (n_samples,), for example using ravel().",
            DataConversionWarning,
            stacklevel=stacklevel,
        )


def store_labels(est, y) -> None:
    """A classifier's ``classes_``, ``outputs_2d_`` and label codes ``_y``."""
    y = np.asarray(y)
    warn_column_vector(y, stacklevel=4)
    est.outputs_2d_ = y.ndim == 2 and y.shape[1] != 1
    y2 = y.reshape(len(y), -1)
    check_classification_targets(y2)
    pairs = [np.unique(y2[:, k], return_inverse=True) for k in range(y2.shape[1])]
    est.classes_ = [c for c, _ in pairs]
    est._y = np.stack([inv.ravel() for _, inv in pairs], axis=1).astype(np.intp)
    if not est.outputs_2d_:
        est.classes_, est._y = est.classes_[0], est._y[:, 0]

