"""The ``torch.autograd.Function`` s of :mod:`kerneltools.torch` (for size).

:class:`Reduce` runs a reduction of the NumPy-level formula on the data of
the tensors it receives; its backward builds the gradient reduction
symbolically (the reduction's gradient rule and the formula's derivative)
and computes it with the same differentiable reductions, so gradients of
gradients work. ``forward`` / ``setup_context`` / ``vmap`` / ``jvp`` as
``torch.func`` requires: ``torch.vmap`` maps onto a leading batch axis of
the problem (batch axes are reduced block-diagonally in one call),
``torch.func.jvp`` (hence ``jacfwd``, ``hessian``) is a Sum reduction of
the directional derivative of the reduction's gradient surrogate, run by
:class:`Reduce` itself on the primal and tangent tensors (so it is
differentiable and vmappable in turn).
:class:`Solve` is ``(K + alpha I)^-1 b`` with implicit differentiation.

A spec's ``F`` (and ``W``) is a ``kerneltools.torch.LazyTensor``: its class
(``type(spec.F)``) wraps the gradient formulas.
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch

from .. import lazy as _lazy
from ..lazy._solve import LinearSystem
from ..lazy._reducing import reduce as _reduce_lazy
from ..lazy._symbolic import Binding, bindings_of, from_parts, merge, new_var, ranges_of
from ..backend._autodiff import forward_reduction, reduction_vjp, tangent_formula
from ..backend.reductions import REDUCTIONS

__all__ = ["Reduce", "ReduceSpec", "Solve", "SolveSpec", "stream", "to_torch", "view"]


_NUMPY_DTYPES = {torch.float64: np.float64, torch.float32: np.float32,
                 torch.int64: np.int64, torch.int32: np.int32, torch.bool: np.bool_}


def view(t: torch.Tensor):
    """A zero-copy array of ``t``'s data: NumPy on the CPU, CuPy on CUDA.

    Under ``torch.func`` transforms (vmap, grad, ...) a tensor is a wrapper
    without accessible data: the view is then a placeholder of its logical
    shape and dtype (no memory), for building formulas; the data are read
    again from the tensors that reach :class:`Reduce`'s forward.
    """
    wrapped = torch._C._functorch.is_functorch_wrapped_tensor
    if not wrapped(t) and t.requires_grad:
        t = t.detach()  # (only then: under forward-mode AD, detach gives a wrapper)
    if wrapped(t):
        dt = _NUMPY_DTYPES.get(t.dtype, np.float32)
        return np.broadcast_to(np.zeros((), dtype=dt), tuple(t.shape))
    if t.is_cuda:
        import cupy

        return cupy.from_dlpack(t)
    if t.dtype in (torch.float16, torch.bfloat16):
        t = t.float()
    return t.numpy()


def to_torch(a, like: torch.Tensor) -> torch.Tensor:
    """An engine output (NumPy or CuPy) as a tensor on ``like``'s device."""
    if isinstance(a, np.ndarray):
        return torch.from_numpy(a).to(like.device)
    return torch.from_dlpack(a)


@contextlib.contextmanager
def stream(tensors):
    """Run CuPy work on the current torch stream of the tensors' device."""
    cuda = [t for t in tensors if t.is_cuda]
    if not cuda:
        yield
        return
    import cupy

    with cupy.cuda.Device(cuda[0].device.index or 0):
        stream = torch.cuda.current_stream(cuda[0].device)
        with _cupystream(cupy, stream):
            yield


def _cupystream(cupy, stream):
    """CuPy's view of a torch stream (``Stream.from_external`` where CuPy has
    it: ``ExternalStream`` is deprecated there)."""
    from_external = getattr(cupy.cuda.Stream, "from_external", None)
    if from_external is not None:
        try:
            return from_external(stream)
        except Exception:  # a torch stream without the CUDA stream protocol
            pass
    return cupy.cuda.ExternalStream(stream.cuda_stream)



class ReduceSpec:
    """What a reduction call needs besides its tensors (kept on the autograd node)."""

    def __init__(self, F, W, name, axis, K, backend, nodes, options):
        self.F, self.W, self.name, self.axis, self.K = F, W, name, axis, K
        self.backend, self.nodes, self.options = backend, nodes, options


