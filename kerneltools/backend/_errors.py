"""Typed exceptions and warnings (re-exported by :mod:`kerneltools.exceptions`)."""

from __future__ import annotations

from sklearn.exceptions import ConvergenceWarning as _SkConvergenceWarning

__all__ = [
    "KernelToolsError",
    "BackendUnavailableError",
    "CompileError",
    "ConvergenceWarning",
    "BackendFallbackWarning",
]


class KernelToolsError(Exception):
    """Base class of the errors that kerneltools raises itself."""


class BackendUnavailableError(KernelToolsError, RuntimeError):
    """A backend was asked for by name but cannot run here; says why and how to fix."""


class CompileError(KernelToolsError, RuntimeError):
    """A generated kernel failed to compile.

    Attributes
    ----------
    log : str
        The compiler's message.
    source_path : str or None
        Where the generated source was written, to read or to report.
    """

    def __init__(self, message: str, *, log: str = "", source_path: str | None = None):
        super().__init__(message)
        self.log = log
        self.source_path = source_path


class ConvergenceWarning(_SkConvergenceWarning):
    """An iterative solver stopped before reaching its tolerance.

    A subclass of scikit-learn's, so that its warning filters apply.
    """


class BackendFallbackWarning(UserWarning):
    """``backend='auto'`` fell back to a slower backend (said once per process)."""
