"""Batch axes: B independent problems in one call equal a Python loop over B.

As in pykeops, a reduction's axis is numbered after the batch axes: with one
batch axis, ``axis=1`` reduces over i and ``axis=2`` over j."""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import sides

import kerneltools as kt
from kerneltools.backend._arrays import is_cupy_array


def _host(a):
    if is_cupy_array(a):
        return a.get()
    return np.asarray(a)


def _xp(backend):
    if backend == "cuda":
        import cupy

        return cupy
    return np


REDUCTIONS = {
    "sum": lambda F, w, ax, be: ((-F).exp() * w).sum(axis=ax, backend=be),
    "lse": lambda F, w, ax, be: (-3 * F).logsumexp(axis=ax, backend=be),
    "lse_weight": lambda F, w, ax, be: (-3 * F).logsumexp(axis=ax, weight=w.abs() + 0.1,
                                                          backend=be),
    "softmax_weight": lambda F, w, ax, be: (-3 * F).sumsoftmaxweight(w, axis=ax, backend=be),
    "min_argmin": lambda F, w, ax, be: F.min_argmin(axis=ax, backend=be),
    "argmax": lambda F, w, ax, be: F.argmax(axis=ax, backend=be),
    "kmin_argkmin": lambda F, w, ax, be: F.Kmin_argKmin(4, axis=ax, backend=be),
}


def _tuple(out):
    return out if isinstance(out, tuple) else (out,)


@pytest.mark.parametrize("axis", [1, 0])
@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_batched_equals_loop(backend, dtype, rtol, name, axis):
    """Reduced over the points of y (and weighted by w) on both axes: for
    axis=0 y and w are the i-variables and x the j-variable, so that both
    axes run the same compiled kernel (a reduction over i is the one over j
    with i and j exchanged), each through its own batch axis numbering."""
    rng = np.random.default_rng(0)
    B, N, M, D = 3, 37, 29, 3
    xp = _xp(backend)
    x = rng.random((B, N, D)).astype(dtype)
    y = rng.random((B, M, D)).astype(dtype)
    w = rng.standard_normal((B, M, 2)).astype(dtype)
    s = (rng.random((B, 1, 1, 1)) + 0.5).astype(dtype)  # a parameter per problem
    red = REDUCTIONS[name]
    kept, reduced = sides(axis)

    def one(x, y, w, s, nbatch, backend):
        F = kt.LazyTensor(s) * kept(x).sqdist(reduced(y))
        return red(F, reduced(w), nbatch + axis, backend)

    got = _tuple(one(xp.asarray(x), xp.asarray(y), xp.asarray(w), xp.asarray(s), 1, backend))
    # The loop runs on the NumPy oracle: an independent reference, and no
    # second (unbatched) kernel to compile per case on the compiled backends.
    refs = [_tuple(one(x[b], y[b], w[b], s[b, 0, 0], 0, "numpy")) for b in range(B)]
    n_out = N  # the points of x, on either axis
    for k, g in enumerate(got):
        g = _host(g)
        ref = np.stack([r[k] for r in refs])
        assert g.shape == ref.shape and g.shape[:2] == (B, n_out) and g.dtype == ref.dtype
        if ref.dtype.kind == "i":
            np.testing.assert_array_equal(g, ref)
        else:
            np.testing.assert_allclose(g, ref, rtol=rtol, atol=rtol * np.abs(ref).max())


def test_broadcasting_and_several_batch_axes(backend):
    """Batch axes of size 1 and unbatched variables broadcast; (B1, B2) axes."""
    rng = np.random.default_rng(1)
    B1, B2, N, M = 2, 3, 20, 15
    xp = _xp(backend)
    x = rng.random((B1, 1, N, 2))
    y = rng.random((1, B2, M, 2))
    b = rng.random((M, 1))  # no batch axes: shared by every problem
    out = _host((-kt.Vi(xp.asarray(x)).sqdist(kt.Vj(xp.asarray(y)))).exp()
                @ xp.asarray(b))
    assert out.shape == (B1, B2, N, 1)
    for i in range(B1):
        for j in range(B2):
            ref = np.exp(-((x[i, 0][:, None] - y[0, j][None]) ** 2).sum(-1)) @ b
            np.testing.assert_allclose(out[i, j], ref, rtol=1e-12)
    # pykeops' (B, N, 1, D) / (B, 1, M, D) forms
    xi = kt.LazyTensor(xp.asarray(x[:, 0, :, None, :]))  # (B1, N, 1, 2)
    yj = kt.LazyTensor(xp.asarray(y[0, :1, None, :, :]))  # (1, 1, M, 2)
    assert xi.shape == (B1, N, 1, 2) and (xi - yj).shape == (B1, N, M, 2)
    idx = _host((xi - yj).sqnorm2().argmin(axis=2))  # over j: after the batch axis
    for i in range(B1):
        ref = np.argmin(((x[i, 0][:, None] - y[0, 0][None]) ** 2).sum(-1), axis=1)
        np.testing.assert_array_equal(idx[i, :, 0], ref)


def test_batch_errors():
    x = np.zeros((3, 10, 2))
    y = np.zeros((4, 8, 2))
    with pytest.raises(ValueError, match="batch axes do not broadcast"):
        kt.Vi(x).sqdist(kt.Vj(y))
    with pytest.raises(ValueError, match="K must be between 1 and 8"):
        kt.Vi(x).sqdist(kt.Vj(np.zeros((3, 8, 2)))).Kmin(9, axis=2)
    F = kt.Vi(x).sqdist(kt.Vj(np.zeros((3, 8, 2))))
    with pytest.raises(NotImplementedError, match="batch axes"):
        F.to_dense()
    with pytest.raises(NotImplementedError, match="batch axes"):
        F.vjp(kt.Vi(x), np.ones((3, 10, 1)))
    with pytest.raises(ValueError, match="ranges= cannot be combined"):
        F.sum(axis=2, ranges=((0,),))
    with pytest.raises(ValueError, match=r"with 1 batch axis, the reduction 'axis' must be 1"):
        F.sum(axis=0)
    with pytest.raises(ValueError, match=r"\(\.\.\., N, 1, D\)"):
        kt.LazyTensor(np.zeros((2, 3, 4, 2)))
