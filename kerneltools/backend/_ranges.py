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
* a :class:`BlockSparsity` (cluster-based, points in any order): permutations
  ``order_i``, ``order_j`` that make the clusters contiguous and the 6-tuple
  on the permuted positions (or, built by hand, index arrays per block).

Each reduction axis becomes a :class:`SortedSide`: the output rows' and the
reduced points' permutations and the blocks and intervals on the permuted
positions. The C backend reduces it natively (:func:`run_native`: the
arguments gathered in sorted order, one kernel call for every block, the
outputs scattered back); the other backends run one dense reduction per
block on the gathered rows and candidates (:func:`run_blocks`, the
reference). Either way outputs come back in the caller's order, arg-indices
are the caller's, equal values resolve to the smallest such index, as in the
dense reduction, and a description that covers everything gives exactly the
dense result. Rows in no block get the reduction's identity (the value of an
empty reduction: 0 for sums, +inf and index -1 for minima).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ._arrays import is_cupy_array
from ._ir import index, topo_order, var
from ._ops import substitute
from ._plan import Plan

__all__ = ["BlockSparsity", "SortedSide", "describe", "run_blocks", "run_native",
           "transpose_ranges", "tuple_from_pairs"]


@dataclass(frozen=True)
class SortedSide:
    """One reduction axis of a description, on sorted positions.

    ``out_order[r]`` / ``red_order[v]``: the caller's index of sorted output
    row r / reduced point v (None: the identity); ``out_ranges`` (B, 2),
    ``slices`` (B,), ``red`` (R, 2): KeOps' blocks, interval ends and
    intervals, validated.
    """

    n_out: int
    n_red: int
    out_order: np.ndarray | None
    red_order: np.ndarray | None
    out_ranges: np.ndarray
    slices: np.ndarray
    red: np.ndarray

    def blocks(self) -> tuple:
        """``(rows, cols)`` per block in the caller's indices, cols increasing."""
        out, start = [], 0
        for (r0, r1), end in zip(self.out_ranges, self.slices):
            iv = self.red[start:end]
            start = end
            cols = (np.concatenate([np.arange(a, b) for a, b in iv]) if len(iv)
                    else np.zeros(0, np.int64))
            rows = np.arange(r0, r1)
            if self.out_order is not None:
                rows = self.out_order[rows]
            # increasing caller's index: ties resolve as in the dense reduction
            cols = np.sort(cols if self.red_order is None else self.red_order[cols])
            out.append((rows, cols.astype(np.int64)))
        return tuple(out)

    def native(self) -> tuple:
        """(blk (B', 4): r0, r1, v0, v1 per block, every output row in one
        block (rows in none get a block with no interval); red; pairs)."""
        v1 = self.slices
        v0 = np.concatenate([[0], v1[:-1]]).astype(np.int64)
        blk = np.stack([self.out_ranges[:, 0], self.out_ranges[:, 1], v0, v1], axis=1)
        s = self.out_ranges[np.argsort(self.out_ranges[:, 0], kind="stable")]
        g0 = np.concatenate([[0], s[:, 1]])
        g1 = np.concatenate([s[:, 0], [self.n_out]])
        gaps = g0 < g1
        zeros = np.zeros(int(gaps.sum()), np.int64)
        blk = np.concatenate([blk, np.stack([g0[gaps], g1[gaps], zeros, zeros], 1)])
        cum = np.concatenate([[0], np.cumsum(self.red[:, 1] - self.red[:, 0])])
        pairs = int(((blk[:, 1] - blk[:, 0]) * (cum[blk[:, 3]] - cum[blk[:, 2]])).sum())
        return blk.astype(np.int64), self.red, pairs


def _int_array(a, name: str, shape_tail: tuple) -> np.ndarray:
    arr = np.asarray(a)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"ranges: '{name}' must hold integers, got dtype {arr.dtype}")
    if arr.ndim == 1 and arr.shape == (0,) and shape_tail:
        arr = arr.reshape(0, *shape_tail)
    if arr.ndim != 1 + len(shape_tail) or arr.shape[1:] != shape_tail:
        want = "(B,)" if not shape_tail else "(B, 2)"
        raise ValueError(f"ranges: '{name}' must have shape {want}, got {arr.shape}")
    return arr.astype(np.int64)


