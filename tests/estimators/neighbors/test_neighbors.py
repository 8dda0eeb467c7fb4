"""k-NN estimators against scikit-learn's brute force, on its bundled data sets.

Neighbour lists are compared tie-tolerantly: distances must agree, and the
indices must agree except among points tied (to rounding) with the K-th
distance, where either side may pick any of the tied points; every index
returned is then checked against an independent distance computation.
"""

from __future__ import annotations

import doctest
import pickle
import warnings
from functools import cache

import numpy as np
import pytest
from sklearn import datasets
from sklearn import neighbors as skn
from sklearn.metrics import pairwise_distances
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from kerneltools.estimators.neighbors import _metrics as _neighbors_metrics
from kerneltools.estimators.neighbors.search import SearchCase
from kerneltools.estimators.neighbors.search import _formula as _neighbors_search
from kerneltools.estimators import neighbors
from kerneltools.estimators.neighbors import (
    KNeighborsClassifier,
    KNeighborsRegressor,
    NearestNeighbors,
)

#: Relative tolerance on distances. scikit-learn computes float32 inputs in
#: float64; kerneltools keeps float32, whose rounding (a few 1e-7 relative
#: after sums over up to 64 features) sets the float32 bound.
DIST_RTOL = {np.dtype(np.float32): 2e-6, np.dtype(np.float64): 1e-6}
DATASETS = ("iris", "digits", "breast_cancer", "diabetes")


@cache
def _load(name: str):
    """(X fitted, y fitted, X queries, y queries): small subsamples, fixed."""
    X, y = getattr(datasets, f"load_{name}")(return_X_y=True)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(X))[:400]  # the numpy backend is slow on more
    X, y = X[order], y[order]
    n_fit = int(0.75 * len(X))
    return X[:n_fit], y[:n_fit], X[n_fit:], y[n_fit:]


def data(name: str, dtype=np.float64):
    X, y, Q, yq = _load(name)
    return X.astype(dtype), y, Q.astype(dtype), yq


def assert_neighbors_match(
    ref, got, X, Q, *, rtol, atol=0.0, metric="euclidean", metric_params=None
):
    """``ref``/``got``: (dist, ind) of the same queries ``Q`` among ``X``."""
    (d_ref, i_ref), (d, i) = ref, got
    assert i.shape == i_ref.shape and i.dtype.kind == "i"
    np.testing.assert_allclose(d, d_ref, rtol=rtol, atol=atol)
    for r in range(len(i)):
        tol = rtol * abs(d_ref[r, -1]) + atol
        clear = d_ref[r] < d_ref[r, -1] - tol  # not tied with the K-th
        assert set(i[r][clear]) == set(i_ref[r][clear]), f"row {r}"
        exact = pairwise_distances(
            Q[r : r + 1].astype(np.float64),
            X[i[r]].astype(np.float64),
            metric=metric,
            **(metric_params or {}),
        )[0]
        np.testing.assert_allclose(d[r], exact, rtol=rtol, atol=atol)


def assert_radius_match(ref, got, *, rtol, atol=0.0):
    for (dr, ir), (dg, ig) in zip(zip(*ref), zip(*got)):
        order = np.argsort(ir)
        np.testing.assert_array_equal(np.sort(ig), ir[order])
        np.testing.assert_allclose(dg[np.argsort(ig)], dr[order], rtol=rtol, atol=atol)


# -- equality with scikit-learn ---------------------------------------------------


@pytest.mark.parametrize("name", DATASETS)
def test_kneighbors_matches_sklearn(name, backend, dtype):
    X, _, Q, _ = data(name, dtype)
    ours = NearestNeighbors(n_neighbors=5, backend=backend).fit(X)
    ref = skn.NearestNeighbors(n_neighbors=5, algorithm="brute").fit(X)
    got = ours.kneighbors(Q)
    assert got[0].dtype == dtype
    assert_neighbors_match(ref.kneighbors(Q), got, X, Q, rtol=DIST_RTOL[dtype])
    # X=None: each point is left out of its own list (iris has duplicates);
    # K = 4 + 1 shares the compiled kernel of K = 5 (as in the tests below)
    assert_neighbors_match(
        ref.kneighbors(n_neighbors=4),
        ours.kneighbors(n_neighbors=4),
        X,
        X,
        rtol=DIST_RTOL[dtype],
    )


