"""HDBSCAN against scikit-learn's and a dense Prim's minimum spanning tree.

With ``min_samples=1`` (core distances 0) mutual reachability is the plain
distance, which has no tied pairs on this data: the MST is unique and the
labels, probabilities and tree must be scikit-learn's exactly. With larger
``min_samples``, many mutual reachabilities tie at a core distance and
several MSTs exist: scikit-learn's Prim's order is replayed on the tied
edges (``_prim``), so labels, probabilities and tree must still be its
own; lattice and duplicated points go to scikit-learn's fit. The MST's
total weight is also checked against a dense Prim's in NumPy.
"""

from __future__ import annotations

import doctest
import warnings

import numpy as np
import pytest
import scipy.sparse
from scipy.spatial.distance import cdist
from sklearn import cluster as skc
from sklearn.datasets import make_blobs, make_moons
from sklearn.utils.estimator_checks import parametrize_with_checks

from kerneltools.estimators import HDBSCAN
from kerneltools.estimators.cluster import _boruvka, _hdbscan, _prim

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


def _data(shape: str, seed: int, n: int = 400) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if shape == "blobs":
        std = rng.uniform(0.2, 1.5, 5)
        return make_blobs(n, 2, centers=5, cluster_std=std, random_state=seed)[0]
    if shape == "moons":
        return make_moons(n, noise=0.06, random_state=seed)[0]
    if shape == "anisotropic":
        X = make_blobs(n, 3, centers=4, random_state=seed)[0]
        return X @ rng.normal(size=(3, 3))
    if shape == "noise":
        return rng.uniform(-1, 1, size=(n, 2))
    raise ValueError(shape)


def _dense_prim_weight(X, min_samples, alpha=1.0, metric="euclidean"):
    D = cdist(X, X, metric=metric)
    core = np.sort(D, axis=1)[:, min_samples - 1]
    M = np.maximum(np.maximum(core[:, None], core[None]), D / alpha)
    n, total = len(X), 0.0
    best, seen = M[0].copy(), np.zeros(n, bool)
    seen[0] = True
    best[0] = np.inf
    for _ in range(n - 1):
        j = int(np.argmin(np.where(seen, np.inf, best)))
        total += best[j]
        seen[j] = True
        best = np.minimum(best, M[j])
    return total


@pytest.mark.parametrize("shape", ["blobs", "moons", "anisotropic", "noise"])
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("kw", [
    {}, {"cluster_selection_method": "leaf"}, {"allow_single_cluster": True},
    {"alpha": 0.7}, {"max_cluster_size": 60}, {"min_cluster_size": 20}])
def test_tie_free_labels_match_sklearn(shape, seed, kw):
    X = _data(shape, seed)
    args = {"min_cluster_size": 8, "min_samples": 1, "copy": True, **kw}
    ours, ref = HDBSCAN(**args).fit(X), skc.HDBSCAN(**args).fit(X)
    np.testing.assert_array_equal(ours.labels_, ref.labels_)
    np.testing.assert_allclose(ours.probabilities_, ref.probabilities_, rtol=1e-12)
    for field in ("left_node", "right_node", "cluster_size"):
        np.testing.assert_array_equal(ours._single_linkage_tree_[field],
                                      ref._single_linkage_tree_[field])


def _assert_same_fit(ours, ref):
    np.testing.assert_array_equal(ours.labels_, ref.labels_)
    np.testing.assert_array_equal(ours.probabilities_, ref.probabilities_)
    for field in ("left_node", "right_node", "cluster_size", "value"):
        np.testing.assert_array_equal(ours._single_linkage_tree_[field],
                                      ref._single_linkage_tree_[field])


@pytest.mark.parametrize("shape", ["blobs", "moons", "anisotropic", "noise"])
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("kw", [
    {"min_samples": 3}, {"min_samples": 10}, {"min_samples": None},
    {"min_samples": 5, "cluster_selection_method": "leaf"},
    {"min_samples": 4, "alpha": 0.7, "allow_single_cluster": True},
    {"min_samples": 6, "metric": "manhattan"},
    {"min_samples": 6, "metric": "chebyshev"},
    {"min_samples": 6, "metric": "minkowski", "metric_params": {"p": 3}}])
def test_tied_core_distances_match_sklearn(shape, seed, kw):
    # mutual reachabilities tie at core distances: Prim's order replayed
    X = _data(shape, seed)
    args = {"min_cluster_size": 8, "copy": True, **kw}
    ours, ref = HDBSCAN(**args).fit(X), skc.HDBSCAN(**args).fit(X)
    assert ours._mst_route in ("prim", "boruvka")
    _assert_same_fit(ours, ref)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("alpha", [1.3, 5.0])
