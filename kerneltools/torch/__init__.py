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

What lives here: the torch LazyTensor, its autograd functions
(:mod:`._autograd`), complex numbers (:mod:`._complex`) and GeomLoss's
:class:`SamplesLoss` (:mod:`._samples_loss`). What it may import: the engine
(through its dispatch), :mod:`kerneltools.lazy` (its ``__all__`` and
:mod:`kerneltools.lazy._symbolic`), :mod:`kerneltools.ot`,
:mod:`kerneltools._utils` and the formula-string parser
(:mod:`kerneltools.lazy._formula_strings`);
never :mod:`kerneltools.estimators`.
"""

from __future__ import annotations

import numpy as np
import torch

from .. import lazy as _lazy
from ..lazy._deferred import DeferredReduction, DeferredSolve
from ..lazy._keops_options import finish, take_output_options
from ..lazy._keops import KeopsMethods
from ..lazy._solve import rhs_of, unknown_of, waits_for_data
from ..lazy._frontend import FrontEnd, binary_fn, install_forwarding
from ..lazy._symbolic import bindings_of, check_axis, from_parts, ranges_of, symbols_of
from ..lazy._complex import check_weight, is_complex_data
from . import _docs
from ._complex import ComplexTorchMethods
from ._autograd import Reduce, ReduceSpec, Solve, SolveSpec, view
from ..backend._autodiff import forward_reduction
from ..backend.reductions import REDUCTIONS

__all__ = ["LazyTensor", "ComplexLazyTensor", "Vi", "Vj", "Pm", "minimum", "maximum"]


class LazyTensor(FrontEnd):
    """A symbolic ``(N, M, D)`` formula over torch tensors; see the module docstring.

    Complex tensors make a :class:`ComplexLazyTensor`.

    Parameters
    ----------
    x : torch.Tensor, array-like or number
        As for :class:`kerneltools.LazyTensor`, with torch tensors (or NumPy
        arrays and numbers) as data: reductions are differentiable with
        respect to the tensors.
    axis : {0, 1}, optional
        Only for 2-D data: indexed by i (0) or by j (1).
    """  # Examples: _docs.LAZY_TENSOR_EXAMPLES (set at the end)

    def __new__(cls, x=None, axis=None):
        if not issubclass(cls, ComplexLazyTensor) and is_complex_data(x):  # complex data
            obj = object.__new__(ComplexLazyTensor)
            if not issubclass(ComplexLazyTensor, cls):  # a subclass's call skips __init__
                obj.__init__(x, axis)
            return obj
        return object.__new__(cls)

    _DATA, _LIBRARY, _PREFIX = "_tensors", torch.Tensor, "kerneltools.torch"

    def __init__(self, x, axis: int | None = None):
        if isinstance(x, LazyTensor):
            self._lt, self._tensors = x._lt, dict(x._tensors)
            return
        if isinstance(x, torch.Tensor):
            self._lt = _lazy.LazyTensor(view(x), axis)
            self._tensors = {node: x for node in bindings_of(self._lt)}
        else:
            self._lt = _lazy.LazyTensor(x, axis)
            self._tensors = {}

    @classmethod
    def _wrap(cls, lt, tensors) -> LazyTensor:
        kind = cls  # complex in, complex out
        if lt.is_complex or cls is ComplexLazyTensor:
            kind = ComplexLazyTensor if lt.is_complex else LazyTensor
        return FrontEnd._wrap.__func__(kind, lt, tensors)

    @property
    def _shape(self) -> tuple:
        return self._lt._shape

    @property
    def backend(self):
        """See :attr:`kerneltools.LazyTensor.backend`."""
        return self._lt.backend

    @backend.setter
    def backend(self, value):
        lt = from_parts(type(self._lt), self._lt.formula, bindings_of(self._lt),
                        self._lt.ni, self._lt.nj, ranges=ranges_of(self._lt))
        lt.backend = value
        self._lt = lt

    # -- reductions ------------------------------------------------------------
    # sum, logsumexp, min, Kmin, ...: the methods of the reductions' registry
    # (``Reduction.methods``), installed below the class; they call _reduce;
    # ``K @ b`` is FrontEnd.matmul.
    @staticmethod
    def _as_data(b):
        return b if isinstance(b, torch.Tensor) else torch.as_tensor(np.asarray(b))

    _concat = staticmethod(lambda cols: torch.cat(cols, dim=1))

    @staticmethod
    def _Vj(x):
        return Vj(x)

    def matvec(self, v):
        """``K @ v`` (pykeops' alias).

        Parameters
        ----------
        v : Tensor
            The vector or matrix, (M,) or (M, E).

        Returns
        -------
        Tensor
            ``K @ v``, (N,) or (N, E).
        """
        return self @ v

    def rmatvec(self, v):
        """``K.T @ v`` (pykeops' alias).

        Parameters
        ----------
        v : Tensor
            The vector or matrix, (N,) or (N, E).

        Returns
        -------
        Tensor
            ``K.T @ v``, (M,) or (M, E).
        """
        return self.T @ v

    def _bind_symbols(self, arrays: dict) -> LazyTensor:
        """This formula with its symbolic variables bound to ``arrays``
        ({pykeops index: tensor}); gradients flow to the tensors."""
        tensors = {k: torch.as_tensor(v) for k, v in arrays.items()}
        out = self._lt._bind_symbols({k: view(t) for k, t in tensors.items()})
        mine = dict(self._tensors)
        for node, b in bindings_of(self._lt).items():
            if b.symbol is not None:
                mine[node] = tensors[b.symbol]
        return self._wrap(out, mine)

    def solve(self, b, alpha: float = 1e-10, *, tol: float = 1e-6, max_iter=None,
              backend=None, var=None, call=True, **options):
        """Solve ``(K + alpha I) a = b`` by conjugate gradients; ``b`` a tensor
        (N,), (N, E), batched (B..., N, E) (or an i-variable LazyTensor), the
        result a tensor, differentiable with respect to ``b`` and to K's
        tensors (implicit differentiation: one more solve in the backward
        pass, the operator taken as symmetric). ``var=``, ``call=False`` and
        symbolic variables as :meth:`kerneltools.LazyTensor.solve`.

        Parameters
        ----------
        b : Tensor or LazyTensor
            The right-hand side.
        alpha : float, default=1e-10
            The ridge added to the diagonal.
        tol : float, default=1e-6
            The relative residual that stops the solver.
        max_iter : int, optional
            The iteration limit (``None``: 10 N + 100).
        backend : str, optional
            The backend (``None``: the configured one).
        var : LazyTensor, optional
            The symbolic variable ``K`` is linear in.
        call : bool, default=True
            Solve now (else a deferred solve, called with the data).
        **options : dict
            The options of each product ``K x``.

        Returns
        -------
        Tensor
            The solution ``a``, shaped like ``b`` (a deferred solve with
            ``call=False``).
        """
        unknown = unknown_of(self, var)
        kwargs = dict(tol=tol, max_iter=max_iter, backend=backend, **options)
        if not call or waits_for_data(self, b, unknown):
            return DeferredSolve(self, b, var, alpha, kwargs)
        b, _ = rhs_of(b, LazyTensor, unknown)
        if not isinstance(b, torch.Tensor):
            b = torch.as_tensor(np.asarray(b))
        spec = SolveSpec(self, alpha, kwargs, getattr(var, "_lt", None))
        return Solve.apply(spec, b, *[self._tensors[n] for n in spec.nodes])

    def _reduce(self, name, axis, *, weight=None, K=1, backend=None, **options):
        """The reduction ``name`` over ``axis`` (0: over i, 1: over j); the
        ``options`` (``ranges=``, ...) serve its backward too. pykeops'
        ``call=False`` (or symbolic variables) returns a callable, ``out=`` a
        tensor to copy the result into (not while gradients are tracked),
        ``keepdim=True`` keeps the reduced axis."""
        axis = check_axis(axis)
        check_weight(name, weight)
        call = options.pop("call", True)
        if backend is None:
            backend = self._lt.backend
        if not call or symbols_of(self._lt, self._unwrap(weight)[0]):
            return DeferredReduction(self, name, axis, weight, K, backend, options)
        options, out, keepdim = take_output_options(options)
        W, tensors = self._weight_and_data(weight, options)
        nodes = list(tensors)
        spec = ReduceSpec(self, W, name, axis, K, backend, nodes, options)
        args = [tensors[n] for n in nodes]
        red = REDUCTIONS[name]
        grad = red.surrogate is not None and torch.is_grad_enabled() and any(
            t.requires_grad for t in args)
        spec.run = forward_reduction(name) if grad else name
        outs = Reduce.apply(spec, *args)
        res = outs[0] if red.n_outputs == 1 else outs[:red.n_outputs]
        return _finish(res, spec, len(self.batch), out, keepdim)


def _finish(res, spec, nbatch, out, keepdim):
    """``keepdim`` and ``out`` applied to a reduction's tensors."""
    if out is not None and getattr(res, "requires_grad", False):
        raise ValueError("'out' cannot be used while gradients are tracked (the result "
                         "would leave the autograd graph); drop 'out' or use torch.no_grad()")

    def copy(o, r):
        with torch.no_grad():
            o.copy_(r)

    return finish(res, REDUCTIONS[spec.name].uses_k, spec.axis, nbatch, out, keepdim, copy)


LazyTensor._root = LazyTensor
install_forwarding(LazyTensor)
# pykeops' generic reduction and the static concatenations run on this class
# (forwarded to the NumPy LazyTensor, they would leave the autograd graph).
LazyTensor.reduction = KeopsMethods.reduction
LazyTensor.__min__, LazyTensor.__max__ = KeopsMethods.__min__, KeopsMethods.__max__
LazyTensor.concatenate = staticmethod(KeopsMethods.concatenate)
LazyTensor.cat = staticmethod(KeopsMethods.cat)


def Vi(x, dim: int | None = None) -> LazyTensor:
    return _indexed(x, dim, 0)


def Vj(x, dim: int | None = None) -> LazyTensor:
    return _indexed(x, dim, 1)


def _indexed(x, dim, cat: int) -> LazyTensor:
    if dim is not None:
        return LazyTensor((x, dim, cat))
    x = torch.as_tensor(x) if not isinstance(x, torch.Tensor) else x
    if x.ndim >= 3:  # batch axes: (B..., N, 1, D) or (B..., 1, M, D)
        return LazyTensor(x.unsqueeze(-2 if cat == 0 else -3))
    return LazyTensor(x.reshape(x.shape[0], -1), axis=cat)


def Pm(p, dim: int | None = None) -> LazyTensor:
    if dim is not None:
        return LazyTensor((p, dim, 2))
    if isinstance(p, torch.Tensor):
        return LazyTensor(p.reshape(-1))
    return LazyTensor._wrap(_lazy.Pm(p), {})


def minimum(a, b) -> LazyTensor:
    return binary_fn(LazyTensor, a, b, "minimum")


def maximum(a, b) -> LazyTensor:
    return binary_fn(LazyTensor, a, b, "maximum")


for _f, _doc in ((Vi, _docs.VI), (Vj, _docs.VJ), (Pm, _docs.PM),
                 (minimum, _docs.MINIMUM), (maximum, _docs.MAXIMUM)):
    _f.__doc__ = _doc  # numpydoc text kept in _docs.py (line limit)
LazyTensor.__doc__ = (LazyTensor.__doc__.rstrip() + "\n\n" + _docs.LAZY_TENSOR_EXAMPLES
                      + "    ")


from ._samples_loss import SamplesLoss  # noqa: E402  (GeomLoss's losses, issue 27)


class ComplexLazyTensor(ComplexTorchMethods, LazyTensor):
    __doc__ = ComplexTorchMethods.__doc__


ComplexLazyTensor._real = LazyTensor  # complex numbers (issue 21)
