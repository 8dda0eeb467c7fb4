"""pykeops' LazyTensor semantics in ``kerneltools.torch`` (issue 21), against
dense torch references and gradcheck: batch axes with backward,
``torch.vmap`` / ``torch.func``, a differentiable ``solve``, pykeops'
reduction keywords, symbolic variables, the pykeops surface methods."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="kerneltools.torch needs PyTorch (optional extra)")

import kerneltools.torch as ktt  # noqa: E402
from kerneltools.torch import LazyTensor, Pm, Vi, Vj  # noqa: E402

BE = "numpy"


def _rand(*shape, seed=0, grad=False, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(*shape, generator=g, dtype=torch.float64).to(device)
    return t.requires_grad_() if grad else t


def _gauss_keops(x, y, b, p, axis):
    x, y, b, p = map(LazyTensor, (x, y, b, p))
    return ((-p * (x - y).sqnorm2()).exp() * b).sum(axis)


def _gauss_torch(x, y, b, p, axis):
    K = (-p[..., 0] * ((x - y) ** 2).sum(-1)).exp()[..., None]
    return (K * b).sum(axis)


# -- batch axes ------------------------------------------------------------------
def test_batch_axes_values_and_gradients(device):
    """Broadcast batch axes (B1, B2) = (2, 3): x batched fully, y over B1 only,
    b over B2 only, p per B1; gradients summed over the broadcast axes."""
    x = _rand(2, 3, 4, 1, 2, seed=1, grad=True, device=device)
    y = _rand(2, 1, 1, 5, 2, seed=2, grad=True, device=device)
    b = _rand(1, 3, 1, 5, 1, seed=3, grad=True, device=device)
    p = _rand(2, 1, 1, 1, 1, seed=4, device=device).abs().requires_grad_()
    for axis in (2, 3):  # over i, over j (numbered after the batch axes)
        out = _gauss_keops(x, y, b, p, axis)
        ref = _gauss_torch(x, y, b, p, axis)
        torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-14)
        u = torch.rand(ref.shape, dtype=torch.float64, device=device)
        got = torch.autograd.grad(out, (x, y, b, p), u)
        want = torch.autograd.grad(ref, (x, y, b, p), u)
        for g, w, name in zip(got, want, "xybp"):
            torch.testing.assert_close(g, w, rtol=1e-10, atol=1e-12, msg=name)


def test_vi_vj_of_batched_tensors_are_batch_axes():
    """torch's Vi/Vj of (B, N, D) tensors read the leading axis as a batch
    axis, as NumPy's do (they once flattened it into the features)."""
    import kerneltools as kt

    x, y = _rand(2, 5, 3, seed=40), _rand(2, 4, 3, seed=41)
    got = (-Vi(x).sqdist(Vj(y))).exp().sum(2, backend=BE)
    want = (-kt.Vi(x.numpy()).sqdist(kt.Vj(y.numpy()))).exp().sum(2, backend=BE)
    assert got.shape == (2, 5, 1)
    torch.testing.assert_close(got, torch.from_numpy(want))
    torch.testing.assert_close(got, torch.exp(-((x[:, :, None] - y[:, None]) ** 2).sum(-1))
                               .sum(2, keepdim=True))


@pytest.mark.parametrize("reduction", ["min", "max_argmax", "kmin"])
def test_batch_axes_gradient_of_arg_reductions(reduction):
    """The gradient of Min / Max / K-min with batch axes reaches the selected
    j of each problem (it once compared the problem's local arg-index with
    the stacked problem's global j: silently wrong beyond the first problem)."""
    x = _rand(2, 4, 1, 2, seed=80, grad=True)
    y = _rand(2, 1, 5, 2, seed=81, grad=True)
    D = (LazyTensor(x) - LazyTensor(y)).sqnorm2()
    d = ((x - y) ** 2).sum(-1)
    if reduction == "min":
        out, ref = D.min(2, backend=BE), d.amin(2)[..., None]
    elif reduction == "max_argmax":
        out, ref = D.max_argmax(2, backend=BE)[0], d.amax(2)[..., None]
    else:
        out, ref = D.Kmin(K=2, axis=2, backend=BE), torch.topk(d, 2, 2, largest=False).values
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-14)
    for g, w in zip(torch.autograd.grad(out.sum(), (x, y)),
                    torch.autograd.grad(ref.sum(), (x, y))):
        torch.testing.assert_close(g, w, rtol=1e-10, atol=1e-12)


