"""Typed exceptions and warnings (re-exported by :mod:`kerneltools.exceptions`)."""

from __future__ import annotations

import functools

import numpy as np

__all__ = [
    "KernelToolsError",
    "BackendUnavailableError",
    "CompileError",
    "CacheError",
    "NotPositiveDefiniteError",
    "ConvergenceWarning",
    "ConvergenceError",
    "BackendFallbackWarning",
    "CacheWarning",
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


class CacheError(KernelToolsError, OSError):
    """The kernel cache folder could let another user plant code that kerneltools
    would run (owned by someone else, writable by group or others, a link); the
    message names the folder and how to fix it."""


class NotPositiveDefiniteError(KernelToolsError, np.linalg.LinAlgError):
    """Conjugate gradients met ``p^T A p <= 0`` beyond rounding: the operator
    is not positive definite (an indefinite kernel, a negative shift); the
    message says which diagonal shift to raise."""


class ConvergenceError(KernelToolsError, RuntimeError):
    """An iterative solver neither reached its tolerance nor could escalate
    (restart, higher precision, a dense solve for small ``n``); the message
    gives the residual reached and the parameter to change. Raised instead of
    returning a result known to be inaccurate."""


@functools.lru_cache(maxsize=None)
def _convergence_warning() -> type:
    # Built on first use: importing scikit-learn takes about a second, and
    # ``import kerneltools`` should not pay for it.
    from sklearn.exceptions import ConvergenceWarning as _SkConvergenceWarning

    class ConvergenceWarning(_SkConvergenceWarning):
        """An iterative solver stopped before reaching its tolerance.

        A subclass of scikit-learn's, so that its warning filters apply.
        """

    ConvergenceWarning.__module__ = "kerneltools.exceptions"
    ConvergenceWarning.__qualname__ = "ConvergenceWarning"
    return ConvergenceWarning


def __getattr__(name):
    if name == "ConvergenceWarning":
        return _convergence_warning()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class BackendFallbackWarning(UserWarning):
    """``backend='auto'`` fell back to a slower backend (said once per process)."""


class CacheWarning(UserWarning):
    """The kernel cache folder cannot be written: this process compiles into a
    private temporary folder instead (said once; the message says how to fix)."""
