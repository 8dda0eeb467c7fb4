"""Complex numbers (issue 21): ComplexLazyTensor against NumPy's complex arithmetic.

Every complex operation is checked against the dense NumPy computation on
every backend (``backend`` fixture) in float32 and float64, in one formula
that concatenates them (one kernel per reduction axis); the non-uniform DFT
``sum_j exp(-2i pi p_j f_i) w_j`` (the reference use case) to 1e-6 relative
in float32; the CUDA kernels without a GPU through NVRTC and the CPU shim
(as ``test_cuda_backend.py``); the torch binding's gradients with
``torch.autograd.gradcheck`` on complex128 (torch's Wirtinger conventions).
"""

from __future__ import annotations

import numpy as np
import pytest

import kerneltools as kt
from kerneltools.backend.cuda import _backend as _cuda_backend
from kerneltools.backend._dispatch import run_plan

import _cuda_shim

CDTYPE = {np.dtype(np.float32): np.complex64, np.dtype(np.float64): np.complex128}
#: Normwise relative tolerance against a complex128 reference from the same
#: (rounded) inputs: the NUDFT's float32 error is that of NumPy's complex64
#: (phases up to 2 pi, rounded to float32), about 3e-7 here.
NUDFT_RTOL = {np.dtype(np.float32): 1e-6, np.dtype(np.float64): 1e-12}


def _data(dtype, n=7, m=9, d=2, seed=0):
    rng = np.random.default_rng(seed)
    cd = CDTYPE[np.dtype(dtype)]

    def c(*shape):
        return (rng.uniform(-1, 1, shape) + 1j * rng.uniform(-1, 1, shape)).astype(cd)

    return c(n, d), c(m, d) + 2, rng.uniform(0.5, 1.5, (m, d)).astype(dtype)


def _ops(X, Y, r, s, lib):
    """Each complex operation once, as columns: X, Y complex (i and j), r real (j),
    s complex scalar; ``lib`` supplies exp / abs / angle / conj / sum for
    LazyTensors or NumPy arrays."""
    return [
        X * Y, X / Y, X + Y, X - Y, -X, X * r, r / Y, X + r, r - X, 2.5 * X, X / 3,
        s * Y, Y / s, X ** 2, X ** -1, lib.exp(X), lib.conj(Y), lib.abs(X - Y),
        lib.angle(Y / (X + 2)), lib.real(X) * lib.imag(Y), lib.sum(X * Y),
        X.real + 0 * X,
    ]


class _Lazy:
    abs = abs
    exp, conj = staticmethod(lambda z: z.exp()), staticmethod(lambda z: z.conj())
    angle = staticmethod(lambda z: z.angle())
    real, imag = staticmethod(lambda z: z.real), staticmethod(lambda z: z.imag)
    sum = staticmethod(lambda z: z.sum(-1))


class _Numpy:
    exp, conj, abs, angle = np.exp, np.conj, np.abs, np.angle
    real, imag = np.real, np.imag
    sum = staticmethod(lambda z: z.sum(-1, keepdims=True))


def _complex_formula(x, y, r, s):
    """The concatenated formula and its dense NumPy value (N, M, columns)."""
    X, Y, R = kt.Vi(x), kt.Vj(y), kt.Vj(r)
    cols = _ops(X, Y, R, s, _Lazy)
    F = cols[0]
    for c in cols[1:]:
        F = F.concat(c)
    xd, yd, rd = (v.astype(np.complex128) for v in (x[:, None], y[None], r[None]))
    dense = [np.broadcast_to(v, (len(x), len(y), v.shape[-1]))
             for v in _ops(xd, yd, rd, s, _Numpy)]
    return F, np.concatenate(dense, axis=-1)


def _relerr(got, ref) -> float:
    return float(np.linalg.norm(got - ref) / np.linalg.norm(ref))


def test_complex_operations_match_numpy(backend, dtype):
    x, y, r = _data(dtype)
    F, dense = _complex_formula(x, y, r, 0.5 - 2j)
    assert F.is_complex and F.dtype == CDTYPE[dtype]
    tol = 1e-5 if dtype == np.float32 else 1e-12
    # over i as well on NumPy only: the axis is the engine's business (tested
    # for real formulas); one kernel of this large formula per compiled backend
    for axis in ((0, 1) if backend == "numpy" else (1,)):
        got = F.sum(axis=axis, backend=backend)
        assert got.dtype == CDTYPE[dtype]
        assert got.shape == (dense.shape[1 - axis], F.dim)
        ref = dense.sum(axis=axis)
        scale = np.abs(dense).sum(axis=axis)  # what bounds a sum's rounding
        assert np.all(np.abs(got - ref) <= tol * scale), (axis, np.abs(got - ref).max())


