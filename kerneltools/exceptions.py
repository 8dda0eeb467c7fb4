"""Exceptions and warnings raised by kerneltools."""

from .backend import _errors
from .backend._errors import (
    BackendFallbackWarning,
    BackendUnavailableError,
    CacheError,
    CacheWarning,
    CompileError,
    ConvergenceError,
    FormulaSyntaxError,
    KernelToolsError,
    NotPositiveDefiniteError,
)

__all__ = [
    "KernelToolsError",
    "BackendUnavailableError",
    "CompileError",
    "CacheError",
    "FormulaSyntaxError",
    "NotPositiveDefiniteError",
    "ConvergenceError",
    "ConvergenceWarning",
    "BackendFallbackWarning",
    "CacheWarning",
]


def __getattr__(name):
    # ConvergenceWarning subclasses scikit-learn's, imported on first use.
    if name == "ConvergenceWarning":
        return _errors._convergence_warning()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
