"""Every brute-force metric of scikit-learn's k-NN, as a formula on the engine.

Each metric is compared with scikit-learn's own estimators (``algorithm=
"brute"``) on data that reaches its degenerate cases: exact zeros, a zero
row, a row and its negation (braycurtis' zero denominator), a constant row
(correlation's NaN), duplicates, all-false boolean rows (jaccard's 0, dice's
and sokalsneath's NaN), NaN in every pattern for nan_euclidean.

Comparisons are tie-tolerant, as in tests/estimators/neighbors/test_neighbors.py, against
scikit-learn's full distance matrix (from its own brute force, so with its
own conventions): the K distances must be scikit-learn's K smallest, NaN
last; each index returned must have the distance returned for it; indices
must agree outside the ties with the K-th distance. Predictions are compared
on the queries whose K nearest points are not tied with the next one.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.spatial.distance import cdist
from sklearn import neighbors as skn
from sklearn.exceptions import DataConversionWarning

from kerneltools.estimators.neighbors import (
    KNeighborsClassifier,
    KNeighborsRegressor,
    NearestNeighbors,
)

K = 16  # one K throughout: kneighbors(Q), kneighbors() (15 + self), radius
N_FIT, N_QUERY = 60, 40
#: (rtol, atol) on distances: scikit-learn computes float32 data in float64
#: (scipy) or, for nan_euclidean, in float32 by the expanded formula.
TOL = {np.dtype(np.float32): (2e-5, 2e-5), np.dtype(np.float64): (1e-9, 1e-9)}


def _real(rng, d=5):
    """Gaussian data with the degenerate rows of the real-valued metrics."""
    X = rng.normal(size=(N_FIT + N_QUERY, d)).round(1)
    X[rng.random(X.shape) < 0.2] = 0.0  # exact zeros: canberra's 0/0 terms
    X[3] = 0.0  # a zero row: braycurtis' 0/0, cosine's zero vector
    X[7] = -X[5]  # sum |x + y| = 0 with x != y: braycurtis' 0
    X[11] = 0.7  # a constant row: correlation's NaN
    X[13] = X[12]  # a duplicate
    X[N_FIT + 1] = -X[9]  # the same for queries
    X[N_FIT + 2] = 2.0
    X[N_FIT + 3] = X[20]
    return X


def _haversine(rng):
    lat = rng.uniform(-np.pi / 2, np.pi / 2, N_FIT + N_QUERY)
    lon = rng.uniform(-np.pi, np.pi, N_FIT + N_QUERY)
    X = np.stack([lat, lon], axis=1)
    X[N_FIT] = [-X[0, 0], X[0, 1] + np.pi]  # antipodes of a fitted point
    return X


def _bits(rng, d=32):
    X = rng.random((N_FIT + N_QUERY, d)) < 0.3
    X[[2, 9, N_FIT, N_FIT + 4]] = False  # all-false rows, fitted and queries
    X[5] = True
    X[6] = X[4]
    return X


def _categories(rng):
    """Hamming on non-boolean data: the fraction of coordinates that differ."""
    return rng.integers(0, 3, size=(N_FIT + N_QUERY, 8)).astype(float) - 0.5


def _with_nan(rng):
    X = _real(rng)
    X[rng.random(X.shape) < 0.3] = np.nan
    X[4] = np.nan  # nothing present: NaN distances
    X[8, 1:] = np.nan  # one coordinate present
    X[N_FIT + 5] = np.nan
    return X


_VI = np.diag([2.0, 1.0, 0.5, 1.5, 1.0]) + 0.2
_SINGULAR_VI = np.diag([1.0, 2.0, 0.0, 1.0, 0.5])  # not PD: the quadratic form
_SINGULAR_VI[0, 1] = _SINGULAR_VI[1, 0] = 0.5
_V = np.array([0.5, 1.0, 2.0, 0.25, 1.5])

#: (id, metric, metric_params, data)
CASES = [
    ("euclidean", "euclidean", None, _real),
    ("sqeuclidean", "sqeuclidean", None, _real),
    ("manhattan", "manhattan", None, _real),
    ("chebyshev", "chebyshev", None, _real),
    ("minkowski-3", "minkowski", {"p": 3}, _real),
    ("minkowski-w", "minkowski", {"p": 1.5, "w": _V}, _real),
    ("minkowski-w-2", "minkowski", {"p": 2, "w": _V}, _real),
    ("cosine", "cosine", None, _real),
    ("correlation", "correlation", None, _real),
    ("braycurtis", "braycurtis", None, _real),
    ("canberra", "canberra", None, _real),
    ("seuclidean", "seuclidean", {"V": _V}, _real),
    ("mahalanobis", "mahalanobis", {"VI": _VI}, _real),
    ("mahalanobis-not-pd", "mahalanobis", {"VI": _SINGULAR_VI}, _real),
    ("haversine", "haversine", None, _haversine),
    ("nan_euclidean", "nan_euclidean", None, _with_nan),
    ("hamming", "hamming", None, _categories),
    ("hamming-bool", "hamming", None, _bits),
    *[(m, m, None, _bits) for m in ("jaccard", "dice", "rogerstanimoto",
                                    "russellrao", "sokalsneath", "yule")],
]


def _split(make, dtype, seed=0):
    """(fitted, queries); boolean data stays bool in float64 runs and becomes
    0/1 in float32 runs (both serve the boolean metrics)."""
    X = make(np.random.default_rng(seed))
    if X.dtype != bool or dtype == np.float32:
        X = X.astype(dtype)
    return X[:N_FIT], X[N_FIT:]


def _params(metric, params):
    """Our estimator's keywords (p separately, as scikit-learn's tests do)."""
    params = dict(params or {})
    return {"metric": metric, "p": params.pop("p", 2), "metric_params": params}


#: Metrics that scikit-learn computes by the expanded formula |x|^2 - 2 <x, y>
#: + |y|^2 (its ArgKmin and euclidean_distances), whose rounding depends on
#: the CPU and the BLAS (a duplicate's distance: 0.0 on Intel, 4.2e-8 on an
#: AMD EPYC): for them the reference is scipy's direct differences in float64.
EXPANDED = ("euclidean", "sqeuclidean")


def _full(ref, Q, X):
    """The reference distance matrix (n_queries, n_fit): scikit-learn's, by
    its own brute force, or direct differences for the EXPANDED metrics.

    ``Q`` is copied first: scikit-learn zeroes the diagonal of the matrix when
    the queries are the fitted array itself.
    """
    if ref.effective_metric_ in EXPANDED:
        D = cdist(Q.astype(np.float64), X.astype(np.float64), ref.effective_metric_)
        return D.astype(np.result_type(Q.dtype, np.float32))
    d, i = ref.kneighbors(np.array(Q, copy=True), n_neighbors=ref.n_samples_fit_)
    D = np.empty_like(d)
    np.put_along_axis(D, i, d, axis=1)
    return D


def _ref_kneighbors(ref, Q, X, n_neighbors):
    """scikit-learn's kneighbors, or for the EXPANDED metrics the K smallest
    exact distances (index order among ties); ``Q=None``: each point of X
    left out of its own list."""
    if ref.effective_metric_ not in EXPANDED:
        return ref.kneighbors(Q, n_neighbors=n_neighbors)
    D = _full(ref, X if Q is None else Q, X)
    if Q is None:
        np.fill_diagonal(D, np.inf)
    i = np.argsort(D, axis=1, kind="stable")[:, :n_neighbors]
    return np.take_along_axis(D, i, axis=1), i


def _tied_kth(row, k, tol):
    """Mask of the entries of a sorted row not tied with its k-th (NaN: tied)."""
    kth = row[k - 1]
    if np.isnan(kth):
        return ~np.isnan(row[:k])
    return row[:k] < kth - tol


def assert_knn_match(ref, got, D, *, rtol, atol, exclude_self=False):
    (d_ref, i_ref), (d, i) = ref, got
    assert d.shape == d_ref.shape and i.dtype.kind == "i"
    np.testing.assert_allclose(d, d_ref, rtol=rtol, atol=atol)
    for r in range(len(i)):
        np.testing.assert_allclose(d[r], D[r, i[r]], rtol=rtol, atol=atol)
        clear = _tied_kth(d_ref[r], d_ref.shape[1], rtol * np.nan_to_num(
            abs(d_ref[r, -1])) + atol)
        assert set(i[r][clear]) == set(i_ref[r][clear]), f"row {r}"
        assert len(set(i[r])) == len(i[r]), f"row {r}: repeated indices"
        if exclude_self:
            assert r not in i[r]


def _fit_pair(cls, skcls, metric, params, X, y=None, *, backend="auto", **kw):
    ours = cls(**kw, **_params(metric, params), backend=backend)
    ref = skcls(algorithm="brute", **kw, **_params(metric, params))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataConversionWarning)
        return ours.fit(X, y), ref.fit(X, y)


def _radius(D_sorted, rtol, atol):
    """A radius midway between two distinct distances, so that no point lies
    within rounding of it: the widest enough gap at or below the median of the
    queries' 5th distances and their smallest 8th (few points within: the
    radius search's first K = 16 then suffices, one kernel for the test)."""
    values = np.unique(D_sorted[np.isfinite(D_sorted)])
    r0 = min(np.nanmedian(D_sorted[:, 4]), np.nanmin(D_sorted[:, 7]))
    lo, hi = values[:-1], values[1:]
    ok = np.flatnonzero((hi - lo > 4 * (rtol * hi + atol)) & (lo <= r0))
    assert len(ok), "no gap between distances for a radius"
    return float((lo[ok[-1]] + hi[ok[-1]]) / 2)


