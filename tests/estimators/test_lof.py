"""LocalOutlierFactor against a dense NumPy LOF (Breunig et al.) and scikit-learn.

Data are continuous random points, so that the K nearest neighbours have
no ties and the LOF is unambiguous (with ties, which K-th neighbour is
kept is a free choice that changes the scores).
"""

from __future__ import annotations

import doctest

import numpy as np
import pytest
import scipy.sparse
from scipy.spatial.distance import cdist
from sklearn import neighbors as skn
from sklearn.utils.estimator_checks import parametrize_with_checks

from kerneltools.estimators import LocalOutlierFactor, outliers

RTOL = {np.dtype(np.float32): 2e-5, np.dtype(np.float64): 1e-12}


def _data(n=80, d=3, seed=0, outliers=5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[:outliers] += 6 * rng.normal(size=(outliers, d))
    return X


def dense_lof(X, k, Q=None, metric="euclidean", **kw):
    """-LOF of the training points (Q None) or of the queries Q, densely."""
    D = cdist(X, X, metric=metric, **kw)
    np.fill_diagonal(D, np.inf)
    nbr = np.argsort(D, axis=1, kind="stable")[:, :k]
    kdist = np.take_along_axis(D, nbr[:, -1:], axis=1).ravel()

    def lrd(dist, ind):
        return 1 / (np.maximum(dist, kdist[ind]).mean(axis=1) + 1e-10)

    lrd_X = lrd(np.take_along_axis(D, nbr, axis=1), nbr)
    if Q is None:
        return -(lrd_X[nbr] / lrd_X[:, None]).mean(axis=1)
    DQ = cdist(Q, X, metric=metric, **kw)
    nq = np.argsort(DQ, axis=1, kind="stable")[:, :k]
    lrd_Q = lrd(np.take_along_axis(DQ, nq, axis=1), nq)
    return -(lrd_X[nq] / lrd_Q[:, None]).mean(axis=1)


@pytest.mark.parametrize("k", [1, 5, 20])
def test_outlier_factor_matches_dense_reference(k, backend, dtype, rtol):
    X = _data().astype(dtype)
    lof = LocalOutlierFactor(n_neighbors=k, backend=backend).fit(X)
    ref = dense_lof(X.astype(np.float64), k)
    assert lof.negative_outlier_factor_.dtype == dtype
    np.testing.assert_allclose(lof.negative_outlier_factor_, ref, rtol=RTOL[dtype])
    assert lof.n_neighbors_ == k
    labels = lof.fit_predict(X)
    np.testing.assert_array_equal(labels, np.where(ref < -1.5, -1, 1))


def test_novelty_matches_dense_reference(backend, dtype):
    X = _data().astype(dtype)
    Q = _data(n=30, seed=1).astype(dtype)
    lof = LocalOutlierFactor(n_neighbors=7, novelty=True, contamination=0.1,
                             backend=backend).fit(X)
    ref = dense_lof(X.astype(np.float64), 7, Q.astype(np.float64))
    got = lof.score_samples(Q)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, ref, rtol=RTOL[dtype])
    offset = np.percentile(dense_lof(X.astype(np.float64), 7), 10)
    assert lof.offset_ == pytest.approx(offset, rel=RTOL[dtype])
    np.testing.assert_allclose(lof.decision_function(Q), got - lof.offset_,
                               rtol=RTOL[dtype])
    np.testing.assert_array_equal(lof.predict(Q), np.where(got < lof.offset_, -1, 1))


@pytest.mark.parametrize("metric, p, cdist_kw", [
    ("manhattan", 2, {"metric": "cityblock"}),
    ("minkowski", 3, {"metric": "minkowski", "p": 3}),
    ("chebyshev", 2, {"metric": "chebyshev"}),
    ("cosine", 2, {"metric": "cosine"}),
])
def test_metrics_match_dense_reference(metric, p, cdist_kw):
    X = _data()
    lof = LocalOutlierFactor(n_neighbors=6, metric=metric, p=p).fit(X)
    np.testing.assert_allclose(lof.negative_outlier_factor_,
                               dense_lof(X, 6, **cdist_kw), rtol=1e-10)


