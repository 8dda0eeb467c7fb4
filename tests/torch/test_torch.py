"""kerneltools.torch: values against the NumPy LazyTensor, autograd against
finite differences (gradcheck, gradgradcheck), a training loop, GeomLoss's
Sinkhorn gradients; the same on CUDA tensors when a GPU is present."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="kerneltools.torch needs PyTorch (optional extra)")

import kerneltools as kt  # noqa: E402
from kerneltools.torch import LazyTensor, Pm, Vi, Vj  # noqa: E402

def _data(device, dtype=torch.float64, n=17, m=13, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 3, generator=g, dtype=dtype).to(device).requires_grad_()
    y = torch.randn(m, 3, generator=g, dtype=dtype).to(device).requires_grad_()
    b = torch.randn(m, 2, generator=g, dtype=dtype).to(device).requires_grad_()
    s = torch.tensor([0.7], dtype=dtype).to(device).requires_grad_()
    return x, y, b, s


def _np(t):
    return t.detach().cpu().numpy()


# ---------------------------------------------------------------------------
# Values: the NumPy LazyTensor's
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
def test_values_equal_numpy_lazytensor(device, dtype):
    x, y, b, s = _data(device, dtype)
    rtol = 1e-5 if dtype == torch.float32 else 1e-12
    D = Vi(x).sqdist(Vj(y))
    Dn = kt.Vi(_np(x)).sqdist(kt.Vj(_np(y)))
    got = [
        (-D * Pm(s)).exp() @ b,
        (-D).logsumexp(axis=1),
        (-D).logsumexp(axis=0),
        (-D).sumsoftmaxweight(Vj(b), axis=1),
        D.min(axis=0),
        D.Kmin(3, axis=1),
    ]
    idx = D.argKmin(4, axis=1)
    with kt.config_context(backend="numpy"):  # the oracle: no kernel to compile
        refs = [
            (-Dn * float(s.detach())).exp() @ _np(b),
            (-Dn).logsumexp(axis=1),
            (-Dn).logsumexp(axis=0),
            (-Dn).sumsoftmaxweight(kt.Vj(_np(b)), axis=1),
            Dn.min(axis=0),
            Dn.Kmin(3, axis=1),
        ]
        ref_idx = Dn.argKmin(4, axis=1)
    for g, ref in zip(got, refs, strict=True):
        assert isinstance(g, torch.Tensor) and g.device.type == device
        np.testing.assert_allclose(_np(g), ref, rtol=rtol, atol=rtol)
    assert idx.dtype == torch.int64 and not idx.requires_grad
    np.testing.assert_array_equal(_np(idx), ref_idx)


def test_results_keep_the_graph_and_python_floats_are_constants():
    x, y, b, _ = _data("cpu")
    out = (-Vi(x).sqdist(Vj(y)) * 0.5).exp() @ b
    assert out.requires_grad and out.grad_fn is not None
    with torch.no_grad():
        out2 = (-Vi(x).sqdist(Vj(y)) * 0.5).exp() @ b
    assert not out2.requires_grad
    torch.testing.assert_close(out.detach(), out2)


# ---------------------------------------------------------------------------
# Gradients: gradcheck and gradgradcheck (float64)
# ---------------------------------------------------------------------------
def _gauss_sum(x, y, b, s):
    return (-Vi(x).sqdist(Vj(y)) * Pm(s)).exp() @ b


def _lse_axis1(x, y, b, s):
    return (-Vi(x).sqdist(Vj(y)) * Pm(s) + Vj(b[:, :1])).logsumexp(axis=1)


def _lse_axis0(x, y, b, s):
    # _lse_axis1 with i and j exchanged (y and b on the reduced side, now i;
    # x kept, now j): a reduction over i is the one over j of the exchanged
    # formula, so this runs _lse_axis1's kernels (and their gradients')
    # through axis=0: 7 -> 0 compiles
    return (-Vj(x).sqdist(Vi(y)) * Pm(s) + Vi(b[:, :1])).logsumexp(axis=0)


def _softmax_weight(x, y, b, s):
    return (-Vi(x).sqdist(Vj(y)) * Pm(s)).sumsoftmaxweight(Vj(b), axis=1)


def _cauchy_with_parameter(x, y, b, s):
    # a kernel with a parameter inside a non-exponential formula
    return (1 / (1 + Vi(x).sqdist(Vj(y)) / Pm(s) ** 2)) @ b


def _kmin(x, y, b, s):
    return (Vi(x).sqdist(Vj(y)) * Pm(s)).Kmin(2, axis=1)


def _sumsquares(x, y, b, s):
    return ((-Vi(x).sqdist(Vj(y)) * Pm(s)).exp() * Vj(b)).sumsquares(axis=1)


@pytest.mark.parametrize("fn", [_gauss_sum, _lse_axis1, _lse_axis0, _softmax_weight,
                                _cauchy_with_parameter, _kmin, _sumsquares],
                         ids=lambda f: f.__name__.strip("_"))
def test_gradcheck_and_gradgradcheck(fn, device):
    inputs = _data(device, n=7, m=5)
    assert torch.autograd.gradcheck(fn, inputs)
    if fn is not _kmin:  # piecewise: second derivatives of a selection are 0 a.e.
        assert torch.autograd.gradgradcheck(fn, inputs)


def test_gradient_matches_dense_torch():
    x, y, b, s = _data("cpu", n=40, m=30)
    out = _gauss_sum(x, y, b, s).sum()
    gx, gy, gb, gs = torch.autograd.grad(out, (x, y, b, s))
    dense = (torch.exp(-((x[:, None] - y[None]) ** 2).sum(-1) * s) @ b).sum()
    rx, ry, rb, rs = torch.autograd.grad(dense, (x, y, b, s))
    for g, r in ((gx, rx), (gy, ry), (gb, rb), (gs, rs)):
        torch.testing.assert_close(g, r, rtol=1e-12, atol=1e-12)


def test_training_loop_fits_a_bandwidth():
    """Gradient descent on log(sigma) recovers the bandwidth that made the data."""
    g = torch.Generator().manual_seed(1)
    x = torch.rand(300, 2, generator=g, dtype=torch.float64)
    b = torch.randn(300, 1, generator=g, dtype=torch.float64)
    true_sigma = 0.15
    target = (-Vi(x).sqdist(Vj(x)) / (2 * true_sigma ** 2)).exp() @ b
    log_sigma = torch.tensor([np.log(0.4)], dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([log_sigma], lr=0.05)
    for _ in range(150):
        opt.zero_grad()
        sigma = log_sigma.exp()
        pred = (-Vi(x).sqdist(Vj(x)) / (2 * Pm(sigma) ** 2)).exp() @ b
        loss = ((pred - target) ** 2).mean()
        loss.backward()
        opt.step()
    sigma = float(log_sigma.detach().exp())
    assert abs(sigma - true_sigma) < 2e-3, sigma


# ---------------------------------------------------------------------------
# Against GeomLoss: a Sinkhorn divergence built on kerneltools.torch
# ---------------------------------------------------------------------------
def _sinkhorn_divergence(x, y, blur, scaling):
    """GeomLoss's debiased Sinkhorn divergence (p = 2, uniform weights),
    written with kerneltools.torch reductions: symmetric updates with
    epsilon-scaling without gradients, then one differentiable extrapolation."""
    from kerneltools.ot._sinkhorn import epsilon_schedule

    n, m = len(x), len(y)
    a_log = torch.full((n, 1), -np.log(n), dtype=x.dtype)
    b_log = torch.full((m, 1), -np.log(m), dtype=x.dtype)
    pts = torch.cat([x, y]).detach()
    diameter = float((pts.max(0).values - pts.min(0).values).norm())
    eps_list = epsilon_schedule(2, diameter, blur, scaling)

    def softmin(eps, u, v, h):
        C = Vi(u).sqdist(Vj(v)) / 2
        return -eps * (Vj(h) - C / eps).logsumexp(axis=1)

    with torch.no_grad():
        eps = eps_list[0]
        f_ba, g_ab = softmin(eps, x, y, b_log), softmin(eps, y, x, a_log)
        f_aa, g_bb = softmin(eps, x, x, a_log), softmin(eps, y, y, b_log)
        for eps in eps_list:
            ft_ba = softmin(eps, x, y, b_log + g_ab / eps)
            gt_ab = softmin(eps, y, x, a_log + f_ba / eps)
            ft_aa = softmin(eps, x, x, a_log + f_aa / eps)
            gt_bb = softmin(eps, y, y, b_log + g_bb / eps)
            f_ba, g_ab = (f_ba + ft_ba) / 2, (g_ab + gt_ab) / 2
            f_aa, g_bb = (f_aa + ft_aa) / 2, (g_bb + gt_bb) / 2
    eps = eps_list[-1]
    # Envelope theorem: at fixed potentials the dual objective's gradient at
    # x_i is sum_j pi_ij grad C(x_i, y_j), once. Each extrapolated potential
    # carries it through the cost's first argument; the second is a constant
    # (as in GeomLoss), else <a, f> + <b, g> would count it twice.
    f_ba, g_ab, f_aa, g_bb = (
        softmin(eps, x, y.detach(), (b_log + g_ab / eps).detach()),
        softmin(eps, y, x.detach(), (a_log + f_ba / eps).detach()),
        softmin(eps, x, x.detach(), (a_log + f_aa / eps).detach()),
        softmin(eps, y, y.detach(), (b_log + g_bb / eps).detach()),
    )
    return (f_ba - f_aa).mean() + (g_ab - g_bb).mean()


def test_sinkhorn_gradients_match_geomloss():
    geomloss = pytest.importorskip("geomloss", reason="GeomLoss is an optional anchor")
    g = torch.Generator().manual_seed(3)
    x0 = torch.rand(60, 2, generator=g, dtype=torch.float64)
    y0 = torch.rand(50, 2, generator=g, dtype=torch.float64) + 0.3
    blur, scaling = 0.1, 0.7
    x, y = x0.clone().requires_grad_(), y0.clone().requires_grad_()
    ours = _sinkhorn_divergence(x, y, blur, scaling)
    gx, gy = torch.autograd.grad(ours, (x, y))
    xr, yr = x0.clone().requires_grad_(), y0.clone().requires_grad_()
    ref = geomloss.SamplesLoss("sinkhorn", p=2, blur=blur, scaling=scaling,
                               backend="tensorized")(xr, yr)
    rx, ry = torch.autograd.grad(ref, (xr, yr))
    torch.testing.assert_close(ours.detach(), ref.detach(), rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(gx, rx, rtol=1e-7, atol=1e-10)
    torch.testing.assert_close(gy, ry, rtol=1e-7, atol=1e-10)


# ---------------------------------------------------------------------------
# Packaging: torch stays optional
# ---------------------------------------------------------------------------
def test_import_kerneltools_does_not_import_torch():
    code = "import sys, kerneltools; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


def test_lazytensor_type_and_repr():
    x, y, _, _ = _data("cpu")
    D = Vi(x).sqdist(Vj(y))
    assert isinstance(D, LazyTensor) and D.shape == (17, 13)
    assert "kerneltools.torch" in repr(D)
    with pytest.raises(TypeError, match="truth value"):
        bool(D)
