"""Parameter checks with scikit-learn's wording, without its private modules."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np


def check_params(est, rules: dict) -> None:
    """Raise ``ValueError`` for the first parameter of ``est`` that breaks its rule.

    ``rules`` maps a parameter name to ``(predicate, expected)``: the
    predicate takes the value; ``expected`` completes "must be ...".
    """
    for name, (ok, expected) in rules.items():
        value = getattr(est, name)
        if not ok(value):
            raise ValueError(
                f"The {name!r} parameter of {type(est).__name__} must be {expected}. "
                f"Got {value!r} instead."
            )


def real(lo=None, *, closed=True, none=False):
    def ok(v):
        if v is None:
            return none
        if isinstance(v, bool) or not isinstance(v, Real) or not np.isfinite(v):
            return False
        return lo is None or (v >= lo if closed else v > lo)

    return ok


def integer(lo=None, *, none=False):
    def ok(v):
        if v is None:
            return none
        return isinstance(v, Integral) and not isinstance(v, bool) and (lo is None or v >= lo)

    return ok


def one_of(*options):
    return lambda v: isinstance(v, str) and v in options


def sample_weight(w, n: int) -> np.ndarray | None:
    """``w`` as a float64 array of shape (n,), finite and >= 0 (None stays None)."""
    if w is None:
        return None
    if isinstance(w, Real):
        w = np.full(n, float(w))
    w = np.asarray(w, dtype=np.float64)
    if w.shape != (n,):
        raise ValueError(f"'sample_weight' must have shape ({n},), got {w.shape}")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError("'sample_weight' must be finite and >= 0")
    if n and not np.any(w > 0):
        raise ValueError("'sample_weight' is zero everywhere: at least one weight must be > 0")
    return w
