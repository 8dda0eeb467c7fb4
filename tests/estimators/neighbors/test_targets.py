"""The neighbours' weights, votes and means of
:mod:`kerneltools.estimators.neighbors._targets`: one version for every array
namespace, checked on NumPy and array-api-strict arrays against loops."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.externals import array_api_compat as compat

from kerneltools.estimators.neighbors._targets import (
    gather_rows,
    votes,
    weighted_mean,
    weights_of,
)

xps = pytest.importorskip("array_api_strict")
NAMESPACES = ["numpy", "strict"]


def _as(namespace, a):
    return xps.asarray(a) if namespace == "strict" else a


def _xp(a):
    return compat.array_namespace(a)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("namespace", NAMESPACES)
def test_distance_weights(namespace, dtype):
    """1/d in the distances' dtype, as float64; a row with a distance 0 (or
    one whose inverse overflows) weighs 1 at those and 0 elsewhere."""
    dist = np.array([[0.5, 1.0, 4.0], [0.0, 0.0, 2.0], [1e-45, 1.0, 1.0]], dtype)
    w = weights_of(_as(namespace, dist), "distance")
    with np.errstate(divide="ignore", over="ignore"):
        inv = [[float(np.divide(dtype(1), d)) for d in row] for row in dist]
    expected = np.array([inv[0], [1.0, 1.0, 0.0],
                         [1.0, 0.0, 0.0] if dtype == np.float32 else inv[2]])
    assert w.dtype == _xp(w).float64
    np.testing.assert_array_equal(np.asarray(w), expected)


@pytest.mark.parametrize("namespace", NAMESPACES)
def test_uniform_and_callable_weights(namespace):
    dist = _as(namespace, np.array([[1.0, 2.0], [3.0, 4.0]]))
    assert weights_of(dist, "uniform") is None and weights_of(dist, None) is None
    w = weights_of(dist, lambda d: d * 2)
    np.testing.assert_array_equal(np.asarray(w), [[2.0, 4.0], [6.0, 8.0]])


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("namespace", NAMESPACES)
def test_votes_and_means_match_loops(namespace, weighted):
    """Per query, the normalised weights of each class among the neighbours'
    labels, and the weighted mean of their targets."""
    rng = np.random.default_rng(1)
    n, k, n_classes = 12, 5, 4
    codes = rng.integers(0, n_classes, size=(30, 1))
    y = rng.normal(size=(30, 2))
    ind = rng.integers(0, 30, size=(n, k))
    w = rng.random((n, k)) + 0.1 if weighted else None
    wl = np.ones((n, k)) if w is None else w
    ref_votes = np.zeros((n, n_classes))
    for r in range(n):
        for j in range(k):
            ref_votes[r, codes[ind[r, j], 0]] += wl[r, j]
    ref_votes /= ref_votes.sum(axis=1, keepdims=True)
    ref_mean = np.stack([(wl[r, :, None] * y[ind[r]]).sum(0) / wl[r].sum()
                         for r in range(n)])
    xp = compat.array_namespace(_as(namespace, ind))
    labels = gather_rows(_as(namespace, codes), _as(namespace, ind), xp)
    w_ns = None if w is None else _as(namespace, w)
    got = votes(labels[:, :, 0], w_ns, n_classes, xp)
    np.testing.assert_allclose(np.asarray(got), ref_votes, rtol=1e-14)
    Yk = gather_rows(_as(namespace, y), _as(namespace, ind), xp)
    mean = weighted_mean(Yk, w_ns, xp)
    np.testing.assert_allclose(np.asarray(mean), ref_mean, rtol=1e-13)
