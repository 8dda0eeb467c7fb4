"""A reduction plan: canonical formulas, reduction, sizes and dtype.

The plan is separate from its execution (like opt_einsum's contraction path):
it renames the variables to their argument positions in order of first
appearance, and swaps i and j for reductions over i, so that every backend
only ever reduces over j. Its ``key`` identifies the compiled kernel: it
changes with the formula's structure, the reduction, K, the dtype and the
variables' dimensions, and not with the sizes N, M or the parameters' values.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from ._ir import Node, canonical_text, index, topo_order, var
from .reductions import REDUCTIONS, Reduction

__all__ = ["Plan", "make_plan"]

_SWAP = {"i": "j", "j": "i", "p": "p"}


@dataclass(frozen=True)
class Plan:
    formulas: tuple[Node, ...]  # canonical: Var(cat, position, dim); reduce over j
    reduction: str
    K: int
    dtype: np.dtype
    nx: int  # output rows
    ny: int  # reduced rows
    arg_cats: tuple[str, ...]  # category of each argument, after the swap
    arg_dims: tuple[int, ...]
    axis: int  # the user's axis (1: over j; 0: over i, swapped here)
    _key: list = field(default_factory=list, repr=False, compare=False)
    _signature: tuple = field(default=(), repr=False, compare=False)

    @property
    def red(self) -> Reduction:
        return REDUCTIONS[self.reduction]

    @property
    def signature(self) -> tuple:
        """Everything that shapes the generated code, as a hashable tuple."""
        return self._signature or (self.formulas, self.reduction, self.K,
                                   np.dtype(self.dtype), self.arg_cats, self.arg_dims)

    @property
    def key(self) -> str:
        """SHA-256 over everything that shapes the generated code."""
        if not self._key:
            known = _KEYS.get(self.signature)
            if known is not None:
                self._key.append(known)
                return known
            text = "\n".join(
                [
                    canonical_text(list(self.formulas)),
                    f"reduction={self.reduction}",
                    f"K={self.K}",
                    f"dtype={np.dtype(self.dtype).name}",
                    "args=" + ",".join(f"{c}{d}" for c, d in zip(self.arg_cats, self.arg_dims)),
                ]
            )
            self._key.append(hashlib.sha256(text.encode()).hexdigest())
            _remember(_KEYS, self.signature, self._key[0])
        return self._key[0]

    def __repr__(self) -> str:  # a readable report, like opt_einsum's PathInfo
        lines = [
            f"Plan: {self.reduction} over {'j' if self.axis == 1 else 'i (swapped)'}"
            f"{f', K={self.K}' if self.red.uses_k else ''}, {np.dtype(self.dtype).name}",
            f"  output rows {self.nx}, reduced rows {self.ny}",
            "  arguments: "
            + ", ".join(f"{c}{k}[{d}]" for k, (c, d) in enumerate(zip(self.arg_cats, self.arg_dims))),
            f"  nodes: {len(topo_order(list(self.formulas)))}",
        ]
        lines += [f"  formula {k}: {f}" for k, f in enumerate(self.formulas)]
        lines.append(f"  key: {self.key[:16]}")
        return "\n".join(lines)


#: Memo of canonical forms and plan keys: warm calls skip the formula walks.
_CANON: dict = {}
_KEYS: dict = {}
_CATS: dict = {}
_MEMO_SIZE = 512


def _remember(memo: dict, key, value):
    if len(memo) >= _MEMO_SIZE:
        memo.pop(next(iter(memo)))
    memo[key] = value
    return value


def canonicalize(formulas, axis: int):
    """Rename variables to positions (first appearance); swap i/j when axis == 0.

    Returns the new formulas and the original variable nodes, in position order.
    """
    memo_key = (tuple(formulas), axis)
    hit = _CANON.get(memo_key)
    if hit is not None:
        return hit
    return _remember(_CANON, memo_key, _canonicalize(formulas, axis))


def _canonicalize(formulas, axis: int):
    from ._ops import substitute

    mapping: dict[Node, Node] = {}
    originals: list[Node] = []
    for node in topo_order(formulas):
        if node.op == "Var" and node not in mapping:
            cat = node.cat if axis == 1 else _SWAP[node.cat]
            mapping[node] = var(cat, len(originals), node.dim)
            originals.append(node)
        elif node.op == "Index" and axis == 0:
            mapping[node] = index(_SWAP[node.cat])
    return tuple(substitute(list(formulas), mapping)), tuple(originals)


def make_plan(formulas, reduction: str, axis: int, K: int, array_of, dtype, nx, ny):
    """Build a :class:`Plan` and its positional argument list.

    ``array_of(node)`` gives the array of each original variable node; ``nx``
    and ``ny`` are the sizes of the i and j axes of the user's formula.
    """
    canon, originals = canonicalize(formulas, axis)
    args = [array_of(v) for v in originals]
    dtype = np.dtype(dtype)
    cats, dims = _CATS.get((originals, axis)) or _remember(_CATS, (originals, axis), (
        tuple(v.cat if axis == 1 else _SWAP[v.cat] for v in originals),
        tuple(v.dim for v in originals),
    ))
    plan = Plan(
        formulas=canon,
        reduction=reduction,
        K=int(K),
        dtype=dtype,
        nx=nx if axis == 1 else ny,
        ny=ny if axis == 1 else nx,
        arg_cats=cats,
        arg_dims=dims,
        axis=axis,
        _signature=(canon, reduction, int(K), dtype, cats, dims),
    )
    return plan, args
