"""pykeops' LazyTensor surface in the NumPy binding (issue 21), against dense
NumPy references: shapes, indexing, feature-wise reductions, tensor dot and
Kronecker products, differential operators, the generic ``reduction``,
pykeops' reduction keywords and symbolic variables with deferred calls.
The torch binding's side is in ``test_torch_keops.py``."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import kerneltools as kt
from kerneltools.lazy import LazyTensor, Pm, Vi, Vj

from _helpers import assert_close, fd_gradient

BE = "numpy"  # for the cases whose semantics do not depend on the backend


def _xy(dtype=np.float64, n=7, m=5, d=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((n, d)).astype(dtype), rng.random((m, d)).astype(dtype)


def _dense_diff(x, y):
    return x[:, None, :] - y[None, :, :]  # (N, M, D)


# -- shapes ---------------------------------------------------------------------
def test_shapes_as_pykeops():
    x, y = _xy()
    V = Vi(x) - Vj(y)
    K = V.sqnorm2()
    assert V.shape == (7, 5, 3) and K.shape == (7, 5) and Vi(x).shape == (7, 1, 3)
    assert V.ndim == 3 and K.ndim == 1  # pykeops: ndim is the values' dimension
    assert V.dim() == 3 and K.dim() == 3  # pykeops/torch: the number of axes
    assert V.dim == 3 and K.dim == 1 and V.dim + 1 == 4  # kerneltools' int
    assert V._shape == (7, 5, 3) and K._shape == (7, 5, 1)
    assert V.nbatchdims == 0 and V.batchdims is None
    Vb = Vi(np.ones((2, 7, 3))) - Vj(y)
    assert Vb.nbatchdims == 1 and Vb.batchdims == (2,) and Vb.dim() == 4
    assert Vb.shape == (2, 7, 5, 3)


# -- indexing -------------------------------------------------------------------
def test_tuple_indexing_takes_the_feature_axis():
    x, y = _xy()
    V = Vi(x) - Vj(y)
    Vd = _dense_diff(x, y)
    for key, ref in [((slice(None), slice(None), 1), Vd[..., 1:2]),
                     ((Ellipsis, 2), Vd[..., 2:3]), ((Ellipsis, slice(0, 2)), Vd[..., 0:2]),
                     ((slice(None), slice(None), slice(1, None)), Vd[..., 1:]), (-1, Vd[..., 2:])]:
        np.testing.assert_allclose(V[key].sum(axis=1, backend=BE), ref.sum(1), rtol=1e-12)
    with pytest.raises(ValueError, match="feature"):
        V[0, :, 1]
    with pytest.raises(ValueError, match="outside a vector"):
        V[3]


# -- feature-wise reductions ------------------------------------------------------
def test_feature_min_max_argmin_argmax(backend, dtype, rtol):
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((6, 4)).astype(dtype), rng.standard_normal((5, 4)).astype(dtype)
    y[0] = y[1]  # exact ties on some pairs (x_i - y_0 = x_i - y_1): first index wins
    V = Vi(x) - Vj(y)
    Vd = _dense_diff(x.astype(np.float64), y.astype(np.float64))
    w = rng.random((5, 1)).astype(dtype)
    cases = [("min", Vd.min(-1)), ("max", Vd.max(-1)),
             ("argmin", Vd.argmin(-1).astype(float)), ("argmax", Vd.argmax(-1).astype(float))]
    # The four in one formula (one kernel per sum below), each checked on its column.
    by_default, by_axis = [], []
    for name, _ in cases:
        F = getattr(V, name)()  # pykeops' default axis=-1: over the features
        assert F.shape == (6, 5)
        by_default.append(F)
        by_axis.append(getattr(V, name)(axis=-1))
    plain = functools.reduce(lambda a, b: a.concat(b), by_axis).sum(axis=1, backend=backend)
    weighted = (functools.reduce(lambda a, b: a.concat(b), by_default) * Vj(w)).sum(
        axis=1, backend=backend)
    for k, (name, ref) in enumerate(cases):
        assert_close(plain[:, k : k + 1], ref.sum(1, keepdims=True), rtol,
                     scale=np.abs(ref).sum(1, keepdims=True), err_msg=name)
        assert_close(weighted[:, k : k + 1], ref @ w, rtol, scale=np.abs(ref) @ w,
                     err_msg=name)
    # axis=0/1 are still reductions over i/j
    assert_close(V.min(axis=1, backend=backend), Vd.min(1), rtol, scale=np.abs(Vd).max(1))


def test_feature_min_gradient_matches_finite_differences():
    x, y = _xy(n=4, m=3)
    g = np.random.default_rng(2).random((4, 1))

    def phi(xx):
        return ((Vi(xx) - Vj(y)) ** 2).min(-1).sum(axis=1, backend=BE)

    xv = Vi(x)
    got = ((xv - Vj(y)) ** 2).min(-1).vjp(xv, g, axis=1, backend=BE)
    ref = fd_gradient(lambda p, m: float((g * (phi(p) - phi(m))).sum()), x)
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-9)


# -- vector operations ------------------------------------------------------------
def test_norm_sinxdivx_concatenate():
    x, y = _xy()
    V = Vi(x) - Vj(y)
    Vd = _dense_diff(x, y)
    np.testing.assert_allclose(V.norm(-1).sum(axis=1, backend=BE),
                               np.linalg.norm(Vd, axis=-1).sum(1, keepdims=True), rtol=1e-12)
    with pytest.raises(ValueError, match="feature axis"):
        V.norm(0)
    np.testing.assert_allclose(V.sinxdivx().sum(axis=1, backend=BE),
                               (np.sin(Vd) / Vd).sum(1), rtol=1e-12)
    C = LazyTensor.concatenate((V, V.exp(), Vi(x)))
    np.testing.assert_allclose(C.sum(axis=1, backend=BE),
                               np.concatenate([Vd, np.exp(Vd), np.broadcast_to(
                                   x[:, None], Vd.shape)], -1).sum(1), rtol=1e-12)
    np.testing.assert_allclose(LazyTensor.cat((V, V), dim=-1).sum(axis=0, backend=BE),
                               np.concatenate([Vd, Vd], -1).sum(0), rtol=1e-12)


def test_difference_matrix_and_pykeops_min_max_spellings(backend, dtype, rtol):
    x, y = _xy(dtype, d=3)
    y2 = y[:, :2]
    F = Vi(x).difference_matrix(Vj(y2))  # (N, M, 3 * 2): x_k - y_l, row-major
    ref = (x[:, None, :, None] - y2[None, :, None, :]).reshape(7, 5, 6)
    assert F.shape == (7, 5, 6)
    got = F.sum(axis=1, backend=backend)
    assert got.dtype == dtype
    assert_close(got, ref.sum(1), rtol, scale=np.abs(ref).sum(1))
    # pykeops' spellings of min and max (aliases: the semantics do not depend on it)
    np.testing.assert_allclose(F.__max__(axis=0, backend=BE), ref.max(0), rtol=rtol)
    np.testing.assert_allclose(F.__min__(axis=1, backend=BE), ref.min(1), rtol=rtol)


@pytest.mark.parametrize("dims_a, dims_b, cont_a, cont_b, perm", [
    ((4, 7), (7,), (1,), (0,), None),          # matrix-vector product (pykeops' test)
    ((2, 3, 2), (3, 2, 2), (1, 2), (0, 1), None),  # two contracted axes
    ((2, 3), (3, 2), (), (), (0, 2, 1, 3)),    # no contraction, permuted output
    ((2, 3), (2, 3), (0,), (0,), (1, 0)),      # contraction on the first axes, transposed
    ((2, 3), (4,), (), (), (2, 0, 1)),         # a permutation that is not its inverse
    ((2, 3, 2, 2, 4), (2, 4, 2, 3, 2, 3), (4, 0, 2), (1, 4, 2), (4, 3, 2, 0, 1)),  # pykeops'
])
def test_keops_tensordot(backend, dims_a, dims_b, cont_a, cont_b, perm):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((5, int(np.prod(dims_a))))
    b = rng.standard_normal((4, int(np.prod(dims_b))))
    if a.shape[1] > 50:  # the large case on one backend (its kernel is large)
        backend = BE
    T = Vi(a).keops_tensordot(Vj(b), dims_a, dims_b, cont_a, cont_b,
                              *([perm] if perm is not None else []))
    ref = np.stack([np.stack([
        np.tensordot(a[i].reshape(dims_a), b[j].reshape(dims_b), (cont_a, cont_b))
        for j in range(4)]) for i in range(5)])  # (5, 4, free axes...)
    if perm is not None:  # pykeops: output axis k moves to position perm[k]
        ref = ref.transpose((0, 1) + tuple(2 + p for p in np.argsort(perm)))
    ref = ref.reshape(5, 4, -1)
    np.testing.assert_allclose(T.sum(axis=1, backend=backend), ref.sum(1), rtol=1e-10)
    with pytest.raises(ValueError, match="shape"):
        Vi(a).keops_tensordot(Vj(b), (3, 3), dims_b, cont_a, cont_b)


def test_keops_kron(backend):
    rng = np.random.default_rng(4)
    dims_a, dims_b = (3, 2, 1, 2), (1, 2, 2, 3)  # pykeops' test_kron shapes
    x = rng.random((6, 12))
    y = rng.random((5, 12))
    ref = np.stack([np.stack([np.kron(x[i].reshape(dims_a), y[j].reshape(dims_b)).ravel()
                              for j in range(5)]) for i in range(6)])
    Kr = LazyTensor(x[:, None, :]).keops_kron(LazyTensor(y[None, :, :]), dims_a, dims_b)
    np.testing.assert_allclose(Kr.sum(axis=1, backend=backend), ref.sum(1), rtol=1e-10)
    with pytest.raises(ValueError, match="as many axes"):
        Vi(x).keops_kron(Vj(y), (3, 4), (12,))


@pytest.mark.parametrize("order", [0, 1, 3])
def test_bspline_against_scipy(backend, order):
    from scipy.interpolate import BSpline

    knots = np.array([0.0, 0.1, 0.1, 0.35, 0.5, 0.72, 0.8, 1.0])  # a repeated knot
    x = np.random.default_rng(12).random((9, 1)) * 1.1 - 0.05  # some outside [0, 1]
    w = np.random.default_rng(13).random((3, 1))
    n = len(knots) - order - 1
    ref = np.stack([np.nan_to_num(BSpline.basis_element(knots[i:i + order + 2],
                                                        extrapolate=False)(x[:, 0]))
                    for i in range(n)], -1)  # (9, n)
    F = Pm(knots).bspline(Vi(x), order) * Vj(w)
    assert F.dim == n
    np.testing.assert_allclose(F.sum(axis=1, backend=backend), ref * w.sum(), rtol=1e-10,
                               atol=1e-14)


def _softdtw_reference(a, b, gamma):
    """Soft-DTW by its dynamic program (Cuturi and Blondel 2017), in NumPy."""
    n, m = len(a), len(b)
    R = np.full((n + 1, m + 1), np.inf)
    R[0, 0] = 0.0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            prev = np.array([R[i - 1, j - 1], R[i - 1, j], R[i, j - 1]])
            lo = prev.min()
            soft = lo - gamma * np.log(np.exp(-(prev - lo) / gamma).sum())
            R[i, j] = (a[i - 1] - b[j - 1]) ** 2 + soft
    return R[n, m]


def test_softdtw_sqdist(backend):
    rng = np.random.default_rng(14)
    x, y = rng.random((4, 5)), rng.random((3, 3))
    gamma = 0.3
    ref = np.array([[_softdtw_reference(a, b, gamma) for b in y] for a in x])
    F = Vi(x).softdtw_sqdist(Vj(y), Pm(np.array([gamma])))
    assert F.shape == (4, 3)
    np.testing.assert_allclose(F.sum(axis=1, backend=backend)[:, 0], ref.sum(1), rtol=1e-10)
    np.testing.assert_allclose(Vi(x).softdtw_sqdist(Vj(y), gamma).min(axis=0, backend=backend)
                               [:, 0], ref.min(0), rtol=1e-10)


# -- differential operators ----------------------------------------------------------
def test_grad_matrix_divergence_laplacian_trace_diff():
    """On a Gaussian kernel k = exp(-|x - y|^2 / 2) and its gradient field,
    whose derivatives are known in closed form."""
    x, y = _xy(n=4, m=3, d=2)
    e = np.random.default_rng(5).standard_normal((4, 2))
    xi, yj = Vi(x), Vj(y)
    k = (-(xi - yj).sqnorm2() / 2).exp()
    Vd = _dense_diff(x, y)  # (N, M, D)
    kd = np.exp(-(Vd ** 2).sum(-1) / 2)[..., None]
    D = 2
    # grad_x k = -k (x - y); its Jacobian: k ((x-y)(x-y)^T - I)
    G = k.grad(xi, 1)
    jac = kd[..., None] * (Vd[..., :, None] * Vd[..., None, :] - np.eye(D))
    np.testing.assert_allclose(G.grad_matrix(xi).sum(axis=1, backend=BE),
                               jac.reshape(4, 3, D * D).sum(1), rtol=1e-10)
    lap = kd[..., 0] * ((Vd ** 2).sum(-1) - D)
    np.testing.assert_allclose(G.divergence(xi).sum(axis=1, backend=BE),
                               lap.sum(1, keepdims=True), rtol=1e-10)
    np.testing.assert_allclose(k.laplacian(xi).sum(axis=1, backend=BE),
                               lap.sum(1, keepdims=True), rtol=1e-10)
    # forward mode: d(grad_x k) . e = jac e
    ei = Vi(e)
    np.testing.assert_allclose(G.diff(xi, ei).sum(axis=1, backend=BE),
                               np.einsum("nmab,nb->nma", jac, e).sum(1), rtol=1e-10)
    # trace of the linear map v -> A v, A a parameter matrix: trace(A)
    A = np.random.default_rng(6).random(D * D)
    v = Vi(e)
    np.testing.assert_allclose(Pm(A).matvecmult(v).trace_operator(v).sum(axis=1, backend=BE)
                               [:, 0], np.full(4, np.trace(A.reshape(D, D))), rtol=1e-12)


# -- the generic reduction and the aliases ---------------------------------------------
def test_generic_reduction_and_other_keyword():
    x, y = _xy()
    D = Vi(x).sqdist(Vj(y))
    Dd = ((x[:, None] - y[None]) ** 2).sum(-1)
    w = np.random.default_rng(7).random((5, 2))
    np.testing.assert_allclose(D.reduction("Sum", axis=1, backend=BE)[:, 0], Dd.sum(1),
                               rtol=1e-12)
    np.testing.assert_array_equal(D.reduction("ArgKMin", opt_arg=2, dim=1, backend=BE),
                                  np.argsort(Dd, 1)[:, :2])
    ref = np.log((np.exp(-Dd)[..., None] * w[None]).sum(1))
    np.testing.assert_allclose((-D).reduction("LogSumExp", other=Vj(w), axis=1,
                                              backend=BE), ref, rtol=1e-12)
    np.testing.assert_allclose((-D).logsumexp(axis=1, other=Vj(w), backend=BE), ref,
                               rtol=1e-12)
    f = D.reduction("Min", axis=0, call=False)
    np.testing.assert_allclose(f(backend=BE)[:, 0], Dd.min(0), rtol=1e-12)
    with pytest.raises(ValueError, match="weight"):
        D.reduction("Sum", other=Vj(w), axis=1)


def test_unbound_solve_and_linear_operator():
    x, _ = _xy(n=8)
    K = (-Vi(x).sqdist(Vj(x))).exp()
    b = np.random.default_rng(8).random(8)
    Kd = np.exp(-((x[:, None] - x[None]) ** 2).sum(-1))
    a = LazyTensor.solve(K, Vi(b[:, None]), alpha=0.5, tol=1e-12, backend=BE)
    np.testing.assert_allclose(a, np.linalg.solve(Kd + 0.5 * np.eye(8), b[:, None]),
                               rtol=1e-8)
    # pykeops' keywords: deferred, options to each product
    f = K.solve(b, alpha=0.5, tol=1e-12, backend=BE, call=False, sum_scheme="block_sum")
    np.testing.assert_allclose(f(), a[:, 0], rtol=1e-12)
    # var=: the unknown as a symbolic variable (more in test_pykeops_semantics)
    u = Vj(0, 1)
    np.testing.assert_allclose((K * u).solve(b[:, None], var=u, alpha=0.5, tol=1e-12,
                                             backend=BE), a, rtol=1e-10)


# -- reduction keywords ------------------------------------------------------------------
def test_backend_names_of_pykeops_and_no_effect_flags():
    x, y = _xy()
    K = (-Vi(x).sqdist(Vj(y))).exp()
    ref = K.sum(axis=1, backend="numpy")
    np.testing.assert_array_equal(K.sum(axis=1, backend="auto"), K.sum(axis=1))
    for name in ("CPU", "cpu"):
        np.testing.assert_allclose(K.sum(axis=1, backend=name), ref, rtol=1e-12)
    same = K.sum(axis=1, backend=BE, enable_chunks=False, use_fast_math=True,
                 sum_scheme="block_sum", device_id=-1, dtype_acc="auto")
    np.testing.assert_array_equal(same, ref)
    np.testing.assert_array_equal(K.__matmul__(np.ones(5), sum_scheme="direct_sum"),
                                  K @ np.ones(5))
    for bad, err in [({"sum_scheme": "pairwise"}, ValueError),
                     ({"enable_chunks": "yes"}, TypeError),
                     ({"optional_flags": ["-O0"]}, ValueError),
                     ({"device_id": 0.5}, TypeError),
                     ({"backend": "TPU"}, ValueError)]:
        with pytest.raises(err):
            K.sum(axis=1, **bad)


def test_backend_attribute_carries_over(monkeypatch):
    x, y = _xy()
    K = (-Vi(x).sqdist(Vj(y))).exp()
    assert K.backend is None
    K.backend = "CPU"  # pykeops' attribute and spelling
    assert (2 * K).backend == "CPU" and (K * Vj(y[:, :1])).backend == "CPU"
    seen = []
    import kerneltools.lazy._reducing as red

    real = red.reduce
    monkeypatch.setattr(red, "reduce", lambda *a, **k: seen.append(k["backend"]) or real(*a, **k))
    np.testing.assert_allclose((2 * K).sum(axis=1), 2 * K.sum(axis=1, backend=BE), rtol=1e-12)
    assert seen[0] == "CPU"
    with pytest.raises(ValueError, match="backend"):
        K.backend = "TPU"
    K.backend = None
    assert K.backend is None


@pytest.mark.parametrize("how", [{"dtype_acc": "float64"}, {"use_double_acc": True},
                                 {"sum_scheme": "kahan_scheme"}])
def test_double_accumulation_really_computes_in_float64(backend, how):
    """float32 data, float64 accumulation: exactly the float64 computation on
    the same (float32) inputs, rounded once to float32."""
    rng = np.random.default_rng(9)
    x = rng.random((40, 3)).astype(np.float32)
    y = rng.random((3000, 3)).astype(np.float32)
    b = rng.random((3000, 2)).astype(np.float32)
    K = (-Vi(x).sqdist(Vj(y))).exp() * Vj(b)
    got = K.sum(axis=1, backend=backend, **how)
    ref = (-Vi(x.astype(np.float64)).sqdist(Vj(y.astype(np.float64)))).exp() * Vj(
        b.astype(np.float64))
    ref = ref.sum(axis=1, backend=backend)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, ref.astype(np.float32))
    assert not np.array_equal(K.sum(axis=1, backend=backend), got)  # it changed something
    # an int output stays int
    idx = Vi(x).sqdist(Vj(y)).argmin(axis=1, backend=backend, **how)
    assert idx.dtype.kind == "i"


def test_accumulation_requests_that_are_refused():
    x, y = _xy()
    K = Vi(x).sqdist(Vj(y))
    with pytest.raises(ValueError, match="float32"):
        K.sum(axis=1, dtype_acc="float32")  # float64 data
    with pytest.raises(ValueError, match="float16"):
        K.sum(axis=1, dtype_acc="float16")
    with pytest.raises(ValueError, match="kahan"):
        K.sum(axis=1, sum_scheme="kahan_scheme")  # float64: no compensated sum
    with pytest.raises(ValueError, match="disagree"):
        Vi(x.astype(np.float32)).sqdist(Vj(y)).sum(axis=1, dtype_acc="float32",
                                                  use_double_acc=True)


def test_out_keepdim_and_call_false():
    x, y = _xy()
    V = Vi(x) - Vj(y)
    Vd = _dense_diff(x, y)
    out = np.empty((7, 3))
    r = V.sum(axis=1, out=out, backend=BE)
    assert r is out
    np.testing.assert_allclose(out, Vd.sum(1), rtol=1e-12)
    with pytest.raises(ValueError, match="shape"):
        V.sum(axis=1, out=np.empty((5, 3)), backend=BE)
    with pytest.raises(TypeError, match="dtype"):
        V.sum(axis=1, out=np.empty((7, 3), np.float32), backend=BE)
    np.testing.assert_allclose(V.sum(axis=1, keepdim=True, backend=BE),
                               Vd.sum(1, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(V.max(axis=0, keepdim=True, backend=BE),
                               Vd.max(0, keepdims=True), rtol=1e-12)
    S = V.sqnorm2()  # shape (N, M): keepdim gives the dense (N, 1) / (1, M)
    np.testing.assert_allclose(S.sum(axis=0, keepdim=True, backend=BE),
                               (Vd ** 2).sum(-1).sum(0, keepdims=True), rtol=1e-12)
    with pytest.raises(ValueError, match="K-reduction"):
        S.argKmin(2, axis=1, keepdim=True)
    f = V.sum(axis=1, call=False, backend=BE)
    assert callable(f) and "Sum" in repr(f)
    np.testing.assert_allclose(f(), Vd.sum(1), rtol=1e-12)
    with pytest.raises(TypeError, match="positional"):
        f(x)


# -- symbolic variables ----------------------------------------------------------------
def test_symbolic_variables_and_deferred_calls(backend):
    x, y = _xy()
    b = np.random.default_rng(10).random((5, 2))
    s = np.array([0.7])
    xi, yj, bj, p = Vi(0, 3), Vj(1, 3), Vj(2, 2), Pm(3, 1)
    assert xi.shape == (1, 1, 3) and LazyTensor((0, 3, 0)).symbolic_variables == ((0, 3, 0),)
    F = (-p * xi.sqdist(yj)).exp() * bj
    assert F.symbolic_variables == ((0, 3, 0), (1, 3, 1), (2, 2, 1), (3, 1, 2))
    f = F.sum(axis=1, backend=backend)  # symbolic: a callable, as pykeops
    Kd = np.exp(-s * ((x[:, None] - y[None]) ** 2).sum(-1))
    np.testing.assert_allclose(f(x, y, b, s), Kd @ b, rtol=1e-10)
    # new data, new sizes: the same callable
    x2 = np.random.default_rng(11).random((9, 3))
    np.testing.assert_allclose(f(x2, y, b, s),
                               np.exp(-s * ((x2[:, None] - y[None]) ** 2).sum(-1)) @ b,
                               rtol=1e-10)
    # LazyTensor((ind, dim, cat)) and concrete data mixed
    g = (LazyTensor((0, 3, 0)) - Vj(y)).sqnorm2().argmin(axis=1, call=False, backend=backend)
    np.testing.assert_array_equal(g(x)[:, 0], ((x[:, None] - y[None]) ** 2).sum(-1).argmin(1))
    # a symbolic weight
    h = (-xi.sqdist(Vj(y))).sumsoftmaxweight(Vj(1, 2), axis=1, backend=backend)
    wts = np.exp(-((x[:, None] - y[None]) ** 2).sum(-1))
    np.testing.assert_allclose(h(x, b), (wts @ b) / wts.sum(1, keepdims=True), rtol=1e-10)


def test_symbolic_variables_bad_calls():
    F = Vi(0, 3).sqdist(Vj(1, 3))
    f = F.sum(axis=1)
    x, y = _xy()
    with pytest.raises(TypeError, match="2"):
        f(x)
    with pytest.raises(ValueError, match="shape"):
        f(x, y[:, :2])
    with pytest.raises(ValueError, match="used twice"):
        Vi(0, 3) + Vj(0, 3)
    with pytest.raises(ValueError, match="cat"):
        LazyTensor((0, 3, 5))
    with pytest.raises(ValueError, match="symbolic"):
        F.to_dense()
    assert isinstance(kt.Vi(0, 2), LazyTensor)