def check_side(ranges, n_out: int, n_red: int, names) -> tuple:
    """KeOps' (ranges, slices, redranges) of one axis, validated (vectorised):
    int64 arrays, or a ValueError / TypeError naming the faulty part."""
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
    s = out_ranges[np.argsort(out_ranges[:, 0], kind="stable")]
    if len(s) > 1 and (s[1:, 0] < s[:-1, 1]).any():
        raise ValueError(f"ranges: the output blocks of '{names[0]}' overlap")
    if len(slices) and ((np.diff(slices) < 0).any() or slices[0] < 0
                        or slices[-1] > len(red)):
        raise ValueError(f"ranges: '{names[1]}' must be non-decreasing ends of intervals "
                         f"in '{names[2]}' (at most {len(red)})")
    if len(red) > 1:
        # the intervals of one block must not overlap (any order: a block may
        # visit its nearest clusters first; results do not depend on it)
        owner = np.searchsorted(slices, np.arange(len(red)), side="right")
        o = np.lexsort((red[:, 0], owner))
        same = owner[o][1:] == owner[o][:-1]
        if (same & (red[o][1:, 0] < red[o][:-1, 1])).any():
            raise ValueError(f"ranges: the intervals of '{names[2]}' of one block must not "
                             "overlap")
    return out_ranges, slices, red


