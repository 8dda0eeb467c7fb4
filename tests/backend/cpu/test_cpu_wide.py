"""Wide formulas (D >= 16) and the many-column Sum against dense NumPy.

At D >= 16 the C backend computes a smooth reduction's squared distances in
the expanded form ``|x|^2 + |y|^2 - 2 <x, y>`` (products by a register-blocked
micro-kernel, ``|y_j|^2`` once per call: ``backend/_cpu_dots.py``), clamped
at 0, with inf and NaN kept as in the direct form; ``K @ B`` with B of E >= 8
columns then multiplies the tile's K by B's block (``backend/_cpu_gemm.py``).
Every test runs on every available backend and checks against a float64
dense NumPy computation on the same (rounded) inputs. Formulas and sizes are
shared between the tests (each distinct one is a compilation).
"""

import os
from pathlib import Path

import numpy as np
import pytest

import kerneltools as kt
from kerneltools.backend.cpu import _backend as _cpu_backend

GOLDEN = Path(__file__).resolve().parents[1] / "golden"

#: (D, E): one formula each, every dtype; the micro-kernel's paths: D = 17
#: (IB = 8 rows), 79, 300 (64 or 48 rows per block), E = 1 (fused Sum), 8 and
#: 33 (the many-column form, with a partial vector of columns).
CASES = [(17, 8), (79, 1), (300, 33)]

#: Relative tolerance (of the largest output) against the float64 reference.
TOL = {np.dtype(np.float32): 2e-5, np.dtype(np.float64): 1e-12}


def _gauss(x, y, b, g):
    """The kernel's formula and its float64 dense reference."""
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        d2 = ((x64[:, None] - y64[None]) ** 2).sum(-1)
        ref = np.exp(-g * d2) @ b.astype(np.float64)
    return (-kt.Vi(x).sqdist(kt.Vj(y)) * g).exp() * kt.Vj(b), ref


def _data(d, e, dtype, n=70, m=600, offset=0.0, seed=0):
    rng = np.random.default_rng(seed)
    x = (offset + rng.random((n, d))).astype(dtype)
    y = (offset + rng.random((m, d))).astype(dtype)
    b = rng.standard_normal((m, e)).astype(dtype)
    return x, y, b


@pytest.mark.parametrize("d,e", CASES)
def test_wide_gaussian_sum_matches_dense_numpy(d, e, backend, dtype):
    """Two blocks of rows (the last partial), two tiles of points (the last
    partial), bandwidth of the order of the distances."""
    x, y, b = _data(d, e, dtype)
    F, ref = _gauss(x, y, b, 3.0 / d)
    got = F.sum(axis=1, backend=backend)
    assert got.shape == (70, e) and got.dtype == dtype
    np.testing.assert_allclose(got, ref, rtol=0, atol=TOL[dtype] * np.abs(ref).max())


def test_far_from_origin_cancellation_stays_within_the_expanded_forms_bound(backend,
                                                                             dtype):
    """Points at distance ~1 from each other but ~90 from the origin: the
    expanded form cancels |x|^2 + |y|^2 ~ 2 * 79 * 10^2 down to |x - y|^2 ~ 7,
    a rounding error of a few eps * 1.6e4 in d2 (float32: ~ 4e-3, a relative
    error of g * 4e-3 ~ 1.5e-4 on K), as in BLAS-based codes. Identical points
    are clamped at distance 0: exp(-g * d2) never exceeds 1."""
    d, e = 79, 1
    x, y, b = _data(d, e, dtype, offset=10.0, seed=1)
    g = 3.0 / d
    F, ref = _gauss(x, y, b, g)
    bound = 8 * np.finfo(dtype).eps * 2 * (10.5 ** 2 * d) * g  # relative, on K
    got = F.sum(axis=1, backend=backend)
    scale = np.exp(-g * ((x[:, None].astype(float) - y[None]) ** 2).sum(-1)) @ np.abs(b)
    assert np.all(np.abs(got - ref) <= bound * scale + 1e-300)
    # the same far point on both sides, repeated: the clamp keeps K at <= 1
    p = np.repeat(x[:1], 5, axis=0)
    K1 = (-kt.Vi(p).sqdist(kt.Vj(p[:1])) * g).exp().sum(axis=1, backend=backend)
    assert np.all(K1 <= 1) and np.all(K1 >= 1 - bound)