def _rebind(spec, tensors):
    """The NumPy-level formula and weight of ``spec`` bound to the data of
    ``tensors`` (one per node of ``spec.nodes``, as the autograd Function
    receives them)."""
    data = dict(zip(spec.nodes, tensors))

    def bound(lt):
        b = {n: (Binding(view(data[n]).reshape(v.array.shape), v.weak, v.batch)
                 if n in data else v) for n, v in bindings_of(lt).items()}
        return from_parts(_lazy.LazyTensor, lt.formula, b, lt.ni, lt.nj,
                          ranges=ranges_of(lt))

    return bound(spec.F._lt), (bound(spec.W._lt) if spec.W is not None else None)


class Reduce(torch.autograd.Function):
    """A reduction; its backward is a differentiable reduction of the gradient
    formula. ``forward`` / ``setup_context`` / ``vmap`` as ``torch.func``
    requires: the data are read from the tensors that forward receives."""

    @staticmethod
    def forward(spec, *tensors):
        F, W = _rebind(spec, tensors)
        like = tensors[0] if tensors else torch.zeros(())
        with stream(tensors):
            outs = _reduce_lazy(F, spec.run, spec.axis, weight=W, K=spec.K,
                                backend=spec.backend, **spec.options)
        outs = outs if isinstance(outs, tuple) else (outs,)
        return tuple(to_torch(o, like) for o in outs)

    @staticmethod
    def setup_context(ctx, inputs, output):
        spec, tensors = inputs[0], inputs[1:]
        ctx.spec = spec
        ctx.mark_non_differentiable(*[o for o in output if not o.is_floating_point()])
        if REDUCTIONS[spec.name].surrogate is None:
            ctx.mark_non_differentiable(*output)
        ctx.save_for_backward(*tensors, *output)
        ctx.save_for_forward(*tensors, *output)

    @staticmethod
    def jvp(ctx, _spec_tangent, *tangents):
        """Forward mode (``torch.func.jvp``, ``jacfwd``, ``hessian``): the
        tangent of the outputs is a Sum reduction of the differential of the
        reduction's surrogate (see :func:`~kerneltools.backend._autodiff.tangent_formula`), computed by this
        same Function on the primal and tangent tensors, so that it is itself
        differentiable and vmappable."""
        spec = ctx.spec
        saved = ctx.saved_tensors
        n_in = len(spec.nodes)
        return _jvp(spec, saved[:n_in], list(saved[n_in:]), tangents)

    @staticmethod
    def vmap(info, in_dims, spec, *tensors):
        """``torch.vmap``: the mapped axis becomes a leading batch axis of the
        problem (batch axes are reduced block-diagonally in one call)."""
        bspec, moved = _batched_spec(spec, in_dims[1:], tensors, info.batch_size)
        outs = Reduce.apply(bspec, *moved)
        return outs, (0,) * len(outs)

    @staticmethod
    def backward(ctx, *gouts):
        spec = ctx.spec
        saved = ctx.saved_tensors
        n_in = len(spec.nodes)
        tensors, outs = saved[:n_in], list(saved[n_in:])
        red = REDUCTIONS[spec.name]
        gin = gouts[0]
        if gin is None or red.surrogate is None:
            return (None,) * (n_in + 1)
        gc = _GradientContext(spec, tensors, outs)
        gnode = gc.add_output_variable(gin)  # the incoming gradient

        # Parameters ride with the output index's variables and are summed
        # over its rows (see reduction_vjp).
        wanted = [k for k in range(n_in) if ctx.needs_input_grad[k + 1]]
        F, W = gc.F, gc.W
        gs = reduction_vjp(spec.name, F._lt.formula, W._lt.formula if W is not None else None,
                           [spec.nodes[k] for k in wanted], gc.out_nodes, gnode,
                           spec.axis, reduce=gc.sum)
        grads = [None] * (n_in + 1)
        for k, g in zip(wanted, gs):
            node = spec.nodes[k]
            t = gc.tensor_of[node]
            # batch axes that the variable broadcast over are summed
            shape = bindings_of(F._lt if node in bindings_of(F._lt) else W._lt)[node].array.shape
            grads[k + 1] = g.sum_to_size(shape).reshape(t.shape).to(t.dtype)
        return tuple(grads)


