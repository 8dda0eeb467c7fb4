"""The C backend's wide kernels (D >= 16 features): distances far from the
origin and near zero.

The expanded squared distance ``|x|^2 + |y|^2 - 2 <x, y>`` of the dense C
kernel cancels ~ ``|x|^2`` down to ``|x - y|^2``, so its rounding error
(``eps |x|^2``) swamped the distances of points far from the origin (at D =
15, direct differences, the same data were exact to float32's rounding);
the fix translates the points where the formulas read them as differences
(:func:`kerneltools.backend.cpu._codegen.centring_args`). Near distance 0, a
point's squared distance to itself came out as ~ ``eps |x|^2``, and a square
root makes that absolute error a relative one of ``sqrt(eps)``: fixed below
``WIDE_MIN_DIM`` = 32 features by the direct form, from 32 on by the
micro-kernel, which recomputes directly the pairs whose expanded value is
within its own rounding error of 0. Each test compares against dense NumPy
in float64 on the same rounded inputs (or SciPy).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import logsumexp

import kerneltools as kt

#: The shape of test_cpu_wide's first case (its compiled kernel is reused).
WIDE_D, WIDE_E = 17, 8
#: Relative tolerance on a sum, against the sum of the absolute terms.
WIDE_TOL = {np.dtype(np.float32): 2e-5, np.dtype(np.float64): 1e-12}


def _far_points(dtype, offset=1000.0, n=70, m=600, seed=0):
    """Unit-spread clouds at ``offset`` from the origin in every feature."""
    rng = np.random.default_rng(seed)
    x = (offset + rng.random((n, WIDE_D))).astype(dtype)
    y = (offset + rng.random((m, WIDE_D))).astype(dtype)
    b = rng.standard_normal((m, WIDE_E)).astype(dtype)
    d2 = ((x.astype(np.float64)[:, None] - y.astype(np.float64)[None]) ** 2).sum(-1)
    return x, y, b, d2


def test_wide_gaussian_sum_far_from_the_origin_matches_dense_numpy(backend, dtype):
    x, y, b, d2 = _far_points(dtype)
    g = 3.0 / WIDE_D
    K = np.exp(-g * d2)
    ref, scale = K @ b.astype(np.float64), K @ np.abs(b.astype(np.float64))
    F = (-kt.Vi(x).sqdist(kt.Vj(y)) * g).exp() * kt.Vj(b)
    got = F.sum(axis=1, backend=backend)
    assert got.dtype == dtype
    err = np.max(np.abs(got - ref) / scale)
    assert err <= WIDE_TOL[dtype], f"relative error {err:.2e}"


@settings(max_examples=8, deadline=None)
@given(offset=st.floats(-1e4, 1e4), seed=st.integers(0, 2**16),
       dtype=st.sampled_from([np.float32, np.float64]))
def test_wide_gaussian_sum_is_translation_invariant(offset, seed, dtype):
    """Any offset, along a random direction (C backend where it runs)."""
    from kerneltools.backend._dispatch import BACKENDS

    ok = BACKENDS.get("cpu") is not None and BACKENDS["cpu"].available()[0]
    rng = np.random.default_rng(seed)
    shift = offset * rng.standard_normal(WIDE_D)
    x, y, b, _ = _far_points(dtype, offset=0.0, seed=seed)
    x, y = (x + shift).astype(dtype), (y + shift).astype(dtype)
    X, Y = x.astype(np.float64), y.astype(np.float64)
    K = np.exp(-0.2 * ((X[:, None] - Y[None]) ** 2).sum(-1))
    ref, scale = K @ b.astype(np.float64), K @ np.abs(b.astype(np.float64))
    F = (-kt.Vi(x).sqdist(kt.Vj(y)) * 0.2).exp() * kt.Vj(b)
    got = F.sum(axis=1, backend="cpu" if ok else "numpy")
    assert np.max(np.abs(got - ref) / scale) <= WIDE_TOL[np.dtype(dtype)]


def test_wide_log_sum_exp_far_from_the_origin_matches_scipy(backend, dtype):
    # a Sinkhorn-like softmin at a small temperature: an error of d2 is
    # multiplied by 1 / eps (it was 0.7 nats at offset 100, eps = 0.1, float32)
    x, y, _, d2 = _far_points(dtype, offset=100.0)
    eps = 0.1
    ref = logsumexp(-d2 / eps, axis=1)
    got = (-kt.Vi(x).sqdist(kt.Vj(y)) / eps).logsumexp(axis=1, backend=backend)
    got = np.asarray(got, dtype=np.float64).ravel()
    # float32 inputs: the direct form is exact to ~ u * d2 / eps ~ 1e-4 nats here
    atol = 1e-3 if dtype == np.float32 else 1e-9
    assert np.max(np.abs(got - ref)) <= atol


def test_wide_translation_applies_only_to_formulas_of_differences():
    """The fix of the test above translates the points only where the
    formulas read them as differences of two of them (squared distances,
    their gradients); any other read (a dot product or a norm of its own, a
    difference with a parameter) keeps the points as they are."""
    from kerneltools.backend.cpu._codegen import centring_args

    x, y, b, _ = _far_points(np.float64, offset=0.0)
    xi, yj, bj = kt.Vi(x), kt.Vj(y), kt.Vj(b)
    gauss = (-xi.sqdist(yj) * 0.1).exp()
    p = kt.Pm(np.ones(WIDE_D))

    def positions(F, reduction="Sum"):
        found = centring_args(F._plan(reduction, 1)[0])
        return found[0] if found else ()

    assert positions(gauss * bj) == (0, 1)
    assert positions((gauss * (xi - yj)).sum(-1) * bj) == (0, 1)  # a gradient's form
    assert positions(gauss * (xi | yj) * bj) == ()
    assert positions(gauss * xi.sqnorm2() * bj) == ()
    assert positions(gauss * (xi - p).sum(-1) * bj) == ()


def test_wide_exponential_kernel_on_coinciding_points_matches_numpy(backend, dtype):
    x, _, b, _ = _far_points(dtype, offset=0.0)
    X = x.astype(np.float64)
    K = np.exp(-np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1)))
    ref = K @ b[:70].astype(np.float64)
    scale = K @ np.abs(b[:70].astype(np.float64))
    F = (-(kt.Vi(x) - kt.Vj(x)).norm2()).exp() * kt.Vj(b[:70])
    got = F.sum(axis=1, backend=backend)
    err = np.max(np.abs(got - ref) / scale)
    assert err <= {np.dtype(np.float32): 1e-6, np.dtype(np.float64): 1e-13}[dtype], (
        f"relative error {err:.2e}")


def test_wide_coincidence_tests_on_squared_distances_are_exact(backend, dtype):
    """A test of d2 = 0 (a step, a comparison, an ifelse on the distance:
    coincident points, radius 0) on the expanded form missed points equal
    to themselves: their squared distance came out as ~eps |x|^2."""
    x, _, _, _ = _far_points(dtype, offset=0.0)
    x = np.concatenate([x, x[:20]])  # 20 duplicated points
    X = x.astype(np.float64)
    ref = (((X[:, None] - X[None]) ** 2).sum(-1) == 0).sum(1)
    d2 = kt.Vi(x).sqdist(kt.Vj(x))
    got = (-d2).step().sum(axis=1, backend=backend).ravel()
    np.testing.assert_array_equal(got, ref)


def _wide_duplicates(dtype, d, offset=0.0, n=70, dup=20):
    """``n`` points of ``d`` features at ``offset`` (unit spread), the first
    ``dup`` repeated, rounded to ``dtype``; their exact squared distances."""
    x = (offset + np.random.default_rng(0).random((n, d))).astype(dtype)
    x = np.concatenate([x, x[:dup]])
    X = x.astype(np.float64)
    return x, ((X[:, None] - X[None]) ** 2).sum(-1)


@pytest.mark.parametrize("offset", [0.0, 100.0])
def test_wide_exponential_kernel_on_coinciding_points_from_32_dims(backend, dtype,
                                                                   offset):
    """From WIDE_MIN_DIM features the C backend computed this square root's
    argument in expanded form: a point's squared distance to itself came out
    as ~eps |x|^2, sqrt(eps) after the root (2.5e-4 off in float32, 1e-8 in
    float64 at D = 33). The micro-kernel now recomputes directly the pairs
    whose expanded value is within its rounding error of 0."""
    x, d2 = _wide_duplicates(dtype, 33, offset, dup=0)
    K = np.exp(-np.sqrt(d2))
    got = (-(kt.Vi(x) - kt.Vj(x)).norm2()).exp().sum(axis=1, backend=backend).ravel()
    err = np.max(np.abs(got - K.sum(1)) / K.sum(1))
    assert err <= {np.dtype(np.float32): 1e-6, np.dtype(np.float64): 1e-13}[dtype], (
        f"relative error {err:.2e}")


@pytest.mark.parametrize("d", [33, 64])
def test_wide_coincidence_tests_from_32_dims_are_exact(backend, dtype, d):
    """A step and a comparison of d2 with 0 on duplicated points, from
    WIDE_MIN_DIM features (as the D = 17 test above): each point counts
    itself and its copy."""
    x, d2 = _wide_duplicates(dtype, d)
    ref = 2 * (d2 == 0).sum(1)
    D2 = kt.Vi(x).sqdist(kt.Vj(x))
    got = ((-D2).step() + (D2 <= 0)).sum(axis=1, backend=backend).ravel()
    np.testing.assert_array_equal(got, ref)


def test_wide_log_of_the_distance_from_32_dims(backend, dtype):
    """A log of the distance (a root, then a log) on duplicated points: the
    expanded form's sqrt(eps |x|^2) on the diagonal, against a shift of 1e-3,
    was an error of the order of a nat per pair in float32."""
    x, d2 = _wide_duplicates(dtype, 33)
    ref = np.log(np.sqrt(d2) + 1e-3).sum(1)
    F = ((kt.Vi(x) - kt.Vj(x)).norm2() + 1e-3).log()
    got = F.sum(axis=1, backend=backend).ravel()
    scale = np.abs(np.log(np.sqrt(d2) + 1e-3)).sum(1)
    err = np.max(np.abs(got - ref) / scale)
    assert err <= {np.dtype(np.float32): 1e-6, np.dtype(np.float64): 1e-13}[dtype], (
        f"relative error {err:.2e}")
