"""Running the reductions of a LazyTensor: part of the bindings' contract.

:func:`reduce` is where both bindings' reductions go (``LazyTensor._reduce``
in ``kerneltools.lazy``; the forward pass of ``kerneltools.torch``'s, on its
NumPy-level LazyTensor). It checks the request against the reductions'
registry, then takes one of three roads:

* in-memory data (NumPy or CuPy): a :class:`~kerneltools.backend._plan.Plan`
  run by :func:`~kerneltools.backend._dispatch.run_plan` on the chosen
  backend;
* Dask arrays: a task graph over chunks of rows
  (:mod:`kerneltools.backend._dask`), Dask arrays out;
* batch axes: the B problems stacked into one block-diagonal problem,
  reduced with block-sparsity ranges in one call (:func:`_reduce_batched`).

:func:`to_dense` evaluates the formula on every pair instead.
"""

from __future__ import annotations

import numpy as np

from ._keops_options import PYKEOPS_KEYWORDS, engine_backend, engine_options
from ._args import int_arg
from ._leaves import check_array
from ._symbolic import (Binding, batch_of, bindings_of, check_axis, check_symbols,
                        dtype_of, from_parts, lift, merge, new_var, ranges_of)
from ..backend._arrays import array_module, is_cupy_array
from ..backend._autodiff import forward_reduction, reduction_vjp
from ..backend._dask import is_dask_array, reduce_lazy
from ..backend._dispatch import (check_backend_name, configured_backend, evaluate_dense,
                                run_plan)
from ..backend._ir import topo_order
from ..backend._ops import make, substitute
from ..backend._plan import make_plan
from ..backend.reductions import REDUCTIONS, check_formulas, resolve

__all__ = ["check_backend", "plan", "reduce", "to_dense", "vjp"]


class _DaskPlan:
    """A reduction over Dask arrays, validated; run lazily by :mod:`.backend._dask`."""

    def __init__(self, formulas, bindings, ni, nj, reduction, axis, K, dtype):
        self.args = (formulas, bindings, ni, nj, reduction, axis, K, dtype)

    def reduce(self, backend, options):
        return reduce_lazy(*self.args, backend, options)


def plan(t, reduction: str, axis, weight=None, K=1, backend=None):
    """``(Plan, arguments)`` of a reduction of ``t`` (``(_DaskPlan, None)`` on
    Dask arrays), after checking every argument against the registry."""
    axis = check_axis(axis)
    backend = engine_backend(backend)
    check_backend_name(backend)
    check_symbols(t, weight)
    parts = [t] + ([lift(type(t), weight)] if weight is not None else [])
    if weight is None:  # the common case: nothing to merge
        bindings, ni, nj = bindings_of(t), t.ni, t.nj
    else:
        bindings, ni, nj = merge(parts)
    formulas = [p.formula for p in parts]
    red = REDUCTIONS[reduction]
    try:
        check_formulas(red, formulas)
    except ValueError as exc:
        raise ValueError(f"{exc} (shapes {', '.join(str(p.shape) for p in parts)})") from None
    nx, ny = ni or 1, nj or 1
    if red.uses_k:
        K = _check_k(K, ny if axis == 1 else nx, "the reduced axis has {n} points")
    if any(b.batch for b in bindings.values()):
        raise NotImplementedError(
            "this operation does not support batch axes yet (reductions do); "
            "loop over the batch"
        )
    dtype = dtype_of(bindings)
    if any(is_dask_array(b.array) for b in bindings.values()):
        return _DaskPlan(formulas, bindings, ni, nj, reduction, axis, K, dtype), None

    def array_of(node):
        a = bindings[node].array
        if is_cupy_array(a):
            return a.astype(dtype, order="C", copy=False)
        return np.ascontiguousarray(a, dtype=dtype)

    return make_plan(formulas, reduction, axis, K, array_of, dtype, nx, ny)


def _check_k(K, n: int, has: str) -> int:
    K = int_arg(K, "K")
    if not 1 <= K <= n:
        raise ValueError(f"K={K} but {has.format(n=n)}; K must be between 1 and {n}")
    return K


def reduce(t, reduction: str, axis, *, weight=None, K=1, backend=None, **options):
    """The reduction ``reduction`` (a registry name) of the LazyTensor ``t`` over
    ``axis``: an array of the inputs' kind, a tuple of them for several outputs.

    ``options``: the engine's (``ranges``, ``tiles``) and pykeops' keywords
    (:mod:`kerneltools.lazy._keops_options`)."""
    backend = engine_backend(backend)
    if any(k in options for k in PYKEOPS_KEYWORDS):
        options, compute, device = engine_options(options, _dtype_of(t, weight))
        with device:
            if compute is None:
                return reduce(t, reduction, axis, weight=weight, K=K, backend=backend,
                              **options)
            return _reduce_in(compute, t, reduction, axis, weight, K, backend, options)
    if any(b.batch for b in bindings_of(t).values()) or (
            isinstance(weight, type(t))
            and any(b.batch for b in bindings_of(weight).values())):
        return _reduce_batched(t, reduction, axis, weight, K, backend, options)
    ranges = ranges_of(t)
    if ranges is not None:
        options.setdefault("ranges", ranges)
    p, args = plan(t, reduction, axis, weight, K, backend)
    if isinstance(p, _DaskPlan):  # Dask arrays in, Dask arrays out
        # the workers (other threads or processes) do not see this thread's
        # configuration: the graph carries the backend it stands for
        return p.reduce(backend if backend is not None else configured_backend(), options)
    outs = run_plan(p, args, backend, **options)
    if p.red.uses_k and p.red.out_dim([f.dim for f in p.formulas]) == 1:
        outs = tuple(o[..., 0] for o in outs)
    return outs if len(outs) > 1 else outs[0]


