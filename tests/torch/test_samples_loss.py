"""kerneltools.torch.SamplesLoss against GeomLoss 0.3.1 itself.

Values and gradients (points and weights) against ``geomloss.SamplesLoss``
with its ``"tensorized"`` backend (dense torch, always runs) and its
``"online"`` backend (KeOps, where pykeops works), on every engine backend,
float32 and float64; the Hausdorff divergence (which GeomLoss 0.3.1 lists but
raises ``KeyError`` on) against a dense torch reference and finite
differences; batches against a loop; invariants.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="SamplesLoss needs PyTorch (an optional extra)")
geomloss = pytest.importorskip("geomloss", reason="the reference is GeomLoss")

from _array_api_helpers import torch_measures  # noqa: E402

from kerneltools.torch import SamplesLoss  # noqa: E402

TORCH_DTYPE = {np.dtype(np.float32): torch.float32, np.dtype(np.float64): torch.float64}

#: The same algorithm as GeomLoss's: only rounding differs. Gradients of
#: Sinkhorn go through the potentials' rounding (divided by eps), hence looser.
VALUE_RTOL = {torch.float32: 2e-5, torch.float64: 1e-10}
GRAD_RTOL = {torch.float32: 2e-4, torch.float64: 1e-9}

CASES = [
    ("sinkhorn", {}),
    ("sinkhorn", {"debias": False}),
    ("sinkhorn", {"reach": 0.5}),
    ("sinkhorn", {"diameter": 3.0, "scaling": 0.7}),
    ("gaussian", {"blur": 0.3}),
]


measures = torch_measures


def value_and_grads(L, *args):
    leaves = [t.detach().clone().requires_grad_() for t in args]
    v = L(*leaves)
    v.sum().backward()
    return v.detach(), [t.grad for t in leaves]


def assert_rel(got, ref, rtol, what):
    err = float((got - ref).abs().max() / ref.abs().max().clamp_min(1e-30))
    assert err <= rtol, f"{what}: relative error {err:.3g} > {rtol:.3g}"


@pytest.mark.parametrize("loss, kw", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_values_and_gradients_equal_geomloss_tensorized(backend, dtype, loss, kw):
    dt = TORCH_DTYPE[dtype]
    args = measures(dt)
    v, grads = value_and_grads(SamplesLoss(loss, backend=backend, **kw), *args)
    v_ref, grads_ref = value_and_grads(
        geomloss.SamplesLoss(loss, backend="tensorized", **kw), *args
    )
    assert v.dtype == dt
    assert_rel(v, v_ref, VALUE_RTOL[dt], "value")
    for name, g, g_ref in zip("axby", grads, grads_ref):
        assert g.dtype == dt
        assert_rel(g, g_ref, GRAD_RTOL[dt], f"gradient in {name}")


def _keops_works():
    # without pykeops GeomLoss's online backend still runs some losses, wrongly
    # (NaN for the energy distance) or fails (NameError for Sinkhorn)
    if importlib.util.find_spec("pykeops") is None:
        return False, "GeomLoss's online backend needs pykeops, which is not installed"
    try:
        x = torch.rand(5, 2, dtype=torch.float64)
        geomloss.SamplesLoss("gaussian", backend="online")(x, x)
        return True, ""
    except Exception as exc:  # pykeops missing or unable to compile
        return False, f"GeomLoss's online backend (pykeops) does not run: {exc}"


#: Where GeomLoss's tensorized backend clamps |x - y| at 1e-4 (p = 1, energy,
#: Laplacian: the diagonal of C_xx), its online backend computes what we do.
ONLINE_CASES = [("sinkhorn", {}), ("gaussian", {}), ("sinkhorn", {"p": 1, "blur": 0.1}),
                ("energy", {}), ("laplacian", {"blur": 0.3})]


@pytest.mark.parametrize("loss, kw", ONLINE_CASES,
                         ids=[f"{c[0]}-{c[1]}" for c in ONLINE_CASES])
def test_values_and_gradients_equal_geomloss_online(dtype, loss, kw):
    ok, why = _keops_works()
    if not ok:
        pytest.skip(why)
    dt = TORCH_DTYPE[dtype]
    args = measures(dt, seed=1)
    v, grads = value_and_grads(SamplesLoss(loss, **kw), *args)
    v_ref, grads_ref = value_and_grads(
        geomloss.SamplesLoss(loss, backend="online", **kw), *args
    )
    # GeomLoss online differs from its own tensorized backend by ~1e-7 in the
    # float64 Sinkhorn gradients (KeOps' float64 LogSumExp); float32 rounding.
    assert_rel(v, v_ref, 2e-5, "value")
    for name, g, g_ref in zip("axby", grads, grads_ref):
        assert_rel(g, g_ref, 2e-4 if dt == torch.float32 else 1e-6, f"gradient {name}")


@pytest.mark.parametrize("loss", ["sinkhorn", "gaussian"])
def test_potentials_equal_geomloss(dtype, loss):
    dt = TORCH_DTYPE[dtype]
    a, x, b, y = measures(dt, seed=2)
    F, G = SamplesLoss(loss, potentials=True)(a, x, b, y)
    F_ref, G_ref = geomloss.SamplesLoss(loss, potentials=True, backend="tensorized")(
        a, x, b, y
    )
    assert F.shape == a.shape and G.shape == b.shape
    assert_rel(F, F_ref, GRAD_RTOL[dt], "F")
    assert_rel(G, G_ref, GRAD_RTOL[dt], "G")


@pytest.mark.parametrize("loss", ["sinkhorn", "gaussian"])
def test_batches_equal_a_loop(loss):
    dt = torch.float64
    args = measures(dt, batch=3, seed=3)
    L = SamplesLoss(loss, blur=0.2, diameter=2.0)  # one schedule for all
    v, grads = value_and_grads(L, *args)
    assert v.shape == (3,)
    for k in range(3):
        vk, gk = value_and_grads(L, *(t[k] for t in args))
        assert_rel(v[k], vk, 1e-12, "value")
        for g, g1 in zip(grads, gk):
            assert_rel(g[k], g1, 1e-12, "gradient")
    # against GeomLoss's batched tensorized backend, whose default schedule
    # starts from the diameter of the whole batch
    v = SamplesLoss(loss, blur=0.2)(*args)
    v_ref = geomloss.SamplesLoss(loss, blur=0.2, backend="tensorized")(*args)
    assert_rel(v, v_ref, 1e-10, "batched value")


def test_uniform_weights_when_called_with_points_only():
    a, x, b, y = measures(torch.float64, seed=4)
    n, m = len(x), len(y)
    L = SamplesLoss("sinkhorn")
    u, w = torch.full((n,), 1.0 / n, dtype=x.dtype), torch.full((m,), 1.0 / m, dtype=x.dtype)
    assert_rel(L(x, y), L(u, x, w, y), 1e-14, "value")
    assert_rel(L(x, y), geomloss.SamplesLoss(backend="tensorized")(x, y), 1e-10, "value")


# -- Hausdorff: a dense reference (GeomLoss 0.3.1 raises KeyError on it) -------------


def distances(u, v):
    """|u_i - v_j|, exact (torch.cdist's matrix-product path loses digits),
    with a zero gradient at u_i = v_j."""
    d2 = ((u[:, None, :] - v[None, :, :]) ** 2).sum(-1)
    return torch.where(d2 > 0, d2.clamp_min(1e-300).sqrt(), torch.zeros_like(d2))


def dense_kernel_loss(a, x, b, y, loss, blur):
    def k(u, v):
        d = distances(u, v)
        return {"energy": -d, "laplacian": (-d / blur).exp()}[loss]

    return 0.5 * a @ k(x, x) @ a + 0.5 * b @ k(y, y) @ b - a @ k(x, y) @ b


@pytest.mark.parametrize("loss", ["energy", "laplacian"])
def test_distance_kernels_against_dense_reference(backend, dtype, loss):
    """GeomLoss's tensorized backend clamps |x_i - x_i| at 1e-4; the exact
    kernel norm is the reference (GeomLoss online: the test above)."""
    dt = TORCH_DTYPE[dtype]
    args = measures(dt, seed=9)
    v, grads = value_and_grads(SamplesLoss(loss, blur=0.3, backend=backend), *args)
    v_ref, grads_ref = value_and_grads(
        lambda *t: dense_kernel_loss(*t, loss, 0.3), *[t.double() for t in args]
    )
    rtol = 1e-4 if dt == torch.float32 else 1e-10
    assert_rel(v.double(), v_ref, rtol, "value")
    for name, g, g_ref in zip("axby", grads, grads_ref):
        assert_rel(g.double(), g_ref, 10 * rtol, f"gradient in {name}")


def dense_hausdorff(a, x, b, y, p, blur):
    """Feydy and Trouve's Hausdorff divergence, differentiated as GeomLoss
    differentiates softmins: in their output points only."""
    eps = blur**p

    def softmin(u, v, w):
        C = distances(u, v.detach()) ** p / p
        return -eps * torch.logsumexp(w.detach().log()[None, :] - C / eps, dim=1)

    return a @ (softmin(x, y, b) - softmin(x, x, a)) + b @ (softmin(y, x, a) - softmin(y, y, b))


@pytest.mark.parametrize("p", [1, 2])
def test_hausdorff_against_dense_reference(backend, dtype, p):
    dt = TORCH_DTYPE[dtype]
    args = measures(dt, seed=5)
    v, grads = value_and_grads(SamplesLoss("hausdorff", p=p, blur=0.1, backend=backend), *args)
    # the reference in float64: cdist's gradient at x_i = x_i is what differs
    ref_args = [t.double() for t in args]
    v_ref, grads_ref = value_and_grads(lambda *t: dense_hausdorff(*t, p, 0.1), *ref_args)
    rtol = 1e-4 if dt == torch.float32 else 1e-9
    assert_rel(v.double(), v_ref, rtol, "value")
    for name, g, g_ref in zip("axby", grads, grads_ref):
        assert_rel(g.double(), g_ref, 10 * rtol, f"gradient in {name}")


# -- invariants ------------------------------------------------------------------------


@pytest.mark.parametrize("loss", ["sinkhorn", "hausdorff", "energy", "gaussian", "laplacian"])
def test_a_measure_is_at_zero_from_itself_and_losses_are_symmetric(loss):
    a, x, b, y = measures(torch.float64, seed=7)
    L = SamplesLoss(loss, blur=0.2)
    assert abs(float(L(a, x, a, x))) < 1e-10
    assert abs(float(L(a, x, b, y) - L(b, y, a, x))) < 1e-10 * abs(float(L(a, x, b, y)))
    assert float(L(a, x, b, y)) > 0


def test_sinkhorn_gradient_is_the_first_order_change():
    """The envelope-theorem gradient predicts the value's change along a
    direction (converged potentials: scaling close to 1; a fixed diameter, so
    that the schedule does not move with x)."""
    a, x, b, y = measures(torch.float64, seed=8)
    L = SamplesLoss("sinkhorn", blur=0.5, scaling=0.99, diameter=2.0)
    _, (_, gx, _, _) = value_and_grads(L, a, x, b, y)
    d = torch.randn(x.shape, generator=torch.Generator().manual_seed(0), dtype=x.dtype)
    h = 1e-4
    fd = (L(a, x + h * d, b, y) - L(a, x - h * d, b, y)) / (2 * h)
    assert abs(float(fd - (gx * d).sum())) < 3e-3 * abs(float(fd))


# -- gradients of gradients ---------------------------------------------------------


def dense_loss(a, x, b, y, loss, blur):
    """The kernel norm densely, exactly twice differentiable (the distance
    kernels' terms where points coincide: 0 with all their derivatives)."""
    if loss != "gaussian":
        return dense_kernel_loss(a, x, b, y, loss, blur)

    def k(u, v):
        return (-((u[:, None] - v[None]) ** 2).sum(-1) / (2 * blur**2)).exp()

    return 0.5 * a @ k(x, x) @ a + 0.5 * b @ k(y, y) @ b - a @ k(x, y) @ b


def gradient_penalty_grads(L, args):
    """A WGAN-GP style penalty |d L / d x|^2 + |d L / d a|^2, and its gradients."""
    leaves = [t.detach().clone().requires_grad_() for t in args]
    ga, gx = torch.autograd.grad(L(*leaves), leaves[:2], create_graph=True)
    penalty = (gx**2).sum() + (ga**2).sum()
    penalty.backward()
    return penalty.detach(), [t.grad for t in leaves]


def assert_penalty_grads_equal_dense(loss, args, backend, blur=0.3, rtol=1e-10):
    p, grads = gradient_penalty_grads(SamplesLoss(loss, blur=blur, backend=backend), args)
    ref_args = [t.double() for t in args]
    p_ref, grads_ref = gradient_penalty_grads(lambda *t: dense_loss(*t, loss, blur),
                                              ref_args)
    assert_rel(p.double(), p_ref, rtol, "penalty")
    for name, g, g_ref in zip("axby", grads, grads_ref):
        assert g.dtype == args[1].dtype and torch.isfinite(g).all()
        assert_rel(g.double(), g_ref, 10 * rtol, f"gradient of the penalty in {name}")
    return grads


def test_double_backward_equals_dense_autograd(backend):
    """The exact second derivatives (dense torch autograd), on every backend,
    in float64: the first-order tests cover float32, and each second-order
    case is four kernels to compile. GeomLoss's own kernel losses differ
    here by design: they detach one argument of K_xx and K_yy and double the
    first-order gradient (``double_grad``), which is exact to first order
    only; its cross terms (through K_xy) agree."""
    args = measures(torch.float64, seed=11)
    grads = assert_penalty_grads_equal_dense("gaussian", args, backend)
    _, grads_gl = gradient_penalty_grads(
        geomloss.SamplesLoss("gaussian", blur=0.3, backend="tensorized"), args)
    for name, k in (("b", 2), ("y", 3)):
        assert_rel(grads[k], grads_gl[k], 1e-9, f"GeomLoss, {name}")


@pytest.mark.parametrize("loss", ["energy", "laplacian"])
def test_double_backward_of_the_distance_kernels(loss):
    """The same for ``|x - y|``'s kernels, on the NumPy backend: the C
    rendering of their formulas' derivatives (the ``ifelse`` included) is
    what ``test_ops`` checks for every operation, and their first-order
    values on every backend what the tests above check."""
    assert_penalty_grads_equal_dense(loss, measures(torch.float64, seed=11), "numpy")


def test_double_backward_where_points_coincide():
    """x and y share points: the distance kernels' singular terms (``|x_i -
    y_j| = 0``) are 0 with their derivatives, as in dense autograd of
    ``where(d > 0, d, 0)``; everything stays finite, in float32 too (NumPy
    backend: no kernel to compile)."""
    a, x, b, y = measures(torch.float64, seed=14)
    args = (a, x, b, torch.cat([x[:10], y[10:]]))
    assert_penalty_grads_equal_dense("energy", args, "numpy", blur=1.0)
    assert_penalty_grads_equal_dense("laplacian", [t.float() for t in args], "numpy",
                                     rtol=1e-4)


def _coinciding_wide(dt):
    a, x, b, y = measures(torch.float64, seed=14, d=16)
    return [t.to(dt) for t in (a, x, b, torch.cat([x[:10], y[10:]]))]


def test_double_backward_where_points_coincide_in_wide_dimensions(backend):
    """The same at D = 16, where the C backend computes squared distances in
    the expanded form |x|^2 + |y|^2 - 2 <x, y>: a point's distance to
    itself came out as ~4e-16 there, not 0, so the singular terms took the
    branch of distinct points: their second derivatives, ~ 1 / r with
    r ~ 2e-8, reached the gradient of the penalty (relative error 1e4 in x
    and y, float64). Which terms are singular is decided exactly, and their
    distance is 0 (the Laplacian loss shares the code: its first order below;
    its second order costs as many compilations again)."""
    assert_penalty_grads_equal_dense("energy", _coinciding_wide(torch.float64), backend,
                                     blur=1.0)


def test_laplacian_loss_where_points_coincide_in_wide_dimensions(backend):
    """k(x_i, x_i) moved by that distance's square root (float32: ~1e-3,
    the Laplacian loss's gradient in a 2.5e-4 off, relative)."""
    args = _coinciding_wide(torch.float32)
    v, grads = value_and_grads(SamplesLoss("laplacian", blur=1.0, backend=backend), *args)
    v_ref, grads_ref = value_and_grads(lambda *t: dense_kernel_loss(*t, "laplacian", 1.0),
                                       *[t.double() for t in args])
    assert_rel(v.double(), v_ref, 1e-4, "value")
    for name, g, g_ref in zip("axby", grads, grads_ref):
        assert_rel(g.double(), g_ref, 1e-4, f"gradient in {name}")


@pytest.mark.parametrize("loss", ["sinkhorn", "hausdorff"])
def test_double_backward_is_refused_where_not_computed(loss):
    a, x, b, y = measures(torch.float64, seed=12)
    x = x.clone().requires_grad_()
    value = SamplesLoss(loss, blur=0.3)(a, x, b, y)
    with pytest.raises(NotImplementedError, match="create_graph=True.*potentials"):
        torch.autograd.grad(value, x, create_graph=True)
    # first order still works
    value = SamplesLoss(loss, blur=0.3)(a, x, b, y)
    assert torch.autograd.grad(value, x)[0].shape == x.shape


# -- bad input ------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, match", [
    ({"loss": "wasserstein"}, "'loss' parameter"),
    ({"p": 3}, "'p' parameter"),
    ({"blur": -1.0}, "'blur' parameter"),
    ({"scaling": 1.5}, "'scaling' parameter"),
    ({"reach": 0.0}, "'reach' parameter"),
    ({"loss": "gaussian", "reach": 1.0}, "'reach'"),
    ({"backend": "tpu"}, "backend"),
])
def test_bad_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SamplesLoss(**kwargs)