def test_batch_gradcheck():
    x = _rand(2, 3, 1, 2, seed=5, grad=True)
    y = _rand(2, 1, 4, 2, seed=6, grad=True)
    b = _rand(1, 1, 4, 1, seed=7, grad=True)

    def f(x, y, b):
        return ((-LazyTensor(x).sqdist(LazyTensor(y))).exp() * LazyTensor(b)).logsumexp(
            2, backend=BE)

    assert torch.autograd.gradcheck(f, (x, y, b))
    assert torch.autograd.gradgradcheck(f, (x, y, b))


# -- torch.vmap and torch.func ------------------------------------------------------
def _fn(x_i, x_j, y_j, use_keops):
    if use_keops:
        x_i, x_j, y_j = LazyTensor(x_i), LazyTensor(x_j), LazyTensor(y_j)
    K = (-((x_i - x_j) ** 2).sum(-1)).exp()
    if not use_keops:
        K = K[..., None]
    return (K * y_j).sum(1)


@pytest.mark.parametrize("shapes, in_dims, out_dims", [
    (((5, 6, 1, 2), (5, 1, 7, 2), (5, 1, 7, 1)), 0, 0),
    (((6, 5, 1, 2), (1, 5, 7, 2), (1, 5, 7, 1)), 1, 1),
    (((6, 5, 1, 2), (5, 1, 7, 2), (1, 5, 7, 1)), (1, 0, 1), 2),
    (((5, 6, 1, 2), (1, 7, 2), (1, 7, 1)), (0, None, None), 0),
])
def test_vmap_values_and_gradients(shapes, in_dims, out_dims):
    xi = _rand(*shapes[0], seed=8, grad=True)
    xj, yj = _rand(*shapes[1], seed=9), _rand(*shapes[2], seed=10)
    got = torch.vmap(_fn, in_dims=in_dims, out_dims=out_dims)(xi, xj, yj, use_keops=True)
    ref = torch.vmap(_fn, in_dims=in_dims, out_dims=out_dims)(xi, xj, yj, use_keops=False)
    torch.testing.assert_close(got, ref, rtol=1e-12, atol=1e-14)
    u = torch.rand(ref.shape, dtype=torch.float64)
    (g,) = torch.autograd.grad(got, xi, u)
    (w,) = torch.autograd.grad(ref, xi, u)
    torch.testing.assert_close(g, w, rtol=1e-10, atol=1e-12)


def test_torch_func_grad_jacrev_and_jvp():
    x, y = _rand(4, 1, 2, seed=11), _rand(1, 5, 2, seed=12)
    b, p = _rand(1, 5, 1, seed=13), _rand(1, 1, 1, seed=14).abs()

    def fk(x, y, b, p):
        return _gauss_keops(x, y, b, p, 1).norm()

    def ft(x, y, b, p):
        return _gauss_torch(x, y, b, p, 1).norm()

    args = (x, y, b, p)
    for k in range(4):
        torch.testing.assert_close(torch.func.grad(fk, k)(*args), torch.func.grad(ft, k)(*args),
                                   rtol=1e-10, atol=1e-12)
    for a, r in zip(torch.func.jacrev(fk, (0, 1, 2, 3))(*args),
                    torch.func.jacrev(ft, (0, 1, 2, 3))(*args)):
        torch.testing.assert_close(a, r, rtol=1e-10, atol=1e-12)
    tangents = tuple(_rand(*a.shape, seed=20 + k) for k, a in enumerate(args))
    torch.testing.assert_close(torch.func.jvp(fk, args, tangents)[1],
                               torch.func.jvp(ft, args, tangents)[1], rtol=1e-10, atol=1e-12)


def test_jvp_of_logsumexp():
    x, y = _rand(4, 1, 2, seed=30), _rand(1, 5, 2, seed=31)
    tx, ty = _rand(4, 1, 2, seed=32), _rand(1, 5, 2, seed=33)

    def fk(x, y):
        return (-(LazyTensor(x) - LazyTensor(y)).sqnorm2()).logsumexp(1, backend=BE)

    def ft(x, y):
        return torch.logsumexp(-((x - y) ** 2).sum(-1), 1, keepdim=True)

    torch.testing.assert_close(torch.func.jvp(fk, (x, y), (tx, ty))[1],
                               torch.func.jvp(ft, (x, y), (tx, ty))[1], rtol=1e-10, atol=1e-12)


# -- forward mode: jvp, jacfwd, hessian --------------------------------------------
# Each case: (the kerneltools reduction of F = -p |x_i - y_j|^2 (and the
# weight b_j) over ``axis``, the same on a dense (N, M) torch array). Min, Max
# and K-min are differentiable almost everywhere (no ties in random data).
def _dense_f(x, y, p):
    return -p[0] * ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)  # (N, M)


