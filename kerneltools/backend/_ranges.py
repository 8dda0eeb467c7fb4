"""Block-sparse reductions: visit only the (output block, reduced interval)
pairs that a description keeps.

Two descriptions are accepted (see :mod:`kerneltools.ranges` for the helpers
that build them):

* KeOps' 6-tuple ``(ranges_i, slices_i, redranges_j, ranges_j, slices_j,
  redranges_i)`` of int arrays, on the data in the order given: ``ranges_i``
  (B, 2) are contiguous blocks ``[start, end)`` of output rows for a reduction
  over j, ``slices_i`` (B,) the cumulative end of each block's intervals in
  ``redranges_j`` (R, 2), the intervals of j to visit; the last three are the
  transposed description, for reductions over i;
* a :class:`BlockSparsity` (cluster-based, any point order): for each output
  block, its rows and the reduced indices to visit, as index arrays.

Both become a list of ``(rows, cols)`` index arrays per reduction axis. Each
block is one dense reduction of the backend on the gathered rows and
candidates (so every backend supports it, with its own kernels); outputs are
written back at ``rows`` (the caller's order) and arg-indices mapped through
``cols``. Candidates are visited in increasing index order, so ties resolve
as in the dense reduction; a description that covers everything gives
exactly the dense result. Rows in no block get the reduction's identity (the
value of an empty reduction: 0 for sums, +inf and index -1 for minima).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ._ir import index, substitute, topo_order, var
from ._plan import Plan

__all__ = ["BlockSparsity", "blocks_for", "run_blocks"]


@dataclass(frozen=True)
class BlockSparsity:
    """Blocks of a reduction, as index arrays, for each axis.

    ``over_j[k] = (rows, cols)``: output rows (i) of block k and the j to
    visit for them, increasing; ``over_i``: the same for reductions over i
    (output rows j, visited i). ``shape`` is (N, M).
    """

    shape: tuple
    over_j: tuple
    over_i: tuple

    @property
    def density(self) -> float:
        """Fraction of the N x M pairs that a reduction over j visits."""
        n, m = self.shape
        return sum(len(r) * len(c) for r, c in self.over_j) / max(1, n * m)

    def __repr__(self) -> str:
        return (f"BlockSparsity(shape={self.shape}, blocks={len(self.over_j)}, "
                f"density={self.density:.3g})")


def _int_array(a, name: str, shape_tail: tuple) -> np.ndarray:
    arr = np.asarray(a)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"ranges: '{name}' must hold integers, got dtype {arr.dtype}")
    if arr.ndim != 1 + len(shape_tail) or arr.shape[1:] != shape_tail:
        want = "(B,)" if not shape_tail else "(B, 2)"
        raise ValueError(f"ranges: '{name}' must have shape {want}, got {arr.shape}")
    return arr.astype(np.int64)


def _from_tuple(ranges, n_out: int, n_red: int, names) -> tuple:
    out_ranges = _int_array(ranges[0], names[0], (2,))
    slices = _int_array(ranges[1], names[1], ())
    red = _int_array(ranges[2], names[2], (2,))
    if len(slices) != len(out_ranges):
        raise ValueError(f"ranges: '{names[1]}' has {len(slices)} entries for "
                         f"{len(out_ranges)} blocks in '{names[0]}'")
    for arr, n, name in ((out_ranges, n_out, names[0]), (red, n_red, names[2])):
        if len(arr) and ((arr[:, 0] < 0).any() or (arr[:, 1] > n).any()
                         or (arr[:, 0] > arr[:, 1]).any()):
            raise ValueError(f"ranges: '{name}' holds an interval outside [0, {n}] "
                             "or with start > end")
    order = np.argsort(out_ranges[:, 0], kind="stable")
    s = out_ranges[order]
    if len(s) > 1 and (s[1:, 0] < s[:-1, 1]).any():
        raise ValueError(f"ranges: the output blocks of '{names[0]}' overlap")
    if len(slices) and ((np.diff(slices) < 0).any() or slices[0] < 0
                        or slices[-1] > len(red)):
        raise ValueError(f"ranges: '{names[1]}' must be non-decreasing ends of intervals "
                         f"in '{names[2]}' (at most {len(red)})")
    blocks = []
    start = 0
    for (r0, r1), end in zip(out_ranges, slices):
        iv = red[start:end]
        start = end
        if len(iv) > 1 and (iv[1:, 0] < iv[:-1, 1]).any():
            raise ValueError(f"ranges: the intervals of '{names[2]}' of one block must be "
                             "sorted and must not overlap")
        cols = (np.concatenate([np.arange(a, b) for a, b in iv]) if len(iv)
                else np.zeros(0, np.int64))
        blocks.append((np.arange(r0, r1), cols.astype(np.int64)))
    return tuple(blocks)


def blocks_for(ranges, axis: int, n_i: int, n_j: int) -> tuple:
    """The ``(rows, cols)`` blocks of ``ranges`` for a reduction over ``axis``
    (1: over j, rows are i; 0: over i, rows are j), validated."""
    if isinstance(ranges, BlockSparsity):
        if tuple(ranges.shape) != (n_i, n_j):
            raise ValueError(f"ranges: this BlockSparsity was built for shape "
                             f"{tuple(ranges.shape)}, the formula has shape ({n_i}, {n_j})")
        return ranges.over_j if axis == 1 else ranges.over_i
    if not isinstance(ranges, (tuple, list)) or len(ranges) != 6:
        raise TypeError("ranges must be a BlockSparsity (kerneltools.ranges) or KeOps' "
                        "6-tuple (ranges_i, slices_i, redranges_j, ranges_j, slices_j, "
                        "redranges_i)")
    if axis == 1:
        return _from_tuple(ranges[:3], n_i, n_j, ("ranges_i", "slices_i", "redranges_j"))
    return _from_tuple(ranges[3:], n_j, n_i, ("ranges_j", "slices_j", "redranges_i"))


def _index_as_variables(plan: Plan):
    """The plan with its Index nodes replaced by variables holding the running
    indices (so that gathered blocks see global indices): (plan, extra cats)."""
    nodes = [n for n in topo_order(list(plan.formulas)) if n.op == "Index"]
    if not nodes:
        return plan, ()
    mapping, cats = {}, []
    for cat in ("i", "j"):
        if index(cat) in nodes:
            mapping[index(cat)] = var(cat, len(plan.arg_cats) + len(cats), 1)
            cats.append(cat)
    formulas = tuple(substitute(list(plan.formulas), mapping))
    arg_cats = plan.arg_cats + tuple(cats)
    arg_dims = plan.arg_dims + (1,) * len(cats)
    new = replace(plan, formulas=formulas, arg_cats=arg_cats, arg_dims=arg_dims,
                  _key=[], _signature=(formulas, plan.reduction, plan.K, plan.dtype,
                                       arg_cats, arg_dims))
    return new, tuple(cats)


def run_blocks(plan: Plan, args, blocks, run, xp=np):
    """Outputs of ``plan`` restricted to ``blocks``; ``run(plan, args)`` is a
    backend's dense reduction. ``blocks`` are over the plan's axes (rows:
    output index, cols: reduced index, after the plan's i/j swap)."""
    red = plan.red
    plan, extra = _index_as_variables(plan)
    E = red.out_dim([f.dim for f in plan.formulas])
    dims = [f.dim for f in plan.formulas]
    with np.errstate(divide="ignore", invalid="ignore"):
        identity = red.finalize(red.init(plan.nx, dims, plan.K), plan.K)
    outs = []
    for is_int, ident in zip(red.int_outputs, identity):
        ident = np.asarray(ident)
        shape = (plan.nx, plan.K, E) if red.uses_k else (plan.nx, E)
        fill = np.broadcast_to(ident.reshape((plan.nx,) + ident.shape[1:]), shape)
        outs.append(xp.asarray(np.array(fill, dtype=np.int64 if is_int else plan.dtype)))
    for rows, cols in blocks:
        if len(rows) == 0 or len(cols) == 0:
            continue
        rows_x, cols_x = xp.asarray(rows), xp.asarray(cols)
        sub = []
        for a, cat in zip(args, plan.arg_cats[:len(args)]):
            sub.append(a[rows_x] if cat == "i" else a[cols_x] if cat == "j" else a)
        for cat in extra:
            sub.append(xp.asarray((rows if cat == "i" else cols).astype(plan.dtype)[:, None]))
        K = min(plan.K, len(cols))
        bplan = replace(plan, nx=len(rows), ny=len(cols), K=K,
                        _key=[], _signature=plan.signature[:2] + (K,) + plan.signature[3:])
        res = run(bplan, sub)
        for out, r, is_int in zip(outs, res, red.int_outputs):
            if is_int:
                r = xp.where(r >= 0, cols_x[xp.maximum(r, 0)], -1)
            if red.uses_k:
                out[rows_x, :K] = r
            else:
                out[rows_x] = r
    return tuple(outs)