def l1_cost_dense(x, y):
    """GeomLoss's tensorized form of a cost: batched dense tensors."""
    return (x[:, :, None, :] - y[:, None, :, :]).abs().sum(-1)


@pytest.mark.parametrize("loss", ["sinkhorn", "hausdorff"])
def test_cost_callable_equals_geomloss(backend, dtype, loss):
    """An L1 ground cost as a callable of LazyTensors against the same cost
    as a callable of dense tensors in GeomLoss (tensorized); Hausdorff (which
    GeomLoss 0.3.1 does not run) against the dense reference with that cost."""
    dt = TORCH_DTYPE[dtype]
    args = measures(dt, seed=13)
    L = SamplesLoss(loss, p=1, blur=0.1, backend=backend,
                    cost=lambda x, y: (x - y).abs().sum(-1))
    v, grads = value_and_grads(L, *args)
    if loss == "sinkhorn":
        ref = geomloss.SamplesLoss(loss, p=1, blur=0.1, cost=l1_cost_dense,
                                   backend="tensorized")
        rtol_v, rtol_g = VALUE_RTOL[dt], GRAD_RTOL[dt]
    else:
        def ref(a, x, b, y):
            def softmin(u, v, w):
                C = (u[:, None, :] - v.detach()[None]).abs().sum(-1)
                return -0.1 * torch.logsumexp(w.detach().log()[None] - C / 0.1, dim=1)

            return (a @ (softmin(x, y, b) - softmin(x, x, a))
                    + b @ (softmin(y, x, a) - softmin(y, y, b)))
        rtol_v, rtol_g = (1e-4, 1e-3) if dt == torch.float32 else (1e-10, 1e-9)
    v_ref, grads_ref = value_and_grads(ref, *args)
    assert_rel(v, v_ref, rtol_v, "value")
    for name, g, g_ref in zip("axby", grads, grads_ref):
        assert_rel(g, g_ref, rtol_g, f"gradient in {name}")


