"""LazyTensor on PyTorch tensors, differentiable by ``torch.autograd``.

``kerneltools.torch.LazyTensor``, ``Vi``, ``Vj`` and ``Pm`` take torch tensors
(CPU or CUDA) and have the methods of the NumPy ones; reductions return torch
tensors on the inputs' device and are ``torch.autograd.Function`` s. Their
backward builds the gradient reduction symbolically (the reduction's
gradient rule and the formula's symbolic derivative, exactly as
``LazyTensor.vjp``) for each input that requires a gradient (i-, j- and
parameter variables), and computes it with the same differentiable reductions,
so gradients of gradients work too::

    import torch
    from kerneltools.torch import Vi, Vj, Pm

    x = torch.randn(10_000, 3, requires_grad=True)
    sigma = torch.tensor([0.5], requires_grad=True)
    K = (-Vi(x).sqdist(Vj(x)) / (2 * Pm(sigma) ** 2)).exp()
    loss = (K @ torch.ones(10_000, 1)).sum()
    loss.backward()                       # x.grad, sigma.grad

Zero copy: CPU tensors are read through NumPy views; CUDA tensors through
DLPack as CuPy arrays, on the current torch stream, and results come back
the same way. Python floats are constants (not differentiated); pass a tensor
to ``Pm`` to differentiate with respect to a parameter.
"""

from __future__ import annotations

import contextlib
import inspect

import numpy as np
import torch

from . import lazy as _lazy
from ._deferred import DeferredReduction
from ._keops_options import keep_dims, take_output_options, write_out
from ._lazy_keops import KeopsMethods
from ._reducing import reduce as _reduce_lazy
from ._reduction_methods import reduction_methods
from ._symbolic import (MATMUL_BLOCK, Binding, apply, bindings_of, check_axis,
                        check_ranges, compose, from_parts, lift, merge, new_var,
                        ranges_of, symbols_of)
from .backend import _ops
from .backend._autodiff import forward_reduction, reduction_vjp
from .backend._autodiff import grad as _grad
from .backend._ir import intcst
from .backend.reductions import REDUCTIONS

__all__ = ["LazyTensor", "Vi", "Vj", "Pm", "minimum", "maximum"]

_BINARY = ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
           "__truediv__", "__rtruediv__", "__pow__", "__rpow__", "__lt__", "__le__",
           "__gt__", "__ge__", "__or__", "__ror__", "__eq__", "__ne__")
_UNARY = ("__neg__", "__pos__", "__abs__")


_NUMPY_DTYPES = {torch.float64: np.float64, torch.float32: np.float32,
                 torch.int64: np.int64, torch.int32: np.int32, torch.bool: np.bool_}


def _plain(t: torch.Tensor) -> torch.Tensor:
    """``t`` without its ``torch.func`` wrappers (its value)."""
    while torch._C._functorch.is_functorch_wrapped_tensor(t):
        t = torch._C._functorch.get_unwrapped(t)
    return t


def _view(t: torch.Tensor):
    """A zero-copy array of ``t``'s data: NumPy on the CPU, CuPy on CUDA.

    Under ``torch.func`` transforms (vmap, grad, ...) a tensor is a wrapper
    without accessible data: the view is then a placeholder of its logical
    shape and dtype (no memory), for building formulas; the data are read
    again from the tensors that reach :class:`_Reduce`'s forward.
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


def _to_torch(a, like: torch.Tensor) -> torch.Tensor:
    """An engine output (NumPy or CuPy) as a tensor on ``like``'s device."""
    if isinstance(a, np.ndarray):
        return torch.from_numpy(a).to(like.device)
    return torch.from_dlpack(a)


@contextlib.contextmanager
def _stream(tensors):
    """Run CuPy work on the current torch stream of the tensors' device."""
    cuda = [t for t in tensors if t.is_cuda]
    if not cuda:
        yield
        return
    import cupy

    with cupy.cuda.Device(cuda[0].device.index or 0):
        stream = torch.cuda.current_stream(cuda[0].device)
        with _cupy_stream(cupy, stream):
            yield