def test_nudft_matches_numpy(backend, dtype):
    """``(-2j pi p f).exp() @ w``, complex and real w; a real kernel @ complex b."""
    rng = np.random.default_rng(1)
    p, f = rng.random((300, 1)).astype(dtype), rng.random((200, 1)).astype(dtype)
    w = rng.standard_normal(300) + 1j * rng.standard_normal(300)
    w = w.astype(CDTYPE[np.dtype(dtype)])
    K = (-2j * np.pi * kt.Vj(p) * kt.Vi(f)).exp()
    dense = np.exp(-2j * np.pi * f.astype(np.float64) * p.astype(np.float64).T)
    got = K.matmul(w, backend=backend)
    assert got.dtype == CDTYPE[dtype] and got.shape == (200,)
    assert _relerr(got, dense @ w.astype(np.complex128)) <= NUDFT_RTOL[dtype]
    # the same sum written with Vj(w) and sum over j; and a real kernel @ complex b
    got2 = (K * kt.Vj(w[:, None])).sum(axis=1, backend=backend)[:, 0]
    assert _relerr(got2, dense @ w.astype(np.complex128)) <= NUDFT_RTOL[dtype]
    G = (-(kt.Vi(f) - kt.Vj(p)) ** 2).exp()
    ref = np.exp(-(f.astype(np.float64) - p.astype(np.float64).T) ** 2) @ w
    assert _relerr(G.matmul(w, backend=backend), ref) <= NUDFT_RTOL[dtype]


def test_surface_like_pykeops():
    """Shapes, dtypes, real/complex constructors, transposition, batches, dense."""
    x, y, r = _data(np.float32)
    X, Y = kt.LazyTensor(x[:, None, :]), kt.LazyTensor(y[None, :, :])
    assert isinstance(X, kt.ComplexLazyTensor) and X.shape == (7, 1, 2)
    assert (X * Y).shape == (7, 9, 2) and (X * Y).sum(-1).shape == (7, 9)
    assert X.dim == 2 and X.ndim == 2 and X.dtype == np.complex64
    assert not X.real.is_complex and X.real.dim == 2
    R = kt.Vj(r)
    np.testing.assert_allclose(R.real2complex().to_dense()[0], r.astype(np.complex64))
    np.testing.assert_allclose((R.imag2complex() * 1).to_dense()[0], 1j * r, rtol=1e-6)
    np.testing.assert_allclose(R.exp1j().to_dense()[0], np.exp(1j * r), rtol=1e-6)
    Z = X * Y
    np.testing.assert_allclose(Z.t().sum(axis=0, backend="numpy"),
                               Z.sum(axis=1, backend="numpy"), rtol=1e-6)
    np.testing.assert_allclose(Z[..., 1].to_dense()[..., 0],
                               x[:, None, 1] * y[None, :, 1], rtol=1e-6)
    one = kt.ComplexLazyTensor(1 + 2j)
    np.testing.assert_allclose(one.to_dense().ravel(), [1 + 2j])
    # a batch axis, and out= / keepdim
    xb = np.stack([x, 2 * x])
    got = (kt.Vi(xb) * kt.Vj(y)).sum(axis=2, backend="numpy")
    np.testing.assert_allclose(got, (xb[:, :, None] * y[None, None]).sum(2), rtol=1e-5)
    out = np.empty((7, 2), np.complex64)
    assert Z.sum(axis=1, backend="numpy", out=out) is out
    np.testing.assert_allclose(out, (x[:, None] * y[None]).sum(1), rtol=1e-5)


def test_bad_input_names_the_operation():
    x, y, _ = _data(np.float64)
    Z = kt.Vi(x) * kt.Vj(y)
    for fn, what in [(lambda: Z.min(axis=1), "the Min reduction"),
                     (lambda: Z.logsumexp(axis=1), "the LogSumExp reduction"),
                     (lambda: Z.argKmin(2, axis=1), "the ArgKMin reduction"),
                     (lambda: Z.sin(), "the operation Sin"),
                     (lambda: Z < 1, "the operation Less"),
                     (lambda: Z.sqdist(kt.Vi(x)), "the operation sqdist"),
                     (lambda: kt.Vi(x.real) | Z, "the operation dot"),
                     (lambda: Z.sqrt(), "the operation Sqrt")]:
        with pytest.raises(TypeError, match=f"^{what} has no meaning for complex"):
            fn()
    # a real formula with complex weights: no silent planar (re, im) output
    K = -kt.Vi(x.real).sqdist(kt.Vj(y.real))
    with pytest.raises(TypeError, match="the SumSoftMaxWeight reduction takes real "
                       "weights"):
        K.sumsoftmaxweight(kt.Vj(y), axis=1, backend="numpy")
    with pytest.raises(ValueError, match="exp1j: the formula is complex"):
        Z.exp1j()
    for fn in (lambda: Z.grad(kt.Vi(x), 1), lambda: Z.real.grad(kt.Vi(x), 1),
               lambda: K.vjp(kt.Vi(x), np.ones((7, 1)))):  # no planar (re, im) gradient
        with pytest.raises(NotImplementedError, match="kerneltools.torch"):
            fn()
    with pytest.raises(ValueError, match="'x' is empty"):
        kt.Vi(np.ones((0, 2), complex))


