"""Radius-neighbour classifier and regressor: votes and means within a radius.

Each query's neighbours come from :meth:`RadiusQueries.radius_neighbors`
as CSR rows (on the CPU in up to 3 features the radius kernel of
:func:`kerneltools.ranges.radius_csr` over nearby cells, in 16 or more the
BLAS tiles of :mod:`.search._blas`; else a radius-test count, then a
K-min of that size, on the engine); the votes and means follow
scikit-learn's rules in a few vectorised passes over those rows:
``weights``, ``outlier_label`` for queries with no neighbour, NaN
predictions (with scikit-learn's warning) for the regressor.
"""

from __future__ import annotations

import warnings
from typing import ClassVar

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from ..._utils._param_validation import StrOptions
from ._base import NeighborsBase
from ._docs import _ATTRIBUTES_DOC, _COMMON_DOC, _FALLBACK_DOC
from ._queries import RadiusQueries
from ._targets import csr_weights, store_labels

__all__ = ["RadiusNeighborsClassifier", "RadiusNeighborsRegressor"]

_RADIUS_DOC = """

    Parameters
    ----------
    radius : float, default=1.0
        The neighbours of a query are the fitted points within this distance.
    weights : {'uniform', 'distance'}, callable or None, default='uniform'
        'uniform' (or None): equal votes; 'distance': votes weighted by
        1 / distance (a query at distance 0 of fitted points takes the votes
        of those only); a callable maps the object array of per-query
        distance arrays to weights of the same shapes."""


def _row_sums(a: np.ndarray, indptr: np.ndarray) -> np.ndarray:
    """The sums of the CSR rows ``a[indptr[r]:indptr[r + 1]]`` (0 for an empty
    row), in one ``np.add.reduceat`` over the non-empty rows' starts."""
    counts = np.diff(indptr)
    out = np.zeros((len(counts),) + a.shape[1:], dtype=a.dtype)
    full = counts > 0
    if full.any():
        out[full] = np.add.reduceat(a, indptr[:-1][full], axis=0)
    return out


def _weighted_means(y, ind, w, indptr, dtype) -> np.ndarray:
    """Each CSR row's mean of ``y[ind]``, weighted by ``w`` (None: uniform),
    computed in ``dtype`` (np.average's rule and error for a zero weight sum);
    NaN for an empty row."""
    counts = np.diff(indptr)
    vals = y[ind].astype(dtype, copy=False)
    if w is None:
        total, scale = _row_sums(vals, indptr), counts.astype(dtype)
    else:
        w = w.astype(dtype, copy=False)
        total, scale = _row_sums(vals * w[:, None], indptr), _row_sums(w, indptr)
        if np.any(scale[counts > 0] == 0):
            raise ZeroDivisionError("Weights sum to zero, can't be normalized")
    with np.errstate(invalid="ignore", divide="ignore"):
        return total / scale[:, None]


def _is_arraylike(v) -> bool:
    return not isinstance(v, str) and (
        hasattr(v, "__len__") or hasattr(v, "shape") or hasattr(v, "__array__"))


