"""The tensor-core CUDA kernel (``_cuda_tcore``): numerics, compilation, choice.

Without a GPU: the NumPy model of the 3xTF32 split that the kernel follows
is float32-accurate on Gaussian ``K @ B`` sums where plain TF32 is not; the
kernel compiles with NVRTC for sm_80 and sm_90 (no warnings, no spills, the
``mma`` instructions present); it runs on the CPU shim with its ``mma``
emulated (``_tcore_shim``: fragment layouts, split, padding, tails) against
dense float64; ``tcore_unsupported`` accepts the Gaussian products and
refuses the rest; the kernel is used only on opt-in. The shim cannot run
the real ``mma.sync`` (the tensor cores' own rounding), so the kernel's
execution through CuPy is a GPU test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import kerneltools as kt
from kerneltools.backend.cuda import _backend as _cuda_backend, _tcore as tc
from kerneltools.backend.cuda._nvrtc import log_warnings

import _cuda_shim
import _tcore_shim

needs_nvrtc = pytest.mark.skipif(not _cuda_shim.nvrtc_status()[0],
                                 reason=f"NVRTC: {_cuda_shim.nvrtc_status()[1]}")
needs_shim = pytest.mark.skipif(not _cuda_shim.available()[0], reason=_cuda_shim.available()[1])
needs_gpu = pytest.mark.skipif(
    not _cuda_backend.gpu_status()[0],
    reason="the tensor-core kernel's run on tensor cores needs a GPU (the CPU shim "
    f"runs an emulated mma.sync only): {_cuda_backend.gpu_status()[1]}",
)


def _data(d: int, e: int, n: int = 64, m: int = 200, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d)).astype(np.float32)
    y = rng.standard_normal((m, d)).astype(np.float32)
    b = rng.random((m, e)).astype(np.float32)
    return x, y, b, 1.0 / d  # gamma: exp(-2) for a typical pair


def _dense(x, y, b, gamma):
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    d2 = (x64 ** 2).sum(1)[:, None] + (y64 ** 2).sum(1)[None] - 2 * x64 @ y64.T
    return np.exp(-gamma * np.maximum(d2, 0)) @ b.astype(np.float64)


def _gauss(x, y, b, gamma):
    return (-kt.Pm(np.array([gamma], x.dtype)) * kt.Vi(x).sqdist(kt.Vj(y))).exp() * kt.Vj(b)


def _plan(f, reduction="Sum", axis=1, **kw):
    return f._plan(reduction, axis, **kw)[0]


# ---------------------------------------------------------------------------
# The numerics (NumPy model of the kernel)
# ---------------------------------------------------------------------------
def test_tf32_round_keeps_ten_mantissa_bits_to_nearest():
    a = np.array([1 + 2.0 ** -10, 1 + 2.0 ** -11, 1 + 2.0 ** -12, -(1 + 3 * 2.0 ** -11),
                  np.inf, -np.inf, 0.0], dtype=np.float32)
    want = [1 + 2.0 ** -10, 1 + 2.0 ** -10, 1.0, -(1 + 2 * 2.0 ** -10), np.inf, -np.inf, 0.0]
    np.testing.assert_array_equal(tc.tf32_round(a), np.array(want, np.float32))
    assert np.isnan(tc.tf32_round(np.float32(np.nan)))
    r = np.random.default_rng(1).standard_normal(1000).astype(np.float32)
    assert np.abs(tc.tf32_round(r) / r - 1).max() <= 2.0 ** -11


@pytest.mark.parametrize("d", [64, 256])
def test_3xtf32_gaussian_sums_are_float32_accurate_and_plain_tf32_is_not(d):
    """The kernel's steps in NumPy: norms in double rounded to float32, the
    products by the split (or plain TF32), ``d2`` clamped at 0, ``exp`` in
    float32, the product with B by the same scheme; against float64."""
    x, y, b, gamma = _data(d, 64)
    ref = _dense(x, y, b, gamma)

    def model(dot):
        xn = (x.astype(np.float64) ** 2).sum(1).astype(np.float32)
        yn = (y.astype(np.float64) ** 2).sum(1).astype(np.float32)
        v = xn[:, None] + yn[None] - np.float32(2) * dot(x, y)
        k = np.exp(np.float32(-gamma) * np.where(v < 0, np.float32(0), v))
        return dot(k.astype(np.float32), b.T)

    err3 = np.abs(model(tc.dot_3xtf32) / ref - 1).max()
    err1 = np.abs(model(tc.dot_tf32) / ref - 1).max()
    assert err3 <= 1e-5, err3  # the float32 contract
    assert err1 > 1e-5, err1  # plain TF32 breaks it (about 7e-5 here)


# ---------------------------------------------------------------------------
# Compilation (NVRTC, no GPU needed)
# ---------------------------------------------------------------------------
def _compiled_plans():
    """mma product (D = 64, E = 64), SIMT product at D = 256 (two warps),
    padding of D and E to the mma's 8 (D = 33, E = 17)."""
    return [_plan(_gauss(*_data(d, e, n=4, m=5))) for d, e in ((64, 64), (256, 1), (33, 17))]


