"""Vector operations of the registry (structured: they act across the feature
components): the feature sum, slices and their adjoint, concatenation, matrix
products and the one-hot encoding.

One block per operation, as in :mod:`._ops`, which imports this module where
these operations take their place in :data:`._make.OPS` (import operations
from :mod:`._ops`, never from here). Their C spellings are ``c_vec``
functions: from the operands' component names to the output's component
expressions.
"""

from __future__ import annotations

import numpy as np

from ._ir import intcst
from ._limits import MAX_DIM
from ._make import FormulaError, make
from ._make import register as _register


def _sum_c(at, dims, ops):
    return ["(" + " + ".join(ops[0]) + ")"]


_register(
    name="SumFeat", arity=1, c_vec=_sum_c, dim=lambda at, dims: 1,
    numpy=lambda at, a: a.sum(axis=-1, keepdims=True),
    grad=lambda n, g: (make("Mul", g, intcst(1, n.children[0].dim)),),
    domain=((-2, 2),), examples=(((3,), ()),), doc="sum over the feature axis",
)


def _extract_dim(at, dims):
    start, d = at
    if start < 0 or d < 1 or start + d > dims[0]:
        raise FormulaError(
            f"extract: components [{start}, {start + d}) are outside a vector "
            f"of dimension {dims[0]}"
        )
    return d


_register(
    name="Extract", arity=1, dim=_extract_dim,
    c_vec=lambda at, dims, ops: ops[0][at[0]:at[0] + at[1]],
    numpy=lambda at, a: a[..., at[0]:at[0] + at[1]],
    grad=lambda n, g: (make("ExtractT", g, attrs=(n.attrs[0], n.children[0].dim)),),
    domain=((-2, 2),), examples=(((4,), (1, 2)),),
    doc="components start .. start + d - 1 (attributes start, d)",
)


def _extractt_dim(at, dims):
    start, d = at
    if start < 0 or start + dims[0] > d or d > MAX_DIM:
        raise FormulaError(
            f"ExtractT: a vector of dimension {dims[0]} at {start} does not fit in {d} "
            f"(at most {MAX_DIM})"
        )
    return d


def _extractt_np(at, a):
    start, d = at
    out = np.zeros(a.shape[:-1] + (d,), dtype=a.dtype)
    out[..., start:start + a.shape[-1]] = a
    return out


_register(
    name="ExtractT", arity=1, dim=_extractt_dim,
    c_vec=lambda at, dims, ops: (
        ["(real_t)0"] * at[0] + list(ops[0]) + ["(real_t)0"] * (at[1] - at[0] - dims[0])
    ),
    numpy=_extractt_np,
    grad=lambda n, g: (make("Extract", g, attrs=(n.attrs[0], n.children[0].dim)),),
    domain=((-2, 2),), examples=(((2,), (1, 4)),),
    doc="adjoint of Extract: the vector placed at ``start`` in zeros of dim ``d``",
)
_register(
    name="Concat", arity=2, dim=lambda at, dims: dims[0] + dims[1],
    c_vec=lambda at, dims, ops: list(ops[0]) + list(ops[1]),
    numpy=lambda at, a, b: np.concatenate(_bcat(a, b), axis=-1),
    grad=lambda n, g: (
        make("Extract", g, attrs=(0, n.children[0].dim)),
        make("Extract", g, attrs=(n.children[0].dim, n.children[1].dim)),
    ),
    domain=((-2, 2), (-2, 2)), examples=(((2, 3), ()), ((1, 2), ())),
    doc="concatenation of a and b along the feature axis",
)


def _bcat(a, b):
    shape = np.broadcast_shapes(a.shape[:-1], b.shape[:-1])
    return (
        np.broadcast_to(a, shape + a.shape[-1:]),
        np.broadcast_to(b, shape + b.shape[-1:]),
    )


def _matvec_dim(at, dims):
    a, v = dims
    if a % v:
        raise FormulaError(
            f"matvecmult: a matrix of {a} entries is not a multiple of the vector "
            f"dimension {v}"
        )
    return a // v


def _matvec_c(at, dims, ops):
    m = dims[1]
    n = dims[0] // m
    A, v = ops
    return [
        "(" + " + ".join(f"{A[r * m + c]} * {v[c]}" for c in range(m)) + ")"
        for r in range(n)
    ]


def _matvec_np(at, A, v):
    m = v.shape[-1]
    A = A.reshape(A.shape[:-1] + (A.shape[-1] // m, m))
    return np.einsum("...rc,...c->...r", A, v)


_register(
    name="MatVecMult", arity=2, dim=_matvec_dim, c_vec=_matvec_c, numpy=_matvec_np,
    grad=lambda n, g: (
        make("TensorProd", g, n.children[1]),
        make("VecMatMult", g, n.children[0]),
    ),
    domain=((-2, 2), (-2, 2)), examples=(((6, 3), ()),),
    doc="A v, A stored row-major as a vector of n m entries, v of dim m",
)


def _vecmat_c(at, dims, ops):
    n = dims[0]
    m = dims[1] // n
    v, A = ops
    return [
        "(" + " + ".join(f"{v[r]} * {A[r * m + c]}" for r in range(n)) + ")"
        for c in range(m)
    ]


def _vecmat_np(at, v, A):
    n = v.shape[-1]
    A = A.reshape(A.shape[:-1] + (n, A.shape[-1] // n))
    return np.einsum("...r,...rc->...c", v, A)


_register(
    name="VecMatMult", arity=2,
    dim=lambda at, dims: _matvec_dim(at, dims[::-1]),
    c_vec=_vecmat_c, numpy=_vecmat_np,
    grad=lambda n, g: (
        make("MatVecMult", n.children[1], g),
        make("TensorProd", n.children[0], g),
    ),
    domain=((-2, 2), (-2, 2)), examples=(((2, 6), ()),),
    doc="v^T A, v of dim n, A stored row-major as a vector of n m entries",
)
_register(
    name="TensorProd", arity=2, dim=lambda at, dims: dims[0] * dims[1],
    c_vec=lambda at, dims, ops: [f"({x} * {y})" for x in ops[0] for y in ops[1]],
    numpy=lambda at, a, b: (a[..., :, None] * b[..., None, :]).reshape(
        np.broadcast_shapes(a.shape[:-1], b.shape[:-1]) + (a.shape[-1] * b.shape[-1],)
    ),
    grad=lambda n, g: (
        make("MatVecMult", g, n.children[1]),
        make("VecMatMult", n.children[0], g),
    ),
    domain=((-2, 2), (-2, 2)), examples=(((2, 3), ()),),
    doc="outer product a b^T, flattened row-major",
)


def _onehot_dim(at, dims):
    if not 1 <= at[0] <= MAX_DIM:
        raise FormulaError(f"one_hot: 'D' must be an integer between 1 and {MAX_DIM}, "
                           f"got {at[0]}")
    if dims[0] != 1:
        raise FormulaError(f"one_hot: needs a scalar formula, got dimension {dims[0]}")
    return at[0]


def _onehot_np(at, a):
    k = np.round(a)
    return (k == np.arange(at[0])).astype(a.dtype)


_register(
    name="OneHot", arity=1, dim=_onehot_dim,
    c_vec=lambda at, dims, ops: [
        f"(real_t)(rint({ops[0][0]}) == {k})" for k in range(at[0])
    ],
    numpy=_onehot_np, grad=lambda n, g: (None,),
    domain=((0, 4),), examples=(((1,), (5,)),),
    doc="one-hot encoding of round(a) in dimension D (attribute)",
)
