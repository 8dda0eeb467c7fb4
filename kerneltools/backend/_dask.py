"""Reductions and estimators on Dask arrays: kerneltools on a cluster.

Optional: ``pip install "kerneltools[dask]"``. Nothing here imports Dask until
a Dask array is given to kerneltools, and :func:`is_dask_array` never does.

A reduction ``Red_j F(p, x_i, y_j)`` whose variables are Dask arrays becomes a
task graph over the chunks of rows:

* one task per pair (output chunk, reduced chunk) runs the in-memory
  reduction on those rows and returns its partial *state* (the reduction's
  monoid state, rebuilt from the block's outputs: the K smallest values with
  their global indices, a log-sum-exp with its shift, ...);
* the partial states of one output chunk are folded in order of the reduced
  index by a tree of ``merge`` tasks (:data:`SPLIT_EVERY` at a time), the
  reduction's own associative merge from the registry, so ties and NaN
  behave as in one pass over all the points;
* a last task turns the state into the output block.

An array that is not chunked (a NumPy array, or a Dask array of one chunk)
is one key of the graph: each worker fetches it once and keeps it for all
its tasks. NumPy arrays of over :data:`SCATTER_BYTES` given next to Dask
arrays are scattered to the workers of the current ``distributed`` client
(broadcast), so they travel once rather than inside the graph.

The result is a Dask array (a tuple of them for ``min_argmin`` and the like):
nothing runs until it is computed.
"""

from __future__ import annotations

import math
import operator
from itertools import count

import numpy as np

__all__ = ["is_dask_array", "require_dask", "check_dask_array", "current_client",
           "reduce_lazy", "SPLIT_EVERY"]

#: Partial states merged by one task of the tree reduction.
SPLIT_EVERY = 8
#: NumPy arrays larger than this, reduced against Dask arrays, are scattered.
SCATTER_BYTES = 1 << 20

_names = count()


def is_dask_array(x) -> bool:
    """Tell whether ``x`` is a ``dask.array.Array`` (without importing Dask).

    Parameters
    ----------
    x : object
        Any object.

    Returns
    -------
    bool
        Whether it is a Dask array.

    Examples
    --------
    >>> import numpy as np
    >>> import dask.array as da
    >>> from kerneltools.dask import is_dask_array
    >>> is_dask_array(da.ones(3)), is_dask_array(np.ones(3))
    (True, False)
    """
    return type(x).__module__.startswith("dask.array") and hasattr(x, "__dask_graph__")


def require_dask():
    """``dask.array``, or an ImportError that says how to install it."""
    try:
        import dask.array as da
    except ImportError as exc:  # pragma: no cover - dask is in the test extra
        raise ImportError(
            "Dask arrays need the optional 'dask' extra: pip install \"kerneltools[dask]\""
        ) from exc
    return da


def check_dask_array(a, what: str):
    """Validate a Dask array's metadata (nothing is computed)."""
    if any(isinstance(s, float) and math.isnan(s) for s in a.shape):
        raise ValueError(
            f"{what} is a Dask array of unknown shape {a.shape}; call "
            "compute_chunk_sizes() on it first"
        )
    return a


# -- partial states ---------------------------------------------------------
# Each block runs the in-memory reductions ``red.block`` and turns their
# outputs into the registry state of ``red`` (``red.state_of_block``); the
# states are folded by ``red.merge`` and finished by ``red.finalize``.

def _partial(spec, j0, *arrays):
    """One (output chunk, reduced chunk) block: the partial state."""
    from ._dispatch import run_plan
    from ._plan import make_plan
    from .reductions import REDUCTIONS

    name, axis, K, dtype, backend, options = (spec[k] for k in (
        "reduction", "axis", "K", "dtype", "backend", "options"))
    values = dict(zip(spec["nodes"], arrays))
    sizes = {"i": 1, "j": 1}
    for node, a in values.items():
        if node.cat != "p":
            sizes[node.cat] = a.shape[0]
    n_red = sizes["j" if axis == 1 else "i"]

    def array_of(node):
        return np.ascontiguousarray(values[node], dtype=dtype)

    red = REDUCTIONS[name]
    outs = []
    for block_red, weighted in red.block:
        formulas = list(spec["formulas"]) if weighted else [spec["formulas"][0]]
        Kb = min(K, n_red)
        plan, args = make_plan(formulas, block_red, axis, Kb, array_of, dtype,
                               sizes["i"], sizes["j"])
        outs.extend(run_plan(plan, args, backend, **options))
    return red.state_of_block(outs, j0, K)


def _merge(spec, *states):
    from .reductions import REDUCTIONS

    merge = REDUCTIONS[spec["reduction"]].merge
    out = states[0]
    for s in states[1:]:  # in order of the reduced index: ties keep the first
        out = merge(out, s)
    return out


def _finalize(spec, state):
    from .reductions import REDUCTIONS

    red = REDUCTIONS[spec["reduction"]]
    outs = red.finalize(state, spec["K"])
    dtype = spec["dtype"]
    result = []
    for o, is_int in zip(outs, red.int_outputs):
        o = np.asarray(o, dtype=np.int64 if is_int else dtype)
        if spec["squeeze"]:
            o = o[..., 0]
        result.append(o)
    return tuple(result)


# -- graphs -----------------------------------------------------------------
def current_client():
    """The current ``distributed`` client, or None."""
    try:
        from distributed import default_client
    except ImportError:
        return None
    try:
        return default_client()
    except ValueError:
        return None


