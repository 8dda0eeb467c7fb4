"""The symbolic core of the two bindings: the contract between them.

``kerneltools.lazy`` (NumPy, CuPy and Dask arrays) and ``kerneltools.torch``
(torch tensors, through the former) build on the names of this module and of
:mod:`kerneltools.lazy._reducing`, and on nothing private of each other. Changing
one of these names means changing both bindings; anything else in either
binding is its own business.

A ``kerneltools.lazy.LazyTensor`` (torch's wraps one, with the tensors
behind its variables) is four fields, set by :func:`from_parts` or, from
data, by its constructor:

* ``formula``: the formula, a :class:`~kerneltools.backend._ir.Node`;
* its bindings, ``{variable node: Binding}`` (read with :func:`bindings_of`);
* ``ni`` and ``nj``: the number of i- and j-points, None where the formula
  uses no variable of that index;

and, optionally, the block-sparsity ``ranges`` its reductions default to
(:func:`ranges_of`). Operands combine with :func:`apply` (a registered
operation) or :func:`compose` (a composite: a function of formula nodes),
which check that they index the same points (:func:`merge`); the result
keeps the operands' ranges (:func:`merge_ranges`), as in pykeops.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._args import check_axis
from ..backend._ir import VAR_KEYS, Node, var
from ..backend._ops import FormulaError, make

__all__ = ["Binding", "MATMUL_BLOCK", "apply", "batch_of", "bindings_of", "check_axis",
           "check_ranges", "compose", "dtype_of", "from_parts", "lift", "merge",
           "merge_ranges", "new_var", "ranges_of", "symbols_of", "check_symbols",
           "bind_symbols"]

#: Widest right operand that ``K @ b`` reduces in one generated kernel (wider
#: ones go block by block, so one kernel serves every width).
MATMUL_BLOCK = 32


@dataclass(frozen=True)
class Binding:
    """The data of one variable of a formula."""

    array: np.ndarray | None  # (*batch, n, d) for i- and j-variables, (*batch, d) for
    # parameters; None for a symbolic variable, whose data come at call time
    weak: bool = False  # Python floats: they do not take part in dtype promotion
    batch: tuple = ()  # leading batch axes, reduced independently
    symbol: int | None = None  # pykeops' index of a symbolic variable (Vi(0, 3))


def new_var(cat: str, dim: int) -> Node:
    """A new variable of category ``cat`` ("i", "j" or "p"), unique across
    processes (see ``backend._ir.VarKey``)."""
    return var(cat, next(VAR_KEYS), dim)


def from_parts(cls, formula: Node, bindings: dict, ni, nj, ranges=None):
    """A LazyTensor of class ``cls`` made of these fields (``cls.__init__``,
    which takes user data, is not called)."""
    out = object.__new__(cls)
    out.formula, out._bindings, out.ni, out.nj = formula, bindings, ni, nj
    if ranges is not None:
        out._ranges = ranges
    return out


def bindings_of(t) -> dict:
    """``{variable node: Binding}`` of a LazyTensor (not to be modified)."""
    return t._bindings


def ranges_of(t):
    """The ranges that ``t``'s reductions default to (``with_ranges``), or None."""
    return t.__dict__.get("_ranges")


def check_ranges(ranges):
    """``ranges`` if it can describe a block-sparse reduction (None, a
    ``BlockSparsity`` or KeOps' 6-tuple; the contents are checked against the
    formula's sizes when a reduction runs), else a TypeError."""
    if ranges is None or hasattr(ranges, "side"):  # a BlockSparsity
        return ranges
    if isinstance(ranges, (tuple, list)) and len(ranges) == 6:
        return tuple(ranges)
    raise TypeError(
        "ranges must be None, a BlockSparsity (kerneltools.ranges) or KeOps' 6-tuple "
        "(ranges_i, slices_i, redranges_j, ranges_j, slices_j, redranges_i); "
        f"got {type(ranges).__name__}"
    )


def _same_ranges(a, b) -> bool:
    if a is b:
        return True
    if isinstance(a, tuple) and isinstance(b, tuple):
        return all(np.array_equal(np.asarray(u), np.asarray(v)) for u, v in zip(a, b))
    return False


def merge_ranges(parts):
    """The ranges of a formula over the LazyTensors ``parts``: the one that
    they carry (None if none does); a ValueError if two carry different ones."""
    out = None
    for p in parts:
        r = ranges_of(p)
        if r is None:
            continue
        if out is not None and not _same_ranges(out, r):
            raise ValueError(
                "the operands carry different block-sparsity ranges; give one of "
                "them ranges (with_ranges / .ranges), or pass ranges= to the reduction"
            )
        out = r
    return out


def lift(cls, x):
    """``x`` as a LazyTensor of class ``cls`` (itself if it is one)."""
    return x if isinstance(x, cls) else cls(x)


def batch_of(bindings) -> tuple:
    """The broadcast batch shape of bindings (ValueError if they do not)."""
    shapes = [b.batch for b in bindings if b.batch]
    return tuple(np.broadcast_shapes(*shapes)) if shapes else ()


def dtype_of(bindings: dict) -> np.dtype:
    """The dtype that reductions compute in: NumPy promotion of the strongly
    typed data (float64 for integers or none, float32 for float16)."""
    strong = [b.array.dtype for b in bindings.values()
              if not b.weak and b.array is not None]
    if not strong:
        return np.dtype(np.float64)
    dt = np.result_type(*strong)
    if dt.kind in "biu":
        return np.dtype(np.float64)
    if dt == np.float16:
        return np.dtype(np.float32)
    return dt


