"""KNNImputer (Troyanskaya et al., Bioinformatics 2001) on K-min reductions.

scikit-learn's ``KNNImputer.transform`` computes, chunk by chunk, the
``nan_euclidean`` distances of the rows with a missing value to every
fitted row, then for each column the K nearest fitted rows that have it (the
donors) and their (weighted) mean. Here each column's receivers (the rows
missing it) meet its donors in one ``Kmin_argKmin`` reduction of the
``nan_euclidean`` formula, ``sqrt(D / n * sum of (x - y)^2 over the n
coordinates present in both)``, where a pair with no coordinate in common
counts as infinitely far (scikit-learn's NaN distance, which sorts last and
weighs 0). Nothing of size receivers x donors is stored. The rest is
scikit-learn's rule, step by step: receivers with no donor at a finite
distance take the column's mean, ``weights`` ('uniform', 'distance' with
its rule for a zero distance, or a callable of the K distances, NaN where
infinite) weigh the donors' values, empty columns are dropped (or set to 0
with ``keep_empty_features``), and the missing indicator is appended.

Distances are computed in float64 (float32 data too); donors at exactly
equal distances are taken by index where scikit-learn's ``argpartition``
takes them in its own order, so imputed values may differ where such a tie
straddles the K-th donor.
"""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import ClassVar

import numpy as np
from sklearn.utils.validation import FLOAT_DTYPES, check_is_fitted, validate_data

from ...lazy import Vi, Vj, maximum
from .._shared._fallback import FallbackMixin, is_sparse
from ..._utils._param_validation import Interval, StrOptions, validate_params
from ._indicator import ImputerBase, check_feature_names_in

__all__ = ["KNNImputer"]

#: The rdist of a pair with no coordinate present in both (larger than any
#: real one, finite so that the formula never forms 0 x inf).
_FAR = 1e300


def _get_mask(X: np.ndarray, missing_values) -> np.ndarray:
    """Where dense ``X`` holds ``missing_values`` (NaN: ``isnan``; pandas'
    ``NA``: ``isna``; else ``==``), as scikit-learn's imputers mask."""
    if type(missing_values).__name__ == "NAType":
        import pandas  # noqa: PLC0415

        return pandas.isna(X)
    if (isinstance(missing_values, Real) and not isinstance(missing_values, Integral)
            and math.isnan(missing_values)):
        if X.dtype.kind == "f":
            return np.isnan(X)
        if X.dtype.kind in "iu":
            return np.zeros(X.shape, dtype=bool)
        return X != X  # object arrays: NaN is the value unequal to itself
    return X == missing_values


