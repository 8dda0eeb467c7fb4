"""The reduction of :mod:`kerneltools.jax`: a ``jax.custom_vjp`` over an XLA
custom call.

:func:`reduce` runs a reduction of a NumPy-level formula (its variables bound
to placeholders of the arrays' shapes and dtypes) on the ``jax.Array`` s of
its variables. On the CPU, its kernel is an XLA custom call
(``jax.ffi.ffi_call`` of the generic handler of
:mod:`kerneltools.backend.cpu._xla`, which calls the generated kernel on
XLA's buffers); the kernel's layout (j-variables packed by tiles, the
dot-product micro-kernel's chunks and norms, centred far-off points, the
many-column Sum's row-major B) is built with ``jax.numpy`` operations,
which XLA fuses, as the CPU backend builds it with NumPy. ``jax.vmap`` maps onto the handler's batch axes
(``vmap_method="expand_dims"``: one call, a C loop over the batch, unmapped
operands broadcast). The kernel of a shape, dtype and formula is traced and
compiled once (``jax.jit`` keyed by the plan's signature and sizes).

Plans that the handler does not serve (block-sparse ``ranges``,
``backend="numpy"``, pykeops' keywords, a GPU array) run through
``jax.pure_callback`` on the engine (a host round trip).

The gradient (``defvjp``) is the symbolic one of the engine
(:func:`~kerneltools.backend._autodiff.reduction_vjp`): forward outputs and
incoming gradient become variables of the output index, and the gradient
formula is reduced by this same function, so gradients of gradients work.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from .. import lazy as _lazy
from ..backend._autodiff import forward_reduction, reduction_vjp
from ..backend._ir import topo_order
from ..backend._plan import make_plan
from ..backend.cpu._xla import ffi_handler, kernel_entry
from ..backend.reductions import REDUCTIONS
from ..lazy._reducing import reduce as _reduce_lazy
from ..lazy._symbolic import (
    Binding,
    bindings_of,
    dtype_of,
    from_parts,
    merge,
    new_var,
    ranges_of,
)

__all__ = ["Spec", "placeholder", "reduce", "reduce_batched"]

_TARGET = "kerneltools_reduce"
_registered: list = []


def placeholder(x) -> np.ndarray:
    """A NumPy stand-in of ``x``'s shape and dtype (no memory), for formulas."""
    return np.broadcast_to(np.zeros((), dtype=np.dtype(x.dtype)), tuple(x.shape))


class Spec:
    """What a reduction call needs besides its arrays (static under ``jit``):
    ``F`` and ``W`` NumPy-level LazyTensors on placeholders, the reduction,
    its axis (0: over i, 1: over j), K, the backend, the variable ``nodes``
    whose arrays are passed (in order), and the engine's options."""

    def __init__(self, F, W, name, axis, K, backend, nodes, options):
        self.F, self.W, self.name, self.axis, self.K = F, W, name, axis, K
        self.backend, self.nodes, self.options = backend, tuple(nodes), options


def _register() -> None:
    if not _registered:
        handler = ffi_handler(jax.ffi.include_dir() + "/xla/ffi/api/c_api.h")
        jax.ffi.register_ffi_target(_TARGET, jax.ffi.pycapsule(handler), platform="cpu")
        _registered.append(handler)


@dataclass(frozen=True)
class _Call:
    """The static part of one custom call (the jit cache's key)."""

    address: int
    tj: int
    state: int
    threads: int
    layout: object  # the kernel's Layout (cpu._xla)
    cats: tuple
    dtype: np.dtype
    nx: int
    ny: int
    out_shapes: tuple  # one per output
    int_outputs: tuple
    x64: bool