def _tol(metric, dtype):
    if metric == "nan_euclidean":
        # scikit-learn computes it by the expanded formula, in the data's
        # dtype: sqrt(eps |x|^2) off at distances near 0 (1e-3 in float32)
        return (2e-5, 2e-3) if dtype == np.float32 else (1e-9, 3e-7)
    return TOL[dtype]


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.DataConversionWarning")
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_neighbors_match_sklearn(case, backend, dtype):
    _, metric, params, make = case
    X, Q = _split(make, dtype)
    rtol, atol = _tol(metric, dtype)
    ours, ref = _fit_pair(
        NearestNeighbors, skn.NearestNeighbors, metric, params, X, n_neighbors=K,
        backend=backend,
    )
    assert ours.effective_metric_ == ref.effective_metric_
    D = _full(ref, Q, X)
    got = ours.kneighbors(Q)
    assert got[0].dtype == dtype
    assert_knn_match(_ref_kneighbors(ref, Q, X, K), got, D, rtol=rtol, atol=atol)
    # X=None: each point left out of its own list; K - 1 + self shares a kernel
    assert_knn_match(
        _ref_kneighbors(ref, None, X, K - 1),
        ours.kneighbors(n_neighbors=K - 1),
        _full(ref, X, X),
        rtol=rtol,
        atol=atol,
        exclude_self=True,
    )
    if backend == "cpu" and dtype == np.float32:
        # The radius search compiles two more kernels (a count and a masked
        # K-min) per metric and dtype: on the C backend it runs in float64
        # only. The metric's float32 formula is the K-min kernel above; the
        # radius kernels in float32 are test_radius.py's (four metrics, both
        # dtypes, every backend); float32 radius sets of every metric here
        # on the NumPy backend.
        return
    D_sorted = np.sort(D, axis=1)
    radius = _radius(D_sorted, rtol, atol)
    for r, ((dr, ir), (dg, ig)) in enumerate(zip(
        zip(*ref.radius_neighbors(Q.copy(), radius)),
        zip(*ours.radius_neighbors(Q, radius)),
    )):
        np.testing.assert_array_equal(np.sort(ig), np.sort(ir))
        if ref.effective_metric_ in EXPANDED:
            dr, ir = D[r, ir], ir  # the exact distances of the same points
        np.testing.assert_allclose(
            dg[np.argsort(ig)], dr[np.argsort(ir)], rtol=rtol, atol=atol
        )


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.DataConversionWarning")
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_predictions_match_sklearn(case, backend, dtype):
    _, metric, params, make = case
    X, Q = _split(make, dtype)
    rng = np.random.default_rng(1)
    y_class, y_real = rng.integers(0, 3, N_FIT), rng.normal(size=N_FIT)
    rtol, atol = _tol(metric, dtype)
    clf = _fit_pair(KNeighborsClassifier, skn.KNeighborsClassifier, metric,
                    params, X, y_class, n_neighbors=K, backend=backend)
    reg = _fit_pair(KNeighborsRegressor, skn.KNeighborsRegressor, metric,
                    params, X, y_real, n_neighbors=K, weights="distance",
                    backend=backend)
    # queries whose K nearest are not tied with the next point, at finite
    # distances (1 / NaN weights are NaN on both sides)
    D_sorted = np.sort(_full(clf[1], Q, X), axis=1)
    gap = D_sorted[:, K] - D_sorted[:, K - 1] > 10 * (rtol * D_sorted[:, K] + atol)
    rows = np.flatnonzero(gap & np.isfinite(D_sorted[:, K]))
    assert len(rows) >= 2, "too many ties to compare predictions"  # russellrao
    ours, ref = clf
    np.testing.assert_array_equal(ours.predict(Q[rows]), ref.predict(Q[rows]))
    ours, ref = reg
    # 1 / d weights: not where scikit-learn's rounding turns an exact match
    # (weight: all of it) into a tiny distance (nan_euclidean)
    first = D_sorted[rows, :K]
    # (the EXPANDED metrics: D is exact, and scikit-learn's rounding may make
    # an exact match's 0 a tiny distance, depending on the CPU)
    near = (first <= 10 * atol) & (
        (first > 0) | (clf[1].effective_metric_ in EXPANDED))
    rows = rows[~near.any(axis=1)]
    # 1 / d weights amplify the distances' rounding near d = 0
    tol = max(1e-6, 100 * rtol)
    np.testing.assert_allclose(
        ours.predict(Q[rows]), ref.predict(Q[rows].copy()), rtol=tol, atol=tol
    )


