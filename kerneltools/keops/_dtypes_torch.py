"""pykeops' dtype rule for ``kerneltools.keops.torch`` (see
:mod:`kerneltools.keops._dtypes`): ``kerneltools.torch.LazyTensor`` whose
formulas refuse data of two dtypes, when built and when reduced."""

from __future__ import annotations

from .. import torch as _ktorch
from ._dtypes import LazyTensor as _NumpyLevel
from ._dtypes import OneDtype, leaf_functions, weak

__all__ = ["LazyTensor", "Pm", "Vi", "Vj"]


class LazyTensor(OneDtype, _ktorch.LazyTensor):
    """``kerneltools.torch.LazyTensor`` with pykeops' dtype rule: its
    NumPy-level formula is a ``kerneltools.keops.numpy.LazyTensor``."""

    def __init__(self, x, axis: int | None = None):
        super().__init__(weak(x), axis)
        if type(self._lt) is not _NumpyLevel:
            self._lt = _NumpyLevel(self._lt)


Vi, Vj, Pm = leaf_functions(LazyTensor, _ktorch)