def _tiles(a, tj: int):
    """(ny, d) -> tiles (nt, d, tj), zero-padded: the kernels' j layout."""
    ny, d = a.shape
    nt = -(-ny // tj)
    a = jnp.pad(a, ((0, nt * tj - ny), (0, 0)))
    return a.reshape(nt, tj, d).transpose(0, 2, 1)


def _buffers(call: _Call, args) -> list:
    """The kernel's arguments in its layout (``CpuBackend.run``'s packing,
    in ``jax.numpy``): tiles of j-variables, and the extra arrays of its
    specialisations (``call.layout``)."""
    lay, tj, ny = call.layout, call.tj, call.ny
    args = list(args)
    if lay.centring:
        args = _centred(args, lay, call)
    padded = -(-ny // tj) * tj
    dummy = jnp.zeros((1,), call.dtype)
    bufs = [dummy if k == lay.gemm or k in lay.tile_free
            else _tiles(a, tj) if c == "j" else a
            for k, (a, c) in enumerate(zip(args, call.cats))]
    for k in lay.dots:  # chunks of vl points (d, vl) over whole tiles
        a = jnp.pad(args[k], ((0, padded - ny), (0, 0)))
        bufs.append(a.reshape(padded // lay.vl, lay.vl, -1).transpose(0, 2, 1))
    acc = jnp.float64 if call.x64 else call.dtype
    for k in lay.dots:  # their squared norms, summed in double where JAX has it
        norms = jnp.sum(jnp.square(args[k].astype(acc)), axis=1).astype(call.dtype)
        bufs.append(jnp.pad(norms, (0, padded - ny)))
    if lay.gemm >= 0:  # the many-column Sum's B, row-major, padded
        b = args[lay.gemm]
        bufs.append(jnp.pad(b, ((0, padded - ny), (0, lay.gemm_columns - b.shape[1]))))
    return bufs


def _centred(args, lay, call: _Call) -> list:
    """:func:`kerneltools.backend.cpu._dots.centred` in ``jax.numpy``: the
    dot products' variables translated by the mean of a sample of finite
    rows of the j-variable, where that centre is far next to their spread."""
    positions, on = lay.centring
    acc = jnp.float64 if call.x64 else call.dtype
    y = args[on]
    sample = y[::max(1, y.shape[0] // lay.centre_sample)].astype(acc)
    finite = jnp.all(jnp.isfinite(sample), axis=1)[:, None]
    count = jnp.maximum(jnp.sum(finite), 1)
    c = jnp.sum(jnp.where(finite, sample, 0), axis=0) / count
    dev = jnp.where(finite, sample - c, 0)
    c2, spread = c @ c, jnp.sum(dev * dev) / count
    use = jnp.any(finite) & jnp.isfinite(c2) & jnp.isfinite(spread) & (c2 > 3 * spread)
    args = list(args)
    for k in positions:
        moved = (args[k].astype(acc) - c).astype(call.dtype)
        args[k] = jnp.where(use, moved, args[k])
    return args


@functools.partial(jax.jit, static_argnums=0)
def _ffi(call: _Call, *args):
    bufs = _buffers(call, args)
    types = []
    for shape, is_int in zip(call.out_shapes, call.int_outputs):
        if not is_int:
            types.append(jax.ShapeDtypeStruct(shape, call.dtype))
        elif call.x64:
            types.append(jax.ShapeDtypeStruct(shape, np.int64))
        else:  # int64 indices read as pairs of int32 (little-endian: low first)
            types.append(jax.ShapeDtypeStruct(shape[:-1] + (2 * shape[-1],), np.int32))
    ranks = [b.ndim for b in bufs] + [len(t.shape) for t in types]
    outs = jax.ffi.ffi_call(_TARGET, types, vmap_method="expand_dims")(
        *bufs, fn=np.int64(call.address), nx=np.int64(call.nx), ny=np.int64(call.ny),
        state=np.int64(call.state), threads=np.int64(call.threads), core_ranks=np.array(ranks, dtype=np.int64))
    res = []
    for o, shape, is_int in zip(outs, call.out_shapes, call.int_outputs):
        if is_int and not call.x64:
            o = o.reshape(shape + (2,))[..., 0]
        res.append(o)
    return tuple(res)


def _on_cpu(arrays) -> bool:
    """Whether the arrays live on the CPU (tracers: where the caller's
    computation is placed, the default backend's device; host constants:
    yes)."""
    for a in arrays:
        if isinstance(a, jax.core.Tracer):
            if jax.default_backend() != "cpu":
                return False
        elif hasattr(a, "devices") and any(d.platform != "cpu" for d in a.devices()):
            return False
    return True


def _forward(spec: Spec, run: str, arrays) -> tuple:
    """The outputs of the reduction ``run`` (a registry name) of ``spec``."""
    parts = [spec.F] + ([spec.W] if spec.W is not None else [])
    bindings, ni, nj = merge(parts)
    data = dict(zip(spec.nodes, arrays))
    dtype = dtype_of(bindings)
    red = REDUCTIONS[run]

    def array_of(node):
        a = data[node] if node in data else jnp.asarray(bindings[node].array)
        return a.astype(dtype)

    plan, args = make_plan([p.formula for p in parts], run, spec.axis, spec.K, array_of,
                           dtype, ni or 1, nj or 1)
    entry = None
    if (spec.backend in (None, "auto", "cpu") and not spec.options
            and ranges_of(spec.F) is None and _on_cpu(arrays)):
        entry = kernel_entry(plan)
    E = red.out_dim([f.dim for f in plan.formulas])
    shape = (plan.nx, plan.K, E) if red.uses_k else (plan.nx, E)
    if entry is not None:
        _register()
        call = _Call(entry.address, entry.tj, entry.state_size, entry.threads,
                     entry.layout, plan.arg_cats,
                     np.dtype(dtype), plan.nx, plan.ny, (shape,) * red.n_outputs,
                     red.int_outputs, bool(jax.config.jax_enable_x64))
        outs = _ffi(call, *args)
    else:
        outs = _callback(spec, run, shape, dtype, arrays)
    if red.uses_k and E == 1:
        outs = tuple(o[..., 0] for o in outs)
    return tuple(outs)


def _callback(spec: Spec, run: str, shape, dtype, arrays) -> tuple:
    """The reduction on the engine, through a host callback (plans that the
    custom call does not serve)."""
    red = REDUCTIONS[run]
    x64 = bool(jax.config.jax_enable_x64)
    types = [jax.ShapeDtypeStruct(shape, (np.int64 if x64 else np.int32) if i else dtype)
             for i in red.int_outputs]

    def host(*data):
        F, W = rebind(spec, [np.asarray(d) for d in data])
        outs = _reduce_lazy(F, run, spec.axis, weight=W, K=spec.K, backend=spec.backend,
                            **spec.options)
        outs = outs if isinstance(outs, tuple) else (outs,)
        return tuple(np.asarray(o).reshape(t.shape).astype(t.dtype)
                     for o, t in zip(outs, types))

    return jax.pure_callback(host, tuple(types), *arrays, vmap_method="sequential")


def rebind(spec: Spec, data) -> tuple:
    """``spec.F`` and ``spec.W`` bound to ``data`` (NumPy, one per node)."""
    by_node = dict(zip(spec.nodes, data))

    def bound(lt):
        b = {n: Binding(by_node[n].reshape(v.array.shape), v.weak, v.batch)
             if n in by_node else v for n, v in bindings_of(lt).items()}
        return from_parts(_lazy.LazyTensor, lt.formula, b, lt.ni, lt.nj,
                          ranges=ranges_of(lt))

    return bound(spec.F), (bound(spec.W) if spec.W is not None else None)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def reduce(spec: Spec, *arrays) -> tuple:
    """The outputs of ``spec``'s reduction on ``arrays`` (one per ``spec.nodes``)."""
    return _forward(spec, spec.name, arrays)


@jax.tree_util.register_static
@dataclass(frozen=True)
class _Perturbed:
    """Which inputs of a reduction carry tangents (residual data, static)."""

    flags: tuple


def _reduce_fwd(spec: Spec, *primals):
    # (``symbolic_zeros``: the gradient formulas of inputs that no gradient
    # needs, a whole reduction each, are not built)
    arrays = tuple(p.value for p in primals)
    perturbed = _Perturbed(tuple(bool(p.perturbed) for p in primals))
    # (through ``reduce`` itself, so that a transformation of this gradient,
    # a second derivative, differentiates the forward pass too)
    run = Spec(spec.F, spec.W, forward_reduction(spec.name), spec.axis, spec.K,
               spec.backend, spec.nodes, spec.options)
    outs = reduce(run, *arrays)
    return outs[:REDUCTIONS[spec.name].n_outputs], (arrays, outs, perturbed)


def _reduce_bwd(spec: Spec, res, gouts):
    arrays, outs, perturbed = res
    red = REDUCTIONS[spec.name]
    wanted = [n for n, p in zip(spec.nodes, perturbed.flags) if p]
    if (red.surrogate is None or not wanted
            or isinstance(gouts[0], jax.custom_derivatives.SymbolicZero)):
        return (None,) * len(arrays)
    parts = [spec.F] + ([spec.W] if spec.W is not None else [])
    bindings, ni, nj = merge(parts)
    bindings, data = dict(bindings), dict(zip(spec.nodes, arrays))
    real = spec.F.dtype
    out_cat = "i" if spec.axis == 1 else "j"

    def output_variable(t):
        t = jnp.reshape(t, (t.shape[0], -1)).astype(real)
        node = new_var(out_cat, t.shape[1])
        bindings[node] = Binding(placeholder(t))
        data[node] = t
        return node

    outs = list(outs)
    if red.needs_lse:
        lse = Spec(spec.F, None, "LogSumExp", spec.axis, 1, spec.backend, spec.nodes,
                   spec.options)
        outs.append(reduce(lse, *arrays)[0])
    out_nodes = [output_variable(o) for o in outs]
    gnode = output_variable(gouts[0])

    def sum_over(G, over):
        nodes = [n for n in topo_order([G]) if n.op == "Var" and n in data]
        F = from_parts(_lazy.LazyTensor, G, bindings, ni, nj, ranges=ranges_of(spec.F))
        s = Spec(F, None, "Sum", over, 1, spec.backend, nodes, spec.options)
        return reduce(s, *[data[n] for n in nodes])[0]

    W = spec.W.formula if spec.W is not None else None
    gs = dict(zip(wanted, reduction_vjp(spec.name, spec.F.formula, W, wanted, out_nodes,
                                        gnode, spec.axis, reduce=sum_over)))
    return tuple(jnp.reshape(gs[n], a.shape).astype(a.dtype) if n in gs else None
                 for n, a in zip(spec.nodes, arrays))


reduce.defvjp(_reduce_fwd, _reduce_bwd, symbolic_zeros=True)


def reduce_batched(spec: Spec, arrays, batch: tuple) -> tuple:
    """The outputs of ``spec``'s reduction when its data have the leading
    batch axes ``batch`` (broadcast): ``jax.vmap`` of the reduction of one
    problem, once per batch axis (the custom call's batch loop, no Python
    loop); outputs (*batch, n, ...)."""
    parts = [spec.F] + ([spec.W] if spec.W is not None else [])
    bindings, _, _ = merge(parts)
    nb = len(batch)

    def one(lt):  # the formula of one problem: its bindings without batch axes
        b = {n: Binding(v.array[(0,) * len(v.batch)], v.weak)
             for n, v in bindings_of(lt).items()}
        return from_parts(_lazy.LazyTensor, lt.formula, b, lt.ni, lt.nj)

    spec1 = Spec(one(spec.F), one(spec.W) if spec.W is not None else None, spec.name,
                 spec.axis, spec.K, spec.backend, spec.nodes, spec.options)
    shapes = []  # each array's batch axes, right-aligned on nb
    squeezed = []
    for n, a in zip(spec.nodes, arrays):
        own = bindings[n].batch
        full = (1,) * (nb - len(own)) + tuple(own)
        shapes.append(full)
        core = a.shape[len(own):]
        squeezed.append(jnp.reshape(a, tuple(d for d in full if d != 1) + core))

    def f(*arrs):
        return reduce(spec1, *arrs)

    for k in reversed(range(nb)):
        if batch[k] == 1:  # nothing to map: a new axis of size 1
            f = _new_axis(f)
        else:
            f = jax.vmap(f, in_axes=tuple(0 if s[k] != 1 else None for s in shapes))
    return f(*squeezed)


def _new_axis(f):
    """``f`` with a leading axis of size 1 on each of its outputs."""
    return lambda *arrays: tuple(o[None] for o in f(*arrays))