def test_alpha_above_one_matches_sklearn(seed, alpha):
    # pairs weigh a core distance out to alpha times it: beyond the lists,
    # scikit-learn's fit
    X = _data("blobs", seed)
    args = {"min_cluster_size": 8, "min_samples": 4, "alpha": alpha, "copy": True}
    _assert_same_fit(HDBSCAN(**args).fit(X), skc.HDBSCAN(**args).fit(X))


def _lattice(seed):
    return np.random.default_rng(seed).integers(0, 25, size=(400, 2)).astype(float)


def _duplicated(seed):
    X = _data("blobs", seed, n=200)
    return np.vstack([X, X[np.random.default_rng(seed).integers(0, 200, 200)]])


def _mirrored(seed):
    X = make_blobs(200, 2, centers=3, random_state=seed)[0]
    X[:, 0] = np.abs(X[:, 0]) + 0.5
    return np.vstack([X, X * [-1, 1]])


def _even_moons(seed):  # evenly spaced: equal distances everywhere
    return make_moons(400, noise=0.0, random_state=seed)[0]


@pytest.mark.parametrize("make", [_lattice, _duplicated, _mirrored, _even_moons])
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("min_samples", [None, 1, 3, 10])
def test_tied_distances_match_sklearn(make, seed, min_samples, capsys):
    X = make(seed)
    args = {"min_cluster_size": 8, "min_samples": min_samples, "copy": True}
    ours = HDBSCAN(verbose=1, **args).fit(X)
    _assert_same_fit(ours, skc.HDBSCAN(**args).fit(X))
    assert ours._mst_route == "sklearn"
    assert "tied distances" in capsys.readouterr().err


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("levels", [2, 4, 50])
def test_prim_tie_rules_match_sklearn(seed, levels):
    # integer points and core distances (many equal mutual reachabilities)
    # against scikit-learn's Prim's, on all pairs, then on the edges that
    # are in some MST
    from sklearn.cluster._hdbscan._linkage import (  # noqa: PLC0415
        mst_from_data_matrix,
    )
    from sklearn.metrics import DistanceMetric  # noqa: PLC0415

    rng = np.random.default_rng(seed)
    n = 60
    X = rng.integers(0, levels, size=(n, 2)).astype(float)
    core = rng.integers(0, levels, size=n).astype(float)
    ref = mst_from_data_matrix(X, core, DistanceMetric.get_metric("manhattan"))
    M = np.maximum(np.maximum(core[:, None], core[None]), cdist(X, X, "cityblock"))
    np.fill_diagonal(M, np.inf)
    a, b = np.nonzero(np.isfinite(M))
    for got in (_prim._prim(n, a, b, M[a, b]), _prim._prim(n, *_eligible(M))):
        for x, f in zip(got, ("current_node", "next_node", "distance")):
            np.testing.assert_array_equal(x, ref[f])


def _eligible(M):
    """The edges whose weight is their ends' bottleneck distance."""
    n = len(M)
    B = M.copy()  # minimax path weights (Floyd-Warshall on max/min)
    for k in range(n):
        B = np.minimum(B, np.maximum(B[:, k:k + 1], B[k:k + 1, :]))
    a, b = np.nonzero(np.isfinite(M) & (M <= B))
    return a, b, M[a, b]


@pytest.mark.parametrize("shape", ["blobs", "moons", "anisotropic", "noise"])
@pytest.mark.parametrize("min_samples", [3, 10])
@pytest.mark.parametrize("metric", ["euclidean", "manhattan", "chebyshev"])
def test_mst_weight_and_merge_heights(shape, min_samples, metric):
    X = _data(shape, 5, n=300)
    args = dict(min_cluster_size=10, min_samples=min_samples, metric=metric,
                copy=True)
    ours, ref = HDBSCAN(**args).fit(X), skc.HDBSCAN(**args).fit(X)
    heights = ours._single_linkage_tree_["value"]
    np.testing.assert_allclose(heights, np.sort(ref._single_linkage_tree_["value"]),
                               rtol=1e-12)
    cdist_name = {"manhattan": "cityblock"}.get(metric, metric)
    np.testing.assert_allclose(heights.sum(),
                               _dense_prim_weight(X, min_samples, 1.0, cdist_name),
                               rtol=1e-12)


