"""Reductions run in linear memory: the N x M matrix is never stored."""

from __future__ import annotations

import time
import tracemalloc

import numpy as np
import pytest

import kerneltools as kt


@pytest.mark.slow
def test_gaussian_kernel_product_in_linear_memory(monkeypatch):
    """20,000 x 20,000 Gaussian kernel times a vector on the NumPy backend.

    The dense kernel matrix alone would take 3.2 GB in float64; the tiled
    evaluator must stay under 100 MB of Python-visible allocations (NumPy
    reports its buffers to tracemalloc).
    """
    monkeypatch.setenv("KERNELTOOLS_BACKEND", "numpy")  # K @ b takes no backend=
    rng = np.random.default_rng(0)
    N = M = 20_000
    x, y = rng.normal(size=(N, 3)), rng.normal(size=(M, 3))
    b = rng.normal(size=M)
    K = (-kt.Vi(x).sqdist(kt.Vj(y)) / 2).exp()

    tracemalloc.start()
    try:
        start = time.perf_counter()
        out = K @ b
        elapsed = time.perf_counter() - start
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert out.shape == (N,) and out.dtype == np.float64
    assert peak < 100e6, f"peak traced memory {peak / 1e6:.0f} MB"
    assert elapsed < 60, f"took {elapsed:.0f} s"
    # The values are right: a few rows against the dense computation.
    rows = [0, 1, 12_345, N - 1]
    dense = np.exp(-((x[rows, None, :] - y[None]) ** 2).sum(-1) / 2) @ b
    np.testing.assert_allclose(
        out[rows], dense, rtol=1e-10, atol=1e-10 * np.abs(b).sum()
    )