def check_backend(backend) -> None:
    """ValueError unless ``backend`` is a backend name (ours or pykeops')."""
    check_backend_name(engine_backend(backend))


def _dtype_of(t, weight):
    parts = [t] + ([weight] if isinstance(weight, type(t)) else [])
    bindings = {}
    for p in parts:
        bindings.update(bindings_of(p))
    return dtype_of(bindings)


def _reduce_in(dtype, t, reduction, axis, weight, K, backend, options):
    """The reduction computed in ``dtype`` (``dtype_acc="float64"`` on float32
    data), its real outputs cast back to the data's dtype."""
    data_dtype = _dtype_of(t, weight)

    def cast(p):
        if not isinstance(p, type(t)):
            return p
        b = {n: Binding(v.array, v.weak, v.batch) if v.weak or v.array is None
             else Binding(v.array.astype(dtype), v.weak, v.batch)
             for n, v in bindings_of(p).items()}
        return from_parts(type(t), p.formula, b, p.ni, p.nj, ranges=ranges_of(p))

    outs = reduce(cast(t), reduction, axis, weight=cast(weight), K=K, backend=backend,
                  **options)
    single = not isinstance(outs, tuple)
    outs = (outs,) if single else outs
    outs = tuple(o.astype(data_dtype) if o.dtype.kind == "f" else o for o in outs)
    return outs[0] if single else outs


def to_dense(t, max_elements: int) -> np.ndarray:
    """``LazyTensor.to_dense``: ``t``'s values on every pair, (N, M, D) NumPy."""
    if t.batch:
        raise NotImplementedError(
            "to_dense does not support batch axes yet; loop over the batch"
        )
    N, M, D = t.ni or 1, t.nj or 1, t.formula.dim
    if N * M * D > max_elements:
        raise MemoryError(
            f"to_dense: a ({N}, {M}, {D}) array has {N * M * D:,} values, more "
            f"than max_elements={max_elements:,}; reduce the formula instead, or "
            "raise max_elements"
        )
    bindings = bindings_of(t)
    if any(is_dask_array(b.array) for b in bindings.values()):
        bindings = {k: Binding(np.asarray(b.array), b.weak) for k, b in bindings.items()}
        t = from_parts(type(t), t.formula, bindings, t.ni, t.nj)
    return evaluate_dense(*plan(t, "Sum", 1))


def _reduce_batched(t, reduction, axis, weight, K, backend, options):
    """A reduction with batch axes: the B problems become one block-diagonal
    problem on stacked rows (batched parameters become variables of the
    output index), reduced with block-sparsity ranges in one call; outputs
    come back as (B..., n, E), with indices local to each problem."""
    if options.get("ranges") is not None or ranges_of(t) is not None:
        raise ValueError("ranges= cannot be combined with batch axes (they are "
                         "block-diagonal ranges already)")
    cls = type(t)
    parts = [t] + ([lift(cls, weight)] if weight is not None else [])
    bindings, ni, nj = merge(parts)
    batch = batch_of(bindings.values())
    B = int(np.prod(batch))
    n, m = ni or 1, nj or 1
    out_cat = "i" if check_axis(axis) == 1 else "j"
    n_out, n_red = (n, m) if out_cat == "i" else (m, n)
    if REDUCTIONS[reduction].uses_k:
        K = _check_k(K, n_red, "each problem of the batch reduces {n} points")
    flat, swap = _stack(bindings, batch, out_cat, n_out)
    formulas = [p.formula for p in parts]
    swap.update(_local_indices(formulas, flat, B, n, m))
    if swap:
        formulas = substitute(formulas, swap)
    nb, mb = B * n, B * m
    F = from_parts(cls, formulas[0], flat, nb, mb)
    W = from_parts(cls, formulas[1], flat, nb, mb) if weight is not None else None
    starts_i, starts_j = np.arange(B) * n, np.arange(B) * m
    r_i = np.stack([starts_i, starts_i + n], 1)
    r_j = np.stack([starts_j, starts_j + m], 1)
    slices = np.arange(1, B + 1)
    ranges = (r_i, slices, r_j, r_j, slices, r_i)
    outs = reduce(F, reduction, axis, weight=W, K=K, backend=backend, ranges=ranges,
                  **options)
    outs = outs if isinstance(outs, tuple) else (outs,)
    result = []
    for o, is_int in zip(outs, REDUCTIONS[reduction].int_outputs):
        o = o.reshape(batch + (n_out,) + o.shape[1:])
        if is_int:  # global row of the stacked problem -> index within its problem
            xp = array_module(o)
            offset = (xp.arange(B) * n_red).reshape(batch + (1,) * (o.ndim - len(batch)))
            o = xp.where(o >= 0, o - offset, o)
        result.append(o)
    return tuple(result) if len(result) > 1 else result[0]


