"""pykeops' LazyTensor semantics that kerneltools keeps (issue 21), against dense
NumPy references: ranges that reductions honour (``K.ranges = r``,
``with_ranges``, torch's gradients), ``==`` / ``!=`` as 0/1 formulas, reduction
axes numbered after the batch axes.

Each case once gave a silently wrong result, so every reference is chosen to
differ from the wrong answer (a mask that drops real contributions, M == N).
"""

from __future__ import annotations

import numpy as np
import pytest

import kerneltools as kt
from kerneltools import ranges as kr

from _helpers import assert_close

try:  # the torch binding is an optional extra: its cases skip without PyTorch
    import torch

    import kerneltools.torch as ktt
except ImportError:
    torch = ktt = None

needs_torch = pytest.mark.skipif(
    torch is None, reason="kerneltools.torch needs PyTorch (optional extra 'torch')")

BE = "numpy"  # the semantics do not depend on the backend; this one needs no compiler


# -- block-sparsity ------------------------------------------------------------
def _clusters():
    """Points sorted by cluster (3 clusters of x, 2 of y), an asymmetric mask of
    kept cluster pairs (so that a transposed description shows) and the dense
    (N, M) 0/1 mask it stands for."""
    rng = np.random.default_rng(0)
    sizes_x, sizes_y = [4, 5, 3], [6, 4]
    x, y = rng.random((sum(sizes_x), 2)), rng.random((sum(sizes_y), 2))
    keep = np.array([[1, 0], [1, 1], [0, 1]], dtype=bool)
    lab_x, lab_y = np.repeat(np.arange(3), sizes_x), np.repeat(np.arange(2), sizes_y)
    ranges = kr.from_sorted(kr.cluster_ranges(lab_x), kr.cluster_ranges(lab_y), keep)
    mask = keep[lab_x][:, lab_y].astype(np.float64)
    return rng, x, y, ranges, mask


def _gauss(x, y):
    return np.exp(-((x[:, None, :] - y[None, :, :]) ** 2).sum(-1))


def test_ranges_attribute_is_honoured():
    rng, x, y, ranges, mask = _clusters()
    b, c = rng.random((len(y), 2)), rng.random((len(x), 1))
    K = (-kt.Vi(x).sqdist(kt.Vj(y))).exp()
    assert K.ranges is None
    K.ranges = ranges
    assert K.ranges is ranges
    Kd = _gauss(x, y) * mask
    assert not np.allclose(Kd @ b, _gauss(x, y) @ b)  # the mask drops real terms
    np.testing.assert_allclose(K @ b, Kd @ b, rtol=1e-12)
    np.testing.assert_allclose(K.matmul(b, backend=BE), Kd @ b, rtol=1e-12)
    np.testing.assert_allclose(K.sum(axis=1, backend=BE), Kd.sum(1, keepdims=True),
                               rtol=1e-12)
    np.testing.assert_allclose((K * kt.Vi(c)).sum(axis=0, backend=BE), Kd.T @ c,
                               rtol=1e-12)
    K.ranges = None  # dense again
    np.testing.assert_allclose(K @ b, _gauss(x, y) @ b, rtol=1e-12)


def test_with_ranges_survives_operations_and_every_reduction():
    rng, x, y, ranges, mask = _clusters()
    b = rng.random((len(y), 3))
    D = kt.Vi(x).sqdist(kt.Vj(y)).with_ranges(ranges)
    K = (-D).exp()  # unary operations keep the ranges
    Dd = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
    Kd = np.exp(-Dd) * mask
    np.testing.assert_allclose(K @ b, Kd @ b, rtol=1e-12)
    np.testing.assert_allclose((K * kt.Vj(b)).sum(axis=1, backend=BE), Kd @ b, rtol=1e-12)
    np.testing.assert_allclose((2 * K).sum(axis=0, backend=BE),
                               2 * Kd.sum(0)[:, None], rtol=1e-12)
    masked = np.where(mask > 0, Dd, np.inf)
    np.testing.assert_allclose(D.min(axis=1, backend=BE)[:, 0], masked.min(1), rtol=1e-12)
    np.testing.assert_array_equal(D.argmin(axis=0, backend=BE)[:, 0], masked.argmin(0))
    np.testing.assert_array_equal(D.argKmin(2, axis=1, backend=BE), np.argsort(masked, 1)[:, :2])
    lse = np.log((np.exp(-Dd) * mask).sum(1))
    np.testing.assert_allclose((-D).logsumexp(axis=1, backend=BE)[:, 0], lse, rtol=1e-12)
    # an operand without ranges joins; two different descriptions do not
    other = kr.from_sorted(np.array([[0, len(x)]]), np.array([[0, len(y)]]), [[True]])
    with pytest.raises(ValueError, match="ranges"):
        K * kt.Vi(x).sqdist(kt.Vj(y)).with_ranges(other)


