"""The CPU backend: generated source, compilation, the kernel cache, accuracy.

The correctness of every operation and reduction on this backend is checked by
the shared suites (test_ops.py, test_reductions.py) through the ``backend``
fixture; this file checks what is specific to generated C.
"""

import os
import shutil
import stat
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import kerneltools as kt
from kerneltools.backend.cpu import _backend as _cpu_backend
from kerneltools.backend.cpu import _library
from kerneltools.backend.cpu._compiler import find_compiler
from kerneltools.exceptions import BackendUnavailableError, CompileError

pytestmark = pytest.mark.skipif(
    not find_compiler().ok, reason=f"no C compiler: {find_compiler().reason}"
)

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh, empty kernel cache and no kernels loaded in memory."""
    monkeypatch.setenv("KERNELTOOLS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(_library, "_loaded", {})
    monkeypatch.setattr(_cpu_backend, "_functions", {})
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def _module_cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("module-cache") / "cache"


@pytest.fixture
def shared_cache(_module_cache_dir, monkeypatch):
    """A kernel cache of this module's own, kept from test to test (so that
    parametrizations that differ only in a run-time parameter compile their
    kernel once), and no kernels loaded in memory."""
    monkeypatch.setenv("KERNELTOOLS_CACHE_DIR", str(_module_cache_dir))
    monkeypatch.setattr(_library, "_loaded", {})
    monkeypatch.setattr(_cpu_backend, "_functions", {})
    return _module_cache_dir


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


def test_float_parameter_change_reuses_the_kernel(cache):
    K1, b, dense1 = _gauss(gamma=0.5)
    np.testing.assert_allclose(K1.__matmul__(b), dense1, rtol=1e-12)
    before = _cpu_backend.compile_count()
    K2, b, dense2 = _gauss(gamma=3.0)
    np.testing.assert_allclose(K2 @ b, dense2, rtol=1e-12)
    assert _cpu_backend.compile_count() == before
    # A new structure does compile.
    K3 = (-kt.Vi(np.ones((3, 3))).sqdist(kt.Vj(np.ones((4, 3))))).exp().sin()
    K3.sum(axis=1, backend="cpu")
    assert _cpu_backend.compile_count() == before + 1


def test_cache_directory_is_private_and_reused(cache):
    K, b, dense = _gauss()
    np.testing.assert_allclose(K.sum(axis=1, backend="cpu"), K.sum(axis=1, backend="numpy"))
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    libs = list((cache / "cpu").glob("*.so"))
    assert len(libs) == 1
    assert not list((cache / "cpu").glob(".tmp-*"))
    n, size = kt.backend.cpu._cache.cache_size()
    assert n >= 2 and size > 0
    kt.clear_cache()
    assert not list((cache / "cpu").glob("*.so")) if (cache / "cpu").exists() else True


_CHILD = textwrap.dedent(
    """
    import sys, numpy as np, kerneltools as kt
    x = np.linspace(0, 1, 300).reshape(100, 3)
    K = (-kt.Vi(x).sqdist(kt.Vj(x)) * 1.7).exp().cos()
    out = K.sum(axis=1, backend="cpu")
    dense = np.cos(np.exp(-1.7 * ((x[:, None] - x[None]) ** 2).sum(-1))).sum(1)
    assert np.allclose(out[:, 0], dense, rtol=1e-12), "wrong result"
    from kerneltools.backend.cpu._backend import compile_count
    print("ok", f"compiled={compile_count()}")
    """
)


@pytest.fixture(scope="module")
def built_by_a_process(tmp_path_factory):
    """A cache folder in which a first process built the kernel of ``_CHILD``
    (once for the module: each test damages a copy)."""
    folder = tmp_path_factory.mktemp("built") / "cache"
    env = dict(os.environ, KERNELTOOLS_CACHE_DIR=str(folder))
    first = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                           text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    assert first.stdout.split() == ["ok", "compiled=1"]
    return folder


@pytest.mark.parametrize("damage", ["truncate", "half", "garbage", "foreign"])
def test_damaged_cache_entry_is_rebuilt(cache, damage, built_by_a_process):
    """A later process finds a damaged entry, rebuilds it and computes right."""
    env = dict(os.environ, KERNELTOOLS_CACHE_DIR=str(cache))
    shutil.copytree(built_by_a_process, cache)  # modes kept: a trusted entry
    (so,) = (cache / "cpu").glob("*.so")
    if damage == "truncate":
        data = so.read_bytes()[:100]
    elif damage == "half":  # headers intact, segments cut: loading it would SIGBUS
        data = so.read_bytes()[: so.stat().st_size // 2]
    elif damage == "garbage":
        data = b"not a shared library" * 10
    else:  # a valid library of another formula under this name
        (-kt.Vi(np.ones((3, 2))).sqdist(kt.Vj(np.ones((4, 2))))).sum(axis=1, backend="cpu")
        foreign = [p for p in (cache / "cpu").glob("*.so") if p != so][0]
        data = foreign.read_bytes()
    so.write_bytes(data)
    second = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                            text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    assert second.stdout.split() == ["ok", "compiled=1"]
    assert len(list((cache / "cpu").glob("*.so"))) == (2 if damage == "foreign" else 1)


def test_two_processes_compiling_the_same_kernel(cache):
    env = dict(os.environ, KERNELTOOLS_CACHE_DIR=str(cache))
    procs = [
        subprocess.Popen([sys.executable, "-c", _CHILD], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert out.split()[0] == "ok"
    assert len(list((cache / "cpu").glob("*.so"))) == 1
    assert not list((cache / "cpu").glob(".tmp-*"))


def test_compile_failure_raises_compile_error(cache, monkeypatch):
    comp = find_compiler()
    broken = type(comp)(**{**comp.__dict__, "flags": comp.flags + ["-DKT_BROKEN=("]})
    broken.flags.append("-include")
    broken.flags.append(str(cache.parent / "broken.h"))
    (cache.parent / "broken.h").write_text("this is not C;\n")
    monkeypatch.setattr(_cpu_backend, "find_compiler", lambda: broken)
    K, b, _ = _gauss()
    with pytest.raises(CompileError) as info:
        K.sum(axis=1, backend="cpu")
    assert info.value.log
    assert info.value.source_path and Path(info.value.source_path).exists()
    assert info.value.source_path in str(info.value)
    # Nothing half-written is left in the cache.
    assert not list((cache / "cpu").glob("*.so"))
    assert not list((cache / "cpu").glob(".tmp-*"))


def test_no_compiler(tmp_path):
    """CC pointing at a broken compiler: 'cpu' raises, 'auto' falls back once."""
    code = textwrap.dedent(
        """
        import warnings, numpy as np, kerneltools as kt
        from kerneltools.exceptions import BackendUnavailableError, BackendFallbackWarning
        x = np.random.rand(20, 2)
        K = kt.Vi(x).sqdist(kt.Vj(x))
        try:
            K.sum(axis=1, backend="cpu")
        except BackendUnavailableError as e:
            assert "compiler" in str(e) and "install" in str(e), str(e)
        else:
            raise AssertionError("no error")
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            a = K.sum(axis=1)
            K.sum(axis=1)
        assert sum(issubclass(x.category, BackendFallbackWarning) for x in w) == 1, w
        assert np.allclose(a[:, 0], ((x[:, None] - x[None]) ** 2).sum((1, 2)))
        print("ok")
        """
    )
    env = dict(os.environ, CC=str(tmp_path / "no-such-compiler"),
               KERNELTOOLS_CACHE_DIR=str(tmp_path / "c"), KERNELTOOLS_COMPILER="system")
    env.pop("KERNELTOOLS_BACKEND", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_float32_sum_of_a_million_terms_is_accurate(cache):
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


def test_large_k_reduction_states_do_not_overflow_the_stack(cache):
    """K x E states of megabytes per row live in a heap scratch buffer."""
    rng = np.random.default_rng(0)
    x, y, z = rng.random((4, 16)), rng.random((1000, 16)), rng.random((1000, 100))
    F = (kt.Vi(x) | kt.Vj(y)) * kt.Vj(z)
    np.testing.assert_allclose(F.Kmin(1000, axis=1, backend="cpu"),
                               F.Kmin(1000, axis=1, backend="numpy"), rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_large_dimension_paths_keep_infinities_and_exact_neighbours(cache, dtype):
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


def _wide_case(kind: str, d: int, dtype, n: int = 30, m: int = 45, ranges=None, mask=None):
    """A formula over d features and its float64 NumPy reference (``ranges``:
    a block-sparse description, whose pairs ``mask`` gives the reference)."""
    rng = np.random.default_rng(d)
    x, y = rng.random((n, d)).astype(dtype), rng.random((m, d)).astype(dtype)
    b = rng.standard_normal((m, 2)).astype(dtype)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    d2 = ((x64[:, None] - y64[None]) ** 2).sum(-1)
    keep = np.ones((n, m), bool) if mask is None else mask
    if kind == "gauss":  # smooth: the dot-product micro-kernel and wide norms
        g = 4.0 / d
        F = (-kt.Vi(x).sqdist(kt.Vj(y)) * g).exp() * kt.Vj(b)
        return (lambda be: F.sum(axis=1, backend=be, ranges=ranges)), \
            (keep * np.exp(-g * d2)) @ b
    if kind == "argkmin":  # direct form: a feature loop inside the pair loop
        return (lambda be: kt.Vi(x).sqdist(kt.Vj(y)).argKmin(3, axis=1, backend=be,
                                                            ranges=ranges),
                np.argsort(np.where(keep, d2, np.inf), axis=1, kind="stable")[:, :3])
    # a parameter vector of weights, a j-only and an i-only wide sum
    w = rng.random(d).astype(dtype)
    F = (-((kt.Pm(w) * (kt.Vi(x) - kt.Vj(y)) ** 2).sum(-1)) / d).exp() \
        * (kt.Vj(y) ** 2).sum(-1) * (kt.Vi(x) ** 2).sum(-1)
    ref = np.exp(-((w.astype(np.float64) * (x64[:, None] - y64[None]) ** 2).sum(-1)) / d)
    ref = (keep * ref) @ (y64 ** 2).sum(-1)[:, None] * (x64 ** 2).sum(-1)[:, None]
    return (lambda be: F.sum(axis=1, backend=be, ranges=ranges)), ref


def _check_wide(kind: str, got, ref, dtype) -> None:
    if kind == "argkmin":
        np.testing.assert_array_equal(got, ref)
    else:
        rtol = 1e-5 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got, ref, rtol=rtol, atol=rtol * np.abs(ref).max())


@pytest.mark.parametrize("kind, d", [("gauss", 784), ("gauss", 2000), ("argkmin", 784),
                                     ("argkmin", 2000), ("weighted", 784)])
def test_wide_formulas_match_numpy(kind, d, backend, dtype, cache):
    """MNIST-sized and wider variables (rendered as loops over the features on
    the CPU, so that they compile in about a second) give NumPy's results."""
    run, ref = _wide_case(kind, d, dtype)
    _check_wide(kind, run(backend), ref, dtype)