@pytest.mark.parametrize("name", ["iris", "breast_cancer"])
@pytest.mark.parametrize("weights", ["uniform", "distance", None])
def test_classifier_matches_sklearn(name, weights, backend, dtype):
    X, y, Q, _ = data(name, dtype)
    ours = KNeighborsClassifier(5, weights=weights, backend=backend).fit(X, y)
    ref = skn.KNeighborsClassifier(5, weights=weights, algorithm="brute").fit(X, y)
    np.testing.assert_array_equal(ours.predict(Q), ref.predict(Q))
    np.testing.assert_allclose(ours.predict_proba(Q), ref.predict_proba(Q), atol=1e-6)
    np.testing.assert_array_equal(ours.classes_, ref.classes_)
    ours.set_params(n_neighbors=4), ref.set_params(n_neighbors=4)
    assert ours.score(None, y) == ref.score(None, y)  # leave-one-out


@pytest.mark.parametrize("name", ["diabetes", "digits"])
@pytest.mark.parametrize("weights", ["uniform", "distance"])
def test_regressor_matches_sklearn(name, weights, backend, dtype):
    X, y, Q, _ = data(name, dtype)
    ours = KNeighborsRegressor(5, weights=weights, backend=backend).fit(X, y)
    ref = skn.KNeighborsRegressor(5, weights=weights, algorithm="brute").fit(X, y)
    np.testing.assert_allclose(ours.predict(Q), ref.predict(Q), rtol=1e-5)
    ours.set_params(n_neighbors=4), ref.set_params(n_neighbors=4)
    np.testing.assert_allclose(ours.predict(None), ref.predict(None), rtol=1e-5)


METRICS = [
    ("euclidean", {}),
    ("l2", {}),
    ("sqeuclidean", {}),
    ("manhattan", {}),
    ("cityblock", {}),
    ("l1", {}),
    ("chebyshev", {}),
    ("infinity", {}),
    ("cosine", {}),
    ("minkowski", {"p": 1}),
    ("minkowski", {"p": 2}),
    ("minkowski", {"p": np.inf}),
    ("minkowski", {"p": 3}),
    ("minkowski", {"p": 1.5}),
    ("minkowski", {"metric_params": {"p": 3, "w": np.linspace(0.5, 2, 10)}}),
]


@pytest.mark.filterwarnings("ignore:Parameter p is found:SyntaxWarning")
@pytest.mark.parametrize("metric,kw", METRICS, ids=lambda v: str(v)[:30])
def test_every_metric_matches_sklearn(metric, kw):
    X, _, Q, _ = data("diabetes")
    ours = NearestNeighbors(n_neighbors=5, metric=metric, **kw).fit(X)
    sk_metric = {"infinity": "chebyshev"}.get(metric, metric)  # brute has no alias
    ref = skn.NearestNeighbors(n_neighbors=5, metric=sk_metric, algorithm="brute", **kw)
    ref.fit(X)
    expected = metric if metric == "infinity" else ref.effective_metric_
    assert ours.effective_metric_ == expected
    params = ref.effective_metric_params_
    assert params.keys() == ours.effective_metric_params_.keys()
    check = {"metric": ref.effective_metric_, "metric_params": dict(params)}
    if check["metric_params"].get("w", 0) is None:
        del check["metric_params"]["w"]
    atol = 1e-12 if metric == "cosine" else 0.0  # cosine distances near 0
    assert_neighbors_match(
        ref.kneighbors(Q), ours.kneighbors(Q), X, Q, rtol=1e-6, atol=atol, **check
    )
    pair = ref.kneighbors(n_neighbors=4), ours.kneighbors(n_neighbors=4)
    assert_neighbors_match(*pair, X, X, rtol=1e-6, atol=atol, **check)


def test_minkowski_p_below_one_warns_as_sklearn():
    X, _, Q, _ = data("iris")
    with pytest.warns(UserWarning, match="0 < p < 1"):
        ours = NearestNeighbors(n_neighbors=3, p=0.5).fit(X)
    with pytest.warns(UserWarning, match="0 < p < 1"):
        ref = skn.NearestNeighbors(n_neighbors=3, p=0.5, algorithm="brute").fit(X)
    np.testing.assert_allclose(ours.kneighbors(Q)[0], ref.kneighbors(Q)[0], rtol=1e-6)


