"""Factors of a summed formula that do not depend on the reduced index.

``sum_j c_i G_ij = c_i sum_j G_ij``: where a Sum's formula is a product
whose factors split into ones that depend on j (``G``) and ones that do not
(``c``: parameters, constants, i-variables), the dense C kernel sums ``G``
only and multiplies each row's tile sum by ``c`` (in ``acc_t``) as it adds
it to the row's state. The gradient of ``e . (K b)`` with respect to x,
``2 * (-(e_i b_j k_ij g)) * (x_i - y_j)``, then costs per pair one product
``b_j k_ij`` and one FMA per component instead of six products and three
FMAs.

The products are reassociated (``c`` times ``G`` rather than the formula's
order), which changes the rounding by a few ulp, as any reordering of a
product does. One case changes more than rounding: an infinite ``c`` times
a tile whose ``G`` holds a zero (a far pair's underflowed exp) gives
``inf * 0 = NaN`` pair by pair but ``inf * sum`` summed first; so unless
``c`` is a constant, the kernel tests ``c`` finite (per block of rows) and
runs the formula as written otherwise (:func:`._cpu_codegen.generate_source`).
"""

from __future__ import annotations

from dataclasses import dataclass

from .._ir import Node, intcst
from .._ops import make
from .._render_c import node_levels

__all__ = ["Factored", "factor_out"]


@dataclass(frozen=True)
class Factored:
    """``formula = outer * inner`` (element-wise, dimension 1 broadcast)."""

    inner: Node  # depends on j
    outer: Node  # does not
    guarded: bool  # outer is not a constant: test it finite at run time


def _factors(node: Node) -> list:
    """The factors of a product tree (``Neg`` as the factor -1), left to
    right; an explicit stack (a product of 1,000 factors is 1,000 deep)."""
    out, stack = [], [node]
    while stack:
        n = stack.pop()
        if n.op == "Mul":
            stack += [n.children[1], n.children[0]]
        elif n.op == "Neg":
            out.append(intcst(-1))
            stack.append(n.children[0])
        else:
            out.append(n)
    return out


def _product(factors: list) -> Node:
    out = factors[0]
    for f in factors[1:]:
        out = make("Mul", out, f)
    return out


def factor_out(formula: Node) -> Factored | None:
    """``formula`` as (inner, outer), or None when it is no product with both a
    j-dependent factor and one that is not j-dependent."""
    if formula.op not in ("Mul", "Neg"):
        return None
    levels = node_levels([formula])
    factors = _factors(formula)
    outer = [f for f in factors if levels.get(f, "p") in ("p", "i")]
    inner = [f for f in factors if levels.get(f, "p") not in ("p", "i")]
    if not outer or not inner:
        return None
    c, g = _product(outer), _product(inner)
    if c.dim not in (1, formula.dim) or g.dim not in (1, formula.dim):
        return None
    if max(c.dim, g.dim) != formula.dim:
        return None
    return Factored(inner=g, outer=c, guarded=not all(f.op == "Int" for f in outer))