@pytest.mark.parametrize("d,e", CASES[:2])
def test_nan_and_inf_propagate_as_in_the_fused_sum(d, e, backend, dtype):
    """inf in x_i or y_j: distance inf, K = 0 (never inf - inf = NaN from
    the expanded form); NaN in x_i: row i NaN only; NaN in y_j: every row."""
    x, y, b = _data(d, e, dtype)
    x[3, 0], x[5, d - 1], x[9, 2] = np.inf, -np.inf, np.nan
    y[7, 1], y[500, 0] = np.inf, -np.inf
    F, ref = _gauss(x, y, b, 3.0 / d)
    got = F.sum(axis=1, backend=backend)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    assert np.isnan(ref).sum() == e  # row 9 only
    ok = ~np.isnan(ref)
    np.testing.assert_allclose(got[ok], ref[ok], rtol=0,
                               atol=TOL[dtype] * np.abs(ref[ok]).max())
    y[11, 0] = np.nan
    F, ref = _gauss(x, y, b, 3.0 / d)
    assert np.isnan(ref).all() and np.isnan(F.sum(axis=1, backend=backend)).all()


def test_float32_wide_sums_accumulate_per_tile_in_double(backend):
    """The float32 contract of the Sum (``test_cpu_backend``'s million-term
    test, here through the micro-kernel and the many-column form): each
    tile's partial sums are folded into a double state, so a sum of 2 * 10^5
    positive terms keeps a relative error far below sequential float32's."""
    d, e = CASES[0]
    rng = np.random.default_rng(2)
    x = rng.random((4, d)).astype(np.float32)
    y = rng.random((200_000, d)).astype(np.float32)
    b = rng.random((200_000, e)).astype(np.float32)
    F, ref = _gauss(x, y, b, 3.0 / d)
    got = F.sum(axis=1, backend=backend).astype(np.float64)
    assert np.max(np.abs(got - ref) / ref) <= 1e-5


def _golden_plan():
    rng = np.random.default_rng(0)
    x, y = rng.random((5, 17)), rng.random((6, 17))
    b = rng.random((6, 8))
    F = (-kt.Vi(x.astype(np.float32)).sqdist(kt.Vj(y.astype(np.float32))) * 0.5).exp()
    return (F * kt.Vj(b.astype(np.float32)))._plan("Sum", 1)[0]


def test_generated_wide_source_is_pinned():
    """Golden file of the D = 17, E = 8 float32 kernel: the products'
    micro-kernel, the norms read from ``yn0``, the many-column product.
    Regenerate with KERNELTOOLS_UPDATE_GOLDEN=1 after checking the diff."""
    source = _cpu_backend.generate_source(_golden_plan(), vector_math=True, key="golden")
    path = GOLDEN / "wide_gauss_manycol_d17_float32.c"
    if os.environ.get("KERNELTOOLS_UPDATE_GOLDEN"):
        path.write_text(source)
    assert source == path.read_text()


def test_generated_exact_distance_source_is_pinned():
    """Golden file of exp(-|x - y|) at D = 33, float32: the squared distance
    under the root from the micro-kernel, whose store recomputes directly the
    pairs near 0 (_cpu_dots.exact_distance). Regenerate as above."""
    x = np.random.default_rng(0).random((5, 33)).astype(np.float32)
    plan = (-(kt.Vi(x) - kt.Vj(x)).norm2()).exp()._plan("Sum", 1)[0]
    source = _cpu_backend.generate_source(plan, vector_math=True, key="golden")
    path = GOLDEN / "wide_laplace_d33_float32.c"
    if os.environ.get("KERNELTOOLS_UPDATE_GOLDEN"):
        path.write_text(source)
    assert source == path.read_text()


@pytest.mark.parametrize("e", [40, 300])
def test_many_columns_in_wide_blocks_match_dense_numpy(e, backend):
    """``K @ B`` with more columns than the generic block (32): on the C
    backend one many-column kernel of up to 128 float32 columns (widths
    rounded up to a multiple of 32 with zero columns, so K is computed once
    per 128 columns), elsewhere blocks of 32; the padding never shows."""
    d, dtype = CASES[1][0], np.dtype(np.float32)
    x, y, b = _data(d, e, dtype)
    F, ref = _gauss(x, y, b, 3.0 / d)
    K = (-kt.Vi(x).sqdist(kt.Vj(y)) * (3.0 / d)).exp()
    got = K.matmul(b, backend=backend)
    assert got.shape == (70, e) and got.dtype == dtype
    np.testing.assert_allclose(got, ref, rtol=0, atol=TOL[dtype] * np.abs(ref).max())


