"""The reduction of :mod:`kerneltools.jax`: two JAX primitives over an XLA
custom call.

:func:`reduce` runs a reduction of a NumPy-level formula (its variables bound
to placeholders of the arrays' shapes and dtypes) on the ``jax.Array`` s of
its variables. On the CPU, its kernel is an XLA custom call
(``jax.ffi.ffi_call`` of the generic handler of
:mod:`kerneltools.backend.cpu._xla`, which calls the generated kernel on
XLA's buffers); the kernel's layout (j-variables packed by tiles, the
dot-product micro-kernel's chunks and norms, centred far-off points, the
many-column Sum's row-major B) is built with ``jax.numpy`` operations,
which XLA fuses, as the CPU backend builds it with NumPy. ``jax.vmap`` maps
onto the handler's batch axes (``vmap_method="expand_dims"``: one call, a C
loop over the batch, unmapped operands broadcast). The kernel of a shape,
dtype and formula is traced and compiled once (``jax.jit`` keyed by the
plan's signature and sizes).

On a CUDA device, the CUDA backend's NVRTC-compiled kernel is launched on
XLA's stream by a custom call of its own (:mod:`._cuda`). Plans that
neither handler serves (block-sparse ``ranges``, ``backend="numpy"``,
pykeops' keywords, a GPU without CuPy) run through ``jax.pure_callback`` on
the engine (a host round trip).

Derivatives: ``reduce_p`` (the reduction) has a JVP rule whose tangent is
``tangent_p``, the Sum of the engine's
:func:`~kerneltools.backend._autodiff.tangent_formula`, linear in the
tangents; its transpose rule is the symbolic gradient of the engine
(:func:`~kerneltools.backend._autodiff.reduction_vjp`). So ``jax.jvp``,
``jacfwd``, ``linearize`` and reverse mode (linearize + transpose: ``grad``,
``vjp``, ``jacrev``) all work, to any order: every rule is written with these
same primitives. Batching adds a level to the primitives' ``axes``; the
rules of a batched primitive are those of one problem under ``jax.vmap``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax.core import ShapedArray
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

from .. import lazy as _lazy
from ..backend._autodiff import forward_reduction, reduction_vjp, tangent_formula
from ..backend._ir import topo_order
from ..backend._plan import make_plan
from ..backend.cpu._xla import ffi_handler, kernel_entry, watch_sigint
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
from ._cuda import cuda_device, cuda_reduce, output_type, output_value

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
    """The CPU handler registered (once), its Ctrl-C watch (re)installed."""
    if not _registered:
        handler = ffi_handler(jax.ffi.include_dir() + "/xla/ffi/api/c_api.h")
        jax.ffi.register_ffi_target(_TARGET, jax.ffi.pycapsule(handler), platform="cpu")
        _registered.append(handler)
    watch_sigint(_registered[0])


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
    types = [output_type(shape, call.dtype, is_int, call.x64)
             for shape, is_int in zip(call.out_shapes, call.int_outputs)]
    ranks = [b.ndim for b in bufs] + [len(t.shape) for t in types]
    outs = jax.ffi.ffi_call(_TARGET, types, vmap_method="expand_dims")(
        *bufs, fn=np.int64(call.address), nx=np.int64(call.nx), ny=np.int64(call.ny),
        state=np.int64(call.state), threads=np.int64(call.threads), core_ranks=np.array(ranks, dtype=np.int64))
    return tuple(output_value(o, shape, is_int, call.x64)
                 for o, shape, is_int in zip(outs, call.out_shapes, call.int_outputs))


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
    entry = outs = None
    plain = not spec.options and ranges_of(spec.F) is None
    if plain and spec.backend in (None, "auto", "cpu") and _on_cpu(arrays):
        entry = kernel_entry(plan)
    E = red.out_dim([f.dim for f in plan.formulas])
    shape = (plan.nx, plan.K, E) if red.uses_k else (plan.nx, E)
    device = cuda_device(arrays) if plain and entry is None else None
    if device is not None and spec.backend in (None, "auto", "cuda"):
        outs = cuda_reduce(plan, args, shape, device)  # None: the engine's
    if entry is not None:
        _register()
        call = _Call(entry.address, entry.tj, entry.state_size, entry.threads,
                     entry.layout, plan.arg_cats,
                     np.dtype(dtype), plan.nx, plan.ny, (shape,) * red.n_outputs,
                     red.int_outputs, bool(jax.config.jax_enable_x64))
        outs = _ffi(call, *args)
    elif outs is None:
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


# -- the primitives -----------------------------------------------------------
# ``reduce_p``: the outputs of a reduction. ``tangent_p``: the tangent of its
# value output (forward mode), the Sum over the reduced index of
# :func:`~kerneltools.backend._autodiff.tangent_formula`: linear in the
# tangents, and transposed into the symbolic gradient reductions
# (:func:`~kerneltools.backend._autodiff.reduction_vjp`), so reverse mode is
# JAX's linearize + transpose. Both lower to the custom call (``lower_fun`` of
# their JAX-level implementation) and batch by ``jax.vmap`` of it (the custom
# call's batch loop); their derivatives are reductions of these primitives
# again, so derivatives of any order, in any mode, compose.
reduce_p = Primitive("kerneltools_reduce")
reduce_p.multiple_results = True
tangent_p = Primitive("kerneltools_tangent")
tangent_p.multiple_results = True


def reduce(spec: Spec, *arrays) -> tuple:
    """The outputs of ``spec``'s reduction on ``arrays`` (one per ``spec.nodes``)."""
    return tuple(reduce_p.bind(*arrays, spec=spec))


