"""``pykeops.numpy.utils`` on kerneltools: what pykeops' examples import from it.

:func:`WarmUpGpu`, which pykeops' examples call before timing a reduction
(``from pykeops.numpy.utils import WarmUpGpu``). pykeops' dense reference
helpers of that module (``squared_distances``, ``np_kernel``, ...) are its
test suite's, not an API, and are not provided.
"""

from __future__ import annotations

import numpy as np

__all__ = ["WarmUpGpu"]


def _cuda_available() -> bool:
    """Whether kerneltools' CUDA backend runs here."""
    from ...backend._dispatch import BACKENDS

    entry = BACKENDS.get("cuda")
    return bool(entry is not None and entry.available()[0])


def _warm_up() -> None:
    """One small Gaussian sum on the CUDA backend, twice: the first call
    compiles (or loads) the kernel and creates the GPU context, the second
    runs as a timed call would."""
    from . import Genred

    routine = Genred("Exp(-g * SqDist(x, y)) * b",
                     ["x = Vi(1)", "y = Vj(1)", "b = Vj(1)", "g = Pm(1)"],
                     reduction_op="Sum", axis=1)
    rng = np.random.default_rng(0)
    x, b, g = rng.random((10, 1)), rng.random((10, 1)), np.array([1.0])
    for _ in range(2):
        routine(x, x, b, g, backend="GPU")


def WarmUpGpu() -> None:  # noqa: N802 - pykeops' name
    """Run a first reduction on the GPU, so that later timings exclude the
    compilation and the creation of the GPU context (pykeops'
    ``pykeops.numpy.utils.WarmUpGpu``).

    Without a usable CUDA backend it does nothing (pykeops does likewise
    without a GPU); it prints nothing (pykeops prints a banner).

    Examples
    --------
    >>> from kerneltools.keops.numpy.utils import WarmUpGpu
    >>> WarmUpGpu()
    """
    if _cuda_available():
        _warm_up()