def _as_dask(a, rows):
    """``a`` (n, d) as a Dask array chunked by ``rows`` along its first axis and
    whole along the second; a large NumPy array is scattered once."""
    da = require_dask()
    if is_dask_array(a):
        a = a.rechunk((rows,) + tuple((s,) for s in a.shape[1:]))
        return a
    client = current_client() if a.nbytes > SCATTER_BYTES else None
    if client is not None:
        future = client.scatter(a, broadcast=True, hash=True)
        whole = da.from_delayed(future, shape=a.shape, dtype=a.dtype)
        return whole.rechunk((rows,) + tuple((s,) for s in a.shape[1:]))
    return da.from_array(a, chunks=(rows,) + tuple((s,) for s in a.shape[1:]))


def _row_chunks(arrays, n):
    """The row chunks of the first Dask array among ``arrays``, else one chunk."""
    for a in arrays:
        if is_dask_array(a):
            return a.chunks[0]
    return (n,)


def reduce_lazy(formulas, bindings, ni, nj, reduction, axis, K, dtype, backend, options):
    """The reduction of a LazyTensor with Dask arrays among its variables.

    ``formulas``: ``[F]`` or ``[F, W]``, validated; ``bindings``: node ->
    binding (Dask or NumPy arrays). Returns the Dask array(s).
    """
    da = require_dask()
    from dask.highlevelgraph import HighLevelGraph

    from .reductions import REDUCTIONS

    if options.get("ranges") is not None:
        raise ValueError(
            "ranges= (block-sparse reductions) is not supported on Dask arrays; "
            "reduce NumPy arrays, or drop ranges"
        )
    options = {k: v for k, v in options.items() if k != "ranges"}
    red = REDUCTIONS[reduction]
    out_cat, red_cat = ("i", "j") if axis == 1 else ("j", "i")
    nodes = sorted(bindings, key=lambda v: (v.cat, str(v.attrs)))
    arrays = {v: bindings[v].array for v in nodes}
    n_out = (ni if out_cat == "i" else nj) or 1
    n_red = (nj if red_cat == "j" else ni) or 1
    out_rows = _row_chunks([arrays[v] for v in nodes if v.cat == out_cat], n_out)
    red_rows = _row_chunks([arrays[v] for v in nodes if v.cat == red_cat], n_red)
    inputs = {}
    for v in nodes:
        a = arrays[v]
        if v.cat == "p":
            inputs[v] = a.rechunk(-1) if is_dask_array(a) else a
        else:
            inputs[v] = _as_dask(a, out_rows if v.cat == out_cat else red_rows)
    deps = [a for a in inputs.values() if is_dask_array(a)]
    tag = f"{next(_names)}-{reduction.lower()}"
    dims = [f.dim for f in formulas]
    E = red.out_dim(dims)
    squeeze = red.uses_k and E == 1
    spec = {"formulas": tuple(formulas), "nodes": tuple(nodes), "reduction": reduction,
            "axis": axis, "K": int(K), "dtype": np.dtype(dtype), "backend": backend,
            "options": options, "squeeze": squeeze}
    j_starts = np.concatenate([[0], np.cumsum(red_rows)[:-1]]).astype(int)

    def key_of(v, a_out, b_red):
        a = inputs[v]
        if not is_dask_array(a):
            return a
        if v.cat == "p":
            return (a.name,) + (0,) * a.ndim
        blk = a_out if v.cat == out_cat else b_red
        return (a.name, blk) + (0,) * (a.ndim - 1)

    layer = {}
    part = f"kt-partial-{tag}"
    for a_out in range(len(out_rows)):
        for b in range(len(red_rows)):
            layer[(part, a_out, b)] = (_partial, spec, int(j_starts[b])) + tuple(
                key_of(v, a_out, b) for v in nodes)
    level, width, step = part, len(red_rows), 0
    while width > 1:  # the tree of merges, in order of the reduced index
        step += 1
        nxt = f"kt-merge{step}-{tag}"
        groups = range(0, width, SPLIT_EVERY)
        for a_out in range(len(out_rows)):
            for g, g0 in enumerate(groups):
                layer[(nxt, a_out, g)] = (_merge, spec) + tuple(
                    (level, a_out, b) for b in range(g0, min(width, g0 + SPLIT_EVERY)))
        level, width = nxt, len(groups)
    final = f"kt-final-{tag}"
    for a_out in range(len(out_rows)):
        layer[(final, a_out)] = (_finalize, spec, (level, a_out, 0))
    n_outs = red.n_outputs
    trailing = ((int(K),) if red.uses_k else ()) + (() if squeeze else (E,))
    results = []
    for k, is_int in enumerate(red.int_outputs):
        name = f"kt-{reduction.lower()}-{k}-{tag}"
        for a_out in range(len(out_rows)):
            layer[(name, a_out) + (0,) * len(trailing)] = (operator.getitem, (final, a_out), k)
        results.append(name)
    graphs = []
    out = []
    for k, (name, is_int) in enumerate(zip(results, red.int_outputs)):
        graph = HighLevelGraph.from_collections(name, layer, dependencies=deps)
        graphs.append(graph)
        chunks = (tuple(out_rows),) + tuple((t,) for t in trailing)
        out.append(da.Array(graph, name, chunks=chunks,
                            dtype=np.int64 if is_int else np.dtype(dtype)))
    return tuple(out) if n_outs > 1 else out[0]
