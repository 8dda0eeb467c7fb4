"""LazyTensor on JAX arrays: reductions as XLA custom calls, with ``jit``,
``grad`` (to any order) and ``vmap``.

``kerneltools.jax.LazyTensor``, ``Vi``, ``Vj`` and ``Pm`` take ``jax.Array`` s
and have the methods of the NumPy ones (the same formulas, built by the
NumPy-level LazyTensor that this one wraps); reductions return
``jax.Array`` s::

    import jax, jax.numpy as jnp
    from kerneltools.jax import Vi, Vj

    def loss(x, y, b):
        K = (-Vi(x).sqdist(Vj(y)) / 2).exp()
        return jnp.sum((K @ b) ** 2)

    g = jax.jit(jax.grad(loss))(x, y, b)   # the N x M matrix is never stored

A reduction is a JAX primitive (:mod:`._reduce`): on the CPU its kernel is
the generated C kernel called by XLA (``jax.ffi``: a custom call, no host
round trip), compiled once per formula and dtype (the XLA program once per
shape); its JVP is a reduction linear in the tangents (the symbolic
directional derivative) whose transpose is the symbolic gradient reduction,
so forward and reverse mode work to any order (``jvp``, ``jacfwd``,
``grad``, ``jacrev``, Hessian-vector products as ``jvp`` of ``grad``);
``jax.vmap``, and leading batch axes of the data
(``Vi`` of a (B..., N, D) array), map onto the custom call's batch loop.
Python floats are constants; pass an array to ``Pm`` to differentiate with
respect to a parameter. :meth:`LazyTensor.solve` is conjugate gradients with
implicit differentiation (:mod:`._solve`); :func:`kernel` gives the kernels
of :mod:`kerneltools.kernels` (scikit-learn's GP kernels too) on JAX arrays,
their hyperparameters differentiable. What the custom call does not serve
(``ranges=``, ``backend="numpy"``, pykeops' reduction keywords, arrays on a
GPU) runs on the engine through ``jax.pure_callback``.

What lives here: the JAX LazyTensor, its reduction (:mod:`._reduce`) and
solve (:mod:`._solve`). What it may import: the engine (its IR, autodiff,
plans, and the CPU backend's XLA entry points
:mod:`kerneltools.backend.cpu._xla`), :mod:`kerneltools.lazy` and its
symbolic core (:mod:`kerneltools.lazy._symbolic`,
:mod:`kerneltools.lazy._reducing`), :mod:`kerneltools.kernels`; never
:mod:`kerneltools.torch` or :mod:`kerneltools.estimators`.
"""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp

from .. import lazy as _lazy
from ..backend.reductions import REDUCTIONS
from ..kernels import make_kernel
from ..lazy._args import check_axis
from ..lazy._methods import reduction_methods
from ..lazy._symbolic import (
    MATMUL_BLOCK,
    apply,
    batch_of,
    bindings_of,
    check_ranges,
    compose,
    lift,
    merge,
    ranges_of,
)
from . import _docs
from ._reduce import Spec, placeholder, reduce, reduce_batched
from ._solve import solve as _solve

__all__ = ["LazyTensor", "Pm", "Vi", "Vj", "kernel", "maximum", "minimum"]

_BINARY = ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
           "__truediv__", "__rtruediv__", "__pow__", "__rpow__", "__lt__", "__le__",
           "__gt__", "__ge__", "__or__", "__ror__", "__eq__", "__ne__")
_UNARY = ("__neg__", "__pos__", "__abs__")


def _as_float(x):
    """``x`` as a jax array of a floating dtype (integers: JAX's default float)."""
    x = jnp.asarray(x)
    return x if jnp.issubdtype(x.dtype, jnp.floating) else x.astype(float)


