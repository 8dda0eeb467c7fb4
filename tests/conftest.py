"""Shared fixtures: the backends to run on, the dtypes and their tolerances."""

from __future__ import annotations

import os
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

# Under pytest-xdist (the README's ``-n 2`` on two cores), the generated
# kernels' OpenMP threads sleep when they wait instead of spinning: each
# worker's kernels run as many threads as there are cores, so the two
# workers' threads share the cores, and a thread spinning at a barrier or
# between parallel regions (libgomp spins ~300,000 times first) burns the
# time slice of the other worker's thread it waits for (a loop of 100
# Gaussian sums at load 10: 1.47 CPU s spinning, 0.26 asleep). The number
# of threads, and so what the tests exercise, is unchanged; a user's own
# setting is kept. (Set before any OpenMP runtime is loaded: libgomp reads
# it once, when the first kernel loads it.)
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

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



def pytest_configure(config):
    """Under pytest-xdist, BLAS gets the cores per worker (scikit-learn's
    conftest does the same): with ``-n 2`` on two cores, each worker's
    OpenBLAS ran two threads that spin while the other worker computes; the
    dense factorisations of the GP and KernelRidge tests then took 4 times
    the CPU time (a 569 x 569 solve: 1.5 s instead of 8 ms). Only BLAS: the
    generated kernels' OpenMP threads are what several tests exercise."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not workers:
        return
    import scipy.linalg  # noqa: F401, PLC0415 - load SciPy's own OpenBLAS too
    from threadpoolctl import threadpool_limits  # noqa: PLC0415

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
        else os.cpu_count() or 1
    threadpool_limits(max(1, cores // int(workers)), user_api="blas")


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