@pytest.mark.parametrize("kind", ["argkmin", "weighted"])
def test_wide_formulas_with_ranges_match_numpy(kind, backend, dtype, cache):
    """The block-sparse kernel loops over wide features too (parameter-, i-,
    j- and pair-level sums): D = 784 over two row blocks with overlapping
    intervals gives the masked dense result."""
    n, m = 30, 45
    ranges = (np.array([[0, 15], [15, 30]]), np.array([1, 2]),
              np.array([[0, 20], [10, 45]]),
              np.array([[0, 10], [10, 20], [20, 45]]), np.array([1, 2, 3]),
              np.array([[0, 15], [0, 30], [15, 30]]))
    mask = np.zeros((n, m), bool)
    mask[:15, :20] = mask[15:, 10:] = True
    run, ref = _wide_case(kind, 784, dtype, n, m, ranges=ranges, mask=mask)
    _check_wide(kind, run(backend), ref, dtype)


@pytest.mark.parametrize("kind", ["gauss", "argkmin", "weighted"])
def test_wide_formula_source_does_not_grow_with_the_dimension(kind):
    """Features are looped over, not unrolled: the generated C is about as long
    at D = 2000 as at D = 64 (the compile time follows the source's size)."""
    lengths = []
    for d in (64, 2000):
        rng = np.random.default_rng(0)
        x, y = rng.random((4, d)), rng.random((5, d))
        f = kt.Vi(x).sqdist(kt.Vj(y))
        w = kt.Pm(rng.random(d))
        formula, red = {
            "gauss": ((-f * 0.5).exp() * kt.Vj(y[:, :1]), "Sum"),
            "argkmin": (f, "ArgKMin"),
            "weighted": ((-(w * (kt.Vi(x) - kt.Vj(y)) ** 2).sum(-1)).exp()
                         * (kt.Vj(y) ** 2).sum(-1), "Sum"),
        }[kind]
        plan = formula._plan(red, 1, K=3)[0] if red == "ArgKMin" else formula._plan(red, 1)[0]
        lengths.append([len(_cpu_backend.generate_source(plan, key="k", ranges=r))
                        for r in (False, True)])
    for dense_or_ranges in (0, 1):  # the block-sparse variant too
        assert lengths[1][dense_or_ranges] < lengths[0][dense_or_ranges] + 200, lengths


