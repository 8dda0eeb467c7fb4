"""Input validation as scikit-learn's estimators do it, cast to the engine's floats.

scikit-learn's estimators validate ``X`` with ``dtype="numeric"``: strings and
bytes are refused, objects are parsed as numbers, integers and booleans kept.
The engine computes in float32 or float64, so our estimators ask
``validate_data`` for ``dtype=[np.float64, np.float32]`` instead, and that
reads arrays of strings as numbers (``"0.5"`` becomes 0.5). The helpers here
refuse them first, as ``dtype="numeric"`` does, then convert as before: one
place for the rule, used by every estimator whose scikit-learn counterpart
validates with ``dtype="numeric"`` (KernelDensity and SpectralClustering ask
scikit-learn for float64 and parse strings; they keep ``validate_data``).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.utils.validation import check_array, validate_data

__all__ = ["refuse_strings", "validate_numeric", "check_numeric"]


def refuse_strings(X, *, input_name: str = "X", who: str | None = None):
    """``X`` unchanged, or a ValueError where it holds strings or bytes.

    Parameters
    ----------
    X : array-like
        The input, before validation. NumPy arrays of kind ``U``, ``S`` or
        ``V`` and lists that NumPy reads as such are refused; DataFrames,
        sparse matrices, object arrays and numbers pass (scikit-learn parses
        objects, and a DataFrame's string columns, as numbers).
    input_name : str, default="X"
        The argument's name, for the message.
    who : str or None, default=None
        The estimator and method, for the message.

    Returns
    -------
    X : array-like
        ``X`` itself.

    Raises
    ------
    ValueError
        With scikit-learn's message (its tests match on it), naming the argument.
    """
    if sp.issparse(X) or hasattr(X, "dtypes") or X is None:
        return X
    dtype = getattr(X, "dtype", None)
    if dtype is None and isinstance(X, (list, tuple)):
        try:
            dtype = np.asarray(X).dtype
        except (ValueError, TypeError):  # ragged: scikit-learn's check says so
            return X
    if isinstance(dtype, np.dtype) and dtype.kind in "USV":
        where = f" (argument '{input_name}' of {who})" if who else (
            f" (argument '{input_name}')")
        raise ValueError(
            "dtype='numeric' is not compatible with arrays of bytes/strings. "
            f"Convert your data to numeric values explicitly instead{where}: got "
            f"an array of dtype {dtype}."
        )
    return X


def validate_numeric(estimator, X="no_validation", y="no_validation", *,
                     dtype=(np.float64, np.float32), **kwargs):
    """``validate_data(estimator, X, y, dtype=dtype, **kwargs)`` that refuses
    strings in ``X`` as ``dtype="numeric"`` does.

    Parameters
    ----------
    estimator : BaseEstimator
        The estimator (``n_features_in_`` and the feature names are set or
        checked by ``validate_data``).
    X, y : array-like or "no_validation"
        As ``sklearn.utils.validation.validate_data`` takes them.
    dtype : dtype or sequence of dtypes, default=(float64, float32)
        The dtypes the engine computes in; others are cast to the first.
    **kwargs
        Passed to ``validate_data``.

    Returns
    -------
    The output of ``validate_data``: ``X``, ``y`` or ``(X, y)``.
    """
    if not isinstance(X, str):
        refuse_strings(X, who=f"{type(estimator).__name__}")
    return validate_data(estimator, X, y, dtype=list(dtype) if isinstance(
        dtype, tuple) else dtype, **kwargs)


def check_numeric(X, *, dtype=(np.float64, np.float32), input_name: str = "X",
                  **kwargs):
    """``check_array(X, dtype=dtype, **kwargs)`` that refuses strings as
    ``dtype="numeric"`` does.

    Parameters
    ----------
    X : array-like
        The input.
    dtype : dtype or sequence of dtypes, default=(float64, float32)
        The dtypes accepted; others are cast to the first.
    input_name : str, default="X"
        The argument's name, for the messages.
    **kwargs
        Passed to ``check_array``.

    Returns
    -------
    ndarray or sparse matrix
        The checked array.
    """
    refuse_strings(X, input_name=input_name)
    return check_array(X, dtype=list(dtype) if isinstance(dtype, tuple) else dtype,
                       input_name=input_name, **kwargs)