def _local_indices(formulas, flat: dict, B: int, n: int, m: int) -> dict:
    """Replacements of the running indices i and j that the formulas read
    (the gradients of Min, Max and K-min compare j with a forward arg-index,
    which is local to its problem) by the index within each problem of the
    stacked one: the stacked index minus its problem's first row, a new
    variable added to ``flat``."""
    used = {node for node in topo_order(formulas) if node.op == "Index"}
    if not used:
        return {}
    some = next(iter(flat.values())).array
    xp, dtype = array_module(some), dtype_of(flat)
    swap = {}
    for node in used:
        rows = n if node.attrs[0] == "i" else m
        start = xp.repeat(xp.arange(B, dtype=dtype) * rows, rows)[:, None]
        offset = new_var(node.attrs[0], 1)
        flat[offset] = Binding(start)
        swap[node] = make("Sub", node, offset)
    return swap


def _stack(bindings: dict, batch: tuple, out_cat: str, n_out: int):
    """The bindings of the stacked problem, and the batched parameters'
    replacements (variables of the output index, one value per problem,
    repeated over its rows)."""
    B = int(np.prod(batch))
    flat, swap = {}, {}
    for node, b in bindings.items():
        a = b.array
        xp = array_module(a)
        if node.cat == "p":
            if not b.batch:
                flat[node] = b
                continue
            p = xp.broadcast_to(a, batch + a.shape[-1:]).reshape(B, -1)
            new = new_var(out_cat, node.dim)
            swap[node] = new
            flat[new] = Binding(xp.repeat(p, n_out, axis=0), b.weak)
            continue
        rows = a.shape[-2]
        full = xp.broadcast_to(a.reshape(b.batch + a.shape[-2:]) if b.batch else a,
                               batch + (rows, a.shape[-1]))
        flat[node] = Binding(xp.ascontiguousarray(full.reshape(B * rows, -1)), b.weak)
    return flat, swap


def vjp(t, wrt, gradout, reduction: str = "Sum", axis: int = 1, *, weight=None, K: int = 1,
        backend=None, ranges=None):
    """``LazyTensor.vjp``: the gradient of ``sum(gradout * reduction(t))`` with
    respect to the variable ``wrt``, from the reduction's gradient rule and
    the formula's symbolic derivative."""
    red = resolve(reduction, weight is not None)
    if t.batch or (isinstance(weight, type(t)) and weight.batch):
        raise NotImplementedError(
            "vjp does not support batch axes yet; loop over the batch"
        )
    if not isinstance(wrt, type(t)) or wrt.formula.op != "Var":
        raise TypeError("vjp: 'wrt' must be a variable LazyTensor")
    axis = check_axis(axis)
    W = lift(type(t), weight) if weight is not None else None
    if red.surrogate is None:  # argument-valued reductions: zero gradient
        return np.zeros_like(wrt._bindings[wrt.formula].array, dtype=t.dtype)
    ranges = ranges if ranges is not None else ranges_of(t)
    opts = {} if ranges is None else {"ranges": ranges}
    outs = t._reduce(forward_reduction(red.name), axis, weight=W, K=K, backend=backend,
                     **opts)
    outs = list(outs) if isinstance(outs, tuple) else [outs]
    g = check_array(gradout, "vjp: 'gradout'")
    if g.shape[0] != len(outs[0]) or g.size != outs[0].size:
        raise ValueError(
            f"vjp: 'gradout' must have the shape of the {red.name} reduction's "
            f"output, {outs[0].shape}; got {g.shape}"
        )
    if red.needs_lse:
        outs.append(t.logsumexp(axis=axis, backend=backend, **opts))
    # The forward outputs and the incoming gradient enter the gradient
    # formula as variables of the output index.
    bindings, ni, nj = merge([t, wrt] + ([W] if W is not None else []))
    bindings, nodes = dict(bindings), []
    for o in outs + [g]:
        o = o.astype(t.dtype, copy=False).reshape(len(o), -1)
        nodes.append(new_var("i" if axis == 1 else "j", o.shape[1]))
        bindings[nodes[-1]] = Binding(o)

    def reduce(G, over):
        return from_parts(type(t), G, bindings, ni, nj).sum(axis=over, backend=backend,
                                                            **opts)

    (grad,) = reduction_vjp(red.name, t.formula, W.formula if W is not None else None,
                            [wrt.formula], nodes[:-1], nodes[-1], axis, reduce=reduce)
    return grad

