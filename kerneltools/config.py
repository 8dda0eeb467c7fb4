"""Choosing the backend for a block of code: scikit-learn's configuration pattern.

``backend=`` on a reduction, a :class:`~kerneltools.linalg.KernelOperator` or
an estimator wins; ``backend=None`` (every default) means this thread's
configured backend, set by :func:`set_config` or, for a ``with`` block, by
:func:`config_context`; unset, the process default, the environment variable
``KERNELTOOLS_BACKEND``, else ``"auto"`` (CUDA when CuPy sees a GPU, else the
C backend when a C compiler works, else NumPy with one warning).

The configuration is thread-local: a new thread starts from the process
default, whatever the thread that started it set (as scikit-learn's).
:func:`check_backend` is what estimators call in ``fit``: the backend they
would run on, or :class:`~kerneltools.exceptions.BackendUnavailableError`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from .backend import _dispatch
from .exceptions import BackendUnavailableError

__all__ = ["BACKEND_NAMES", "config_context", "get_config", "set_config", "check_backend"]

#: The names every ``backend`` argument accepts (besides None): "auto" and the
#: registered backends, from the dispatch registry.
BACKEND_NAMES = _dispatch.BACKEND_NAMES


def get_config() -> dict:
    """This thread's kerneltools configuration, as a dict.

    ``{"backend": name}``, where ``name`` is what :func:`set_config` or
    :func:`config_context` set, or None when nothing is set (then
    ``KERNELTOOLS_BACKEND``, else "auto", applies).

    Returns
    -------
    dict
        The settings by name.

    Examples
    --------
    >>> import kerneltools as kt
    >>> with kt.config_context(backend="numpy"):
    ...     kt.get_config()["backend"]
    'numpy'
    """
    return {"backend": _dispatch.configured_backend()}


def set_config(backend: str | None = None) -> None:
    """Set this thread's kerneltools configuration.

    Parameters
    ----------
    backend : {"auto", "cpu", "cuda", "numpy"} or None, default=None
        The backend of every reduction, operator and estimator whose own
        ``backend`` is None. None leaves the setting as it is (as
        scikit-learn's ``set_config``); :func:`config_context` restores the
        previous setting when its block ends.

    Raises
    ------
    ValueError
        ``backend`` is not one of the valid names (the message lists them).

    See Also
    --------
    config_context : The same for a ``with`` block.

    Examples
    --------
    >>> import kerneltools as kt
    >>> previous = kt.get_config()["backend"]
    >>> kt.set_config(backend="numpy")
    >>> kt.get_config()["backend"]
    'numpy'
    >>> kt.set_config(backend=previous or "auto")
    """
    if backend is not None:
        _dispatch.configure_backend(backend)


@contextlib.contextmanager
def config_context(*, backend: str | None = None) -> Iterator[None]:
    """Set this thread's kerneltools configuration for a ``with`` block.

    Parameters
    ----------
    backend : {"auto", "cpu", "cuda", "numpy"} or None, default=None
        As :func:`set_config`; the previous setting comes back when the block
        ends, also on an exception.

    Examples
    --------
    >>> import numpy as np
    >>> import kerneltools as kt
    >>> x = np.random.default_rng(0).normal(size=(50, 3))
    >>> K = (-kt.Vi(x).sqdist(kt.Vj(x))).exp()
    >>> with kt.config_context(backend="numpy"):  # every reduction in here
    ...     a = K @ np.ones(50)
    >>> b = K.matmul(np.ones(50), backend="numpy")  # an explicit backend wins
    >>> bool(np.allclose(a, b))
    True
    """
    old = _dispatch.configured_backend()
    set_config(backend=backend)
    try:
        yield
    finally:
        _dispatch.configure_backend(old)


def check_backend(backend: str | None, who: str) -> str:
    """Resolve a backend name and check that it runs here.

    Estimators call it in ``fit``.

    Parameters
    ----------
    backend : {"auto", "cpu", "cuda", "numpy"} or None
        The backend asked for (None: the configured one).
    who : str
        Names the caller in the error messages.

    Returns
    -------
    str
        The backend name that ``backend`` stands for.

    Raises
    ------
    BackendUnavailableError
        For a backend that cannot run on this machine ("auto" always can),
        naming ``who`` and why.
    ValueError
        For an invalid name.

    Examples
    --------
    >>> from kerneltools.config import check_backend
    >>> check_backend("numpy", "my_function")
    'numpy'
    """
    try:
        return _dispatch.check_available(backend)
    except BackendUnavailableError as exc:
        raise BackendUnavailableError(
            f"{who}: {exc}; use backend='auto' (or None), or another of "
            f"{', '.join(map(repr, _dispatch.BACKEND_NAMES))}"
        ) from None