def _cupy_stream(cupy, stream):
    """CuPy's view of a torch stream (``Stream.from_external`` where CuPy has
    it: ``ExternalStream`` is deprecated there)."""
    from_external = getattr(cupy.cuda.Stream, "from_external", None)
    if from_external is not None:
        try:
            return from_external(stream)
        except Exception:  # a torch stream without the CUDA stream protocol
            pass
    return cupy.cuda.ExternalStream(stream.cuda_stream)


class LazyTensor:
    """A symbolic ``(N, M, D)`` formula over torch tensors; see the module docstring.

    Parameters are those of :class:`kerneltools.LazyTensor`, with torch tensors
    (or NumPy arrays and numbers) as data.
    """

    def __init__(self, x, axis: int | None = None):
        if isinstance(x, LazyTensor):
            self._lt, self._tensors = x._lt, dict(x._tensors)
            return
        if isinstance(x, torch.Tensor):
            self._lt = _lazy.LazyTensor(_view(x), axis)
            self._tensors = {node: x for node in bindings_of(self._lt)}
        else:
            self._lt = _lazy.LazyTensor(x, axis)
            self._tensors = {}

    @classmethod
    def _wrap(cls, lt, tensors) -> LazyTensor:
        obj = cls.__new__(cls)
        obj._lt = lt
        obj._tensors = {n: t for n, t in tensors.items() if n in bindings_of(lt)}
        return obj

    @staticmethod
    def _unwrap(x):
        """(NumPy-level operand, its tensors) of an operand."""
        if isinstance(x, LazyTensor):
            return x._lt, x._tensors
        if isinstance(x, torch.Tensor):
            p = LazyTensor(x)
            return p._lt, p._tensors
        return x, {}

    def _call(self, method: str, *args, **kwargs):
        tensors = dict(self._tensors)
        unwrapped = []
        for a in args:
            u, t = self._unwrap(a)
            unwrapped.append(u)
            tensors.update(t)
        for k, v in list(kwargs.items()):
            kwargs[k], t = self._unwrap(v)
            tensors.update(t)
        out = getattr(self._lt, method)(*unwrapped, **kwargs)
        return self._wrap(out, tensors) if isinstance(out, _lazy.LazyTensor) else out

    # Symbolic methods and properties: those of the NumPy LazyTensor.
    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        attr = getattr(self._lt, name)
        if not callable(attr):
            return attr
        return lambda *args, **kwargs: self._call(name, *args, **kwargs)

    @property
    def _shape(self) -> tuple:
        return self._lt._shape

    @property
    def backend(self):
        """See :attr:`kerneltools.LazyTensor.backend`."""
        return self._lt.backend

    @backend.setter
    def backend(self, value):
        lt = from_parts(_lazy.LazyTensor, self._lt.formula, bindings_of(self._lt),
                        self._lt.ni, self._lt.nj, ranges=ranges_of(self._lt))
        lt.backend = value
        self._lt = lt

    @property
    def ranges(self):
        """The block-sparsity that reductions (and their gradients) use when not
        given ``ranges=``; see :attr:`kerneltools.LazyTensor.ranges`."""
        return ranges_of(self._lt)

    @ranges.setter
    def ranges(self, value):
        self._lt = self._lt.with_ranges(check_ranges(value))

    # ``==`` builds a formula (below), so hashing stays by identity.
    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"kerneltools.torch.{self._lt!r}"

    def __bool__(self):
        raise TypeError("the truth value of a LazyTensor is undefined")

    def __getitem__(self, k):
        return self._call("__getitem__", k)

    def t(self) -> LazyTensor:
        """Swap the roles of i and j (the same tensors, so gradients flow)."""
        out = self._lt.t()
        # t() makes new variables bound to the same Binding objects
        old = {id(b): n for n, b in bindings_of(self._lt).items()}
        tensors = {new: self._tensors[old[id(b)]] for new, b in bindings_of(out).items()
                   if old.get(id(b)) in self._tensors}
        return self._wrap(out, tensors)

    @property
    def T(self) -> LazyTensor:
        return self.t()

    # -- reductions ------------------------------------------------------------
    # sum, logsumexp, min, Kmin, ...: the methods of the reductions' registry
    # (``Reduction.methods``), installed below the class; they call _reduce.

    def __matmul__(self, b, **options):
        """``K @ b``: ``sum_j K_ij b_j`` for a scalar formula K and a tensor b
        (M,), (M, E) or batched (B..., M, E); ``K.__matmul__(b, **options)``
        takes the reductions' keywords, as in pykeops."""
        return self.matmul(b, **options)

    def matmul(self, b, *, backend=None, **options):
        """``K @ b`` on ``backend``, with the reductions' keywords."""
        if self.dim != 1:
            raise ValueError(f"K @ b needs a scalar formula K, got dimension {self.dim}")
        if not isinstance(b, torch.Tensor):
            b = torch.as_tensor(np.asarray(b))
        if b.ndim >= 3 or self.batch:  # batched: (B..., M, E) or (M, E)
            bj = b if b.ndim >= 2 else b[:, None]
            out = (self * Vj(bj))._reduce("Sum", 1, backend=backend, **options)
            return out[..., 0] if b.ndim == 1 else out
        b2 = b.reshape(b.shape[0], -1)
        cols = [
            (self * Vj(b2[:, c0:c0 + MATMUL_BLOCK]))._reduce("Sum", 1, backend=backend,
                                                             **options)
            for c0 in range(0, b2.shape[1], MATMUL_BLOCK)
        ]
        out = cols[0] if len(cols) == 1 else torch.cat(cols, dim=1)
        return out[:, 0] if b.ndim == 1 else out

    def matvec(self, v):
        """``K @ v`` (pykeops' alias)."""
        return self @ v

    def rmatvec(self, v):
        """``K.T @ v`` (pykeops' alias)."""
        return self.T @ v

    def _apply(self, op: str) -> LazyTensor:
        return self._wrap(apply(self._lt, op), self._tensors)

    def _compose(self, fn, *others) -> LazyTensor:
        """A composite (a function of formula nodes) of ``self`` and ``others``."""
        tensors, parts = dict(self._tensors), []
        for o in others:
            u, t = self._unwrap(o)
            parts.append(u)
            tensors.update(t)
        return self._wrap(compose(self._lt, fn, *parts), tensors)

    def _bind_symbols(self, arrays: dict) -> LazyTensor:
        """This formula with its symbolic variables bound to ``arrays``
        ({pykeops index: tensor}); gradients flow to the tensors."""
        tensors = {k: torch.as_tensor(v) for k, v in arrays.items()}
        out = self._lt._bind_symbols({k: _view(t) for k, t in tensors.items()})
        mine = dict(self._tensors)
        for node, b in bindings_of(self._lt).items():
            if b.symbol is not None:
                mine[node] = tensors[b.symbol]
        return self._wrap(out, mine)

    def solve(self, b, alpha: float = 1e-10, *, tol: float = 1e-6, max_iter=None,
              backend=None, **options):
        """Solve ``(K + alpha I) a = b`` by conjugate gradients; ``b`` a tensor
        (N,) or (N, E) (or an i-variable LazyTensor), the result a tensor,
        differentiable with respect to ``b`` and to K's tensors (implicit
        differentiation: one more solve in the backward pass). See
        :meth:`kerneltools.LazyTensor.solve`."""
        if isinstance(b, LazyTensor):
            if b._lt.formula.op != "Var" or b._lt.formula.cat != "i" or not b._tensors:
                raise TypeError("solve: 'b' must be a tensor or an i-variable LazyTensor")
            b = b._tensors[b._lt.formula]
        if not isinstance(b, torch.Tensor):
            b = torch.as_tensor(np.asarray(b))
        spec = _SolveSpec(self, alpha, dict(tol=tol, max_iter=max_iter, backend=backend,
                                            **options))
        nodes = list(self._tensors)
        return _Solve.apply(spec, b, *[self._tensors[n] for n in nodes])

    def _reduce(self, name, axis, *, weight=None, K=1, backend=None, **options):
        """The reduction ``name`` over ``axis`` (0: over i, 1: over j); the
        ``options`` (``ranges=``, ...) serve its backward too. pykeops'
        ``call=False`` (or symbolic variables) returns a callable, ``out=`` a
        tensor to copy the result into (not while gradients are tracked),
        ``keepdim=True`` keeps the reduced axis."""
        axis = check_axis(axis)
        call = options.pop("call", True)
        if backend is None:
            backend = self._lt.backend
        if not call or symbols_of(self._lt, self._unwrap(weight)[0]):
            return DeferredReduction(self, name, axis, weight, K, backend, options)
        options, out, keepdim = take_output_options(options)
        W = None
        if weight is not None:
            u, t = self._unwrap(weight)
            W = LazyTensor._wrap(lift(_lazy.LazyTensor, u), t)
        tensors = dict(self._tensors)
        if W is not None:
            tensors.update(W._tensors)
        nodes = list(tensors)
        if options.get("ranges") is None:
            options.pop("ranges", None)
            if ranges_of(self._lt) is not None:
                options["ranges"] = ranges_of(self._lt)
        spec = _Spec(self, W, name, axis, K, backend, nodes, options)
        args = [tensors[n] for n in nodes]
        red = REDUCTIONS[name]
        grad = red.surrogate is not None and torch.is_grad_enabled() and any(
            t.requires_grad for t in args)
        spec.run = forward_reduction(name) if grad else name
        outs = _Reduce.apply(spec, *args)
        res = outs[0] if red.n_outputs == 1 else outs[:red.n_outputs]
        return _finish(res, spec, len(self.batch), out, keepdim)


