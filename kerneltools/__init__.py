"""kerneltools: kernel methods that scale, on symbolic tiled reductions.

The public surface: :class:`LazyTensor` with :func:`Vi`, :func:`Vj`, :func:`Pm`,
:func:`minimum` and :func:`maximum`; the exceptions of
:mod:`kerneltools.exceptions`; :func:`info`, :func:`clear_cache` and
:func:`cache_dir`; the estimators of :mod:`kerneltools.estimators` (loaded on
first use); the modules :mod:`kerneltools.kernels` (kernels as formulas) and
:mod:`kerneltools.linalg` (kernel operators and conjugate gradients);
:func:`config_context`, :func:`set_config` and :func:`get_config`, which choose
the backend of every reduction whose ``backend`` is None (thread-local, as
scikit-learn's).

What lives here besides this surface: :mod:`.config`, :mod:`.exceptions`,
the command line (:mod:`.__main__`, :mod:`._info`, :mod:`._check`), the
public helpers :mod:`.dask`, :mod:`.ranges` and :mod:`.selection`, and
:mod:`._moved` (old paths of moved modules, for old pickles); everything
else is a package. What it may import: anything below it; the estimators
only lazily, by name.
"""

from .config import config_context, get_config, set_config
from ._info import info
from ._version import __version__
from .backend.cpu._cache import cache_dir, clear_cache
from .exceptions import BackendUnavailableError, CompileError, KernelToolsError
from .lazy import ComplexLazyTensor, LazyTensor, Pm, Vi, Vj, maximum, minimum
from ._moved import install as _install_moved

_install_moved()  # the old paths of moved modules (pickles of earlier releases)

__all__ = [
    "__version__",
    "LazyTensor",
    "ComplexLazyTensor",
    "Vi",
    "Vj",
    "Pm",
    "minimum",
    "maximum",
    "info",
    "clear_cache",
    "cache_dir",
    "config_context",
    "set_config",
    "get_config",
    "KernelToolsError",
    "BackendUnavailableError",
    "CompileError",
    "ConvergenceWarning",
]


def __getattr__(name):
    # Built on first use: these import scikit-learn, which `import kerneltools`
    # does not.
    if name == "ConvergenceWarning":
        from .exceptions import ConvergenceWarning

        return ConvergenceWarning
    if name.startswith("__"):
        raise AttributeError(name)
    import importlib

    if name == "ranges":  # block-sparsity helpers (NumPy only)
        return importlib.import_module(".ranges", __name__)
    if name == "stats":  # kernel two-sample and independence tests
        return importlib.import_module(".stats", __name__)
    if name == "selection":  # K smallest values over tiles computed elsewhere
        return importlib.import_module(".selection", __name__)

    estimators = importlib.import_module(".estimators", __name__)
    if name in estimators.__all__:
        return getattr(estimators, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