def _reduce_impl(*arrays, spec: Spec, axes=()):
    return _mapped(lambda *a: _forward(spec, spec.name, a), axes)(*arrays)


def _mapped(f, axes):
    """``f`` mapped by ``jax.vmap`` over ``axes`` (outermost first, each a
    tuple of 0 or None per argument): the batching of the primitives."""
    for ax in reversed(axes):
        f = jax.vmap(f, in_axes=ax)
    return f


def _with(spec: Spec, name: str, W="same", K=None) -> Spec:
    return Spec(spec.F, spec.W if W == "same" else W, name, spec.axis,
                spec.K if K is None else K, spec.backend, spec.nodes, spec.options)


def _reduce_jvp(primals, tangents, *, spec: Spec, axes=()):
    """The outputs (of ``forward_reduction``, which the tangent reads) and
    the tangent of the value output; index outputs have none. Batched: the
    JVP of the vmapped reduction, for the inputs with tangents only."""
    if axes:
        return _batched_jvp(primals, tangents, spec, axes)
    red = REDUCTIONS[spec.name]
    outs = reduce(_with(spec, forward_reduction(spec.name)), *primals)
    n = red.n_outputs
    zeros = [ad.Zero(ShapedArray(o.shape, o.dtype).to_tangent_aval()) for o in outs[:n]]
    live = [k for k, t in enumerate(tangents) if type(t) is not ad.Zero]
    if red.surrogate is None or not live:
        return list(outs[:n]), zeros
    extra = list(outs)
    if red.needs_lse:
        extra.append(reduce(_with(spec, "LogSumExp", W=None, K=1), *primals)[0])
    real = np.dtype(spec.F.dtype)
    extra = [jnp.reshape(o, (o.shape[0], -1)).astype(real) for o in extra]
    out_cat = "i" if spec.axis == 1 else "j"
    out_nodes = tuple(new_var(out_cat, o.shape[1]) for o in extra)
    pairs = tuple((spec.nodes[k], new_var(spec.nodes[k].cat, spec.nodes[k].dim))
                  for k in live)
    (t,) = tangent_p.bind(*primals, *extra, *[tangents[k] for k in live], spec=spec,
                          out_nodes=out_nodes, pairs=pairs, shape=tuple(outs[0].shape))
    return list(outs[:n]), [t] + zeros[1:]


