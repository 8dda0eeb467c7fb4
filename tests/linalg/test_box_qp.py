"""The inner SMO of the SVMs (kerneltools.linalg.smo_block): the compiled
loop against the NumPy reference (the same operations in float64: identical
iterates), and the block's optimality checked in dense NumPy."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics.pairwise import rbf_kernel

from kerneltools.linalg import smo_block, smo_block_numpy, smo_native_available

needs_c = pytest.mark.skipif(not smo_native_available(), reason="no C compiler")


def _block(seed, b, nu, C=1.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(b, 4))
    y = np.where(rng.random(b) < 0.4, 1.0, -1.0)
    K = rbf_kernel(X, gamma=0.3).astype(np.float32)
    Cv = np.full(b, C) * np.where(y > 0, 1.0, 2.0)  # class weights
    alpha = rng.uniform(0, 0.5, b) * (np.minimum(Cv, 1.0) if nu else 0.0)
    p = np.zeros(b) if nu else -np.ones(b)
    G = y * (K.astype(np.float64) @ (y * alpha)) + p
    return alpha, G, y, Cv, K, np.ones(b)


def _violation(alpha, G, y, C, nu):
    """libsvm's maximal violation ``max_up -yG - min_low -yG``, in dense NumPy."""
    v = -y * G
    up = np.where(y > 0, alpha < C, alpha > 0)
    low = np.where(y > 0, alpha > 0, alpha < C)
    groups = [y > 0, y < 0] if nu else [np.ones(len(y), bool)]
    return max(v[up & g].max() - v[low & g].min() for g in groups)


@needs_c
@pytest.mark.parametrize("nu", [False, True])
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("b", [7, 160, 700])
def test_compiled_loop_has_the_reference_iterates(seed, b, nu):
    args = _block(seed, b, nu)
    for max_iter in (-1, 5):
        a1, v1, i1 = smo_block(*args, eps=1e-3, nu=nu, max_iter=max_iter)
        a2, v2, i2 = smo_block_numpy(*args, eps=1e-3, nu=nu, max_iter=max_iter)
        assert i1 == i2 and (max_iter == -1 or i1 <= max_iter)
        np.testing.assert_array_equal(a1, a2)
        np.testing.assert_array_equal(v1, v2)


@needs_c
def test_hard_margin_matches_the_reference():
    """C = inf: libsvm's clipping compares with inf - inf = nan, in C and NumPy."""
    alpha, G, y, _, K, kd = _block(5, 120, False)
    C = np.full(len(y), np.inf)
    a1, v1, i1 = smo_block(alpha, G, y, C, K, kd, eps=1e-3, max_iter=2000)
    a2, v2, i2 = smo_block_numpy(alpha, G, y, C, K, kd, eps=1e-3, max_iter=2000)
    assert i1 == i2
    np.testing.assert_array_equal(a1, a2)
    np.testing.assert_array_equal(v1, v2)


@pytest.mark.parametrize("backend", [None, "numpy"])
@pytest.mark.parametrize("nu", [False, True])
def test_block_is_solved_to_eps(backend, nu):
    """The result is feasible (box, the equality constraints) and its violation,
    with the gradient recomputed densely, is below eps (up to the rounding of
    the gradient's running update)."""
    alpha, G, y, C, K, kd = _block(11, 300, nu)
    a, v, its = smo_block(alpha, G, y, C, K, kd, eps=1e-3, nu=nu, backend=backend)
    assert its > 0
    assert np.all(a >= 0) and np.all(a <= C)
    assert abs(y @ a - y @ alpha) < 1e-9 * max(1.0, np.abs(alpha).sum())
    if nu:
        for g in (y > 0, y < 0):
            assert abs(a[g].sum() - alpha[g].sum()) < 1e-9 * len(a)
    Gd = G + y * (K.astype(np.float64) @ (y * (a - alpha)))
    np.testing.assert_allclose(-y * v, Gd, rtol=0, atol=1e-9)
    assert _violation(a, Gd, y, C, nu) < 1e-3 + 1e-9
    assert _violation(alpha, G, y, C, nu) > 1e-3  # the start was not optimal


def test_without_a_compiler_the_numpy_loop_runs(monkeypatch):
    from kerneltools.linalg import _box_qp

    monkeypatch.setattr(_box_qp, "_loaded", [None])  # as when no compiler works
    assert not smo_native_available()
    args = _block(3, 90, False)
    a1, v1, i1 = smo_block(*args, eps=1e-3)
    a2, v2, i2 = smo_block_numpy(*args, eps=1e-3)
    assert i1 == i2 > 0
    np.testing.assert_array_equal(a1, a2)
    np.testing.assert_array_equal(v1, v2)


@needs_c
@pytest.mark.parametrize("nu", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_shrinking_reaches_eps_and_rebuilds_the_whole_gradient(seed, nu):
    """libsvm's shrinking (compiled): variables leave and come back (the
    gradient rebuilt from G_bar and the free variables), and the end is the
    dense gradient's optimum to eps, from a start with variables at both
    bounds; without a compiler (the NumPy backend) the loop runs unshrunk."""
    alpha, G, y, C, K, kd = _block(seed, 1500, nu)
    alpha[:40] = C[:40]  # some at the upper bound: G_bar carries them
    if not nu:
        alpha[40:80] = 0.0
    p = np.zeros(len(y)) if nu else -np.ones(len(y))
    G = y * (K.astype(np.float64) @ (y * alpha)) + p
    a, v, its = smo_block(alpha, G, y, C, K, kd, eps=1e-3, nu=nu, p=p,
                          shrinking=True)
    Gd = y * (K.astype(np.float64) @ (y * a)) + p
    np.testing.assert_allclose(-y * v, Gd, rtol=0, atol=1e-8)
    assert _violation(a, Gd, y, C, nu) < 1e-3 + 1e-9
    assert abs(y @ a - y @ alpha) < 1e-9 * len(a)
    a0, _, its0 = smo_block(alpha, G, y, C, K, kd, eps=1e-3, nu=nu)
    a1, _, its1 = smo_block(alpha, G, y, C, K, kd, eps=1e-3, nu=nu, p=p,
                            shrinking=True, backend="numpy")
    assert its1 == its0  # the NumPy reference ignores shrinking
    np.testing.assert_array_equal(a1, a0)
    Kd = K.astype(np.float64)
    obj = [0.5 * (y * x) @ Kd @ (y * x) + p @ x for x in (a, a0)]
    assert obj[0] == pytest.approx(obj[1], rel=1e-5, abs=1e-6)
