"""pykeops spellings that its own examples use, on kerneltools.keops.

- ``from pykeops.numpy.utils import WarmUpGpu`` (the SumSoftMaxWeight
  example): importable, and the example's computation right.
- ``LazyTensor.solve(..., call=False)`` returns an object with ``callfun``
  (the inverse-kernel example prints it), as do deferred reductions.
- ``grid_cluster``: pykeops.numpy's grid is anchored at the origin
  (``floor(x / size)``), pykeops.torch's at the data's minimum
  (``floor((x - min) / size)``): each binding as its pykeops module, against
  those definitions.
"""

from __future__ import annotations

import numpy as np
import pytest

from kerneltools.keops import numpy as kn

try:  # the torch binding is an optional extra
    import torch

    from kerneltools.keops import torch as ktk
except ImportError:
    torch = ktk = None

needs_torch = pytest.mark.skipif(torch is None, reason="the torch binding needs PyTorch")


# -- WarmUpGpu ---------------------------------------------------------------------------


def test_warm_up_gpu_then_the_softmax_example():
    """pykeops' plot_test_softmax_numpy, small: WarmUpGpu() then a
    SumSoftMaxWeight of squared distances against dense NumPy."""
    from kerneltools.keops.numpy import LazyTensor as kf
    from kerneltools.keops.numpy import Vi, Vj
    from kerneltools.keops.numpy.utils import WarmUpGpu

    assert WarmUpGpu() is None
    rng = np.random.default_rng(0)
    x, y, b = 2 * rng.standard_normal((50, 3)), 2 * rng.standard_normal((40, 3)), \
        rng.random((40, 2))
    c = kf.sum((Vi(x) - Vj(y)) ** 2, axis=2)
    c = kf.sumsoftmaxweight(c, Vj(b), axis=1)
    cc = np.sum((x[:, None, :] - y[None, :, :]) ** 2, axis=2)
    cc -= np.max(cc, axis=1)[:, None]
    cc = np.exp(cc) @ b / np.sum(np.exp(cc), axis=1)[:, None]
    assert np.linalg.norm(c - cc) <= 1e-12 * np.linalg.norm(cc)


def test_warm_up_gpu_runs_a_reduction_where_a_gpu_is_used(monkeypatch):
    """With the CUDA backend available, WarmUpGpu runs one small reduction
    there (twice, as pykeops: compile, then the context); else none."""
    from kerneltools.keops.numpy import utils

    calls = []
    monkeypatch.setattr(utils, "_cuda_available", lambda: True)
    monkeypatch.setattr(utils, "_warm_up", lambda: calls.append(1))
    utils.WarmUpGpu()
    assert calls == [1]
    monkeypatch.setattr(utils, "_cuda_available", lambda: False)
    utils.WarmUpGpu()
    assert calls == [1]


# -- callfun -------------------------------------------------------------------------------


def _gaussian_system(module, n=60, seed=1):
    rng = np.random.default_rng(seed)
    x, b = rng.random((n, 2)), rng.random((n, 2))
    if module is kn:
        return x, b
    return torch.tensor(x, requires_grad=True), torch.tensor(b)


def test_deferred_solve_has_callfun_numpy():
    x, b = _gaussian_system(kn)
    sigma, alpha = 0.1, 0.01
    K = (-kn.LazyTensor.sum((kn.Vi(x) - kn.Vj(x)) ** 2, dim=2) / (2 * sigma**2)).exp()
    cfun = K.solve(kn.Vi(b), alpha=alpha, call=False)
    assert "solve" in str(cfun.callfun)
    c = cfun()
    dense = np.exp(-((x[:, None] - x[None]) ** 2).sum(-1) / (2 * sigma**2))
    ref = np.linalg.solve(dense + alpha * np.eye(len(x)), b)
    assert np.linalg.norm(c - ref) <= 1e-5 * np.linalg.norm(ref)
    np.testing.assert_array_equal(cfun.callfun(), c)