@needs_nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_tcore_kernels_compile_without_warnings_or_spills(arch):
    for plan in _compiled_plans():
        source, launch = tc.generate_tcore_source(plan, key="test")
        res = _cuda_backend.nvrtc_compile(source, arch)
        assert res.ok, res.log + _cuda_backend.numbered(source)
        assert not log_warnings(res.log), res.log
        assert res.spill_stores == 0 and res.spill_loads == 0, res.log
        assert res.registers * launch.block <= 65536, res.log
    ok, log, ptx = _cuda_backend.nvrtc().compile(
        source, (*_cuda_backend.NVRTC_OPTIONS, f"-arch=compute_{arch[3:]}"))
    assert ok, log
    assert b"mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in ptx
    assert b"cvt.rna.tf32.f32" in ptx


# ---------------------------------------------------------------------------
# The kernel on the CPU, its mma emulated (fragment layouts, split, tails)
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def shim_dir(tmp_path_factory):
    """One work directory: the shim's runtime library is built once."""
    return tmp_path_factory.mktemp("tcore-shim")


@needs_shim
@pytest.mark.parametrize("d,e", [(40, 17), (256, 3)])
def test_shim_tcore_kernel_matches_dense_float64(d, e, shim_dir):
    """mma product with D and E padded (4 warps); SIMT product at D = 256
    (2 warps); tails on both axes; data far from the origin (centred by
    ``tcore_arguments``, else the expanded form errs by ~1e-3 there)."""
    # two blocks (one with a tail), two tiles (the second short)
    x, y, b, gamma = _data(d, e, n=70 if d < 200 else 40, m=45)
    plan = _plan(_gauss(x, y, b, gamma))
    for offset in (0, 100):
        xo, yo = x + np.float32(offset), y + np.float32(offset)
        got = _tcore_shim.run(plan, [np.array([gamma], np.float32), xo, yo, b], shim_dir)
        err = np.abs(got / _dense(xo, yo, b, gamma) - 1).max()
        assert err <= 1e-5, (offset, err)


@needs_shim
def test_cuda_backend_runs_the_tcore_kernel_only_on_opt_in(monkeypatch, shim_dir):
    """backend='cuda' (the shim standing in for the GPU): with the opt-in,
    the Gaussian product over either axis goes to ``run_tcore``; without it,
    to the generic kernel."""
    from kerneltools.backend import _dispatch

    class Generic(Exception):
        pass

    def generic(*a, **k):
        raise Generic

    cuda = _dispatch.BACKENDS["cuda"]
    monkeypatch.setattr(_cuda_backend, "gpu_status", lambda: (True, "the CPU shim"))
    monkeypatch.setattr(_dispatch, "_resolved", {})
    calls = []
    monkeypatch.setattr(cuda, "run_tcore", lambda plan, args: calls.append(plan.axis) or (
        _tcore_shim.run(plan, args, shim_dir),))
    monkeypatch.setattr(_cuda_backend, "get_kernel", generic)
    x, y, b, gamma = _data(40, 17, n=70, m=45)
    g = kt.Pm(np.array([gamma], np.float32))
    monkeypatch.setenv(tc.ENV, "1")
    got = _gauss(x, y, b, gamma).sum(axis=1, backend="cuda")
    assert np.abs(got / _dense(x, y, b, gamma) - 1).max() <= 1e-5
    over_i = (-g * kt.Vj(x).sqdist(kt.Vi(y))).exp() * kt.Vi(b)
    got = over_i.sum(axis=0, backend="cuda")
    assert np.abs(got / _dense(x, y, b, gamma) - 1).max() <= 1e-5
    assert calls == [1, 0]
    monkeypatch.delenv(tc.ENV)
    with pytest.raises((Generic, ImportError)):  # the generic kernel (CuPy absent here)
        _gauss(x, y, b, gamma).sum(axis=1, backend="cuda")
    assert calls == [1, 0]


