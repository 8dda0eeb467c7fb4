"""Radius neighbours, neighbour graphs and the graph transformers against
scikit-learn's brute force (and scipy's distances), on every backend, float32
and float64.

Radii are chosen away from the data's pairwise distances, so that no pair
sits on the boundary to rounding; equal distances are made on purpose where
the tie order is tested.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.spatial.distance import cdist
from sklearn import neighbors as skn
from sklearn.manifold import TSNE, Isomap
from sklearn.pipeline import make_pipeline

from kerneltools.estimators.neighbors import (
    KNeighborsTransformer,
    NearestNeighbors,
    RadiusNeighborsClassifier,
    RadiusNeighborsRegressor,
    RadiusNeighborsTransformer,
)

RTOL = {np.dtype(np.float32): 2e-6, np.dtype(np.float64): 1e-12}


def _points(dtype, n=120, q=30, d=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((n, d)).astype(dtype), rng.random((q, d)).astype(dtype)


def _safe_radius(X, Q, r, metric="euclidean"):
    """A radius near ``r`` at least 1e-4 away from every pairwise distance."""
    D = np.concatenate([cdist(Q, X, metric).ravel(), cdist(X, X, metric).ravel()])
    while np.min(np.abs(D - r)) < 1e-4:
        r += 3e-4
    return r


def _graph_distances(G, rows, X):
    """The direct float64 distance of each stored entry (row r, column c) of
    the sparse graph G: |rows[r] - X[c]|."""
    r = np.repeat(np.arange(G.shape[0]), np.diff(G.indptr))
    diff = rows[r].astype(np.float64) - X[G.indices].astype(np.float64)
    return np.sqrt(np.einsum("ij,ij->i", diff, diff))


def _reference_sets(Q, X, radius, metric="euclidean", exclude_self=False):
    """(distances, indices) per query from scipy's dense distances, in index order."""
    D = cdist(Q.astype(np.float64), X.astype(np.float64), metric)
    radii = np.broadcast_to(radius, (len(Q),))
    out = []
    for r, row in enumerate(D):
        ind = np.flatnonzero(row <= radii[r])
        if exclude_self:
            ind = ind[ind != r]
        out.append((row[ind], ind))
    return out


@pytest.mark.parametrize("metric", ["euclidean", "cityblock", "chebyshev", "cosine"])
def test_radius_neighbors_match_scipy(metric, backend, dtype):
    X, Q = _points(dtype)
    radius = _safe_radius(X, Q, {"cosine": 0.05}.get(metric, 0.3), metric)
    nn = NearestNeighbors(radius=radius, metric=metric, backend=backend).fit(X)
    atol = 1e-6 if metric == "cosine" else 0  # differences of numbers near 1
    for args, exclude in (((Q,), False), ((), True)):
        queries = Q if args else X
        ref = _reference_sets(queries, X, radius, metric, exclude)
        dist, ind = nn.radius_neighbors(*args)
        assert dist.dtype == object and ind.dtype == object
        for (rd, ri), d, i in zip(ref, dist, ind):
            np.testing.assert_array_equal(i, ri)  # index order, as sklearn
            np.testing.assert_allclose(d, rd, rtol=RTOL[dtype] * 10, atol=atol)
        dist, ind = nn.radius_neighbors(*args, sort_results=True)
        for (rd, ri), d, i in zip(ref, dist, ind):
            order = np.argsort(rd, kind="stable")
            np.testing.assert_array_equal(i, ri[order])
            np.testing.assert_allclose(d, rd[order], rtol=RTOL[dtype] * 10, atol=atol)


def test_radius_neighbors_ties_and_array_radii(backend, dtype):
    # integer grid points: many equal distances; sorted results keep index order
    X = np.array([[i, j] for i in range(6) for j in range(6)], dtype=dtype)
    Q = np.array([[2.0, 2.0], [0.5, 0.5], [9.0, 9.0]], dtype=dtype)
    nn = NearestNeighbors(backend=backend).fit(X)
    ref = skn.NearestNeighbors(algorithm="brute").fit(X.astype(np.float64))
    radii = np.array([1.5, 1.0, 0.5])
    for sort in (False, True):
        got = nn.radius_neighbors(Q, radius=radii, sort_results=sort)
        # (scikit-learn's brute force takes one radius: query by query)
        for r, (d, i) in enumerate(zip(*got)):
            rd, ri = ref.radius_neighbors(Q[r : r + 1].astype(np.float64),
                                          radius=radii[r], sort_results=sort)
            np.testing.assert_array_equal(i, ri[0])
            np.testing.assert_allclose(d, rd[0], rtol=RTOL[dtype])
    assert len(nn.radius_neighbors(Q, radius=radii)[1][2]) == 0
    with pytest.raises(ValueError, match="radius"):
        nn.radius_neighbors(Q, radius=[1.0, 2.0])
    with pytest.raises(ValueError, match="radius"):
        nn.radius_neighbors(Q, radius=-1.0)


