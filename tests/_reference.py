"""Independent references of the registry's operations (used by several tests).

``REFERENCE[name](attrs, *operands)`` computes operation ``name`` on float64
arrays broadcast on their leading axes, features on the last. Each one is
written from the documented meaning of the operation, never from the
registry's NumPy function.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import scipy.special

__all__ = ["REFERENCE", "matvec"]


def _math(f):
    """An element-wise function from the scalar ``math`` module version."""
    return np.vectorize(f, otypes=[np.float64])


def _bcast(*arrays):
    shape = np.broadcast_shapes(*(a.shape[:-1] for a in arrays))
    return [np.broadcast_to(a, shape + a.shape[-1:]) for a in arrays]


def _concat(a, b):
    return np.concatenate(_bcast(a, b), axis=-1)


def matvec(A, v):
    """A v with A stored row-major as n*m entries, by explicit loops."""
    A, v = _bcast(A, v)
    m = v.shape[-1]
    n = A.shape[-1] // m
    out = np.zeros(A.shape[:-1] + (n,))
    for r in range(n):
        for c in range(m):
            out[..., r] += A[..., r * m + c] * v[..., c]
    return out


def _vecmat(v, A):
    """v^T A with A stored row-major as n*m entries, by explicit loops."""
    v, A = _bcast(v, A)
    n = v.shape[-1]
    m = A.shape[-1] // n
    out = np.zeros(A.shape[:-1] + (m,))
    for c in range(m):
        for r in range(n):
            out[..., c] += v[..., r] * A[..., r * m + c]
    return out


def _tensorprod(a, b):
    a, b = _bcast(a, b)
    cols = [
        a[..., r] * b[..., c] for r in range(a.shape[-1]) for c in range(b.shape[-1])
    ]
    return np.stack(cols, axis=-1)


def _extract_t(at, a):
    start, d = at
    out = np.zeros(a.shape[:-1] + (d,))
    out[..., start : start + a.shape[-1]] = a
    return out


def _one_hot(at, a):
    k = np.rint(a[..., 0])
    return np.stack([(k == c).astype(np.float64) for c in range(at[0])], axis=-1)


def _safe(a, bad):
    return np.where(a == bad, 1.0, a)


REFERENCE = {
    "Add": lambda at, a, b: a + b,
    "Sub": lambda at, a, b: a + (-b),
    "Mul": lambda at, a, b: a * b,
    "Div": lambda at, a, b: a * (1.0 / b),
    "Neg": lambda at, a: 0.0 - a,
    "Square": lambda at, a: np.power(a, 2.0),
    "Pow": lambda at, a: np.power(a, float(at[0])),
    "Inv": lambda at, a: np.power(a, -1.0),
    "Exp": lambda at, a: _math(math.exp)(a),
    "Exp2": lambda at, a: _math(lambda v: 2.0 ** v)(a),
    "Log": lambda at, a: _math(math.log)(a),
    "Sin": lambda at, a: _math(math.sin)(a),
    "Cos": lambda at, a: _math(math.cos)(a),
    "Tan": lambda at, a: _math(math.sin)(a) / _math(math.cos)(a),
    "Asin": lambda at, a: np.arctan2(a, np.sqrt(1 - a * a)),
    "Acos": lambda at, a: np.arctan2(np.sqrt(1 - a * a), a),
    "Atan": lambda at, a: _math(math.atan)(a),
    "Tanh": lambda at, a: _math(math.tanh)(a),
    "Atan2": lambda at, y, x: _math(math.atan2)(*np.broadcast_arrays(y, x)),
    "Sqrt": lambda at, a: _math(math.sqrt)(a),
    "Rsqrt": lambda at, a: np.where(a == 0, 0.0, 1.0 / np.sqrt(_safe(a, 0))),
    "Sinc": lambda at, a: np.where(
        a == 0, 1.0, _math(math.sin)(math.pi * a) / (math.pi * _safe(a, 0))
    ),
    "XLogX": lambda at, a: scipy.special.xlogy(a, a),
    "Abs": lambda at, a: np.where(a < 0, -a, a),
    "Sign": lambda at, a: np.where(a > 0, 1.0, np.where(a < 0, -1.0, 0.0)),
    "Step": lambda at, a: np.where(a < 0, 0.0, 1.0),
    "ReLU": lambda at, a: np.where(a > 0, a, 0.0),
    "Floor": lambda at, a: _math(math.floor)(a),
    # NumPy's documented rounding: scale, round half to even, unscale.
    "Round": lambda at, a: np.rint(a * 10.0 ** at[0]) / 10.0 ** at[0],
    "Clamp": lambda at, a, lo, hi: np.minimum(np.maximum(a, lo), hi),
    "IfElse": lambda at, c, a, b: np.where(c < 0, b, a),
    "Minimum": lambda at, a, b: np.where(b < a, b, a),
    "Maximum": lambda at, a, b: np.where(b > a, b, a),
    "Less": lambda at, a, b: np.where(a < b, 1.0, 0.0),
    "LessEqual": lambda at, a, b: np.where(a > b, 0.0, 1.0),
    "Greater": lambda at, a, b: np.where(b < a, 1.0, 0.0),
    "GreaterEqual": lambda at, a, b: np.where(a < b, 0.0, 1.0),
    "Equal": lambda at, a, b: np.where(a - b == 0, 1.0, 0.0),
    "NotEqual": lambda at, a, b: np.where(a - b == 0, 0.0, 1.0),
    "SumFeat": lambda at, a: functools.reduce(
        np.add, [a[..., k : k + 1] for k in range(a.shape[-1])]
    ),
    "Extract": lambda at, a: a[..., at[0] : at[0] + at[1]],
    "ExtractT": _extract_t,
    "Concat": lambda at, a, b: _concat(a, b),
    "MatVecMult": lambda at, A, v: matvec(A, v),
    "VecMatMult": lambda at, v, A: _vecmat(v, A),
    "TensorProd": lambda at, a, b: _tensorprod(a, b),
    "OneHot": _one_hot,
}
