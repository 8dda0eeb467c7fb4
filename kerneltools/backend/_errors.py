"""Typed exceptions and warnings (re-exported by :mod:`kerneltools.exceptions`)."""

from __future__ import annotations

import errno
import functools
import os
import sys

import numpy as np

__all__ = [
    "KernelToolsError",
    "BackendUnavailableError",
    "CompileError",
    "CacheError",
    "FormulaSyntaxError",
    "NotPositiveDefiniteError",
    "ConvergenceWarning",
    "ConvergenceError",
    "BackendFallbackWarning",
    "CacheWarning",
    "KernelStoreError",
    "is_storage_error",
    "storage_errno",
    "outside_stacklevel",
]


class KernelToolsError(Exception):
    """Base class of the errors that kerneltools raises itself.

    Examples
    --------
    >>> from kerneltools.exceptions import FormulaSyntaxError, KernelToolsError
    >>> issubclass(FormulaSyntaxError, KernelToolsError)
    True
    """


class BackendUnavailableError(KernelToolsError, RuntimeError):
    """A backend was asked for by name but cannot run here; says why and how to fix.

    Examples
    --------
    >>> from kerneltools.exceptions import BackendUnavailableError
    >>> issubclass(BackendUnavailableError, RuntimeError)
    True
    """


class CompileError(KernelToolsError, RuntimeError):
    """A generated kernel failed to compile.

    Parameters
    ----------
    message : str
        What failed.
    log : str, default=""
        The compiler's message.
    source_path : str or None, default=None
        Where the generated source was written.

    Attributes
    ----------
    log : str
        The compiler's message.
    source_path : str or None
        Where the generated source was written, to read or to report.

    Examples
    --------
    >>> from kerneltools.exceptions import CompileError
    >>> err = CompileError("kernel 1a2b failed to compile", log="error: ...")
    >>> err.log, err.source_path
    ('error: ...', None)
    """

    def __init__(self, message: str, *, log: str = "", source_path: str | None = None):
        super().__init__(message)
        self.log = log
        self.source_path = source_path


class CacheError(KernelToolsError, OSError):
    """The kernel cache folder could let another user plant code that kerneltools
    would run (owned by someone else, writable by group or others, a link); the
    message names the folder and how to fix it.

    Examples
    --------
    >>> from kerneltools.exceptions import CacheError
    >>> issubclass(CacheError, OSError)
    True
    """


class KernelStoreError(BackendUnavailableError):
    """A new kernel cannot be stored: neither the kernel cache folder nor a
    private temporary folder takes it (full, read-only). The message names
    both folders, why, and how to fix it. ``backend="auto"`` then runs the
    reduction on NumPy."""


class FormulaSyntaxError(KernelToolsError, ValueError):
    """A formula or alias string that does not parse, or that asks for more
    than the limits of formulas allow (:mod:`kerneltools.backend._limits`).

    The message names the argument (when the entry point gave it), the
    reason and the position, and shows the string with a caret under the
    offending character.

    Parameters
    ----------
    message : str
        What is wrong, without the position.
    text : str
        The string.
    pos : int
        The 0-based position of the offending character.
    argument : str or None, default=None
        The argument that held the string.

    Attributes
    ----------
    reason : str
        What is wrong, without the position.
    text : str
        The string.
    pos : int
        The 0-based position of the offending character.
    argument : str or None
        The argument that held the string, as ``"Genred: 'formula'"``.

    Examples
    --------
    >>> from kerneltools.exceptions import FormulaSyntaxError
    >>> print(FormulaSyntaxError("unexpected ')'", "Exp(x))", 6))
    unexpected ')' at position 6:
        Exp(x))
              ^
    """

    def __init__(self, message: str, text: str, pos: int, argument: str | None = None):
        self.text, self.pos, self.reason, self.argument = text, pos, message, argument
        where = f"{argument}: " if argument else ""
        shown, caret = _excerpt(text, pos)
        super().__init__(f"{where}{message} at position {pos}:\n    {shown}\n    {caret}")

    def __reduce__(self):
        return type(self), (self.reason, self.text, self.pos, self.argument)

    def named(self, argument: str) -> "FormulaSyntaxError":
        """The same error, naming the argument that held the string.

        Parameters
        ----------
        argument : str
            The name of the argument that held the formula string.

        Returns
        -------
        FormulaSyntaxError
            A new error with the same reason, string and position, whose
            message begins with ``argument``.
        """
        return type(self)(self.reason, self.text, self.pos, argument)


#: Characters of a string shown on each side of the position in a
#: FormulaSyntaxError (a 10 MB formula is not printed whole).
_EXCERPT = 60


