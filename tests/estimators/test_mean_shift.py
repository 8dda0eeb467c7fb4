"""MeanShift and estimate_bandwidth against a dense NumPy mean shift and scikit-learn.

The reference moves each seed alone with dense distances (Comaniciu and
Meer's flat-kernel iteration), then merges and labels as scikit-learn's
algorithm describes; blob data keep points away from the bandwidth's
boundary, where a rounding difference could change a neighbourhood.
"""

from __future__ import annotations

import doctest

import numpy as np
import pytest
import scipy.sparse
from scipy.spatial.distance import cdist
from sklearn import cluster as skc
from sklearn.datasets import make_blobs
from sklearn.utils.estimator_checks import parametrize_with_checks

from kerneltools.estimators import MeanShift, estimate_bandwidth, mean_shift

CENTRE_RTOL = {np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-12}


def _blobs(n=150, d=2, seed=11, dtype=np.float64):
    centres = np.array([[1, 1], [-1, -1], [1, -1]] + [[0, 0]] * 0)[:, :d] * 2
    X, _ = make_blobs(n_samples=n, n_features=d, centers=centres, cluster_std=0.4,
                      random_state=seed)
    return X.astype(dtype)


def dense_mean_shift(X, bandwidth, max_iter=300, cluster_all=True):
    """(centres, labels), one seed at a time, dense distances, in float64."""
    found = {}
    for seed in X.astype(np.float64):
        mean, it = seed, 0
        while True:
            inside = cdist(mean[None], X)[0] <= bandwidth
            if not inside.any():
                break
            old, mean = mean, X[inside].mean(axis=0)
            if np.linalg.norm(mean - old) <= 1e-3 * bandwidth or it == max_iter:
                break
            it += 1
        if inside.any():
            found[tuple(mean)] = inside.sum()
    ranked = sorted(found.items(), key=lambda t: (t[1], t[0]), reverse=True)
    centres = np.array([c for c, _ in ranked])
    keep = np.ones(len(centres), dtype=bool)
    for i in range(len(centres)):
        if keep[i]:
            keep[cdist(centres[i:i + 1], centres)[0] <= bandwidth] = False
            keep[i] = True
    centres = centres[keep]
    D = cdist(X, centres)
    labels = D.argmin(axis=1)
    if not cluster_all:
        labels[D.min(axis=1) > bandwidth] = -1
    return centres, labels


@pytest.mark.parametrize("cluster_all", [True, False])
def test_matches_dense_reference(cluster_all, backend, dtype):
    X = _blobs(dtype=dtype)
    ms = MeanShift(bandwidth=1.0, cluster_all=cluster_all, backend=backend).fit(X)
    centres, labels = dense_mean_shift(X.astype(np.float64), 1.0,
                                       cluster_all=cluster_all)
    assert ms.cluster_centers_.dtype == dtype
    np.testing.assert_allclose(ms.cluster_centers_, centres, rtol=CENTRE_RTOL[dtype])
    np.testing.assert_array_equal(ms.labels_, labels)
    np.testing.assert_array_equal(ms.predict(X), cdist(X, centres).argmin(axis=1))


@pytest.mark.parametrize("kw", [{}, {"bandwidth": 0.8, "bin_seeding": True},
                                {"bandwidth": 0.8, "max_iter": 2},
                                {"bandwidth": 0.5, "bin_seeding": True,
                                 "min_bin_freq": 3, "cluster_all": False},
                                {"bandwidth": 0.9, "seeds": [[2, 2], [-2, -2]]}])
@pytest.mark.parametrize("dtype_name", ["float32", "float64"])
def test_matches_sklearn(kw, dtype_name):
    X = _blobs(n=200, seed=3, dtype=dtype_name)
    ours, ref = MeanShift(**kw).fit(X), skc.MeanShift(**kw).fit(X)
    rtol = CENTRE_RTOL[np.dtype(dtype_name)]
    np.testing.assert_allclose(ours.cluster_centers_, ref.cluster_centers_, rtol=rtol)
    assert ours.cluster_centers_.dtype == ref.cluster_centers_.dtype
    np.testing.assert_array_equal(ours.labels_, ref.labels_)
    assert ours.n_iter_ == ref.n_iter_


