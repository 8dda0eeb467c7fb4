"""kerneltools.jax in forward mode: ``jax.jvp`` against the JVP of the dense
``jax.numpy`` formula for every differentiable reduction (float32 and
float64), ``jacfwd`` equal to ``jacrev``, Hessian-vector products as the JVP
of the gradient, ``linearize``, ``check_grads`` in both modes to second
order, and all of these under ``jit`` and ``vmap``."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="kerneltools.jax needs JAX (optional extra)")

import jax.numpy as jnp
from jax.scipy.special import logsumexp
from jax.test_util import check_grads

from kerneltools.jax import Pm, Vi, Vj

TOL = {np.float32: {"rtol": 3e-4, "atol": 3e-5}, np.float64: {"rtol": 1e-10, "atol": 1e-12}}


@pytest.fixture(autouse=True)
def x64():
    with jax.enable_x64(True):
        yield


def _inputs(dtype=np.float64, n=11, m=7, d=3, seed=0):
    rng = np.random.default_rng(seed)
    x, y = rng.standard_normal((n, d)), rng.standard_normal((m, d))
    b = np.abs(rng.standard_normal((m, 2))) + 0.1  # (weights of log-sum-exp)
    return tuple(jnp.asarray(a, dtype) for a in (x, y, b, np.array([0.8])))


def _tangents(args, seed=1):
    rng = np.random.default_rng(seed)
    return tuple(jnp.asarray(rng.standard_normal(a.shape), a.dtype) for a in args)


def _sqdist(x, y):
    return ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)


# (ours, dense) pairs of functions of (x, y, b, s): one per differentiable reduction
CASES = {
    "sum": (lambda x, y, b, s: ((-Vi(x).sqdist(Vj(y)) * Pm(s)).exp() * Vj(b)).sum(axis=1),
            lambda x, y, b, s: (jnp.exp(-_sqdist(x, y) * s)[:, :, None] * b).sum(1)),
    "sum_axis0": (lambda x, y, b, s: (-Vi(x).sqdist(Vj(y)) * Pm(s)).exp().sum(axis=0),
                  lambda x, y, b, s: jnp.exp(-_sqdist(x, y) * s).sum(0)[:, None]),
    "logsumexp": (lambda x, y, b, s: (-Vi(x).sqdist(Vj(y)) * Pm(s)).logsumexp(axis=1),
                  lambda x, y, b, s: logsumexp(-_sqdist(x, y) * s, axis=1)[:, None]),
    "logsumexp_weight": (
        lambda x, y, b, s: (-Vi(x).sqdist(Vj(y)) * Pm(s)).logsumexp(weight=Vj(b), axis=1),
        lambda x, y, b, s: logsumexp((-_sqdist(x, y) * s)[:, :, None], axis=1,
                                     b=b[None])),
    "min": (lambda x, y, b, s: (Vi(x).sqdist(Vj(y)) * Pm(s)).min(axis=1),
            lambda x, y, b, s: (_sqdist(x, y) * s).min(1)[:, None]),
    "max": (lambda x, y, b, s: (Vi(x).sqdist(Vj(y)) * Pm(s)).max(axis=1),
            lambda x, y, b, s: (_sqdist(x, y) * s).max(1)[:, None]),
    "Kmin": (lambda x, y, b, s: (Vi(x).sqdist(Vj(y)) * Pm(s)).Kmin(K=3, axis=1),
             lambda x, y, b, s: jnp.sort(_sqdist(x, y) * s, axis=1)[:, :3]),
}


def _close(got, ref, dtype):
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    tol = TOL[dtype]
    np.testing.assert_allclose(got.reshape(ref.shape), ref, rtol=tol["rtol"],
                               atol=tol["atol"] * max(1.0, np.abs(ref).max()))


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_jvp_equals_the_jvp_of_the_dense_formula(case, dtype):
    ours, dense = CASES[case]
    args = _inputs(dtype)
    tans = _tangents(args)
    out, tout = jax.jvp(ours, args, tans)
    ref, tref = jax.jvp(dense, args, tans)
    assert tout.dtype == np.dtype(dtype)
    _close(out, ref, dtype)
    _close(tout, tref, dtype)
    # with respect to one input only (the others' tangents are symbolic zeros)
    for k in range(4):
        def one(a, k=k, f=ours):
            return f(*args[:k], a, *args[k + 1:])

        def one_dense(a, k=k):
            return dense(*args[:k], a, *args[k + 1:])

        _close(jax.jvp(one, (args[k],), (tans[k],))[1],
               jax.jvp(one_dense, (args[k],), (tans[k],))[1], dtype)
    # under jit: the same numbers
    _close(jax.jit(lambda a, t: jax.jvp(ours, a, t)[1])(args, tans), tref, dtype)


def test_index_outputs_have_zero_tangents():
    x, y, _, _ = _inputs()
    i, ti = jax.jvp(lambda x: Vi(x).sqdist(Vj(y)).argmin(axis=1), (x,), (x,))
    np.testing.assert_array_equal(np.asarray(i).ravel(),
                                  np.argmin(np.asarray(_sqdist(x, y)), axis=1))
    assert ti.dtype == jax.dtypes.float0
    _, (tv, _) = jax.jvp(lambda x: Vi(x).sqdist(Vj(y)).min_argmin(axis=1), (x,), (x,))
    _close(tv, jax.jvp(lambda x: _sqdist(x, y).min(1), (x,), (x,))[1], np.float64)
    # batched: the JVP of a vmapped min_argmin, its index output's tangent zero
    xs = jnp.stack([x, 2 * x])
    (_, i), (tv, ti) = jax.jvp(
        jax.vmap(lambda x: Vi(x).sqdist(Vj(y)).min_argmin(axis=1)), (xs,), (xs,))
    ref = jax.jvp(jax.vmap(lambda x: _sqdist(x, y).min(1)), (xs,), (xs,))[1]
    _close(tv, ref, np.float64)
    assert ti.dtype == jax.dtypes.float0 and i.shape == ti.shape


@pytest.mark.parametrize("case", ["sum", "logsumexp", "min", "Kmin"])
def test_jacfwd_equals_jacrev(case):
    ours, dense = CASES[case]
    args = _inputs(n=5, m=4)
    fwd = jax.jacfwd(ours, argnums=(0, 1, 2, 3))(*args)
    rev = jax.jacrev(ours, argnums=(0, 1, 2, 3))(*args)
    ref = jax.jacfwd(dense, argnums=(0, 1, 2, 3))(*args)
    for f, r, d in zip(fwd, rev, ref):
        np.testing.assert_allclose(f, r, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(f.reshape(d.shape), d, rtol=1e-10, atol=1e-12)


def _loss(f):
    return lambda *a: jnp.sum(jnp.sin(f(*a)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("case", ["sum", "logsumexp_weight", "Kmin"])
def test_hessian_vector_product_is_jvp_of_grad(case, dtype):
    ours, dense = CASES[case]
    args = _inputs(dtype)
    tans = _tangents(args)
    argnums = (0, 1, 2, 3)
    hv = jax.jvp(jax.grad(_loss(ours), argnums=argnums), args, tans)[1]
    hd = jax.jvp(jax.grad(_loss(dense), argnums=argnums), args, tans)[1]
    for g, d in zip(hv, hd):
        _close(g, d, dtype)
    # linearize: the same linear map, evaluated twice
    _, lin = jax.linearize(jax.grad(_loss(ours), argnums=argnums), *args)
    for g, d in zip(lin(*tans), hd):
        _close(g, d, dtype)
    for g, d in zip(lin(*[2 * t for t in tans]), hd):
        _close(g, d * 2, dtype)


def test_hessian_forward_over_reverse_equals_dense():
    ours, dense = CASES["sum"]
    args = _inputs(n=5, m=4)
    f, g = _loss(ours), _loss(dense)
    for h in (jax.hessian, lambda f: jax.jacrev(jax.jacfwd(f)), jax.jacfwd):
        np.testing.assert_allclose(h(f)(*args), h(g)(*args), rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("case", sorted(CASES))
def test_check_grads_forward_and_reverse_second_order(case):
    ours, _ = CASES[case]
    x, y, b, s = _inputs()
    check_grads(ours, (x, y, b, s), order=2, modes=["fwd", "rev"], atol=1e-5, rtol=1e-5)


def test_third_order_forward_equals_dense():
    ours, dense = CASES["logsumexp"]
    args = _inputs(n=6, m=5)

    def third(f):
        g = jax.grad(_loss(f))
        h = lambda x: jax.jvp(g, (x,), (args[1][:1].repeat(6, 0),))[1]
        return jax.jvp(h, (args[0],), (args[0],))[1]

    np.testing.assert_allclose(third(lambda x: ours(x, *args[1:])),
                               third(lambda x: dense(x, *args[1:])), rtol=1e-9, atol=1e-11)


def test_forward_mode_under_jit_and_vmap():
    ours, dense = CASES["sum"]
    x, y, b, s = _inputs()
    xs = jnp.stack([x, x + 0.1, x - 0.2])
    tx = _tangents((x,))[0]

    def f(x):
        return ours(x, y, b, s)

    def g(x):
        return dense(x, y, b, s)

    ref = jax.vmap(lambda x: jax.jvp(g, (x,), (tx,))[1])(xs)
    fwd = lambda h: (lambda x: jax.jvp(h, (x,), (tx,))[1])
    for run in (jax.vmap(fwd(f)), jax.jit(jax.vmap(fwd(f))), jax.vmap(jax.jit(fwd(f))),
                jax.vmap(fwd(jax.jit(f)))):
        np.testing.assert_allclose(run(xs), ref, rtol=1e-10, atol=1e-12)
    # the JVP of a vmapped function, tangents mapped too
    txs = jnp.stack([tx, 2 * tx, -tx])
    got = jax.jvp(jax.vmap(f), (xs,), (txs,))[1]
    np.testing.assert_allclose(got, jax.jvp(jax.vmap(g), (xs,), (txs,))[1], rtol=1e-10)
    # vmap over the tangents (jacfwd's own batching), and nested vmaps
    got = jax.vmap(lambda t: jax.jvp(f, (x,), (t,))[1])(txs)
    np.testing.assert_allclose(got, jax.vmap(lambda t: jax.jvp(g, (x,), (t,))[1])(txs),
                               rtol=1e-10)
    nested = jax.vmap(jax.vmap(fwd(f)))(jnp.stack([xs, 2 * xs]))
    np.testing.assert_allclose(nested[1], jax.vmap(fwd(g))(2 * xs), rtol=1e-10)
    # Hessian-vector products under vmap and jit
    hvp = lambda h: (lambda x: jax.jvp(jax.grad(_loss(h)), (x,), (tx,))[1])
    np.testing.assert_allclose(jax.jit(jax.vmap(hvp(f)))(xs), jax.vmap(hvp(g))(xs),
                               rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(jax.jit(jax.jacfwd(f))(x), jax.jacfwd(g)(x), rtol=1e-10,
                               atol=1e-12)


def test_batch_axes_forward_mode_equals_dense():
    """Data with leading batch axes (``Vi`` of a (B, N, D) array)."""
    x, y, b, s = _inputs()
    xs = jnp.stack([x, x + 0.3])

    def ours(xs, s):
        return ((-Vi(xs).sqdist(Vj(y)) * Pm(s)).exp() * Vj(b)).sum(axis=2)

    def dense(xs, s):
        return jax.vmap(lambda x: CASES["sum"][1](x, y, b, s))(xs)

    tans = _tangents((xs, s))
    got = jax.jvp(ours, (xs, s), tans)[1]
    np.testing.assert_allclose(got, jax.jvp(dense, (xs, s), tans)[1], rtol=1e-10)
    np.testing.assert_allclose(jax.jacfwd(ours, argnums=1)(xs, s),
                               jax.jacrev(ours, argnums=1)(xs, s), rtol=1e-10)
    hv = jax.jvp(jax.grad(_loss(ours)), (xs, s), tans)[1]
    np.testing.assert_allclose(hv, jax.jvp(jax.grad(_loss(dense)), (xs, s), tans)[1],
                               rtol=1e-9)


def test_forward_mode_through_a_callback():
    """Plans on the engine (``backend="numpy"``) have forward mode too."""
    x, y, b, s = _inputs()

    def ours(x):
        K = (-Vi(x).sqdist(Vj(y)) * Pm(s)).exp() * Vj(b)
        return K.sum(axis=1, backend="numpy")

    tx = _tangents((x,))[0]
    np.testing.assert_allclose(
        jax.jvp(ours, (x,), (tx,))[1],
        jax.jvp(lambda x: CASES["sum"][1](x, y, b, s), (x,), (tx,))[1], rtol=1e-10)

