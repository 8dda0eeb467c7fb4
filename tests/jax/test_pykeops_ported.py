"""pykeops' torch test files that apply to a LazyTensor front end, ported to
JAX (pykeops 2.3's ``pykeops/test/``; each test keeps its file's sizes, data
law and tolerances, torch.allclose's defaults being np.allclose's): the
dense reference is the same formula in ``jax.numpy``, the gradients
``jax.grad`` (``torch.autograd.grad``'s ``create_graph=True``: grad of grad).

Ported: test_lazytensor_gaussian_cpu.py (3 tests), test_lazytensor_grad.py
(3), test_lazytensor_clamp.py (2), test_sinc.py (2),
test_lazytensor_gaussian_batch.py (2), test_chunks.py (1),
test_finalchunks.py (1), test_transpose.py (1), test_vmap.py (3)."""

from __future__ import annotations

import math

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="kerneltools.jax needs JAX (optional extra)")

import jax.numpy as jnp

from kerneltools.jax import LazyTensor


@pytest.fixture(autouse=True)
def x64():
    with jax.enable_x64(True):
        yield


def _rand(seed, *shape, dtype=np.float32, normal=False):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape) if normal else rng.random(shape)
    return jnp.asarray(a.astype(dtype))


def _exp(v):
    """``v.exp()`` (torch's spelling) of a LazyTensor or an array."""
    return v.exp() if isinstance(v, LazyTensor) else jnp.exp(v)


def _gaussian_matmul(x, y, b, keops, **options):
    if keops:
        x, y = LazyTensor(x), LazyTensor(y)
    K = _exp(-((x - y) ** 2).sum(axis=2))
    return K.__matmul__(b, **options) if keops else K @ b


# -- test_lazytensor_gaussian_cpu.py ------------------------------------------
def test_lazytensor_gaussian_cpu_fw_bw1_bw2():
    M, N, D, DV = 1000, 1000, 3, 1
    x = _rand(0, M, 1, D) / math.sqrt(D)
    y = _rand(1, 1, N, D) / math.sqrt(D)
    b = _rand(2, N, DV, normal=True)
    out = [_gaussian_matmul(x, y, b, k).squeeze() for k in (True, False)]
    assert np.allclose(out[0], out[1])

    def g(k):
        return jax.grad(lambda b: (_gaussian_matmul(x, y, b, k).squeeze() ** 2).sum())

    assert np.allclose(g(True)(b), g(False)(b))

    def g2(k):
        return jax.grad(lambda b: (g(k)(b) ** 2).sum())

    assert np.allclose(g2(True)(b), g2(False)(b))


# -- test_lazytensor_grad.py ----------------------------------------------------
def test_lazytensor_grad_fw_bw1_bw2():
    M, N, D, DV = 100, 100, 3, 1
    x = _rand(0, M, 1, D)
    y = _rand(1, 1, N, 1)
    b = _rand(2, N, DV, normal=True)

    def fun(x, keops):
        xx, yy = (LazyTensor(x), LazyTensor(y)) if keops else (x, y)
        return ((jnp.cos(xx) if not keops else xx.cos()) - yy).sum(axis=2) @ b

    out = [fun(x, k).squeeze() for k in (True, False)]
    assert np.allclose(out[0], out[1], rtol=1e-4)

    def g(k):
        return jax.grad(lambda x: (fun(x, k).squeeze() ** 2).sum())

    assert np.allclose(g(True)(x), g(False)(x), rtol=1e-4)

    def g2(k):
        return jax.grad(lambda x: (g(k)(x) ** 2).sum())

    assert np.allclose(g2(True)(x), g2(False)(x), rtol=1e-3)


# -- test_lazytensor_clamp.py ---------------------------------------------------
def test_lazytensor_clamp_fw_bw():
    M, N, D = 1000, 1000, 3
    x = _rand(0, M, 1, D, normal=True)
    y = _rand(1, 1, N, D, normal=True)
    a, b = -1.23, 1.54

    def fun(x, keops):
        if keops:
            Dxy = (LazyTensor(x) * LazyTensor(y)).clamp(a, b).sum(axis=2)
            return (-(Dxy**2)).exp().sum(axis=1).squeeze()
        Dxy = jnp.clip(x * y, a, b).sum(axis=2)
        return jnp.exp(-(Dxy**2)).sum(axis=1).squeeze()

    assert np.allclose(fun(x, True), fun(x, False))

    def g(k):
        return jax.grad(lambda x: (fun(x, k) ** 2).sum())

    assert np.allclose(g(True)(x), g(False)(x), atol=0.01, rtol=0.001)