def _inv_square(d):
    return 1.0 / (d + 0.1) ** 2


def test_callable_weights_and_multioutput():
    X, y, Q, _ = data("diabetes")  # no ties at the K-th neighbour
    Y2 = np.stack([y > np.median(y), (X[:, 0] > 0) + (X[:, 1] > 0)], axis=1)
    for cls_ours, cls_ref, target in (
        (KNeighborsClassifier, skn.KNeighborsClassifier, Y2),
        (KNeighborsRegressor, skn.KNeighborsRegressor, X[:, :2] * [1, -1]),
    ):
        ours = cls_ours(5, weights=_inv_square).fit(X, target)
        ref = cls_ref(5, weights=_inv_square, algorithm="brute").fit(X, target)
        np.testing.assert_allclose(ours.predict(Q), ref.predict(Q), rtol=1e-6)
    ours = KNeighborsClassifier(5).fit(X, Y2)
    ref = skn.KNeighborsClassifier(5, algorithm="brute").fit(X, Y2)
    assert ours.outputs_2d_ and len(ours.classes_) == 2
    for a, b in zip(ours.predict_proba(Q), ref.predict_proba(Q)):
        np.testing.assert_allclose(a, b)


def test_distance_weights_with_exact_matches():
    X = np.array([[0.0], [0.0], [2.0], [3.0], [5.0]])
    y = [0, 1, 1, 0, 1]
    ours = KNeighborsClassifier(3, weights="distance").fit(X, y)
    ref = skn.KNeighborsClassifier(3, weights="distance", algorithm="brute").fit(X, y)
    Q = [[0.0], [3.9]]
    np.testing.assert_allclose(ours.predict_proba(Q), ref.predict_proba(Q))


def test_graphs_and_radius_match_sklearn(backend):
    rng = np.random.default_rng(1)
    X, Q = rng.standard_normal((300, 3)), rng.standard_normal((40, 3))
    ours = NearestNeighbors(n_neighbors=4, radius=0.6, backend=backend).fit(X)
    ref = skn.NearestNeighbors(n_neighbors=4, radius=0.6, algorithm="brute").fit(X)
    for args, k in (((Q,), 5), ((), 4)):  # one K-min kernel: K = 5
        for mode in ("connectivity", "distance"):
            a = ours.kneighbors_graph(*args, n_neighbors=k, mode=mode)
            b = ref.kneighbors_graph(*args, n_neighbors=k, mode=mode)
            assert a.format == "csr" and type(a) is type(b)
            np.testing.assert_allclose(a.toarray(), b.toarray(), rtol=1e-12)
            a = ours.radius_neighbors_graph(*args, mode=mode)
            b = ref.radius_neighbors_graph(*args, mode=mode)
            np.testing.assert_allclose(a.toarray(), b.toarray(), rtol=1e-12)
        got = ours.radius_neighbors(*args, radius=0.8)
        assert_radius_match(ref.radius_neighbors(*args, radius=0.8), got, rtol=1e-12)
        for i in got[1]:  # scikit-learn's brute force: index order
            assert np.all(np.diff(i) > 0)
        got = ours.radius_neighbors(*args, radius=0.8, sort_results=True)
        ref_sorted = ref.radius_neighbors(*args, radius=0.8, sort_results=True)
        for d, i, rd, ri in zip(*got, *ref_sorted):  # by distance (no ties here)
            np.testing.assert_array_equal(i, ri)
            np.testing.assert_allclose(d, rd, rtol=1e-12)
    ind = ours.radius_neighbors(Q, return_distance=False)
    assert ind.dtype == object and len(ind) == len(Q)


@pytest.mark.parametrize("metric", ["euclidean", "manhattan", "cosine"])
def test_radius_neighbors_on_datasets(metric, dtype):
    X, _, Q, _ = data("iris", dtype)
    radius = {"euclidean": 0.55, "manhattan": 0.75, "cosine": 0.0015}[metric]
    ours = NearestNeighbors(radius=radius, metric=metric).fit(X)
    ref = skn.NearestNeighbors(radius=radius, metric=metric, algorithm="brute").fit(X)
    # radii away from iris' distances (multiples of 0.1): no boundary ties;
    # cosine distances near 0 are differences of numbers near 1
    tol = {"rtol": DIST_RTOL[dtype], "atol": 1e-6 if metric == "cosine" else 0}
    got = ours.radius_neighbors(Q)
    assert_radius_match(ref.radius_neighbors(Q), got, **tol)
    assert_radius_match(ref.radius_neighbors(), ours.radius_neighbors(), **tol)