@pytest.mark.parametrize("mode", ["connectivity", "distance"])
def test_graphs_match_sklearn_exactly(mode, backend, dtype):
    X, Q = _points(dtype, n=80, q=20)
    radius = _safe_radius(X, Q, 0.3)
    nn = NearestNeighbors(n_neighbors=4, radius=radius, backend=backend).fit(X)
    ref = skn.NearestNeighbors(n_neighbors=4, radius=radius, algorithm="brute").fit(
        X.astype(np.float64))
    for args in ((Q,), ()):
        ref_args = tuple(a.astype(np.float64) for a in args)
        pairs = [
            (nn.kneighbors_graph(*args, mode=mode),
             ref.kneighbors_graph(*ref_args, mode=mode)),
            (nn.radius_neighbors_graph(*args, mode=mode),
             ref.radius_neighbors_graph(*ref_args, mode=mode)),
            (nn.radius_neighbors_graph(*args, mode=mode, sort_results=mode == "distance"),
             ref.radius_neighbors_graph(*ref_args, mode=mode,
                                        sort_results=mode == "distance")),
        ]
        for a, b in pairs:
            assert type(a) is type(b) and a.format == "csr"
            np.testing.assert_array_equal(a.indptr, b.indptr)
            np.testing.assert_array_equal(a.indices, b.indices)
            np.testing.assert_allclose(a.data, b.data, rtol=RTOL[dtype])


@pytest.mark.filterwarnings("ignore:Outlier label 7 is not in training classes")
@pytest.mark.parametrize("weights", ["uniform", "distance", lambda d: d**2 + 1])
def test_radius_classifier_matches_sklearn(weights, backend, dtype):
    X, Q = _points(dtype, n=150, q=40)
    y = (X[:, 0] + X[:, 1] > 1).astype(int) + (X[:, 2] > 0.7)
    Q = np.concatenate([Q, X[:3], [[5.0, 5.0, 5.0]]]).astype(dtype)  # exact, outlier
    radius = _safe_radius(X, Q, 0.2)
    for outlier in ("most_frequent", 1, 7):
        ours = RadiusNeighborsClassifier(radius, weights=weights, outlier_label=outlier,
                                         backend=backend).fit(X, y)
        ref = skn.RadiusNeighborsClassifier(radius, weights=weights, algorithm="brute",
                                            outlier_label=outlier).fit(X, y)
        with warnings.catch_warnings(record=True) as w_ours:
            warnings.simplefilter("always")
            p = ours.predict_proba(Q)
        with warnings.catch_warnings(record=True) as w_ref:
            warnings.simplefilter("always")
            p_ref = ref.predict_proba(Q)
        np.testing.assert_allclose(p, p_ref, rtol=1e-5, atol=1e-12)
        assert [str(m.message) for m in w_ours] == [str(m.message) for m in w_ref]
        np.testing.assert_array_equal(ours.predict(Q), ref.predict(Q))
        assert ours.outlier_label_ == ref.outlier_label_
    # no outlier label: scikit-learn's error, naming the queries
    ours = RadiusNeighborsClassifier(radius, backend=backend).fit(X, y)
    with pytest.raises(ValueError, match=r"No neighbors found for test samples"):
        ours.predict(Q)
    # multi-output, leave-one-out (X=None)
    Y = np.stack([y, (X[:, 2] > 0.5).astype(int)], axis=1)
    ours = RadiusNeighborsClassifier(radius * 2, weights=weights,
                                     backend=backend).fit(X, Y)
    ref = skn.RadiusNeighborsClassifier(radius * 2, weights=weights,
                                        algorithm="brute").fit(X, Y)
    np.testing.assert_array_equal(ours.predict(None), ref.predict(None))
    for a, b in zip(ours.predict_proba(Q[:10]), ref.predict_proba(Q[:10])):
        np.testing.assert_allclose(a, b, rtol=1e-5)


def test_radius_classifier_bad_outlier_labels():
    X, y = np.arange(6.0)[:, None], np.array([0, 0, 1, 1, 2, 2])
    with pytest.raises(TypeError, match="dtype of outlier_label"):
        RadiusNeighborsClassifier(outlier_label="x").fit(X, y)
    with pytest.raises(ValueError, match="length of outlier_label"):
        RadiusNeighborsClassifier(outlier_label=[0, 1]).fit(X, y)
    with pytest.raises(TypeError, match="supposed to be a scalar"):
        RadiusNeighborsClassifier(outlier_label=[[0, 1]]).fit(X, y)


