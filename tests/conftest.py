"""Shared fixtures: the backends to run on, the dtypes and their tolerances."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings

# The tests' helper modules (``_helpers``, ``_reference``, ...) live in
# tests/_support/, the one test folder on ``sys.path``: the suite runs in
# pytest's importlib mode, so that tests/torch/ and tests/ot/ never stand for
# the ``torch`` and ``ot`` (POT) packages.
sys.path.insert(0, str(Path(__file__).resolve().parent / "_support"))

import kerneltools  # noqa: E402,F401  (importing the package registers its backends)
from kerneltools.backend._dispatch import BACKENDS  # noqa: E402

# No per-example deadline: the first call of a compiled backend includes the
# compilation. `pytest --hypothesis-profile=ci` gives derandomised runs.
settings.register_profile("default", deadline=None, max_examples=25)
settings.register_profile("ci", deadline=None, max_examples=25, derandomize=True)
settings.load_profile("default")

# scikit-learn's own tests under kerneltools.accel: not in the default run
# (python tests/conformance/run.py runs them).
collect_ignore = ["conformance"]

BACKEND_NAMES = ["numpy", "cpu", "cuda"]

#: Relative tolerance of a reduction computed in a dtype, against a float64
#: reference on the same (rounded) inputs. Tests whose math amplifies rounding
#: (cancellations, large dynamic ranges) loosen it and say why.
RTOL = {np.dtype(np.float32): 1e-4, np.dtype(np.float64): 1e-10}


@pytest.fixture(params=[pytest.param(n, marks=pytest.mark.gpu) if n == "cuda" else n
                        for n in BACKEND_NAMES])
def backend(request) -> str:
    """Each backend of this build that can run here; the others are skipped."""
    name = request.param
    entry = BACKENDS.get(name)
    if entry is None:
        pytest.skip(f"backend {name!r} is not registered in this build")
    ok, why = entry.available()
    if not ok:
        pytest.skip(f"backend {name!r} unavailable: {why}")
    return name


@pytest.fixture(params=[np.float32, np.float64], ids=["float32", "float64"])
def dtype(request) -> np.dtype:
    return np.dtype(request.param)


@pytest.fixture
def rtol(dtype) -> float:
    """Relative tolerance for results computed in ``dtype``."""
    return RTOL[dtype]
