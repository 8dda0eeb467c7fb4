"""The NumPy reference backend: tiled evaluation of a reduction.

The reference that every other backend is tested against, and the fallback
when neither a C compiler nor a GPU is available. It evaluates the formula on
tiles of ``ti x tj`` pairs, reduces each tile to a partial state with the
reduction's ``tile`` rule and folds the states with ``merge``, so its peak
memory is ``O((N + M) D + ti tj S)`` where ``S`` is the total dimension of the
formula's nodes, never ``O(N M)``.
"""

from __future__ import annotations

import numpy as np

from ._ir import Node, topo_order
from ._progress import Estimate
from ._ops import OPS
from .reductions import Reduction

__all__ = ["evaluate_reduction", "auto_tiles", "evaluate_formula_tile", "evaluate_dense"]

#: Elements (over all live intermediate arrays) that one tile may hold.
TILE_BUDGET = 1 << 21


def auto_tiles(formulas, nx: int, ny: int, budget: int = TILE_BUDGET) -> tuple[int, int]:
    """Tile sizes (ti, tj) so that one tile's intermediates fit ``budget`` elements."""
    per_pair = max(1, sum(n.dim for n in topo_order(formulas) if n.children))
    pairs = max(1, budget // per_pair)
    ti = int(min(nx, max(1, min(1024, int(np.sqrt(pairs))))))
    tj = int(min(ny, max(1, pairs // ti)))
    return max(ti, 1), max(tj, 1)


def evaluate_formula_tile(order, outputs, args, i0, i1, j0, j1, dtype):
    """Values of ``outputs`` on rows [i0, i1) x columns [j0, j1), shape (ti, tj, dim).

    ``order`` is the topological order of the formulas' nodes; variables are
    bound positionally: ``Var(cat, k, d)`` reads ``args[k]``.
    """
    last_use: dict[int, int] = {}
    for pos, node in enumerate(order):
        for c in node.children:
            last_use[id(c)] = pos
    for node in outputs:
        last_use[id(node)] = len(order)
    vals: dict[int, np.ndarray] = {}
    for pos, node in enumerate(order):
        vals[id(node)] = _leaf_or_op(node, vals, args, i0, i1, j0, j1, dtype)
        for c in node.children:
            if last_use.get(id(c)) == pos:
                vals.pop(id(c), None)  # a node may be a child twice: Concat(v, v)
    ti, tj = i1 - i0, j1 - j0
    return [np.broadcast_to(vals[id(n)], (ti, tj, n.dim)) for n in outputs]


def _leaf_or_op(node: Node, vals, args, i0, i1, j0, j1, dtype):
    if node.children:
        return OPS[node.op].numpy(node.attrs, *(vals[id(c)] for c in node.children))
    if node.op == "Var":
        cat, k = node.attrs
        a = args[k]
        # Rows are copied feature-major, (d, t), and viewed as (t, 1, d) or
        # (1, t, d): the operations then keep that memory layout, so NumPy's
        # inner loops run along the tile rather than over the few features
        # (several times faster for small dimensions).
        if cat == "i":
            return np.ascontiguousarray(a[i0:i1].T)[:, :, None].transpose(1, 2, 0)
        if cat == "j":
            return np.ascontiguousarray(a[j0:j1].T)[:, None, :].transpose(1, 2, 0)
        return a[None, None, :]
    if node.op == "Int":
        return np.full((1, 1, node.dim), node.attrs[0], dtype=dtype)
    if node.op == "Pi":
        return np.full((1, 1, 1), np.pi, dtype=dtype)
    if node.op == "Index":
        if node.attrs[0] == "i":
            return np.arange(i0, i1, dtype=dtype)[:, None, None]
        return np.arange(j0, j1, dtype=dtype)[None, :, None]
    raise ValueError(f"unknown leaf {node.op}")


def evaluate_reduction(
    formulas: list[Node],
    red: Reduction,
    args: list[np.ndarray],
    nx: int,
    ny: int,
    *,
    K: int = 1,
    dtype=np.float64,
    tiles: tuple[int, int] | None = None,
) -> tuple[np.ndarray, ...]:
    """Reduce ``formulas`` over j for every i in [0, nx); see :mod:`.reductions`.

    Returns the reduction's outputs: float arrays of ``dtype`` and int64 indices,
    of shape (nx, E), or (nx, K, E) for the K-reductions.
    """
    ti, tj = tiles or auto_tiles(formulas, nx, ny)
    order = topo_order(formulas)
    dims = [f.dim for f in formulas]
    outs = [[] for _ in range(red.n_outputs)]
    estimate = Estimate(f"the {red.name} reduction over {nx:,} x {ny:,} pairs (numpy)", nx)
    with np.errstate(all="ignore"):
        for i0 in range(0, nx, ti):
            estimate.update(i0)
            i1 = min(nx, i0 + ti)
            state = red.init(i1 - i0, dims, K)
            for j0 in range(0, ny, tj):
                j1 = min(ny, j0 + tj)
                values = evaluate_formula_tile(order, formulas, args, i0, i1, j0, j1, dtype)
                state = red.merge(state, red.tile(values, j0, K))
            for k, out in enumerate(red.finalize(state, K)):
                outs[k].append(out)
    results = []
    for k, is_int in enumerate(red.int_outputs):
        chunks = outs[k]
        arr = np.concatenate(chunks, axis=0) if chunks else np.empty((0,))
        results.append(arr.astype(np.int64 if is_int else dtype, copy=False))
    return tuple(results)


def evaluate_dense(plan, args, budget: int = 1 << 20) -> np.ndarray:
    """The values of ``plan``'s first formula on every pair, shape (nx, ny, dim).

    The dense matrix that reductions never form (``LazyTensor.to_dense``),
    evaluated block of rows by block of rows, each block's intermediates
    within about ``budget`` elements.
    """
    formula, (nx, ny) = plan.formulas[0], (plan.nx, plan.ny)
    order = topo_order([formula])
    out = np.empty((nx, ny, formula.dim), dtype=plan.dtype)
    rows = max(1, budget // max(1, ny * sum(n.dim for n in order)))
    with np.errstate(all="ignore"):
        for i0 in range(0, nx, rows):
            i1 = min(nx, i0 + rows)
            (out[i0:i1],) = evaluate_formula_tile(order, [formula], args, i0, i1, 0, ny,
                                                  plan.dtype)
    return out
