"""Formula intermediate representation: immutable, interned expression nodes.

A formula is a directed acyclic graph of :class:`Node` objects. Nodes are
*interned* (hash-consed): building the same node twice returns the same object,
so structural equality is identity, common subexpressions are shared for free
and every walk over a formula can memoise on the node itself.

Leaves are variables (``Var``: an i-, j- or parameter variable with a key and a
dimension; user variables are keyed by :data:`VAR_KEYS`, unique across
processes, so that formulas pickled in one process and combined in another
never mistake two variables for one), integer constants (``Int``, exact, possibly a constant vector), the
constant pi (``Pi``) and the running index of a reduction (``Index``). Inner
nodes name an operation of the registry in :mod:`._ops`.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import secrets
import threading
import weakref
from typing import NamedTuple

__all__ = ["Node", "CATEGORIES", "VAR_KEYS", "VarKey", "var", "intcst", "pi", "index",
           "topo_order"]

#: Variable categories: indexed by i, indexed by j, parameter (shared by all).
CATEGORIES = ("i", "j", "p")

_INTERN: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_LOCK = threading.Lock()


class Node:
    """One interned node of a formula.

    Do not call the constructor with invalid data: build nodes through
    :func:`kerneltools.backend._ops.make` (operations, which check dimensions
    and simplify) or the leaf helpers of this module.
    """

    __slots__ = ("op", "children", "attrs", "dim", "_hash", "_key", "__weakref__")

    op: str
    children: tuple[Node, ...]
    attrs: tuple
    dim: int

    def __new__(cls, op: str, children: tuple = (), attrs: tuple = (), dim: int = 1):
        key = (op, children, attrs, dim)
        with _LOCK:
            node = _INTERN.get(key)
            if node is None:
                node = object.__new__(cls)
                node.op = op
                node.children = children
                node.attrs = attrs
                node.dim = dim
                node._hash = hash((op, tuple(c._hash for c in children), attrs, dim))
                node._key = None
                _INTERN[key] = node
        return node

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        return self is other

    def __reduce__(self):
        # A flat list in topological order, rebuilt by a loop: deep formulas
        # pickle without hitting the recursion limit.
        return (_unflatten, (_flatten(self),))

    def __setattr__(self, name, value):
        if name in ("op", "children", "attrs", "dim", "_hash") and hasattr(self, name):
            raise AttributeError("formula nodes are immutable")
        object.__setattr__(self, name, value)

    # -- inspection --------------------------------------------------------
    @property
    def is_var(self) -> bool:
        return self.op == "Var"

    @property
    def is_int(self) -> bool:
        return self.op == "Int"

    def is_const(self, value) -> bool:
        """True for an integer constant node equal to ``value``."""
        return self.op == "Int" and self.attrs[0] == value

    @property
    def cat(self) -> str:
        """Category of a ``Var`` or ``Index`` leaf: 'i', 'j' or 'p'."""
        return self.attrs[0]

    @property
    def key(self) -> str:
        """SHA-256 of the canonical text: stable across processes and runs."""
        if self._key is None:
            digest = hashlib.sha256(self.text().encode()).hexdigest()
            object.__setattr__(self, "_key", digest)
        return self._key

    def text(self) -> str:
        """Canonical text: one line per distinct node, in topological order."""
        return canonical_text([self])

    def __repr__(self) -> str:
        return f"<formula {short_text(self)} (dim {self.dim})>"

    def __str__(self) -> str:
        return short_text(self)

    def size(self) -> int:
        """Number of distinct nodes (the DAG size, not the tree size)."""
        return len(topo_order([self]))


def _flatten(root: Node) -> tuple:
    order = topo_order([root])
    pos = {id(n): k for k, n in enumerate(order)}
    return tuple(
        (n.op, tuple(pos[id(c)] for c in n.children), n.attrs, n.dim) for n in order
    )


def _unflatten(entries: tuple) -> Node:
    nodes: list[Node] = []
    for op, kids, attrs, dim in entries:
        nodes.append(Node(op, tuple(nodes[k] for k in kids), attrs, dim))
    return nodes[-1]


class VarKey(NamedTuple):
    """The key of a user variable: a serial number in the process that made
    it, and that process's random token (64 bits, drawn again in a forked
    child). Unique across processes, and it survives pickling, so variables
    keep their identity; compiled kernels never see it (plans renumber the
    variables by position)."""

    serial: int
    origin: str

    def __str__(self) -> str:
        return f"{self.serial}@{self.origin}"


class _VarKeys:
    """``next(VAR_KEYS)``: a new :class:`VarKey`."""

    def __init__(self):
        self._serial = itertools.count()
        self.renew()

    def renew(self) -> None:
        self._origin = secrets.token_hex(8)

    def __iter__(self):
        return self

    def __next__(self) -> VarKey:
        return VarKey(next(self._serial), self._origin)


#: The source of user variables' keys.
VAR_KEYS = _VarKeys()
if hasattr(os, "register_at_fork"):  # a forked child must not reuse its parent's keys
    os.register_at_fork(after_in_child=VAR_KEYS.renew)


def var(cat: str, key, dim: int) -> Node:
    """A variable leaf: category 'i', 'j' or 'p', any hashable key, dimension."""
    if cat not in CATEGORIES:
        raise ValueError(f"variable category must be one of {CATEGORIES}, got {cat!r}")
    return Node("Var", (), (cat, key), int(dim))


def intcst(value: int, dim: int = 1) -> Node:
    """An exact integer constant, repeated ``dim`` times."""
    return Node("Int", (), (int(value),), int(dim))


def pi() -> Node:
    """The constant pi (needed by derivative rules, e.g. of sinc)."""
    return Node("Pi", (), (), 1)


def index(cat: str) -> Node:
    """The running index i or j of a reduction, as a real number (dim 1)."""
    if cat not in ("i", "j"):
        raise ValueError(f"index category must be 'i' or 'j', got {cat!r}")
    return Node("Index", (), (cat,), 1)


def topo_order(roots) -> list[Node]:
    """Distinct nodes reachable from ``roots``, children before parents.

    Iterative (no recursion limit for deep formulas) and deterministic.
    """
    order: list[Node] = []
    seen: set[int] = set()
    for root in roots:
        if id(root) in seen:
            continue
        stack = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            if expanded:
                order.append(node)
                continue
            if id(node) in seen:
                continue
            seen.add(id(node))
            stack.append((node, True))
            for child in reversed(node.children):
                if id(child) not in seen:
                    stack.append((child, False))
    return order


def _leaf_text(node: Node, full: bool = True) -> str:
    if node.op == "Var":
        key = node.attrs[1]
        if not full and isinstance(key, VarKey):
            key = key.serial  # readable; the canonical text keeps the whole key
        return f"Var({node.attrs[0]},{key},{node.dim})"
    if node.op == "Int":
        return f"{node.attrs[0]}" if node.dim == 1 else f"Int({node.attrs[0]},{node.dim})"
    if node.op == "Index":
        return f"Index({node.attrs[0]})"
    return node.op


def canonical_text(roots) -> str:
    """A text form that is linear in the DAG size; the cache keys hash it."""
    names: dict[int, str] = {}
    lines = []
    for k, node in enumerate(topo_order(roots)):
        name = f"t{k}"
        names[id(node)] = name
        if not node.children:
            body = _leaf_text(node)
        else:
            args = [names[id(c)] for c in node.children]
            args += [repr(a) for a in node.attrs]
            body = f"{node.op}({','.join(args)})"
        lines.append(f"{name}={body}:{node.dim}")
    lines.append("out=" + ",".join(names[id(r)] for r in roots))
    return "\n".join(lines)


def short_text(node: Node, limit: int = 400) -> str:
    """Human-readable nested form (truncated), for errors and repr."""
    memo: dict[int, str] = {}
    for n in topo_order([node]):
        if not n.children:
            memo[id(n)] = _leaf_text(n, full=False)
            continue
        args = [memo[id(c)] for c in n.children] + [repr(a) for a in n.attrs]
        s = f"{n.op}({', '.join(args)})"
        memo[id(n)] = s if len(s) <= limit else s[: limit - 3] + "..."
    return memo[id(node)]
