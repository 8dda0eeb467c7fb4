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
from .. import _docs
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
    __doc__ = _docs.docstring(_docs.GENRED, "numpy", name="Genred",
                              intro=_docs.INTRO["genred"]["numpy"])

    binding = _NumpyBinding()


class KernelSolve(KernelSolveBase):
    __doc__ = _docs.docstring(_docs.KERNEL_SOLVE, "numpy", name="KernelSolve",
                              intro=_docs.INTRO["solve"]["numpy"])

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
    generic_functions(Genred, "numpy")[name] for name in
    ("generic_sum", "generic_logsumexp", "generic_argmin", "generic_argkmin"))
# doctest finds functions made in another module's closure only here
__test__ = {f.__name__: f for f in (generic_sum, generic_logsumexp, generic_argmin,
                                    generic_argkmin)}