class LazyTensor:  # docstring: _docs.LAZY_TENSOR (set at the end)
    __array_ufunc__ = None  # NumPy arrays on the left defer to our operators

    def __init__(self, x, axis: int | None = None):
        if isinstance(x, LazyTensor):
            self._lt, self._arrays = x._lt, dict(x._arrays)
            return
        if isinstance(x, jax.Array):
            x = _as_float(x)
            self._lt = _lazy.LazyTensor(placeholder(x), axis)
            self._arrays = {node: jnp.reshape(x, b.array.shape)
                            for node, b in bindings_of(self._lt).items()}
        else:
            self._lt = _lazy.LazyTensor(x, axis)
            self._arrays = {}

    @classmethod
    def _wrap(cls, lt, arrays) -> LazyTensor:
        obj = object.__new__(cls)
        obj._lt = lt
        obj._arrays = {n: a for n, a in arrays.items() if n in bindings_of(lt)}
        return obj

    @staticmethod
    def _unwrap(x):
        """(NumPy-level operand, its arrays) of an operand."""
        if isinstance(x, LazyTensor):
            return x._lt, x._arrays
        if isinstance(x, jax.Array):
            p = LazyTensor(x)
            return p._lt, p._arrays
        return x, {}

    def _call(self, method: str, *args, **kwargs):
        arrays = dict(self._arrays)
        unwrapped = []
        for a in args:
            u, t = self._unwrap(a)
            unwrapped.append(u)
            arrays.update(t)
        for k, v in list(kwargs.items()):
            kwargs[k], t = self._unwrap(v)
            arrays.update(t)
        out = getattr(self._lt, method)(*unwrapped, **kwargs)
        return self._wrap(out, arrays) if isinstance(out, _lazy.LazyTensor) else out

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        attr = getattr(self._lt, name)
        if not callable(attr):
            return attr
        return lambda *args, **kwargs: self._call(name, *args, **kwargs)

    @property
    def ranges(self):
        """The block-sparsity that reductions use when not given ``ranges=``."""
        return ranges_of(self._lt)

    @ranges.setter
    def ranges(self, value):
        self._lt = self._lt.with_ranges(check_ranges(value))

    __hash__ = object.__hash__  # ``==`` builds a formula

    def __repr__(self) -> str:
        return f"kerneltools.jax.{self._lt!r}"

    def __bool__(self):
        raise TypeError("the truth value of a LazyTensor is undefined")

    def __getitem__(self, k):
        return self._call("__getitem__", k)

    def t(self) -> LazyTensor:
        """Swap the roles of i and j (the same arrays, so gradients flow)."""
        out = self._lt.t()
        old = {id(b): n for n, b in bindings_of(self._lt).items()}
        arrays = {new: self._arrays[old[id(b)]] for new, b in bindings_of(out).items()
                  if old.get(id(b)) in self._arrays}
        return self._wrap(out, arrays)

    @property
    def T(self) -> LazyTensor:
        return self.t()

    def _apply(self, op: str) -> LazyTensor:
        return self._wrap(apply(self._lt, op), self._arrays)

    def _compose(self, fn, *others) -> LazyTensor:
        arrays, parts = dict(self._arrays), []
        for o in others:
            u, t = self._unwrap(o)
            parts.append(u)
            arrays.update(t)
        return self._wrap(compose(self._lt, fn, *parts), arrays)

    # -- reductions ------------------------------------------------------------
    def __matmul__(self, b, **options):
        """``K @ b``: ``sum_j K_ij b_j`` for a scalar formula K and an array b
        (M,), (M, E) or batched (B..., M, E); ``K.__matmul__(b, **options)``
        takes the reductions' keywords, as in pykeops."""
        return self.matmul(b, **options)

    def matmul(self, b, *, backend=None, **options):
        """``K @ b`` on ``backend``, with the reductions' keywords."""
        if self.dim != 1:
            raise ValueError(f"K @ b needs a scalar formula K, got dimension {self.dim}")
        b = _as_float(b)
        if b.ndim >= 3 or self.batch:  # batched: (B..., M, E) or (M, E)
            bj = b if b.ndim >= 2 else b[:, None]
            out = (self * Vj(bj))._reduce("Sum", 1, backend=backend, **options)
            return out[..., 0] if b.ndim == 1 else out
        b2 = b.reshape(b.shape[0], -1)
        cols = [(self * Vj(b2[:, c0:c0 + MATMUL_BLOCK]))._reduce(
            "Sum", 1, backend=backend, **options)
            for c0 in range(0, b2.shape[1], MATMUL_BLOCK)]
        out = cols[0] if len(cols) == 1 else jnp.concatenate(cols, axis=1)
        return out[:, 0] if b.ndim == 1 else out

    def solve(self, b, alpha: float = 1e-10, *, tol: float = 1e-6, max_iter=None,
              backend=None, **options):
        """Solve ``(K + alpha I) a = b`` by conjugate gradients (K symmetric,
        positive); ``b`` (N,) or (N, E). Differentiable with respect to ``b``
        and K's arrays (implicit differentiation: see :mod:`._solve`)."""
        nodes = list(self._arrays)

        def matvec(arrays, v):
            K = LazyTensor._wrap(self._lt, dict(zip(nodes, arrays)))
            return K.matmul(v, backend=backend, **options)

        return _solve(self, _as_float(b), alpha, tol=tol, max_iter=max_iter,
                      matvec=matvec)

    def _reduce(self, name, axis, *, weight=None, K=1, backend=None, **options):
        """The reduction ``name`` over ``axis`` (0: over i, 1: over j); the
        ``options`` (``ranges=``, ...) serve its gradient too."""
        axis = check_axis(axis)
        keepdim = options.pop("keepdim", False)
        if backend is None:
            backend = self._lt.backend
        W = None
        arrays = dict(self._arrays)
        if weight is not None:
            u, t = self._unwrap(weight)
            W = LazyTensor._wrap(lift(_lazy.LazyTensor, u), t)
            arrays.update(W._arrays)
        if options.get("ranges") is None:
            options.pop("ranges", None)
            if ranges_of(self._lt) is not None:
                options["ranges"] = ranges_of(self._lt)
        nodes = list(arrays)
        spec = Spec(self._lt, W._lt if W is not None else None, name, axis, K, backend,
                    nodes, options)
        batch = batch_of(merge([spec.F] + ([spec.W] if W is not None else []))[0]
                         .values())
        if batch:  # leading batch axes: jax.vmap over them
            if options.get("ranges") is not None:
                raise ValueError("ranges= cannot be combined with batch axes")
            outs = reduce_batched(spec, [arrays[n] for n in nodes], batch)
        else:
            outs = reduce(spec, *[arrays[n] for n in nodes])
        red = REDUCTIONS[name]
        res = outs[0] if red.n_outputs == 1 else tuple(outs[:red.n_outputs])
        if keepdim:
            res = (jax.tree.map(lambda o: jnp.expand_dims(o, 1 - axis), res))
        return res


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
        return self._wrap(v, self._arrays) if isinstance(v, _lazy.LazyTensor) else v
    return property(get, doc=getattr(_lazy.LazyTensor, name).__doc__)


