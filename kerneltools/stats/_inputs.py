"""The inputs of :mod:`kerneltools.stats`, checked before any computation
(private): samples, counts and backends, every error naming the argument and
the function the user called (``caller``)."""

from __future__ import annotations

from collections.abc import Mapping
from numbers import Integral

import numpy as np

from ..config import check_backend as _config_backend

__all__ = ["check_backend", "check_count", "check_kernel_params", "check_pair",
           "check_random_state", "check_sample"]

#: Why the unbiased MMD needs two samples of each (said where one is given).
U_STATISTIC = ("the unbiased U-statistic needs a pair; unbiased=False, the "
               "V-statistic, is defined from 1")


def check_sample(X, name: str, caller: str, min_samples: int = 2,
                 why: str = "") -> np.ndarray:
    """A sample as a 2-D real array (a 1-D one is one feature), finite, of at
    least ``min_samples`` rows (``why``: the reason, said when too few)."""
    try:
        X = np.asarray(X)
    except (TypeError, ValueError) as exc:  # ragged nested sequences
        raise ValueError(f"{caller}: '{name}' must be a 2-D array (n_samples, "
                         f"n_features); {exc}") from None
    if X.dtype.kind not in "biuf":
        raise TypeError(f"{caller}: '{name}' must be a real numeric array; got {X.dtype}")
    if X.ndim == 1:
        X = X[:, None]
    if X.ndim != 2 or X.shape[0] < min_samples or X.shape[1] == 0:
        need = "1 sample" if min_samples == 1 else f"{min_samples} samples"
        raise ValueError(
            f"{caller}: '{name}' must be a 2-D array (n_samples, n_features) with at "
            f"least {need} and 1 feature{f' ({why})' if why else ''}; got shape "
            f"{X.shape}"
        )
    if not np.isfinite(X).all():
        raise ValueError(f"{caller}: '{name}' contains NaN or infinity")
    return X.astype(np.float64) if X.dtype.kind in "biu" else X


def check_pair(X, Y, caller: str, same_n=False, min_samples=2, why=""):
    """The samples ``X`` and ``Y`` (:func:`check_sample`) with the same number
    of features (``same_n``: paired, of the same length), in one dtype."""
    X = check_sample(X, "X", caller, min_samples, why)
    Y = check_sample(Y, "Y", caller, min_samples, why)
    if not same_n and X.shape[1] != Y.shape[1]:
        raise ValueError(
            f"{caller}: 'X' and 'Y' must have the same number of features; got "
            f"{X.shape[1]} and {Y.shape[1]}"
        )
    if same_n and len(X) != len(Y):
        raise ValueError(
            f"{caller}: 'X' and 'Y' must be paired samples of the same length; got "
            f"{len(X)} and {len(Y)}"
        )
    dt = np.result_type(X, Y)
    return np.ascontiguousarray(X, dtype=dt), np.ascontiguousarray(Y, dtype=dt)


def check_count(value, name: str, caller: str, low: int) -> int:
    """An integer parameter >= ``low``."""
    if isinstance(value, bool) or not isinstance(value, Integral) or value < low:
        raise ValueError(f"{caller}: '{name}' must be an integer >= {low}; got {value!r}")
    return int(value)


def check_backend(backend, caller: str):
    """``backend`` checked as the reductions will take it (None: the
    configured one), the error naming ``caller``."""
    try:
        return _config_backend(backend, caller)
    except ValueError as exc:
        msg = str(exc)
        raise type(exc)(msg if msg.startswith(caller) else f"{caller}: {msg}") from None


def check_random_state(random_state, caller: str) -> None:
    """``random_state`` as ``numpy.random.default_rng`` takes it (an int >= 0,
    a sequence of them, a SeedSequence or Generator, or None); checked
    without drawing from it."""
    try:
        np.random.default_rng(random_state)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{caller}: 'random_state' must be an int >= 0, a numpy "
                        f"Generator or None; got {random_state!r} ({exc})") from None


def check_kernel_params(kernel_params, caller: str) -> None:
    """``kernel_params``: None or a mapping of ``make_kernel``'s keywords."""
    if kernel_params is not None and not isinstance(kernel_params, Mapping):
        raise TypeError(f"{caller}: 'kernel_params' must be a dict of the kernel's "
                        f"parameters or None; got {type(kernel_params).__name__}")