# ---------------------------------------------------------------------------
# CUDA without a GPU: NVRTC compiles the NUDFT kernel, the shim runs it
# ---------------------------------------------------------------------------
def _nudft_plan(dtype):
    rng = np.random.default_rng(2)
    p, f = rng.random((71, 1)).astype(dtype), rng.random((45, 1)).astype(dtype)
    w = rng.standard_normal((71, 1)) + 1j * rng.standard_normal((71, 1))
    w = w.astype(CDTYPE[np.dtype(dtype)])
    F = (-2j * np.pi * kt.Vj(p) * kt.Vi(f)).exp() * kt.Vj(w)
    return F.planar()._plan("Sum", 1), np.exp(-2j * np.pi * f * p.T) @ w


def test_nudft_cuda_source_compiles():
    try:
        _cuda_backend.nvrtc()
    except OSError as exc:
        pytest.skip(f"NVRTC: {exc}")
    (plan, _), _ = _nudft_plan(np.float32)
    source, _ = _cuda_backend.generate_cuda_source(plan)
    res = _cuda_backend.nvrtc_compile(source, "sm_90")
    assert res.ok, res.log


def test_nudft_cuda_kernel_on_the_shim(tmp_path):
    ok, why = _cuda_shim.available()
    if not ok:
        pytest.skip(why)
    (plan, args), ref = _nudft_plan(np.float32)
    tuning = {"block": {4: 16, 8: 16}, "rows": 2, "max_state": 8, "unroll": 4,
              "by_reduction": {"Sum": {4: (8, 4)}}}  # test_cuda_backend's: tails
    (got,) = _cuda_shim.run(plan, args, tuning, tmp_path)
    (numpy_out,) = run_plan(plan, args, "numpy")
    from kerneltools.lazy._complex import to_complex

    assert _relerr(to_complex(got), ref) <= 1e-6
    np.testing.assert_allclose(got, numpy_out, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------
# torch: forward against torch's complex arithmetic, gradients by gradcheck
# ---------------------------------------------------------------------------
def test_torch_complex_gradcheck(backend):
    torch = pytest.importorskip("torch", reason="kerneltools.torch needs PyTorch")
    from kerneltools.torch import ComplexLazyTensor, Pm, Vi, Vj

    if backend == "cuda":
        pytest.skip("the torch binding runs CUDA on CUDA tensors (test_torch's GPU "
                    "tests); these tensors are on the CPU")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 2, dtype=torch.complex128, generator=g, requires_grad=True)
    y = torch.randn(4, 2, dtype=torch.complex128, generator=g, requires_grad=True)
    p = torch.rand(4, 1, dtype=torch.float64, generator=g, requires_grad=True)
    c = torch.randn(1, dtype=torch.complex128, generator=g, requires_grad=True)

    def ours(x, y, p, c):
        Z = (Vi(x) * Vj(y).conj() + Pm(c) * Vj(p)).exp() / (Vi(x) + 3)
        return (Z * Vj(p).exp1j()).sum(axis=1, backend=backend)

    def ref(x, y, p, c):
        X, Y, P = x[:, None], y[None], p[None]
        return ((X * Y.conj() + c * P).exp() / (X + 3) * torch.exp(1j * P)).sum(1)

    assert isinstance(Vi(x), ComplexLazyTensor)
    with pytest.raises(TypeError, match="the SumSoftMaxWeight reduction takes real"):
        (-Vj(p).sqdist(Vj(p))).sumsoftmaxweight(Vj(y), axis=1, backend=backend)
    out = ours(x, y, p, c)
    assert out.dtype == torch.complex128
    # (not torch.testing.assert_close: its first call imports torch.distributed, 5 s)
    assert float((out - ref(x, y, p, c)).detach().abs().max()) <= 1e-12
    assert torch.autograd.gradcheck(ours, (x, y, p, c), fast_mode=True)
    loss = lambda fn: (fn(x, y, p, c).abs() ** 2).sum()  # noqa: E731
    for a, b in zip(torch.autograd.grad(loss(ours), (x, y, p, c)),
                    torch.autograd.grad(loss(ref), (x, y, p, c))):
        assert a.dtype == b.dtype
        assert float((a - b).abs().max()) <= 1e-10 * float(b.abs().max())