def _finish(res, spec, nbatch, out, keepdim):
    """``keepdim`` and ``out`` applied to a reduction's tensors."""
    if keepdim:
        k_outputs = REDUCTIONS[spec.name].uses_k

        def shaped(r):
            return keep_dims(r, spec.axis, nbatch, k_outputs, lambda a, s: a.reshape(s))

        res = tuple(map(shaped, res)) if isinstance(res, tuple) else shaped(res)
    if out is None:
        return res
    if isinstance(res, tuple):
        raise TypeError(f"'out' is for reductions with one output; this one has {len(res)}")
    if res.requires_grad:
        raise ValueError("'out' cannot be used while gradients are tracked (the result "
                         "would leave the autograd graph); drop 'out' or use torch.no_grad()")

    def copy(o, r):
        with torch.no_grad():
            o.copy_(r)

    return write_out(out, res, copy)


for _method, _fn in reduction_methods().items():
    setattr(LazyTensor, _method, _fn)
# pykeops' generic reduction and the static concatenations run on this class
# (forwarded to the NumPy LazyTensor, they would leave the autograd graph).
LazyTensor.reduction = KeopsMethods.reduction
LazyTensor.concatenate = staticmethod(KeopsMethods.concatenate)
LazyTensor.cat = staticmethod(KeopsMethods.cat)