@pytest.mark.parametrize("g", [0.7, 0.0, -0.3, np.nan])
def test_exp_range_facts_hold_for_any_parameter(g, backend, dtype, shared_cache):
    """exp(-g |x - y|^2) runs the exp without overflow branch (2^(d * -g log2 e))
    only when g >= 0 is tested true at run time: a negative g (arguments > 0)
    or a NaN g still gives NumPy's results; inf and NaN inputs propagate as in
    NumPy, into their rows only (exp(-inf) = 0, inf * 0 = NaN)."""
    rng = np.random.default_rng(3)
    x, y = rng.random((37, 3)).astype(dtype), rng.random((41, 3)).astype(dtype)
    x[3, 1], x[7, 2] = np.inf, np.nan
    b = rng.standard_normal((41, 2)).astype(dtype)
    K = (-kt.Vi(x).sqdist(kt.Vj(y)) * g).exp()
    d2 = ((x[:, None].astype(np.float64) - y[None]) ** 2).sum(-1)
    with np.errstate(invalid="ignore", over="ignore"):
        ref = np.exp(-d2 * g) @ b
    got = (K * kt.Vj(b)).sum(axis=1, backend=backend)
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    assert np.isfinite(ref).sum() >= (70 if np.isfinite(g) else 0)
    scale = np.abs(ref[np.isfinite(ref)]).max() if np.isfinite(ref).any() else 1.0
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=rtol * scale)


