"""Targets of the k-NN estimators: the neighbours' weights (scikit-learn's
``weights`` rules, per query and per CSR entry) and a classifier's labels
(``classes_`` and their codes)."""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import DataConversionWarning
from sklearn.utils.multiclass import check_classification_targets

from .search import _formula as S

__all__ = ["csr_weights", "store_labels", "warn_column_vector", "weights_of"]


def weights_of(dist, weights):
    """Neighbour weights from an (n, K) array of distances (scikit-learn's
    ``weights`` rules): None for 'uniform'; 'distance': 1/d, and a query at
    distance 0 of some fitted points takes their votes only; a callable maps
    ``dist`` to weights."""
    if weights is None or (isinstance(weights, str) and weights == "uniform"):
        return None
    if not isinstance(weights, str):
        return weights(dist)
    return _inverse(dist)


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
    rows = weights(S.split_rows(dist, indptr))
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


def _inverse(dist):
    with np.errstate(divide="ignore"):
        w = 1.0 / dist
    inf_mask = np.isinf(w)
    inf_row = inf_mask.any(axis=1)
    w[inf_row] = inf_mask[inf_row]
    return w
