"""The dense C kernel's K-min of a squared distance with the expanded-distance
prefilter and its seed bound (``_cpu_kmin``): values and indices bit-identical
to the kernel without them (the buffered fold over every tile), on data made
to break a rounding bound: near-ties, duplicates, offsets, tiny and huge
scales, NaN and inf rows; and against the NumPy reference, tie-tolerantly.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import zlib

import numpy as np
import pytest

import kerneltools as kt
from kerneltools.backend.cpu import _backend as _cpu_backend, _kmin as _cpu_kmin
from kerneltools.backend.cpu._compiler import find_compiler

pytestmark = pytest.mark.skipif(not find_compiler().ok, reason="no C compiler")

METHODS = ("Kmin", "argKmin", "Kmin_argKmin")


def _rng(*parts) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(parts).encode()))


@pytest.fixture(autouse=True)
def _small_calls_too(monkeypatch):
    """The prefilter runs on these small problems too (a call below
    MIN_PAIRS or MIN_NY runs the buffered kernel), and for every D and dtype
    (not only where it pays)."""
    monkeypatch.setattr(_cpu_kmin, "MIN_PAIRS", 0)
    monkeypatch.setattr(_cpu_kmin, "MIN_NY", 0)
    monkeypatch.setattr(_cpu_kmin, "FORCE", True)  # every D and dtype


def _run(x, y, K, method, axis, prefilter: bool):
    """``method`` of |x_i - y_j|^2 on the C backend, with or without the
    prefilter (a fresh plan lookup, so that the kernel built is the one asked)."""
    old = _cpu_kmin.ENABLED
    _cpu_kmin.ENABLED = prefilter
    _cpu_backend._by_signature.clear()
    try:
        F = kt.Vi(x).sqdist(kt.Vj(y)) if axis == 1 else kt.Vj(x).sqdist(kt.Vi(y))
        with np.errstate(all="ignore"):
            out = getattr(F, method)(K, axis=axis, backend="cpu")
    finally:
        _cpu_kmin.ENABLED = old
        _cpu_backend._by_signature.clear()
    return out if isinstance(out, tuple) else (out,)


def _same(x, y, K, method="Kmin_argKmin", axis=1):
    a = _run(x, y, K, method, axis, False)
    b = _run(x, y, K, method, axis, True)
    for p, q in zip(a, b):
        assert p.dtype == q.dtype and p.shape == q.shape
        # bit-identical, NaN where NaN
        assert np.array_equal(p.view(np.uint8), q.view(np.uint8)), (method, K, x.shape)
    return b


def _cloud(kind: str, n: int, d: int, dtype, seed=0):
    rng = _rng(kind, n, d, np.dtype(dtype).name, seed)
    if kind == "uniform":
        return rng.random((n, d)).astype(dtype)
    if kind == "grid":  # many exactly equal distances
        return rng.integers(0, 4, (n, d)).astype(dtype)
    if kind == "duplicates":
        base = rng.random((max(1, n // 7), d))
        return base[rng.integers(0, len(base), n)].astype(dtype)
    if kind.startswith("offset"):  # offset1e3, offset1e6
        return (float(kind[6:]) + rng.random((n, d))).astype(dtype)
    if kind.startswith("scale"):  # squares that underflow or overflow
        with np.errstate(over="ignore"):  # scale1e160 in float32: inf features
            return (float(kind[5:]) * rng.standard_normal((n, d))).astype(dtype)
    raise ValueError(kind)


DTYPES = (np.float32, np.float64)
IDENTICAL_D, IDENTICAL_K = (1, 2, 3, 8, 33), (1, 5, 10, 16, 17, 40)
#: The (D, K) of test_adversarial_clouds, which compiles their kernels in
#: both dtypes anyway (the kernel cache shares them within the module).
ADVERSARIAL_DK = {(d, K) for d in (1, 3, 8) for K in (1, 10, 17)}


def _identical_cases() -> list[tuple]:
    """Every (D, K) of ``IDENTICAL_D x IDENTICAL_K`` in one dtype, alternating,
    so that every dtype meets every D and every K; the (D, K) of
    :data:`ADVERSARIAL_DK` in both dtypes (their kernels are built there
    anyway). Each case compiles two kernels (with and without the
    prefilter; both axes share them): the full cross of the three compiled
    120 for this test, these 39 cases 78, 36 of them reused by the
    adversarial clouds."""
    cases = []
    for a, d in enumerate(IDENTICAL_D):
        for b, K in enumerate(IDENTICAL_K):
            both = (d, K) in ADVERSARIAL_DK
            cases += [(t, d, K) for t in (DTYPES if both else DTYPES[(a + b) % 2:][:1])]
    return cases


def test_the_identical_cases_cover_every_pair():
    cases = _identical_cases()
    assert {(d, K) for _, d, K in cases} == {(d, K) for d in IDENTICAL_D
                                             for K in IDENTICAL_K}
    for t in DTYPES:
        assert {d for u, d, _ in cases if u is t} == set(IDENTICAL_D)
        assert {K for u, _, K in cases if u is t} == set(IDENTICAL_K)
    assert {(t, d, K) for t in DTYPES for d, K in ADVERSARIAL_DK} <= set(cases)


@pytest.mark.parametrize(("dtype", "d", "K"), [
    pytest.param(t, d, K, id=f"{np.dtype(t).name}-{d}-{K}")
    for t, d, K in _identical_cases()])
def test_identical_without_prefilter(dtype, d, K):
    """Uniform points, N and M not multiples of any tile, both axes."""
    n, m = (301, 1111) if d < 33 else (133, 577)
    x, y = _cloud("uniform", n, d, dtype), _cloud("uniform", m, d, dtype, 1)
    _same(x, y, K)
    _same(y[:n], x, K, axis=0)  # reduced over i: the roles swap


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["grid", "duplicates", "offset1e3", "offset1e6",
                                  "scale1e-20", "scale1e15", "scale1e19", "scale1e-160",
                                  "scale1e160"])
@pytest.mark.parametrize("d", [1, 3, 8])
def test_adversarial_clouds(dtype, kind, d):
    """Ties, duplicates (distance 0, many equal values), data far from the
    origin, scales whose squares underflow or overflow."""
    x = _cloud(kind, 203, d, dtype)
    y = np.concatenate([_cloud(kind, 1300, d, dtype, 1), x[:50]])  # x_i in y: d = 0
    for K in (1, 10, 17):
        _same(x, y, K)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_near_ties_on_spheres(dtype):
    """y_j on spheres around x_i (equal distances in exact arithmetic, apart
    by a few ulps once rounded): the prefilter's margin decides each one."""
    rng = _rng("spheres", np.dtype(dtype).name)
    x = (rng.random((40, 3)) * 10 + 1e3).astype(dtype)
    u = rng.standard_normal((2000, 3))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    r = rng.choice([0.5, 0.5 + 1e-7, 1.0, 2.0], size=(2000, 1))
    y = (x[rng.integers(0, 40, 2000)].astype(np.float64) + r * u).astype(dtype)
    for K in (1, 10, 40):
        _same(x, y, K)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_non_finite_rows(dtype):
    """NaN and inf in rows of x and y keep the buffered kernel's semantics
    (NaN sorts last; inf - inf is NaN)."""
    x = _cloud("uniform", 157, 3, dtype)
    y = _cloud("uniform", 1500, 3, dtype, 1)
    x[3] = np.nan
    x[5, 1] = np.inf
    x[7, 0] = -np.inf
    x[9] = np.inf
    y[[0, 600, 1400]] = np.nan
    y[[11, 700], 2] = np.inf
    y[12] = -np.inf
    y[800, 0] = np.finfo(dtype).max
    for K in (1, 10, 17):
        _same(x, y, K)
    y[:] = np.nan  # every value NaN
    _same(x, y, 10)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_small_reduced_axis(dtype):
    """M = K, M below the seed's width, a single partial tile."""
    x = _cloud("uniform", 37, 3, dtype)
    for m, K in ((10, 10), (20, 10), (35, 17), (513, 40)):
        _same(x, _cloud("duplicates", m, 3, dtype, m), K)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_against_numpy_reference(method, dtype):
    """Each method against the NumPy backend: the values to rounding, the
    indices where the values are not tied within rounding."""
    x = _cloud("uniform", 211, 3, dtype)
    y = _cloud("uniform", 1700, 3, dtype, 1)
    K = 10
    F = kt.Vi(x).sqdist(kt.Vj(y))
    ref = getattr(F, method)(K, axis=1, backend="numpy")
    ref = ref if isinstance(ref, tuple) else (ref,)
    out = _run(x, y, K, method, 1, True)
    exact = ((x[:, None].astype(np.float64) - y[None]) ** 2).sum(-1)
    tol = 8 * np.finfo(dtype).eps
    for o, r in zip(out, ref):
        if o.dtype.kind == "f":
            np.testing.assert_allclose(o, r, rtol=tol)
        else:
            d_got = np.take_along_axis(exact, o.reshape(len(x), K), 1)
            d_ref = np.take_along_axis(exact, r.reshape(len(x), K), 1)
            np.testing.assert_allclose(d_got, d_ref, rtol=tol)
            assert (o == r).mean() > 0.99


