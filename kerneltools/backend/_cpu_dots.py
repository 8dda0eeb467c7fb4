"""Wide dot products in the dense C kernel: the j-variables' squared norms.

A squared distance ``|x_i - y_j|^2`` of dimension >= ``DOT_MIN_DIM`` is
computed in the expanded form ``|x_i|^2 + |y_j|^2 - 2 <x_i, y_j>`` (see
:func:`._cpu_codegen._rewrite_dots`), the products by the register-blocked
micro-kernel. Left to the generic code, ``|y_j|^2`` is a j-only node: every
block of rows recomputes it for every tile, a loop over the D features whose
one accumulator chains each FMA to the previous one (about a third of the
run time of ``K @ B`` at D = 79, half of the products' time at D = 2,000).

Here the norms are computed once per call, in double (by chunks of rows, so
that no double copy of ``y`` is made), rounded to the plan's dtype and
passed to the kernel as one more array (``yn<q>``, one value per point,
read as ``yn<q>[j]``). A j-variable then read only through the products
and the norms (``tile_free``) is not packed by tiles at all: one copy of
``y`` (the micro-kernel's chunks) instead of two. NaN and inf propagate as in the kernel's own sum (a
NaN feature gives a NaN norm, an infinite one inf); the expanded form's
handling of an infinite norm and its clamp at 0 are unchanged.
"""

from __future__ import annotations

import numpy as np

from . import _ops

__all__ = ["norm_given", "norm_pointers", "row_sqnorms", "tile_free"]

#: Bytes of one chunk of the norms' double-precision pass (bounds its copy:
#: rows of 4096 would be 65 MB at D = 2,000).
_CHUNK_BYTES = 1 << 22


def norm_given(dots) -> dict:
    """``given`` entries of the renderer for the dot products' j-norms:
    ``|y|^2`` of dot product q read from ``yn<q>[j]`` (a j-level value)."""
    return {_ops.sqnorm2(y): ([f"yn{q}[j]"], 2) for q, (_, _, y) in enumerate(dots)}


def tile_free(formulas, dots) -> tuple:
    """Positions of the dot products' j-variables that ``formulas`` read only
    through the products and their norms: the kernel needs no tile-packed
    copy of them (the run passes a placeholder, no tile pointer is made)."""
    cut = {n for n, _, _ in dots} | set(norm_given(dots))
    seen, read, stack = set(), set(), list(formulas)
    while stack:
        n = stack.pop()
        if n in seen or n in cut:
            continue
        seen.add(n)
        if n.op == "Var" and n.cat == "j":
            read.add(n.attrs[1])
        stack.extend(n.children)
    return tuple(sorted({y.attrs[1] for _, _, y in dots} - read))


def norm_pointers(dots) -> list:
    """(C type, name) of the norm arrays, in the order the run passes them."""
    return [("const real_t", f"yn{q}") for q in range(len(dots))]


def row_sqnorms(a: np.ndarray, dtype) -> np.ndarray:
    """Squared norms of the rows of ``a`` (n, d), summed in double and
    rounded to ``dtype``."""
    a = np.asarray(a)
    out = np.empty(len(a), dtype=np.float64)
    rows = max(1, _CHUNK_BYTES // (8 * max(1, a.shape[1])))
    for s in range(0, len(a), rows):
        blk = np.asarray(a[s:s + rows], dtype=np.float64)
        np.einsum("ij,ij->i", blk, blk, out=out[s:s + rows])
    with np.errstate(over="ignore"):  # a norm past the dtype's range: inf
        return out.astype(dtype)