def test_cost_string_is_a_keops_formula():
    args = measures(torch.float64, seed=13)
    as_string = SamplesLoss("sinkhorn", p=1, blur=0.1, cost="Sum(Abs(X-Y))")(*args)
    as_callable = SamplesLoss("sinkhorn", p=1, blur=0.1,
                              cost=lambda x, y: (x - y).abs().sum(-1))(*args)
    assert_rel(as_string, as_callable, 1e-14, "value")
    default = SamplesLoss("sinkhorn", blur=0.1)(*args)
    assert_rel(SamplesLoss("sinkhorn", blur=0.1, cost="SqDist(X,Y) / IntCst(2)")(*args),
               default, 1e-14, "value")


def test_bad_costs():
    with pytest.raises(NotImplementedError, match="'kernel'"):
        SamplesLoss(kernel="Exp(-SqDist(X,Y))")
    with pytest.raises(ValueError, match="unknown name 'Z'"):
        SamplesLoss(cost="SqDist(X,Z)")
    with pytest.raises(TypeError, match="'cost' must be"):
        SamplesLoss(cost=3.0)
    with pytest.raises(ValueError, match="'cost' applies to"):
        SamplesLoss("gaussian", cost="SqDist(X,Y)")
    with pytest.raises(ValueError, match="multiscale"):
        SamplesLoss(cost="SqDist(X,Y)", backend="multiscale")


