"""Zero-code-change acceleration: scikit-learn's import paths give kerneltools.

``kerneltools.accel.install()`` (or ``python -m kerneltools.accel script.py``)
makes the scikit-learn estimators that kerneltools replaces import as ours::

    import kerneltools.accel
    kerneltools.accel.install()
    from sklearn.kernel_ridge import KernelRidge   # kerneltools.estimators.KernelRidge

What is patched (:data:`PATCHES`): each class's public module
(``sklearn.neighbors``) and the private module where scikit-learn defines it
(``sklearn.neighbors._unsupervised``), so code importing from either gets ours.
The list is derived from the estimators (:func:`_derive_patches`): a public
class of :mod:`kerneltools.estimators` declares the scikit-learn class it
replaces in its ``_sklearn_class`` attribute (which its fallback to
scikit-learn reads too), so a new estimator is patched with no change here.
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
of the layers), :mod:`kerneltools._utils` (where it records scikit-learn's
classes for the estimators' fallback) and scikit-learn; nothing of
kerneltools imports it.
"""

from __future__ import annotations

import importlib
import importlib.abc
import logging
import sys
import threading
from contextlib import contextmanager
from typing import NamedTuple

from .._utils._originals import originals as _originals

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


def _public_module(module: str) -> str:
    """The public module of a dotted module path: its parts up to the first
    private one (``sklearn.neighbors._graph`` -> ``sklearn.neighbors``), the
    convention of scikit-learn and of kerneltools."""
    parts = module.split(".")
    private = [i for i, part in enumerate(parts) if part.startswith("_")]
    return ".".join(parts[: private[0]]) if private else module


def _patch_of(ours: type, path: str) -> Patch:
    """The patch of our class ``ours``, which declares the scikit-learn class
    it replaces by its public path (``_sklearn_class``)."""
    public, _, name = path.rpartition(".")
    if name != ours.__name__:
        raise TypeError(f"kerneltools.accel: {ours.__module__}.{ours.__qualname__} "
                        f"declares that it replaces {path!r}; a replacement must "
                        "have the name of the class it replaces")
    theirs = getattr(importlib.import_module(public), name)
    defining = theirs.__module__
    if (_public_module(defining) != public
            or getattr(importlib.import_module(defining), name, None) is not theirs):
        raise RuntimeError(f"kerneltools.accel: {path} is {defining}.{name}, not "
                           "scikit-learn's own class; was it patched by another "
                           "library before kerneltools.accel?")
    home = _public_module(ours.__module__)
    if getattr(importlib.import_module(home), name, None) is not ours:
        raise TypeError(f"kerneltools.accel: {ours.__module__}.{name} is not "
                        f"exported by its public module {home}")
    return Patch(public, defining, name, home)


def _derive_patches(estimators=None) -> tuple[Patch, ...]:
    """The patches declared by the estimators (default :mod:`kerneltools.estimators`).

    Each public class of ``estimators`` (its ``__all__``) that holds
    ``_sklearn_class`` itself, not by inheritance (the public dotted path of
    the scikit-learn class it replaces, which its fallback to scikit-learn
    also reads), gives one :class:`Patch`: scikit-learn's public module and
    name from that path, the defining module from scikit-learn's class, ours
    the public module that exports our class. In the order of ``__all__``.
    """
    if estimators is None:
        estimators = importlib.import_module("kerneltools.estimators")
    patches = []
    for attr in estimators.__all__:
        ours = getattr(estimators, attr)
        path = vars(ours).get("_sklearn_class") if isinstance(ours, type) else None
        if path:
            patches.append(_patch_of(ours, path))
    return tuple(patches)


def _patches() -> tuple[Patch, ...]:
    """:data:`PATCHES`, derived once (this imports the estimators and the
    scikit-learn modules they replace)."""
    with _lock:
        if "patches" not in _state:
            _state["patches"] = _derive_patches()
        return _state["patches"]


def __getattr__(name: str):
    if name == "PATCHES":  # derived on first use: importing accel stays light
        return _patches()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")



