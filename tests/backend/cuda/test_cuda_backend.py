"""The CUDA backend on a machine without a GPU, and its GPU-only checks.

Without a GPU: detection and errors, NVRTC compilation of the generated
source (``python -m kerneltools check --backend cuda --compile-only``), golden
files, and the generated kernels *run on the CPU* through a C++ shim
(``_cuda_shim``) against the NumPy backend, which checks the tiles, tails,
row blocking and the reductions' CUDA updates. On a GPU (marker ``gpu``):
CuPy arrays in and out, on the current stream. The shared correctness suite
(test_reductions, test_ops, ...) runs on CUDA through the ``backend`` fixture.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import kerneltools as kt
from kerneltools.backend.cuda import _backend as _cuda_backend
from kerneltools.backend import _dispatch, _ranges
from kerneltools.backend._dispatch import run_plan
from kerneltools.exceptions import BackendUnavailableError

import _cuda_shim
from _cuda_shim import SHIM_TUNING
from _helpers import assert_close

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def _nvrtc_status():
    try:
        _cuda_backend.nvrtc()
        return True, ""
    except OSError as exc:
        return False, str(exc)


needs_nvrtc = pytest.mark.skipif(not _nvrtc_status()[0], reason=f"NVRTC: {_nvrtc_status()[1]}")
needs_shim = pytest.mark.skipif(not _cuda_shim.available()[0], reason=_cuda_shim.available()[1])
needs_gpu = pytest.mark.skipif(not _cuda_backend.gpu_status()[0],
                               reason=f"no GPU: {_cuda_backend.gpu_status()[1]}")


# ---------------------------------------------------------------------------
# Detection and errors
# ---------------------------------------------------------------------------
def test_import_does_not_probe_cuda():
    code = ("import kerneltools, sys; "
            "from kerneltools.backend.cuda import _backend as c; "
            "print(c.gpu_status.cache_info().currsize, 'cupy' in sys.modules)")
    out = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True,
                         text=True, check=True)
    assert out.stdout.split() == ["0", "False"], out.stdout + out.stderr


def test_without_gpu_auto_goes_to_cpu_and_cuda_raises(monkeypatch):
    monkeypatch.setattr(_cuda_backend, "gpu_status", lambda: (False, "no GPU in this test"))
    monkeypatch.setattr(_dispatch, "_resolved", {})
    x = np.random.default_rng(0).random((5, 2))
    K = (-kt.Vi(x).sqdist(kt.Vj(x))).exp()
    assert _dispatch.resolve_backend("auto", K._plan("Sum", 1)[0]).name in ("cpu", "numpy")
    with pytest.raises(BackendUnavailableError, match="no GPU in this test"):
        K.sum(axis=1, backend="cuda")


def test_gpu_status_explains_itself():
    ok, why = _cuda_backend.gpu_status()
    assert isinstance(ok, bool) and why
    if not ok:
        assert "CuPy" in why or "NVRTC" in why or "KERNELTOOLS_DISABLE_CUDA" in why


# ---------------------------------------------------------------------------
# Compilation with NVRTC (no GPU needed)
# ---------------------------------------------------------------------------
@needs_nvrtc
def test_compile_only_check_passes():
    """Every representative plan compiles for sm_80 and sm_90 without warnings."""
    proc = subprocess.run(
        [sys.executable, "-m", "kerneltools", "check", "--backend", "cuda", "--compile-only"],
        capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert " 0 failed" in proc.stdout


@needs_nvrtc
def test_compile_error_reports_log_and_numbered_source():
    x = np.ones((4, 3), dtype=np.float32)
    plan = (kt.Vi(x) - kt.Vj(x)).exp()._plan("Sum", 1)[0]
    source, _ = _cuda_backend.generate_cuda_source(plan)
    broken = source.replace("__syncthreads();", "__syncthreads()", 1)
    res = _cuda_backend.nvrtc_compile(broken, "sm_90")
    assert not res.ok and "error" in res.log
    assert "   1  /* kerneltools" in _cuda_backend.numbered(broken)


def _golden_plans():
    rng = np.random.default_rng(0)
    x, y = rng.random((5, 3)), rng.random((6, 3))
    w = rng.random((6, 2))
    gauss32 = (-kt.Vi(x.astype(np.float32)).sqdist(kt.Vj(y.astype(np.float32))) * 0.5).exp()
    f = kt.Vi(x).sqdist(kt.Vj(y))
    return {
        "gauss_sum_float32": (gauss32 * kt.Vj(w[:, :1].astype(np.float32)))._plan("Sum", 1)[0],
        "sqdist_argkmin_float64": f._plan("ArgKMin", 1, K=3)[0],
        "lse_weight_axis0_float64": (-f)._plan("LogSumExpWeight", 0, weight=kt.Vi(x[:, :2]))[0],
    }


@pytest.mark.parametrize("name", sorted(_golden_plans()))
def test_generated_cuda_is_pinned(name):
    """Golden files: a change to the generated CUDA shows in review.

    Regenerate with KERNELTOOLS_UPDATE_GOLDEN=1 after checking the diff.
    """
    source, _ = _cuda_backend.generate_cuda_source(_golden_plans()[name], key="golden")
    path = GOLDEN / f"{name}.cu"
    if os.environ.get("KERNELTOOLS_UPDATE_GOLDEN"):
        path.write_text(source)
    assert source == path.read_text()


# ---------------------------------------------------------------------------
# The generated kernels, run on the CPU by the shim, against the NumPy backend
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shim_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("cuda-shim")


def _compare(lazy_reduce, plan_args, shim_dir, rtol, tuning=SHIM_TUNING):
    plan, args = plan_args
    _assert_outputs_match(_cuda_shim.run(plan, args, tuning, shim_dir),
                          run_plan(plan, args, "numpy"), rtol)


def _assert_outputs_match(got, ref, rtol):
    """Index outputs equal, values within ``rtol``."""
    for g, r in zip(got, ref):
        if r.dtype.kind == "i":
            np.testing.assert_array_equal(g, r)
        else:
            # signed sums cancel: scale by the column's typical magnitude too
            finite = np.where(np.isfinite(r), np.abs(r), 0)
            assert_close(g, r, rtol, scale=finite + finite.mean(axis=0) + 1e-30)


def _data(dtype, n=45, m=71, d=3, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, d)).astype(dtype), rng.standard_normal((m, d)).astype(dtype),
            rng.standard_normal((m, 2)).astype(dtype))


REDUCTIONS = [
    ("Sum", {}), ("LogSumExp", {}), ("Min", {}), ("Max", {}), ("ArgMin", {}), ("ArgMax", {}),
    ("Min_ArgMin", {}), ("Max_ArgMax", {}), ("KMin", {"K": 4}), ("ArgKMin", {"K": 4}),
    ("KMin_ArgKMin", {"K": 1}), ("LogSumExpWeight", {"w": True}),
    ("SumSoftMaxWeight", {"w": True}), ("SumSquares", {}),
]


@needs_shim
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("name,kw", REDUCTIONS, ids=[r[0] for r in REDUCTIONS])
def test_shim_reductions_match_numpy(name, kw, axis, dtype, shim_dir):
    x, y, b = _data(dtype)
    xi, yj = kt.Vi(x), kt.Vj(y)
    d2 = xi.sqdist(yj)
    if kw.get("w"):
        F, weight = -d2, (kt.Vj(b) if axis == 1 else kt.Vi(x[:, :2]))
    elif name in ("Sum", "LogSumExp"):
        F, weight = ((-d2 * 0.7).exp() * kt.Vj(b) if axis == 1
                     else (-d2 * 0.7).exp() * kt.Vi(x[:, :2])), None
    else:  # two components, with ties (rounded values)
        F, weight = (d2 * 2).round(0).concat((xi - yj).abs().sum(-1)), None
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    _compare(None, F._plan(name, axis, weight=weight, K=kw.get("K", 1)), shim_dir, rtol)


@needs_shim
def test_shim_nan_and_inf_follow_numpy(shim_dir):
    x, y, b = _data(np.float64, n=20, m=40)
    y[3, 0] = np.nan
    y[7, 1] = np.inf
    xi, yj = kt.Vi(x), kt.Vj(y)
    F = -xi.sqdist(yj)
    for name in ("LogSumExp", "Min_ArgMin", "Max_ArgMax", "KMin_ArgKMin"):
        _compare(None, F._plan(name, 1, K=3 if "K" in name else 1), shim_dir, 1e-12)
    F2 = -(xi - kt.Vj(np.where(np.isfinite(y), y, 0))).abs().sum(-1)
    F2 = F2 + kt.Vj(np.where(np.arange(40) == 5, -np.inf, 0.0)[:, None])
    _compare(None, F2._plan("LogSumExp", 1), shim_dir, 1e-12)
    _compare(None, F2._plan("SumSoftMaxWeight", 1, weight=kt.Vj(b)), shim_dir, 1e-12)


@needs_shim
def test_shim_wide_and_global_schemes(shim_dir):
    """D = 40 (i-variables read in place) and D = 800 float64 (global scheme)."""
    for d in (40, 800):
        x, y, _ = _data(np.float64, n=20, m=35, d=d)
        F = kt.Vi(x).sqdist(kt.Vj(y))
        plan_args = F._plan("ArgKMin", 1, K=3)
        launch = _cuda_backend.launch_shape(plan_args[0], SHIM_TUNING)
        assert (launch.nc == 0) == (d == 800)
        _compare(None, plan_args, shim_dir, 1e-12)
        _compare(None, (-F / d).exp()._plan("Sum", 0), shim_dir, 1e-12)


@needs_shim
def test_shim_gradient_and_large_output(shim_dir, dtype):
    x, y, b = _data(dtype, n=30, m=50)
    xi, yj = kt.Vi(x), kt.Vj(y)
    K = (-xi.sqdist(yj) * 0.5).exp()
    G = K.grad(xi, kt.Vi(x[:, :1])) * kt.Vj(b[:, :1])
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    _compare(None, G._plan("Sum", 1), shim_dir, rtol)
    B = np.random.default_rng(1).standard_normal((50, 32)).astype(dtype)
    _compare(None, (K * kt.Vj(B))._plan("Sum", 1), shim_dir, rtol)


@needs_shim
def test_shim_default_launch_shape(shim_dir):
    """The real block size (256 threads) and index arithmetic of the j-index."""
    x, y, _ = _data(np.float32, n=600, m=300)
    F = kt.Vi(x).sqdist(kt.Vj(y)) + 1e-3 * kt.Vj(np.arange(300.0)[:, None].astype(np.float32))
    _compare(None, F._plan("ArgKMin", 1, K=3), shim_dir, 0, tuning=_cuda_backend.TUNING)
    _compare(None, F._plan("Sum", 1), shim_dir, 1e-5, tuning=_cuda_backend.TUNING)


# ---------------------------------------------------------------------------
# The exp unit's share offloaded to a polynomial (TUNING["exp_poly_rows"])
# ---------------------------------------------------------------------------
def _exp2_plan(x):
    """Sum_j 2^(x_i * 1) over one j-point: each row's output is 2^x_i."""
    one = np.ones((1, 1), np.float32)
    return (kt.Vi(x[:, None]) * kt.Vj(one)).exp2()._plan("Sum", 1)


