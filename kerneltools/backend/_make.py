"""Operation definitions and node construction.

:class:`OpDef` is what one operation is; :data:`OPS` the registry that
:mod:`._ops` fills, one block per operation (import operations from there:
this module holds no operation). :func:`make` builds a node of a registered
operation, checking dimensions and simplifying; :func:`substitute` rebuilds
formulas through it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ._ir import Node, intcst, topo_order

__all__ = ["OpDef", "OPS", "register", "broadcast_dim", "make", "substitute",
           "FormulaError"]


class FormulaError(ValueError):
    """An operation was applied to operands of incompatible dimensions."""


@dataclass(frozen=True)
class OpDef:
    name: str
    arity: int
    numpy: Callable  # (attrs, *values) -> value; values broadcast on the last axis
    grad: Callable | None  # (node, g) -> tuple of child adjoints (None = zero)
    c: str | None = None  # elementwise spelling over scalar operands
    c_vec: Callable | None = None  # (attrs, dims, operands) -> list of C expressions
    # (attrs, dims, operands, name) -> (C statements declaring temporaries named
    # <name>_..., component expressions), or None for c_vec's spelling
    c_lines: Callable | None = None
    dim: Callable | None = None  # (attrs, dims) -> output dim; None = broadcasting
    cuda: str | None = None  # CUDA spelling where it differs from C
    domain: tuple = ()  # per operand (low, high) for the tests
    examples: tuple = ()  # for structured ops: ((dims...), attrs) samples for tests
    doc: str = ""
    method: str | None = None  # LazyTensor method name, for unary element-wise ops

    @property
    def elementwise(self) -> bool:
        return self.c_vec is None


OPS: dict[str, OpDef] = {}


def register(**kwargs) -> OpDef:
    """Add one operation to :data:`OPS` (each name once)."""
    op = OpDef(**kwargs)
    if op.name in OPS:
        raise RuntimeError(f"operation {op.name} registered twice")
    OPS[op.name] = op
    return op


def broadcast_dim(name: str, dims) -> int:
    """Dimension rule of element-wise operations: equal, or 1 broadcast."""
    out = max(dims)
    if any(d not in (1, out) for d in dims):
        raise FormulaError(
            f"{name}: incompatible dimensions {tuple(dims)}; element-wise "
            "operands must have equal dimensions or dimension 1"
        )
    return out


# ---------------------------------------------------------------------------
# Construction with simplification
# ---------------------------------------------------------------------------
def _fold(name, vals):
    """Constant folding over exact integers (None when not exact)."""
    if name == "Add":
        return vals[0] + vals[1]
    if name == "Sub":
        return vals[0] - vals[1]
    if name == "Mul":
        return vals[0] * vals[1]
    if name == "Neg":
        return -vals[0]
    if name == "Square":
        return vals[0] * vals[0]
    return None


def make(name: str, *children: Node, attrs: tuple = ()) -> Node:
    """Build the node ``name(children)``, checking dimensions and simplifying.

    Simplifications keep the value and the dimension exactly: ``x * 0``,
    ``x * 1``, ``x + 0``, ``--x``, integer constant folding, ``x - x``,
    ``x + x -> 2 x``, ``x * x -> x**2``, constants to the left of products.
    Common subexpressions are shared by interning.
    """
    op = OPS.get(name)
    if op is None:
        raise KeyError(f"unknown operation {name!r}; known: {sorted(OPS)}")
    if len(children) != op.arity:
        raise FormulaError(f"{name} takes {op.arity} operands, got {len(children)}")
    dims = tuple(c.dim for c in children)
    dim = op.dim(attrs, dims) if op.dim is not None else broadcast_dim(name, dims)
    simplified = _simplify(name, children, attrs, dim)
    if simplified is not None:
        return simplified
    return Node(name, tuple(children), tuple(attrs), dim)


def substitute(roots, mapping: dict) -> list[Node]:
    """Rebuild ``roots`` with the leaves in ``mapping`` (node -> node) replaced.

    Inner nodes are rebuilt with :func:`make`, so simplification applies.
    """
    memo: dict[int, Node] = {}
    for node in topo_order(roots):
        if node in mapping:
            memo[id(node)] = mapping[node]
        elif not node.children:
            memo[id(node)] = node
        else:
            kids = tuple(memo[id(c)] for c in node.children)
            if all(k is c for k, c in zip(kids, node.children)):
                memo[id(node)] = node
            else:
                memo[id(node)] = make(node.op, *kids, attrs=node.attrs)
    return [memo[id(r)] for r in roots]


def _simplify(name, ch, attrs, dim):
    def same(x):  # x may replace the node only if it has the node's dimension
        return x if x.dim == dim else None

    if all(c.is_int for c in ch) and ch:
        folded = _fold(name, [c.attrs[0] for c in ch])
        if folded is not None:
            return intcst(folded, dim)
    if name == "Add":
        a, b = ch
        if a.is_const(0):
            return same(b)
        if b.is_const(0):
            return same(a)
        if a is b:
            return make("Mul", intcst(2), a)
        if b.op == "Neg":
            return make("Sub", a, b.children[0])
    elif name == "Sub":
        a, b = ch
        if b.is_const(0):
            return same(a)
        if a.is_const(0) and b.dim == dim:
            return make("Neg", b)
        if a is b:
            return intcst(0, dim)
        if b.op == "Neg":
            return make("Add", a, b.children[0])
    elif name == "Mul":
        a, b = ch
        if a.is_const(0) or b.is_const(0):
            return intcst(0, dim)
        if a.is_const(1):
            return same(b)
        if b.is_const(1):
            return same(a)
        if b.is_int and not a.is_int:
            return make("Mul", b, a)
        if a.is_int and b.op == "Mul" and b.children[0].is_int:
            return make("Mul", make("Mul", a, b.children[0]), b.children[1])
        if a.op == "Neg":
            return make("Neg", make("Mul", a.children[0], b))
        if b.op == "Neg":
            return make("Neg", make("Mul", a, b.children[0]))
        if a is b:
            return make("Square", a)
    elif name == "Div":
        a, b = ch
        if b.is_const(1):
            return same(a)
        if a.is_const(0):
            return intcst(0, dim)
    elif name == "Neg":
        if ch[0].op == "Neg":
            return ch[0].children[0]
    elif name == "Exp":
        if ch[0].is_const(0):
            return intcst(1, dim)
    elif name == "Log":
        if ch[0].is_const(1):
            return intcst(0, dim)
    elif name == "SumFeat":
        if ch[0].is_int:
            return intcst(ch[0].attrs[0] * ch[0].dim, 1)
        if ch[0].dim == 1:
            return ch[0]
    elif name == "Pow":
        n = attrs[0]
        if n == 1:
            return ch[0]
        if n == 0:
            return intcst(1, dim)
        if n == 2:
            return make("Square", ch[0])
        if n == -1:
            return make("Inv", ch[0])
    elif name == "IfElse":
        if ch[1] is ch[2] and ch[1].dim == dim:
            return ch[1]
    elif name == "Extract":
        if attrs == (0, ch[0].dim):
            return ch[0]
    elif name == "Concat":
        a, b = ch  # a constant vector: made by doubling, it stays one node
        if a.is_int and b.is_int and a.attrs == b.attrs:
            return intcst(a.attrs[0], dim)
    return None