@pytest.mark.parametrize("g", [3.0, -0.3])
def test_sums_of_outer_times_inner_factors(g, backend, dtype, shared_cache):
    """Sums of a product whose factors split into ones that depend on j and
    ones that do not (the dense C kernel sums the former and multiplies by
    the latter, ``_cpu_factor``): the gradient of e . (K b) (outer -2 g e_i),
    K_ij w_i (an outer vector, a scalar inner factor) and 2 K_ij b_j (a
    constant outer factor), against NumPy pair by pair, with NaN, 0 and
    infinite outer factors. For g > 0 a far point makes K exactly 0 in every
    row, so that an infinite outer factor gives NaN (inf * 0 in that pair)
    as NumPy does, not inf; g < 0 takes the exp with its overflow branch."""
    rng = np.random.default_rng(4)
    x, y = rng.random((37, 3)), rng.random((41, 3))
    if g > 0:
        y[40] = 20.0
    e, w = rng.standard_normal((37, 1)), rng.standard_normal((37, 3))
    b = rng.standard_normal((41, 1))
    e[2], e[5], e[8], w[3, 1], w[6, 0], b[4] = np.inf, np.nan, 0, -np.inf, np.nan, 0
    x, y, e, w, b = (a.astype(dtype) for a in (x, y, e, w, b))
    X, Y, E, W, B = (a.astype(np.float64) for a in (x, y, e, w, b))
    x_i, gp = kt.Vi(x), kt.Pm(np.array([g], dtype))
    K = (-x_i.sqdist(kt.Vj(y)) * gp).exp()
    with np.errstate(invalid="ignore", over="ignore"):
        k = np.exp(-np.float64(dtype.type(g)) * ((X[:, None] - Y[None]) ** 2).sum(-1))
        refs = [(2 * -(E * B.T * k * g))[:, :, None] * (X[:, None] - Y[None]),  # grad
                k[:, :, None] * W[:, None, :], 2 * k[:, :, None] * B[None]]
    gots = [(K * kt.Vj(b)).grad(x_i, kt.Vi(e)), K * kt.Vi(w), 2 * K * kt.Vj(b)]
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    for G, pairs in zip(gots, refs):
        got, ref = G.sum(axis=1, backend=backend), pairs.sum(axis=1)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
        np.testing.assert_array_equal(got[np.isinf(ref)], ref[np.isinf(ref)])
        ok = np.isfinite(ref)
        assert ok.sum() >= ref.size // 2
        with np.errstate(invalid="ignore"):
            scale = np.nanmax(np.abs(pairs).sum(axis=1)[ok])
        np.testing.assert_allclose(got[ok], ref[ok], rtol=rtol, atol=rtol * scale)