def _keops_f(x, y, p):
    return -Pm(p) * Vi(x).sqdist(Vj(y))


def _pick(t, k=0):
    return t[k] if isinstance(t, tuple) else t


_FORWARD_CASES = {
    "sum": (lambda F, b, ax, be: (F.exp() * Vj(b)).sum(ax, backend=be),
            lambda F, b, ax: (F.exp()[..., None] * b[None]).sum(ax) if ax == 1
            else (F.exp()[..., None] * b[None]).sum(0)),
    "logsumexp": (lambda F, b, ax, be: F.logsumexp(ax, backend=be),
                  lambda F, b, ax: torch.logsumexp(F, ax)[:, None]),
    "logsumexp_weight": (
        lambda F, b, ax, be: F.logsumexp(ax, weight=Vj(b.exp()), backend=be),
        lambda F, b, ax: torch.logsumexp(F[..., None] + b[None], ax)),
    "sumsoftmaxweight": (
        lambda F, b, ax, be: F.sumsoftmaxweight(Vj(b), ax, backend=be),
        lambda F, b, ax: (torch.softmax(F, ax)[..., None] * b[None]).sum(ax)),
    "sumsquares": (lambda F, b, ax, be: (F.exp() * Vj(b)).sumsquares(ax, backend=be),
                   lambda F, b, ax: ((F.exp()[..., None] * b[None]) ** 2).sum(ax)),
    "kmin_argkmin": (
        lambda F, b, ax, be: _pick((F - Vj(b)).Kmin_argKmin(K=2, axis=ax, backend=be)),
        lambda F, b, ax: torch.topk(F - b[:, 0][None], 2, dim=ax, largest=False)
        .values.reshape(-1, 2) if ax == 1 else
        torch.topk(F - b[:, 0][None], 2, dim=0, largest=False).values.T),
    "min": (lambda F, b, ax, be: (F - Vj(b)).min(ax, backend=be),
            lambda F, b, ax: (F[..., None] - b[None]).amin(ax)),
    "max_argmax": (lambda F, b, ax, be: _pick((F + Vj(b)).max_argmax(ax, backend=be)),
                   lambda F, b, ax: (F[..., None] + b[None]).amax(ax)),
    "kmin": (lambda F, b, ax, be: (F - Vj(b)).Kmin(K=2, axis=ax, backend=be),
             lambda F, b, ax: torch.topk(F - b[:, 0][None], 2, dim=ax, largest=False)
             .values.reshape(-1, 2) if ax == 1 else
             torch.topk(F - b[:, 0][None], 2, dim=0, largest=False).values.T),
}


def _forward_args(dtype, device, seed=50):
    x, y = _rand(4, 2, seed=seed), _rand(5, 2, seed=seed + 1)
    b, p = _rand(5, 1, seed=seed + 2), _rand(1, seed=seed + 3).abs() + 0.5
    return tuple(t.to(device=device, dtype=dtype) for t in (x, y, b, p))


def _forward_fns(case, axis, backend):
    keops, dense = _FORWARD_CASES[case]

    def fk(x, y, b, p):
        return keops(_keops_f(x, y, p), b, axis, backend)

    def ft(x, y, b, p):
        return dense(_dense_f(x, y, p), b, axis)

    return fk, ft


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("case", sorted(_FORWARD_CASES))
def test_jvp_of_every_differentiable_reduction(case, axis, backend, dtype):
    """``torch.func.jvp`` of each reduction, over i and over j, with tangents
    on every input (i-, j-variables, weight, parameter), against torch.func
    on the dense formula."""
    device = "cuda" if backend == "cuda" else "cpu"
    tdtype = torch.float64 if dtype == "float64" else torch.float32
    args = _forward_args(tdtype, device)
    tangents = _forward_args(tdtype, device, seed=60)
    fk, ft = _forward_fns(case, axis, backend)
    got, tan = torch.func.jvp(fk, args, tangents)
    want, want_tan = torch.func.jvp(ft, args, tangents)
    tol = dict(rtol=1e-10, atol=1e-12) if tdtype == torch.float64 else dict(rtol=1e-4,
                                                                           atol=1e-5)
    torch.testing.assert_close(got, want, **tol)
    torch.testing.assert_close(tan, want_tan, **tol)


