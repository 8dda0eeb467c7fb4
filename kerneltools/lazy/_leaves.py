"""Data becoming the leaves of a formula, for :mod:`kerneltools.lazy`.

:func:`check_array` accepts NumPy, CuPy and Dask arrays (and what NumPy can
convert) and keeps their kind: Dask in, Dask out; CuPy in, CuPy out.
:func:`leaf` turns a value into ``(formula, bindings, ni, nj)``: an int into
an exact constant, a float into a weakly typed parameter, an array into an
i-, j- or parameter variable by its shape, with leading batch axes where it
has them (:func:`batched`).
"""

from __future__ import annotations

import numbers

import numpy as np

from ._args import is_int
from ._symbolic import Binding, new_var
from ..backend._arrays import is_cupy_array
from ..backend._dask import check_dask_array, is_dask_array
from ..backend._ir import Node, intcst

__all__ = ["batched", "check_array", "leaf", "symbolic"]


def check_array(x, what: str) -> np.ndarray:
    """``x`` as a non-empty real array (NumPy, CuPy or Dask); ``what`` names it
    in the errors."""
    if is_dask_array(x):
        a = check_dask_array(x, what)  # Dask arrays stay lazy: Dask in, Dask out
    elif is_cupy_array(x):
        a = x  # CuPy arrays stay on the GPU: CuPy in, CuPy out
    elif hasattr(x, "__cuda_array_interface__"):
        raise TypeError(
            f"{what} is a GPU array of type {type(x).__module__}.{type(x).__name__}; "
            "kerneltools takes CuPy arrays on the GPU (convert with cupy.asarray)"
        )
    else:
        try:
            a = np.asarray(x)
        except Exception as exc:  # ragged lists and the like
            raise TypeError(f"{what} must be a numeric array; {exc}") from None
    if a.dtype.kind == "c":
        raise TypeError(f"{what} has complex dtype {a.dtype}; only real numbers are supported")
    if a.dtype.kind not in "biuf":
        raise TypeError(
            f"{what} must be a numeric array (float32, float64, int or bool); "
            f"got dtype {a.dtype}"
        )
    if a.size == 0:
        raise ValueError(f"{what} is empty (shape {a.shape}); it needs at least one entry")
    return a


def _variable(cat: str, a: np.ndarray) -> tuple[Node, dict]:
    a = a if cat == "p" else a.reshape(a.shape[0], -1)
    dim = a.shape[-1] if a.ndim else 1
    node = new_var(cat, dim)
    return node, {node: Binding(a if a.ndim else a.reshape(1))}


def symbolic(ind, dim, cat, what="LazyTensor((ind, dim, cat))"):
    """(formula, bindings, ni, nj) of pykeops' symbolic variable
    ``Var(ind, dim, cat)``: cat 0 (i), 1 (j) or 2 (parameter), its data given
    when the reduction is called (argument number ``ind``)."""
    for name, v in (("ind", ind), ("dim", dim), ("cat", cat)):
        if not is_int(v):
            raise TypeError(f"{what}: '{name}' must be an integer, got {v!r}")
    if ind < 0 or dim < 1 or cat not in (0, 1, 2):
        raise ValueError(f"{what}: needs ind >= 0, dim >= 1 and cat 0 (i), 1 (j) or "
                         f"2 (parameter); got ({ind}, {dim}, {cat})")
    node = new_var("ijp"[cat], int(dim))
    return node, {node: Binding(None, symbol=int(ind))}, None, None


def leaf(x, axis, what="the array given to LazyTensor"):
    """(formula, bindings, ni, nj) of a new leaf."""
    if isinstance(x, tuple) and not hasattr(x, "shape"):
        if len(x) != 3 or axis is not None:
            raise ValueError(
                f"{what}: a tuple must be pykeops' (ind, dim, cat) of a symbolic "
                f"variable, without 'axis'; got {x!r}" + (f", axis={axis}" if axis else ""))
        return symbolic(*x)
    if isinstance(x, (bool, np.bool_)):
        x = int(x)
    if isinstance(x, numbers.Integral) and not isinstance(x, np.ndarray):
        return intcst(int(x)), {}, None, None
    if isinstance(x, float):
        node = new_var("p", 1)
        return node, {node: Binding(np.array([x]), weak=True)}, None, None
    if isinstance(x, numbers.Complex) and not isinstance(x, numbers.Real):
        raise TypeError(f"{what} is complex ({x!r}); only real numbers are supported")
    a = check_array(x, what)
    if a.ndim != 2 and axis is not None:
        raise ValueError(f"{what}: axis is only meaningful for 2-D arrays, got shape {a.shape}")
    if a.ndim <= 1:
        node, b = _variable("p", a.reshape(-1))
        return node, b, None, None
    if a.ndim == 2:
        if not is_int(axis) or int(axis) not in (0, 1):
            raise ValueError(
                f"{what} has shape {a.shape}: a 2-D array needs axis=0 (indexed by i) "
                "or axis=1 (indexed by j); or use kt.Vi / kt.Vj"
            )
        cat = "i" if axis == 0 else "j"
        node, b = _variable(cat, a)
        n = a.shape[0]
        return node, b, (n if cat == "i" else None), (n if cat == "j" else None)
    if a.ndim == 3:
        return _leaf_3d(a, what)
    batch, (n, m, _) = tuple(a.shape[:-3]), a.shape[-3:]
    if m == 1 and n != 1:
        return batched("i", a[..., :, 0, :], batch, what)
    if n == 1 and m != 1:
        return batched("j", a[..., 0, :, :], batch, what)
    if (n, m) == (1, 1):
        return batched("p", a[..., 0, 0, :], batch, what)
    raise ValueError(
        f"{what} has shape {a.shape}; with batch axes, expected (..., N, 1, D) for "
        "an i-variable, (..., 1, M, D) for a j-variable or (..., 1, 1, D) for a parameter"
    )


def _leaf_3d(a, what: str):
    """(formula, bindings, ni, nj) of an (N, 1, D), (1, M, D) or (1, 1, D) array."""
    if a.shape[1] == 1 and a.shape[0] != 1:
        node, b = _variable("i", a[:, 0, :])
        return node, b, a.shape[0], None
    if a.shape[0] == 1 and a.shape[1] != 1:
        node, b = _variable("j", a[0, :, :])
        return node, b, None, a.shape[1]
    if a.shape[:2] == (1, 1):
        node, b = _variable("p", a.reshape(-1))
        return node, b, None, None
    raise ValueError(
        f"{what} has shape {a.shape}; expected (N, 1, D) for an i-variable, "
        "(1, M, D) for a j-variable or (1, 1, D) for a parameter"
    )


def batched(cat: str, a, batch: tuple, what: str):
    """(formula, bindings, ni, nj) of a variable with leading batch axes:
    ``a`` is (*batch, n, d) for i and j, (*batch, d) for a parameter."""
    if is_dask_array(a):
        raise NotImplementedError(f"{what}: batch axes are not supported on Dask arrays")
    node = new_var(cat, a.shape[-1])
    n = a.shape[-2] if cat != "p" else None
    return (node, {node: Binding(a, batch=tuple(int(b) for b in batch))},
            n if cat == "i" else None, n if cat == "j" else None)
