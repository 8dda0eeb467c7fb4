"""pykeops' dtype rule for ``kerneltools.keops.torch`` (see
:mod:`kerneltools.keops._dtypes`): ``kerneltools.torch.LazyTensor`` whose
formulas refuse data of two dtypes, when built and when reduced."""

from __future__ import annotations

from .. import torch as _ktorch
from ._dtypes import LazyTensor as _NumpyLevel
from ._dtypes import OneDtype, leaf_functions, weak

__all__ = ["LazyTensor", "Pm", "Vi", "Vj"]


class LazyTensor(OneDtype, _ktorch.LazyTensor):
    """``kerneltools.torch.LazyTensor`` with pykeops' dtype rule: one dtype per formula.

    Its NumPy-level formula is a ``kerneltools.keops.numpy.LazyTensor``;
    everything else is :class:`kerneltools.torch.LazyTensor`'s.

    Parameters
    ----------
    x : torch.Tensor or float
        The data: (N, D) or (M, D) for a variable, (D,) or a number for a
        parameter (Python floats take the formula's dtype).
    axis : {0, 1}, default=None
        0: indexed by i, 1: by j; None: a parameter.

    Examples
    --------
    >>> import torch
    >>> from kerneltools.keops.torch import LazyTensor
    >>> x = torch.tensor([[0.0], [1.0], [3.0]], requires_grad=True)  # float32
    >>> s = ((LazyTensor(x, axis=0) - LazyTensor(x, axis=1)) ** 2).sum(axis=1)
    >>> s.ravel().tolist()
    [10.0, 5.0, 13.0]
    >>> (g,) = torch.autograd.grad(s.sum(), x)  # d/dx_k of sum (x_i - x_j)^2
    >>> g.ravel().tolist()
    [-16.0, -4.0, 20.0]
    """

    def __init__(self, x, axis: int | None = None):
        super().__init__(weak(x), axis)
        if type(self._lt) is not _NumpyLevel:
            self._lt = _NumpyLevel(self._lt)


Vi, Vj, Pm = leaf_functions(LazyTensor, _ktorch)