def test_the_prefilter_is_used():
    """The kernel generated for the benchmark's plan carries the prefilter,
    and the one for a formula that is not a plain squared distance does not."""
    x = np.random.default_rng(0).random((5, 3))
    f = kt.Vi(x).sqdist(kt.Vj(x))
    src = _cpu_backend.generate_source(f._plan("ArgKMin", 1, K=3)[0], key="k")
    assert "kt_kpf_scan" in src
    g = (kt.Vi(x) - kt.Vj(x)).abs().sum(-1)
    src = _cpu_backend.generate_source(g._plan("ArgKMin", 1, K=3)[0], key="k")
    assert "kt_kpf_scan" not in src


def test_below_the_size_gate(monkeypatch):
    """A call below MIN_PAIRS runs the kernel without the prefilter (results
    the same, of course), and a large one after it the prefilter's."""
    monkeypatch.setattr(_cpu_kmin, "MIN_PAIRS", 1 << 26)
    x, y = _cloud("uniform", 301, 3, np.float32), _cloud("uniform", 3000, 3, np.float32, 1)
    _same(x, y, 10)
    _same(x, y, 10, "argKmin", axis=0)


def test_where_it_pays(monkeypatch):
    """Without FORCE the kernel carries the prefilter where it measured
    faster: float32 D = 2..5, float64 D = 2..6, and D >= 32."""
    monkeypatch.setattr(_cpu_kmin, "FORCE", False)
    rng = np.random.default_rng(0)
    for d, dtype, used in [(1, np.float64, False), (2, np.float32, True), (5, np.float32, True),
                           (6, np.float32, False), (6, np.float64, True),
                           (8, np.float32, False), (8, np.float64, False),
                           (33, np.float32, True)]:
        x = rng.random((5, d)).astype(dtype)
        f = kt.Vi(x).sqdist(kt.Vj(x))
        src = _cpu_backend.generate_source(f._plan("ArgKMin", 1, K=3)[0], key="k")
        assert ("kt_kpf_scan" in src) == used, (d, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_large_call(monkeypatch, dtype):
    """At the real size gates: a call large enough for the prefilter, run by
    chunks of rows (x's rows permuted in each, the outputs put back), ties
    from duplicated points included."""
    monkeypatch.setattr(_cpu_kmin, "MIN_PAIRS", 1 << 26)
    monkeypatch.setattr(_cpu_kmin, "MIN_NY", 2048)
    x = _cloud("duplicates", 9001, 3, dtype)
    y = np.concatenate([_cloud("duplicates", 8000, 3, dtype, 1), x[:999]])
    _same(x, y, 10)


def test_without_avx512(tmp_path):
    """The prefilter's kernel built with -mno-avx512f (a compiler wrapper):
    its buffered tiles, on x's rows in the seed order, give the same
    Kmin_argKmin as a stable NumPy sort (ties, NaN, +-inf)."""
    wrapper = tmp_path / "cc-no-avx512"
    wrapper.write_text(f'#!/bin/sh\nexec {shutil.which("cc") or "cc"} "$@" -mno-avx512f\n')
    wrapper.chmod(0o755)
    code = textwrap.dedent(
        """
        import numpy as np, kerneltools as kt
        from kerneltools.backend.cpu import _kmin as _cpu_kmin
        _cpu_kmin.MIN_PAIRS = _cpu_kmin.MIN_NY = 0
        _cpu_kmin.GUARD = False  # the prefilter's kernel, whatever the data
        rng = np.random.default_rng(3)
        for dt in (np.float32, np.float64):
            x = rng.integers(0, 6, (70, 2)).astype(dt)  # ties on an integer grid
            y = rng.integers(0, 40, (1100, 2)).astype(dt)
            y[5], y[300], y[900] = np.nan, np.inf, -np.inf
            d2 = ((x[:, None].astype(float) - y[None].astype(float)) ** 2).sum(-1)
            ref = np.argsort(np.where(np.isnan(d2), np.inf, d2), axis=1, kind="stable")[:, :6]
            F = kt.Vi(x).sqdist(kt.Vj(y))
            with np.errstate(all="ignore"):
                val, idx = F.Kmin_argKmin(6, axis=1, backend="cpu")
            np.testing.assert_array_equal(idx, ref)
            np.testing.assert_array_equal(val, np.take_along_axis(d2, ref, 1).astype(dt))
        print("ok")
        """
    )
    env = dict(os.environ, CC=str(wrapper), KERNELTOOLS_CACHE_DIR=str(tmp_path / "c"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
    built = [p.read_text() for p in (tmp_path / "c").rglob("*.c")]
    assert sum("kt_kpf_scan" in src for src in built) == 2  # float32, float64


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_guard_chooses(monkeypatch, dtype):
    """Without FORCE, a call whose data leave nothing to prune (y on a sphere
    around x's small cluster: every y nearly equidistant from every x) runs
    the buffered kernel, and a uniform cube of the issue's size (3e4^2) the
    prefilter's (``_cpu_kmin.prunes``; ``last_guard`` records the choice);
    the outputs are those of the buffered kernel either way, and with the
    prefilter forced."""
    monkeypatch.setattr(_cpu_kmin, "FORCE", False)
    rng = _rng("guard", np.dtype(dtype).name)

    def sphere(n, m):
        y = rng.normal(size=(m, 3))
        return 1e-3 * rng.normal(size=(n, 3)), y / np.linalg.norm(y, axis=1, keepdims=True)

    def cube(n, m):
        return rng.random((n, 3)), rng.random((m, 3))

    # the choice at the size (no kernel run: the guard alone)
    for data, chosen in [(sphere, False), (cube, True)]:
        x, y = (a.astype(dtype) for a in data(30000, 30000))
        plan = kt.Vi(x).sqdist(kt.Vj(y))._plan("ArgKMin", 1, K=10)[0]
        assert _cpu_kmin.worth(plan)
        assert _cpu_kmin.prunes(plan, [x, y]) is chosen, _cpu_kmin.last_guard
    # small calls: the choice recorded, the outputs the buffered kernel's
    for data in (sphere, cube):
        x, y = (a.astype(dtype) for a in data(500, 3000))
        need = _cpu_kmin.guard_ratio(3, np.dtype(dtype), 500 * 3000)
        for method in METHODS:
            a = _run(x, y, 10, method, 1, False)
            _cpu_kmin.last_guard[:] = [None, None]
            b = _run(x, y, 10, method, 1, True)
            r, chosen = _cpu_kmin.last_guard
            assert chosen is (r >= need)
            if data is sphere:
                assert not chosen
            for u, v in zip(a, b):
                np.testing.assert_array_equal(u, v)
        monkeypatch.setattr(_cpu_kmin, "GUARD", False)  # the prefilter forced
        for u, v in zip(_run(x, y, 10, "Kmin_argKmin", 1, False),
                        _run(x, y, 10, "Kmin_argKmin", 1, True)):
            np.testing.assert_array_equal(u, v)
        monkeypatch.setattr(_cpu_kmin, "GUARD", True)


def test_the_guard_thresholds():
    """guard_ratio: none from WIDE_MIN_DIM, higher at 1e4^2 than at 3e4^2
    (interpolated in log(pairs) between them, constant beyond)."""
    assert _cpu_kmin.guard_ratio(32, np.dtype(np.float32), 1e9) is None
    for dt in (np.float32, np.float64):
        a, b, c = (_cpu_kmin.guard_ratio(3, np.dtype(dt), p) for p in (5e7, 3e8, 2e9))
        assert a == _cpu_kmin.guard_ratio(3, np.dtype(dt), 1e8) and a > b > c
        assert c == _cpu_kmin.guard_ratio(3, np.dtype(dt), 9e8)


def test_the_guard_ratio():
    """prune_ratio: near 0 on the sphere, about 1 on the cube and for queries
    far from y's cloud; rows with a non-finite feature left out (NaN when
    every sampled row of y has one)."""
    rng = _rng("ratio")
    y = rng.normal(size=(4000, 3))
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    x = 1e-3 * rng.normal(size=(300, 3))
    plan = kt.Vi(x).sqdist(kt.Vj(y))._plan("ArgKMin", 1, K=10)[0]
    assert _cpu_kmin.prune_ratio(plan, [x, y]) < 0.05
    cube = rng.random((4000, 3))
    assert _cpu_kmin.prune_ratio(plan, [rng.random((300, 3)), cube]) > 0.8
    assert _cpu_kmin.prune_ratio(plan, [rng.random((300, 3)) + 10, cube]) > 0.8
    y[::2, 1] = np.nan
    y[1::4, 0] = np.inf
    assert _cpu_kmin.prune_ratio(plan, [x, y]) < 0.05
    y[1::2, 2] = np.nan
    assert np.isnan(_cpu_kmin.prune_ratio(plan, [x, y]))