def test_bad_inputs():
    a, x, b, y = measures(torch.float64)
    L = SamplesLoss("gaussian")
    with pytest.raises(TypeError, match="L\\(x, y\\)"):
        L(x)
    with pytest.raises(ValueError, match="'x' and 'y'"):
        L(x, y[:, :2])
    with pytest.raises(ValueError, match="'a' must have shape"):
        L(a[:-1], x, b, y)
    with pytest.raises(ValueError, match="'b' must be finite"):
        L(a, x, -b, y)
    with pytest.raises(TypeError, match="'x' must be a torch tensor"):
        L(x.numpy(), y)
    with pytest.raises(ValueError, match="same total mass"):
        SamplesLoss("sinkhorn")(a, x, 2 * b, y)


def test_multiscale_backend_equals_the_numpy_multiscale_divergence():
    from kerneltools.estimators.optimal_transport import sinkhorn_divergence

    a, x, b, y = measures(torch.float64, n=300, m=250, seed=10)
    kw = {"blur": 0.05, "scaling": 0.9, "cluster_scale": 0.2}
    v, (_, gx, _, gy) = value_and_grads(SamplesLoss(backend="multiscale", **kw), a, x, b, y)
    ref, rx, ry = sinkhorn_divergence(x.numpy(), y.numpy(), a.numpy(), b.numpy(),
                                      multiscale=True, return_grad=True, **kw)
    assert float(v) == pytest.approx(ref, rel=1e-12)
    np.testing.assert_allclose(gx.numpy(), rx, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(gy.numpy(), ry, rtol=1e-10, atol=1e-14)
    dense = SamplesLoss(blur=0.05, scaling=0.9)(a, x, b, y)
    assert float(v) == pytest.approx(float(dense), rel=1e-3)