# Moved from test_cpu_backend.py (issue 38): wide formulas of every kind, with
# ranges, and many-column sums, over the backends
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
def test_wide_formulas_match_numpy(kind, d, backend, dtype, shared_cache):
    """MNIST-sized and wider variables (rendered as loops over the features on
    the CPU, so that they compile in about a second) give NumPy's results."""
    run, ref = _wide_case(kind, d, dtype)
    _check_wide(kind, run(backend), ref, dtype)


@pytest.mark.parametrize("kind", ["argkmin", "weighted"])
def test_wide_formulas_with_ranges_match_numpy(kind, backend, dtype, shared_cache):
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


@pytest.mark.parametrize("e, d, axis", [(8, 3, 1), (33, 3, 1), (33, 20, 0), (128, 20, 1)])
def test_many_column_sums_match_numpy(e, d, axis, backend, dtype, shared_cache):
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


@pytest.mark.parametrize("e, d, g", [(8, 3, 3.0), (10, 15, 0.2), (100, 40, -0.02)])
def test_block_sparse_many_column_sums_match_numpy(e, d, g, backend, dtype, shared_cache):
    """``K @ B`` restricted to kept blocks, B of 8 to 100 columns (on the CPU
    the block-sparse GEMM form: K for RB rows into a buffer over whole
    vectors, then the micro-kernel over the tile's ``nj`` columns; D = 40 the
    loop over the features, g < 0 the exp with overflow branch, 100 columns
    two kernels' blocks) equals dense
    NumPy over the kept pairs: blocks of every size, intervals shorter than a
    vector and longer than a tile, a row block with no interval (zeros), and
    NaN / inf in B reaching only the rows whose kept pairs read them."""
    rng = np.random.default_rng(e)
    n, m = 203, 900
    x, y = rng.random((n, d)), rng.random((m, d))
    b = rng.standard_normal((m, e))
    li = np.r_[rng.integers(0, 12, n - 1), 12]  # row cell 12: one point, no pairs
    lj = np.r_[rng.integers(0, 8, m - 300), np.full(300, 8)]  # cell 8: > 1 tile
    lj[:3] = 9  # a column cell of 3 points
    keep = rng.random((13, 10)) < 0.5
    keep[12] = False
    keep[:, 8] |= np.arange(13) < 6
    b[np.flatnonzero(lj == 5)[0], 3] = np.nan
    b[np.flatnonzero(lj == 7)[0], 1] = np.inf
    x, y, b = x.astype(dtype), y.astype(dtype), b.astype(dtype)
    K = (-kt.Vi(x).sqdist(kt.Vj(y)) * g).exp()
    got = K.with_ranges(kt.ranges.block_sparsity(li, lj, keep)).matmul(b, backend=backend)
    mask = keep[li][:, lj]
    dense = np.exp(-g * ((x[:, None].astype(float) - y[None]) ** 2).sum(-1)) * mask
    with np.errstate(invalid="ignore"):
        ref = np.zeros((n, e))
        for k in range(e):  # each column over its kept pairs only (0 * inf: none)
            rows = mask & np.isfinite(b[:, k])[None]
            ref[:, k] = (dense * rows) @ np.nan_to_num(b[:, k].astype(float))
            bad = mask[:, ~np.isfinite(b[:, k])].any(axis=1)
            ref[bad, k] = (dense[bad] @ b[:, k].astype(float))
        scale = np.abs(dense) @ np.abs(np.nan_to_num(b.astype(float), posinf=0))
    assert got.shape == ref.shape and got.dtype == dtype
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(ref))
    assert not got[li == 12].any()
    finite = np.isfinite(ref)
    err = np.abs(got.astype(float)[finite] - ref[finite])
    assert (err <= TOL[np.dtype(dtype)] * scale[finite] + 1e-300).all()


def test_block_sparse_many_column_source_is_the_gemm_form():
    """The block-sparse kernel of ``K @ B`` with B of 8 columns or more is
    the GEMM form (``kb`` then ``bq``), golden-pinned; below 8 columns the
    pair-by-pair one."""
    x = np.random.default_rng(0).random((5, 3)).astype(np.float32)
    K = (-kt.Vi(x).sqdist(kt.Vj(x)) * 0.5).exp()
    wide, narrow = (_cpu_backend.generate_source(
        (K * kt.Vj(np.ones((5, e), np.float32)))._plan("Sum", 1)[0], key="golden",
        ranges=True) for e in (8, 7))
    assert "bq" in wide and "kb[" in wide and "bq" not in narrow
    path = GOLDEN / "gauss_manycol_float32_ranges.c"
    if os.environ.get("KERNELTOOLS_UPDATE_GOLDEN"):
        path.write_text(wide)
    assert wide == path.read_text()