# -- test_sinc.py -------------------------------------------------------------------
def test_sinc_and_its_gradient():
    x = _rand(0, 5, 1, dtype=np.float64) * 2 * math.pi

    def ours(x):
        return LazyTensor(x[:, None]).sinc().sum(0).sum()

    def dense(x):
        return jnp.sum(jnp.sinc(x))

    assert np.allclose(ours(x), dense(x))
    assert np.allclose(jax.grad(ours)(x), jax.grad(dense)(x))


# -- test_lazytensor_gaussian_batch.py ----------------------------------------------
def test_lazytensor_gaussian_batch_fw_bw():
    B1, B2, M, N, D, DV = 3, 4, 20, 25, 3, 2
    x = _rand(0, 1, B2, M, 1, D) / math.sqrt(D)
    y = _rand(1, B1, B2, 1, N, D) / math.sqrt(D)
    b = _rand(2, B1, 1, N, DV, normal=True)

    def fun(b, keops):
        xx, yy = (LazyTensor(x), LazyTensor(y)) if keops else (x, y)
        K = _exp(-((xx - yy) ** 2).sum(axis=4))
        return (K @ b).squeeze()

    assert np.allclose(fun(b, True), fun(b, False), atol=1e-6)

    def g(k):
        return jax.grad(lambda b: (fun(b, k) ** 2).sum())

    assert np.allclose(g(True)(b), g(False)(b))


# -- test_chunks.py, test_finalchunks.py --------------------------------------------
@pytest.mark.parametrize("D,DV", [(300, 1), (3, 300)], ids=["chunks", "finalchunks"])
def test_chunks(D, DV):
    M, N = 200, 300
    x = _rand(0, M, 1, D) / math.sqrt(D)
    y = _rand(1, 1, N, D) / math.sqrt(D)
    b = _rand(2, N, DV, normal=True)
    out = [_gaussian_matmul(x, y, b, k, **({"sum_scheme": "block_sum"} if k else {}))
           .squeeze() for k in (True, False)]
    assert np.allclose(out[0], out[1], atol=0.0001)


# -- test_transpose.py --------------------------------------------------------------
def test_transpose():
    x, y = _rand(0, 1000, 3, normal=True), _rand(1, 2000, 3, normal=True)
    x_i, y_j = LazyTensor(x[:, None, :]), LazyTensor(y[None, :, :])
    K_keops = (-((x_i - y_j) ** 2).sum(2)).exp()
    K_dense = jnp.exp(-((x[:, None, :] - y[None, :, :]) ** 2).sum(2))
    w = _rand(2, 1000, 2)
    assert np.allclose(K_keops.t() @ w, K_dense.T @ w)


# -- test_vmap.py -------------------------------------------------------------------
def _vmap_fn(x_i, x_j, y_j, use_keops=True):
    if use_keops:
        x_i, x_j, y_j = LazyTensor(x_i), LazyTensor(x_j), LazyTensor(y_j)
    K_ij = _exp(-((x_i - x_j) ** 2).sum(-1))
    if not use_keops:
        K_ij = K_ij[..., None]
    return (K_ij * y_j).sum(1)


@pytest.mark.parametrize("shapes,in_axes,out_axes", [
    (((5, 10, 1, 2), (5, 1, 20, 2), (5, 1, 20, 1)), 0, 0),
    (((10, 5, 1, 2), (1, 5, 20, 2), (1, 5, 20, 1)), 1, 1),
    (((10, 5, 1, 2), (5, 1, 20, 2), (1, 5, 20, 1)), (1, 0, 1), 2),
], ids=["vmap_0", "vmap_1", "vmap_2"])
def test_vmap(shapes, in_axes, out_axes):
    x_i, x_j, y_j = (_rand(k, *s, dtype=np.float64, normal=True)
                     for k, s in enumerate(shapes))

    def run(use_keops):
        return jax.vmap(lambda a, b, c: _vmap_fn(a, b, c, use_keops), in_axes=in_axes,
                        out_axes=out_axes)

    res_keops, res_dense = run(True)(x_i, x_j, y_j), run(False)(x_i, x_j, y_j)
    assert np.allclose(res_keops, res_dense)
    u = _rand(9, *res_dense.shape, dtype=np.float64)
    def loss(f):
        return lambda x: jnp.sum(u * f(x, x_j, y_j))

    grads = [jax.grad(loss(run(k)))(x_i) for k in (True, False)]
    assert np.allclose(grads[0], grads[1])
