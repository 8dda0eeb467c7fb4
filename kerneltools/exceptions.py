"""Exceptions and warnings raised by kerneltools."""

from .backend._errors import (
    BackendFallbackWarning,
    BackendUnavailableError,
    CompileError,
    ConvergenceWarning,
    KernelToolsError,
)

__all__ = [
    "KernelToolsError",
    "BackendUnavailableError",
    "CompileError",
    "ConvergenceWarning",
    "BackendFallbackWarning",
]
