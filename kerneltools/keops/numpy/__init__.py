"""``pykeops.numpy``, on kerneltools: change the import, keep the code.

``from kerneltools.keops.numpy import Genred, LazyTensor, Vi, Vj, Pm, ...``
gives pykeops' NumPy names: :class:`Genred` and :class:`KernelSolve` with
pykeops' formula strings (read by a parser, never ``eval``), the
``generic_*`` helpers, and kerneltools' :class:`~kerneltools.LazyTensor`,
``Vi``, ``Vj`` and ``Pm`` with pykeops' dtype rule (one dtype per formula,
:mod:`kerneltools.keops._dtypes`). Where kerneltools differs from pykeops,
the README's table of pykeops features says how.

What it may import: :mod:`kerneltools.keops`' private modules and the
public API.
"""

from __future__ import annotations

import numpy as np

from ... import lazy as _lazy
from ...linalg import conjugate_gradient as _conjugate_gradient
from .._dtypes import LazyTensor, Pm, Vi, Vj  # pykeops' dtype rule: one per formula
from .._genred import Binding, GenredBase
from .._kernel_solve import KernelSolveBase
from .._generic import generic_functions
from ...lazy._formula_strings._parser import FormulaSyntaxError

ComplexLazyTensor = _lazy.ComplexLazyTensor

__all__ = sorted(["Genred", "KernelSolve", "LazyTensor", "ComplexLazyTensor", "Vi", "Vj",
                  "Pm", "generic_sum", "generic_logsumexp", "generic_argmin",
                  "generic_argkmin", "FormulaSyntaxError"])


class _NumpyBinding(Binding):
    LazyTensor, ComplexLazyTensor = _lazy.LazyTensor, _lazy.ComplexLazyTensor
    plans = True  # repeated Genred calls run their cached plan
    minimum = staticmethod(_lazy.minimum)
    maximum = staticmethod(_lazy.maximum)

    def as_array(self, x, what):
        # NumPy, CuPy and Dask arrays stay as they are (LazyTensor takes them:
        # CuPy in, CuPy out; Dask in, Dask out); the rest goes through NumPy
        if hasattr(x, "__array_function__") and hasattr(x, "dtype") and hasattr(x, "ndim"):
            a = x
        else:
            try:
                a = np.asarray(x)
            except Exception as exc:
                raise TypeError(f"{what} must be an array; {exc}") from None
        if a.dtype.kind not in "biuf":
            raise TypeError(f"{what} must be a real array, got dtype {a.dtype}")
        return a

    def variable(self, a, cat, batched):
        if cat == 2:
            return _lazy.LazyTensor(a[..., None, None, :] if batched else a.reshape(-1))
        if batched:
            return _lazy.LazyTensor(a[..., :, None, :] if cat == 0 else a[..., None, :, :])
        return _lazy.LazyTensor(a, axis=cat)

    def cast(self, a, dtype_name):
        return a.astype(dtype_name, copy=False)

    def dtype_name(self, a):
        return str(a.dtype)

    def concat(self, arrays):
        # CuPy and Dask arrays take np.concatenate through __array_function__
        return np.concatenate(arrays, axis=-1)


class Genred(GenredBase):
    """pykeops' generic reduction: ``Genred(formula, aliases, reduction_op, axis)``.

    Parameters
    ----------
    formula : str
        The formula, in pykeops' syntax: ``"Exp(-SqDist(x, y)) * b"``; or the
        whole reduction, ``"Sum_Reduction(Exp(-SqDist(x, y)) * b, 0)"``.
    aliases : list of str
        The arguments: ``"x = Vi(3)"`` (indexed by i, dimension 3; its index is
        its place in the list), ``"y = Vj(1, 3)"`` (index 1), ``"g = Pm(1)"``
        (a parameter); formulas may also use ``Var(index, dim, cat)``.
    reduction_op : str
        ``"Sum"``, ``"LogSumExp"``, ``"Min"``, ``"ArgMin"``, ``"Min_ArgMin"``,
        ``"Max"``, ... , ``"KMin"``, ``"ArgKMin"``, ``"KMin_ArgKMin"`` (K =
        ``opt_arg``), ``"SumSoftMaxWeight"`` and ``"LogSumExpWeight"`` (weights
        ``formula2``), ``"Max_SumShiftExp"`` and ``"Max_SumShiftExpWeight"``
        (``[max, sum exp(F - max) (G)]`` in one array); ``"Sum_Reduction"``
        and the like are accepted too.
    axis : {0, 1}
        0: reduce over i (the output is indexed by j); 1: over j.
    dtype, cuda_type : optional
        Deprecated in pykeops 2 and ignored: the arrays' dtype is used.
    opt_arg : int, optional
        K of the K-reductions.
    formula2 : str, optional
        The weights of ``SumSoftMaxWeight`` / ``LogSumExp``.
    dtype_acc, use_double_acc : optional
        ``"float64"`` / True: float32 data are computed in float64 and the
        result rounded to float32.
    sum_scheme, enable_chunks, rec_multVar_highdim, use_fast_math : optional
        pykeops' code-generation options: checked, without effect (kerneltools
        sums by tiles, never with fast-math).

    Raises
    ------
    FormulaSyntaxError
        A formula or alias that does not parse, an unknown name or operation,
        with the position and a caret.
    ValueError
        An unknown reduction, a bad ``axis`` or options.
    """

    binding = _NumpyBinding()


class KernelSolve(KernelSolveBase):
    """pykeops' ``KernelSolve``: solve ``(A + alpha I) u = b`` for the variable
    ``varinvalias`` of a formula linear in it, by conjugate gradients.

    ``KernelSolve(formula, aliases, varinvalias, axis=0, ...)`` then
    ``Kinv(*args, alpha=1e-10, eps=1e-6, backend="auto", ranges=None)`` where
    ``args`` holds ``b`` in the unknown's place. The operator must be symmetric
    positive definite (plus ``alpha``); it may mix the unknown's components
    (each problem is one system of N E unknowns). Batch axes of the arguments
    are independent problems, solved together. Stops at ``|r| <= eps |b|``
    per problem (pykeops: an absolute threshold over all of them, no
    iteration cap); warns with ``ConvergenceWarning`` after ``10 n + 100``
    iterations.
    """

    binding = _NumpyBinding()

    def __call__(self, *args, backend="auto", device_id=-1, alpha=1e-10, eps=1e-6,
                 ranges=None):
        if len(args) != self.variables.count:
            raise TypeError(f"KernelSolve takes {self.variables.count} arrays, got {len(args)}")
        args = [self.binding.as_array(a, f"KernelSolve: argument {k} "
                                         f"({self.variables.by_index[k][0]})")
                for k, a in enumerate(args)]
        b, fold, unfold = self._layout(args, args[self.varinv])
        op = self._operator(args, backend, ranges)
        u, _ = _conjugate_gradient(
            lambda v: fold(op(unfold(v).astype(b.dtype, copy=False))) + alpha * v,
            fold(b), tol=eps)
        return unfold(u).astype(b.dtype, copy=False)


generic_sum, generic_logsumexp, generic_argmin, generic_argkmin = (
    generic_functions(Genred)[name] for name in
    ("generic_sum", "generic_logsumexp", "generic_argmin", "generic_argkmin"))
