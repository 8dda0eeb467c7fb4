"""pykeops' dtype rule for ``kerneltools.keops.torch`` (see
:mod:`kerneltools.keops._dtypes`): ``kerneltools.torch.LazyTensor`` whose
formulas refuse data of two dtypes, when built and when reduced."""

from __future__ import annotations

from .. import torch as _ktorch
from ._dtypes import _FIX, LazyTensor as _NumpyLevel
from ._dtypes import _strong_dtypes, check_formula, weak

__all__ = ["LazyTensor", "Pm", "Vi", "Vj"]


class LazyTensor(_ktorch.LazyTensor):
    """``kerneltools.torch.LazyTensor`` with pykeops' dtype rule."""

    def __init__(self, x, axis: int | None = None):
        super().__init__(weak(x), axis)
        if type(self._lt) is not _NumpyLevel:
            self._lt = _NumpyLevel(self._lt)

    def _compose(self, fn, *others):
        out = super()._compose(fn, *map(weak, others))
        check_formula(out)
        return out

    def _reduce(self, name, axis, *, weight=None, **options):
        check_formula(self, weight)
        return super()._reduce(name, axis, weight=weight, **options)

    def solve(self, b, *args, **kwargs):
        check_formula(self, b)
        mine = _strong_dtypes(self)
        dtype = str(getattr(b, "dtype", "")).replace("torch.", "")
        if dtype and mine and dtype not in mine:
            raise ValueError(f"solve: 'b' is {dtype} but the formula's data are "
                             f"{', '.join(mine)}: pykeops solves in one dtype; {_FIX}")
        return super().solve(b, *args, **kwargs)


def Vi(x, dim: int | None = None) -> LazyTensor:
    """:func:`kerneltools.torch.Vi`, with pykeops' dtype rule."""
    return LazyTensor(_ktorch.Vi(x, dim))


def Vj(x, dim: int | None = None) -> LazyTensor:
    """:func:`kerneltools.torch.Vj`, with pykeops' dtype rule."""
    return LazyTensor(_ktorch.Vj(x, dim))


def Pm(p, dim: int | None = None) -> LazyTensor:
    """:func:`kerneltools.torch.Pm`, with pykeops' dtype rule."""
    return LazyTensor(_ktorch.Pm(p, dim))