def merge(parts) -> tuple[dict, int | None, int | None]:
    """(bindings, ni, nj) of a formula over the LazyTensors ``parts``; a
    ValueError names their shapes when they index different numbers of i- or
    j-points, or have batch axes that do not broadcast."""
    bindings: dict = {}
    ni = nj = None
    for p in parts:
        bindings.update(bindings_of(p))
        for attr, cur in (("ni", ni), ("nj", nj)):
            n = getattr(p, attr)
            if n is not None and cur is not None and n != cur:
                idx = attr[1]
                raise ValueError(
                    f"the operands index {cur} and {n} points by {idx}: every "
                    f"{idx}-variable of a formula must have the same number of rows "
                    f"(operand shapes: {_shapes(parts)})"
                )
        ni = ni if p.ni is None else p.ni
        nj = nj if p.nj is None else p.nj
    if any(b.batch for b in bindings.values()):
        try:
            batch_of(bindings.values())
        except ValueError:
            raise ValueError(
                f"the operands' batch axes do not broadcast (operand shapes: {_shapes(parts)})"
            ) from None
    return bindings, ni, nj


def apply(t, name: str, *others, attrs=()):
    """The registered operation ``name`` of ``t`` and ``others`` (LazyTensors or
    data, lifted to ``t``'s class), a LazyTensor of ``t``'s class."""
    return compose(t, lambda *nodes: make(name, *nodes, attrs=attrs), *others)


def compose(t, fn, *others):
    """``fn`` (a function of formula nodes, a composite) of ``t`` and
    ``others``; a formula error is a ValueError naming the operands' shapes."""
    cls = type(t)
    parts = [t] + [lift(cls, o) for o in others]
    bindings, ni, nj = merge(parts)
    if any(b.symbol is not None for b in bindings.values()):
        symbols_of(*parts)  # one index, one variable
    try:
        node = fn(*(p.formula for p in parts))
    except FormulaError as exc:
        raise ValueError(f"{exc} (operand shapes {_shapes(parts)})") from None
    out = from_parts(cls, node, bindings, ni, nj, ranges=merge_ranges(parts))
    for p in parts:  # pykeops' ``K.backend = ...`` carries over, as ranges do
        if "_backend" in p.__dict__:
            out._backend = p._backend
            break
    return out


def _shapes(parts) -> str:
    return ", ".join(str(p.shape) for p in parts)


# -- symbolic variables (pykeops' Vi(0, 3), LazyTensor((0, 3, 0))) -------------
_CAT_NAMES = {"i": "Vi", "j": "Vj", "p": "Pm"}


def symbols_of(*parts) -> dict:
    """``{pykeops index: variable node}`` of the symbolic variables of the
    LazyTensors ``parts`` (other values are skipped); a ValueError if one
    index stands for two different variables."""
    out: dict = {}
    for p in parts:
        p = getattr(p, "_lt", p)  # kerneltools.torch's wraps a NumPy-level one
        if not hasattr(p, "_bindings"):
            continue
        for node, b in bindings_of(p).items():
            if b.symbol is None:
                continue
            if b.symbol in out and out[b.symbol] is not node:
                other = out[b.symbol]
                raise ValueError(
                    f"the symbolic variable index {b.symbol} is used twice, by "
                    f"{_CAT_NAMES[other.cat]}({b.symbol}, {other.dim}) and "
                    f"{_CAT_NAMES[node.cat]}({b.symbol}, {node.dim})")
            out[b.symbol] = node
    return out


def check_symbols(*parts) -> None:
    """ValueError if the LazyTensors ``parts`` still have symbolic variables
    (a reduction of them needs their data: call it with the arrays)."""
    sym = symbols_of(*parts)
    if sym:
        raise ValueError(
            f"the formula has symbolic variables (indices {sorted(sym)}) without data; "
            "call the reduction's result with one array per index")


def bind_symbols(t, arrays: dict, check_array):
    """``t`` with its symbolic variables bound: ``arrays`` maps a pykeops index
    to its data, (n, D) for Vi/Vj, (D,) for Pm; ``check_array(x, what)``
    converts one. A LazyTensor of ``t``'s class."""
    if not hasattr(t, "_bindings"):
        return t
    bindings, ni, nj = dict(bindings_of(t)), t.ni, t.nj
    for node, b in bindings_of(t).items():
        if b.symbol is None:
            continue
        what = f"the argument {b.symbol} ({_CAT_NAMES[node.cat]} of dimension {node.dim})"
        a = check_array(arrays[b.symbol], what)
        if node.cat == "p":
            a = a.reshape(-1)
            if a.shape != (node.dim,):
                raise ValueError(f"{what} must have shape ({node.dim},), got {a.shape}")
        else:
            a = a.reshape(-1, 1) if a.ndim == 1 and node.dim == 1 else a
            if a.ndim != 2 or a.shape[1] != node.dim:
                raise ValueError(f"{what} must have shape (n, {node.dim}), got {a.shape}")
            n = a.shape[0]
            cur = ni if node.cat == "i" else nj
            if cur is not None and cur != n:
                raise ValueError(f"{what} has {n} rows, but the formula's other "
                                 f"{node.cat}-variables have {cur}")
            ni, nj = (n, nj) if node.cat == "i" else (ni, n)
        bindings[node] = Binding(a)
    return from_parts(type(t), t.formula, bindings, ni, nj, ranges=ranges_of(t))
