"""Argument checks of :mod:`kerneltools.lazy` (kept apart for size).

Each check raises an exception whose message names the argument, what it
must be and what came; none of them lets a bool pass for an integer.
"""

from __future__ import annotations

import numbers

import numpy as np

from ..backend._arrays import is_cupy_array
from ..backend._dask import is_dask_array
from ..backend._ir import topo_order

__all__ = ["alias", "check_axis", "check_finite_data", "int_arg", "is_int",
           "solve_alpha"]

_CATEGORY = {"i": "i-variable", "j": "j-variable", "p": "parameter"}


def is_int(v) -> bool:
    """An integer, NumPy's included, and not a bool."""
    return isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_))


def int_arg(v, name: str) -> int:
    if not is_int(v):
        raise TypeError(f"'{name}' must be an integer, got {v!r}")
    return int(v)


def check_axis(axis, nbatch: int = 0) -> int:
    """The reduction axis as 0 (over i) or 1 (over j). As in pykeops, the user
    numbers it after the ``nbatch`` batch axes: ``nbatch`` (over i) or
    ``nbatch + 1`` (over j)."""
    if is_int(axis) and int(axis) - nbatch in (0, 1):
        return int(axis) - nbatch
    if nbatch:
        axes = "axes" if nbatch > 1 else "axis"
        raise ValueError(
            f"with {nbatch} batch {axes}, the reduction 'axis' must be {nbatch} (reduce "
            f"over i) or {nbatch + 1} (reduce over j): as in pykeops, reductions are "
            f"numbered after the batch axes; got {axis!r}"
        )
    raise ValueError("the reduction 'axis' must be 0 (reduce over i) or 1 (reduce "
                     f"over j); got {axis!r}")


def alias(axis, dim):
    """``dim`` is pykeops' alias of ``axis``: the one given (both: they must
    agree; ``axis=-1``, the default of ``sum``, yields to ``dim``)."""
    if dim is None:
        return axis
    if not is_int(dim):
        raise ValueError(f"the reduction 'dim' (an alias of 'axis') must be an "
                         f"integer; got {dim!r}")
    if axis is None or (is_int(axis) and int(axis) in (-1, int(dim))):
        return dim
    raise ValueError(f"'axis'={axis!r} and 'dim'={dim!r} disagree; 'dim' is an alias "
                     "of 'axis': give one of them")


def solve_alpha(alpha) -> float:
    """``LazyTensor.solve``'s diagonal shift: a finite float >= 0."""
    try:
        if isinstance(alpha, (bool, np.bool_, str)):
            raise TypeError
        value = float(alpha)
    except (TypeError, ValueError):
        raise TypeError(f"solve: 'alpha' must be a float >= 0, got {alpha!r}") from None
    alpha = value
    if not alpha >= 0:
        raise ValueError(f"solve: 'alpha' must be >= 0, got {alpha}")
    if not np.isfinite(alpha):
        raise ValueError(f"solve: 'alpha' must be finite, got {alpha}")
    return alpha


def check_finite_data(formula, bindings: dict, who: str) -> None:
    """ValueError if an array bound to a variable of ``formula`` holds NaN or
    infinity (CuPy arrays are checked on the GPU, Dask arrays on the cluster)."""
    for node in topo_order([formula]):
        if node.op != "Var" or node not in bindings:
            continue
        a = bindings[node].array
        if a is None:  # a symbolic variable: no data yet
            continue
        if is_dask_array(a):
            import dask.array as da

            ok = bool(da.isfinite(a).all().compute())
        elif is_cupy_array(a):
            import cupy

            ok = bool(cupy.isfinite(a).all())
        else:
            ok = bool(np.isfinite(a).all())
        if not ok:
            raise ValueError(
                f"{who}: K's {_CATEGORY[node.cat]} of shape {tuple(a.shape)} contains "
                "NaN or infinity; the kernel's points and parameters must be finite"
            )