def test_estimate_bandwidth_matches_dense_reference(dtype):
    X = _blobs(n=120, d=3, seed=5, dtype=dtype)
    k = int(len(X) * 0.2)
    kth = np.sort(cdist(X, X), axis=1)[:, k - 1]  # the point itself counts
    got = estimate_bandwidth(X, quantile=0.2)
    assert got == pytest.approx(kth.mean(), rel=1e-6)
    assert got == pytest.approx(skc.estimate_bandwidth(X, quantile=0.2), rel=1e-12)
    assert estimate_bandwidth(X, n_samples=50, random_state=1) == pytest.approx(
        skc.estimate_bandwidth(X, n_samples=50, random_state=1), rel=1e-12)


def test_gaussian_kernel_reaches_fixed_points(backend):
    # each centre m of the Gaussian option satisfies m = sum_j g_j x_j / sum_j g_j
    X = _blobs(n=120)
    ms = MeanShift(bandwidth=0.7, kernel="gaussian", backend=backend).fit(X)
    g = np.exp(-0.5 * cdist(ms.cluster_centers_, X, "sqeuclidean") / 0.49)
    fixed = g @ X / g.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(ms.cluster_centers_, fixed, atol=2e-3 * 0.7)
    assert len(ms.cluster_centers_) == 3
    np.testing.assert_array_equal(ms.labels_, cdist(X, ms.cluster_centers_).argmin(1))


def test_bin_seeds_match_sklearn():
    X = _blobs(n=100)
    for size, freq in [(1.0, 1), (0.5, 3), (0.0, 1)]:
        ours = mean_shift.get_bin_seeds(X, size, freq)
        ref = skc.get_bin_seeds(X, size, freq)
        assert sorted(map(tuple, ours)) == sorted(map(tuple, ref))


def test_errors():
    X = _blobs(n=30)
    with pytest.raises(ValueError, match="'bandwidth' parameter of MeanShift"):
        MeanShift(bandwidth=-1.0).fit(X)
    with pytest.raises(ValueError, match="'kernel' parameter"):
        MeanShift(kernel="epanechnikov").fit(X)
    with pytest.raises(ValueError, match="No point was within bandwidth=0.1"):
        MeanShift(bandwidth=0.1, seeds=[[-9, -9], [-10, -10]]).fit(X)
    with pytest.raises(TypeError, match="kernel='gaussian' needs dense X"):
        MeanShift(bandwidth=1.0, kernel="gaussian").fit(scipy.sparse.csr_matrix(X))
    with pytest.raises(TypeError, match="Sparse data was passed"):  # scikit-learn's
        MeanShift(bandwidth=1.0).fit(scipy.sparse.csr_matrix(X))
    with pytest.raises(ValueError, match="'seeds' must have 2 features"):
        MeanShift(bandwidth=1.0, seeds=[[0.0, 0.0, 0.0]]).fit(X)
    with pytest.raises(ValueError, match="'quantile' parameter of estimate_bandwidth"):
        estimate_bandwidth(X, quantile=2.0)
    with pytest.raises(ValueError, match="3 features, but MeanShift is expecting 2"):
        MeanShift(bandwidth=1.0).fit(X).predict(np.zeros((2, 3)))


@parametrize_with_checks([MeanShift(), MeanShift(kernel="gaussian")])
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def test_doctests():
    assert doctest.testmod(mean_shift, raise_on_error=True).attempted > 0


def test_block_sparse_pruning_changes_nothing(backend, monkeypatch):
    # in <= 3 features each step visits only the cell pairs within bandwidth
    from kerneltools.estimators._shared import _compact

    X = _blobs(n=300, d=3, seed=4)
    dense = MeanShift(bandwidth=0.6, backend=backend).fit(X)
    monkeypatch.setattr(_compact, "PRUNE_MIN_PAIRS", 1)
    monkeypatch.setattr(_compact, "_MIN_PER_CELL", 1)
    assert _compact.compact_ranges(X, X, 0.6) is not None
    pruned = MeanShift(bandwidth=0.6, backend=backend).fit(X)
    np.testing.assert_allclose(pruned.cluster_centers_, dense.cluster_centers_,
                               rtol=1e-12)
    np.testing.assert_array_equal(pruned.labels_, dense.labels_)
    assert pruned.n_iter_ == dense.n_iter_