# The other public methods and properties of the NumPy LazyTensor, on the class.
for _name in dir(_lazy.LazyTensor):
    if _name.startswith("_") or hasattr(LazyTensor, _name):
        continue
    if isinstance(inspect.getattr_static(_lazy.LazyTensor, _name), property):
        setattr(LazyTensor, _name, _forward_property(_name))
    elif callable(getattr(_lazy.LazyTensor, _name)):
        setattr(LazyTensor, _name, _forward_method(_name))


def _forward_operator(name):
    if name in _UNARY:
        def op(self):
            return self._call(name)
    else:
        def op(self, other):
            return self._call(name, other)
    op.__name__ = name
    return op


for _name in _BINARY + _UNARY:
    setattr(LazyTensor, _name, _forward_operator(_name))


def Vi(x) -> LazyTensor:
    return _indexed(x, 0)


def Vj(x) -> LazyTensor:
    return _indexed(x, 1)


def _indexed(x, cat: int) -> LazyTensor:
    x = _as_float(x)
    if x.ndim >= 3:  # batch axes: (B..., N, 1, D) or (B..., 1, M, D)
        return LazyTensor(jnp.expand_dims(x, -2 if cat == 0 else -3))
    if x.ndim == 0:
        raise ValueError(f"{'Vj' if cat else 'Vi'}: 'x' must be an (N, D) or (N,) "
                         "array, got a scalar (use Pm for a parameter)")
    return LazyTensor(x[:, None] if x.ndim == 1 else x, axis=cat)


def Pm(p) -> LazyTensor:
    if isinstance(p, jax.Array):
        return LazyTensor(_as_float(p).reshape(-1))
    return LazyTensor._wrap(_lazy.Pm(p), {})


def minimum(a, b) -> LazyTensor:
    return _binary_fn(a, b, "minimum")


def maximum(a, b) -> LazyTensor:
    return _binary_fn(a, b, "maximum")


def _binary_fn(a, b, fn):
    ua, ta = LazyTensor._unwrap(a)
    ub, tb = LazyTensor._unwrap(b)
    return LazyTensor._wrap(getattr(_lazy, fn)(ua, ub), {**ta, **tb})


def kernel(k, X, Y=None, **params) -> LazyTensor:
    k = make_kernel(k)
    if k.prepare is not None:
        raise NotImplementedError(f"the {k.name} kernel prepares its data in NumPy; "
                                  "it has no JAX form yet")
    unknown = sorted(set(params) - set(k.params))
    if unknown:
        raise ValueError(f"the {k.name} kernel has no parameters {unknown}; its "
                         f"parameters are {sorted(k.params)}")
    P = {}
    for name, v in {**k.params, **params}.items():
        if v is None:
            P[name] = None
        elif isinstance(v, jax.Array):
            P[name] = Pm(v)
        else:
            P[name] = Pm(jnp.atleast_1d(jnp.asarray(v, dtype=float)))
    x_i = Vi(X)
    y_j = Vj(X if Y is None else Y)
    f = k.formula(x_i, y_j, P)
    if f is None or f.ni is None or f.nj is None:
        raise NotImplementedError(f"the {k.name} kernel does not depend on both points")
    return f


for _f, _doc in ((LazyTensor, _docs.LAZY_TENSOR), (Vi, _docs.VI), (Vj, _docs.VJ),
                 (Pm, _docs.PM), (minimum, _docs.MINIMUM), (maximum, _docs.MAXIMUM),
                 (kernel, _docs.KERNEL)):
    _f.__doc__ = _doc  # numpydoc text kept in _docs.py