def test_sign_facts_of_formulas():
    """The rules that let an exp skip its overflow branch: proven always,
    under a condition on a parameter, or not at all."""
    from kerneltools.backend._codegen import sign_conditions

    x, y = kt.Vi(np.ones((2, 3))), kt.Vj(np.ones((2, 3)))
    d2 = x.sqdist(y)
    p = kt.Pm(np.array([0.5]))

    def arg(F):
        node = F._plan("Sum", 1)[0].formulas[0]
        return node.children[0] if node.op == "Exp" else node

    names = lambda F: {n: [f"P{k}"] for k, n in enumerate(_param_nodes(arg(F)))}
    assert sign_conditions(arg((-d2).exp()), -1, {}) == []
    assert sign_conditions(arg((-d2 / 2).exp()), -1, names((-d2 / 2).exp())) == []
    F = (-d2 * p).exp()
    assert sign_conditions(arg(F), -1, names(F)) == ["P0 >= (real_t)0"]
    assert sign_conditions(arg((d2 - 1).exp()), -1, {}) is None
    assert sign_conditions(arg((x * y).sum(-1).exp()), -1, {}) is None


def _param_nodes(node):
    from kerneltools.backend._ir import topo_order

    return [n for n in topo_order([node]) if n.op == "Var" and n.cat == "p"]


@pytest.mark.parametrize("which", ["general", "nonpos", "exp2"])
def test_generated_exps_are_accurate_over_their_range(which, dtype, cache):
    """The kernels' inline exps (templates/kt_exp.h) against NumPy's, element
    by element (one reduced point), over every argument range that gives a
    normal result: within 4 ulp (float32) and 1.25 eps (2.8e-16, float64) of
    the longdouble exp of the argument the kernel computes (in ``dtype``).
    Their fast variants: exp(-x^2) (argument <= 0) and exp(-g x^2) as
    2^(x^2 * k), k = -g log2(e) rounded to ``dtype``."""
    lo = -87.0 if dtype == np.float32 else -707.0
    hi = 88.0 if dtype == np.float32 else 709.0
    a = np.concatenate([np.linspace(lo, hi, 20001), np.linspace(-1, 1, 4001)])
    x = (a if which == "general" else np.sqrt(np.abs(a))).astype(dtype)[:, None]
    one = kt.Vj(np.ones((1, 1), dtype))
    sq = (x * x).astype(np.longdouble)  # x^2 as the kernel rounds it
    if which == "general":
        F, ref = (kt.Vi(x) * one).exp(), np.exp(x.astype(np.longdouble))
    elif which == "nonpos":
        F, ref = (-(kt.Vi(x) * one) ** 2).exp(), np.exp(-sq)
    else:
        g = np.array([0.7], dtype)
        F = (-((kt.Vi(x) * one) ** 2) * kt.Pm(g)).exp()
        k = np.array(-1.4426950408889634074 * np.float64(g[0]), dtype)
        ref = np.exp2(((x * x) * k).astype(np.longdouble))
    got = F.sum(axis=1, backend="cpu").astype(np.longdouble)
    keep = ref > np.finfo(dtype).tiny * 4
    rel = np.abs(got[keep] - ref[keep]) / ref[keep]
    tol = 4 * np.finfo(np.float32).eps if dtype == np.float32 else 1.25 * np.finfo(float).eps
    assert rel.max() <= tol, (which, float(rel.max()))