@pytest.mark.parametrize("case", sorted(_FORWARD_CASES))
def test_jacfwd_and_hessian_against_dense(case):
    """``torch.func.jacfwd`` (vmap of jvp) and ``torch.func.hessian`` (jacfwd
    of jacrev) in float64, with respect to every input."""
    args = _forward_args(torch.float64, "cpu")
    fk, ft = _forward_fns(case, 1, BE)
    for a, r in zip(torch.func.jacfwd(fk, (0, 1, 2, 3))(*args),
                    torch.func.jacfwd(ft, (0, 1, 2, 3))(*args)):
        torch.testing.assert_close(a, r, rtol=1e-10, atol=1e-12)

    def sk(*a):
        return fk(*a).square().sum()

    def st(*a):
        return ft(*a).square().sum()

    got = torch.func.hessian(sk, (0, 1, 2, 3))(*args)
    want = torch.func.hessian(st, (0, 1, 2, 3))(*args)
    for row_g, row_w in zip(got, want):
        for g, w in zip(row_g, row_w):
            torch.testing.assert_close(g, w, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("case", ["min", "kmin"])
def test_second_reverse_derivatives_of_min_wrt_j_variables(case):
    """jacrev of jacrev of Min / K-min: the gradient with respect to a
    j-variable is a Sum over i whose formula compares j with the arg-index;
    its own gradient once renamed that j to i (silently wrong numbers)."""
    args = _forward_args(torch.float64, "cpu")
    fk, ft = _forward_fns(case, 1, BE)
    got = torch.func.jacrev(torch.func.jacrev(lambda y: fk(args[0], y, *args[2:]).sum()))
    want = torch.func.jacrev(torch.func.jacrev(lambda y: ft(args[0], y, *args[2:]).sum()))
    torch.testing.assert_close(got(args[1]), want(args[1]), rtol=1e-10, atol=1e-12)


def test_jvp_with_ranges_is_the_block_sparse_one():
    """The tangent of a ranged reduction keeps its ranges: equal to the jvp of
    the dense formula masked to the two diagonal blocks (not the dense one)."""
    import numpy as np

    r_i, r_j = np.array([[0, 2], [2, 4]]), np.array([[0, 2], [2, 5]])
    ranges = (r_i, np.array([1, 2]), r_j, r_j, np.array([1, 2]), r_i)
    mask = torch.zeros(4, 5, dtype=torch.float64)
    mask[:2, :2] = mask[2:, 2:] = 1
    args, tangents = _forward_args(torch.float64, "cpu"), _forward_args(torch.float64, "cpu", 60)

    def fk(x, y, b, p):
        return (_keops_f(x, y, p).exp() * Vj(b)).sum(1, ranges=ranges, backend=BE)

    def ft(x, y, b, p):
        return ((_dense_f(x, y, p).exp() * mask)[..., None] * b[None]).sum(1)

    for got, want in zip(torch.func.jvp(fk, args, tangents), torch.func.jvp(ft, args, tangents)):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


def test_forward_mode_through_batch_axes_and_arg_reductions():
    """jvp with batch axes (B = 2, broadcast y), and of argmin: integer
    outputs have no tangent (torch.func gives none, the values are right)."""
    x, y = _rand(2, 4, 1, 2, seed=70), _rand(1, 1, 5, 2, seed=71)
    tx, ty = _rand(2, 4, 1, 2, seed=72), _rand(1, 1, 5, 2, seed=73)

    def fk(x, y):
        return (-(LazyTensor(x) - LazyTensor(y)).sqnorm2()).logsumexp(2, backend=BE)

    def ft(x, y):
        return torch.logsumexp(-((x - y) ** 2).sum(-1), 2)[..., None]

    torch.testing.assert_close(torch.func.jvp(fk, (x, y), (tx, ty))[1],
                               torch.func.jvp(ft, (x, y), (tx, ty))[1], rtol=1e-10, atol=1e-12)
    x2 = _rand(4, 2, seed=74)

    def arg(x):
        return Vi(x).sqdist(Vj(x2)).argmin(axis=1, backend=BE)

    out, _ = torch.func.jvp(arg, (x2,), (x2,))
    want = torch.cdist(x2, x2).argmin(1)
    assert torch.equal(out.reshape(-1), want)


# -- solve ----------------------------------------------------------------------
def test_solve_tensor_rhs_differentiable():
    x = _rand(12, 2, seed=16, grad=True)
    s = torch.tensor([0.8], dtype=torch.float64, requires_grad=True)
    b = _rand(12, 2, seed=17, grad=True)

    def f(x, s, b):
        K = (-Vi(x).sqdist(Vj(x)) / Pm(s)).exp()
        return K.solve(b, alpha=0.3, tol=1e-13, backend=BE)

    a = f(x, s, b)
    assert isinstance(a, torch.Tensor) and a.shape == (12, 2)
    Kd = torch.exp(-((x[:, None] - x[None]) ** 2).sum(-1) / s)
    torch.testing.assert_close(a, torch.linalg.solve(Kd + 0.3 * torch.eye(12, dtype=a.dtype), b),
                               rtol=1e-9, atol=1e-11)
    assert torch.autograd.gradcheck(f, (x, s, b), atol=1e-6)
    # unbound, with an i-variable right-hand side, as pykeops
    K = (-Vi(x).sqdist(Vj(x))).exp()
    torch.testing.assert_close(LazyTensor.solve(K, Vi(b), alpha=0.3, tol=1e-13, backend=BE),
                               K.solve(b, alpha=0.3, tol=1e-13, backend=BE))


# -- keywords, symbolic variables, surface ---------------------------------------------
def test_out_keepdim_call_false_and_accumulation():
    x = _rand(6, 3, seed=18)
    y = _rand(400, 3, seed=19)
    V = Vi(x) - Vj(y)
    Vd = x[:, None] - y[None]
    out = torch.empty(6, 3, dtype=torch.float64)
    assert V.sum(1, out=out, backend=BE) is out
    torch.testing.assert_close(out, Vd.sum(1))
    torch.testing.assert_close(V.sum(dim=1, keepdim=True, backend=BE), Vd.sum(1, keepdim=True))
    xg = x.clone().requires_grad_()
    with pytest.raises(ValueError, match="gradients"):
        (Vi(xg) - Vj(y)).sum(1, out=out, backend=BE)
    f = V.sum(1, call=False, backend=BE)
    torch.testing.assert_close(f(), Vd.sum(1))
    x32, y32 = x.float().requires_grad_(), y.float()
    K32 = (-Vi(x32).sqdist(Vj(y32))).exp()
    got = K32.sum(1, dtype_acc="float64", backend=BE)
    ref = (-Vi(x32.double()).sqdist(Vj(y32.double()))).exp().sum(1, backend=BE)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, ref.float(), rtol=0, atol=0)
    (g,) = torch.autograd.grad(got.sum(), x32)  # the backward runs in float64 too
    assert g.dtype == torch.float32
    # pykeops' backend names
    torch.testing.assert_close(V.sum(1, backend="CPU"), Vd.sum(1))