# -- parameters derived from the fitted points ------------------------------------


def test_seuclidean_default_variance_is_sklearns_pairwise():
    X, Q = _split(_real, np.float64)
    ours = NearestNeighbors(n_neighbors=5, metric="seuclidean").fit(X)
    assert ours.effective_metric_params_ == {}  # as scikit-learn's
    V = np.var(X, axis=0, ddof=1)  # what sklearn's pairwise_distances(X) uses
    ref = skn.NearestNeighbors(
        n_neighbors=5, metric="seuclidean", metric_params={"V": V},
        algorithm="brute",
    ).fit(X)
    np.testing.assert_allclose(ours.kneighbors(Q)[0], ref.kneighbors(Q)[0])
    with pytest.raises(TypeError):  # scikit-learn needs V; we derive it
        sk = skn.NearestNeighbors(metric="seuclidean", algorithm="brute")
        sk.fit(X).kneighbors(Q)


def test_mahalanobis_defaults_and_covariance():
    X, Q = _split(_real, np.float64)
    kw = {"n_neighbors": 5, "metric": "mahalanobis"}
    ours = NearestNeighbors(**kw).fit(X)
    ref = skn.NearestNeighbors(algorithm="brute", **kw).fit(X)
    # without VI, scikit-learn serves kneighbors() only (X is Y): the same VI
    np.testing.assert_allclose(ours.kneighbors()[0], ref.kneighbors()[0])
    V = np.cov(X.T) + np.eye(5)
    by_v = NearestNeighbors(**kw, metric_params={"V": V}).fit(X).kneighbors(Q)
    vi = {"VI": np.linalg.inv(V)}
    by_vi = skn.NearestNeighbors(algorithm="brute", metric_params=vi, **kw)
    np.testing.assert_allclose(by_v[0], by_vi.fit(X).kneighbors(Q)[0])


