"""Independent references of the registry's operations and reductions.

``REFERENCE[name](attrs, *operands)`` computes operation ``name`` on float64
arrays broadcast on their leading axes, features on the last.
``REDUCTION_REFERENCE[name](V, W, K)`` computes the outputs of reduction
``name`` of the dense values V (nx, ny, E) over axis 1 (W: the weights grid
or None), and ``REDUCTION_METHOD[name]`` is its LazyTensor method. Each one
is written from the documented meaning, never from the registry's code.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import scipy.special

__all__ = ["REDUCTION_ERROR_SCALE", "REDUCTION_METHOD", "REDUCTION_REFERENCE", "REFERENCE",
           "matvec"]


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


# ---------------------------------------------------------------------------
# Reductions: V (nx, ny, E) reduced over axis 1; W the weights grid or None.
# ---------------------------------------------------------------------------
def _kmin(V, K):
    return np.sort(V, axis=1, kind="stable")[:, :K]  # NaN last, as numpy.sort


def _argkmin(V, K):
    return np.argsort(V, axis=1, kind="stable")[:, :K]


REDUCTION_REFERENCE = {
    "Sum": lambda V, W, K: (V.sum(axis=1),),
    "SumSquares": lambda V, W, K: ((V * V).sum(axis=1),),
    "LogSumExp": lambda V, W, K: (scipy.special.logsumexp(V, axis=1),),
    "LogSumExpWeight": lambda V, W, K: (
        scipy.special.logsumexp(np.broadcast_to(V, W.shape), b=W, axis=1),
    ),
    "SumSoftMaxWeight": lambda V, W, K: ((scipy.special.softmax(V, axis=1) * W).sum(axis=1),),
    "Min": lambda V, W, K: (V.min(axis=1),),
    "Max": lambda V, W, K: (V.max(axis=1),),
    "ArgMin": lambda V, W, K: (V.argmin(axis=1),),
    "ArgMax": lambda V, W, K: (V.argmax(axis=1),),
    "Min_ArgMin": lambda V, W, K: (V.min(axis=1), V.argmin(axis=1)),
    "Max_ArgMax": lambda V, W, K: (V.max(axis=1), V.argmax(axis=1)),
    "KMin": lambda V, W, K: (_kmin(V, K),),
    "ArgKMin": lambda V, W, K: (_argkmin(V, K),),
    "KMin_ArgKMin": lambda V, W, K: (_kmin(V, K), _argkmin(V, K)),
}

#: The LazyTensor method of each reduction.
REDUCTION_METHOD = {
    "Sum": "sum",
    "SumSquares": "sumsquares",
    "LogSumExp": "logsumexp",
    "LogSumExpWeight": "logsumexp",
    "SumSoftMaxWeight": "sumsoftmaxweight",
    "Min": "min",
    "Max": "max",
    "ArgMin": "argmin",
    "ArgMax": "argmax",
    "Min_ArgMin": "min_argmin",
    "Max_ArgMax": "max_argmax",
    "KMin": "Kmin",
    "ArgKMin": "argKmin",
    "KMin_ArgKMin": "Kmin_argKmin",
}

#: What bounds the rounding error of a sum's output: the sum of the magnitudes
#: of its terms (the other reductions: the largest |F| reduced, by default).
REDUCTION_ERROR_SCALE = {
    "Sum": lambda V: np.abs(V).sum(axis=1),
    "SumSquares": lambda V: (V * V).sum(axis=1),
}
