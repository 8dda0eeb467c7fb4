"""Zero-code-change acceleration: scikit-learn's import paths give kerneltools.

``kerneltools.accel.install()`` (or ``python -m kerneltools.accel script.py``)
makes the scikit-learn estimators that kerneltools replaces import as ours::

    import kerneltools.accel
    kerneltools.accel.install()
    from sklearn.kernel_ridge import KernelRidge   # kerneltools.estimators.KernelRidge

What is patched (:data:`PATCHES`): each class's public module
(``sklearn.neighbors``) and the private module where scikit-learn defines it
(``sklearn.neighbors._unsupervised``), so code importing from either gets ours.
Install before importing the script's scikit-learn names: a name bound by
``from sklearn... import`` before :func:`install` stays scikit-learn's.

What is not patched: scikit-learn's own internals. Modules of ``sklearn`` (and
of ``kerneltools``) that bind these names at import time, such as
``sklearn.neighbors._graph`` (``kneighbors_graph``), ``sklearn.manifold`` or
``sklearn.cluster``, keep scikit-learn's classes, whether they were imported
before :func:`install` or after it (they are then executed with the originals
in place): they subclass these classes, check ``isinstance`` against them and
rely on their private attributes. scikit-learn's test modules
(``sklearn.*.tests.*``) are user code here and get ours: that is the
conformance run (``tests/conformance/``). A lookup at call time, such as
``sklearn.neighbors.NearestNeighbors`` read inside a function, gives ours;
:func:`original` gives scikit-learn's class at any time.

Each patch is logged at INFO on the ``"kerneltools"`` logger
(``install(verbose=True)`` also prints them).

What lives here: :func:`install` and the patch list; :mod:`.__main__` runs a
script with it. What it may import: :mod:`kerneltools.estimators` (the top
of the layers) and scikit-learn; nothing imports it but the fallback's
lookup of scikit-learn's own classes.
"""

from __future__ import annotations

import importlib
import importlib.abc
import logging
import sys
import threading
from contextlib import contextmanager
from typing import NamedTuple

__all__ = ["PATCHES", "install", "uninstall", "is_installed", "original", "originals",
           "replacements"]

logger = logging.getLogger("kerneltools")


class Patch(NamedTuple):
    """One replaced class: scikit-learn's public module, the private module
    that defines it, its name, and ours (a dotted path, imported on install)."""

    public: str
    defining: str
    name: str
    ours: str


PATCHES: tuple[Patch, ...] = (
    Patch("sklearn.kernel_ridge", "sklearn.kernel_ridge", "KernelRidge",
          "kerneltools.estimators.kernel_ridge"),
    Patch("sklearn.gaussian_process", "sklearn.gaussian_process._gpr",
          "GaussianProcessRegressor", "kerneltools.estimators.gaussian_process"),
    Patch("sklearn.neighbors", "sklearn.neighbors._unsupervised", "NearestNeighbors",
          "kerneltools.estimators.neighbors"),
    Patch("sklearn.neighbors", "sklearn.neighbors._classification",
          "KNeighborsClassifier", "kerneltools.estimators.neighbors"),
    Patch("sklearn.neighbors", "sklearn.neighbors._regression", "KNeighborsRegressor",
          "kerneltools.estimators.neighbors"),
    Patch("sklearn.kernel_approximation", "sklearn.kernel_approximation", "Nystroem",
          "kerneltools.estimators.nystroem"),
    Patch("sklearn.decomposition", "sklearn.decomposition._kernel_pca", "KernelPCA",
          "kerneltools.estimators.kernel_pca"),
    Patch("sklearn.manifold", "sklearn.manifold._spectral_embedding", "SpectralEmbedding",
          "kerneltools.estimators.spectral"),
    Patch("sklearn.cluster", "sklearn.cluster._spectral", "SpectralClustering",
          "kerneltools.estimators.spectral"),
    Patch("sklearn.neighbors", "sklearn.neighbors._kde", "KernelDensity",
          "kerneltools.estimators.density"),
    Patch("sklearn.neighbors", "sklearn.neighbors._lof", "LocalOutlierFactor",
          "kerneltools.estimators.outliers"),
    Patch("sklearn.cluster", "sklearn.cluster._mean_shift", "MeanShift",
          "kerneltools.estimators.mean_shift"),
    Patch("sklearn.neighbors", "sklearn.neighbors._classification",
          "RadiusNeighborsClassifier", "kerneltools.estimators.neighbors"),
    Patch("sklearn.neighbors", "sklearn.neighbors._regression",
          "RadiusNeighborsRegressor", "kerneltools.estimators.neighbors"),
    Patch("sklearn.neighbors", "sklearn.neighbors._graph", "KNeighborsTransformer",
          "kerneltools.estimators.neighbors"),
    Patch("sklearn.neighbors", "sklearn.neighbors._graph",
          "RadiusNeighborsTransformer", "kerneltools.estimators.neighbors"),
)

