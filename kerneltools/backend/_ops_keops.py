"""Composite operations of pykeops' LazyTensor surface (issue 21).

Formulas over the primitives of :mod:`._ops` (no rendering, no derivative of
their own): feature-wise min/max/argmin/argmax, ``gather`` (a permutation
of components), pykeops' ``TensorDot`` and ``Kron``, and the B-spline basis
(``BSpline``), soft-DTW (``SoftDTW_SqDist``). Re-exported by :mod:`._ops`.
"""

from __future__ import annotations

import numpy as np

from ._ir import Node, intcst
from ._make import FormulaError, make

__all__ = ["argmax_feat", "argmin_feat", "bspline", "gather", "kron", "max_feat",
           "min_feat", "softdtw_sqdist", "tensordot"]


# Feature-wise reductions (pykeops' ``x.min(-1)``, ``x.argmax(-1)``, ...): a
# fold over the components; the index of the first extremum on ties.
def _fold_feat(x: Node, pick: str, better: str, want_index: bool) -> Node:
    best, arg = make("Extract", x, attrs=(0, 1)), intcst(0, 1)
    for k in range(1, x.dim):
        xk = make("Extract", x, attrs=(k, 1))
        if want_index:  # arg += [x_k better than best] * (k - arg)
            arg = make("Add", arg, make("Mul", make(better, xk, best),
                                        make("Sub", intcst(k, 1), arg)))
        best = make(pick, best, xk)
    return arg if want_index else best


def min_feat(x: Node) -> Node:
    """min_k x_k (NaN propagates)."""
    return x if x.dim == 1 else _fold_feat(x, "Minimum", "Less", False)


def max_feat(x: Node) -> Node:
    """max_k x_k (NaN propagates)."""
    return x if x.dim == 1 else _fold_feat(x, "Maximum", "Greater", False)


def argmin_feat(x: Node) -> Node:
    """The index k of the smallest x_k, as a float (the first one on ties)."""
    return _fold_feat(x, "Minimum", "Less", True)


def argmax_feat(x: Node) -> Node:
    """The index k of the largest x_k, as a float (the first one on ties)."""
    return _fold_feat(x, "Maximum", "Greater", True)


def gather(x: Node, idx) -> Node:
    """The vector ``(x[idx[0]], x[idx[1]], ...)``: runs of consecutive indices
    become one Extract each, joined by Concat."""
    pieces, start, length = [], idx[0], 1
    for k in list(idx[1:]) + [None]:
        if k is not None and k == start + length:
            length += 1
            continue
        pieces.append(x if (start, length) == (0, x.dim)
                      else make("Extract", x, attrs=(int(start), length)))
        if k is not None:
            start, length = k, 1
    out = pieces[0]
    for p in pieces[1:]:
        out = make("Concat", out, p)
    return out


def _check_shape(x: Node, dims, what: str) -> tuple:
    dims = (int(dims),) if np.ndim(dims) == 0 else tuple(int(d) for d in dims)
    if any(d < 1 for d in dims) or int(np.prod(dims)) != x.dim:
        raise FormulaError(f"{what}: the shape {dims} does not hold the {x.dim} "
                           "components of the operand (their product must equal it)")
    return dims


def tensordot(a: Node, b: Node, dims_a, dims_b, cont_a, cont_b, perm=None) -> Node:
    """pykeops' ``TensorDot``: ``a`` and ``b`` seen as row-major tensors of
    shapes ``dims_a`` and ``dims_b``, contracted over the axes ``cont_a`` of
    ``a`` with ``cont_b`` of ``b``; the output axes (free ones of ``a``, then
    of ``b``) are reordered by ``perm`` (axis k moves to position ``perm[k]``)
    and flattened row-major."""
    dims_a = _check_shape(a, dims_a, "keops_tensordot: 'dimfa'")
    dims_b = _check_shape(b, dims_b, "keops_tensordot: 'dimfb'")
    cont_a = [int(c) for c in np.atleast_1d(cont_a)]
    cont_b = [int(c) for c in np.atleast_1d(cont_b)]
    if (len(cont_a) != len(cont_b) or any(not 0 <= c < len(dims_a) for c in cont_a)
            or any(not 0 <= c < len(dims_b) for c in cont_b)
            or [dims_a[c] for c in cont_a] != [dims_b[c] for c in cont_b]):
        raise FormulaError(
            f"keops_tensordot: contraction axes {cont_a} of shape {dims_a} and "
            f"{cont_b} of shape {dims_b} must be as many, valid, and of equal sizes")
    free_a = [k for k in range(len(dims_a)) if k not in cont_a]
    free_b = [k for k in range(len(dims_b)) if k not in cont_b]
    ia = np.arange(a.dim).reshape(dims_a).transpose(free_a + cont_a)
    ib = np.arange(b.dim).reshape(dims_b).transpose(free_b + cont_b)
    C = int(np.prod([dims_a[c] for c in cont_a]))
    rows_a, rows_b = ia.reshape(-1, C), ib.reshape(-1, C)
    A, B = gather(a, rows_a.ravel()), gather(b, rows_b.ravel())
    entries = []
    for f in range(len(rows_a)):
        af = make("Extract", A, attrs=(f * C, C)) if A.dim != C else A
        for g in range(len(rows_b)):
            bg = make("Extract", B, attrs=(g * C, C)) if B.dim != C else B
            entries.append(make("SumFeat", make("Mul", af, bg)) if C > 1
                           else make("Mul", af, bg))
    out = entries[0]
    for e in entries[1:]:
        out = make("Concat", out, e)
    out_dims = [dims_a[k] for k in free_a] + [dims_b[k] for k in free_b]
    if perm is not None and len(perm):
        perm = [int(p) for p in perm]
        if sorted(perm) != list(range(len(out_dims))):
            raise FormulaError(f"keops_tensordot: {perm} is not a permutation of the "
                               f"{len(out_dims)} output axes")
        # pykeops' convention: perm[k] is the new position of output axis k
        order = np.arange(out.dim).reshape(out_dims or [1]).transpose(np.argsort(perm))
        order = order.ravel()
        out = gather(out, order)
    return out


