"""kerneltools: kernel methods that scale, on symbolic tiled reductions.

The public surface: :class:`LazyTensor` with :func:`Vi`, :func:`Vj`, :func:`Pm`,
:func:`minimum` and :func:`maximum`; the exceptions of
:mod:`kerneltools.exceptions`; :func:`info`.
"""

from ._version import __version__
from .exceptions import (
    BackendUnavailableError,
    CompileError,
    ConvergenceWarning,
    KernelToolsError,
)
from .lazy import LazyTensor, Pm, Vi, Vj, maximum, minimum
from ._info import info

__all__ = [
    "__version__",
    "LazyTensor",
    "Vi",
    "Vj",
    "Pm",
    "minimum",
    "maximum",
    "info",
    "KernelToolsError",
    "BackendUnavailableError",
    "CompileError",
    "ConvergenceWarning",
]
