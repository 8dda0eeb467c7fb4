"""Complex numbers in :mod:`kerneltools.torch`: its ``ComplexLazyTensor``.

The torch counterpart of :class:`kerneltools.ComplexLazyTensor`
(:mod:`kerneltools.lazy._complex`). A complex tensor ``z`` (complex64 /
complex128, CPU or CUDA) enters a formula as the real tensor
``torch.cat([z.real, z.imag], -1)`` (the planar layout), and a reduction's
real ``(..., 2D)`` output leaves as ``torch.complex(re, im)``. Both
conversions are torch operations, so autograd differentiates a complex
reduction through the real one, with torch's own (Wirtinger) conventions
for complex tensors: ``torch.autograd.gradcheck`` holds on complex128.

:class:`ComplexTorchMethods` is the mixin that ``kerneltools.torch`` puts
before its ``LazyTensor`` to make the class (``_real`` is the real one).
"""

from __future__ import annotations

import torch

from ..lazy import _complex
from ..lazy import ComplexLazyTensor as _NumpyComplex

__all__ = ["ComplexTorchMethods", "planar", "to_complex"]


def planar(z: torch.Tensor) -> torch.Tensor:
    """A complex tensor ``(..., D)`` as the real ``(..., 2D)`` of its parts
    (a differentiable torch operation)."""
    return torch.cat([z.real, z.imag], dim=-1)


def to_complex(res: torch.Tensor) -> torch.Tensor:
    """A real planar result ``(..., 2D)`` as a complex tensor ``(..., D)``."""
    d = res.shape[-1] // 2
    return torch.complex(res[..., :d], res[..., d:])


class ComplexTorchMethods:
    """A symbolic array of complex values over torch tensors.

    ``kerneltools.torch.LazyTensor`` of a complex tensor makes one. See
    :class:`kerneltools.ComplexLazyTensor` for the operations.

    Parameters
    ----------
    x : torch.Tensor, number or LazyTensor
        Complex tensors (or real ones, or real LazyTensors: imaginary part 0,
        or Python complex numbers), shaped as for
        :class:`kerneltools.torch.LazyTensor`.
    axis : {0, 1}, optional
        Only for 2-D data.

    Examples
    --------
    >>> import math
    >>> import torch
    >>> from kerneltools.torch import Vi, Vj
    >>> t = torch.tensor([[0.0], [1.0]])
    >>> type((1j * math.pi * Vi(t) * Vj(t)).exp()).__name__
    'ComplexLazyTensor'
    """

    _real: type  # kerneltools.torch.LazyTensor

    def __new__(cls, x=None, axis=None):
        return object.__new__(cls)

    def __init__(self, x, axis: int | None = None):
        if isinstance(x, torch.Tensor) and x.is_complex():  # planar real tensor data
            real = self._real(planar(x), axis)
            self._lt = _NumpyComplex.from_planar(real._lt)
            self._tensors = real._tensors
            return
        if isinstance(x, torch.Tensor):
            x = self._real(x, axis)
        if isinstance(x, self._real):  # real (imaginary part 0) or complex
            self._lt = x._lt if x._lt.is_complex else _NumpyComplex(x._lt)
            self._tensors = dict(x._tensors)
        else:  # numbers, NumPy data
            self._lt, self._tensors = _NumpyComplex(x, axis), {}

    @property
    def real(self):
        """The real parts, a real formula."""
        return self._call("_apply", "Real")

    @property
    def imag(self):
        """The imaginary parts, a real formula."""
        return self._call("_apply", "Imag")

    def __repr__(self) -> str:
        return f"kerneltools.torch.{self._lt!r}"

    def _apply(self, op: str):
        return self._call("_apply", op)

    def _compose(self, fn, *others):
        return self._call("_compose", fn, *others)

    def planar(self):
        """The real formula of the planar layout, over the same tensors.

        Returns
        -------
        LazyTensor
            The real formula of dimension 2D: the real parts, then the
            imaginary parts.
        """
        return self._real._wrap(self._lt.planar(), self._tensors)

    def t(self):
        """Swap the roles of i and j (the same tensors, so gradients flow).

        Returns
        -------
        ComplexLazyTensor
            The complex formula with i and j swapped.
        """
        real = self.planar().t()
        return self._real._wrap(_NumpyComplex.from_planar(real._lt), real._tensors)

    def _reduce(self, name, axis, *, weight=None, K=1, backend=None, **options):
        """Complex ``Sum``: the real reduction of the planar formula (an
        ``autograd.Function``), viewed as complex by ``torch.complex``."""
        _complex.check_reduction(name, weight)
        out = options.pop("out", None)
        res = self.planar()._reduce(name, axis, K=K, backend=backend, **options)
        if not isinstance(res, torch.Tensor):  # pykeops' call=False: a callable
            return lambda *a, **k: to_complex(res(*a, **k))
        res = to_complex(res)
        if out is not None:
            if res.requires_grad:
                raise ValueError("'out' cannot be used while gradients are tracked")
            with torch.no_grad():
                out.copy_(res)
            return out
        return res

    def solve(self, *args, **kwargs):
        return self._lt.solve(*args, **kwargs)  # TypeError: no complex meaning