def _excerpt(text: str, pos: int) -> tuple[str, str]:
    """The string (or the part of it around ``pos``) and the caret line."""
    if len(text) <= 2 * _EXCERPT + 20:
        return text, " " * pos + "^"
    start = max(0, pos - _EXCERPT)
    end = min(len(text), pos + _EXCERPT)
    head = "..." if start else ""
    tail = "..." if end < len(text) else ""
    return head + text[start:end] + tail, " " * (len(head) + pos - start) + "^"


class NotPositiveDefiniteError(KernelToolsError, np.linalg.LinAlgError):
    """Conjugate gradients met ``p^T A p <= 0`` beyond rounding: the operator
    is not positive definite (an indefinite kernel, a negative shift); the
    message says which diagonal shift to raise.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.exceptions import NotPositiveDefiniteError
    >>> issubclass(NotPositiveDefiniteError, np.linalg.LinAlgError)
    True
    """


class ConvergenceError(KernelToolsError, RuntimeError):
    """An iterative solver neither reached its tolerance nor could escalate
    (restart, higher precision, a dense solve for small ``n``); the message
    gives the residual reached and the parameter to change. Raised instead of
    returning a result known to be inaccurate.

    Examples
    --------
    >>> from kerneltools.exceptions import ConvergenceError
    >>> issubclass(ConvergenceError, RuntimeError)
    True
    """


@functools.lru_cache(maxsize=None)
def _convergence_warning() -> type:
    # Built on first use: importing scikit-learn takes about a second, and
    # ``import kerneltools`` should not pay for it.
    from sklearn.exceptions import ConvergenceWarning as _SkConvergenceWarning

    class ConvergenceWarning(_SkConvergenceWarning):
        """An iterative solver stopped before reaching its tolerance.

        A subclass of scikit-learn's, so that its warning filters apply.

        Examples
        --------
        >>> from sklearn.exceptions import ConvergenceWarning as Sk
        >>> from kerneltools.exceptions import ConvergenceWarning
        >>> issubclass(ConvergenceWarning, Sk)
        True
        """

    ConvergenceWarning.__module__ = "kerneltools.exceptions"
    ConvergenceWarning.__qualname__ = "ConvergenceWarning"
    return ConvergenceWarning


def __getattr__(name):
    if name == "ConvergenceWarning":
        return _convergence_warning()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class BackendFallbackWarning(UserWarning):
    """``backend='auto'`` fell back to a slower backend (said once per process).

    Examples
    --------
    >>> import warnings
    >>> from kerneltools.exceptions import BackendFallbackWarning
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", BackendFallbackWarning)
    """


class CacheWarning(UserWarning):
    """The kernel cache folder cannot be written: this process compiles into a
    private temporary folder instead (said once; the message says how to fix).

    Examples
    --------
    >>> import warnings
    >>> from kerneltools.exceptions import CacheWarning
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("error", CacheWarning)
    """


#: Errors that say a folder cannot store a new file (as opposed to a bad file).
STORAGE_ERRNOS = frozenset(
    getattr(errno, name) for name in ("ENOSPC", "EDQUOT", "EROFS", "EACCES", "EPERM",
                                      "EFBIG", "ENOTDIR", "EEXIST")
    if hasattr(errno, name))


def is_storage_error(exc: BaseException) -> bool:
    """Whether ``exc`` says a folder cannot store a file (full, read-only, ...)."""
    return isinstance(exc, OSError) and not isinstance(exc, CacheError) and (
        exc.errno in STORAGE_ERRNOS)


#: What a tool says when the disk refuses its files (strerror's words, in the
#: C locale or the user's: both are looked for).
_STORAGE_MESSAGES = {
    code: {os.strerror(code), english}
    for code, english in ((errno.ENOSPC, "No space left on device"),
                          (getattr(errno, "EDQUOT", errno.ENOSPC), "Disk quota exceeded"),
                          (errno.EROFS, "Read-only file system"))
}


def storage_errno(message: str) -> int | None:
    """The errno of a tool's failure (a compiler's log) that says its files
    could not be written (full, over quota, read-only); None otherwise."""
    for code, words in _STORAGE_MESSAGES.items():
        if any(w in message for w in words):
            return code
    return None


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def outside_stacklevel() -> int:
    """The ``stacklevel`` of :func:`warnings.warn`, called by the caller of
    this function, that names the first frame outside kerneltools: the
    user's line, however deep in the package the warning is given."""
    frame, level = sys._getframe(1), 1  # stacklevel 1: the frame that warns
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level