@pytest.mark.parametrize("order", ["increasing", "decreasing", "ramp"])
def test_in_loop_lse_and_kmin_paths_across_tiles(order, dtype, cache):
    """The dense kernel's in-loop log-sum-exp sums (kept where a tile holds no
    new maximum, or its sum of exp(F - shift) stays below 2^20, else the
    buffered fold) and K-min test (a tile with no value below the K-th kept
    one is skipped): reduced values sorted so that every tile holds a new
    maximum / new candidates (increasing) or none after the first
    (decreasing), or rising by 13 nats in all (ramp: tiles whose terms reach
    e^13 relative to the shift, some kept, some whose sums pass 2^20
    without any term clamped; a row of +inf), over several tiles, rows not a
    multiple of the rows per loop, with -inf and NaN entries; against dense
    NumPy / SciPy."""
    from scipy.special import logsumexp

    rng = np.random.default_rng(5)
    n, m = 13, 1500
    a = rng.standard_normal((n, 1))
    h = np.sort(rng.standard_normal(m) * 30)
    h = (h if order == "increasing" else h[::-1]).copy()[:, None]
    if order == "ramp":
        h = (np.linspace(0, 13, m) + 0.3 * rng.standard_normal(m))[:, None]
        a[7, 0] = np.inf
    h[700, 0] = -np.inf
    a[4, 0], a[9, 0] = -np.inf, np.nan
    w = rng.uniform(0.5, 1.5, (m, 2))
    a, h, w = a.astype(dtype), h.astype(dtype), w.astype(dtype)
    F = kt.Vi(a) + kt.Vj(h)
    S = a.astype(np.float64) + h.astype(np.float64).T  # (n, m)
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    with np.errstate(invalid="ignore", divide="ignore"):
        ref_lse = logsumexp(S, axis=1)[:, None]
        ref_lsew = np.stack([logsumexp(S, axis=1, b=w[:, e]) for e in range(2)], 1)
        p = np.exp(S - np.where(np.isfinite(ref_lse), ref_lse, 0))
        ref_ssmw = (p @ w) / p.sum(1, keepdims=True)
    got = [F.logsumexp(axis=1, backend="cpu"),
           F.logsumexp(axis=1, weight=kt.Vj(w), backend="cpu"),
           F.sumsoftmaxweight(kt.Vj(w), axis=1, backend="cpu")]
    for g, r in zip(got, [ref_lse, ref_lsew, ref_ssmw]):
        np.testing.assert_array_equal(np.isnan(g), np.isnan(r))
        ok = np.isfinite(r)
        np.testing.assert_array_equal(g[~ok & ~np.isnan(r)], r[~ok & ~np.isnan(r)])
        np.testing.assert_allclose(g[ok], r[ok], rtol=rtol, atol=rtol * np.abs(r[ok]).max())
    D = (kt.Vi(a) - kt.Vj(h)) ** 2
    d2 = (a.astype(np.float64) - h.astype(np.float64).T) ** 2
    d2 = np.where(np.isnan(d2), np.inf, d2)  # rows 4 and 9: ranked by index only
    got = D.argKmin(5, axis=1, backend="cpu")
    rows = [r for r in range(n) if r not in (4, 9)]
    np.testing.assert_array_equal(got[rows], np.argsort(d2, axis=1, kind="stable")[rows, :5])


@pytest.mark.parametrize("K", [1, 9, 16])
def test_kmin_fold_in_vector_registers(K, dtype, cache):
    """The dense K-min fold for K <= 16 (with AVX-512: the list in vector
    registers, kt_kmin_fold; else the scalar insertion): values and indices
    equal NumPy's stable sort (NaN last, equal values in index order) with
    many ties, +-inf and NaN, over several tiles, rows whose lists fill in
    the first tile or only later (a row of NaN: every value ties)."""
    rng = np.random.default_rng(K)
    n, m = 13, 1500
    a = np.round(rng.standard_normal((n, 1)), 1)
    h = np.round(rng.standard_normal((m, 1)) * 3, 1)  # ties
    h[[5, 600, 1400]] = np.nan
    h[[7, 900]] = -np.inf
    h[[8, 1300]] = np.inf
    a[3], a[6] = np.nan, np.inf
    a, h = a.astype(dtype), h.astype(dtype)
    F = kt.Vi(a) + kt.Vj(h)
    val, idx = F.Kmin_argKmin(K, axis=1, backend="cpu")
    with np.errstate(invalid="ignore"):
        S = a + h.T  # in dtype, as the kernel computes it
    order = np.argsort(S, axis=1, kind="stable")[:, :K]
    np.testing.assert_array_equal(idx[:, :, 0] if idx.ndim == 3 else idx, order)
    ref = np.take_along_axis(S, order, axis=1)
    np.testing.assert_array_equal(val[:, :, 0] if val.ndim == 3 else val, ref)