@needs_torch
def test_inverse_kernel_example_torch():
    """pykeops' plot_test_invkernel_torch_helper, small: ``keops.solve(...,
    call=False)``, ``cfun()``, ``print(cfun.callfun)``, and the derivative
    against torch's dense solve."""
    from kerneltools.keops.torch import LazyTensor as keops
    from kerneltools.keops.torch import Vi, Vj

    x, b = _gaussian_system(ktk)
    sigma, alpha = 0.1, 0.01
    K_xx = keops.exp(-keops.sum((Vi(x) - Vj(x)) ** 2, dim=2) / (2 * sigma**2))
    cfun = keops.solve(K_xx, Vi(b), alpha=alpha, call=False)
    c = cfun()
    assert str(cfun.callfun)
    c_d = c.detach()
    dense = alpha * torch.eye(len(x), dtype=x.dtype) + torch.exp(
        -torch.sum((x[:, None, :] - x[None, :, :]) ** 2, dim=2) / (2 * sigma**2))
    c_py = torch.linalg.solve(dense, b)
    assert float(torch.norm(c_d - c_py.detach()) / torch.norm(c_py.detach())) <= 1e-5
    e = torch.randn(x.shape, dtype=x.dtype, generator=torch.Generator().manual_seed(0))
    (u,) = torch.autograd.grad(c, x, e)
    (u_py,) = torch.autograd.grad(c_py, x, e)
    assert float(torch.norm(u - u_py) / torch.norm(u_py)) <= 1e-4


def test_deferred_reduction_has_callfun():
    rng = np.random.default_rng(2)
    x, y = rng.random((7, 3)), rng.random((5, 3))
    red = kn.LazyTensor.sum(kn.Vi(x) * kn.Vj(y), dim=2).sum(axis=1, call=False)
    assert "Sum" in str(red.callfun) or "sum" in str(red.callfun)
    np.testing.assert_allclose(red.callfun(), (x @ y.T).sum(1)[:, None], rtol=1e-12)


# -- grid_cluster --------------------------------------------------------------------------


def compact_labels(cells):
    """Labels 0..C-1 of the distinct rows of ``cells``, in lexicographic order
    (pykeops' order: its packed key ``sum_d cell_d 1024^(D-1-d)`` is
    lexicographic while each feature spans fewer than 1024 cells)."""
    return np.unique(cells, axis=0, return_inverse=True)[1].reshape(-1)


def test_numpy_grid_cluster_is_anchored_at_the_origin():
    from kerneltools.keops.numpy.cluster import grid_cluster

    # pykeops' own docstring example
    x = np.array([[0.0], [0.1], [0.9], [0.05], [0.5]])
    np.testing.assert_array_equal(grid_cluster(x, 0.2), [0, 0, 2, 0, 1])
    # anchored at the minimum, 0.15 and 0.25 would share a cell
    np.testing.assert_array_equal(grid_cluster(np.array([[0.15], [0.25], [0.45]]), 0.2),
                                  [0, 1, 2])
    rng = np.random.default_rng(3)
    for d in (1, 2, 3, 5):  # pykeops.numpy stops at D = 3 (NotImplementedError)
        pts = rng.normal(size=(300, d)) * 3 - 1.3
        size = rng.uniform(0.3, 1.0, size=d)
        labels = grid_cluster(pts, size)
        assert labels.dtype == np.int64
        np.testing.assert_array_equal(labels, compact_labels(np.floor(pts / size)))


@needs_torch
def test_torch_grid_cluster_is_anchored_at_the_minimum():
    from kerneltools.keops.torch.cluster import grid_cluster

    x = torch.tensor([[0.15], [0.25], [0.45]], dtype=torch.float64)
    assert grid_cluster(x, 0.2).tolist() == [0, 0, 1]
    rng = np.random.default_rng(4)
    pts = rng.normal(size=(300, 3)) * 3 - 1.3
    labels = grid_cluster(torch.tensor(pts), 0.7)
    ref = compact_labels(np.floor((pts - pts.min(0)) / 0.7))
    np.testing.assert_array_equal(labels.numpy(), ref)


def test_numpy_grid_cluster_bad_input():
    from kerneltools.keops.numpy.cluster import grid_cluster

    x = np.zeros((4, 2))
    for size, match in [(0.0, "'size'"), (-1.0, "'size'"), (np.nan, "'size'"),
                        ([1.0, 2.0, 3.0], "'size'")]:
        with pytest.raises(ValueError, match=match):
            grid_cluster(x, size)
    with pytest.raises(ValueError, match="'x'"):
        grid_cluster(np.zeros(4), 1.0)
    with pytest.raises(ValueError, match="'x'"):
        grid_cluster(np.array([[np.nan, 0.0]]), 1.0)
    with pytest.raises(ValueError, match="too small"):
        grid_cluster(np.array([[0.0], [1e300]]), 1e-300)