class SolveSpec:
    """A solve's formula, shift, options and unknown (``var=``: its symbolic
    NumPy-level LazyTensor, None for ``K @ u``), kept on the autograd node."""

    def __init__(self, K, alpha, options, var=None):
        self.F, self.W, self.alpha, self.options = K, None, alpha, options
        self.var = var
        self.unknown = var.formula if var is not None else None
        self.nodes = [n for n in K._tensors if n is not self.unknown]


class Solve(torch.autograd.Function):
    """``a = (K + alpha I)^-1 b`` by conjugate gradients. Backward (implicit
    differentiation, K symmetric): ``lambda = (K + alpha I)^-1 g``; the
    gradient is ``lambda`` for b and ``-d/dtheta (lambda^T K a)`` for K's
    tensors, the latter through the differentiable reduction ``K @ a``."""

    @staticmethod
    def forward(spec, b, *tensors):
        K, _ = _rebind(spec, tensors)
        with stream((b,) + tensors):
            a = K.solve(view(b), spec.alpha, var=spec.var, **spec.options)
        return to_torch(a, b)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.spec = inputs[0]
        ctx.save_for_backward(*inputs[2:], output)

    @staticmethod
    def backward(ctx, g):
        spec = ctx.spec
        *tensors, a = ctx.saved_tensors
        K, _ = _rebind(spec, tensors)
        with stream(tensors):
            lam = to_torch(K.solve(view(g.contiguous()), spec.alpha, var=spec.var,
                                   **spec.options), g)
        grads = [None, lam if ctx.needs_input_grad[1] else None] + [None] * len(tensors)
        wanted = [k for k in range(len(tensors)) if ctx.needs_input_grad[k + 2]]
        if wanted:
            with torch.enable_grad():
                ts = [t.detach().requires_grad_(k in wanted) for k, t in enumerate(tensors)]
                opts = {k: v for k, v in spec.options.items()
                        if k not in ("tol", "max_iter", "callback")}
                s = (lam.detach() * _solve_operator(spec, K, ts, a.detach(), opts)).sum()
                gs = torch.autograd.grad(-s, [ts[k] for k in wanted])
            for k, gk in zip(wanted, gs):
                grads[k + 2] = gk
        return tuple(grads)


def _solve_operator(spec, K, ts, a, opts):
    """``sum_r F(a)``, differentiable with respect to the tensors ``ts`` of
    K (one per ``spec.nodes``): ``K @ a``, or F with ``var`` bound to ``a``."""
    tensors = dict(zip(spec.nodes, ts))
    if spec.unknown is None:
        return type(spec.F)._wrap(K, tensors).matmul(a, **opts)
    system = LinearSystem(K, spec.unknown, "i" if spec.unknown.cat == "j" else "j")
    batch = tuple(a.shape[:-2])
    F = system.bound(view(a), batch)
    Ft = type(spec.F)._wrap(F, {**tensors, spec.unknown: a})
    return Ft._reduce("Sum", system.axis, **opts)