# -- invariance ------------------------------------------------------------------


def test_results_do_not_depend_on_block_size(monkeypatch):
    X, _, Q, _ = data("digits")
    nn = NearestNeighbors(n_neighbors=5, radius=25.0).fit(X)
    before = nn.kneighbors(Q), nn.radius_neighbors(Q)
    assert isinstance(nn._search(Q)[0], _neighbors_search.ExpandedSearch)  # D = 64
    monkeypatch.setattr(_neighbors_search, "QUERY_BLOCK_ENTRIES", 300)
    monkeypatch.setattr(_neighbors_search, "RERANK_BLOCK_ENTRIES", 1000)
    after = nn.kneighbors(Q), nn.radius_neighbors(Q)
    for a, b in zip(before[0], after[0]):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(before[1][1], after[1][1]):
        np.testing.assert_array_equal(a, b)


def test_radius_search_does_not_trust_the_counts(monkeypatch):
    """Counts that miss points (another rounding of the distance) only cost a
    second search: the radius results stay complete."""
    X, _, Q, _ = data("diabetes")
    nn = NearestNeighbors(radius=0.09).fit(X)
    ref = nn.radius_neighbors(Q)
    assert max(len(a) for a in ref[1]) > 4
    monkeypatch.setattr(
        _neighbors_search.FormulaSearch,
        "count",
        lambda self, X, t: np.zeros(len(X), dtype=np.int64),
    )
    assert_radius_match(ref, nn.radius_neighbors(Q), rtol=0)


def test_search_is_kept_between_queries():
    """The search over the fitted points is built once per dtype (and
    backend), reused by later queries, rebuilt by a new fit, and left out of
    pickles (its formulas hold lambdas); results stay the same."""
    import pickle

    X, _, Q, _ = data("iris")
    nn = NearestNeighbors(n_neighbors=3).fit(X)
    first = nn.kneighbors(Q)
    search = nn._search(Q)[0]
    assert nn._search(Q[:2])[0] is search
    assert nn._search(Q.astype(np.float32))[0] is search  # in float64 still
    again = pickle.loads(pickle.dumps(nn)).kneighbors(Q)
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    nn.fit(X[::-1])
    assert nn._search(Q)[0] is not search
    np.testing.assert_allclose(nn.kneighbors(Q)[0], first[0], rtol=1e-12)  # same set


def test_dtype_parameter():
    X, _, Q, _ = data("iris")
    assert NearestNeighbors().fit(X).kneighbors(Q)[0].dtype == np.float64
    d32 = NearestNeighbors(dtype="float32").fit(X).kneighbors(Q)[0]
    assert d32.dtype == np.float32
    d = NearestNeighbors().fit(X.astype(np.float32)).kneighbors(Q.astype(np.float32))
    assert d[0].dtype == np.float32
    Xi = np.arange(40).reshape(20, 2)
    assert NearestNeighbors(n_neighbors=2).fit(Xi).kneighbors()[0].dtype == np.float64


# -- the expanded euclidean search (D >= EXPANDED_MIN_DIM) --------------------------


@pytest.fixture
def fallback_rows(monkeypatch) -> list:
    """Sizes of the row batches that ExpandedSearch recomputed in the direct form."""
    rows = []
    original = _neighbors_search.ExpandedSearch.fallback

    def spy(self, X, k):
        rows.append(len(X))
        return original(self, X, k)

    monkeypatch.setattr(_neighbors_search.ExpandedSearch, "fallback", spy)
    return rows


@cache
def _d64(name: str):
    """(fitted points, queries), D = 64: Gaussian, or all of digits."""
    if name == "digits":
        X = datasets.load_digits().data[:800]
    else:
        X = np.random.default_rng(3).standard_normal((800, 64))
    return X[:600], X[600:]