@pytest.mark.parametrize("weights", ["uniform", "distance", lambda d: 1 / (d + 1)])
def test_radius_regressor_matches_sklearn(weights, backend, dtype):
    X, Q = _points(dtype, n=150, q=40)
    y = np.stack([np.sin(6 * X[:, 0]), X[:, 1] ** 2], axis=1)
    Q = np.concatenate([Q, X[:3], [[5.0, 5.0, 5.0]]]).astype(dtype)
    radius = _safe_radius(X, Q, 0.2)
    for target in (y, y[:, 0]):
        ours = RadiusNeighborsRegressor(radius, weights=weights,
                                        backend=backend).fit(X, target)
        ref = skn.RadiusNeighborsRegressor(radius, weights=weights,
                                           algorithm="brute").fit(X, target)
        with pytest.warns(UserWarning, match="predicting NaN"):
            got = ours.predict(Q)
        with pytest.warns(UserWarning, match="predicting NaN"):
            exp = ref.predict(Q)
        assert got.shape == exp.shape
        np.testing.assert_allclose(got, exp, rtol=1e-5)
        with warnings.catch_warnings():  # (points alone in their radius: NaN)
            warnings.simplefilter("ignore", UserWarning)
            np.testing.assert_allclose(ours.predict(None), ref.predict(None), rtol=1e-5)


def test_radius_regressor_integer_targets_predict_nan_for_outliers():
    """scikit-learn 1.9 casts its NaN into an integer y's dtype here (a huge
    negative prediction, no warning): ours predicts NaN and warns."""
    X, y = np.arange(6.0)[:, None], np.arange(6)
    reg = RadiusNeighborsRegressor(radius=1.0).fit(X, y)
    with pytest.warns(UserWarning, match="predicting NaN"):
        got = reg.predict([[2.0], [50.0]])
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, [2.0, np.nan])