class _Bound:
    """A reduction's bindings and data with extra variables of the output
    index (forward outputs, cotangents) or tangents (bound like their
    variable), and the Sum of a formula on them."""

    def __init__(self, spec: Spec, arrays):
        self.spec = spec
        parts = [spec.F] + ([spec.W] if spec.W is not None else [])
        bindings, self.ni, self.nj = merge(parts)
        self.bindings, self.data = dict(bindings), dict(zip(spec.nodes, arrays))

    def add(self, node, array, like=None):
        b = self.bindings[like] if like is not None else Binding(placeholder(array))
        self.bindings[node], self.data[node] = b, array

    def sum(self, G, over):
        nodes = [n for n in topo_order([G]) if n.op == "Var" and n in self.data]
        F = from_parts(_lazy.LazyTensor, G, self.bindings, self.ni, self.nj,
                       ranges=ranges_of(self.spec.F))
        s = Spec(F, None, "Sum", over, 1, self.spec.backend, nodes, self.spec.options)
        return reduce(s, *[self.data[n] for n in nodes])[0]


def _split(args, spec, out_nodes):
    n, m = len(spec.nodes), len(out_nodes)
    return args[:n], args[n:n + m], args[n + m:]


def _batched_jvp(primals, tangents, spec: Spec, axes):
    """The JVP of one problem, mapped over the batch axes (the tangents of
    the inputs that have one mapped as the inputs are)."""
    live = [k for k, t in enumerate(tangents) if type(t) is not ad.Zero]
    if REDUCTIONS[spec.name].surrogate is None or not live:
        outs = reduce_p.bind(*primals, spec=spec, axes=axes)
        return outs, [ad.Zero(ShapedArray(o.shape, o.dtype).to_tangent_aval())
                      for o in outs]
    n = len(primals)

    def one(*values):
        ps, it = values[:n], iter(values[n:])
        ts = [next(it) if k in live else ad.Zero(ShapedArray(p.shape, p.dtype))
              for k, p in enumerate(ps)]
        outs, touts = _reduce_jvp(ps, ts, spec=spec)
        return outs, ad.instantiate_zeros(touts[0])

    in_axes = [ax + tuple(ax[k] for k in live) for ax in axes]
    outs, t0 = _mapped(one, in_axes)(*primals, *[tangents[k] for k in live])
    zeros = [ad.Zero(ShapedArray(o.shape, o.dtype).to_tangent_aval()) for o in outs[1:]]
    return list(outs), [t0] + zeros


def _tangent_impl(*args, spec: Spec, out_nodes, pairs, shape, axes=()):
    return _mapped(functools.partial(_tangent_one, spec=spec, out_nodes=out_nodes,
                                     pairs=pairs, shape=shape), axes)(*args)


def _tangent_one(*args, spec: Spec, out_nodes, pairs, shape):
    arrays, outs, tans = _split(args, spec, out_nodes)
    ctx = _Bound(spec, arrays)
    for node, o in zip(out_nodes, outs):
        ctx.add(node, o)
    for (node, tnode), t in zip(pairs, tans):
        ctx.add(tnode, t, like=node)
    W = spec.W.formula if spec.W is not None else None
    J = tangent_formula(spec.name, spec.F.formula, W, pairs, list(out_nodes), spec.axis)
    return [jnp.reshape(ctx.sum(J, spec.axis), shape)]


def _tangent_jvp(primals, tangents, **params):
    # (through the implementation: a reduce_p, whose tangent is a tangent_p)
    tangents = tuple(ad.instantiate_zeros(t) for t in tangents)
    outs, touts = jax.jvp(functools.partial(_tangent_impl, **params), tuple(primals),
                          tangents)
    return outs, touts


