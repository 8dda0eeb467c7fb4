"""scikit-learn's own classes, by public path, whether accel is installed or not.

:mod:`kerneltools.accel` records here each scikit-learn class it replaces
(:data:`originals`, filled by ``install``) before pointing scikit-learn's
import paths at ours; an estimator's fallback (its hand-over of a call the
engine does not serve) reads them with :func:`original`. The record lives
below the estimators so that they never import :mod:`kerneltools.accel`,
which imports them.
"""

from __future__ import annotations

import importlib

__all__ = ["original", "originals"]

#: scikit-learn's classes, by public path (``"sklearn.neighbors.NearestNeighbors"``),
#: filled by :func:`kerneltools.accel.install` (the same dict as
#: ``kerneltools.accel.originals``).
originals: dict[str, type] = {}


def original(path: str) -> type:
    """scikit-learn's own class at ``path`` (``"sklearn.kernel_ridge.KernelRidge"``).

    The class recorded by :func:`kerneltools.accel.install` if there is one,
    else the attribute of scikit-learn's module, which is then scikit-learn's
    own (accel patches a path only after recording its class here).
    """
    if path in originals:
        return originals[path]
    module, _, name = path.rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    if cls.__module__.split(".")[0] == "kerneltools":
        raise RuntimeError(f"{path} is kerneltools' {cls.__module__}.{name}, not "
                           "recorded as replaced by kerneltools.accel: who patched it?")
    return cls