def kron(a: Node, b: Node, dims_a, dims_b) -> Node:
    """pykeops' ``Kron``: the Kronecker product of ``a`` and ``b`` seen as
    row-major tensors of shapes ``dims_a`` and ``dims_b`` (as many axes),
    flattened row-major."""
    dims_a = _check_shape(a, dims_a, "keops_kron: 'dimfself'")
    dims_b = _check_shape(b, dims_b, "keops_kron: 'dimfother'")
    if len(dims_a) != len(dims_b):
        raise FormulaError(f"keops_kron: the shapes {dims_a} and {dims_b} must have "
                           "as many axes")
    n = len(dims_a)
    # TensorProd's index is (a's axes, b's axes); kron interleaves them.
    order = np.arange(a.dim * b.dim).reshape(dims_a + dims_b)
    order = order.transpose([k for p in range(n) for k in (p, n + p)]).ravel()
    return gather(make("TensorProd", a, b), order)


def bspline(knots: Node, x: Node, order: int) -> Node:
    """The ``knots.dim - order - 1`` B-spline basis functions of ``order`` on
    the (non-decreasing) ``knots``, at the scalar ``x`` (de Boor's recursion;
    order 0: ``[t_j <= x < t_j+1]``). A ratio over an empty knot interval
    counts as 0, with its denominator made safe so that no NaN arises."""
    if order < 0:
        raise FormulaError(f"bspline: the order must be >= 0, got {order}")
    if x.dim != 1:
        raise FormulaError(f"bspline: x must be scalar, got dimension {x.dim}")
    if knots.dim < order + 2:
        raise FormulaError(f"bspline: order {order} needs at least {order + 2} knots, "
                           f"got {knots.dim}")
    t = [make("Extract", knots, attrs=(k, 1)) for k in range(knots.dim)]
    B = [make("Mul", make("LessEqual", t[j], x), make("Less", x, t[j + 1]))
         for j in range(knots.dim - 1)]

    def ratio(i, k):  # (x - t_i) / (t_i+k - t_i), 0 when t_i == t_i+k
        span = make("Sub", t[i + k], t[i])
        safe = make("Add", span, make("LessEqual", span, intcst(0, 1)))
        return make("Mul", make("Div", make("Sub", x, t[i]), safe),
                    make("Less", t[i], t[i + k]))

    for k in range(1, order + 1):
        B = [make("Add", make("Mul", ratio(i, k), B[i]),
                  make("Mul", make("Sub", intcst(1, 1), ratio(i + 1, k)), B[i + 1]))
             for i in range(len(B) - 1)]
    out = B[0]
    for b in B[1:]:
        out = make("Concat", out, b)
    return out


def softdtw_sqdist(x: Node, y: Node, gamma: Node) -> Node:
    """Soft-DTW (Cuturi and Blondel, 2017) between the sequences of
    components of ``x`` and ``y``, with squared differences as the cost and
    smoothing ``gamma`` (scalar): ``R[i, j] = (x_i - y_j)^2 + softmin(R[i-1,
    j-1], R[i-1, j], R[i, j-1])``, ``softmin(a) = -gamma log sum exp(-a /
    gamma)`` (stabilised by the minimum), the borders of R infinite; the
    value is ``R[n, m]``. As pykeops' ``SoftDTW_SqDist``."""
    if gamma.dim != 1:
        raise FormulaError(f"softdtw_sqdist: gamma must be scalar, got dimension {gamma.dim}")
    xs = [make("Extract", x, attrs=(k, 1)) for k in range(x.dim)]
    ys = [make("Extract", y, attrs=(k, 1)) for k in range(y.dim)]

    def softmin(vals):
        m = vals[0]
        for v in vals[1:]:
            m = make("Minimum", m, v)
        s = None
        for v in vals:
            e = make("Exp", make("Div", make("Sub", m, v), gamma))
            s = e if s is None else make("Add", s, e)
        return make("Sub", m, make("Mul", gamma, make("Log", s)))

    R: dict = {}
    for i in range(x.dim):
        for j in range(y.dim):
            cost = make("Square", make("Sub", xs[i], ys[j]))
            prev = [R[p] for p in ((i - 1, j - 1), (i - 1, j), (i, j - 1)) if p in R]
            R[i, j] = cost if not prev else make("Add", cost, prev[0] if len(prev) == 1
                                                 else softmin(prev))
    return R[x.dim - 1, y.dim - 1]