def _tangent_transpose(cts, *args, spec: Spec, out_nodes, pairs, shape, axes=()):
    """The gradients of the tangents' arrays: the symbolic gradient
    reductions of the reduction, with the cotangent as incoming gradient."""
    arrays, outs, tans = _split(args, spec, out_nodes)
    wanted = [node for (node, _), t in zip(pairs, tans) if ad.is_undefined_primal(t)]
    none = [None] * (len(arrays) + len(outs))
    ct = cts[0]
    if type(ct) is ad.Zero or not wanted or REDUCTIONS[spec.name].surrogate is None:
        return none + [None] * len(tans)
    if axes:
        return _batched_transpose(ct, args, axes, {
            "spec": spec, "out_nodes": out_nodes, "pairs": pairs, "shape": shape})
    ctx = _Bound(spec, arrays)
    for node, o in zip(out_nodes, outs):
        ctx.add(node, o)
    ct = jnp.reshape(ct, (ct.shape[0], -1)).astype(spec.F.dtype)
    gnode = new_var(out_nodes[0].cat, ct.shape[1])
    ctx.add(gnode, ct)
    W = spec.W.formula if spec.W is not None else None
    gs = dict(zip(wanted, reduction_vjp(spec.name, spec.F.formula, W, wanted,
                                        list(out_nodes), gnode, spec.axis,
                                        reduce=ctx.sum)))
    return none + [jnp.reshape(gs[node], t.aval.shape).astype(t.aval.dtype)
                   if ad.is_undefined_primal(t) else None
                   for (node, _), t in zip(pairs, tans)]


def _batched_transpose(ct, args, axes, params):
    """The transpose of a batched ``tangent_p``: that of one problem, mapped
    over the outermost batch axis (the cotangents of unmapped tangents
    summed over it)."""
    ax, rest = axes[0], axes[1:]
    undefined = [ad.is_undefined_primal(a) for a in args]

    def one(ct1, *known):
        it = iter(known)
        args1 = [ad.UndefinedPrimal(_unmapped_aval(a.aval, d)) if u else next(it)
                 for a, u, d in zip(args, undefined, ax)]
        res = _tangent_transpose([ct1], *args1, axes=rest, **params)
        return [r if r is not None else jnp.zeros(a.aval.shape, a.aval.dtype)
                for r, a in zip(res, args1) if ad.is_undefined_primal(a)]

    known = [a for a, u in zip(args, undefined) if not u]
    res = iter(jax.vmap(one, in_axes=(0, *[d for d, u in zip(ax, undefined) if not u]))(
        ct, *known))
    out = []
    for u, d in zip(undefined, ax):
        r = next(res) if u else None
        out.append(r if r is None or d == 0 else jnp.sum(r, axis=0))
    return out


def _unmapped_aval(aval, d):
    return aval if d is None else ShapedArray(aval.shape[1:], aval.dtype)


def _abstract(impl):
    def rule(*avals, **params):
        outs = jax.eval_shape(functools.partial(impl, **params),
                              *[jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals])
        return [ShapedArray(o.shape, o.dtype) for o in outs]
    return rule


def _batching(prim):
    """Mapped axes moved first, one more level in the primitive's ``axes``."""
    def rule(args, dims, *, axes=(), **params):
        dims = [d if isinstance(d, int) and d >= 0 else None for d in dims]
        args = [a if d in (None, 0) else jnp.moveaxis(a, d, 0)
                for a, d in zip(args, dims)]
        ax = tuple(None if d is None else 0 for d in dims)
        outs = prim.bind(*args, axes=(ax,) + tuple(axes), **params)
        return outs, (0,) * len(outs)
    return rule


for _p, _impl in ((reduce_p, _reduce_impl), (tangent_p, _tangent_impl)):
    _p.def_impl(_impl)
    _p.def_abstract_eval(_abstract(_impl))
    mlir.register_lowering(_p, mlir.lower_fun(_impl, multiple_results=True))
    batching.primitive_batchers[_p] = _batching(_p)
ad.primitive_jvps[reduce_p] = _reduce_jvp
ad.primitive_jvps[tangent_p] = _tangent_jvp
ad.primitive_transposes[tangent_p] = _tangent_transpose


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