def test_search_paths_agree(monkeypatch, backend):
    # the outside k-NN searches and the exact masked reductions, each alone
    X = _data("blobs", 2, n=600)
    args = dict(min_cluster_size=10, min_samples=1, copy=True, backend=backend)
    ref = skc.HDBSCAN(**{k: v for k, v in args.items() if k != "backend"}).fit(X)
    # (outside searches from, neighbours, grouped from, outside K)
    for rows, neighbours, grouped, k in ((10**9, 2, 8, 32), (0, 2, 8, 32),
                                         (10**9, 16, 8, 32), (0, 2, 2, 3),
                                         (0, 2, 10**9, 3), (0, 2, 2, 32)):
        monkeypatch.setattr(_boruvka, "OUTSIDE_MIN_ROWS", rows)
        monkeypatch.setattr(_boruvka, "OUTSIDE_MAX_COMPONENTS", 10**9)
        monkeypatch.setattr(_boruvka, "OUTSIDE_GROUPED_FROM", grouped)
        monkeypatch.setattr(_boruvka, "OUTSIDE_GROUPED_DIMS", 0)
        monkeypatch.setattr(_boruvka, "OUTSIDE_NEIGHBORS", k)
        monkeypatch.setattr(_hdbscan, "EXTRA_NEIGHBORS", neighbours)
        ours = HDBSCAN(**args).fit(X)
        np.testing.assert_array_equal(ours.labels_, ref.labels_)
        np.testing.assert_array_equal(ours.probabilities_, ref.probabilities_)


@pytest.mark.parametrize("min_samples", [1, 5])
def test_float32_and_non_finite_rows(min_samples):
    X = _data("blobs", 1).astype(np.float32)
    X[3, 0], X[10, 1], X[11] = np.inf, np.nan, [np.nan, np.inf]
    args = dict(min_cluster_size=8, min_samples=min_samples, copy=True)
    ours, ref = HDBSCAN(**args).fit(X), skc.HDBSCAN(**args).fit(X)
    np.testing.assert_array_equal(ours.labels_, ref.labels_)
    np.testing.assert_array_equal(ours.probabilities_, ref.probabilities_)
    np.testing.assert_array_equal(ours.dbscan_clustering(0.3),
                                  ref.dbscan_clustering(0.3))


def test_centres_match_sklearn():
    X = _data("blobs", 4)
    args = dict(min_cluster_size=10, min_samples=1, copy=True, store_centers="both")
    ours, ref = HDBSCAN(**args).fit(X), skc.HDBSCAN(**args).fit(X)
    np.testing.assert_allclose(ours.centroids_, ref.centroids_, rtol=1e-12)
    np.testing.assert_array_equal(ours.medoids_, ref.medoids_)


@pytest.mark.parametrize("make", [
    lambda X: dict(X=scipy.sparse.csr_matrix(X)),
    lambda X: dict(X=cdist(X, X), metric="precomputed"),
    lambda X: dict(X=X, metric=lambda a, b: np.abs(a - b).sum()),
    lambda X: dict(X=X, metric="cosine"),
])
def test_fallback_to_sklearn(make, capsys):
    X = _data("moons", 1, n=150)
    args = make(X)
    Xa = args.pop("X")
    ours = HDBSCAN(min_cluster_size=6, copy=True, verbose=1, **args).fit(Xa)
    ref = skc.HDBSCAN(min_cluster_size=6, copy=True, **args).fit(Xa)
    np.testing.assert_array_equal(ours.labels_, ref.labels_)
    assert "scikit-learn" in capsys.readouterr().err


def test_errors_and_warnings():
    X = _data("noise", 0, n=20)
    with pytest.raises(ValueError, match="min_samples"):
        HDBSCAN(min_samples=30, copy=True).fit(X)
    with pytest.raises(ValueError, match="min_cluster_size"):
        HDBSCAN(min_cluster_size=1, copy=True).fit(X)
    with pytest.raises(ValueError, match="backend"):
        HDBSCAN(backend="nope", copy=True).fit(X)
    with pytest.warns(FutureWarning, match="copy"):
        HDBSCAN().fit(X)


@parametrize_with_checks([HDBSCAN(copy=True)])
def test_sklearn_estimator_checks(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        check(estimator)


def test_doctests():
    assert doctest.testmod(_hdbscan, raise_on_error=True).attempted > 0


def test_round_join_matches_one_by_one():
    """A round's edges joined at once (a forest) or, where tied choices
    close a cycle, one by one: the same components as a plain union-find."""
    from kerneltools.estimators.cluster._components import MinLabels

    rng = np.random.default_rng(0)
    for cycle in (False, True):
        n = 60
        comps, ref = MinLabels(n), MinLabels(n)
        a = np.arange(0, n - 1, 2)
        b = a + 1  # a forest of pairs, one edge chosen by both ends
        a, b = np.concatenate([a, b[:5]]), np.concatenate([b, a[:5]])
        if cycle:  # components {0,1}, {2,3}, {4,5} closed into a triangle
            a, b = np.concatenate([a, [1, 3, 5]]), np.concatenate([b, [2, 4, 0]])
        order = rng.permutation(len(a))
        ka, kb = comps.join(a[order], b[order])
        for x, y in zip(a[order], b[order]):
            ref.union(int(x), int(y))
        ref.flatten()
        np.testing.assert_array_equal(comps.lab, ref.lab)
        assert len(ka) == n - len(np.unique(ref.lab))  # a spanning forest