def _torch_case(reduction):
    rng, x, y, ranges, mask = _clusters()
    b = rng.random((len(y), 2))
    t = {k: torch.tensor(v, requires_grad=True)
         for k, v in dict(x=x, y=y, b=b, s=np.array([0.7])).items()}
    return rng, t, ranges, torch.tensor(mask)


@needs_torch
@pytest.mark.parametrize("how", ["argument", "attribute", "with_ranges"])
def test_torch_ranges_forward_and_block_sparse_gradient(how):
    rng, t, ranges, mask = _torch_case("sum")
    D = ktt.Vi(t["x"]).sqdist(ktt.Vj(t["y"]))
    K = (-D / ktt.Pm(t["s"])).exp()
    opts = {}
    if how == "argument":
        opts = {"ranges": ranges}
    elif how == "attribute":
        K.ranges = ranges
        assert K.ranges is ranges
    else:
        K = K.with_ranges(ranges)
    out = (K * ktt.Vj(t["b"])).sum(axis=1, backend=BE, **opts)
    g = torch.tensor(rng.random(out.shape))
    grads = torch.autograd.grad((out * g).sum(), list(t.values()))
    Dd = ((t["x"][:, None, :] - t["y"][None, :, :]) ** 2).sum(-1)
    ref = (torch.exp(-Dd / t["s"]) * mask) @ t["b"]
    refs = torch.autograd.grad((ref * g).sum(), list(t.values()))
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=0)
    for name, got, want in zip(t, grads, refs):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12, msg=name)


@needs_torch
def test_torch_ranges_logsumexp_gradient_wrt_j_variable():
    """A gradient w.r.t. a j-variable is a reduction over i: the transposed half."""
    rng, t, ranges, mask = _torch_case("lse")
    D = ktt.Vi(t["x"]).sqdist(ktt.Vj(t["y"]))
    out = (-D).logsumexp(axis=1, ranges=ranges, backend=BE)
    g = torch.tensor(rng.random(out.shape))
    got = torch.autograd.grad((out * g).sum(), [t["y"], t["x"]])
    Dd = ((t["x"][:, None, :] - t["y"][None, :, :]) ** 2).sum(-1)
    ref = torch.logsumexp(torch.where(mask > 0, -Dd, -torch.inf), 1, keepdim=True)
    want = torch.autograd.grad((ref * g).sum(), [t["y"], t["x"]])
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=0)
    for a, w in zip(got, want):
        torch.testing.assert_close(a, w, rtol=1e-10, atol=1e-12)


