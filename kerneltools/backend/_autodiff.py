"""Symbolic reverse-mode differentiation of formulas.

``grad(F, v, g)`` is the adjoint of the differential of ``F`` with respect to
the variable ``v``, applied to ``g`` (a formula of F's dimension): a formula of
``v``'s dimension. It walks the DAG once in reverse topological order, asking
each operation's registry entry for the adjoints of its operands; operands
broadcast from dimension 1 get the feature sum of their adjoint. The result is
itself a formula, so gradients of gradients work.
"""

from __future__ import annotations

from ._ir import Node, intcst, topo_order
from ._ops import OPS, make

__all__ = ["grad"]


def grad(F: Node, v: Node, g: Node) -> Node:
    """d/dv <F, g>, i.e. (dF/dv)^T g, as a new formula of dimension ``v.dim``."""
    if v.op != "Var":
        raise TypeError("can only differentiate with respect to a variable")
    if g.dim != F.dim:
        raise ValueError(
            f"the gradient input has dimension {g.dim}; it must match the formula's "
            f"dimension {F.dim}"
        )
    order = topo_order([F])
    if v not in set(order):
        return intcst(0, v.dim)
    # Only nodes on a path to v need adjoints.
    depends: set[Node] = set()
    for node in order:
        if node is v or any(c in depends for c in node.children):
            depends.add(node)
    adj: dict[Node, Node] = {F: g}
    for node in reversed(order):
        a = adj.pop(node, None)
        if a is None or node is v or not node.children:
            if node is v:
                adj[v] = a
            continue
        contribs = OPS[node.op].grad(node, a)
        for child, c in zip(node.children, contribs):
            if c is None or child not in depends:
                continue
            if c.dim != child.dim:
                # The child was broadcast from dimension 1.
                c = make("SumFeat", c)
            prev = adj.get(child)
            adj[child] = c if prev is None else make("Add", prev, c)
    out = adj.get(v)
    return intcst(0, v.dim) if out is None else out