def _check_order(order, n: int, name: str) -> np.ndarray:
    arr = np.asarray(order)
    if arr.dtype.kind not in "iu" or arr.shape != (n,):
        raise ValueError(f"ranges: '{name}' must be a permutation of range({n}) (int array "
                         f"of shape ({n},)), got shape {arr.shape} and dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    if n and (arr.min() < 0 or arr.max() >= n or (np.bincount(arr, minlength=n) != 1).any()):
        raise ValueError(f"ranges: '{name}' must be a permutation of range({n})")
    return arr


class BlockSparsity:
    """Blocks of a reduction for points in any order (see the module docstring).

    ``BlockSparsity(shape, order_i=, order_j=, ranges=)``: data sorted by
    ``x[order_i]``, ``y[order_j]``, and KeOps' 6-tuple on the sorted
    positions (what :func:`kerneltools.ranges.block_sparsity` builds; the C
    backend reduces it natively). ``BlockSparsity(shape, over_j, over_i)``:
    for each output block, its rows and the reduced indices to visit, as
    index arrays: every backend runs it block by block.

    Parameters
    ----------
    shape : tuple of two int
        (N, M): the points indexed by i and by j.
    over_j : sequence of tuple of two ndarray, default=None
        For reductions over j: ``over_j[k] = (rows, cols)``, the rows of
        output block k and the columns it visits (increasing).
    over_i : sequence of tuple of two ndarray, default=None
        The same for reductions over i.
    order_i : array-like of shape (N,) of int, default=None
        With ``ranges``: the order that sorts the points indexed by i.
    order_j : array-like of shape (M,) of int, default=None
        The same for the points indexed by j.
    ranges : tuple of six arrays, default=None
        KeOps' 6-tuple on the sorted positions.

    See Also
    --------
    kerneltools.ranges.block_sparsity : Builds one from cluster labels.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools import ranges as kr
    >>> labels = np.array([0, 0, 1, 1])
    >>> kr.block_sparsity(labels, labels, np.eye(2, dtype=bool))
    BlockSparsity(shape=(4, 4), blocks=2, density=0.5)
    """

    def __init__(self, shape, over_j=None, over_i=None, *, order_i=None, order_j=None,
                 ranges=None):
        self.shape = tuple(int(n) for n in shape)
        n, m = self.shape
        if ranges is None:
            if over_j is None or over_i is None:
                raise TypeError("BlockSparsity needs 'over_j' and 'over_i', or 'ranges' "
                                "(with 'order_i' and 'order_j')")
            self._sides = {1: tuple(over_j), 0: tuple(over_i)}
            return
        if not isinstance(ranges, (tuple, list)) or len(ranges) != 6:
            raise TypeError("BlockSparsity: 'ranges' must be KeOps' 6-tuple")
        oi = None if order_i is None else _check_order(order_i, n, "order_i")
        oj = None if order_j is None else _check_order(order_j, m, "order_j")
        self._sides = {
            1: SortedSide(n, m, oi, oj, *check_side(
                ranges[:3], n, m, ("ranges_i", "slices_i", "redranges_j"))),
            0: SortedSide(m, n, oj, oi, *check_side(
                ranges[3:], m, n, ("ranges_j", "slices_j", "redranges_i"))),
        }

    @classmethod
    def from_pairs(cls, shape, order_i, order_j, a, b, ranges_i, ranges_j,
                   priority=None) -> BlockSparsity:
        """From kept cluster pairs ``(a[k], b[k])`` (see
        :func:`tuple_from_pairs`), valid by construction: nothing to check,
        and each axis's description is built when a reduction first asks.

        Parameters
        ----------
        shape : tuple of two int
            (N, M): the points indexed by i and by j.
        order_i : ndarray of shape (N,) of int or None
            The order that sorts the points indexed by i by cluster (None:
            sorted already).
        order_j : ndarray of shape (M,) of int or None
            The same for the points indexed by j.
        a : array-like of shape (P,) of int
            The i-cluster of each kept pair.
        b : array-like of shape (P,) of int
            The j-cluster of each kept pair.
        ranges_i : array-like of shape (Ci, 2) of int
            Each i-cluster's ``[start, end)`` on the sorted positions.
        ranges_j : array-like of shape (Cj, 2) of int
            The same for the j-clusters.
        priority : array-like of shape (P,), default=None
            Each block visits its clusters by increasing priority (None: by
            position).

        Returns
        -------
        BlockSparsity
            The description, not validated.
        """
        self = cls.__new__(cls)
        self.shape = tuple(int(n) for n in shape)
        n, m = self.shape
        a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
        ranges_i = np.asarray(ranges_i, np.int64).reshape(-1, 2)
        ranges_j = np.asarray(ranges_j, np.int64).reshape(-1, 2)
        self._sides = {
            1: lambda: SortedSide(n, m, order_i, order_j, ranges_i, *_side_from_pairs(
                a, b, len(ranges_i), ranges_j, priority)),
            0: lambda: SortedSide(m, n, order_j, order_i, ranges_j, *_side_from_pairs(
                b, a, len(ranges_j), ranges_i, priority)),
        }
        return self

    def transposed(self) -> BlockSparsity:
        """The description of the transposed (M, N) problem: each axis's
        blocks become the other's (``LazyTensor.t()``).

        Returns
        -------
        BlockSparsity
            The description of shape (M, N); ``self`` is unchanged.
        """
        out = type(self).__new__(type(self))
        out.shape = self.shape[::-1]
        out._sides = {1: self._sides[0], 0: self._sides[1]}
        return out

    def side(self, axis: int):
        """The description of reductions over ``axis`` (1: over j).

        Parameters
        ----------
        axis : int
            The reduced axis: 1 (over j) or 0 (over i).

        Returns
        -------
        SortedSide or tuple
            A :class:`SortedSide`, or, for a description built from index
            arrays, its ``(rows, cols)`` blocks.
        """
        s = self._sides[axis]
        if callable(s):
            s = self._sides[axis] = s()
        return s

    @property
    def over_j(self) -> tuple:
        s = self.side(1)
        return s.blocks() if isinstance(s, SortedSide) else s

    @property
    def over_i(self) -> tuple:
        s = self.side(0)
        return s.blocks() if isinstance(s, SortedSide) else s

    @property
    def density(self) -> float:
        """Fraction of the N x M pairs that a reduction over j visits."""
        n, m = self.shape
        s = self.side(1)
        if isinstance(s, SortedSide):
            return s.native()[2] / max(1, n * m)
        return sum(len(r) * len(c) for r, c in s) / max(1, n * m)

    def __repr__(self) -> str:
        s = self.side(1)
        blocks = len(s.out_ranges) if isinstance(s, SortedSide) else len(s)
        return (f"BlockSparsity(shape={self.shape}, blocks={blocks}, "
                f"density={self.density:.3g})")


def transpose_ranges(ranges):
    """The ranges of the transposed problem (i and j swapped); None stays None."""
    if ranges is None:
        return None
    if isinstance(ranges, BlockSparsity):
        return ranges.transposed()
    return tuple(ranges[3:]) + tuple(ranges[:3])


def tuple_from_pairs(a, b, ranges_a, ranges_b, priority=None) -> tuple:
    """KeOps' 6-tuple from the kept cluster pairs ``(a[k], b[k])`` of data
    sorted by cluster (``ranges_a`` (Ca, 2), ``ranges_b`` (Cb, 2): each
    cluster's ``[start, end)``); a block's clusters that follow each other in
    the sorted order merge into one interval. Vectorised (no loop over
    clusters). ``priority`` (optional, one per pair): each block visits its
    clusters by increasing priority (else by position)."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    ranges_a = np.asarray(ranges_a, np.int64).reshape(-1, 2)
    ranges_b = np.asarray(ranges_b, np.int64).reshape(-1, 2)
    slices_a, red_b = _side_from_pairs(a, b, len(ranges_a), ranges_b, priority)
    slices_b, red_a = _side_from_pairs(b, a, len(ranges_b), ranges_a, priority)
    return ranges_a, slices_a, red_b, ranges_b, slices_b, red_a


def _side_from_pairs(out, red_c, n_out, red_ranges, priority=None):
    """(slices, intervals) of the blocks ``out`` visiting clusters ``red_c``."""
    key = red_c if priority is None else priority
    ordered = len(out) < 2 or bool(
        ((out[1:] > out[:-1]) | ((out[1:] == out[:-1]) & (key[1:] >= key[:-1]))).all())
    if not ordered:  # (pairs often come grouped and sorted: no sort then)
        order = np.lexsort((red_c, out) if priority is None else (red_c, priority, out))
        out, red_c = out[order], red_c[order]
    s, e = red_ranges[red_c, 0], red_ranges[red_c, 1]
    full = e > s
    out, s, e = out[full], s[full], e[full]
    new = np.ones(len(out), bool)
    new[1:] = (out[1:] != out[:-1]) | (s[1:] != e[:-1])
    last = np.ones(len(out), bool)
    last[:-1] = new[1:]
    red = np.stack([s[new], e[last]], axis=1).reshape(-1, 2)
    slices = np.cumsum(np.bincount(out[new], minlength=n_out))
    return slices.astype(np.int64), red


def describe(ranges, axis: int, n_i: int, n_j: int):
    """The description of ``ranges`` for a reduction over ``axis`` (1: over
    j, outputs are i; 0: over i, outputs are j), validated: a
    :class:`SortedSide`, or ``(rows, cols)`` blocks for a BlockSparsity built
    from index arrays."""
    if isinstance(ranges, BlockSparsity):
        if tuple(ranges.shape) != (n_i, n_j):
            raise ValueError(f"ranges: this BlockSparsity was built for shape "
                             f"{tuple(ranges.shape)}, the formula has shape ({n_i}, {n_j})")
        return ranges.side(axis)
    if not isinstance(ranges, (tuple, list)) or len(ranges) != 6:
        raise TypeError("ranges must be a BlockSparsity (kerneltools.ranges) or KeOps' "
                        "6-tuple (ranges_i, slices_i, redranges_j, ranges_j, slices_j, "
                        "redranges_i)")
    if axis == 1:
        return SortedSide(n_i, n_j, None, None, *check_side(
            ranges[:3], n_i, n_j, ("ranges_i", "slices_i", "redranges_j")))
    return SortedSide(n_j, n_i, None, None, *check_side(
        ranges[3:], n_j, n_i, ("ranges_j", "slices_j", "redranges_i")))


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


def _gather(a, order: np.ndarray):
    """``a[order]``, on the device for a CuPy array (the CUDA backend's
    block-sparse kernel reads it there)."""
    if is_cupy_array(a):
        import cupy

        return a[cupy.asarray(order)]
    return np.asarray(a)[order]


def run_native(plan: Plan, args, side: SortedSide, run_ranges):
    """Outputs of ``plan`` restricted to ``side`` through a backend's native
    block-sparse kernel ``run_ranges(plan, sorted args, blk, red, jmap,
    imap, pairs)``: arguments gathered in sorted order, outputs written in
    the caller's order by the kernel."""
    plan, extra = _index_as_variables(plan)
    oo, ro = side.out_order, side.red_order
    sub = []
    for a, cat in zip(args, plan.arg_cats[:len(args)]):
        order = oo if cat == "i" else ro if cat == "j" else None
        sub.append(a if order is None else _gather(a, order))
    for cat in extra:
        n, order = (side.n_out, oo) if cat == "i" else (side.n_red, ro)
        idx = np.arange(n) if order is None else order
        sub.append(idx.astype(plan.dtype)[:, None])
    jmap = np.arange(side.n_red, dtype=np.int64) if ro is None else ro
    imap = np.arange(side.n_out, dtype=np.int64) if oo is None else oo
    blk, red, pairs = side.native()
    return run_ranges(plan, sub, blk, red, jmap, imap, pairs)