def _forward_method(name):
    def method(self, *args, **kwargs):
        return self._call(name, *args, **kwargs)
    method.__name__ = name
    method.__doc__ = getattr(_lazy.LazyTensor, name).__doc__
    return method


def _forward_property(name):
    def get(self):
        v = getattr(self._lt, name)
        return self._wrap(v, self._tensors) if isinstance(v, _lazy.LazyTensor) else v
    return property(get, doc=getattr(_lazy.LazyTensor, name).__doc__)


# The other public methods and properties of the NumPy LazyTensor, on the
# class (so that unbound calls work, as in pykeops: LazyTensor.exp(x)).
for _name in dir(_lazy.LazyTensor):
    if _name.startswith("_") or hasattr(LazyTensor, _name):
        continue
    if isinstance(inspect.getattr_static(_lazy.LazyTensor, _name), property):
        setattr(LazyTensor, _name, _forward_property(_name))
    elif callable(getattr(_lazy.LazyTensor, _name)):
        setattr(LazyTensor, _name, _forward_method(_name))


def _forward_binary(name):
    def op(self, other):
        return self._call(name, other)
    op.__name__ = name
    return op


for _name in _BINARY + _UNARY:
    setattr(LazyTensor, _name, _forward_binary(_name) if _name in _BINARY
            else (lambda n: lambda self: self._call(n))(_name))


class _Spec:
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
        b = {n: (Binding(_view(data[n]).reshape(v.array.shape), v.weak, v.batch)
                 if n in data else v) for n, v in bindings_of(lt).items()}
        return from_parts(_lazy.LazyTensor, lt.formula, b, lt.ni, lt.nj,
                          ranges=ranges_of(lt))

    return bound(spec.F._lt), (bound(spec.W._lt) if spec.W is not None else None)