# ---------------------------------------------------------------------------
# Which plans, and only on opt-in
# ---------------------------------------------------------------------------
def test_tcore_supports_the_gaussian_product_and_refuses_the_rest():
    x, y, b, gamma = _data(64, 16, n=4, m=5)
    d2 = kt.Vi(x).sqdist(kt.Vj(y))
    accepted = {
        "parameter": _gauss(x, y, b, gamma),
        "python scalar": (-d2 * 0.5).exp() * kt.Vj(b),
        "divided": (-d2 / kt.Pm(np.array([2.0], np.float32))).exp() * kt.Vj(b[:, :1]),
    }
    for name, f in accepted.items():
        assert tc.tcore_unsupported(_plan(f)) is None, name
    # a reduction over i: the plan is swapped, the same kernel
    yb = kt.Vi(np.ascontiguousarray(b[:4]))
    over_i = (-kt.Vj(y[:4]).sqdist(kt.Vi(x)) * 0.5).exp() * yb
    assert tc.tcore_unsupported(_plan(over_i, axis=0)) is None
    x8, y8, b8 = (a.astype(np.float64) for a in (x, y, b))
    refused = {
        "float64": ((-kt.Vi(x8).sqdist(kt.Vj(y8))).exp() * kt.Vj(b8), "Sum"),
        "D < 32": ((-kt.Vi(x[:, :16]).sqdist(kt.Vj(y[:, :16]))).exp() * kt.Vj(b), "Sum"),
        "not a product with b_j": ((-d2).exp(), "Sum"),
        "Laplace kernel": ((-d2.sqrt()).exp() * kt.Vj(b), "Sum"),
        "log-sum-exp": ((-d2).exp() * kt.Vj(b[:, :1]), "LogSumExp"),
        "too wide for shared memory": (
            (-kt.Vi(np.ones((3, 1000), np.float32)).sqdist(kt.Vj(np.ones((5, 1000),
                                                            np.float32)))).exp()
            * kt.Vj(b), "Sum"),
    }
    for name, (f, red) in refused.items():
        why = tc.tcore_unsupported(_plan(f, red))
        assert isinstance(why, str) and why, name


def test_tcore_coefficient_reads_the_parameters():
    x, y, b, _ = _data(64, 16, n=4, m=5)
    d2 = kt.Vi(x).sqdist(kt.Vj(y))
    s = kt.Pm(np.array([3.0], np.float32))
    plan = _plan((-d2 / (s * s)).exp() * kt.Vj(b))
    m = tc.tcore_match(plan)
    args = [np.array([3.0]) if c == "p" else None for c in plan.arg_cats]
    assert math.isclose(tc.tcore_coefficient(m, args), -math.log2(math.e) / 9, rel_tol=1e-12)


def test_tcore_arguments_leave_non_finite_data_to_the_generic_kernel():
    """inf in x would be NaN through the split and the expanded form, where
    NumPy gives exp(-inf) = 0 (in b: inf_hi + NaN_lo, where NumPy gives
    inf): such data is refused (None)."""
    x, y, b, gamma = _data(40, 17, n=6, m=5)
    plan = _plan(_gauss(x, y, b, gamma))
    p = np.array([gamma], np.float32)
    assert tc.tcore_arguments(plan, [p, x, y, b], np) is not None
    for bad in (np.inf, -np.inf, np.nan):
        for k in (1, 2, 3):
            args = [p, x.copy(), y.copy(), b.copy()]
            args[k][2, 3] = bad
            assert tc.tcore_arguments(plan, args, np) is None


def test_tcore_is_opt_in(monkeypatch):
    monkeypatch.delenv(tc.ENV, raising=False)
    assert not tc.tcore_enabled()
    monkeypatch.setenv(tc.ENV, "1")
    assert tc.tcore_enabled()
    monkeypatch.setenv(tc.ENV, "0")
    assert not tc.tcore_enabled()


# ---------------------------------------------------------------------------
# On a GPU: the kernel against dense float64
# ---------------------------------------------------------------------------
@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("d,e", [(64, 64), (256, 1), (33, 17)])
def test_gpu_tcore_matches_dense_float64(d, e, monkeypatch):
    monkeypatch.setenv(tc.ENV, "1")
    calls = []
    run = _cuda_backend.CudaBackend.run_tcore
    monkeypatch.setattr(_cuda_backend.CudaBackend, "run_tcore",
                        lambda self, plan, args: calls.append(1) or run(self, plan, args))
    x, y, b, gamma = _data(d, e, n=203, m=1031)  # tails on both axes
    got = _gauss(x, y, b, gamma).sum(axis=1, backend="cuda")
    assert calls, "the tensor-core kernel did not run"
    ref = _dense(x, y, b, gamma)
    assert np.abs(got / ref - 1).max() <= 1e-5
    import cupy  # device arrays in, device array out, same values

    dev = _gauss(*(cupy.asarray(a) for a in (x, y, b)), gamma).sum(axis=1, backend="cuda")
    assert isinstance(dev, cupy.ndarray) and len(calls) == 2
    assert np.abs(cupy.asnumpy(dev) / ref - 1).max() <= 1e-5