# -- input rules ------------------------------------------------------------------


def test_boolean_conversion_warns_as_sklearn():
    X, Q = _split(_bits, np.float64)
    for data in (X, X.astype(float)):
        warned = []
        for cls in (NearestNeighbors, skn.NearestNeighbors):
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                cls(n_neighbors=3, metric="jaccard").fit(data).kneighbors(Q)
            warned.append([str(m.message) for m in w
                           if issubclass(m.category, DataConversionWarning)])
        assert warned[0] == warned[1]
        assert bool(warned[0]) == (data.dtype != bool)
    # 0/1 and any nonzero value are the same booleans
    nn = NearestNeighbors(n_neighbors=3, metric="dice").fit(X)
    with pytest.warns(DataConversionWarning, match="converted to boolean"):
        other = nn.kneighbors(np.where(Q, 2.5, 0.0))[0]
    np.testing.assert_array_equal(nn.kneighbors(Q)[0], other)


def test_nan_is_allowed_for_nan_euclidean_only():
    X, Q = _split(_with_nan, np.float64)
    tags = NearestNeighbors(metric="nan_euclidean").__sklearn_tags__()
    assert tags.input_tags.allow_nan
    assert not NearestNeighbors().__sklearn_tags__().input_tags.allow_nan
    with pytest.raises(ValueError, match="NaN"):
        NearestNeighbors(metric="euclidean").fit(X)
    nn = NearestNeighbors(metric="nan_euclidean").fit(np.nan_to_num(X))
    nn.kneighbors(Q)  # NaN queries too
    with pytest.raises(ValueError, match="infinity"):
        NearestNeighbors(metric="nan_euclidean").fit(np.where(np.isnan(X), np.inf, X))
    # scikit-learn's test_nan_euclidean_support: no NaN comes out
    Xs, y = [[0, 1], [1, np.nan], [2, 3], [3, 5]], [0, 0, 1, 1]
    for cls in (KNeighborsClassifier, KNeighborsRegressor):
        est = cls(n_neighbors=2, metric="nan_euclidean").fit(Xs, y)
        assert not np.isnan(est.kneighbors(Xs)[0]).any()
        assert not np.isnan(est.predict(Xs)).any()