@pytest.mark.parametrize("novelty", [False, True])
def test_matches_sklearn(novelty):
    X, Q = _data(n=120, d=4), _data(n=40, d=4, seed=2)
    ours = LocalOutlierFactor(n_neighbors=10, novelty=novelty,
                              contamination=0.05).fit(X)
    ref = skn.LocalOutlierFactor(n_neighbors=10, novelty=novelty,
                                 contamination=0.05).fit(X)
    np.testing.assert_allclose(ours.negative_outlier_factor_,
                               ref.negative_outlier_factor_, rtol=1e-12)
    assert ours.offset_ == pytest.approx(ref.offset_, rel=1e-12)
    if novelty:
        np.testing.assert_allclose(ours.score_samples(Q), ref.score_samples(Q),
                                   rtol=1e-12)
        np.testing.assert_array_equal(ours.predict(Q), ref.predict(Q))
    d, i = ours.kneighbors(Q, n_neighbors=3)
    d_ref, i_ref = ref.kneighbors(Q, n_neighbors=3)
    np.testing.assert_array_equal(i, i_ref)
    np.testing.assert_allclose(d, d_ref, rtol=1e-12)
    assert (ours.kneighbors_graph(Q) != ref.kneighbors_graph(Q)).nnz == 0


def test_unserved_input_goes_to_sklearn():
    X = _data(n=40)
    sparse = LocalOutlierFactor(novelty=True).fit(scipy.sparse.csr_matrix(X))
    assert isinstance(sparse.fallback_, skn.LocalOutlierFactor)
    ref = skn.LocalOutlierFactor(novelty=True).fit(X)
    np.testing.assert_allclose(sparse.score_samples(X), ref.score_samples(X))
    D = cdist(X, X)
    pre = LocalOutlierFactor(n_neighbors=5, metric="precomputed")
    np.testing.assert_array_equal(
        pre.fit_predict(D),
        skn.LocalOutlierFactor(n_neighbors=5, metric="precomputed").fit_predict(D))
    # a dense fit after a sparse one is ours again
    assert not hasattr(LocalOutlierFactor().fit(X), "fallback_")


def test_sparse_queries_after_a_dense_fit():
    X = _data(n=50)
    lof = LocalOutlierFactor(novelty=True).fit(X)
    np.testing.assert_allclose(lof.score_samples(scipy.sparse.csr_matrix(X[:5])),
                               lof.score_samples(X[:5]), rtol=1e-12)


def test_novelty_methods_availability():
    X = _data(n=30)
    lof = LocalOutlierFactor().fit(X)
    for method in ("predict", "decision_function", "score_samples"):
        with pytest.raises(AttributeError, match=f"no attribute '{method}'") as err:
            getattr(lof, method)
        assert f"{method} is not available when novelty=False" in str(
            err.value.__cause__)
    with pytest.raises(AttributeError, match="no attribute 'fit_predict'") as err:
        LocalOutlierFactor(novelty=True).fit_predict
    assert "fit_predict is not available when novelty=True" in str(err.value.__cause__)


def test_errors_and_warnings():
    X = _data(n=10)
    with pytest.warns(UserWarning, match=r"n_neighbors \(20\) is greater than"):
        assert LocalOutlierFactor().fit(X).n_neighbors_ == 9
    with pytest.raises(ValueError, match="'contamination' parameter of "
                       "LocalOutlierFactor"):
        LocalOutlierFactor(contamination=0.7).fit(X)
    with pytest.raises(ValueError, match="'n_neighbors' parameter"):
        LocalOutlierFactor(n_neighbors=0).fit(X)
    with pytest.raises(ValueError, match="Expected n_neighbors < n_samples_fit"):
        LocalOutlierFactor(n_neighbors=1).fit(X[:1])
    with pytest.raises(ValueError, match="4 features, but LocalOutlierFactor is "
                       "expecting 3"):
        LocalOutlierFactor(novelty=True, n_neighbors=3).fit(X).score_samples(
            np.zeros((2, 4)))
    dup = np.vstack([np.zeros((30, 1)), np.arange(1, 6)[:, None] * 1e3])
    with pytest.warns(UserWarning, match="Duplicate values"):
        LocalOutlierFactor(n_neighbors=3).fit(dup)


@parametrize_with_checks([LocalOutlierFactor(), LocalOutlierFactor(novelty=True)],
                         expected_failed_checks=lambda est: {
                             "check_outlier_contamination": (
                                 "inspects _parameter_constraints for scikit-learn's "
                                 "private Interval class; ours is kerneltools' own")})
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def test_doctests():
    assert doctest.testmod(outliers, raise_on_error=True).attempted > 0
