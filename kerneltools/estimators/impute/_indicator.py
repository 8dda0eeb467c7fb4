"""What every imputer here shares: ``missing_values``, ``add_indicator``,
``keep_empty_features`` and the missing-value indicator's columns.

scikit-learn's imputers share a private base class (``sklearn.impute._base.
_BaseImputer``) that private modules move between releases; this is ours,
with the same public behaviour: the constructor parameters and their
constraints (the same error message), ``indicator_`` (a public
:class:`sklearn.impute.MissingIndicator` fitted on the data, with
``error_on_new=False``), the indicator's columns appended after the imputed
ones, and the ``allow_nan`` tag where the missing value is NaN.
"""

from __future__ import annotations

import math
import numbers
from typing import ClassVar

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.impute import MissingIndicator

__all__ = ["ImputerBase", "check_feature_names_in", "is_scalar_nan"]


def is_scalar_nan(x) -> bool:
    """Whether ``x`` is a float NaN (not an int, not a bool, not an array)."""
    return (isinstance(x, numbers.Real) and not isinstance(x, numbers.Integral)
            and math.isnan(x))


def _is_pandas_na(x) -> bool:
    try:
        import pandas  # noqa: PLC0415
    except ImportError:
        return False
    return x is pandas.NA


class _MissingValues:
    """scikit-learn's constraint on ``missing_values`` and its wording."""

    def is_satisfied_by(self, v) -> bool:
        if isinstance(v, (bool, np.bool_)):
            return False
        return (isinstance(v, (numbers.Integral, numbers.Real, str)) or v is None
                or _is_pandas_na(v))

    def __str__(self):
        return ("an instance of 'int', a float in the range [-inf, inf], numpy.nan, "
                "pandas.NA, an instance of 'str' or None")


def check_feature_names_in(estimator, input_features=None) -> np.ndarray:
    """The input features' names: ``input_features`` checked against the
    fitted names and count, else ``feature_names_in_``, else ``x0, x1, ...``."""
    names_in = getattr(estimator, "feature_names_in_", None)
    n_in = getattr(estimator, "n_features_in_", None)
    if input_features is not None:
        input_features = np.asarray(input_features, dtype=object)
        if names_in is not None and not np.array_equal(names_in, input_features):
            raise ValueError("input_features is not equal to feature_names_in_")
        if n_in is not None and len(input_features) != n_in:
            raise ValueError(
                "input_features should have length equal to number of "
                f"features ({n_in}), got {len(input_features)}")
        return input_features
    if names_in is not None:
        return names_in
    if n_in is None:
        raise ValueError("Unable to generate feature names without n_features_in_")
    return np.asarray([f"x{i}" for i in range(n_in)], dtype=object)


class ImputerBase(TransformerMixin, BaseEstimator):
    """The shared parameters and the missing-value indicator."""

    _parameter_constraints: ClassVar[dict] = {
        "missing_values": [_MissingValues()],
        "add_indicator": ["boolean"],
        "keep_empty_features": ["boolean"],
    }

    def __init__(self, *, missing_values=np.nan, add_indicator=False,
                 keep_empty_features=False):
        self.missing_values = missing_values
        self.add_indicator = add_indicator
        self.keep_empty_features = keep_empty_features

    def _fit_indicator(self, X) -> None:
        """Fit ``indicator_`` on the data X (before any imputation)."""
        self.indicator_ = None
        if self.add_indicator:
            self.indicator_ = MissingIndicator(
                missing_values=self.missing_values, error_on_new=False).fit(X)

    def _transform_indicator(self, X):
        """The indicator's columns of the data X (before any imputation)."""
        if self.add_indicator:
            return self.indicator_.transform(X)
        return None

    def _concatenate_indicator(self, X_imputed, X_indicator):
        if not self.add_indicator:
            return X_imputed
        return np.hstack((X_imputed, X_indicator))

    def _concatenate_indicator_feature_names_out(self, names, input_features):
        if not self.add_indicator:
            return names
        return np.concatenate([names, self.indicator_.get_feature_names_out(
            input_features)])

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = is_scalar_nan(self.missing_values)
        return tags