class _Reduce(torch.autograd.Function):
    """A reduction; its backward is a differentiable reduction of the gradient
    formula. ``forward`` / ``setup_context`` / ``vmap`` as ``torch.func``
    requires: the data are read from the tensors that forward receives."""

    @staticmethod
    def forward(spec, *tensors):
        F, W = _rebind(spec, tensors)
        spec.bound = F, tensors[:1]  # the data, for jvp
        like = tensors[0] if tensors else torch.zeros(())
        with _stream(tensors):
            outs = _reduce_lazy(F, spec.run, spec.axis, weight=W, K=spec.K,
                                backend=spec.backend, **spec.options)
        outs = outs if isinstance(outs, tuple) else (outs,)
        return tuple(_to_torch(o, like) for o in outs)

    @staticmethod
    def setup_context(ctx, inputs, output):
        spec, tensors = inputs[0], inputs[1:]
        ctx.spec = spec
        ctx.mark_non_differentiable(*[o for o in output if not o.is_floating_point()])
        if REDUCTIONS[spec.name].surrogate is None:
            ctx.mark_non_differentiable(*output)
        ctx.save_for_backward(*tensors, *output)

    @staticmethod
    def jvp(ctx, _spec_tangent, *tangents):
        """Forward mode (``torch.func.jvp``) of Sum and LogSumExp reductions:
        the Sum of the formula's differential applied to the tangents
        (weighted by the soft-max ``exp(F - lse)`` for LogSumExp)."""
        spec = ctx.spec
        if spec.name not in ("Sum", "LogSumExp") or spec.W is not None:
            raise NotImplementedError(
                f"forward-mode differentiation (torch.func.jvp) is implemented for Sum "
                f"and LogSumExp reductions only, not {spec.name}; use reverse mode "
                "(torch.func.grad, vjp, jacrev)")
        # The data as forward saw them; the tangents' values, read with the
        # transforms off (the result is not differentiated further here).
        F, tensors = spec.bound
        with torch._C._DisableFuncTorch():
            tangents = [None if t is None else _plain(t) for t in tangents]
            tangents = [None if t is None or t._is_zerotensor() else t for t in tangents]
            return _sum_jvp(spec, F, tensors, tangents)

    @staticmethod
    def vmap(info, in_dims, spec, *tensors):
        """``torch.vmap``: the mapped axis becomes a leading batch axis of the
        problem (batch axes are reduced block-diagonally in one call)."""
        bspec, moved = _batched_spec(spec, in_dims[1:], tensors, info.batch_size)
        outs = _Reduce.apply(bspec, *moved)
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
        F = LazyTensor._wrap(_rebind(spec, tensors)[0], dict(zip(spec.nodes, tensors)))
        W = None
        if spec.W is not None:
            W = LazyTensor._wrap(_rebind(spec, tensors)[1], dict(zip(spec.nodes, tensors)))
        axis = spec.axis
        if spec.run != forward_reduction(spec.name):
            # the forward ran without the outputs that the gradient needs (under
            # a transform that hid requires_grad): run them now
            res = F._reduce(forward_reduction(spec.name), axis, weight=W, K=spec.K,
                            backend=spec.backend, **spec.options)
            outs = list(res) if isinstance(res, tuple) else [res]
        if red.needs_lse:
            outs.append(F._reduce("LogSumExp", axis, backend=spec.backend, **spec.options))
        out_cat = "i" if axis == 1 else "j"
        nb = len(F.batch)
        batch, n = tuple(outs[0].shape[:nb]), outs[0].shape[nb]
        # The forward outputs and the incoming gradient enter the gradient
        # formula as variables of the output index (tensors: tracked by autograd).
        real = torch.float64 if F.dtype == np.float64 else torch.float32
        arrays = [o.reshape(batch + (n, -1)).to(real) for o in outs]
        arrays.append(gin.reshape(batch + (n, -1)).to(outs[0].dtype))
        extra = {new_var(out_cat, a.shape[-1]): a.contiguous() for a in arrays}
        *out_nodes, gnode = extra
        bindings, ni, nj = merge([F._lt] + ([W._lt] if W is not None else []))
        bindings = dict(bindings)
        for node, t in extra.items():
            bindings[node] = Binding(_view(t), batch=batch)
        tensor_of = dict(zip(spec.nodes, tensors))
        tensor_of.update(extra)

        # The same ranges as the forward pass: a gradient reduced over the
        # other index reads their transposed half (ranges_j, slices_j, redranges_i).
        def reduce(G, over):
            Gt = LazyTensor._wrap(from_parts(_lazy.LazyTensor, G, bindings, ni, nj), tensor_of)
            return Gt._reduce("Sum", over, backend=spec.backend, **spec.options)

        # Parameters ride with the output index's variables and are summed
        # over its rows (see reduction_vjp).
        wanted = [k for k in range(n_in) if ctx.needs_input_grad[k + 1]]
        gs = reduction_vjp(spec.name, F._lt.formula, W._lt.formula if W is not None else None,
                           [spec.nodes[k] for k in wanted], out_nodes, gnode, axis,
                           reduce=reduce)
        grads = [None] * (n_in + 1)
        for k, g in zip(wanted, gs):
            node = spec.nodes[k]
            t = tensor_of[node]
            # batch axes that the variable broadcast over are summed
            shape = bindings_of(F._lt if node in bindings_of(F._lt) else W._lt)[node].array.shape
            grads[k + 1] = g.sum_to_size(shape).reshape(t.shape).to(t.dtype)
        return tuple(grads)


