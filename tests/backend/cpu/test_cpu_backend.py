"""The CPU backend: generated source pinned, accuracy, threads, limits.

The correctness of every operation and reduction on this backend is checked by
the shared suites (test_ops.py, test_reductions.py) through the ``backend``
fixture; this folder checks what is specific to generated C, one subject a
file: building and caching the C (test_library.py), the exps and factored
sums (test_exps.py), the folds over tiles (test_folds.py), wide formulas and
many-column sums (test_cpu_wide.py), the K-min prefilter
(test_kmin_prefilter.py), ...; the kernel-cache fixtures are in conftest.py.
"""

import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import kerneltools as kt
from kerneltools.backend.cpu import _backend as _cpu_backend
from kerneltools.backend.cpu._compiler import find_compiler
from kerneltools.exceptions import BackendUnavailableError

pytestmark = pytest.mark.skipif(
    not find_compiler().ok, reason=f"no C compiler: {find_compiler().reason}"
)

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def _gauss(n=50, m=40, d=3, dtype=np.float64, gamma=0.5, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((n, d)).astype(dtype)
    y = rng.random((m, d)).astype(dtype)
    b = rng.random((m, 2)).astype(dtype)
    K = (-kt.Vi(x).sqdist(kt.Vj(y)) * gamma).exp()
    dense = np.exp(-gamma * ((x[:, None].astype(float) - y[None]) ** 2).sum(-1)) @ b
    return K, b, dense


def _golden_plans():
    rng = np.random.default_rng(0)
    x, y = rng.random((5, 3)), rng.random((6, 3))
    w = rng.random((6, 2))
    x32 = kt.Vi(x.astype(np.float32))
    gauss32 = (-x32.sqdist(kt.Vj(y.astype(np.float32))) * 0.5).exp()
    f = kt.Vi(x).sqdist(kt.Vj(y))
    return {
        "gauss_sum_float32": (gauss32 * kt.Vj(w[:, :1].astype(np.float32)))._plan("Sum", 1)[0],
        # float64: the explicit AVX-512 vector loop before the scalar one (_cpu_vec)
        "gauss_sum_float64": ((-kt.Vi(x).sqdist(kt.Vj(y)) * 0.5).exp() * kt.Vj(w[:, :1]))
        ._plan("Sum", 1)[0],
        "sqdist_argkmin_float64": f._plan("ArgKMin", 1, K=3)[0],
        "lse_weight_axis0_float64": (-f)._plan("LogSumExpWeight", 0, weight=kt.Vi(x[:, :2]))[0],
        # the gradient: -2 g e_i out of the sum, tested finite (_cpu_factor)
        "gauss_grad_float32": (gauss32 * kt.Vj(w[:, :1].astype(np.float32)))
        .grad(x32, kt.Vi(x[:, :1].astype(np.float32)))._plan("Sum", 1)[0],
        # in-loop sums tested by their own size, 8 rows per loop (_cpu_rows)
        "lse_float64": (-f)._plan("LogSumExp", 1)[0],
        # K @ B with B of 8 columns: the many-column GEMM form (_cpu_gemm)
        "gauss_manycol_float32": (gauss32 * kt.Vj(rng.random((6, 8)).astype(np.float32)))
        ._plan("Sum", 1)[0],
    }


@pytest.mark.parametrize("name", sorted(_golden_plans()))
def test_generated_source_is_pinned(name):
    """Golden files: a change to the generated C shows in review.

    Regenerate with KERNELTOOLS_UPDATE_GOLDEN=1 after checking the diff.
    """
    source = _cpu_backend.generate_source(_golden_plans()[name], vector_math=True, key="golden")
    path = GOLDEN / f"{name}.c"
    if os.environ.get("KERNELTOOLS_UPDATE_GOLDEN"):
        path.write_text(source)
    assert source == path.read_text()


@pytest.mark.parametrize("name", ["gauss_sum_float32", "sqdist_argkmin_float64"])
def test_generated_block_sparse_source_is_pinned(name):
    """The block-sparse variant (``ranges=``) of two golden plans."""
    source = _cpu_backend.generate_source(_golden_plans()[name], vector_math=True,
                                          key="golden", ranges=True)
    path = GOLDEN / f"{name}_ranges.c"
    if os.environ.get("KERNELTOOLS_UPDATE_GOLDEN"):
        path.write_text(source)
    assert source == path.read_text()


@pytest.mark.parametrize("m", [1, 7, 8, 9, 23, 300])
@pytest.mark.parametrize("gamma", [0.5, 8.0, 3e4])
def test_float64_gaussian_sum_matches_numpy(m, gamma):
    """Float64 exp(-g |x - y|^2) sums (the explicit AVX-512 loop and its
    table exp, the scalar loop for a tile's last m % 8 points, the expanded
    distance where its bound holds) within 1e-14 of NumPy's, relative to
    the largest output; g = 3e4 underflows most terms (2^z, z < -1022: 0),
    and the rest have exponents up to ~700, whose rounding (eps |z|, in NumPy's
    result too) allows 2e-12."""
    rng = np.random.default_rng(m)
    x, y = rng.random((300, 3)), rng.random((m, 3))  # >= NEAR_MIN_ROWS rows
    b = rng.standard_normal((m, 1))
    K = (-kt.Vi(x).sqdist(kt.Vj(y)) * gamma).exp()
    ref = np.exp(-gamma * ((x[:, None] - y[None]) ** 2).sum(-1)) @ b
    out = (K * kt.Vj(b)).sum(axis=1, backend="cpu")
    tol = 1e-14 if gamma < 100 else 2e-12
    np.testing.assert_allclose(out, ref, rtol=0, atol=tol * np.abs(ref).max())


@pytest.mark.parametrize("gamma", [2.0, 16.0])
def test_float64_expanded_distance_at_its_bound(gamma):
    """Points on a sphere about the mean of y, with k (|x - c|^2 + |y - c|^2)
    just inside _cpu_near.NEAR_LIMIT (k = g log2 e), 400 rows (at least
    NEAR_MIN_ROWS): the expanded form runs at its largest rounding, and
    stays within 1e-14 of a long-double sum (measured 4e-16; NumPy's float64
    result 1e-15)."""
    from kerneltools.backend.cpu._near import NEAR_LIMIT

    rng = np.random.default_rng(3)
    r = np.sqrt(0.99 * NEAR_LIMIT / (2 * gamma * np.log2(np.e)))

    def shell(n):
        p = rng.standard_normal((n, 3))
        return r * p / np.linalg.norm(p, axis=1, keepdims=True)

    x, b = shell(400), rng.standard_normal((500, 1))
    y = shell(250)
    y = np.concatenate([y, -y])  # their mean, the centre, is 0: |y - c| = r
    xl, yl = x.astype(np.longdouble), y.astype(np.longdouble)
    d2 = ((xl[:, None] - yl[None]) ** 2).sum(-1)
    ref = np.exp(-np.longdouble(gamma) * d2) @ b.astype(np.longdouble)
    out = ((-kt.Vi(x).sqdist(kt.Vj(y)) * gamma).exp() * kt.Vj(b)).sum(axis=1, backend="cpu")
    err = np.max(np.abs(out - ref)) / np.max(np.abs(ref))
    assert err < 1e-14


@pytest.mark.parametrize("m", [1, 9, 300, 1000])
def test_float64_logsumexp_matches_numpy(m):
    """Float64 log-sum-exp (the in-loop sums in the explicit AVX-512 loop,
    the tile's last m % 8 points in the scalar one) within 1e-14 of NumPy;
    a NaN in h_j reaches every row (each reads it), as in NumPy."""
    rng = np.random.default_rng(m)
    x, y = rng.random((37, 3)), rng.random((m, 3))
    h = 0.1 * rng.standard_normal((m, 1))
    F = -kt.Vi(x).sqdist(kt.Vj(y)) * 400.0 + kt.Vj(h)
    v = -400.0 * ((x[:, None] - y[None]) ** 2).sum(-1) + h[:, 0]
    mx = v.max(1, keepdims=True)
    ref = np.log(np.exp(v - mx).sum(1, keepdims=True)) + mx
    out = F.logsumexp(axis=1, backend="cpu")
    np.testing.assert_allclose(out, ref, rtol=1e-14, atol=1e-14)
    h[m // 2] = np.nan
    out = (-kt.Vi(x).sqdist(kt.Vj(y)) * 400.0 + kt.Vj(h)).logsumexp(axis=1, backend="cpu")
    assert np.isnan(out).all()


def test_float64_gaussian_sum_nonfinite_inputs():
    """inf and NaN reach only the outputs they touch, as in NumPy: a point
    at infinity contributes exp(-inf) = 0, a NaN coordinate NaN."""
    rng = np.random.default_rng(1)
    x, y, b = rng.random((300, 3)), rng.random((50, 3)), rng.standard_normal((50, 1))
    y[3, 1], y[17, 0], x[5, 2] = np.inf, -np.inf, np.nan
    K = (-kt.Vi(x).sqdist(kt.Vj(y)) * 2.0).exp()
    with np.errstate(invalid="ignore"):
        ref = np.exp(-2.0 * ((x[:, None] - y[None]) ** 2).sum(-1)) @ b
    out = (K * kt.Vj(b)).sum(axis=1, backend="cpu")
    np.testing.assert_allclose(out, ref, rtol=1e-13, atol=1e-14)
    assert np.isnan(out[5]).all() and np.isfinite(np.delete(out, 5)).all()


def test_float32_sum_of_a_million_terms_is_accurate(shared_cache):
    rng = np.random.default_rng(1)
    y = rng.random((1_000_000, 1), dtype=np.float32)
    x = rng.random((4, 1), dtype=np.float32)
    F = (kt.Vi(x) * kt.Vj(y) + 0.5).exp()
    got = F.sum(axis=1, backend="cpu")[:, 0].astype(np.float64)
    ref = np.exp(x.astype(np.float64) * y[:, 0].astype(np.float64)[None, :] + 0.5).sum(1)
    assert np.max(np.abs(got - ref) / ref) <= 1e-5
    # an i-level factor out of the sum (_cpu_factor): the same accuracy
    w = rng.random((4, 1), dtype=np.float32) + 0.5
    got = (kt.Vi(w) * F).sum(axis=1, backend="cpu")[:, 0].astype(np.float64)
    assert np.max(np.abs(got - w[:, 0] * ref) / (w[:, 0] * ref)) <= 1e-5


def test_results_do_not_depend_on_the_thread_count(tmp_path):
    code = textwrap.dedent(
        """
        import numpy as np, kerneltools as kt
        rng = np.random.default_rng(0)
        x = rng.random((3001, 3), dtype=np.float32)
        K = (-kt.Vi(x).sqdist(kt.Vj(x)) * 4.0).exp()
        np.save(__import__("sys").argv[1], np.concatenate([
            K.sum(axis=1, backend="cpu").ravel(), K.argKmin(5, axis=1, backend="cpu").ravel(),
            K.logsumexp(axis=0, backend="cpu").ravel()]))
        """
    )
    results = []
    for threads in ("1", "2"):
        out = tmp_path / f"r{threads}.npy"
        env = dict(os.environ, OMP_NUM_THREADS=threads, KERNELTOOLS_CACHE_DIR=str(tmp_path / "c"))
        proc = subprocess.run([sys.executable, "-c", code, str(out)], env=env,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        results.append(np.load(out))
    np.testing.assert_array_equal(results[0], results[1])


def test_threadpoolctl_limits_the_kernels(cache):
    threadpoolctl = pytest.importorskip("threadpoolctl")
    K, b, dense = _gauss(n=2000, m=2000)
    with threadpoolctl.threadpool_limits(1):
        a1 = K @ b
    np.testing.assert_allclose(a1, dense, rtol=1e-10)
    # Our kernels link the OpenMP runtime that threadpoolctl controls.
    if find_compiler().openmp:
        apis = {info["user_api"] for info in threadpoolctl.threadpool_info()}
        assert "openmp" in apis


def test_unsupported_plan_declines_cpu():
    x = np.random.rand(5, 2).astype(np.float16)
    F = kt.Vi(x).sqdist(kt.Vj(x))
    assert F.dtype == np.float32  # float16 computes in float32 on the CPU
    with pytest.raises(BackendUnavailableError):
        kt.Vi(np.ones((2, 30000))).sqnorm2().sum(axis=1, backend="cpu")


def test_warm_call_overhead_is_small(cache):
    """Not a timing assertion: checks that a warm call does not recompile or reload."""
    K, b, dense = _gauss(n=100, m=100)
    K @ b
    before = _cpu_backend.compile_count()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(20):
            K @ b
    assert _cpu_backend.compile_count() == before


def test_large_k_reduction_states_do_not_overflow_the_stack(shared_cache):
    """K x E states of megabytes per row live in a heap scratch buffer."""
    rng = np.random.default_rng(0)
    x, y, z = rng.random((4, 16)), rng.random((1000, 16)), rng.random((1000, 100))
    F = (kt.Vi(x) | kt.Vj(y)) * kt.Vj(z)
    np.testing.assert_allclose(F.Kmin(1000, axis=1, backend="cpu"),
                               F.Kmin(1000, axis=1, backend="numpy"), rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_large_dimension_paths_keep_infinities_and_exact_neighbours(shared_cache, dtype):
    """D >= 16 takes the matrix-product micro-kernel: inf stays inf, and the
    nearest-neighbour reductions keep the exact (direct) squared distance."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((9, 16))
    x[2, 0], x[4, 0], x[6, 0] = np.inf, -np.inf, np.nan
    y = rng.standard_normal((40, 16))
    F = (-kt.Vi(x.astype(dtype)).sqdist(kt.Vj(y.astype(dtype)))).exp()
    np.testing.assert_allclose(F.sum(axis=1, backend="cpu"), F.sum(axis=1, backend="numpy"),
                               rtol=1e-4 if dtype == np.float32 else 1e-12)
    # Offset data with tiny distances: the expanded form would lose them all.
    y = (100 + 1e-3 * rng.standard_normal((200, 16))).astype(dtype)
    q = y[:5] + dtype(1e-4)
    D = kt.Vi(q).sqdist(kt.Vj(y))
    np.testing.assert_array_equal(D.argmin(axis=1, backend="cpu").ravel(), np.arange(5))
    np.testing.assert_array_equal(D.argKmin(3, axis=1, backend="cpu"),
                                  D.argKmin(3, axis=1, backend="numpy"))