def test_accel_gives_ours():
    import kerneltools.accel as accel
    from kerneltools.estimators import KernelDensity, LocalOutlierFactor

    X = _blobs(n=60)
    accel.install()
    try:
        from sklearn import cluster, neighbors
        from sklearn.cluster import _mean_shift

        assert neighbors.KernelDensity is KernelDensity
        assert neighbors.LocalOutlierFactor is LocalOutlierFactor
        assert cluster.MeanShift is _mean_shift.MeanShift is MeanShift
        # scikit-learn's mean_shift() builds the MeanShift of its module: ours
        centres, labels = cluster.mean_shift(X, bandwidth=1.0)
    finally:
        accel.uninstall()
    assert cluster.MeanShift is not MeanShift
    ours = MeanShift(bandwidth=1.0).fit(X)
    np.testing.assert_array_equal(centres, ours.cluster_centers_)
    np.testing.assert_array_equal(labels, ours.labels_)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_distinct_rows_are_bitwise_and_checked(dtype, monkeypatch):
    """The seeds shifted once per distinct mean: rows equal bit for bit share
    one (-0.0 and 0.0 stay apart: harmless, they move alike); a hash that
    collides everywhere is caught and every row kept."""
    from kerneltools.estimators import mean_shift as ms

    rng = np.random.default_rng(0)
    a = rng.random((50, 3)).astype(dtype)[rng.integers(0, 20, size=200)]
    a[:2] = [[0.0, 1.0, 2.0], [-0.0, 1.0, 2.0]]
    first, inv = ms._distinct_rows(a)
    np.testing.assert_array_equal(a[first][inv], a)
    bits = a.view(np.uint32 if a.itemsize == 4 else np.uint64)
    assert len(first) == len(np.unique(bits, axis=0))
    monkeypatch.setattr(ms, "_HASH", np.zeros_like(ms._HASH))
    first, inv = ms._distinct_rows(a)
    np.testing.assert_array_equal(first, np.arange(len(a)))
    np.testing.assert_array_equal(inv, np.arange(len(a)))


def test_many_features_by_pruned_tiles_match_dense_reference(monkeypatch, backend,
                                                             dtype):
    """D >= 16 on the CPU: each step's sums come from the BLAS tiles (float32
    values, the pairs near the bandwidth tested in float64), pruned by the
    partition trees (most tiles skipped on these blobs): the dense
    reference's centres and labels."""
    from kerneltools.estimators.neighbors.search import _blas as _neighbors_blas

    monkeypatch.setattr(_neighbors_blas, "PRUNE_TILE_PAIRS", 0)
    monkeypatch.setattr(_neighbors_blas, "LEAF_POINTS", 8)
    monkeypatch.setattr(_neighbors_blas, "TILE_ROWS", 16)
    calls = []
    sums = _neighbors_blas.BlasSearch.radius_sums
    monkeypatch.setattr(_neighbors_blas.BlasSearch, "radius_sums",
                        lambda self, *a: calls.append(1) or sums(self, *a))
    X = make_blobs(n_samples=160, n_features=16, centers=3, cluster_std=0.5,
                   center_box=(-6, 6), random_state=4)[0].astype(dtype)
    ms = MeanShift(bandwidth=3.5, backend=backend).fit(X)
    centres, labels = dense_mean_shift(X.astype(np.float64), 3.5)
    assert len(centres) == 3 and (len(calls) > 0) == (backend != "cuda")
    np.testing.assert_allclose(ms.cluster_centers_, centres, rtol=CENTRE_RTOL[dtype])
    np.testing.assert_array_equal(ms.labels_, labels)