def direct_knn(X, Q, k: int):
    """Exact reference: squared distances by direct float64 differences, the k
    smallest of each row in increasing order, ties by index."""
    X = X.astype(np.float64)
    d2 = np.stack([((X - q) ** 2).sum(axis=1) for q in Q.astype(np.float64)])
    ind = np.argsort(d2, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(d2, ind, axis=1), ind


@pytest.mark.parametrize(
    "name,metric",
    [("gaussian", "euclidean"), ("digits", "euclidean"), ("digits", "sqeuclidean")],
)
def test_expanded_search_matches_sklearn(name, metric, dtype, fallback_rows):
    X, Q = (a.astype(dtype) for a in _d64(name))
    ours = NearestNeighbors(n_neighbors=10, metric=metric).fit(X)
    assert isinstance(ours._search(Q)[0], _neighbors_search.ExpandedSearch)
    ref = skn.NearestNeighbors(n_neighbors=10, metric=metric, algorithm="brute")
    ref.fit(X)
    got = ours.kneighbors(Q)
    assert got[0].dtype == dtype
    tol = {"rtol": DIST_RTOL[dtype], "metric": metric}
    assert_neighbors_match(ref.kneighbors(Q), got, X, Q, **tol)
    # X=None: digits has duplicate points, whose self-exclusion needs ties by index
    pair = ref.kneighbors(n_neighbors=9), ours.kneighbors(n_neighbors=9)
    assert_neighbors_match(*pair, X, X, **tol)
    assert sum(fallback_rows) == 0  # the certificate holds on ordinary data


@pytest.mark.parametrize("offset", [50.0, 1.5e6], ids=["float32", "float64"])
def test_expanded_search_falls_back_far_from_the_origin(offset, fallback_rows):
    """Far from the origin the expanded form's rounding (eps |x|^2) reaches the
    gaps between neighbours: rows the certificate cannot vouch for are
    searched again in the direct form, and every row stays exact."""
    dtype = np.float32 if offset < 1e3 else np.float64
    X, Q = ((a + offset).astype(dtype) for a in _d64("gaussian"))
    dist, ind = NearestNeighbors(n_neighbors=5).fit(X).kneighbors(Q)
    assert 0 < sum(fallback_rows) < len(Q)  # some rows, not all
    ref_d2, ref_ind = direct_knn(X, Q, 5)
    np.testing.assert_array_equal(ind, ref_ind)
    np.testing.assert_allclose(dist, np.sqrt(ref_d2), rtol=DIST_RTOL[np.dtype(dtype)])


def test_expanded_search_far_from_the_origin_matches_sklearn(fallback_rows):
    """digits + 1e3 in float32: every row falls back (scikit-learn computes
    float32 data in float64, so it stays a fair reference here)."""
    X, Q = (a.astype(np.float32) + np.float32(1e3) for a in _d64("digits"))
    ours = NearestNeighbors(n_neighbors=10).fit(X)
    ref = skn.NearestNeighbors(n_neighbors=10, algorithm="brute").fit(X)
    got = ours.kneighbors(Q)
    assert sum(fallback_rows) == len(Q)
    assert_neighbors_match(ref.kneighbors(Q), got, X, Q, rtol=2e-6)


@pytest.mark.parametrize("copies", [3, 30], ids=["within", "beyond"])
def test_expanded_search_breaks_ties_by_index(copies, dtype, fallback_rows):
    """Duplicated points: exact ties, kept in index order. Three copies stay
    among the K + 8 candidates; thirty overflow them and the row falls back."""
    rng = np.random.default_rng(4)
    base = rng.standard_normal((40, 64))
    X = np.repeat(base, copies, axis=0)[rng.permutation(40 * copies)].astype(dtype)
    Q = np.concatenate([base[:10], base[10:20] + 0.1]).astype(dtype)
    dist, ind = NearestNeighbors(n_neighbors=10).fit(X).kneighbors(Q)
    ref_d2, ref_ind = direct_knn(X, Q, 10)
    np.testing.assert_array_equal(ind, ref_ind)
    np.testing.assert_allclose(dist, np.sqrt(ref_d2), rtol=DIST_RTOL[dtype], atol=1e-6)
    assert (sum(fallback_rows) >= 10) == (copies == 30)


def test_expanded_search_declines(monkeypatch):
    """Few features, other metrics and K' above the cap keep the direct form."""
    X = np.random.default_rng(5).standard_normal((300, 64))
    make = _neighbors_metrics.make_metric

    def usable(metric, Y):
        case = SearchCase(metric=metric, points=Y, dtype=Y.dtype, backend=None)
        return _neighbors_search.ExpandedSearch.is_usable_for(case)

    assert usable(make("euclidean", {}), X) and usable(make("sqeuclidean", {}), X)
    assert not usable(make("euclidean", {}), X[:, :19])
    assert not usable(make("manhattan", {}), X)
    assert not usable(make("cosine", {}), X)

    def no_expanded(self, X):
        raise AssertionError("the expanded form was used")

    monkeypatch.setattr(_neighbors_search.ExpandedSearch, "expanded", no_expanded)
    k = _neighbors_search.EXPANDED_MAX_CANDIDATES - 7  # K' = K + 8 > the cap
    got = NearestNeighbors(n_neighbors=k).fit(X).kneighbors(X[:5])
    ref = skn.NearestNeighbors(n_neighbors=k, algorithm="brute").fit(X)
    tol = {"rtol": 1e-6, "atol": 1e-6}  # scikit-learn's |x - x| is not 0
    assert_neighbors_match(ref.kneighbors(X[:5]), got, X, X[:5], **tol)


# -- custom metrics --------------------------------------------------------------


def log_metric(x_i, y_j, scale=1.0):
    """A metric that scikit-learn does not have, as a LazyTensor formula."""
    return (1 + (x_i - y_j).abs() * scale).log().sum(-1)


def test_lazytensor_callable_metric_equals_dense():
    X, _, Q, _ = data("diabetes")
    nn = NearestNeighbors(
        n_neighbors=5, metric=log_metric, metric_params={"scale": 3.0}
    ).fit(X)
    dense = np.log1p(np.abs(Q[:, None, :] - X[None, :, :]) * 3.0).sum(-1)
    ind = np.argsort(dense, axis=1, kind="stable")[:, :5]
    ref = np.take_along_axis(dense, ind, axis=1), ind
    d, i = nn.kneighbors(Q)
    np.testing.assert_allclose(d, ref[0], rtol=1e-12)
    np.testing.assert_array_equal(i, ref[1])
    assert nn.effective_metric_ is log_metric
    clone = pickle.loads(pickle.dumps(nn))
    np.testing.assert_array_equal(clone.kneighbors(Q)[1], i)
    radius = float(np.median(ref[0][:, 2]))
    for row, idx in zip(dense, nn.radius_neighbors(Q, radius=radius)[1]):
        np.testing.assert_array_equal(np.sort(idx), np.flatnonzero(row <= radius))


def _chebyshev_1d(a, b):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))))