def _points(X: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """(values with the missing ones as 0, 1 where present), in float64."""
    present = ~mask
    return np.concatenate([np.where(present, X, 0), present], axis=1).astype(
        np.float64)


def _nan_rdist(x_i, y_j):
    """``D / n * sum over the n coordinates present in both of (x - y)^2``,
    :data:`_FAR` where n = 0."""
    d = x_i.dim // 2
    both = x_i[d:] * y_j[d:]
    sq = (both * (x_i[:d] - y_j[:d]) ** 2).sum(-1)
    n = both.sum(-1)
    return d * sq / maximum(n, 0.5) + (n < 0.5) * _FAR


def _weights(dist: np.ndarray, weights) -> np.ndarray:
    """Each donor's weight, as scikit-learn's ``_get_weights`` then
    ``KNNImputer`` set them (0 for a donor at a NaN distance)."""
    if callable(weights):
        w = weights(dist)
        if w is None:  # scikit-learn: no weights, as 'uniform'
            weights = "uniform"
        else:
            w = np.array(w, dtype=np.float64)
    if weights == "uniform":
        w = np.ones_like(dist)
    elif weights == "distance":
        with np.errstate(divide="ignore"):
            w = 1.0 / dist
        inf_mask = np.isinf(w)
        inf_row = np.any(inf_mask, axis=1)
        w[inf_row] = inf_mask[inf_row]
    w[np.isnan(dist) | np.isnan(w)] = 0.0
    return w


class KNNImputer(FallbackMixin, ImputerBase):
    """Impute missing values with the mean of the K nearest donors.

    scikit-learn's :class:`sklearn.impute.KNNImputer` (constructor,
    attributes, outputs), with each column's neighbour search one K-min
    reduction of the ``nan_euclidean`` formula over the rows that have the
    column: no distance matrix, no chunk of one, at any size.

    Parameters
    ----------
    missing_values : int, float, str, np.nan or None, default=np.nan
        The placeholder of a missing value.
    n_neighbors : int, default=5
        Donors per imputed value.
    weights : {'uniform', 'distance'} or callable, default='uniform'
        Equal weights, inverse distances (a donor at distance 0 takes all
        the weight), or a function of the (n, K) array of distances
        returning weights of the same shape.
    metric : {'nan_euclidean'} or callable, default='nan_euclidean'
        The distance; a callable goes to scikit-learn's KNNImputer (see
        Notes).
    copy : bool, default=True
        Whether to impute a copy of X (False: in place where possible).
    add_indicator : bool, default=False
        Append scikit-learn's MissingIndicator columns.
    keep_empty_features : bool, default=False
        Keep the columns with no value at fit, imputed with 0.
    backend : {'auto', 'cpu', 'cuda', 'numpy'} or None, default=None
        Where the reductions run; None: the configured backend.

    Attributes
    ----------
    indicator_ : MissingIndicator or None
        The indicator, with ``add_indicator``.
    n_features_in_ : int
        Number of features seen during :meth:`fit`.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features, when X had string column names.

    Notes
    -----
    A callable ``metric`` (a function of two rows) and sparse X are fitted
    by scikit-learn's own :class:`sklearn.impute.KNNImputer` with the same
    parameters; it is kept in ``fallback_`` and every later call goes to it.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.estimators import KNNImputer
    >>> X = [[1, 2, np.nan], [3, 4, 3], [np.nan, 6, 5], [8, 8, 7]]
    >>> KNNImputer(n_neighbors=2).fit_transform(X)
    array([[1. , 2. , 4. ],
           [3. , 4. , 3. ],
           [5.5, 6. , 5. ],
           [8. , 8. , 7. ]])
    """

    _sklearn_class = "sklearn.impute.KNNImputer"
    _parameter_constraints: ClassVar[dict] = {
        **ImputerBase._parameter_constraints,
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
        "weights": [StrOptions({"uniform", "distance"}), callable],
        "metric": [StrOptions({"nan_euclidean"}), callable],
        "copy": ["boolean"],
        "backend": ["backend"],
    }

    def __init__(self, *, missing_values=np.nan, n_neighbors=5, weights="uniform",
                 metric="nan_euclidean", copy=True, add_indicator=False,
                 keep_empty_features=False, backend=None):
        super().__init__(missing_values=missing_values, add_indicator=add_indicator,
                         keep_empty_features=keep_empty_features)
        self.n_neighbors = n_neighbors
        self.weights = weights
        self.metric = metric
        self.copy = copy
        self.backend = backend

    def _finite(self):
        nan = isinstance(self.missing_values, float) and np.isnan(self.missing_values)
        return "allow-nan" if nan or self.missing_values is None else True

    def fit(self, X, y=None):
        """Keep the donors.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The data, with missing values.
        y : None
            Ignored.

        Returns
        -------
        self : KNNImputer
            The fitted imputer.
        """
        validate_params(self)
        if callable(self.metric) or is_sparse(X):
            why = "sparse X" if is_sparse(X) else "a callable metric"
            return self._fit_fallback(why, X)
        self._drop_fallback()
        X = validate_data(self, X, accept_sparse=False, dtype=FLOAT_DTYPES,
                          ensure_all_finite=self._finite(), copy=self.copy)
        self._fit_X = X
        self._mask_fit_X = _get_mask(X, self.missing_values)
        self._valid_mask = ~np.all(self._mask_fit_X, axis=0)
        self._fit_indicator(X)
        return self

    def transform(self, X):
        """Impute every missing value of X.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The data to complete.

        Returns
        -------
        X : ndarray of shape (n_samples, n_output_features)
            The completed data (the columns empty at fit dropped, unless
            ``keep_empty_features``), then the indicator's columns.
        """
        if self._delegating():
            return self.fallback_.transform(X)
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse=False, dtype=FLOAT_DTYPES,
                          force_writeable=True, ensure_all_finite=self._finite(),
                          copy=self.copy, reset=False)
        mask = _get_mask(X, self.missing_values)
        valid = self._valid_mask
        X_indicator = self._transform_indicator(X)
        if np.any(mask[:, valid]):
            self._impute(X, mask)
        if self.keep_empty_features:
            Xc = X
            Xc[:, ~valid] = 0
        else:
            Xc = X[:, valid]
        return self._concatenate_indicator(Xc, X_indicator)

    def _impute(self, X: np.ndarray, mask: np.ndarray) -> None:
        """Fill the missing values of the valid columns of X, in place."""
        rows = np.flatnonzero(mask[:, self._valid_mask].any(axis=1))
        queries = _points(X[rows], mask[rows])
        donors_of = ~self._mask_fit_X
        fitted = _points(self._fit_X, self._mask_fit_X)
        for col in np.flatnonzero(self._valid_mask):
            receivers = np.flatnonzero(mask[rows, col])
            if not len(receivers):
                continue
            donors = np.flatnonzero(donors_of[:, col])
            k = min(self.n_neighbors, len(donors))
            F = _nan_rdist(Vi(queries[receivers]), Vj(fitted[donors]))
            rd, idx = F.Kmin_argKmin(k, axis=1, backend=self.backend)
            rd, idx = rd.reshape(-1, k), idx.reshape(-1, k)
            with np.errstate(invalid="ignore"):
                dist = np.where(rd < _FAR / 2, np.sqrt(np.maximum(rd, 0)), np.nan)
            X[rows[receivers], col] = self._values(dist, donors[idx], col)

    def _values(self, dist: np.ndarray, donors: np.ndarray, col: int) -> np.ndarray:
        """The imputed values of a column from the K donors of each receiver
        (the column's mean where none is at a finite distance)."""
        fit_col = self._fit_X[:, col]
        out = np.empty(len(dist), dtype=np.float64)
        none = np.isnan(dist[:, 0])
        if none.any():
            out[none] = np.ma.array(fit_col, mask=self._mask_fit_X[:, col]).mean()
        some = ~none
        w = _weights(dist[some], self.weights)
        out[some] = np.ma.average(fit_col[donors[some]], axis=1, weights=w).data
        return out

    def get_feature_names_out(self, input_features=None):
        """The output features' names.

        Parameters
        ----------
        input_features : array-like of str or None, default=None
            The input features' names (default: ``feature_names_in_``, else
            ``x0, x1, ...``).

        Returns
        -------
        feature_names_out : ndarray of str objects
            The kept columns, then the indicator's.
        """
        if self._delegating():
            return self.fallback_.get_feature_names_out(input_features)
        check_is_fitted(self, "n_features_in_")
        input_features = check_feature_names_in(self, input_features)
        names = input_features[self._valid_mask]
        return self._concatenate_indicator_feature_names_out(names, input_features)