#: scikit-learn's classes, by public path (``"sklearn.neighbors.NearestNeighbors"``),
#: filled by :func:`install`.
originals: dict[str, type] = {}

_lock = threading.RLock()
_state = {"installed": False, "finder": None, "restored_depth": 0}

#: kerneltools' classes, by the public scikit-learn path they replace, filled
#: by :func:`install`.
replacements: dict[str, type] = {}


def is_installed() -> bool:
    """Whether :func:`install` is in effect."""
    return _state["installed"]


def original(path: str) -> type:
    """scikit-learn's own class at ``path`` (e.g. ``"sklearn.neighbors.NearestNeighbors"``),
    installed or not."""
    if path in originals:
        return originals[path]
    module, _, name = path.rpartition(".")
    known = {f"{p.public}.{p.name}" for p in PATCHES}
    if path not in known:
        raise ValueError(f"kerneltools.accel.original: {path!r} is not a patched class; "
                         f"expected one of {sorted(known)}")
    return getattr(importlib.import_module(module), name)


def _modules(patch: Patch):
    return {importlib.import_module(patch.public), importlib.import_module(patch.defining)}


def _set(which: str) -> None:
    """Point every patched module attribute at ours or at scikit-learn's."""
    for patch in PATCHES:
        key = f"{patch.public}.{patch.name}"
        cls = replacements[key] if which == "ours" else originals[key]
        for module in _modules(patch):
            setattr(module, patch.name, cls)


def install(verbose: bool = False) -> None:
    """Make scikit-learn's import paths give kerneltools' estimators.

    Idempotent; undone by :func:`uninstall`. Imports the patched scikit-learn
    modules (so that their internals bind scikit-learn's classes first).
    """
    with _lock:
        if _state["installed"]:
            return
        for patch in PATCHES:
            key = f"{patch.public}.{patch.name}"
            # the defining module holds the class even if a public one was
            # patched by someone else before us
            originals[key] = getattr(importlib.import_module(patch.defining), patch.name)
            replacements[key] = getattr(importlib.import_module(patch.ours), patch.name)
        _set("ours")
        finder = _InternalsFinder()
        sys.meta_path.insert(0, finder)
        _state.update(installed=True, finder=finder)
    for patch in PATCHES:
        modules = sorted({patch.public, patch.defining})
        msg = (f"kerneltools.accel: {' and '.join(modules)}.{patch.name} -> "
               f"{patch.ours}.{patch.name}")
        logger.info(msg)
        if verbose:
            print(msg, file=sys.stderr)


def uninstall() -> None:
    """Give scikit-learn's classes back to its modules (no-op if not installed)."""
    with _lock:
        if not _state["installed"]:
            return
        _set("originals")
        try:
            sys.meta_path.remove(_state["finder"])
        except ValueError:
            pass
        _state.update(installed=False, finder=None)
    logger.info("kerneltools.accel: uninstalled, scikit-learn's classes restored")


@contextmanager
def _originals_in_place():
    """While an internal module executes: scikit-learn's classes in its modules."""
    with _lock:
        if _state["restored_depth"] == 0 and _state["installed"]:
            _set("originals")
        _state["restored_depth"] += 1
    try:
        yield
    finally:
        with _lock:
            _state["restored_depth"] -= 1
            if _state["restored_depth"] == 0 and _state["installed"]:
                _set("ours")


def _is_internal(fullname: str) -> bool:
    """scikit-learn's and kerneltools' own modules, not their tests."""
    parts = fullname.split(".")
    if parts[0] not in ("sklearn", "kerneltools"):
        return False
    return not any(p in ("tests", "conftest") or p.startswith("test_") for p in parts)


class _InternalsFinder(importlib.abc.MetaPathFinder):
    """Finds internal modules with the other finders, and wraps their loader
    so that they execute with scikit-learn's classes in place."""

    def find_spec(self, fullname, path, target=None):
        if not _is_internal(fullname):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _InternalsLoader(spec.loader)
        return spec


class _InternalsLoader(importlib.abc.Loader):
    """A loader that runs the wrapped one with the originals in place; every
    other attribute (resources, source, filename) is the wrapped loader's."""

    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        with _originals_in_place():  # extension modules execute here
            return self._loader.create_module(spec)

    def exec_module(self, module):
        with _originals_in_place():
            self._loader.exec_module(module)

    def __getattr__(self, name):
        return getattr(self._loader, name)
