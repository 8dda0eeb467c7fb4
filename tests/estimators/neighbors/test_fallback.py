"""The k-NN estimators' hand-over to scikit-learn, and its validation rules.

What the engine does not serve (sparse X, metric='precomputed',
DistanceMetric objects, callables of two 1-D arrays, trees and fitted
estimators as X) is fitted by scikit-learn's class of the same name: results,
attributes, warnings and errors must then be scikit-learn's. What the engine
serves must not be handed over, and must raise scikit-learn's errors where
scikit-learn raises them (a metric the requested tree lacks, Minkowski p < 1
with a tree, a sparse query of a tree).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn import neighbors as skn
from sklearn.metrics import DistanceMetric, pairwise_distances
from sklearn.utils.estimator_checks import parametrize_with_checks

from kerneltools.estimators.neighbors import (
    KNeighborsClassifier,
    KNeighborsRegressor,
    KNeighborsTransformer,
    NearestNeighbors,
    RadiusNeighborsClassifier,
    RadiusNeighborsRegressor,
    RadiusNeighborsTransformer,
)


def _data(seed=0, n=40, d=3):
    rng = np.random.default_rng(seed)
    X, Q = rng.random((n, d)), rng.random((10, d))
    return X, Q, (X[:, 0] > 0.5).astype(int)


def _manhattan_1d(a, b):
    return float(np.abs(a - b).sum())


_CASES = {
    "sparse": (lambda X: sp.csr_matrix(X), {}),
    "precomputed": (lambda X: pairwise_distances(X), {"metric": "precomputed"}),
    "DistanceMetric": (lambda X: X, {"metric": DistanceMetric.get_metric("euclidean")}),
    "callable": (lambda X: X, {"metric": _manhattan_1d}),
    "KDTree": (lambda X: skn.KDTree(X), {}),
}


@pytest.mark.parametrize("case", sorted(_CASES))
def test_handed_over_fits_equal_sklearn(case):
    X, Q, y = _data()
    to_input, params = _CASES[case]
    fit_input = to_input(X)
    if case == "precomputed":
        Qin = pairwise_distances(Q, X)
    elif case == "sparse":
        Qin = sp.csr_matrix(Q)
    else:
        Qin = Q
    ours = NearestNeighbors(n_neighbors=3, radius=0.4, **params).fit(fit_input)
    ref = skn.NearestNeighbors(n_neighbors=3, radius=0.4, **params).fit(fit_input)
    assert isinstance(ours.fallback_, skn.NearestNeighbors)
    assert ours.n_samples_fit_ == ref.n_samples_fit_
    assert ours.effective_metric_ == ref.effective_metric_
    for a, b in zip(ours.kneighbors(Qin), ref.kneighbors(Qin)):
        np.testing.assert_array_equal(a, b)
    try:
        expected = ref.radius_neighbors(Qin, sort_results=True)
    except TypeError as exc:  # scikit-learn's, for DistanceMetric objects
        with pytest.raises(TypeError, match=re.escape(str(exc))):
            ours.radius_neighbors(Qin, sort_results=True)
    else:
        for a, b in zip(ours.radius_neighbors(Qin, sort_results=True), expected):
            for u, v in zip(a, b):
                np.testing.assert_array_equal(u, v)
    assert (ours.kneighbors_graph(Qin) != ref.kneighbors_graph(Qin)).nnz == 0
    if case == "KDTree":
        return  # (scikit-learn's classifiers take trees as X without y checks)
    for ours_cls, ref_cls, kw in (
        (KNeighborsClassifier, skn.KNeighborsClassifier, {"n_neighbors": 3}),
        (KNeighborsRegressor, skn.KNeighborsRegressor, {"n_neighbors": 3}),
        (RadiusNeighborsClassifier, skn.RadiusNeighborsClassifier,
         {"radius": 0.5, "outlier_label": "most_frequent"}),
        (RadiusNeighborsRegressor, skn.RadiusNeighborsRegressor, {"radius": 0.8}),
    ):
        if case == "DistanceMetric" and ours_cls is not KNeighborsRegressor:
            continue  # scikit-learn's own classes fail there (its tests skip it)
        a = ours_cls(**kw, **params).fit(fit_input, y)
        b = ref_cls(**kw, **params).fit(fit_input, y)
        assert hasattr(a, "fallback_")
        np.testing.assert_array_equal(a.predict(Qin), b.predict(Qin))


def test_fallback_says_so_at_verbose(capsys):
    X, _, _ = _data()
    nn = NearestNeighbors(n_neighbors=2)
    nn.verbose = 1
    nn.fit(sp.csr_matrix(X))
    assert "sparse X" in capsys.readouterr().err


def test_refit_on_served_input_drops_the_fallback():
    X, Q, _ = _data()
    nn = NearestNeighbors(n_neighbors=2).fit(sp.csr_matrix(X))
    assert hasattr(nn, "fallback_")
    nn.fit(X)
    assert not hasattr(nn, "fallback_") and nn._fit_method == "brute"
    ref = skn.NearestNeighbors(n_neighbors=2, algorithm="brute").fit(X)
    np.testing.assert_allclose(nn.kneighbors(Q)[0], ref.kneighbors(Q)[0], rtol=1e-12)


def test_served_inputs_are_not_handed_over():
    X, _, y = _data()
    for est in (NearestNeighbors(), KNeighborsClassifier(),
                RadiusNeighborsRegressor(metric="cosine"),
                KNeighborsTransformer(metric=lambda x, y: ((x - y) ** 2).sum())):
        est.fit(X, y)
        assert not hasattr(est, "fallback_"), est


def test_fitted_estimator_as_X():
    X, Q, y = _data()
    ours = NearestNeighbors(n_neighbors=2).fit(X)
    for source in (ours, NearestNeighbors(n_neighbors=2).fit(sp.csr_matrix(X)),
                   skn.NearestNeighbors(n_neighbors=2).fit(X)):
        clf = KNeighborsClassifier(n_neighbors=2).fit(source, y)
        ref = skn.KNeighborsClassifier(n_neighbors=2).fit(X, y)
        np.testing.assert_array_equal(clf.predict(Q), ref.predict(Q))


def test_sparse_query_of_a_dense_fit():
    X, Q, _ = _data()
    ours = NearestNeighbors(n_neighbors=3).fit(X)
    ref = skn.NearestNeighbors(n_neighbors=3, algorithm="brute").fit(X)
    for a, b in zip(ours.kneighbors(sp.csr_matrix(Q)), ref.kneighbors(sp.csr_matrix(Q))):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    tree = NearestNeighbors(n_neighbors=3, algorithm="kd_tree").fit(X)
    with pytest.raises(ValueError, match="kd_tree does not work with sparse"):
        tree.kneighbors(sp.csr_matrix(Q))


@pytest.mark.parametrize("algorithm,metric", [("kd_tree", "cosine"),
                                              ("kd_tree", "braycurtis"),
                                              ("ball_tree", "cosine"),
                                              ("brute", "infinity")])
def test_tree_metric_errors_as_sklearn(algorithm, metric):
    X, _, _ = _data()
    with pytest.raises(ValueError) as ours:
        NearestNeighbors(algorithm=algorithm, metric=metric).fit(X)
    with pytest.raises(ValueError) as ref:
        skn.NearestNeighbors(algorithm=algorithm, metric=metric).fit(X)
    assert str(ours.value) == str(ref.value)


@pytest.mark.parametrize("algorithm", ["kd_tree", "ball_tree"])
def test_minkowski_semimetric_with_a_tree_raises_as_sklearn(algorithm):
    X, _, _ = _data()
    with pytest.raises(ValueError, match=f'algorithm="{algorithm}" does not support'):
        NearestNeighbors(algorithm=algorithm, p=0.5).fit(X)
    with pytest.raises(ValueError, match="weight parameter 'w'"):
        NearestNeighbors(algorithm="kd_tree", p=3,
                         metric_params={"w": np.ones(3)}).fit(X)


def test_n_neighbors_above_n_samples_fit():
    X, Q, _ = _data(n=5)
    for est in (NearestNeighbors(n_neighbors=6), skn.NearestNeighbors(n_neighbors=6)):
        est.fit(X)
        with pytest.raises(ValueError, match="Expected n_neighbors <= n_samples_fit"):
            est.kneighbors(Q)
        with pytest.raises(ValueError, match="Expected n_neighbors < n_samples_fit"):
            est.kneighbors(n_neighbors=5)


@parametrize_with_checks([RadiusNeighborsClassifier(radius=2.0),
                          RadiusNeighborsRegressor(radius=2.0),
                          KNeighborsTransformer(), RadiusNeighborsTransformer()])
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)
