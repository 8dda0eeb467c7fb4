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
from ._reducing import reduce as _reduce_lazy
from ._reduction_methods import reduction_methods
from ._symbolic import (MATMUL_BLOCK, Binding, apply, bindings_of, check_axis,
                        check_ranges, from_parts, lift, merge, new_var, ranges_of)
from .backend._autodiff import forward_reduction, reduction_vjp
from .backend.reductions import REDUCTIONS

__all__ = ["LazyTensor", "Vi", "Vj", "Pm", "minimum", "maximum"]

_BINARY = ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
           "__truediv__", "__rtruediv__", "__pow__", "__rpow__", "__lt__", "__le__",
           "__gt__", "__ge__", "__or__", "__ror__", "__eq__", "__ne__")
_UNARY = ("__neg__", "__pos__", "__abs__")


def _view(t: torch.Tensor):
    """A zero-copy array of ``t``'s data: NumPy on the CPU, CuPy on CUDA."""
    t = t.detach()
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

    def __matmul__(self, b):
        """``K @ b``: ``sum_j K_ij b_j`` for a scalar formula K and a tensor b (M,) or (M, E)."""
        if not isinstance(b, torch.Tensor):
            b = torch.as_tensor(np.asarray(b))
        b2 = b.reshape(b.shape[0], -1)
        cols = [
            (self * Vj(b2[:, c0:c0 + MATMUL_BLOCK]))._reduce("Sum", 1)
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

    def _reduce(self, name, axis, *, weight=None, K=1, backend=None, **options):
        """The reduction ``name`` over ``axis`` (0: over i, 1: over j); the
        ``options`` (``ranges=``, ...) serve its backward too."""
        axis = check_axis(axis)
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
        outs = _Reduce.apply(spec, *[tensors[n] for n in nodes])
        return outs


for _method, _fn in reduction_methods().items():
    setattr(LazyTensor, _method, _fn)


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


class _Reduce(torch.autograd.Function):
    """A reduction; its backward is a differentiable reduction of the gradient formula."""

    @staticmethod
    def forward(ctx, spec, *tensors):
        red = REDUCTIONS[spec.name]
        differentiable = red.surrogate is not None and any(ctx.needs_input_grad[1:])
        run = forward_reduction(spec.name) if differentiable else spec.name
        like = tensors[0] if tensors else torch.zeros(())
        with _stream(tensors):
            outs = _reduce_lazy(spec.F._lt, run, spec.axis,
                                weight=spec.W._lt if spec.W is not None else None,
                                K=spec.K, backend=spec.backend, **spec.options)
        outs = outs if isinstance(outs, tuple) else (outs,)
        outs = tuple(_to_torch(o, like) for o in outs)
        n_user = REDUCTIONS[spec.name].n_outputs
        ctx.spec = spec
        ctx.n_user = n_user
        ints = [o for o in outs if not o.is_floating_point()]
        ctx.mark_non_differentiable(*ints)
        if differentiable:
            ctx.save_for_backward(*tensors, *outs)
        else:
            ctx.mark_non_differentiable(*outs)
        return outs[0] if n_user == 1 else outs[:n_user]

    @staticmethod
    def backward(ctx, *gouts):
        spec = ctx.spec
        saved = ctx.saved_tensors
        n_in = len(spec.nodes)
        tensors, outs = saved[:n_in], list(saved[n_in:])
        red = REDUCTIONS[spec.name]
        gin = gouts[0]
        if gin is None:
            return (None,) * (n_in + 1)
        F, W, axis = spec.F, spec.W, spec.axis
        if red.needs_lse:
            outs.append(F._reduce("LogSumExp", axis, backend=spec.backend, **spec.options))
        out_cat = "i" if axis == 1 else "j"
        n = outs[0].shape[0]
        # The forward outputs and the incoming gradient enter the gradient
        # formula as variables of the output index (tensors: tracked by autograd).
        real = torch.float64 if F.dtype == np.float64 else torch.float32
        arrays = [o.reshape(n, -1).to(real) for o in outs]
        arrays.append(gin.reshape(n, -1).to(outs[0].dtype))
        extra = {new_var(out_cat, a.shape[1]): a.contiguous() for a in arrays}
        *out_nodes, gnode = extra
        bindings, ni, nj = merge([F._lt] + ([W._lt] if W is not None else []))
        bindings = dict(bindings)
        for node, t in extra.items():
            bindings[node] = Binding(_view(t))
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
            t = tensor_of[spec.nodes[k]]
            grads[k + 1] = g.reshape(t.shape).to(t.dtype)
        return tuple(grads)


def Vi(x) -> LazyTensor:
    """A variable indexed by i from an (N, D) or (N,) tensor."""
    x = torch.as_tensor(x) if not isinstance(x, torch.Tensor) else x
    return LazyTensor(x.reshape(x.shape[0], -1), axis=0)


def Vj(x) -> LazyTensor:
    """A variable indexed by j from an (M, D) or (M,) tensor."""
    x = torch.as_tensor(x) if not isinstance(x, torch.Tensor) else x
    return LazyTensor(x.reshape(x.shape[0], -1), axis=1)


def Pm(p) -> LazyTensor:
    """A parameter (shared by every pair) from a 1-D tensor or a number."""
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


from ._samples_loss import SamplesLoss  # noqa: E402  (GeomLoss's losses, issue 27)