@pytest.mark.parametrize("e, d, axis", [(8, 3, 1), (33, 3, 1), (33, 20, 0), (128, 20, 1)])
def test_many_column_sums_match_numpy(e, d, axis, backend, dtype, cache):
    """``K @ B`` with B of 8 to 128 columns (on the CPU the GEMM form of
    ``_cpu_gemm``: K by blocks, then a micro-kernel over the columns; D = 20
    also takes the dot-product micro-kernel) gives dense NumPy's result over
    a partial row block and a partial tile, NaN and inf propagating into the
    outputs they touch only, over either axis."""
    rng = np.random.default_rng(e)
    n, m = 21, 700  # not a multiple of the row block; more than one tile
    x, y = rng.random((n, d)), rng.random((m, d))
    b = rng.standard_normal((m if axis == 1 else n, e))
    b[3, 5], b[10, 2] = np.nan, np.inf
    (x if axis == 1 else y)[4, 0] = np.nan  # a NaN output row
    x, y, b = x.astype(dtype), y.astype(dtype), b.astype(dtype)
    g = 3.0 / d
    K = (-kt.Vi(x).sqdist(kt.Vj(y)) * g).exp()
    B = kt.Vj(b) if axis == 1 else kt.Vi(b)
    got = (K * B).sum(axis=axis, backend=backend)
    dense = np.exp(-g * ((x[:, None].astype(float) - y[None]) ** 2).sum(-1))
    dense = dense if axis == 1 else dense.T
    with np.errstate(invalid="ignore"):
        ref = dense @ b.astype(float)
        scale = np.nanmax(np.where(np.isfinite(ref), np.abs(dense) @ np.abs(
            np.nan_to_num(b.astype(float), nan=0, posinf=0)), 0))
    assert got.shape == ref.shape and got.dtype == dtype
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(ref))
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=rtol * scale)


def test_many_column_sum_whose_columns_also_enter_the_kernel(backend):
    """``K(x_i, y_j) @ [y_j, 1]`` (MeanShift's weighted means: B's variable is
    also read by K) compiles and equals dense NumPy (it failed to compile)."""
    rng = np.random.default_rng(1)
    x, y = rng.random((21, 10)), rng.random((300, 10))
    yb = np.hstack([y, np.ones((300, 1))])
    Y = kt.Vj(yb)
    K = (-kt.Vi(x).sqdist(Y.extract(0, 10)) * 0.3).exp()
    got = (K * Y).sum(axis=1, backend=backend)
    ref = np.exp(-0.3 * ((x[:, None] - y[None]) ** 2).sum(-1)) @ yb
    np.testing.assert_allclose(got, ref, rtol=1e-12)


def test_many_column_sum_source_does_not_grow_with_the_columns():
    """The GEMM form loops over B's columns: its C source (so its compile
    time) is the same size for 8 and 256 columns."""
    x = np.random.default_rng(0).random((5, 3))
    K = (-kt.Vi(x).sqdist(kt.Vj(x))).exp()
    a, b = (_cpu_backend.generate_source((K * kt.Vj(np.ones((5, e))))._plan("Sum", 1)[0],
                                         key="k") for e in (8, 256))
    assert a.count("\n") == b.count("\n") and abs(len(a) - len(b)) < 100


def test_kmin_fold_without_avx512_matches_numpy(tmp_path):
    """The K-min fold's candidate test (kt_below32 in templates/kt_c_runtime.h)
    has an AVX-512 path and a portable loop; the kernels are built with
    -mno-avx512f here (a compiler wrapper) so that the portable one runs too:
    Kmin_argKmin with ties, NaN and +-inf over several tiles, against a
    stable NumPy sort, float32 and float64."""
    wrapper = tmp_path / "cc-no-avx512"
    wrapper.write_text(f'#!/bin/sh\nexec {shutil.which("cc") or "cc"} "$@" -mno-avx512f\n')
    wrapper.chmod(0o755)
    code = textwrap.dedent(
        """
        import numpy as np, kerneltools as kt
        rng = np.random.default_rng(3)
        for dt in (np.float32, np.float64):
            x = rng.integers(0, 6, (7, 1)).astype(dt)  # ties on an integer grid
            y = rng.integers(0, 40, (1100, 1)).astype(dt)
            y[5], y[300], y[900] = np.nan, np.inf, -np.inf
            d2 = (x.astype(float) - y.astype(float).T) ** 2
            ref = np.argsort(np.where(np.isnan(d2), np.inf, d2), axis=1, kind="stable")[:, :6]
            D = (kt.Vi(x) - kt.Vj(y)) ** 2
            val, idx = D.Kmin_argKmin(6, axis=1, backend="cpu")
            np.testing.assert_array_equal(idx, ref)
            np.testing.assert_array_equal(val, np.take_along_axis(d2, ref, 1).astype(dt))
        print("ok")
        """
    )
    env = dict(os.environ, CC=str(wrapper), KERNELTOOLS_CACHE_DIR=str(tmp_path / "c"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
