"""SamplesLoss("sinkhorn") when the blur dwarfs the costs.

The log-domain loop rounds ``(g_j - C_ij) / eps`` away next to ``log b_j``
when ``eps = blur^p`` is many times the costs: before this was handled, the
divergence came out negative (-7.5 for a true 0.003 in float32, ``blur=1e8``)
or 0 (float64, as GeomLoss). The references are dense float64 NumPy: the
log-domain Sinkhorn (moderate ``eps``, where float64 resolves it) and the
large-``eps`` expansion of the definition (see
:mod:`kerneltools.ot._large_blur`), itself checked against the dense loop.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import logsumexp

torch = pytest.importorskip("torch", reason="SamplesLoss needs PyTorch (an optional extra)")

from _array_api_helpers import torch_measures  # noqa: E402

from kerneltools.torch import SamplesLoss  # noqa: E402


def dense_cost(u, v, p):
    return np.sqrt(((u[:, None, :] - v[None, :, :]) ** 2).sum(-1)) ** p / p


def dense_ot(a, b, C, eps, iters=3000):
    """Entropic OT (GeomLoss's: ``eps KL(pi | a x b)``), dense float64
    log-domain Sinkhorn."""
    f, g = np.zeros(len(a)), np.zeros(len(b))
    for _ in range(iters):
        f = -eps * logsumexp(np.log(b)[None] + (g[None] - C) / eps, axis=1)
        g = -eps * logsumexp(np.log(a)[:, None] + (f[:, None] - C) / eps, axis=0)
    return a @ f + b @ g


def dense_expansion(a, b, C, eps):
    """``<a x b, C> - |C~|^2 / (2 eps)``, C~ doubly centred (first order)."""
    Cb, Cta, m = C @ b, a @ C, a @ C @ b
    return m - (a @ (C * C) @ b - a @ Cb**2 - b @ Cta**2 + m**2) / (2 * eps)


def divergence(ot, a, x, b, y, p, eps):
    return (ot(a, b, dense_cost(x, y, p), eps) - 0.5 * ot(a, a, dense_cost(x, x, p), eps)
            - 0.5 * ot(b, b, dense_cost(y, y, p), eps))


def as_numpy(a, x, b, y):
    """The measures in float64, their weights normalised there: float32
    weights sum to 1 only up to ~1e-7, and the value's ``eps KL`` term turns
    that into an error of ``~ 1e-7 eps`` in the dense loop."""
    A, X, B, Y = (t.detach().double().numpy() for t in (a, x, b, y))
    return A / A.sum(), X, B / B.sum(), Y


@pytest.mark.parametrize("p", [1, 2])
def test_the_dense_expansion_is_the_limit_of_the_dense_sinkhorn(p):
    """The reference itself: its error falls as eps^-2 (first order exact)."""
    a, x, b, y = as_numpy(*torch_measures(torch.float64, n=25, m=20))
    errors = [abs(divergence(dense_ot, a, x, b, y, p, eps)
                  - divergence(dense_expansion, a, x, b, y, p, eps))
              for eps in (10.0, 100.0, 1000.0)]
    assert errors[2] < 1e-8
    assert errors[1] < 0.02 * errors[0] and errors[2] < 0.02 * errors[1]


def reference(a, x, b, y, p, eps, c_max):
    """The dense float64 divergence: the loop where float64 resolves it
    (``eps <= 1e4 C_max``), the expansion beyond (error below 1e-8 C_max).
    From ``eps >= 500 C_max`` (the blurs here), GeomLoss's schedule (two
    temperatures, then one extrapolation) is converged to ~ (C_max / eps)^3
    (1.2e-8 of the value at ``p = 1``, ``blur = 1e3``), as the dense loop
    is to rounding."""
    ot = dense_ot if eps <= 1e4 * c_max else dense_expansion
    return divergence(ot, a, x, b, y, p, eps)


#: Relative to the divergence. float64: the schedule's truncation (above)
#: and the loop's rounding ~ t u (1 + log n) below the switch (t = eps /
#: C_max < 1e5), the expansion's ~ C_max / t^2 beyond. float32: the loop
#: resolves t < 100 to ~ t u log n; beyond, the expansion is computed from
#: float64 copies of the points.
RTOL = {torch.float64: 3e-8, torch.float32: 1e-5}


@pytest.mark.parametrize("dt", [torch.float32, torch.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("p, blur", [(2, 30.0), (2, 1e3), (2, 1e8), (1, 1e3), (1, 1e4),
                                     (1, 1e8), (1, 1e12)])
@pytest.mark.parametrize("shift", [0.0, 2.0])
def test_large_blur_divergence_equals_the_dense_float64_reference(dt, p, blur, shift):
    a, x, b, y = torch_measures(dt, n=40, m=30)
    y = y + shift
    value = SamplesLoss("sinkhorn", p=p, blur=blur)(a, x, b, y)
    A, X, B, Y = as_numpy(a, x, b, y)
    c_max = np.sqrt(np.ptp(np.vstack([X, Y]), axis=0) @ np.ptp(np.vstack([X, Y]),
                                                                axis=0)) ** p / p
    ref = reference(A, X, B, Y, p, blur**p, c_max)
    assert float(value) >= 0
    assert abs(float(value) - ref) <= RTOL[dt] * ref


@pytest.mark.parametrize("dt", [torch.float32, torch.float64], ids=["float32", "float64"])
def test_large_blur_transport_cost_without_debiasing(dt):
    a, x, b, y = torch_measures(dt, n=40, m=30)
    value = SamplesLoss("sinkhorn", blur=1e8, debias=False)(a, x, b, y)
    A, X, B, Y = as_numpy(a, x, b, y)
    ref = dense_expansion(A, B, dense_cost(X, Y, 2), 1e16)
    assert abs(float(value) - ref) <= RTOL[dt] * ref


@pytest.mark.parametrize("p", [1, 2])
def test_large_blur_gradients_are_those_of_the_limit(p):
    """At ``t = eps / C_max ~ 1e16`` the gradients are those of
    ``S_inf = <a x b, C> - <a x a, C> / 2 - <b x b, C> / 2`` to ~ 1 / t:
    the points' from the loop (no factor eps in them), the weights' from the
    expansion (centred: a measure's potentials are defined up to a constant)."""
    a, x, b, y = (t.requires_grad_() for t in torch_measures(torch.float64))
    value = SamplesLoss("sinkhorn", p=p, blur=1e16 ** (1 / p))(a, x, b, y)
    ga, gx, gb, gy = torch.autograd.grad(value, (a, x, b, y))
    A, X, B, Y = as_numpy(a, x, b, y)

    def grad_cost(u, v):  # d/du |u - v|^p / p, 0 where u = v
        d = u[:, None, :] - v[None]
        if p == 2:
            return d
        r = np.sqrt((d**2).sum(-1, keepdims=True))
        return np.divide(d, r, out=np.zeros_like(d), where=r > 0)

    ref_x = A[:, None] * (np.einsum("ijk,j->ik", grad_cost(X, Y), B)
                          - np.einsum("ijk,j->ik", grad_cost(X, X), A))
    ref_a = dense_cost(X, Y, p) @ B - dense_cost(X, X, p) @ A
    np.testing.assert_allclose(gx.numpy(), ref_x, rtol=1e-9, atol=1e-12)
    centred = ga.numpy() - A @ ga.numpy()
    np.testing.assert_allclose(centred, ref_a - A @ ref_a, rtol=1e-9, atol=1e-12)
    ref_y = B[:, None] * (np.einsum("ijk,j->ik", grad_cost(Y, X), A)
                          - np.einsum("ijk,j->ik", grad_cost(Y, Y), B))
    np.testing.assert_allclose(gy.numpy(), ref_y, rtol=1e-9, atol=1e-12)
    assert gb.shape == b.shape


def test_large_blur_potentials():
    """``F = C b - C a - (<a, C b> - <a, C a>) / 2`` (and ``G`` mirrored) to
    ~ 1 / t, which add up to the divergence: ``<a, F> + <b, G> = S``."""
    a, x, b, y = torch_measures(torch.float64)
    F, G = SamplesLoss("sinkhorn", blur=1e8, potentials=True)(a, x, b, y)
    A, X, B, Y = as_numpy(a, x, b, y)
    Cxy, Cxx, Cyy = dense_cost(X, Y, 2), dense_cost(X, X, 2), dense_cost(Y, Y, 2)
    m_ab, m_aa, m_bb = A @ Cxy @ B, A @ Cxx @ A, B @ Cyy @ B
    np.testing.assert_allclose(F.numpy(), Cxy @ B - Cxx @ A - (m_ab - m_aa) / 2,
                               rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(G.numpy(), A @ Cxy - Cyy @ B - (m_ab - m_bb) / 2,
                               rtol=1e-9, atol=1e-12)
    value = SamplesLoss("sinkhorn", blur=1e8)(a, x, b, y)
    assert abs(float(A @ F.numpy() + B @ G.numpy()) - float(value)) <= 1e-12


def test_large_blur_with_a_custom_cost():
    """A user's cost: its largest value found by reductions, then the same
    expansion (an L1 cost, against the dense reference)."""
    a, x, b, y = torch_measures(torch.float32)
    L = SamplesLoss("sinkhorn", p=1, blur=1e8, cost=lambda u, v: (u - v).abs().sum(-1))
    value = L(a, x, b, y)
    A, X, B, Y = as_numpy(a, x, b, y)

    def l1(u, v):
        return np.abs(u[:, None] - v[None]).sum(-1)

    ref = (dense_expansion(A, B, l1(X, Y), 1e8) - 0.5 * dense_expansion(A, A, l1(X, X), 1e8)
           - 0.5 * dense_expansion(B, B, l1(Y, Y), 1e8))
    assert abs(float(value) - ref) <= RTOL[torch.float32] * ref


def test_verbose_says_when_the_expansion_gives_the_value(capsys):
    args = torch_measures(torch.float64)
    SamplesLoss("sinkhorn", blur=1e8, verbose=True)(*args)
    assert "large-blur expansion" in capsys.readouterr().out
    SamplesLoss("sinkhorn", blur=0.1, verbose=True)(*args)
    assert "large-blur expansion" not in capsys.readouterr().out


def test_batches_at_large_blur_equal_a_loop():
    a, x, b, y = torch_measures(torch.float32, batch=3)
    L = SamplesLoss("sinkhorn", blur=1e8)
    values = L(a, x, b, y)
    for k in range(3):
        assert float(values[k]) == float(L(a[k], x[k], b[k], y[k]))


# -- unbalanced transport: float64 where float32 cannot resolve, else refused -----------


@pytest.mark.parametrize("blur", [10.0, 100.0, 1e4])
@pytest.mark.parametrize("reach", [0.5, 10.0])
def test_unbalanced_float32_at_large_blur_is_solved_in_float64(blur, reach):
    """Against GeomLoss (tensorized, the same algorithm) in float64 on the
    same points: float32's loop would be off by ~ t u L (float32 at blur=1e4:
    -9e-8 for 0.05)."""
    geomloss = pytest.importorskip("geomloss")
    a, x, b, y = (t.requires_grad_() for t in torch_measures(torch.float32))
    value = SamplesLoss("sinkhorn", blur=blur, reach=reach)(a, x, b, y)
    assert value.dtype == torch.float32
    ref = geomloss.SamplesLoss("sinkhorn", blur=blur, reach=reach, backend="tensorized")(
        *(t.detach().double() for t in (a, x, b, y)))
    # float64 (the geomloss reference's own rounding ~ t 1e-16 L), then float32
    assert abs(float(value.detach()) - float(ref)) <= 2e-7 * abs(float(ref)) + 1e-9
    gx = torch.autograd.grad(value, x)[0]
    assert gx.dtype == torch.float32 and torch.isfinite(gx).all()


def test_unbalanced_beyond_float64_is_refused_naming_blur_and_reach():
    a, x, b, y = torch_measures(torch.float64)
    with pytest.raises(ValueError, match="SamplesLoss: blur.*reach=0.5.*'blur'"):
        SamplesLoss("sinkhorn", blur=1e8, reach=0.5)(a, x, b, y)
    # p = 1: blur^p = 1e8 is within float64's reach
    value = SamplesLoss("sinkhorn", p=1, blur=1e8, reach=0.5)(a, x, b, y)
    assert torch.isfinite(value) and float(value) > 0


def test_unbalanced_batches_mixing_dtypes_of_solution():
    """A batch whose items need float64 and others not comes back in one dtype."""
    a, x, b, y = torch_measures(torch.float32, batch=2)
    x = x * torch.tensor([1.0, 1e3])[:, None, None]  # item 1: costs 1e6 times larger
    values = SamplesLoss("sinkhorn", blur=100.0, reach=10.0)(a, x, b, y)
    assert values.dtype == torch.float32 and values.shape == (2,)


# -- Hausdorff: its softmins lose the same precision -------------------------------------


def dense_hausdorff(a, x, b, y, p, eps):
    """``<a, b_x - a_x> + <b, a_y - b_y>`` with dense float64 softmins (the
    log-sum-exp where float64 resolves it, else the cumulant expansion
    ``<C_i, w> - Var_w(C_i) / (2 eps)``, whose error ~ C^3 / eps^2 is then
    below 1e-12)."""

    def softmin(u, v, w):
        C = dense_cost(u, v, p)
        if eps <= 1e4:
            return -eps * logsumexp(np.log(w)[None] - C / eps, axis=1)
        mean = C @ w
        return mean - ((C * C) @ w - mean**2) / (2 * eps)

    return (a @ (softmin(x, y, b) - softmin(x, x, a))
            + b @ (softmin(y, x, a) - softmin(y, y, b)))


@pytest.mark.parametrize("dt", [torch.float32, torch.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("p, blur", [(2, 30.0), (2, 1e4), (2, 1e8), (1, 1e4), (1, 1e8)])
def test_large_blur_hausdorff_equals_the_dense_float64_reference(dt, p, blur):
    """Before: -18.2 (float32) and 0 (float64) at blur=1e8 for about 0.1."""
    a, x, b, y = torch_measures(dt, n=40, m=30)
    value = SamplesLoss("hausdorff", p=p, blur=blur)(a, x, b, y)
    ref = dense_hausdorff(*as_numpy(a, x, b, y), p, blur**p)
    assert abs(float(value) - ref) <= RTOL[dt] * ref


# -- the NumPy front end of the same divergence ---------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("blur", [1e4, 1e8])
def test_sinkhorn_divergence_estimator_at_large_blur(dtype, blur):
    """``kerneltools.estimators.sinkhorn_divergence`` shares the loop and the
    expansion (before: -6.0 in float32 and 0 in float64 at blur=1e8)."""
    from kerneltools.estimators import sinkhorn_divergence

    rng = np.random.default_rng(0)
    x, y = rng.random((40, 3)).astype(dtype), (rng.random((30, 3)) + 0.3).astype(dtype)
    value = sinkhorn_divergence(x, y, blur=blur)
    A, B = np.full(40, 1 / 40), np.full(30, 1 / 30)
    ref = divergence(dense_expansion, A, x.astype(float), B, y.astype(float), 2, blur**2)
    assert abs(value - ref) <= 1e-7 * ref


@pytest.mark.parametrize("loss", ["sinkhorn", "hausdorff"])
def test_a_custom_cost_is_bounded_by_reductions_only_near_the_switch(loss, monkeypatch):
    """The largest of a user's costs takes three Max reductions: only paid
    where the loop's outputs put eps near the switch (not at blur=0.1)."""
    from kerneltools.ot import _large_blur as limit

    calls = []
    bound = limit.cost_bound
    monkeypatch.setattr(limit, "cost_bound", lambda *a: calls.append(1) or bound(*a))
    args = torch_measures(torch.float64)
    L = SamplesLoss(loss, p=1, blur=0.1, cost=lambda u, v: (u - v).abs().sum(-1))
    L(*args)
    assert calls == []
    L = SamplesLoss(loss, p=1, blur=1e8, cost=lambda u, v: (u - v).abs().sum(-1))
    L(*args)
    assert calls


@pytest.mark.parametrize("blur", [100.0, 1e4])
def test_sinkhorn_divergence_unbalanced_float32_at_large_blur(blur):
    """The estimator escalates as SamplesLoss does: float32 points solved in
    float64 (the value against GeomLoss in float64), gradients in float32;
    refused beyond float64."""
    geomloss = pytest.importorskip("geomloss")
    from kerneltools.estimators import sinkhorn_divergence

    a, x, b, y = (t.numpy() for t in torch_measures(torch.float32))
    value, gx, gy = sinkhorn_divergence(x, y, a, b, blur=blur, reach=10.0,
                                        return_grad=True)
    ref = geomloss.SamplesLoss("sinkhorn", blur=blur, reach=10.0, backend="tensorized")(
        *(torch.tensor(v, dtype=torch.float64) for v in (a, x, b, y)))
    assert abs(value - float(ref)) <= 2e-7 * abs(float(ref)) + 1e-9
    assert gx.dtype == np.float32 and gy.dtype == np.float32
    with pytest.raises(ValueError, match="sinkhorn_divergence: blur.*reach=10.0"):
        sinkhorn_divergence(x, y, a, b, blur=1e8, reach=10.0)