# -- == and != -----------------------------------------------------------------
def test_eq_ne_are_formulas():
    rng = np.random.default_rng(1)
    lx, ly = rng.integers(0, 3, (8, 1)).astype(float), rng.integers(0, 3, (6, 1)).astype(float)
    x, y = rng.random((8, 2)), rng.random((6, 2))
    l_i, l_j = kt.Vi(lx), kt.Vj(ly)
    K = (-kt.Vi(x).sqdist(kt.Vj(y))).exp()
    same = (lx == ly.T).astype(float)
    Kd = _gauss(x, y)
    assert isinstance(l_i == l_j, kt.LazyTensor) and isinstance(l_i != l_j, kt.LazyTensor)
    np.testing.assert_allclose((K * (l_i == l_j)).sum(axis=1, backend=BE),
                               (Kd * same).sum(1, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose((K * (l_i != l_j)).sum(axis=1, backend=BE),
                               (Kd * (1 - same)).sum(1, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose((K * (l_j == 2.0)).sum(axis=1, backend=BE),
                               Kd @ (ly == 2), rtol=1e-12)
    np.testing.assert_allclose((K * (1 != l_i)).sum(axis=1, backend=BE),
                               (Kd * (lx != 1)).sum(1, keepdims=True), rtol=1e-12)
    # still hashable (identity), as before
    assert len({l_i, l_j, l_i}) == 2 and hash(l_i) == hash(l_i)


@needs_torch
def test_eq_ne_are_formulas_in_torch():
    rng = np.random.default_rng(1)
    lx, ly = rng.integers(0, 3, (8, 1)).astype(float), rng.integers(0, 3, (6, 1)).astype(float)
    x, y = rng.random((8, 2)), rng.random((6, 2))
    same = (lx == ly.T).astype(float)
    Kd = _gauss(x, y)
    tl_i, tl_j = ktt.Vi(torch.tensor(lx)), ktt.Vj(torch.tensor(ly))
    tK = (-ktt.Vi(torch.tensor(x)).sqdist(ktt.Vj(torch.tensor(y)))).exp()
    np.testing.assert_allclose((tK * (tl_i == tl_j)).sum(axis=1, backend=BE).numpy(),
                               (Kd * same).sum(1, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose((tK * (tl_i != 0.0)).sum(axis=1, backend=BE).numpy(),
                               (Kd * (lx != 0)).sum(1, keepdims=True), rtol=1e-12)
    assert len({tl_i, tl_j}) == 2


# -- batch axes ----------------------------------------------------------------
def test_batch_axes_numbered_after_batch_dims():
    rng = np.random.default_rng(2)
    B, N, D = 2, 5, 3  # M == N: reducing over the wrong index keeps the shape
    x, y = rng.random((B, N, D)), rng.random((B, N, D))
    K = (-kt.Vi(x).sqdist(kt.Vj(y))).exp()
    Kd = np.exp(-((x[:, :, None, :] - y[:, None, :, :]) ** 2).sum(-1))  # (B, N, M)
    over_i, over_j = Kd.sum(1)[..., None], Kd.sum(2)[..., None]
    np.testing.assert_allclose(K.sum(axis=1, backend=BE), over_i, rtol=1e-12)
    np.testing.assert_allclose(K.sum(axis=2, backend=BE), over_j, rtol=1e-12)
    np.testing.assert_allclose(K.sum(dim=2, backend=BE), over_j, rtol=1e-12)
    np.testing.assert_array_equal(K.argmax(axis=1, backend=BE)[..., 0], Kd.argmax(1))
    # the feature axis comes after (N, M): a symbolic sum, as pykeops
    V = kt.Vi(x) - kt.Vj(y)
    assert V.sum(axis=3).shape == (B, N, N) and V.sum(-1).shape == (B, N, N)
    for bad in (0, 4, -2):
        with pytest.raises(ValueError, match="batch"):
            K.sum(axis=bad, backend=BE)


@needs_torch
def test_batch_axes_numbered_after_batch_dims_in_torch():
    rng = np.random.default_rng(2)
    B, N, D = 2, 5, 3
    x, y = rng.random((B, N, D)), rng.random((B, N, D))
    Kd = np.exp(-((x[:, :, None, :] - y[:, None, :, :]) ** 2).sum(-1))  # (B, N, M)
    over_i, over_j = Kd.sum(1)[..., None], Kd.sum(2)[..., None]
    tK = (-ktt.LazyTensor(torch.tensor(x[:, :, None, :]))
          .sqdist(ktt.LazyTensor(torch.tensor(y[:, None, :, :])))).exp()
    np.testing.assert_allclose(tK.sum(axis=1, backend=BE).numpy(), over_i, rtol=1e-12)
    np.testing.assert_allclose(tK.sum(dim=2, backend=BE).numpy(), over_j, rtol=1e-12)
    with pytest.raises(ValueError, match="batch"):
        tK.sum(axis=0, backend=BE)


# -- the rest of pykeops' LazyTensor surface -------------------------------------
def test_shape_matvec_and_scipy_linear_operator():
    from scipy.sparse.linalg import aslinearoperator

    rng = np.random.default_rng(3)
    x, y, v, w = rng.random((7, 2)), rng.random((5, 2)), rng.random(5), rng.random(7)
    K = (-kt.Vi(x).sqdist(kt.Vj(y))).exp()
    assert K.shape == (7, 5)  # pykeops: a scalar formula is a matrix
    assert K.ndim == 1 and K.dim() == 3 and K.dim == 1  # ndim: D; dim(): axes
    assert (kt.Vi(x) - kt.Vj(y)).shape == (7, 5, 2) and kt.Vi(x).shape == (7, 1, 2)
    Kd = _gauss(x, y)
    np.testing.assert_allclose(K.matvec(v), Kd @ v, rtol=1e-12)
    np.testing.assert_allclose(K.rmatvec(w), Kd.T @ w, rtol=1e-12)
    A = aslinearoperator(K)
    assert A.shape == (7, 5)
    np.testing.assert_allclose(A @ v, Kd @ v, rtol=1e-12)
    np.testing.assert_allclose(A.rmatvec(w), Kd.T @ w, rtol=1e-12)


def test_reduction_aliases_k_keyword_and_unbound_calls():
    rng = np.random.default_rng(4)
    x, y = rng.random((9, 2)), rng.random((6, 2))
    D = kt.Vi(x).sqdist(kt.Vj(y))
    Dd = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
    np.testing.assert_allclose(D.sum_reduction(axis=1, backend=BE)[:, 0], Dd.sum(1))
    np.testing.assert_allclose(D.min_reduction(dim=0, backend=BE)[:, 0], Dd.min(0))
    np.testing.assert_array_equal(D.argKmin_reduction(K=2, axis=1, backend=BE),
                                  np.argsort(Dd, 1)[:, :2])
    np.testing.assert_array_equal(D.argKmin(K=3, dim=1, backend=BE), np.argsort(Dd, 1)[:, :3])
    vals, idx = D.Kmin_argKmin(dim=0, K=2, backend=BE)
    np.testing.assert_allclose(vals, np.sort(Dd, 0)[:2].T)
    aliases = {"sum_reduction", "logsumexp_reduction", "sumsoftmaxweight_reduction",
               "min_argmin_reduction", "max_argmax_reduction", "Kmin_reduction",
               "Kmin_argKmin_reduction"}
    assert aliases <= set(dir(kt.LazyTensor))
    # unbound calls on the class
    E = kt.LazyTensor.exp(-D)
    np.testing.assert_allclose(kt.LazyTensor.sum(E, axis=1, backend=BE)[:, 0],
                               np.exp(-Dd).sum(1), rtol=1e-12)


@needs_torch
def test_torch_aliases_unbound_calls_and_transpose():
    rng = np.random.default_rng(4)
    x, y = rng.random((9, 2)), rng.random((6, 2))
    assert {"sum_reduction", "Kmin_argKmin_reduction"} <= set(dir(ktt.LazyTensor))
    tx = torch.tensor(x, requires_grad=True)
    tD = ktt.LazyTensor.sqdist(ktt.Vi(tx), ktt.Vj(torch.tensor(y)))
    tE = ktt.LazyTensor.exp(-tD)
    assert isinstance(tE, ktt.LazyTensor)
    # .T stays in the torch binding, and gradients flow through it
    out = tE.T @ torch.ones(9, 1, dtype=torch.float64)
    assert isinstance(tE.T, ktt.LazyTensor) and tE.T.shape == (6, 9)
    (grad,) = torch.autograd.grad(out.sum(), [tx])
    ref = torch.exp(-((tx[:, None, :] - torch.tensor(y)[None]) ** 2).sum(-1)).sum()
    (want,) = torch.autograd.grad(ref, [tx])
    torch.testing.assert_close(grad, want, rtol=1e-10, atol=1e-12)


# -- solve: var=, batch axes, deferred calls (issue 21) --------------------------
def _spd(x, alpha):
    """The dense Gaussian kernel matrix of x (..., N, D) plus alpha I."""
    return _gauss_batched(x, x) + alpha * np.eye(x.shape[-2])


def _gauss_batched(x, y):
    return np.exp(-((x[..., :, None, :] - y[..., None, :, :]) ** 2).sum(-1))


def test_solve_var_batches_and_deferred_calls(backend, dtype):
    rng = np.random.default_rng(5)
    tol, rtol = (1e-12, 1e-9) if dtype == np.float64 else (1e-6, 1e-4)
    x, xb = rng.random((8, 3)).astype(dtype), rng.random((3, 8, 3)).astype(dtype)
    B, Bb = rng.random((8, 2)).astype(dtype), rng.random((3, 8, 2)).astype(dtype)
    A = np.array([[2.0, 0.5], [0.5, 1.0]], dtype=dtype)  # SPD: F(u) = K (A u) is SPD
    K, Kb = (-kt.Vi(x).sqdist(kt.Vj(x))).exp(), (-kt.Vi(xb).sqdist(kt.Vj(xb))).exp()
    Kd, Kbd = _spd(x.astype(np.float64), 0.5), _spd(xb.astype(np.float64), 0.5)
    opts = dict(alpha=0.5, tol=tol, backend=backend)
    u = kt.Vj(0, 2)  # the unknown, a symbolic j-variable
    cases = [
        (K.solve(B, **opts), np.linalg.solve(Kd, B)),
        # pykeops' form: the right-hand side a symbolic variable of var's index
        ((K * u).solve(kt.Vi(0, 2), var=u, **opts)(B), np.linalg.solve(Kd, B)),
        # F mixes the unknown's features: one system of N * E unknowns
        ((K * kt.Pm(A.ravel()).matvecmult(u)).solve(B, var=u, **opts),
         np.linalg.solve(np.kron(Kd - 0.5 * np.eye(8), A) + 0.5 * np.eye(16),
                         B.ravel()).reshape(8, 2)),
        (Kb.solve(Bb, **opts), np.linalg.solve(Kbd, Bb)),  # batched K and b
        ((Kb * u).solve(Bb, var=u, **opts), np.linalg.solve(Kbd, Bb)),
        (K.solve(Bb[:2, :, :1], **opts), np.linalg.solve(Kd, Bb[:2, :, :1])),  # one K
        (K.solve(B, call=False, **opts)(), np.linalg.solve(Kd, B)),
    ]
    for k, (got, ref) in enumerate(cases):
        assert got.dtype == dtype and got.shape == ref.shape, k
        assert_close(got, ref, rtol, scale=np.abs(ref).max(), err_msg=f"case {k}")


def test_solve_var_bad_input():
    x = np.random.default_rng(6).random((6, 2))
    K = (-kt.Vi(x).sqdist(kt.Vj(x))).exp()
    u = kt.Vj(0, 2)
    with pytest.raises(TypeError, match="'var' must be a symbolic variable"):
        K.solve(np.ones(6), var=kt.Vj(x))
    with pytest.raises(ValueError, match="not a variable of the formula"):
        K.solve(np.ones((6, 2)), var=u)
    with pytest.raises(ValueError, match="dimension 1 but the unknown 'var' has dimension 2"):
        (K * u).sum(-1).solve(np.ones((6, 2)), var=u)
    with pytest.raises(ValueError, match="2 column"):
        (K * u).solve(np.ones((6, 3)), var=u, backend=BE)
    with pytest.raises(ValueError, match="must be the same"):
        (K * u).solve(kt.Vi(1, 2), var=u)
    with pytest.raises(ValueError, match="batch axes"):
        (-kt.Vi(np.ones((3, 6, 2))).sqdist(kt.Vj(np.ones((3, 6, 2))))).exp().solve(
            np.ones((2, 6, 1)), backend=BE)


@needs_torch
def test_torch_solve_var_and_batches_are_differentiable(backend):
    rng = np.random.default_rng(7)
    f64 = torch.float64
    x = torch.tensor(rng.random((8, 3)), requires_grad=True)
    xb = torch.tensor(rng.random((3, 8, 3)), requires_grad=True)
    b = torch.tensor(rng.random((8, 2)), requires_grad=True)
    bb = torch.tensor(rng.random((3, 8, 2)), requires_grad=True)
    opts = dict(alpha=0.5, tol=1e-12, backend=backend)

    def dense(p):
        return torch.exp(-((p[..., :, None, :] - p[..., None, :, :]) ** 2).sum(-1))

    K = (-ktt.Vi(x).sqdist(ktt.Vj(x))).exp()
    Kb = (-ktt.Vi(xb).sqdist(ktt.Vj(xb))).exp()
    u = ktt.Vj(0, 2)
    eye = 0.5 * torch.eye(8, dtype=f64)
    # (kerneltools, dense reference, leaves); K.solve(b): test_torch_keops; var= on a
    # formula that mixes the unknown's components: the NumPy test and KernelSolve's
    cases = [
        ((K * u).solve(ktt.Vi(0, 2), var=u, **opts)(b),
         torch.linalg.solve(dense(x) + eye, b), [x, b]),
        (Kb.solve(bb, **opts), torch.linalg.solve(dense(xb) + eye, bb), [xb, bb]),
    ]
    for k, (got, ref, leaves) in enumerate(cases):
        assert isinstance(got, torch.Tensor) and got.shape == ref.shape, k
        torch.testing.assert_close(got, ref, rtol=1e-9, atol=1e-12, msg=f"case {k}")
        w = torch.tensor(rng.random(tuple(ref.shape)))
        g, want = (torch.autograd.grad((r * w).sum(), leaves) for r in (got, ref))
        for gk, wk in zip(g, want):
            torch.testing.assert_close(gk, wk, rtol=1e-8, atol=1e-10, msg=f"case {k}")


@needs_torch
def test_torch_difference_matrix_min_max_and_numpy_operands():
    rng = np.random.default_rng(8)
    x, y = torch.tensor(rng.random((6, 3)), requires_grad=True), torch.tensor(rng.random((4, 2)))
    F = ktt.Vi(x).difference_matrix(ktt.Vj(y))
    ref = (x[:, None, :, None] - y[None, :, None, :]).reshape(6, 4, 6)
    torch.testing.assert_close(F.__min__(axis=1, backend=BE), ref.min(1).values)
    torch.testing.assert_close(F.__max__(axis=0, backend=BE), ref.max(0).values)
    # a NumPy array on the left defers to the LazyTensor (pykeops' __array_ufunc__)
    G = np.array([2.0]) * F
    assert isinstance(G, ktt.LazyTensor)
    (g,) = torch.autograd.grad(G.sum(axis=1, backend=BE).sum(), [x])
    (want,) = torch.autograd.grad((2.0 * ref).sum(), [x])
    torch.testing.assert_close(g, want)


# -- pykeops' dtype rule in kerneltools.keops (issue 21) ---------------------------
def test_keops_untyped_values_take_the_formula_dtype(backend, dtype, rtol):
    """As in pykeops, Python floats, NumPy float scalars and lists have no
    dtype of their own: the result keeps the arrays' dtype."""
    from kerneltools.keops import numpy as kn

    x = np.random.default_rng(9).random((6, 2)).astype(dtype)
    K = (-kn.Vi(x).sqdist(kn.Vj(x))).exp()
    ref = 0.5 * _gauss(x.astype(np.float64), x.astype(np.float64)).sum(1, keepdims=True)
    for F in (K * np.float64(0.5), K * [0.5], K * 0.5):  # one formula: one compilation
        out = F.sum(axis=1, backend=backend)
        assert out.dtype == dtype
        assert_close(out, ref, rtol)


def test_keops_formulas_refuse_two_dtypes_as_pykeops():
    """pykeops raises on LazyTensors of two dtypes, and its Genred reads mixed
    arguments as the first one's dtype (NaN or wrong numbers, no error): the
    drop-in raises in both; kerneltools.LazyTensor keeps NumPy's promotion."""
    from kerneltools.keops import numpy as kn

    rng = np.random.default_rng(10)
    x64, b64 = rng.random((6, 3)), rng.random((6, 1))
    x32 = x64.astype(np.float32)
    K = (-kn.Vi(x32).sqdist(kn.Vj(x32))).exp()
    f = kn.Genred("Exp(-SqDist(x, y)) * b", ["x = Vi(3)", "y = Vj(3)", "b = Vj(1)"], axis=1)
    _refuses_two_dtypes(
        [lambda: kn.Vi(x32) - kn.Vj(x64), lambda: kn.Pm(np.array([2.0])) * K,
         lambda: K.T * kt.Vj(b64), lambda: K @ b64,
         # a symbolic variable's data, given at call time
         lambda: (K * kn.Vj(0, 1)).sum(axis=1, backend=BE)(b64)],
        lambda: K.solve(b64, backend=BE), lambda: f(x32, x32, b64, backend=BE),
        r"argument 0 \(x\) is float32 but argument 2 \(b\) is float64")
    assert (kt.Vi(x32) - kt.Vj(x64)).dtype == np.float64  # the core promotes


def _refuses_two_dtypes(builds, solve, genred, genred_match):
    for build in builds:
        with pytest.raises(ValueError, match="dtypes float32, float64"):
            build()
    with pytest.raises(ValueError, match="'b' is float64 but the formula's data are float32"):
        solve()
    with pytest.raises(ValueError, match=genred_match):
        genred()


@needs_torch
def test_torch_keops_formulas_refuse_two_dtypes_as_pykeops():
    from kerneltools.keops import torch as ktk

    x = torch.rand(6, 3)
    K = (-ktk.Vi(x).sqdist(ktk.Vj(x))).exp()
    b64 = torch.rand(6, 1, dtype=torch.float64)
    f = ktk.Genred("SqDist(x, y) * b", ["x = Vi(3)", "y = Vj(3)", "b = Vj(1)"], axis=1)
    _refuses_two_dtypes(
        [lambda: K @ b64, lambda: K * ktk.Pm(torch.tensor([2.0], dtype=torch.float64)),
         lambda: K.T.sqdist(ktt.Vj(b64))],
        lambda: K.solve(b64, backend=BE), lambda: f(x, x, b64, backend=BE),
        r"argument 2 \(b\) is torch.float64")
    assert (K * 2.0).sum(axis=1, backend=BE).dtype == torch.float32
