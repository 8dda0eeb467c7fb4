"""Symbolic reverse-mode differentiation of formulas.

``grad(F, v, g)`` is the adjoint of the differential of ``F`` with respect to
the variable ``v``, applied to ``g`` (a formula of F's dimension): a formula of
``v``'s dimension. It walks the DAG once in reverse topological order, asking
each operation's registry entry for the adjoints of its operands; operands
broadcast from dimension 1 get the feature sum of their adjoint. The result is
itself a formula, so gradients of gradients work.

The gradient of a reduction builds on it (:func:`reduction_vjp`, shared by
both bindings, ``kerneltools.lazy`` and ``kerneltools.torch``): the forward
pass runs :func:`forward_reduction` (``Min`` runs ``Min_ArgMin``, whose
arg-index the gradient needs), whose outputs, with the incoming gradient,
become variables of the output index; the reduction's ``surrogate`` (see
:mod:`.reductions`) turns them into a scalar formula whose symbolic gradient
(:func:`vjp_formula`), summed over one index (:func:`gradient_axis`), is the
gradient with respect to a variable.
"""

from __future__ import annotations

from typing import Callable

from ._ir import VAR_KEYS, Node, index, intcst, topo_order, var
from ._ops import OPS, dot, make, substitute
from .reductions import REDUCTIONS

__all__ = ["forward_reduction", "grad", "gradient_axis", "reduction_vjp", "tangent_formula",
           "vjp_formula"]


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


# -- gradients of reductions ------------------------------------------------------
def forward_reduction(name: str) -> str:
    """The reduction to run forward when ``name``'s gradient will be needed: its
    ``grad_forward`` (``Min`` -> ``Min_ArgMin``, ...), or ``name`` itself."""
    return REDUCTIONS[name].grad_forward or name


def vjp_formula(name: str, F: Node, W: Node | None, wrt: Node, out_nodes, gnode: Node,
                axis: int) -> Node:
    """The formula whose Sum is the gradient of ``<gin, Red(F)>`` at ``wrt``.

    ``out_nodes``: variables of the output index holding the outputs of
    :func:`forward_reduction` (then the log-sum-exp of F where the reduction
    ``needs_lse``); ``gnode``: the incoming gradient, likewise. Reduce the
    result over :func:`gradient_axis`.
    """
    return grad(_surrogate(name, F, W, out_nodes, gnode, axis), wrt, intcst(1))


def _surrogate(name: str, F: Node, W: Node | None, out_nodes, gnode: Node,
               axis: int) -> Node:
    """The reduction's surrogate of ``F`` and ``W``. Surrogates name the
    reduced index j: over i (``axis=0``) their own j becomes i, not the
    indices that F and W read (built on placeholders, put in afterwards)."""
    surrogate = REDUCTIONS[name].surrogate
    if axis == 1:
        return surrogate(F, W, out_nodes, gnode)
    Fp = var("p", next(VAR_KEYS), F.dim)
    Wp = var("p", next(VAR_KEYS), W.dim) if W is not None else None
    (S,) = substitute([surrogate(Fp, Wp, out_nodes, gnode)], {index("j"): index("i")})
    (S,) = substitute([S], {Fp: F, **({Wp: W} if W is not None else {})})
    return S


def tangent_formula(name: str, F: Node, W: Node | None, pairs, out_nodes,
                    axis: int) -> Node:
    """The formula whose Sum over the reduced index is the tangent (forward
    mode) of the reduction ``name`` of ``F`` (and ``W``).

    ``pairs``: ``(variable, tangent variable)``, the tangent bound like its
    variable; ``out_nodes``: as for :func:`vjp_formula`. The surrogate's
    differential with the outputs held fixed is ``<gin, d out>`` (see
    :mod:`.reductions`): its directional derivative along the tangents,
    ``sum_v <grad(S, v), t_v>``, is linear in ``gin``, and its gradient with
    respect to ``gin`` is the tangent's term of each pair.
    """
    gin = var(out_nodes[0].cat, next(VAR_KEYS), out_nodes[0].dim)
    S = _surrogate(name, F, W, out_nodes, gin, axis)
    dS = None
    for v, t in pairs:
        term = dot(grad(S, v, intcst(1)), t)
        dS = term if dS is None else make("Add", dS, term)
    return grad(dS, gin, intcst(1))


def gradient_axis(cat: str, axis: int) -> int:
    """The axis over which a :func:`vjp_formula` is summed, for a variable of
    category ``cat`` of a reduction over ``axis``: a variable of the reduced
    index gets one value per own row (a sum over the output index); one of the
    output index, and a parameter (whose rows are then summed), a sum over the
    reduced index."""
    reduced = "j" if axis == 1 else "i"
    return 1 - axis if cat == reduced else axis


def reduction_vjp(name: str, F: Node, W: Node | None, wrts, out_nodes, gnode: Node,
                  axis: int, *, reduce: Callable) -> list:
    """Gradients of ``<gin, Red(F)>`` with respect to each variable of ``wrts``.

    ``F``, ``W`` (the weight or None), ``out_nodes`` and ``gnode``: as for
    :func:`vjp_formula`. ``reduce(G, over)`` is the binding's Sum reduction of
    the formula ``G`` over axis ``over`` (its variables bound to the data of
    F, W, the forward outputs and the incoming gradient), returning an
    ``(n, dim)`` array of any kind that slices and sums (NumPy, CuPy, Dask,
    torch). The gradients of the variables summed over the same axis are
    concatenated into one formula (their common subexpressions computed once)
    and split afterwards. Returns one array per variable: ``(rows, dim)``, or
    ``(dim,)`` for a parameter.
    """
    groups: dict[int, list] = {}
    for node in wrts:
        G = vjp_formula(name, F, W, node, out_nodes, gnode, axis)
        groups.setdefault(gradient_axis(node.cat, axis), []).append((node, G))
    grads = {}
    for over, items in groups.items():
        formula = items[0][1]
        for _, G in items[1:]:
            formula = make("Concat", formula, G)
        total = reduce(formula, over)
        start = 0
        for node, G in items:
            g = total[..., start:start + G.dim]  # (batch..., rows, dim) with batch axes
            start += G.dim
            grads[node] = g.sum(-2) if node.cat == "p" else g
    return [grads[node] for node in wrts]