_BAD = [
    ({"metric": "seuclidean", "metric_params": {"V": [1.0, 2.0]}},
     r"metric_params\['V'\] must be a 1-D array of 5"),
    ({"metric": "seuclidean", "metric_params": {"V": [1, 2, -1, 1, 1]}},
     r"metric_params\['V'\] .*non-negative"),
    ({"metric": "mahalanobis", "metric_params": {"VI": np.eye(4)}},
     r"metric_params\['VI'\] must be a \(5, 5\) array"),
    ({"metric": "mahalanobis", "metric_params": {"V": np.eye(5), "VI": np.eye(5)}},
     "either 'V' .* or 'VI'"),
    ({"metric": "mahalanobis", "metric_params": {"V": np.zeros((5, 5))}},
     r"metric_params\['V'\] is singular"),
    ({"metric": "minkowski", "metric_params": {"w": [1.0, 2.0]}, "p": 3},
     r"metric_params\['w'\] must be a 1-D array of 5"),
    ({"metric": "minkowski", "metric_params": {"w": [1, 1, -1, 1, 1]}, "p": 3},
     r"metric_params\['w'\].*non-negative"),
    ({"metric": "jaccard", "metric_params": {"V": _V}},
     r"\['V'\] are not parameters of metric 'jaccard'"),
    ({"metric": "kulsinski"},
     # scikit-learn's own error: the fit goes to it for a name we do not know
     r"The 'metric' parameter of NearestNeighbors must be a str among \{.*"
     r"'braycurtis'.*\}, a callable or an instance of .*DistanceMetric'\. Got "
     r"'kulsinski' instead\."),
]


@pytest.mark.parametrize("params,match", _BAD, ids=[str(i) for i in range(len(_BAD))])
def test_bad_metric_params(params, match):
    X = np.random.default_rng(0).random((10, 5))
    with pytest.raises(ValueError, match=match):
        NearestNeighbors(**params).fit(X)


def test_every_sklearn_brute_metric_is_accepted():
    names = set(skn.VALID_METRICS["brute"]) - {"precomputed"}
    X = np.random.default_rng(0).random((10, 2))
    for name in sorted(names):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DataConversionWarning)
            NearestNeighbors(n_neighbors=2, metric=name, backend="numpy").fit(X)
    # as scikit-learn: a fit in 3 features works, a query raises
    nn = NearestNeighbors(n_neighbors=1, metric="haversine").fit(np.ones((3, 3)))
    with pytest.raises(ValueError, match="Haversine distance only valid in 2 dim"):
        nn.kneighbors(np.ones((3, 3)))


# -- the CUDA kernels (no GPU here: generated, and run by the CPU shim) -------------


def _formula(case, dtype, n=45):
    """The K-min formula of a case's search over its fitted points (45 queries,
    60 fitted: tails on both axes of the shim's 16-point tiles)."""
    _, metric, params, make = case
    X, Q = _split(make, dtype)
    nn = NearestNeighbors(backend="numpy", **_params(metric, params))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataConversionWarning)
        search, Q = nn.fit(X)._search(np.concatenate([Q, X[: n - len(Q)]]))
    return search.rdist(search.metric.prepare(Q))


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_cuda_source_is_generated(case, dtype):
    from kerneltools.backend.cuda._backend import generate_cuda_source

    plan = _formula(case, dtype)._plan("KMin_ArgKMin", 1, K=K)[0]
    source, _ = generate_cuda_source(plan)
    assert "__global__" in source


#: The new operations' patterns, one case each (the shim builds at -O0, ~1 s
#: a kernel; all of CASES pass too: 64 s): sines of extracted components,
#: a guarded ratio of prepared norms, masks with a 0/0, boolean counts.
SHIM_CASES = [c for c in CASES if c[0] in ("haversine", "braycurtis",
                                           "nan_euclidean", "yule")]


@pytest.mark.slow
@pytest.mark.parametrize("case", SHIM_CASES, ids=[c[0] for c in SHIM_CASES])
def test_cuda_kernel_on_the_shim_matches_numpy(case, tmp_path_factory):
    import _cuda_shim
    from _cuda_shim import SHIM_TUNING

    from kerneltools.backend._dispatch import run_plan

    ok, why = _cuda_shim.available()
    if not ok:
        pytest.skip(why)
    plan, args = _formula(case, np.float64)._plan("KMin_ArgKMin", 1, K=4)
    got = _cuda_shim.run(plan, args, SHIM_TUNING, tmp_path_factory.mktemp("shim"))
    ref = run_plan(plan, args, "numpy")
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(got[1], ref[1])