def test_sklearn_style_callable_metric():
    X, y, Q, _ = data("iris")
    X, y, Q = X[:60], y[:60], Q[:10]  # called pair by pair: slow by nature
    ours = KNeighborsClassifier(3, metric=_chebyshev_1d).fit(X, y)
    ref = skn.KNeighborsClassifier(3, metric=_chebyshev_1d, algorithm="brute")
    ref.fit(X, y)
    np.testing.assert_array_equal(ours.predict(Q), ref.predict(Q))
    assert_neighbors_match(
        ref.kneighbors(Q), ours.kneighbors(Q), X, Q, rtol=1e-12, metric="chebyshev"
    )


# -- scikit-learn compatibility -------------------------------------------------------


@parametrize_with_checks(
    [NearestNeighbors(), KNeighborsClassifier(), KNeighborsRegressor()]
)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def test_pipeline_grid_search_picks_sklearns_best():
    X, y, _, _ = data("breast_cancer")
    grid = {
        "kneighborsclassifier__n_neighbors": [1, 5, 15],
        "kneighborsclassifier__weights": ["uniform", "distance"],
    }
    results = []
    for knn in (KNeighborsClassifier(), skn.KNeighborsClassifier(algorithm="brute")):
        search = GridSearchCV(make_pipeline(StandardScaler(), knn), grid, cv=4)
        results.append(search.fit(X, y))
    assert results[0].best_params_ == results[1].best_params_
    np.testing.assert_allclose(
        results[0].cv_results_["mean_test_score"],
        results[1].cv_results_["mean_test_score"],
    )


def test_feature_names_in():
    pd = pytest.importorskip("pandas")
    X, y, _, _ = data("iris")
    df = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    clf = KNeighborsClassifier().fit(df, y)
    np.testing.assert_array_equal(clf.feature_names_in_, ["a", "b", "c", "d"])


