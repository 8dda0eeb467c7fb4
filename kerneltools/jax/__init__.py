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
their hyperparameters differentiable. On a GPU, the reduction is the CUDA
backend's NVRTC-compiled kernel, launched by a custom call on XLA's stream
(:mod:`._cuda`). What the custom calls do not serve (``ranges=``,
``backend="numpy"``, pykeops' reduction keywords) runs on the engine through
``jax.pure_callback``.

What lives here: the JAX LazyTensor, its reduction (:mod:`._reduce`, on a
GPU :mod:`._cuda`) and solve (:mod:`._solve`). What it may import: the
engine (its IR, autodiff, plans, and the XLA entry points of the CPU and
CUDA backends, :mod:`kerneltools.backend.cpu._xla` and
:mod:`kerneltools.backend.cuda._xla`), :mod:`kerneltools.lazy` and its
symbolic core (:mod:`kerneltools.lazy._symbolic`,
:mod:`kerneltools.lazy._reducing`), :mod:`kerneltools.kernels`; never
:mod:`kerneltools.torch` or :mod:`kerneltools.estimators`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .. import lazy as _lazy
from ..backend.reductions import REDUCTIONS
from ..kernels import make_kernel
from ..lazy._args import check_axis
from ..lazy._frontend import FrontEnd, binary_fn, install_forwarding
from ..lazy._symbolic import batch_of, bindings_of, merge
from . import _docs
from ._reduce import Spec, placeholder, reduce, reduce_batched
from ._solve import solve as _solve

__all__ = ["LazyTensor", "Pm", "Vi", "Vj", "kernel", "maximum", "minimum"]


def _as_float(x):
    """``x`` as a jax array of a floating dtype (integers: JAX's default float)."""
    x = jnp.asarray(x)
    return x if jnp.issubdtype(x.dtype, jnp.floating) else x.astype(float)


class LazyTensor(FrontEnd):  # docstring: _docs.LAZY_TENSOR (set at the end)
    _DATA, _LIBRARY, _PREFIX = "_arrays", jax.Array, "kerneltools.jax"

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

    _as_data = staticmethod(_as_float)
    _concat = staticmethod(lambda cols: jnp.concatenate(cols, axis=1))

    @staticmethod
    def _Vj(x):
        return Vj(x)

    def solve(self, b, alpha: float = 1e-10, *, tol: float = 1e-6, max_iter=None,
              backend=None, **options):
        """Solve ``(K + alpha I) a = b`` by conjugate gradients (K symmetric,
        positive); ``b`` (N,) or (N, E). Differentiable with respect to ``b``
        and K's arrays (implicit differentiation: see :mod:`._solve`).

        Parameters
        ----------
        b : jax.Array
            The right-hand side, (N,) or (N, E).
        alpha : float, default=1e-10
            The ridge added to the diagonal.
        tol : float, default=1e-6
            The relative residual that stops the solver.
        max_iter : int, optional
            The iteration limit (``None``: JAX's, 10 times the size of ``b``).
        backend : str, optional
            The backend of each product ``K x`` (``None``: the configured one).
        **options : dict
            The options of each product ``K x``.

        Returns
        -------
        jax.Array
            The solution ``a``, shaped like ``b``.
        """
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
        W, arrays = self._weight_and_data(weight, options)
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


LazyTensor._root = LazyTensor
install_forwarding(LazyTensor)


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
    return binary_fn(LazyTensor, a, b, "minimum")


def maximum(a, b) -> LazyTensor:
    return binary_fn(LazyTensor, a, b, "maximum")


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
