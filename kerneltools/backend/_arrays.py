"""What kind of array a value is, for every layer, without importing CuPy.

Neutral ground: the bindings (``kerneltools.lazy``, ``kerneltools.torch``),
dispatch and the CUDA backend all ask whether an array lives on the GPU, and
none of them should have to import a specific backend to know.
"""

from __future__ import annotations

import numpy as np

__all__ = ["array_module", "is_cupy_array"]


def is_cupy_array(a) -> bool:
    """True for a CuPy ndarray, without importing CuPy."""
    mod = type(a).__module__
    return mod.startswith("cupy") and hasattr(a, "__cuda_array_interface__")


def array_module(a):
    """``cupy`` for a CuPy array, else ``numpy``."""
    if is_cupy_array(a):
        import cupy

        return cupy
    return np
