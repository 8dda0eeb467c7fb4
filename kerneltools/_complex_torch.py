"""Complex numbers in :mod:`kerneltools.torch`: :class:`ComplexLazyTensor`.

The torch counterpart of :class:`kerneltools._complex.ComplexLazyTensor`. A
complex tensor ``z`` (complex64 / complex128, CPU or CUDA) enters a formula as
the real tensor ``torch.cat([z.real, z.imag], -1)`` (the planar layout), and a
reduction's real ``(..., 2D)`` output leaves as ``torch.complex(re, im)``.
Both conversions are torch operations, so autograd differentiates a complex
reduction through the real one, with torch's own (Wirtinger) conventions
for complex tensors: ``torch.autograd.gradcheck`` holds on complex128.
"""

from __future__ import annotations

import torch

from . import _complex
from . import torch as _ktorch

__all__ = ["ComplexLazyTensor", "to_complex"]


def planar(z: torch.Tensor) -> torch.Tensor:
    """A complex tensor ``(..., D)`` as the real ``(..., 2D)`` of its parts
    (a differentiable torch operation)."""
    return torch.cat([z.real, z.imag], dim=-1)


def to_complex(res: torch.Tensor) -> torch.Tensor:
    """A real planar result ``(..., 2D)`` as a complex tensor ``(..., D)``."""
    d = res.shape[-1] // 2
    return torch.complex(res[..., :d], res[..., d:])


class ComplexLazyTensor(_ktorch.LazyTensor):
    """A symbolic array of complex values over torch tensors.

    Parameters are those of :class:`kerneltools.torch.LazyTensor`, with
    complex tensors (or real ones, or real LazyTensors: imaginary part 0, or
    Python complex numbers); ``kerneltools.torch.LazyTensor`` of a complex
    tensor makes one. See :class:`kerneltools._complex.ComplexLazyTensor`
    for the operations.
    """

    def __new__(cls, x=None, axis=None):
        return object.__new__(cls)

    def __init__(self, x, axis: int | None = None):
        if isinstance(x, torch.Tensor) and x.is_complex():  # planar real tensor data
            real = _ktorch.LazyTensor(planar(x), axis)
            self._lt = _complex.ComplexLazyTensor.from_planar(real._lt)
            self._tensors = real._tensors
            return
        if isinstance(x, torch.Tensor):
            x = _ktorch.LazyTensor(x, axis)
        if isinstance(x, _ktorch.LazyTensor):  # real (imaginary part 0) or complex
            self._lt = x._lt if x._lt.is_complex else _complex.ComplexLazyTensor(x._lt)
            self._tensors = dict(x._tensors)
        else:  # numbers, NumPy data
            self._lt, self._tensors = _complex.ComplexLazyTensor(x, axis), {}

    @property
    def real(self) -> _ktorch.LazyTensor:
        """The real parts, a real formula."""
        return self._call("_apply", "Real")

    @property
    def imag(self) -> _ktorch.LazyTensor:
        """The imaginary parts, a real formula."""
        return self._call("_apply", "Imag")

    def __repr__(self) -> str:
        return f"kerneltools.torch.{self._lt!r}"

    def _apply(self, op: str) -> _ktorch.LazyTensor:
        return self._call("_apply", op)

    def _compose(self, fn, *others):
        return self._call("_compose", fn, *others)

    def t(self) -> ComplexLazyTensor:
        """Swap the roles of i and j (the same tensors, so gradients flow)."""
        return self._complex(self.planar().t())

    def planar(self) -> _ktorch.LazyTensor:
        """The real formula of the planar layout, over the same tensors."""
        return _ktorch.LazyTensor._wrap(self._lt.planar(), self._tensors)

    def _complex(self, real: _ktorch.LazyTensor) -> ComplexLazyTensor:
        return _ktorch.LazyTensor._wrap(_complex.ComplexLazyTensor.from_planar(real._lt),
                                        real._tensors)

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
