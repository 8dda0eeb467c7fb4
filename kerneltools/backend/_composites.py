"""Composite operations: formulas written with the primitives of :mod:`._ops`.

They need no rendering and no derivative of their own (the primitives have
both); :mod:`._ops` re-exports them, and the LazyTensor methods call them
(``sqnorm2``, ``sqdist``, ``weightedsqnorm``, ...).
"""

from __future__ import annotations

from ._ir import Node
from ._make import FormulaError, make

__all__ = ["sqnorm2", "norm2", "normalize", "sqdist", "dot", "weightedsqnorm",
           "weightedsqdist", "powf", "mod"]


def sqnorm2(x: Node) -> Node:
    """|x|^2."""
    return make("SumFeat", make("Square", x))


def norm2(x: Node) -> Node:
    """|x|."""
    return make("Sqrt", sqnorm2(x))


def normalize(x: Node) -> Node:
    """x / |x| (0 for x = 0)."""
    return make("Mul", x, make("Rsqrt", sqnorm2(x)))


def sqdist(x: Node, y: Node) -> Node:
    """|x - y|^2."""
    return sqnorm2(make("Sub", x, y))


def dot(a: Node, b: Node) -> Node:
    """(a | b) = sum_k a_k b_k."""
    if a.dim != b.dim and 1 not in (a.dim, b.dim):
        raise FormulaError(f"dot product: dimensions {a.dim} and {b.dim} differ")
    return make("SumFeat", make("Mul", a, b))


def weightedsqnorm(s: Node, x: Node) -> Node:
    """x^T S x with S scalar (dim 1), diagonal (dim D) or full (dim D^2)."""
    d = x.dim
    if s.dim in (1, d):
        return make("SumFeat", make("Mul", s, make("Square", x)))
    if s.dim == d * d:
        return dot(x, make("MatVecMult", s, x))
    raise FormulaError(
        f"weightedsqnorm: the weights have dimension {s.dim}; expected 1, {d} "
        f"or {d * d} for a vector of dimension {d}"
    )


def weightedsqdist(s: Node, x: Node, y: Node) -> Node:
    """(x - y)^T S (x - y)."""
    return weightedsqnorm(s, make("Sub", x, y))


def powf(x: Node, y: Node) -> Node:
    """x ** y for a real exponent y: exp(y log x)."""
    return make("Exp", make("Mul", y, make("Log", x)))


def mod(x: Node, m: Node, offset: Node) -> Node:
    """x - m floor((x - offset) / m): x wrapped into [offset, offset + m)."""
    return make("Sub", x, make("Mul", m, make("Floor", make("Div", make("Sub", x, offset), m))))