class _SolveSpec:
    """A solve's formula, shift and options (kept on the autograd node)."""

    def __init__(self, K, alpha, options):
        self.F, self.W, self.alpha, self.options = K, None, alpha, options
        self.nodes = list(K._tensors)


class _Solve(torch.autograd.Function):
    """``a = (K + alpha I)^-1 b`` by conjugate gradients. Backward (implicit
    differentiation, K symmetric): ``lambda = (K + alpha I)^-1 g``; the
    gradient is ``lambda`` for b and ``-d/dtheta (lambda^T K a)`` for K's
    tensors, the latter through the differentiable reduction ``K @ a``."""

    @staticmethod
    def forward(spec, b, *tensors):
        K, _ = _rebind(spec, tensors)
        with _stream((b,) + tensors):
            a = K.solve(_view(b), spec.alpha, **spec.options)
        return _to_torch(a, b)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.spec = inputs[0]
        ctx.save_for_backward(*inputs[2:], output)

    @staticmethod
    def backward(ctx, g):
        spec = ctx.spec
        *tensors, a = ctx.saved_tensors
        K, _ = _rebind(spec, tensors)
        with _stream(tensors):
            lam = _to_torch(K.solve(_view(g.contiguous()), spec.alpha, **spec.options), g)
        grads = [None, lam if ctx.needs_input_grad[1] else None] + [None] * len(tensors)
        wanted = [k for k in range(len(tensors)) if ctx.needs_input_grad[k + 2]]
        if wanted:
            with torch.enable_grad():
                ts = [t.detach().requires_grad_(k in wanted) for k, t in enumerate(tensors)]
                Kt = LazyTensor._wrap(K, dict(zip(spec.nodes, ts)))
                opts = {k: v for k, v in spec.options.items()
                        if k not in ("tol", "max_iter", "callback")}
                s = (lam.detach() * Kt.matmul(a.detach(), **opts)).sum()
                gs = torch.autograd.grad(-s, [ts[k] for k in wanted])
            for k, gk in zip(wanted, gs):
                grads[k + 2] = gk
        return tuple(grads)


