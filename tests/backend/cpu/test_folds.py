"""The dense kernel's folds over tiles: the in-loop log-sum-exp sums and
K-min test, and the K-min fold in vector registers (with AVX-512 and
without), against NumPy's stable sort and SciPy's logsumexp."""

import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kerneltools as kt
from kerneltools.backend.cpu._compiler import find_compiler

pytestmark = pytest.mark.skipif(
    not find_compiler().ok, reason=f"no C compiler: {find_compiler().reason}"
)


@pytest.mark.parametrize("order", ["increasing", "decreasing", "ramp"])
def test_in_loop_lse_and_kmin_paths_across_tiles(order, dtype, shared_cache):
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
def test_kmin_fold_in_vector_registers(K, dtype, shared_cache):
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