#: scikit-learn's classes, by public path (``"sklearn.neighbors.NearestNeighbors"``),
#: filled by :func:`install`; the record is kept below the estimators
#: (:mod:`kerneltools._utils._originals`), whose fallback reads it.
originals: dict[str, type] = _originals

_lock = threading.RLock()
_state = {"installed": False, "finder": None, "restored_depth": 0}

#: kerneltools' classes, by the public scikit-learn path they replace, filled
#: by :func:`install`.
replacements: dict[str, type] = {}


def is_installed() -> bool:
    """Tell whether :func:`install` is in effect.

    Returns
    -------
    bool
        True between :func:`install` and :func:`uninstall`.

    Examples
    --------
    >>> from kerneltools import accel
    >>> accel.uninstall()  # a no-op when not installed
    >>> accel.is_installed()
    False
    """
    return _state["installed"]


def original(path: str) -> type:
    """Get scikit-learn's own class at a patched path, installed or not.

    Parameters
    ----------
    path : str
        The class's public path, e.g. ``"sklearn.neighbors.NearestNeighbors"``.

    Returns
    -------
    type
        The class of scikit-learn.

    Examples
    --------
    >>> from kerneltools import accel
    >>> accel.original("sklearn.svm.SVC").__module__
    'sklearn.svm._classes'
    """
    if path in originals:
        return originals[path]
    module, _, name = path.rpartition(".")
    known = {f"{p.public}.{p.name}" for p in _patches()}
    if path not in known:
        raise ValueError(f"kerneltools.accel.original: {path!r} is not a patched class; "
                         f"expected one of {sorted(known)}")
    return getattr(importlib.import_module(module), name)


def _modules(patch: Patch):
    return {importlib.import_module(patch.public), importlib.import_module(patch.defining)}


def _set(which: str) -> None:
    """Point every patched module attribute at ours or at scikit-learn's."""
    for patch in _patches():
        key = f"{patch.public}.{patch.name}"
        cls = replacements[key] if which == "ours" else originals[key]
        for module in _modules(patch):
            setattr(module, patch.name, cls)


def install(verbose: bool = False) -> None:
    """Make scikit-learn's import paths give kerneltools' estimators.

    Idempotent; undone by :func:`uninstall`. Imports the patched scikit-learn
    modules (so that their internals bind scikit-learn's classes first).

    Parameters
    ----------
    verbose : bool, default=False
        Also print each patch to stderr (each is logged at INFO on the
        ``"kerneltools"`` logger either way).

    See Also
    --------
    uninstall : Gives scikit-learn's classes back.

    Examples
    --------
    >>> from kerneltools import accel
    >>> accel.install()
    >>> from sklearn.svm import SVC
    >>> SVC.__module__
    'kerneltools.estimators.svm._classes'
    >>> accel.uninstall()
    """
    with _lock:
        if _state["installed"]:
            return
        for patch in _patches():
            key = f"{patch.public}.{patch.name}"
            # the defining module holds the class even if a public one was
            # patched by someone else before us
            originals[key] = getattr(importlib.import_module(patch.defining), patch.name)
            replacements[key] = getattr(importlib.import_module(patch.ours), patch.name)
        _set("ours")
        finder = _InternalsFinder()
        sys.meta_path.insert(0, finder)
        _state.update(installed=True, finder=finder)
    for patch in _patches():
        modules = sorted({patch.public, patch.defining})
        msg = (f"kerneltools.accel: {' and '.join(modules)}.{patch.name} -> "
               f"{patch.ours}.{patch.name}")
        logger.info(msg)
        if verbose:
            print(msg, file=sys.stderr)


def uninstall() -> None:
    """Give scikit-learn's classes back to its modules (no-op if not installed).

    Examples
    --------
    >>> from kerneltools import accel
    >>> accel.uninstall()
    >>> from sklearn.svm import SVC
    >>> SVC.__module__
    'sklearn.svm._classes'
    """
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