def test_attributes_and_doctests():
    X, y, _, _ = data("iris")
    clf = KNeighborsClassifier(algorithm="kd_tree", leaf_size=3, n_jobs=2).fit(X, y)
    assert clf._fit_method == "brute" and clf.n_samples_fit_ == len(X)
    assert clf.n_features_in_ == 4 and clf.effective_metric_ == "euclidean"
    assert clf.effective_metric_params_ == {} and not clf.outputs_2d_
    failed, attempted = doctest.testmod(neighbors)
    assert attempted >= 8 and failed == 0


# -- bad input -----------------------------------------------------------------------


def test_too_many_neighbors_names_n_neighbors():
    X = np.random.default_rng(0).random((6, 2))
    with pytest.raises(ValueError, match="n_neighbors = 7"):
        NearestNeighbors(n_neighbors=7).fit(X).kneighbors(X)
    with pytest.raises(ValueError, match="n_neighbors < n_samples_fit"):
        NearestNeighbors(n_neighbors=6).fit(X).kneighbors()
    with pytest.raises(ValueError, match="n_neighbors > 0"):
        NearestNeighbors().fit(X).kneighbors(X, n_neighbors=0)
    with pytest.raises(TypeError, match="n_neighbors"):
        NearestNeighbors().fit(X).kneighbors(X, n_neighbors=2.5)


def test_nan_and_feature_count_are_rejected():
    X = np.random.default_rng(0).random((10, 3))
    bad = X.copy()
    bad[2, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        NearestNeighbors().fit(bad)
    nn = NearestNeighbors(n_neighbors=2).fit(X)
    with pytest.raises(ValueError, match="NaN"):
        nn.kneighbors(bad)
    with pytest.raises(ValueError, match="3 features"):
        nn.kneighbors(X[:, :2])
    with pytest.raises(ValueError, match="infinity"):
        nn.radius_neighbors(np.full((1, 3), np.inf))


@pytest.mark.parametrize(
    "params,match",
    [
        ({"metric": "kulsinski"}, r"'metric' parameter of KNeighborsClassifier.*'kulsinski'"),
        ({"n_neighbors": 0}, r"'n_neighbors' parameter .* range \[1, inf\)"),
        ({"weights": "far"}, "'weights'"),
        ({"algorithm": "ball"}, "'algorithm'"),
        ({"backend": "gpu"}, "'backend'"),
        ({"dtype": "int8"}, "'dtype'"),
        ({"p": -1}, "'p'"),
        ({"metric_params": {"w": 1}, "metric": "euclidean"}, "metric_params"),
        ({"metric_params": {"w": [1.0, -1.0]}}, "metric_params\\['w'\\]"),
        ({"metric_params": {"p": 0}}, "metric_params\\['p'\\]"),
    ],
)
def test_bad_parameters(params, match):
    X, y = np.random.default_rng(0).random((10, 2)), np.arange(10) % 2
    with warnings.catch_warnings():  # p in metric_params: a SyntaxWarning first
        warnings.simplefilter("ignore", SyntaxWarning)
        with pytest.raises(ValueError, match=match):
            KNeighborsClassifier(**params).fit(X, y)


def test_bad_method_arguments():
    X = np.random.default_rng(0).random((10, 2))
    nn = NearestNeighbors().fit(X)
    with pytest.raises(ValueError, match="mode"):
        nn.kneighbors_graph(X, mode="weights")
    with pytest.raises(ValueError, match="mode"):
        nn.radius_neighbors_graph(X, mode="weights")
    with pytest.raises(ValueError, match="radius"):
        nn.radius_neighbors(X, radius=-1.0)
    with pytest.raises(ValueError, match="return_distance"):
        nn.radius_neighbors(X, return_distance=False, sort_results=True)
    with pytest.raises(ValueError, match="zero weights"):
        KNeighborsClassifier(2, weights=np.zeros_like).fit(X, X[:, 0] > 0.5).predict(X)


def test_bad_callable_metrics():
    X = np.random.default_rng(0).random((10, 2))
    with pytest.raises(ValueError, match="dimension 2"):
        NearestNeighbors(metric=lambda x, y: (x - y).abs()).fit(X)
    with pytest.raises(TypeError, match="callable metric"):
        NearestNeighbors(metric=lambda x, y: "far").fit(X)
    with pytest.raises(TypeError, match="does neither"):
        NearestNeighbors(metric=lambda x, y: x.nope()).fit(X)