class _RadiusSupervised(RadiusQueries, NeighborsBase):
    _parameter_constraints: ClassVar[dict] = {
        **RadiusQueries._parameter_constraints,
        "weights": [StrOptions({"uniform", "distance"}), callable, None],
    }

    def __init__(
        self,
        radius=1.0,
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
        self.radius = radius
        self.weights = weights
        self.algorithm = algorithm
        self.leaf_size = leaf_size
        self.p = p
        self.metric = metric
        self.metric_params = metric_params
        self.n_jobs = n_jobs
        self.backend = backend
        self.dtype = dtype

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
        return self._fit_supervised(X, y)

    def _neighbor_rows(self, X):
        """(distances, indices, indptr): the CSR rows of the queries'
        neighbours within ``radius``, in index order; the distances in
        float64, as scikit-learn's weights see them for float32 data too."""
        check_is_fitted(self)
        dist, ind, indptr = self._radius_csr(X, None, sort_results=False)
        return dist.astype(np.float64, copy=False), ind, indptr


class RadiusNeighborsClassifier(ClassifierMixin, _RadiusSupervised):
    __doc__ = (
        """Classifier voting among the neighbours within a radius."""
        + _RADIUS_DOC
        + _COMMON_DOC
        + """
    outlier_label : {manual label, 'most_frequent'}, default=None
        The label of a query without neighbours: a label (or one per output),
        'most_frequent' (the most frequent training label), or None (such a
        query raises ValueError).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,) or list of such arrays
        The class labels (one array per output for multi-output y).
    outlier_label_ : list or None
        The outlier label of each output.
    outputs_2d_ : bool
        Whether y was 2-D (several outputs) at fit."""
        + _ATTRIBUTES_DOC
        + _FALLBACK_DOC
        + """
    Examples
    --------
    >>> from kerneltools.estimators.neighbors import RadiusNeighborsClassifier
    >>> X, y = [[0.0], [1.0], [2.0], [3.0]], [0, 0, 1, 1]
    >>> clf = RadiusNeighborsClassifier(radius=1.0).fit(X, y)
    >>> clf.predict([[1.4]])
    array([0])
    >>> clf.predict_proba([[1.5]])
    array([[0.5, 0.5]])
    """
    )

    _parameter_constraints: ClassVar[dict] = {
        **_RadiusSupervised._parameter_constraints,
        "outlier_label": [object],
    }

    def __init__(
        self,
        radius=1.0,
        *,
        weights="uniform",
        algorithm="auto",
        leaf_size=30,
        p=2,
        metric="minkowski",
        outlier_label=None,
        metric_params=None,
        n_jobs=None,
        backend=None,
        dtype=None,
    ):
        super().__init__(
            radius, weights=weights, algorithm=algorithm, leaf_size=leaf_size, p=p,
            metric=metric, metric_params=metric_params, n_jobs=n_jobs,
            backend=backend, dtype=dtype,
        )
        self.outlier_label = outlier_label

    def _store_targets(self, y) -> None:
        store_labels(self, y)
        classes = self.classes_ if self.outputs_2d_ else [self.classes_]
        labels = self._y.reshape(len(self._y), -1)
        self.outlier_label_ = _outlier_labels(self.outlier_label, classes, labels)

    def predict_proba(self, X):
        """Class probabilities: the (weighted) votes within the radius, normalised.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features) or None
            The queries (None: the fitted points, each excluded from its own
            neighbours).

        Returns
        -------
        p : ndarray of shape (n_queries, n_classes), or a list of such arrays
            (one per output). A query without neighbours gets probability 1
            for its outlier label (0 everywhere, with a warning, if that label
            is not a class).
        """
        if self._delegating():
            return self.fallback_.predict_proba(X)
        dist, ind, indptr = self._neighbor_rows(X)
        counts = np.diff(indptr)
        outliers = np.flatnonzero(counts == 0)
        if self.outlier_label_ is None and outliers.size > 0:
            raise ValueError(
                f"No neighbors found for test samples {outliers!r}, you can try using "
                "larger radius, giving a label for outliers, or considering removing "
                "them from your dataset."
            )
        w = csr_weights(dist, indptr, self.weights)
        rows = np.repeat(np.arange(len(counts)), counts)
        classes = self.classes_ if self.outputs_2d_ else [self.classes_]
        labels = self._y.reshape(len(self._y), -1)[ind]
        out = []
        for k, classes_k in enumerate(classes):
            m = classes_k.size
            # all queries' votes in one bincount over (query, class) cells; each
            # cell sums its votes in float64 in entry order, as one bincount
            # per query does
            proba = np.bincount(rows * m + labels[:, k], w, minlength=len(counts) * m)
            proba = proba.reshape(len(counts), m).astype(np.float64, copy=False)
            if outliers.size > 0:
                hit = np.flatnonzero(classes_k == self.outlier_label_[k])
                if hit.size == 1:
                    proba[outliers, hit[0]] = 1.0
                else:
                    warnings.warn(
                        f"Outlier label {self.outlier_label_[k]} is not in training "
                        "classes. All class probabilities of outliers will be "
                        "assigned with 0.",
                        stacklevel=2,
                    )
            norm = proba.sum(axis=1)[:, None]
            norm[norm == 0.0] = 1.0
            out.append(proba / norm)
        return out if self.outputs_2d_ else out[0]

    def predict(self, X):
        """The class with the most (weighted) votes within the radius.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features) or None
            The queries (None: the fitted points, each excluded from its own
            neighbours).

        Returns
        -------
        y : ndarray of shape (n_queries,) or (n_queries, n_outputs)
            Predicted labels: the outlier label for queries without neighbours.
        """
        if self._delegating():
            return self.fallback_.predict(X)
        probs = self.predict_proba(X)
        classes = self.classes_ if self.outputs_2d_ else [self.classes_]
        probs = probs if self.outputs_2d_ else [probs]
        y = np.empty((probs[0].shape[0], len(classes)), dtype=classes[0].dtype)
        for k, prob in enumerate(probs):
            y[:, k] = classes[k].take(prob.argmax(axis=1))
            empty = np.flatnonzero((prob == 0).all(axis=1))
            if empty.size:
                y[empty, k] = self.outlier_label_[k]
        return y if self.outputs_2d_ else y.ravel()

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_label = True
        return tags


def _outlier_labels(outlier_label, classes, labels):
    """``outlier_label_`` from the parameter, checked as scikit-learn does."""
    if outlier_label is None:
        return None
    if isinstance(outlier_label, str) and outlier_label == "most_frequent":
        return [c[np.bincount(labels[:, k]).argmax()] for k, c in enumerate(classes)]
    if _is_arraylike(outlier_label):
        if len(outlier_label) != len(classes):
            raise ValueError(
                f"The length of outlier_label: {outlier_label} is inconsistent with "
                f"the output length: {len(classes)}"
            )
        out = outlier_label
    else:
        out = [outlier_label] * len(classes)
    for c, label in zip(classes, out):
        if _is_arraylike(label):
            raise TypeError(
                f"The outlier_label of classes {c} is supposed to be a scalar, got "
                f"{label}."
            )
        if np.append(c, label).dtype != c.dtype:
            raise TypeError(
                f"The dtype of outlier_label {label} is inconsistent with classes "
                f"{c} in y."
            )
    return out


class RadiusNeighborsRegressor(RegressorMixin, _RadiusSupervised):
    __doc__ = (
        """Regression by the (weighted) mean target of the neighbours within a
    radius."""
        + _RADIUS_DOC
        + _COMMON_DOC
        + """
    Attributes
    ----------"""
        + _ATTRIBUTES_DOC
        + _FALLBACK_DOC
        + """
    Examples
    --------
    >>> from kerneltools.estimators.neighbors import RadiusNeighborsRegressor
    >>> X, y = [[0.0], [1.0], [2.0], [3.0]], [0.0, 0.0, 1.0, 1.0]
    >>> reg = RadiusNeighborsRegressor(radius=1.0).fit(X, y)
    >>> reg.predict([[1.5]])
    array([0.5])
    """
    )

    def predict(self, X):
        """The (weighted) mean target of the neighbours within the radius.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features) or None
            The queries (None: the fitted points, each excluded from its own
            neighbours).

        Returns
        -------
        y : ndarray of shape (n_queries,) or (n_queries, n_outputs)
            Predicted targets; NaN (with a warning) for a query without
            neighbours.
        """
        if self._delegating():
            return self.fallback_.predict(X)
        dist, ind, indptr = self._neighbor_rows(X)
        w = csr_weights(dist, indptr, self.weights)
        y = self._y.reshape(len(self._y), -1)
        counts = np.diff(indptr)
        # scikit-learn's np.mean / np.average per row compute in y's float
        # dtype (float64 for an integer y), promoted with the weights' dtype
        own = y.dtype if y.dtype.kind == "f" else np.dtype(np.float64)
        if w is None:
            pred = _weighted_means(y, ind, None, indptr, own)
        else:
            pred = _weighted_means(y, ind, w, indptr, np.result_type(own, w.dtype))
            if isinstance(self.weights, str) and own != pred.dtype:
                # a row at distance 0 of some fitted points: scikit-learn's
                # weights there are booleans, so that row is averaged in y's dtype
                zero = np.zeros(len(counts), dtype=bool)
                zero[np.repeat(np.arange(len(counts)), counts)[dist == 0]] = True
                pred[zero] = _weighted_means(y, ind, w, indptr, own)[zero]
        # an integer y's empty rows get NaN too, where scikit-learn casts NaN
        # into y's dtype (a huge negative number, without its warning)
        pred[counts == 0] = np.nan
        if np.any(np.isnan(pred)):
            warnings.warn(
                "One or more samples have no neighbors within specified radius; "
                "predicting NaN.",
                stacklevel=2,
            )
        return pred.ravel() if self._y.ndim == 1 else pred
