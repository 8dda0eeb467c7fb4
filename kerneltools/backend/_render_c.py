"""Render formulas as straight-line C statements over scalars.

Shared by the CPU (C + OpenMP) and CUDA templates: nothing here knows about
threads, tiles or memory layouts. The caller says how each variable's
components are read (``var_expr``) and the renderer returns the statements
that compute every node, grouped by the loop level they belong to:

* ``"p"``: depends on parameters and constants only (once per call),
* ``"i"``: depends on the output index but not the reduced one (once per row),
* ``"j"``: depends on the reduced index but not the output one (once per j),
* ``"ij"``: depends on both (the inner loop).

Every node of dimension ``d`` becomes ``d`` scalar temporaries
``t<node>_<component>``; operations are spelled from the registry, so this
file never names one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ._ir import Node
from ._ops import OPS

__all__ = ["render_formulas", "Rendered", "c_literal"]


def c_literal(value) -> str:
    """An exact integer constant as C: an integer literal up to 2^53 (exact in
    a double), beyond as the nearest double, as NumPy converts it (an integer
    literal past 64 bits is too large for any C type, and gcc truncated it)."""
    value = int(value)
    if abs(value) <= 1 << 53:
        return f"((real_t){value})"
    return f"((real_t){float(value)!r})"


@dataclass
class Rendered:
    statements: dict = field(default_factory=lambda: {lv: [] for lv in LEVELS})
    outputs: list = field(default_factory=list)  # per formula: component expressions
    names: dict = field(default_factory=dict)  # node -> component expressions
    levels: dict = field(default_factory=dict)  # node -> level

    def code(self, level: str, indent: str = "") -> str:
        return "\n".join(indent + s for s in self.statements[level])


#: Loop levels: parameters only, i only, j only, both i and j.
LEVELS = ("p", "i", "j", "ij")
_MASK_LEVEL = {0: "p", 1: "i", 2: "j", 3: "ij"}
_LEAF_MASK = {"i": 1, "j": 2, "p": 0}


def _topo_cut(roots, given) -> list[Node]:
    """Topological order of the nodes reachable without entering ``given`` nodes."""
    order, seen = [], set()
    for root in roots:
        stack = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            if expanded:
                order.append(node)
                continue
            if node in seen:
                continue
            seen.add(node)
            stack.append((node, True))
            if node not in given:
                stack.extend((c, False) for c in reversed(node.children) if c not in seen)
    return order


def node_levels(formulas, given=None) -> dict:
    """Loop level of every node: 'p', 'i', 'j' or 'ij' by what it depends on."""
    given = given or {}
    masks: dict[Node, int] = {}
    for node in _topo_cut(formulas, given):
        if node in given:
            masks[node] = given[node][1]
        elif node.op in ("Var", "Index"):
            masks[node] = _LEAF_MASK[node.cat]
        elif not node.children:
            masks[node] = 0
        else:
            m = 0
            for c in node.children:
                m |= masks[c]
            masks[node] = m
    return {n: _MASK_LEVEL[m] for n, m in masks.items()}


def render_formulas(formulas, var_expr, index_expr, *, target: str = "c",
                    given=None, prefix: str = "t") -> Rendered:
    """Statements computing ``formulas``.

    Parameters
    ----------
    formulas : list of Node
        Canonical formulas (variables ``Var(cat, position, dim)``).
    var_expr : callable
        ``var_expr(node, component) -> str``: how to read a variable's component.
    index_expr : dict
        C expressions of the running indices, ``{"i": ..., "j": ...}``.
    target : {"c", "cuda"}
        Picks the CUDA spelling of operations that have one.
    given : dict, optional
        ``node -> (component expressions, dependency mask)`` for nodes that the
        template computes itself (i = 1, j = 2); their operands are not rendered.
    prefix : str
        Names of the temporaries: ``<prefix><node>_<component>``, so that two
        renderings can share a scope.
    """
    given = given or {}
    out = Rendered()
    out.levels = node_levels(formulas, given)
    names: dict[Node, list[str]] = {}
    for k, node in enumerate(_topo_cut(formulas, given)):
        level = out.levels[node]
        if node in given:
            names[node] = list(given[node][0])
            continue
        if node.op == "Int":
            names[node] = [c_literal(node.attrs[0])] * node.dim
            continue
        if node.op == "Pi":
            names[node] = ["PI_R"]
            continue
        if node.op == "Index":
            exprs = [f"((real_t)({index_expr[node.cat]}))"]
        elif node.op == "Var":
            exprs = [var_expr(node, c) for c in range(node.dim)]
        else:
            lines, exprs = _spell(node, [names[c] for c in node.children], target,
                                  f"{prefix}{k}")
            out.statements[level] += lines
        temps = [f"{prefix}{k}_{c}" for c in range(node.dim)]
        out.statements[level] += [
            f"const real_t {t} = {e};" for t, e in zip(temps, exprs)
        ]
        names[node] = temps
    out.names = names
    out.outputs = [names[f] for f in formulas]
    return out


def _spell(node: Node, operands: list[list[str]], target: str, name: str):
    """(statements, component expressions) of an operation node; the
    statements (few operations have any) declare temporaries ``<name>_...``."""
    op = OPS[node.op]
    dims = [c.dim for c in node.children]
    if op.c_lines is not None:
        spelled = op.c_lines(node.attrs, dims, operands, name)
        if spelled is not None:
            return spelled
    if op.c_vec is not None:
        return [], op.c_vec(node.attrs, dims, operands)
    fmt = op.cuda if (target == "cuda" and op.cuda) else op.c
    attrs = {f"a{k}": a for k, a in enumerate(node.attrs)}
    exprs = []
    for c in range(node.dim):
        args = [ops[c] if len(ops) > 1 else ops[0] for ops in operands]
        exprs.append(fmt.format(*args, **attrs))
    return [], exprs