def _sum_jvp(spec, F, tensors, tangents):
    """The tangent of ``Sum(F)``: ``Sum(sum_v dF/dv . t_v)``, each differential
    written as ``d/du <grad(F, v, u), t_v>`` (linear in the placeholder u);
    of ``LogSumExp(F)``: the same, weighted by ``exp(F - lse)``."""
    bindings = dict(bindings_of(F))
    u = new_var("p", F.formula.dim)
    bindings[u] = Binding(np.zeros(F.formula.dim, dtype=F.dtype))
    J = None
    for node, t in zip(spec.nodes, tangents):
        if t is None or node not in bindings_of(F):
            continue
        b = bindings_of(F)[node]
        tv = new_var(node.cat, node.dim)
        bindings[tv] = Binding(_view(t.contiguous()).reshape(b.array.shape), b.weak, b.batch)
        d = _grad(_ops.dot(_grad(F.formula, node, u), tv), u, intcst(1, 1))
        J = d if J is None else _ops.make("Add", J, d)
    if J is None:
        return (None,) * len(REDUCTIONS[spec.run].int_outputs)
    like = tensors[0] if tensors else torch.zeros(())
    if spec.name == "LogSumExp":  # d lse = sum_j softmax_ij dF_ij
        with _stream(tensors):
            lse = _reduce_lazy(F, "LogSumExp", spec.axis, backend=spec.backend,
                               **spec.options)
        node = new_var("i" if spec.axis == 1 else "j", lse.shape[-1])
        nb = len(F.batch)
        bindings[node] = Binding(lse, batch=tuple(lse.shape[:nb]))
        J = _ops.make("Mul", _ops.make("Exp", _ops.make("Sub", F.formula, node)), J)
    Jt = from_parts(_lazy.LazyTensor, J, bindings, F.ni, F.nj, ranges=ranges_of(F))
    with _stream(tensors):
        out = _reduce_lazy(Jt, "Sum", spec.axis, backend=spec.backend, **spec.options)
    return (_to_torch(out, like),)


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
            out[n] = Binding(_view(mapped[n]).reshape(shape), b.weak, (size,) + pad + b.batch)
        return from_parts(_lazy.LazyTensor, lt.formula, out, lt.ni, lt.nj)

    tensors_of = dict(zip(spec.nodes, moved))
    F = LazyTensor._wrap(batched(spec.F._lt), tensors_of)
    W = LazyTensor._wrap(batched(spec.W._lt), tensors_of) if spec.W is not None else None
    bspec = _Spec(F, W, spec.name, spec.axis, spec.K, spec.backend, spec.nodes,
                  spec.options)
    bspec.run = spec.run
    return bspec, moved


def Vi(x, dim: int | None = None) -> LazyTensor:
    """A variable indexed by i from an (N, D) or (N,) tensor; (B..., N, D):
    with leading batch axes. ``Vi(k, D)``: pykeops' symbolic variable of
    index k, its tensor given when the reduction is called."""
    return _indexed(x, dim, 0)


def Vj(x, dim: int | None = None) -> LazyTensor:
    """A variable indexed by j from an (M, D) or (M,) tensor; (B..., M, D):
    with leading batch axes. ``Vj(k, D)``: a symbolic variable (see :func:`Vi`)."""
    return _indexed(x, dim, 1)


def _indexed(x, dim, cat: int) -> LazyTensor:
    if dim is not None:
        return LazyTensor((x, dim, cat))
    x = torch.as_tensor(x) if not isinstance(x, torch.Tensor) else x
    if x.ndim >= 3:  # batch axes: (B..., N, 1, D) or (B..., 1, M, D)
        return LazyTensor(x.unsqueeze(-2 if cat == 0 else -3))
    return LazyTensor(x.reshape(x.shape[0], -1), axis=cat)


def Pm(p, dim: int | None = None) -> LazyTensor:
    """A parameter (shared by every pair) from a 1-D tensor or a number;
    ``Pm(k, D)``: a symbolic parameter (see :func:`Vi`)."""
    if dim is not None:
        return LazyTensor((p, dim, 2))
    if isinstance(p, torch.Tensor):
        return LazyTensor(p.reshape(-1))
    return LazyTensor._wrap(_lazy.Pm(p), {})


def minimum(a, b) -> LazyTensor:
    """Element-wise minimum of two formulas (NaN propagates)."""
    return _binary_fn(a, b, "minimum")


def maximum(a, b) -> LazyTensor:
    """Element-wise maximum of two formulas (NaN propagates)."""
    return _binary_fn(a, b, "maximum")


def _binary_fn(a, b, fn):
    ua, ta = LazyTensor._unwrap(a)
    ub, tb = LazyTensor._unwrap(b)
    out = getattr(_lazy, fn)(ua, ub)
    return LazyTensor._wrap(out, {**ta, **tb})