@needs_shim
def test_shim_exp2_polynomial_is_as_accurate_as_the_exp_unit(shim_dir):
    """The polynomial's 2^x against float64 exp2: relative error <= 3e-7 over
    the normal range (ex2.approx: about 2 ulp), inf above 2^128, 0 below
    2^-150 (rounded), NaN and +-inf as NumPy."""
    x = np.concatenate([np.linspace(-125, 127.9, 997), np.arange(-8, 8, 0.25) + 1e-3,
                        [0.5, -0.5, 0.0]]).astype(np.float32)
    tuning = {**SHIM_TUNING, "exp_poly_rows": 4}
    plan, args = _exp2_plan(x)
    assert "kt_exp2f_poly" in _cuda_backend.generate_cuda_source(plan, tuning=tuning)[0]
    got = _cuda_shim.run(plan, args, tuning, shim_dir)[0][:, 0].astype(np.float64)
    ref = np.exp2(x.astype(np.float64))
    assert np.abs(got / ref - 1).max() <= 3e-7
    special = np.array([np.nan, np.inf, -np.inf, 128.5, 200, -150.5, -300, -126.5],
                       np.float32)
    got = _cuda_shim.run(*_exp2_plan(special), tuning, shim_dir)[0][:, 0]
    np.testing.assert_array_equal(np.isnan(got), [1, 0, 0, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(got[1:7], [np.inf, 0, np.inf, np.inf, 0, 0])
    assert abs(got[7] / np.exp2(-126.5) - 1) < 1e-6  # gradual underflow, as NumPy


@needs_shim
@pytest.mark.parametrize("poly_rows", [1, 4])
def test_shim_exp_offload_matches_numpy(poly_rows, shim_dir):
    """Rows that take their exps from the polynomial (a share, or all of
    them) keep the float32 accuracy contract of every exp reduction."""
    x, y, b = _data(np.float32)
    xi, yj = kt.Vi(x), kt.Vj(y)
    d2 = xi.sqdist(yj)
    tuning = {**SHIM_TUNING, "exp_poly_rows": poly_rows,
              "by_reduction": {r: {4: (8, 4)} for r in ("Sum", "LogSumExp", "SumSoftMaxWeight")}}
    for plan_args in ((-d2 * 0.7).exp() * kt.Vj(b))._plan("Sum", 1), \
            (-d2)._plan("LogSumExp", 1), (-d2)._plan("SumSoftMaxWeight", 1, weight=kt.Vj(b)):
        source = _cuda_backend.generate_cuda_source(plan_args[0], tuning=tuning)[0]
        uses = source.count("KT_EXP2P(") + source.count("KT_EXPRP(") - 2  # less the defines
        assert uses >= poly_rows
        _compare(None, plan_args, shim_dir, 1e-5, tuning=tuning)


@needs_nvrtc
def test_exp_offload_compiles_without_spills():
    x = np.zeros((16, 3), np.float32)
    plan = ((-kt.Vi(x).sqdist(kt.Vj(x)) * 0.5).exp() * kt.Vj(x[:, :1]))._plan("Sum", 1)[0]
    source, _ = _cuda_backend.generate_cuda_source(
        plan, tuning={**_cuda_backend.TUNING, "exp_poly_rows": 1})
    assert source.count("KT_EXP2P(") == 2  # its define and one row's exp
    res = _cuda_backend.nvrtc_compile(source, "sm_90")
    assert res.ok and "warning" not in res.log.lower(), res.log
    assert res.spill_stores == 0, res.log


# ---------------------------------------------------------------------------
# The native block-sparse kernel (ranges=): one launch for every block
# ---------------------------------------------------------------------------
def _ranges_golden_plans():
    plans = _golden_plans()
    return {f"{k}_ranges": plans[k] for k in ("gauss_sum_float32", "sqdist_argkmin_float64")}


@pytest.mark.parametrize("name", sorted(_ranges_golden_plans()))
def test_generated_cuda_ranges_is_pinned(name):
    """Golden files of the block-sparse variant (KERNELTOOLS_UPDATE_GOLDEN=1)."""
    source, _ = _cuda_backend.generate_cuda_source(_ranges_golden_plans()[name], key="golden",
                                                   ranges=True)
    path = GOLDEN / f"{name}.cu"
    if os.environ.get("KERNELTOOLS_UPDATE_GOLDEN"):
        path.write_text(source)
    assert source == path.read_text()


def _pruned_plans(dtype=np.float32):
    """The block-sparse plans of the pruned k-NN (argKmin K = 10 of a squared
    distance, D = 3) and of the truncated Gaussian kernel (Sum, two columns)."""
    x = np.zeros((16, 3), dtype)
    F = kt.Vi(x).sqdist(kt.Vj(x))
    return {"pruned k-NN": F._plan("KMin_ArgKMin", 1, K=10)[0],
            "truncated Gaussian": ((-F * 0.5).exp() * kt.Vj(x[:, :2]))._plan("Sum", 1)[0],
            "log-sum-exp": (-F)._plan("LogSumExp", 1)[0]}


@needs_nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ranges_kernels_compile_without_warnings_or_spills(arch):
    for label, plan in _pruned_plans().items():
        source, _ = _cuda_backend.generate_cuda_source(plan, ranges=True)
        res = _cuda_backend.nvrtc_compile(source, arch)
        assert res.ok, f"{label}:\n{res.log}\n{_cuda_backend.numbered(source)}"
        assert "warning" not in res.log.lower(), res.log
        assert res.spill_stores == 0, f"{label}: {res.log}"


def test_ranges_tasks_cover_every_row_once():
    blk = np.array([[0, 5, 0, 2], [5, 5, 2, 2], [5, 40, 2, 3], [40, 41, 3, 3]])
    tasks = _cuda_backend.ranges_tasks(blk, 16)
    assert (tasks[:, 1] - tasks[:, 0]).max() <= 16 and (tasks[:, 1] > tasks[:, 0]).all()
    np.testing.assert_array_equal(np.sort(np.concatenate([np.arange(a, b) for a, b, _, _
                                                          in tasks])), np.arange(41))
    # each task keeps its block's intervals
    owner = np.searchsorted(blk[:, 1], tasks[:, 0], side="right")
    np.testing.assert_array_equal(tasks[:, 2:], blk[owner, 2:])
    assert _cuda_backend.ranges_tasks(np.zeros((0, 4), np.int64), 8).shape == (0, 4)


def test_ranges_shape_fits_small_blocks():
    plan = _pruned_plans()["truncated Gaussian"]
    assert _cuda_backend.ranges_shape(plan, 10**6) == (128, 4)  # the dense shape
    block, rows = _cuda_backend.ranges_shape(plan, 40)
    assert rows == 1 and block == 64
    assert _cuda_backend.ranges_shape(plan, 1) == (32, 1)


def _random_side(rng, n_out, n_red):
    """KeOps' (ranges, slices, redranges) of one axis, at random: uneven
    blocks, empty blocks, rows in no block, blocks with no interval, several
    intervals per block in any order, intervals at both ends."""
    cuts = np.unique(np.concatenate([[0, n_out], rng.integers(0, n_out + 1, 6)]))
    out_r, slices, red = [], [], []
    for a, b in zip(cuts[:-1], cuts[1:]):
        if rng.random() < 0.15:  # rows in no block
            continue
        out_r.append((a, b))
        edges = np.unique(np.concatenate([[0, n_red], rng.integers(0, n_red + 1, 5)]))
        segs = list(zip(edges[:-1], edges[1:]))
        keep = [segs[k] for k in rng.permutation(len(segs))[:rng.integers(0, 4)]]
        red += keep
        slices.append(len(red))
    out_r.append((n_out, n_out))  # an empty block
    slices.append(len(red))
    return (np.array(out_r, np.int64).reshape(-1, 2), np.array(slices, np.int64),
            np.array(red, np.int64).reshape(-1, 2))


def _shim_ranges(plan_args, ranges, shim_dir, rtol, shape=None):
    """The ranged kernel on the shim against the NumPy backend's block-by-block
    reference, through the dispatcher's own gathering (run_native)."""
    plan, args = plan_args
    n_i, n_j = (plan.nx, plan.ny) if plan.axis == 1 else (plan.ny, plan.nx)
    side = _ranges.describe(ranges, plan.axis, n_i, n_j)
    got = _ranges.run_native(plan, args, side, lambda p, a, blk, red, jm, im, pairs: (
        _cuda_shim.run_ranges(p, a, blk, red, jm, im, SHIM_TUNING, shim_dir, shape=shape)))
    _assert_outputs_match(got, run_plan(plan, args, "numpy", ranges=ranges), rtol)


RANGED = [("Sum", {}), ("LogSumExp", {}), ("KMin_ArgKMin", {"K": 4}), ("ArgKMin", {"K": 3}),
          ("Min_ArgMin", {}), ("Max_ArgMax", {}), ("SumSoftMaxWeight", {"w": True})]


def _ranged_formula(name, kw, x, y, b, axis):
    xi, yj = kt.Vi(x), kt.Vj(y)
    d2 = xi.sqdist(yj)
    if kw.get("w"):
        return -d2, (kt.Vj(b) if axis == 1 else kt.Vi(x[:, :2]))
    if name in ("Sum", "LogSumExp"):
        return ((-d2 * 0.7).exp() * (kt.Vj(b) if axis == 1 else kt.Vi(x[:, :2]))), None
    return d2.round(0), None  # ties: equal values resolve to the smallest index


@needs_shim
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("name,kw", RANGED, ids=[r[0] for r in RANGED])
def test_shim_ranges_match_numpy(name, kw, axis, dtype, shim_dir):
    """Random KeOps descriptions (uneven, empty and single blocks, rows in
    no block, intervals in any order) on data in the caller's order."""
    rng = np.random.default_rng(3)
    x, y, b = _data(dtype, n=53, m=67)
    y = np.round(y * 2) / 2 if "Sum" not in name else y  # ties across intervals
    x = np.round(x * 2) / 2 if "Sum" not in name else x
    F, weight = _ranged_formula(name, kw, x, y, b, axis)
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    for seed in range(3):
        rng = np.random.default_rng(seed)
        ranges = _random_side(rng, 53, 67) + _random_side(rng, 67, 53)
        _shim_ranges(F._plan(name, axis, weight=weight, K=kw.get("K", 1)), ranges,
                     shim_dir, rtol)


@needs_shim
def test_shim_ranges_nan_and_inf_follow_numpy(shim_dir):
    """NaN wins min/max and ranks last in K-min, first index among NaNs, in
    the block-sparse kernel as in the NumPy backend."""
    x, y, b = _data(np.float64, n=53, m=67)
    x, y = np.round(x * 2) / 2, np.round(y * 2) / 2
    y[[3, 40], 0] = np.nan
    y[7, 1] = np.inf
    for seed in range(2):
        rng = np.random.default_rng(10 + seed)
        ranges = _random_side(rng, 53, 67) + _random_side(rng, 67, 53)
        for name, kw in RANGED[2:6]:
            F, _ = _ranged_formula(name, kw, x, y, b, 1)
            _shim_ranges(F._plan(name, 1, K=kw.get("K", 1)), ranges, shim_dir, 0)


@needs_shim
def test_shim_ranges_cluster_sorted_and_edge_cases(dtype, shim_dir):
    """A BlockSparsity from clusters (data permuted: imap and jmap are not
    the identity), a single block covering everything (exactly the dense
    result), no interval at all, and the shapes the backend picks for small
    blocks."""
    from kerneltools import ranges as kr

    rng = np.random.default_rng(5)
    x = np.round(rng.random((60, 2)) * 4) / 4
    y = np.round(rng.random((45, 2)) * 4) / 4
    x, y = x.astype(dtype), y.astype(dtype)
    lab_x, lab_y = kr.grid_cluster(x, 0.3), kr.grid_cluster(y, 0.3)
    keep = rng.random((lab_x.max() + 1, lab_y.max() + 1)) < 0.4
    bs = kr.block_sparsity(lab_x, lab_y, keep)
    F = kt.Vi(x).sqdist(kt.Vj(y))
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    everything = (np.array([[0, 60]]), np.array([1]), np.array([[0, 45]]),
                  np.array([[0, 45]]), np.array([1]), np.array([[0, 60]]))
    nothing = (np.array([[0, 60]]), np.array([0]), np.zeros((0, 2), np.int64),
               np.array([[0, 45]]), np.array([0]), np.zeros((0, 2), np.int64))
    for ranges in (bs, everything, nothing):
        for axis in (0, 1):
            _shim_ranges(F._plan("KMin_ArgKMin", axis, K=3), ranges, shim_dir, 0)
            _shim_ranges((-F).exp()._plan("Sum", axis), ranges, shim_dir, rtol)
    dense = run_plan(*F._plan("KMin_ArgKMin", 1, K=3), "numpy")
    plan, args = F._plan("KMin_ArgKMin", 1, K=3)
    side = _ranges.describe(everything, 1, 60, 45)
    got = _ranges.run_native(plan, args, side, lambda p, a, blk, red, jm, im, pairs: (
        _cuda_shim.run_ranges(p, a, blk, red, jm, im, SHIM_TUNING, shim_dir)))
    np.testing.assert_array_equal(got[1], dense[1])
    # the launch shape the backend picks for blocks of a few rows: one warp
    shape = _cuda_backend.ranges_shape(plan, 4)
    _shim_ranges((plan, args), bs, shim_dir, 0, shape=shape)


@needs_shim
def test_cuda_ranges_dispatch_is_one_native_launch(monkeypatch, shim_dir):
    """``ranges=`` with backend='cuda' runs the native kernel once (here on
    the shim, standing in for the GPU), never a dense reduction per block."""
    from kerneltools import ranges as kr

    cuda = _dispatch.BACKENDS["cuda"]
    calls = {"native": 0}

    def native(plan, args, blk, red, jmap, imap, npairs):
        calls["native"] += 1
        return _cuda_shim.run_ranges(plan, args, blk, red, jmap, imap, SHIM_TUNING, shim_dir)

    def dense(*a, **k):
        raise AssertionError("a dense reduction ran for a block-sparse one")

    monkeypatch.setattr(_cuda_backend, "gpu_status", lambda: (True, "the CPU shim"))
    monkeypatch.setattr(_dispatch, "_resolved", {})
    monkeypatch.setattr(cuda, "run_ranges", native)
    monkeypatch.setattr(cuda, "run", dense)
    rng = np.random.default_rng(2)
    x, y = rng.random((40, 3)), rng.random((50, 3))
    lab_x, lab_y = kr.grid_cluster(x, 0.5), kr.grid_cluster(y, 0.5)
    bs = kr.block_sparsity(lab_x, lab_y, rng.random((lab_x.max() + 1, lab_y.max() + 1)) < .5)
    F = kt.Vi(x).sqdist(kt.Vj(y))
    got = F.argKmin(4, axis=1, ranges=bs, backend="cuda")
    np.testing.assert_array_equal(got, F.argKmin(4, axis=1, ranges=bs, backend="numpy"))
    got = (-F).exp().sum(axis=0, ranges=bs, backend="cuda")
    assert_close(got, (-F).exp().sum(axis=0, ranges=bs, backend="numpy"), 1e-12)
    assert calls["native"] == 2


# ---------------------------------------------------------------------------
# On a GPU
# ---------------------------------------------------------------------------
@pytest.mark.gpu
@needs_gpu
def test_cupy_in_cupy_out_on_the_current_stream():
    import cupy

    rng = np.random.default_rng(0)
    x, y, b = rng.random((300, 3)), rng.random((400, 3)), rng.random((400, 2))
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        xc, yc, bc = cupy.asarray(x), cupy.asarray(y), cupy.asarray(b)
        out = (-kt.Vi(xc).sqdist(kt.Vj(yc))).exp() @ bc
        assert isinstance(out, cupy.ndarray)
        idx = kt.Vi(xc).sqdist(kt.Vj(yc)).argKmin(5, axis=1)
        assert isinstance(idx, cupy.ndarray)
    stream.synchronize()
    ref = np.exp(-((x[:, None] - y[None]) ** 2).sum(-1)) @ b
    np.testing.assert_allclose(cupy.asnumpy(out), ref, rtol=1e-10)
    ref_idx = np.argsort(((x[:, None] - y[None]) ** 2).sum(-1), axis=1, kind="stable")[:, :5]
    np.testing.assert_array_equal(cupy.asnumpy(idx), ref_idx)


@pytest.mark.gpu
@needs_gpu
def test_cupy_input_with_a_host_backend_returns_cupy():
    import cupy

    x = cupy.asarray(np.random.default_rng(0).random((50, 2)))
    out = kt.Vi(x).sqdist(kt.Vj(x)).sum(axis=1, backend="cpu")
    assert isinstance(out, cupy.ndarray)


@pytest.mark.gpu
@needs_gpu
def test_gpu_float32_million_terms_accuracy():
    """Block-wise summation keeps a float32 sum of 10^6 terms near 1e-6."""
    rng = np.random.default_rng(0)
    x = rng.random((64, 3)).astype(np.float32)
    y = rng.random((1_000_000, 3)).astype(np.float32)
    out = (-kt.Vi(x).sqdist(kt.Vj(y))).exp().sum(axis=1, backend="cuda")
    ref = (-kt.Vi(x.astype(np.float64)).sqdist(kt.Vj(y.astype(np.float64)))).exp().sum(
        axis=1, backend="cpu")
    assert_close(out, ref, 2e-6)


@pytest.mark.gpu
@needs_gpu
def test_gpu_block_sparse_native_kernel_matches_numpy():
    """The native block-sparse kernel on the device: CuPy in, CuPy out, equal
    to the NumPy backend (ties by index, rows in no block get the identity)."""
    import cupy

    from kerneltools import ranges as kr

    rng = np.random.default_rng(0)
    x = np.round(rng.random((3000, 3)) * 8) / 8
    y = np.round(rng.random((2500, 3)) * 8) / 8
    lab_x, lab_y = kr.grid_cluster(x, 0.2), kr.grid_cluster(y, 0.2)
    bs = kr.block_sparsity(lab_x, lab_y,
                           rng.random((lab_x.max() + 1, lab_y.max() + 1)) < 0.3)
    for dtype, rtol in ((np.float32, 1e-5), (np.float64, 1e-12)):
        xd, yd = x.astype(dtype), y.astype(dtype)
        F = kt.Vi(cupy.asarray(xd)).sqdist(kt.Vj(cupy.asarray(yd)))
        Fh = kt.Vi(xd).sqdist(kt.Vj(yd))
        for axis in (0, 1):
            v, i = F.Kmin_argKmin(5, axis=axis, ranges=bs, backend="cuda")
            assert isinstance(i, cupy.ndarray)
            rv, ri = Fh.Kmin_argKmin(5, axis=axis, ranges=bs, backend="numpy")
            np.testing.assert_array_equal(cupy.asnumpy(i), ri)
            s = (-F * 3).exp().sum(axis=axis, ranges=bs, backend="cuda")
            r = (-Fh * 3).exp().sum(axis=axis, ranges=bs, backend="numpy")
            assert_close(cupy.asnumpy(s), r, rtol, scale=np.abs(r) + 1)
            lse = (-F).logsumexp(axis=axis, ranges=bs, backend="cuda")
            rl = (-Fh).logsumexp(axis=axis, ranges=bs, backend="numpy")
            assert_close(cupy.asnumpy(lse), rl, rtol, scale=np.abs(rl) + 1)