@pytest.mark.parametrize("mode", ["distance", "connectivity"])
def test_transformers_match_sklearn(mode, backend, dtype):
    X, Q = _points(dtype, n=80, q=20)
    radius = _safe_radius(X, Q, 0.25)
    pairs = [
        (KNeighborsTransformer(mode=mode, n_neighbors=5, backend=backend),
         skn.KNeighborsTransformer(mode=mode, n_neighbors=5, algorithm="brute")),
        (RadiusNeighborsTransformer(mode=mode, radius=radius, backend=backend),
         skn.RadiusNeighborsTransformer(mode=mode, radius=radius, algorithm="brute")),
    ]
    for ours, ref in pairs:
        for a, b, rows in ((ours.fit_transform(X), ref.fit_transform(X), X),
                           (ours.transform(Q), ref.transform(Q), Q)):
            assert type(a) is type(b)
            np.testing.assert_array_equal(a.indptr, b.indptr)
            np.testing.assert_array_equal(a.indices, b.indices)
            if mode == "connectivity":
                np.testing.assert_array_equal(a.data, b.data)
                continue
            # scikit-learn's distances come from the expanded formula, whose
            # rounding depends on the CPU and the BLAS (a point's distance to
            # itself: 0.0 on Intel, 4.2e-8 on an AMD EPYC): ours against
            # direct differences in float64, scikit-learn's to its rounding
            exact = _graph_distances(a, rows, X)
            np.testing.assert_allclose(a.data, exact, rtol=RTOL[dtype])
            np.testing.assert_allclose(b.data, exact, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(ours.get_feature_names_out(),
                                      ref.get_feature_names_out())


def test_tsne_and_isomap_run_on_our_graphs():
    """scikit-learn's approximate-nearest-neighbours pattern: the graph from
    our transformer, the embedding from scikit-learn, the same as with
    scikit-learn's transformer (the same graph, the same random state)."""
    X, _ = _points(np.float64, n=60, q=1, d=5, seed=3)

    def tsne(transformer):
        return make_pipeline(transformer, TSNE(metric="precomputed", perplexity=5,
                                               init="random", random_state=0,
                                               max_iter=250)).fit_transform(X)

    np.testing.assert_allclose(
        tsne(KNeighborsTransformer(n_neighbors=16)),
        tsne(skn.KNeighborsTransformer(n_neighbors=16)), rtol=1e-6, atol=1e-8)

    def isomap(transformer):
        return make_pipeline(transformer, Isomap(n_neighbors=10, n_components=2,
                                                 metric="precomputed")).fit_transform(X)

    np.testing.assert_allclose(
        np.abs(isomap(KNeighborsTransformer(n_neighbors=10))),
        np.abs(isomap(skn.KNeighborsTransformer(n_neighbors=10))), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("array_radii", [False, True])
def test_pruned_radius_search_matches_scipy(array_radii, monkeypatch, dtype):
    """Low dimension, enough points: the count and the K-min visit only the
    cells within the radius (block-sparse); the sets are scipy's, up to
    pairs at the radius to rounding (too many points for a radius away from
    every distance)."""
    from kerneltools.estimators.neighbors.search import _pruned as _neighbors_pruned

    monkeypatch.setattr(_neighbors_pruned, "PRUNE_MIN_FIT", 500)
    monkeypatch.setattr(_neighbors_pruned, "PRUNE_MIN_PAIRS", 10_000)
    monkeypatch.setattr(_neighbors_pruned, "RADIUS_MIN_PAIRS", 10_000)
    X, Q = _points(dtype, n=1500, q=300, d=3, seed=5)
    rng = np.random.default_rng(1)
    radii = rng.uniform(0.05, 0.15, len(Q)) if array_radii else np.full(len(Q), 0.12)
    nn = NearestNeighbors(radius=0.12, backend="cpu").fit(X)
    assert nn._fit_method == "block_sparse"
    dist, ind = nn.radius_neighbors(Q, radius=radii if array_radii else 0.12)
    D = cdist(Q.astype(np.float64), X.astype(np.float64))
    tol = 1e-5 * radii[:, None]
    assert sum(len(i) for i in ind) > 5 * len(Q)  # real neighbourhoods
    for r, (d, i) in enumerate(zip(dist, ind)):
        assert np.all(np.diff(i) > 0)  # index order
        assert np.all(D[r, i] <= radii[r] + tol[r])
        inside = np.flatnonzero(D[r] < radii[r] - tol[r])
        assert set(inside) <= set(i)
        np.testing.assert_allclose(d, D[r, i], rtol=RTOL[dtype] * 10)
    # counts that miss every point: each row's K slots fill, it is searched
    # again with a larger K, and the sets come out the same
    monkeypatch.setattr(_neighbors_pruned.PrunedSearch, "count",
                        lambda self, X, t: np.zeros(len(X), dtype=np.int64))
    again = nn.radius_neighbors(Q, radius=radii if array_radii else 0.12)
    for a, b in zip(ind, again[1]):
        np.testing.assert_array_equal(a, b)


def test_expanded_radius_search_matches_scipy(monkeypatch, backend, dtype):
    """D >= 20: counts and the masked K-min on the expanded form, re-ranked
    exactly; the sets and distances are scipy's, in both orders, for fitted
    points excluded from their own rows, for counts that miss every point
    (each row searched again with larger K) and for an infinite radius (a
    plain K-min: no masking bound fits). The engine's route: the BLAS tiles
    (next test) are turned off."""
    from kerneltools.estimators.neighbors.search import _blas as _neighbors_blas, _formula as _neighbors_search

    monkeypatch.setattr(_neighbors_blas, "BLAS_MIN_DIM", 10**6)
    X, Q = _points(dtype, n=150, q=25, d=24, seed=7)
    radius = _safe_radius(X, Q, 1.5)
    nn = NearestNeighbors(radius=radius, backend=backend).fit(X)
    search, _ = nn._search(Q)
    assert type(search) is _neighbors_search.ExpandedSearch

    def check(got, queries, exclude, r=radius):
        ref = _reference_sets(queries, X, r, exclude_self=exclude)
        assert sum(len(i) for i in got[1]) > 2 * len(queries)  # real neighbourhoods
        for (d, i), (rd, ri) in zip(zip(*got), ref):
            np.testing.assert_array_equal(i, ri)
            np.testing.assert_allclose(d, rd, rtol=RTOL[dtype] * 10)

    check(nn.radius_neighbors(Q), Q, False)
    check(nn.radius_neighbors(), X, True)
    dist, ind = nn.radius_neighbors(Q, sort_results=True)
    for d, i in zip(dist, ind):
        order = np.lexsort((i, d))
        np.testing.assert_array_equal(order, np.arange(len(i)))
    check(nn.radius_neighbors(Q, radius=np.inf), Q, False, np.inf)
    monkeypatch.setattr(_neighbors_search.ExpandedSearch, "count",
                        lambda self, X, t: np.zeros(len(X), dtype=np.int64))
    check(nn.radius_neighbors(Q), Q, False)


@pytest.mark.parametrize("offset", [0.0, 1000.0])
def test_blas_radius_search_matches_scipy(offset, monkeypatch, backend, dtype):
    """D >= 16 on the CPU: one pass of BLAS tiles (several tiles each way
    here), every candidate tested again in float64; the sets and distances
    are scipy's in both orders, with fitted points excluded from their own
    rows, duplicates (distance 0, equal distances in index order), radii
    per query, far from the origin in float32 (where the expanded form
    without centring would lose every digit), and an infinite radius (the
    general route)."""
    from kerneltools.estimators.neighbors.search import _blas as _neighbors_blas

    monkeypatch.setattr(_neighbors_blas, "TILE_ROWS", 8)
    monkeypatch.setattr(_neighbors_blas, "TILE_BYTES", 8 * 64 * 4)
    X, Q = _points(dtype, n=150, q=25, d=24, seed=7)
    X[100:110] = X[:10]  # duplicates: ties at every distance
    X, Q = X + dtype.type(offset), Q + dtype.type(offset)
    radius = _safe_radius(X, Q, 1.5)
    nn = NearestNeighbors(radius=radius, backend=backend).fit(X)
    # (on a GPU the engine's route runs: the same results)
    on_host = isinstance(nn._search(Q)[0], _neighbors_blas.BlasSearch)
    assert on_host == (backend != "cuda")
    radii = _safe_radius(X, Q, 1.2) + np.arange(len(Q)) * 0.02
    tol = RTOL[dtype] * 10 * (1 + offset)  # float32 data rounded at ~1000

    cases = ((Q, (Q,), radius), (X, (), radius), (Q, (Q, radii), radii))
    for queries, args, r in cases:
        ref = _reference_sets(queries, X, r, exclude_self=not args)
        dist, ind = nn.radius_neighbors(*args)
        assert sum(len(i) for i in ind) > 2 * len(queries)  # real neighbourhoods
        for (rd, ri), d, i in zip(ref, dist, ind):
            np.testing.assert_array_equal(i, ri)
            np.testing.assert_allclose(d, rd, rtol=tol, atol=tol)
        dist, ind = nn.radius_neighbors(*args, sort_results=True)
        for (rd, ri), d, i in zip(ref, dist, ind):
            order = np.lexsort((ri, rd))
            np.testing.assert_array_equal(i, ri[order])  # ties by index
            np.testing.assert_allclose(d, rd[order], rtol=tol, atol=tol)
    if offset == 0:
        dist, ind = nn.radius_neighbors(Q, radius=np.inf)
        assert all(np.array_equal(i, np.arange(len(X))) for i in ind)


def test_blas_radius_tiles_pruned_by_partition_trees(monkeypatch, backend, dtype):
    """Clustered points: the tiles of query leaves and fitted leaves whose
    balls lie beyond the radius are skipped (most of them here), and the
    sets and distances stay scipy's, by index and sorted, per-query radii
    and X=None included; a later small query (no pruning) reads the fitted
    points in their sorted order."""
    from sklearn.datasets import make_blobs

    from kerneltools.estimators.neighbors.search import _blas as _neighbors_blas

    monkeypatch.setattr(_neighbors_blas, "PRUNE_TILE_PAIRS", 0)
    monkeypatch.setattr(_neighbors_blas, "LEAF_POINTS", 16)
    monkeypatch.setattr(_neighbors_blas, "TILE_ROWS", 16)
    monkeypatch.setattr(_neighbors_blas, "TILE_BYTES", 16 * 64 * 4)
    P = make_blobs(n_samples=600, n_features=16, centers=6, cluster_std=1.0,
                   center_box=(-30, 30), random_state=1)[0].astype(dtype)
    X, Q = P[:500], P[500:]
    radius = _safe_radius(X, Q, 4.5)
    nn = NearestNeighbors(radius=radius, backend=backend).fit(X)
    search = nn._search(Q)[0]
    if backend != "cuda":  # (a GPU takes the engine's route: the same results)
        plan = search._tile_plan(Q, np.full(len(Q), radius**2))
        assert plan.keep.mean() < 0.5  # tiles pruned
    radii = radius * (0.8 + 0.4 * (np.arange(len(Q)) % 2))
    for queries, args, r in ((Q, (Q,), radius), (Q, (Q, radii), radii), (X, (), radius),
                             (Q[:3], (Q[:3],), radius)):
        ref = _reference_sets(queries, X, r, exclude_self=not args)
        for sort in (False, True):
            dist, ind = nn.radius_neighbors(*args, sort_results=sort)
            assert sum(len(i) for i in ind) > 2 * len(queries)  # real neighbourhoods
            for (rd, ri), d, i in zip(ref, dist, ind):
                order = np.lexsort((ri, rd)) if sort else np.arange(len(ri))
                np.testing.assert_array_equal(i, ri[order])
                np.testing.assert_allclose(d, rd[order], rtol=RTOL[dtype] * 10)


def _blobs(dtype, n=240):
    from sklearn.datasets import make_blobs

    X = make_blobs(n_samples=n, centers=3, cluster_std=0.6, random_state=2)[0]
    return X.astype(dtype)


def test_dbscan_on_our_radius_graph(backend, dtype):
    """scikit-learn's DBSCAN(metric='precomputed') on our radius graph gives
    the labels of its own DBSCAN on the points."""
    from sklearn.cluster import DBSCAN

    X = _blobs(dtype)
    eps = _safe_radius(X, X, 0.35)
    graph = NearestNeighbors(radius=eps, backend=backend).fit(X).radius_neighbors_graph(
        X, mode="distance")
    ours = DBSCAN(eps=eps, min_samples=5, metric="precomputed").fit(graph).labels_
    ref = DBSCAN(eps=eps, min_samples=5).fit(X.astype(np.float64)).labels_
    assert len(set(ref)) >= 3  # clusters and noise
    np.testing.assert_array_equal(ours, ref)


@pytest.mark.filterwarnings("ignore:Graph is not fully connected")  # (3 far blobs)
def test_spectral_clustering_on_our_knn_graph(backend, dtype):
    """SpectralClustering(affinity='precomputed_nearest_neighbors') on our
    K-nearest graph: scikit-learn's labels with affinity='nearest_neighbors'
    (the same connectivity, self included), up to a permutation."""
    from sklearn.cluster import SpectralClustering
    from sklearn.metrics import adjusted_rand_score

    X = _blobs(dtype)
    graph = NearestNeighbors(n_neighbors=10, backend=backend).fit(X).kneighbors_graph(
        X, mode="distance")
    ours = SpectralClustering(n_clusters=3, affinity="precomputed_nearest_neighbors",
                              n_neighbors=10, random_state=0).fit(graph).labels_
    ref = SpectralClustering(n_clusters=3, affinity="nearest_neighbors", n_neighbors=10,
                             random_state=0).fit(X.astype(np.float64)).labels_
    assert adjusted_rand_score(ours, ref) == 1.0


def test_lof_on_our_knn_graph(backend, dtype):
    """LocalOutlierFactor(metric='precomputed') on our K-nearest graph (each
    point and its K nearest): scikit-learn's scores on the points."""
    X = _blobs(dtype)
    graph = KNeighborsTransformer(n_neighbors=12, backend=backend).fit_transform(X)
    ours = skn.LocalOutlierFactor(n_neighbors=12, metric="precomputed").fit(graph)
    ref = skn.LocalOutlierFactor(n_neighbors=12).fit(X.astype(np.float64))
    np.testing.assert_allclose(ours.negative_outlier_factor_,
                               ref.negative_outlier_factor_, rtol=RTOL[dtype] * 10)
    np.testing.assert_array_equal(ours.fit_predict(graph), ref.fit_predict(X))


def _grid_problem(dtype):
    """1-D integer points with duplicates: every distance (0, 1, 2, ...) and
    every 'distance' weight (1, 1/2, ...) is exact, so that sums do not depend
    on their order and the votes and means must equal scikit-learn's bit for
    bit; many equal votes (ties), queries on fitted points (distance 0),
    queries with no neighbour."""
    X = np.array([0, 0, 1, 2, 2, 2, 3, 5, 6, 6, 8, 9], dtype=dtype)[:, None]
    Q = np.array([0, 1, 2, 4, 5.5, 7, 12, 6, 20], dtype=dtype)[:, None]
    labels = np.array([[0, 2], [1, 2], [1, 0], [0, 0], [2, 1], [2, 1], [1, 1],
                       [0, 2], [1, 0], [2, 0], [0, 1], [1, 2]])
    targets = np.stack([labels[:, 0] * 2.0 - 1, labels[:, 1] / 4.0], axis=1)
    return X, Q, labels, targets.astype(dtype)


def _inverse_plus_one(dist):
    """A weights callable: scikit-learn hands it the object array of rows."""
    return np.array([1.0 / (d + 1) for d in dist], dtype=object)


@pytest.mark.filterwarnings("ignore:Outlier label 5 is not in training classes")
def test_radius_predictions_equal_sklearn_exactly(backend, dtype):
    X, Q, labels, targets = _grid_problem(dtype)
    for weights in ("uniform", "distance", _inverse_plus_one):
        for y, outlier in ((labels[:, 0], "most_frequent"), (labels, [1, 5])):
            kw = dict(radius=1.5, weights=weights, outlier_label=outlier)
            ours = RadiusNeighborsClassifier(**kw, backend=backend).fit(X, y)
            ref = skn.RadiusNeighborsClassifier(**kw).fit(X, y)
            for args in ((Q,), (None,)):
                with warnings.catch_warnings(record=True) as w_ours:
                    warnings.simplefilter("always")
                    p = ours.predict_proba(*args)
                with warnings.catch_warnings(record=True) as w_ref:
                    warnings.simplefilter("always")
                    p_ref = ref.predict_proba(*args)
                assert [str(m.message) for m in w_ours] == [
                    str(m.message) for m in w_ref]
                for a, b in zip(np.atleast_3d(p), np.atleast_3d(p_ref)):
                    assert a.dtype == b.dtype
                    np.testing.assert_array_equal(a, b)
                np.testing.assert_array_equal(ours.predict(*args), ref.predict(*args))
        for y in (targets, targets[:, 1]):
            ours = RadiusNeighborsRegressor(1.5, weights=weights,
                                            backend=backend).fit(X, y)
            ref = skn.RadiusNeighborsRegressor(1.5, weights=weights).fit(X, y)
            with pytest.warns(UserWarning, match="predicting NaN"):
                got = ours.predict(Q)
            with pytest.warns(UserWarning, match="predicting NaN"):
                exp = ref.predict(Q)
            assert got.dtype == exp.dtype and got.shape == exp.shape
            np.testing.assert_array_equal(got, exp)
            np.testing.assert_array_equal(ours.predict(None), ref.predict(None))


def test_radius_regressor_weights_errors():
    X, Q, _, targets = _grid_problem(np.float64)
    zero = lambda d: np.array([0.0 * r for r in d], dtype=object)  # noqa: E731
    with pytest.raises(ZeroDivisionError, match="Weights sum to zero"):
        RadiusNeighborsRegressor(1.5, weights=zero).fit(X, targets).predict(Q[:3])
    with pytest.raises(ZeroDivisionError, match="Weights sum to zero"):
        skn.RadiusNeighborsRegressor(1.5, weights=zero).fit(X, targets).predict(Q[:3])
    ragged = lambda d: np.array([r[:1] for r in d], dtype=object)  # noqa: E731
    with pytest.raises(ValueError, match="'weights' callable must return"):
        RadiusNeighborsRegressor(1.5, weights=ragged).fit(X, targets).predict(Q[:3])


def test_pruned_radius_search_exact_ties_duplicates_far_from_origin(
        monkeypatch, backend, dtype):
    """The pruned (low-dimension) radius search against scipy's cKDTree, where
    every distance is exact in float32: points on a grid of step 1/8 at
    1024 from the origin, with many duplicates, pairs exactly at the radius
    (included: ``d <= r``), radius 0 (the duplicates only) and per-query radii
    among them; ``sort_results`` (ties by index) and ``X=None`` (each point
    left out of its own row, its duplicates kept)."""
    from scipy.spatial import cKDTree

    from kerneltools.estimators.neighbors.search import _pruned as _neighbors_pruned

    monkeypatch.setattr(_neighbors_pruned, "PRUNE_MIN_FIT", 500)
    monkeypatch.setattr(_neighbors_pruned, "PRUNE_MIN_PAIRS", 10_000)
    monkeypatch.setattr(_neighbors_pruned, "RADIUS_MIN_PAIRS", 10_000)
    rng = np.random.default_rng(7)
    sites = rng.integers(0, 8, size=(1100, 3))
    X = (1024 + sites[:800] / 8).astype(dtype)
    Q = (1024 + sites[800:] / 8).astype(dtype)  # sites shared with X: distance 0
    radii = rng.choice([0.0, 0.125, 0.25, 0.3], size=len(Q))
    tree = cKDTree(X.astype(np.float64))
    nn = NearestNeighbors(radius=0.25, backend=backend).fit(X)
    assert nn._fit_method == "block_sparse"
    cases = [(Q, 0.0, False), (Q, radii, True), (None, 0.25, True)]
    for q, radius, sort in cases:
        dist, ind = nn.radius_neighbors(q, radius=radius, sort_results=sort)
        P = X if q is None else q
        rr = np.broadcast_to(radius, (len(P),))
        # exact distances: a nudge of 1e-9 keeps the pairs at the radius
        expected = tree.query_ball_point(P.astype(np.float64), rr + 1e-9)
        total = 0
        for r, (d, i) in enumerate(zip(dist, ind)):
            e = np.array(sorted(expected[r]), dtype=np.int64)
            if q is None:
                e = e[e != r]
            de = np.sqrt(((X[e].astype(np.float64) - P[r]) ** 2).sum(1))
            if sort:
                order = np.lexsort((e, de))
                e, de = e[order], de[order]
            np.testing.assert_array_equal(i, e)
            np.testing.assert_allclose(d, de, rtol=RTOL[dtype])
            total += len(e)
        assert total > len(P)  # duplicates and neighbourhoods, not empty rows


def _boundary_problem(dtype):
    """Points at the radius (1) to rounding, among 700 others: at squared
    distance 1 + 2^-30 (1 in float32 arithmetic: scikit-learn, in float64,
    leaves it out), 1 + 2^-52 (its distance rounds to 1: left out too, the
    test is on squared distances) and exactly 1 (kept), with duplicates."""
    rng = np.random.default_rng(3)
    edge = np.array([[1.0, 2.0**-15, 0.0], [1.0, 2.0**-26, 0.0], [1.0, 0.0, 0.0],
                     [0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [0.5, 0.5, 0.5]])
    X = np.concatenate([edge, rng.uniform(-2, 2, size=(700, 3))]).astype(dtype)
    Q = np.concatenate([np.zeros((2, 3)), rng.uniform(-2, 2, size=(60, 3))])
    Q = Q.astype(dtype)
    return X, Q


@pytest.mark.parametrize("pruned", [False, True])
def test_radius_sets_equal_sklearn_trees_at_the_boundary(pruned, monkeypatch, backend,
                                                         dtype):
    """Every candidate is tested on its float64 squared distance, summed
    feature by feature as scikit-learn's k-d tree does (on float32 data
    too): the sets equal its own, pairs at the radius to rounding included,
    by index and sorted (ties by index), with a radius per query, X=None
    and (pruned) queries in several chunks."""
    from kerneltools.estimators.neighbors.search import _pruned as _neighbors_pruned

    monkeypatch.setattr(_neighbors_pruned, "PRUNE_MIN_FIT", 500)
    for name in ("PRUNE_MIN_PAIRS", "RADIUS_MIN_PAIRS"):  # the engine's, the kernel's
        monkeypatch.setattr(_neighbors_pruned, name, 10_000 if pruned else 10**9)
    monkeypatch.setattr(_neighbors_pruned, "PRUNE_QUERY_CHUNK",
                        256 if pruned else 2**20)
    X, Q = _boundary_problem(dtype)
    nn = NearestNeighbors(radius=1.0, backend=backend).fit(X)
    assert nn._fit_method == "block_sparse"
    tree = skn.KDTree(X)
    radii = np.where(np.arange(len(Q)) % 2, 1.0, 0.75)
    for args, queries, r in (((Q,), Q, 1.0), ((Q, radii), Q, radii), ((), X, 1.0)):
        for sort in (False, True):
            dist, ind = nn.radius_neighbors(*args, sort_results=sort)
            ri, rd = tree.query_radius(queries, r, return_distance=True)
            for k, (d, i, e_i, e_d) in enumerate(zip(dist, ind, ri, rd)):
                if not args:  # X=None: each point leaves itself out
                    e_i, e_d = e_i[e_i != k], e_d[e_i != k]
                order = np.lexsort((e_i, e_d)) if sort else np.argsort(e_i)
                np.testing.assert_array_equal(i, e_i[order])
                np.testing.assert_allclose(d, e_d[order], rtol=RTOL[dtype])
    at_origin = set(nn.radius_neighbors(Q[:1])[1][0])
    assert {2, 3, 4} <= at_origin and not {0, 1} & at_origin  # the boundary cases


@pytest.mark.parametrize("n_features", [3, 5])
def test_radius_sets_equal_sklearn_trees_at_the_boundary_unpruned(n_features, backend,
                                                                  dtype):
    """The unpruned route (fewer than PRUNE_MIN_FIT points, or 4 to 15
    features) tests its candidates in float64 too: a float32 pair at squared
    distance 1 + 2^-30 (exactly 1 in float32) is outside radius 1, as in
    scikit-learn's k-d tree; pairs exactly at the radius are kept."""
    X, Q = _boundary_problem(dtype)
    X, Q = X[:300], Q[:30]
    pad = n_features - 3
    X = np.pad(X, ((0, 0), (0, pad)))
    Q = np.pad(Q, ((0, 0), (0, pad)))
    nn = NearestNeighbors(radius=1.0, backend=backend).fit(X)
    tree = skn.KDTree(X)
    for sort in (False, True):
        dist, ind = nn.radius_neighbors(Q, sort_results=sort)
        ri, rd = tree.query_radius(Q, 1.0, return_distance=True)
        for d, i, e_i, e_d in zip(dist, ind, ri, rd):
            order = np.lexsort((e_i, e_d)) if sort else np.argsort(e_i)
            np.testing.assert_array_equal(i, e_i[order])
            np.testing.assert_allclose(d, e_d[order], rtol=RTOL[dtype])
    at_origin = set(nn.radius_neighbors(Q[:1])[1][0])
    assert {2, 3, 4} <= at_origin and not {0, 1} & at_origin
