"""kerneltools.jax: every reduction against the NumPy reference backend and
dense jax.numpy, eager and under jit, float32 and float64; the XLA custom
call in the lowered program; gradients against jax.grad of the dense
formula and finite differences (check_grads, second order); vmap, nested
and composed with jit and grad."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="kerneltools.jax needs JAX (optional extra)")

import jax.numpy as jnp
from jax.test_util import check_grads

import kerneltools as kt
from kerneltools.jax import LazyTensor, Pm, Vi, Vj

DTYPES = [np.float32, np.float64]
RTOL = {np.float32: 2e-5, np.float64: 1e-12}


@pytest.fixture(autouse=True)
def x64():
    """float64 arrays need ``jax_enable_x64`` (float32 ones stay float32)."""
    with jax.enable_x64(True):
        yield


def _data(dtype, n=37, m=29, d=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d)).astype(dtype)
    y = rng.standard_normal((m, d)).astype(dtype)
    b = rng.standard_normal((m, 2)).astype(dtype)
    return x, y, b


def _dense_sqdist(x, y):
    return ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)


# -- every reduction against the NumPy reference backend -----------------------
REDUCTIONS = [
    ("sum", {}), ("min", {}), ("max", {}), ("argmin", {}), ("argmax", {}),
    ("min_argmin", {}), ("max_argmax", {}), ("logsumexp", {}), ("Kmin", {"K": 3}),
    ("argKmin", {"K": 3}), ("Kmin_argKmin", {"K": 3}), ("sumsquares", {}),
]


def _formula(mod, x, y, b):
    """A formula of dimension 2: the same on both front ends."""
    D = mod.Vi(x).sqdist(mod.Vj(y))
    return (-D * mod.Pm(0.7)).exp() * mod.Vj(b) + mod.Vi(x)[0]


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("method,kwargs", REDUCTIONS, ids=[r[0] for r in REDUCTIONS])
def test_reductions_equal_numpy_reference(method, kwargs, axis, dtype):
    x, y, b = _data(dtype)
    ref = getattr(_formula(kt, x, y, b), method)(axis=axis, backend="numpy", **kwargs)
    eager = getattr(_formula(kt.jax, jnp.asarray(x), jnp.asarray(y), jnp.asarray(b)),
                    method)(axis=axis, **kwargs)

    @jax.jit
    def jitted(x, y, b):
        return getattr(_formula(kt.jax, x, y, b), method)(axis=axis, **kwargs)

    under_jit = jitted(x, y, b)
    refs = ref if isinstance(ref, tuple) else (ref,)
    for got in (eager, under_jit):
        got = got if isinstance(got, tuple) else (got,)
        assert len(got) == len(refs)
        for g, r in zip(got, refs):
            assert g.shape == r.shape
            if r.dtype.kind == "i":
                assert g.dtype == np.int64
                np.testing.assert_array_equal(np.asarray(g), r)
            else:
                assert g.dtype == dtype
                np.testing.assert_allclose(np.asarray(g), r, rtol=RTOL[dtype],
                                           atol=RTOL[dtype])
    for g, e in zip(under_jit if isinstance(under_jit, tuple) else (under_jit,),
                    eager if isinstance(eager, tuple) else (eager,)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(e))  # same kernel


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
def test_gaussian_matmul_equals_dense_jax(dtype):
    x, y, b = _data(dtype, n=300, m=200)
    K = (-Vi(jnp.asarray(x)).sqdist(Vj(jnp.asarray(y))) / 2).exp()
    dense = jnp.exp(-_dense_sqdist(jnp.asarray(x), jnp.asarray(y)) / 2) @ jnp.asarray(b)
    np.testing.assert_allclose(np.asarray(K @ jnp.asarray(b)), np.asarray(dense),
                               rtol=RTOL[dtype] * 10, atol=RTOL[dtype] * 10)


def test_weighted_reductions_equal_numpy_reference():
    x, y, b = _data(np.float64)
    D = kt.Vi(x).sqdist(kt.Vj(y))
    Dj = Vi(jnp.asarray(x)).sqdist(Vj(jnp.asarray(y)))
    for method in ("logsumexp", "sumsoftmaxweight"):
        ref = getattr(-D, method)(weight=kt.Vj(b), axis=1, backend="numpy")
        got = getattr(-Dj, method)(weight=Vj(jnp.asarray(b)), axis=1)
        np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-12)


def test_lowers_to_the_custom_call():
    """On the CPU the reduction is an XLA custom call, not a host callback."""
    x, y, b = _data(np.float32)
    f = jax.jit(lambda x, y, b: (-Vi(x).sqdist(Vj(y))).exp() @ b)
    text = f.lower(x, y, b).as_text()
    assert "kerneltools_reduce" in text
    assert "callback" not in text


def test_without_x64_indices_are_int32():
    x, y, _ = _data(np.float32)
    with jax.enable_x64(False):
        got = Vi(jnp.asarray(x)).sqdist(Vj(jnp.asarray(y))).argKmin(4, axis=1)
        assert got.dtype == np.int32
    ref = np.argsort(_dense_sqdist(x.astype(float), y.astype(float)), axis=1)[:, :4]
    np.testing.assert_array_equal(np.asarray(got), ref)


def test_numpy_backend_and_ranges_run_through_a_callback():
    x, y, b = _data(np.float64)
    ref = (-kt.Vi(x).sqdist(kt.Vj(y))).exp() @ b
    K = (-Vi(jnp.asarray(x)).sqdist(Vj(jnp.asarray(y)))).exp()
    got = K.matmul(jnp.asarray(b), backend="numpy")
    np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-12)
    # block-diagonal ranges: two blocks of i against two blocks of j
    r_i = np.array([[0, 20], [20, 37]])
    r_j = np.array([[0, 10], [10, 29]])
    sl = np.array([1, 2])
    ranges = (r_i, sl, r_j, r_j, sl, r_i)
    dense = np.exp(-_dense_sqdist(x, y))
    mask = np.zeros_like(dense)
    mask[:20, :10] = mask[20:, 10:] = 1
    got = K.sum(axis=1, ranges=ranges)
    np.testing.assert_allclose(np.asarray(got)[:, 0], (dense * mask).sum(1), rtol=1e-12)


# -- gradients ---------------------------------------------------------------
def _gauss(x, y, b, s):
    K = (-Vi(x).sqdist(Vj(y)) / Pm(s) ** 2).exp()
    return K @ b


def _gauss_dense(x, y, b, s):
    return jnp.exp(-_dense_sqdist(x, y) / s[0] ** 2) @ b


def _grad_inputs(n=11, m=7):
    x, y, b = _data(np.float64, n=n, m=m)
    return jnp.asarray(x), jnp.asarray(y), jnp.asarray(b), jnp.array([0.9])


@pytest.mark.parametrize("argnum", [0, 1, 2, 3], ids=["x", "y", "b", "sigma"])
def test_gradients_equal_dense_jax_first_and_second_order(argnum):
    args = _grad_inputs()

    def loss(f):
        return lambda *a: jnp.sum(jnp.sin(f(*a)))

    def second(f):  # d/dz |d loss / dz|^2
        g = jax.grad(loss(f), argnums=argnum)
        return jax.grad(lambda *a: jnp.sum(g(*a) ** 2), argnums=argnum)

    g1 = jax.grad(loss(_gauss), argnums=argnum)(*args)
    d1 = jax.grad(loss(_gauss_dense), argnums=argnum)(*args)
    np.testing.assert_allclose(g1, d1, rtol=1e-10, atol=1e-12)
    g2 = second(_gauss)(*args)
    d2 = second(_gauss_dense)(*args)
    np.testing.assert_allclose(g2, d2, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("method", ["sum", "logsumexp", "min", "Kmin", "max"])
def test_check_grads_second_order(method):
    x, y, _b, s = _grad_inputs()

    def f(x, y, s):
        F = (-Vi(x).sqdist(Vj(y)) * Pm(s))
        return getattr(F, method)(axis=1, **({"K": 2} if method == "Kmin" else {}))

    check_grads(f, (x, y, s), order=2, modes=["rev"], atol=1e-5, rtol=1e-5)


def test_weighted_logsumexp_gradient_equals_dense():
    x, y, b, _ = _grad_inputs()
    b = jnp.abs(b) + 0.1  # (a log of positive sums)

    def ours(x, y, b):
        return jnp.sum(jnp.cos((-Vi(x).sqdist(Vj(y))).logsumexp(weight=Vj(b), axis=1)))

    def dense(x, y, b):
        return jnp.sum(jnp.cos(jax.scipy.special.logsumexp(
            -_dense_sqdist(x, y)[:, :, None], axis=1, b=b[None, :, :])))

    for k in range(3):
        np.testing.assert_allclose(jax.grad(ours, argnums=k)(x, y, b),
                                   jax.grad(dense, argnums=k)(x, y, b), rtol=1e-10)


def test_gradient_over_i_and_argmin_has_none():
    x, y, _b, _s = _grad_inputs()
    g = jax.grad(lambda y: jnp.sum((-Vi(x).sqdist(Vj(y))).exp().sum(axis=0) ** 2))(y)
    d = jax.grad(lambda y: jnp.sum(jnp.exp(-_dense_sqdist(x, y)).sum(0) ** 2))(y)
    np.testing.assert_allclose(g, d, rtol=1e-10)
    z = jax.grad(lambda x: jnp.sum(Vi(x).sqdist(Vj(y)).argmin(axis=1) * 1.0))(x)
    np.testing.assert_array_equal(z, np.zeros_like(x))


# -- vmap, and its compositions ---------------------------------------------
def test_vmap_over_parameters_data_and_nested():
    x, y, b, _ = _grad_inputs(n=23, m=19)
    sig = jnp.array([[0.5], [1.0], [2.0]])
    got = jax.vmap(lambda s: _gauss(x, y, b, s))(sig)
    ref = jnp.stack([_gauss_dense(x, y, b, s) for s in sig])
    np.testing.assert_allclose(got, ref, rtol=1e-12)
    xs = jnp.stack([x, 2 * x])
    got = jax.vmap(lambda x: _gauss(x, y, b, sig[0]))(xs)
    np.testing.assert_allclose(got, jnp.stack([_gauss_dense(v, y, b, sig[0]) for v in xs]),
                               rtol=1e-12)
    nested = jax.vmap(jax.vmap(lambda x, s: _gauss(x, y, b, s), (None, 0)), (0, None))
    got = nested(xs, sig)
    assert got.shape == (2, 3, 23, 2)
    for i in range(2):
        for j in range(3):
            np.testing.assert_allclose(got[i, j], _gauss_dense(xs[i], y, b, sig[j]),
                                       rtol=1e-12)
    # mapped axis not first
    got = jax.vmap(lambda b: _gauss(x, y, b, sig[0]), in_axes=1, out_axes=1)(b)
    np.testing.assert_allclose(got, _gauss_dense(x, y, b, sig[0]), rtol=1e-12)


def test_jit_grad_vmap_compose_in_every_order():
    x, y, b, s = _grad_inputs()
    xs = jnp.stack([x, x + 0.1, x - 0.2])

    def loss(x):
        return jnp.sum(_gauss(x, y, b, s) ** 2)

    def dense(x):
        return jnp.sum(_gauss_dense(x, y, b, s) ** 2)

    ref = jax.vmap(jax.grad(dense))(xs)
    for f in (jax.vmap(jax.grad(loss)), jax.jit(jax.vmap(jax.grad(loss))),
              jax.vmap(jax.jit(jax.grad(loss))), jax.vmap(jax.grad(jax.jit(loss)))):
        np.testing.assert_allclose(f(xs), ref, rtol=1e-10)
    # grad of a vmapped sum, and the second order under vmap
    g = jax.grad(lambda xs: jnp.sum(jax.vmap(loss)(xs)))(xs)
    np.testing.assert_allclose(g, ref, rtol=1e-10)
    hv = jax.vmap(jax.grad(lambda x: jnp.sum(jax.grad(loss)(x) ** 2)))(xs)
    hd = jax.vmap(jax.grad(lambda x: jnp.sum(jax.grad(dense)(x) ** 2)))(xs)
    np.testing.assert_allclose(hv, hd, rtol=1e-9)


def test_lazytensor_surface():
    x, y, b = _data(np.float32)
    X = LazyTensor(jnp.asarray(x)[:, None, :])
    Y = LazyTensor(jnp.asarray(y)[None, :, :])
    D = ((X - Y) ** 2).sum(-1)
    assert D.shape == ((kt.LazyTensor(x[:, None]) - kt.LazyTensor(y[None])) ** 2).sum(-1).shape
    assert "kerneltools.jax" in repr(D)
    np.testing.assert_allclose(np.asarray(D.sum(axis=1))[:, 0],
                               _dense_sqdist(x, y).sum(1), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(D.T.sum(axis=1))[:, 0],
                               _dense_sqdist(x, y).sum(0), rtol=1e-5)
    with pytest.raises(ValueError, match="scalar formula"):
        Vi(jnp.asarray(x)) @ jnp.asarray(b)
    with pytest.raises(ValueError, match="empty"):
        Vi(jnp.zeros((0, 3)))
    with pytest.raises(ValueError, match="Pm"):
        Vj(jnp.asarray(1.0))
    # a NaN propagates into the outputs it touches, and nowhere else
    xn = jnp.asarray(x).at[3, 0].set(jnp.nan)
    got = np.asarray((-Vi(xn).sqdist(Vj(jnp.asarray(y)))).exp().sum(axis=1))
    assert np.isnan(got[3]).all() and not np.isnan(np.delete(got, 3, axis=0)).any()


def test_solve_and_its_gradients_equal_dense():
    x, _, b, _s = _grad_inputs(n=15, m=15)
    alpha = 0.5

    def ours(x, b):
        K = (-Vi(x).sqdist(Vj(x)) / 2).exp()
        return K.solve(b, alpha, tol=1e-12)

    def dense(x, b):
        K = jnp.exp(-_dense_sqdist(x, x) / 2)
        return jnp.linalg.solve(K + alpha * jnp.eye(len(x)), b)

    np.testing.assert_allclose(ours(x, b), dense(x, b), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(jax.jit(ours)(x, b), dense(x, b), rtol=1e-8, atol=1e-10)
    for k in (0, 1):
        g = jax.grad(lambda *a: jnp.sum(jnp.sin(ours(*a))), argnums=k)(x, b)
        d = jax.grad(lambda *a: jnp.sum(jnp.sin(dense(*a))), argnums=k)(x, b)
        np.testing.assert_allclose(g, d, rtol=1e-7, atol=1e-9)


def test_gradient_reduces_only_for_the_inputs_it_needs():
    """A gradient with respect to x builds no gradient reduction for y."""
    x, y, _, _ = _grad_inputs()

    def k(a, c):
        return (-Vi(a).sqdist(Vj(c))).exp().sum(axis=1).sum()

    def calls(f):
        return str(jax.make_jaxpr(f)(x, y)).count("kerneltools_reduce[")

    assert calls(k) == 1
    assert calls(jax.grad(k)) == 2  # forward, gradient of x
    assert calls(jax.grad(k, argnums=(0, 1))) == 3  # and of y
    np.testing.assert_allclose(
        jax.grad(k, argnums=1)(x, y),
        jax.grad(lambda a, c: jnp.exp(-_dense_sqdist(a, c)).sum(), argnums=1)(x, y),
        rtol=1e-10)


@pytest.mark.parametrize("name,params", [("rbf", {"gamma": 0.3}),
                                         ("laplacian", {"gamma": 0.4}),
                                         ("polynomial", {"gamma": 0.2, "degree": 3,
                                                         "coef0": 1.0})])
def test_named_kernels_equal_kerneltools_dense(name, params):
    x, y, b = _data(np.float64)
    k = kt.kernels.make_kernel(name, **params)
    got = kt.jax.kernel(k, jnp.asarray(x), jnp.asarray(y)) @ jnp.asarray(b)
    np.testing.assert_allclose(np.asarray(got), k(x, y) @ b, rtol=1e-11)


def test_kernel_hyperparameter_gradient_equals_dense():
    """d/d(length scale) of a GP-style quadratic form, against dense JAX."""
    from sklearn.gaussian_process.kernels import RBF

    x, _, b = _data(np.float64, n=20, m=20)

    def ours(ls):
        K = kt.jax.kernel(RBF(1.0), jnp.asarray(x), length_scale=ls)
        return jnp.sum(jnp.asarray(b) * (K @ jnp.asarray(b)))

    def dense(ls):
        K = jnp.exp(-_dense_sqdist(x, x) / (2 * ls[0] ** 2))
        return jnp.sum(b * (K @ b))

    ls = jnp.array([0.8])
    np.testing.assert_allclose(ours(ls), dense(ls), rtol=1e-11)
    np.testing.assert_allclose(jax.grad(ours)(ls), jax.grad(dense)(ls), rtol=1e-10)
    with pytest.raises(ValueError, match="no parameters"):
        kt.jax.kernel("rbf", jnp.asarray(x), sigma=1.0)


def test_kernel_compiled_once_and_programs_cached():
    """A kernel is compiled once per formula and dtype (not per size), and
    eager calls of one shape reuse their traced program."""
    from kerneltools.backend.cpu._library import compile_count
    from kerneltools.jax._reduce import _ffi

    def f(x, y, b):
        return (-Vi(x).sqdist(Vj(y)) * Pm(jnp.array([1.3]))).exp() @ b

    x, y, b = (jnp.asarray(a) for a in _data(np.float32, n=40, m=30))
    f(x, y, b).block_until_ready()
    compiled, traced = compile_count(), _ffi._cache_size()
    f(x, y, b)
    assert _ffi._cache_size() == traced
    x2, y2, b2 = (jnp.asarray(a) for a in _data(np.float32, n=50, m=60, seed=3))
    got = f(x2, y2, b2)
    assert compile_count() == compiled  # a new size: the same kernel
    ref = np.exp(-1.3 * _dense_sqdist(np.asarray(x2, float), np.asarray(y2, float)))
    np.testing.assert_allclose(np.asarray(got), ref @ np.asarray(b2, float), rtol=1e-5)


def test_batch_axes_equal_numpy_reference_with_gradients():
    """Leading batch axes (broadcast) are reduced as the NumPy front end does."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 1, 10, 3))
    y = rng.standard_normal((1, 5, 7, 3))
    b = rng.standard_normal((5, 7, 2))
    p = rng.random((4, 1, 1)) + 0.5

    def formula(mod, x, y, p):
        return (-mod.Vi(x).sqdist(mod.Vj(y)) * mod.LazyTensor(p[..., None, None, :])).exp()

    K = formula(kt, x, y, p)
    Kj = formula(kt.jax, jnp.asarray(x), jnp.asarray(y), jnp.asarray(p))
    assert Kj.batch == K.batch == (4, 5)
    np.testing.assert_allclose(Kj @ jnp.asarray(b), K.matmul(b, backend="numpy"),
                               rtol=1e-12)
    np.testing.assert_array_equal(Kj.argKmin(3, axis=2), K.argKmin(3, axis=2))
    np.testing.assert_allclose(Kj.logsumexp(axis=3), K.logsumexp(axis=3), rtol=1e-12)

    def ours(x, p):
        return jnp.sum(jnp.sin(formula(kt.jax, x, jnp.asarray(y), p) @ jnp.asarray(b)))

    def dense(x, p):
        d2 = ((x[..., :, None, :] - y[..., None, :, :]) ** 2).sum(-1)
        return jnp.sum(jnp.sin(jnp.exp(-d2 * p[..., None]) @ b))

    for k in (0, 1):
        np.testing.assert_allclose(
            jax.grad(ours, argnums=k)(jnp.asarray(x[:, :, :, :]), jnp.asarray(p)),
            jax.grad(dense, argnums=k)(jnp.asarray(x), jnp.asarray(p)), rtol=1e-10)