class _GradientContext:
    """What the gradient and tangent formulas of one reduction need (backward
    and jvp): ``F`` and ``W`` as torch LazyTensors on the reduction's tensors,
    the forward outputs (those of ``forward_reduction``, then the log-sum-exp
    of F where the reduction ``needs_lse``) as variables of the output index
    (``out_nodes``), and :meth:`sum`, the differentiable Sum of a formula
    over all of them."""

    def __init__(self, spec, tensors, outs):
        self.spec = spec
        self.tensor_of = dict(zip(spec.nodes, tensors))
        wrap = type(spec.F)._wrap
        Fl, Wl = _rebind(spec, tensors)
        F = self.F = wrap(Fl, self.tensor_of)
        W = self.W = wrap(Wl, self.tensor_of) if Wl is not None else None
        axis, opts = spec.axis, spec.options
        if spec.run != forward_reduction(spec.name):
            # the forward ran without the outputs that the gradient needs (under
            # a transform that hid requires_grad): run them now
            res = F._reduce(forward_reduction(spec.name), axis, weight=W, K=spec.K,
                            backend=spec.backend, **opts)
            outs = list(res) if isinstance(res, tuple) else [res]
        if REDUCTIONS[spec.name].needs_lse:
            outs.append(F._reduce("LogSumExp", axis, backend=spec.backend, **opts))
        self.out_shape = tuple(outs[0].shape)
        self.out_cat = "i" if axis == 1 else "j"
        nb = len(F.batch)
        self.batch, self.n = tuple(outs[0].shape[:nb]), outs[0].shape[nb]
        bindings, self.ni, self.nj = merge([F._lt] + ([W._lt] if W is not None else []))
        self.bindings = dict(bindings)
        real = torch.float64 if F.dtype == np.float64 else torch.float32
        self.out_nodes = [self.add_output_variable(o.to(real)) for o in outs]

    def add_output_variable(self, t: torch.Tensor):
        """``t`` (one row per output row) as a new variable of the output index."""
        t = t.reshape(self.batch + (self.n, -1)).contiguous()
        node = new_var(self.out_cat, t.shape[-1])
        self.bindings[node] = Binding(view(t), batch=self.batch)
        self.tensor_of[node] = t
        return node

    def add_tangent(self, node, t: torch.Tensor):
        """The tangent ``t`` of the variable ``node`` (shaped as its tensor) as
        a new variable bound like ``node``."""
        b = self.bindings[node]
        tv = new_var(node.cat, node.dim)
        self.bindings[tv] = Binding(view(t).reshape(b.array.shape), b.weak, b.batch)
        self.tensor_of[tv] = t
        return tv

    def sum(self, G, over):
        """The Sum of the formula ``G`` over axis ``over``, with the forward's
        options (the same ranges: a reduction over the other index reads
        their transposed half)."""
        spec = self.spec
        Gt = type(spec.F)._wrap(from_parts(_lazy.LazyTensor, G, self.bindings, self.ni,
                                           self.nj), self.tensor_of)
        return Gt._reduce("Sum", over, backend=spec.backend, **spec.options)


def _jvp(spec, tensors, outs, tangents):
    """The tangents of the outputs of ``Reduce`` (see :meth:`Reduce.jvp`):
    the value output's is the Sum over the reduced index of
    :func:`~kerneltools.backend._autodiff.tangent_formula`; index outputs
    have none."""
    n_outs = len(REDUCTIONS[spec.run].int_outputs)
    none = (None,) * n_outs
    if REDUCTIONS[spec.name].surrogate is None:
        return none
    ctx = _GradientContext(spec, tensors, outs)
    pairs = []
    for node, t in zip(spec.nodes, tangents):
        if t is None or node not in ctx.bindings:
            continue
        if not torch._C._functorch.is_functorch_wrapped_tensor(t) and t._is_zerotensor():
            continue
        pairs.append((node, ctx.add_tangent(node, t)))
    if not pairs:
        return none
    W = ctx.W._lt.formula if ctx.W is not None else None
    J = tangent_formula(spec.name, ctx.F._lt.formula, W, pairs, ctx.out_nodes, spec.axis)
    tangent = ctx.sum(J, spec.axis).reshape(ctx.out_shape)
    return (tangent,) + none[1:]


def _batched_spec(spec, in_dims, tensors, size):
    """``spec`` with a leading batch axis of ``size`` for the tensors mapped by
    ``torch.vmap`` (``in_dims``), and the tensors with that axis first."""
    moved = [t if d is None else t.movedim(d, 0) for t, d in zip(tensors, in_dims)]
    mapped = {n: t for n, t, d in zip(spec.nodes, moved, in_dims) if d is not None}
    parts = [spec.F._lt] + ([spec.W._lt] if spec.W is not None else [])
    nb = max([len(b.batch) for p in parts for b in bindings_of(p).values()] + [0])

    def batched(lt):
        out = {}
        for n, b in bindings_of(lt).items():
            if n not in mapped:
                out[n] = b
                continue
            pad = (1,) * (nb - len(b.batch))
            shape = (size,) + pad + tuple(b.array.shape)
            out[n] = Binding(view(mapped[n]).reshape(shape), b.weak, (size,) + pad + b.batch)
        return from_parts(_lazy.LazyTensor, lt.formula, out, lt.ni, lt.nj)

    tensors_of = dict(zip(spec.nodes, moved))
    F = type(spec.F)._wrap(batched(spec.F._lt), tensors_of)
    W = type(spec.F)._wrap(batched(spec.W._lt), tensors_of) if spec.W is not None else None
    bspec = ReduceSpec(F, W, spec.name, spec.axis, spec.K, spec.backend, spec.nodes,
                  spec.options)
    bspec.run = spec.run
    return bspec, moved