def test_symbolic_variables_with_gradients():
    x, y = _rand(5, 3, seed=21, grad=True), _rand(4, 3, seed=22, grad=True)
    b = _rand(4, 1, seed=23)
    F = (-Vi(0, 3).sqdist(Vj(1, 3))).exp() * Vj(2, 1)
    f = F.sum(axis=1, backend=BE)
    out = f(x, y, b)
    ref = torch.exp(-((x[:, None] - y[None]) ** 2).sum(-1)) @ b
    torch.testing.assert_close(out, ref)
    got = torch.autograd.grad(out.sum(), (x, y))
    want = torch.autograd.grad(ref.sum(), (x, y))
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-10, atol=1e-12)


def test_surface_methods_keep_the_graph():
    a = _rand(28, seed=24, grad=True)
    v = _rand(7, seed=25, grad=True)
    # pykeops' test_lazytensor_tensordot: a matrix-vector product of parameters
    C = LazyTensor(a[None, None, :]).keops_tensordot(LazyTensor(v[None, None, :]), (4, 7),
                                                     (7,), (1,), (0,))
    out = C.sum_reduction(dim=1, backend=BE)
    torch.testing.assert_close(out.flatten(), a.reshape(4, 7) @ v)
    got = torch.autograd.grad(out.sum(), (a, v))
    want = torch.autograd.grad((a.reshape(4, 7) @ v).sum(), (a, v))
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)
    x = _rand(5, 3, seed=26, grad=True)
    y = _rand(4, 3, seed=27)
    V = Vi(x) - Vj(y)
    m = V.min(-1).sum(1, backend=BE)  # feature-wise min, then a reduction over j
    mref = (x[:, None] - y[None]).min(-1).values.sum(1, keepdim=True)
    torch.testing.assert_close(m, mref)
    torch.testing.assert_close(torch.autograd.grad(m.sum(), x)[0],
                               torch.autograd.grad(mref.sum(), x)[0])
    r = V.reduction("Sum", axis=1, backend=BE)
    torch.testing.assert_close(r, (x[:, None] - y[None]).sum(1))
    assert r.requires_grad  # the generic reduction stays in autograd
    cat = LazyTensor.concatenate((V, V[..., 0]))
    assert isinstance(cat, LazyTensor) and cat.ndim == 4 and cat.dim() == 3
    assert isinstance(ktt.LazyTensor.exp(V).T, LazyTensor)
