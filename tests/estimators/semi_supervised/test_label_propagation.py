"""LabelSpreading and LabelPropagation against scikit-learn's own classes.

The reference is scikit-learn's dense implementation (its rbf_kernel uses
expanded squared distances, whose rounding depends on the BLAS): float64
label distributions agree to 1e-10, float32 ones to 1e-5.
"""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse
from sklearn import semi_supervised as sks
from sklearn.datasets import make_blobs, make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.estimator_checks import parametrize_with_checks

from kerneltools.estimators import LabelPropagation, LabelSpreading

PAIRS = {"spreading": (LabelSpreading, sks.LabelSpreading),
         "propagation": (LabelPropagation, sks.LabelPropagation)}
TOL = {np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-10}


def _data(n, seed, n_features=6, n_classes=3, labelled=0.2, dtype=np.float64):
    X, y = make_classification(n_samples=n, n_features=n_features, n_informative=4,
                               n_classes=n_classes, random_state=seed)
    rng = np.random.default_rng(seed)
    y[rng.random(n) >= labelled] = -1
    return X.astype(dtype), y


def _fit_both(variant, X, y, backend=None, **params):
    ours, theirs = PAIRS[variant]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return (ours(**params, backend=backend).fit(X, y),
                theirs(**params).fit(X, y))


def _assert_same(a, b, tol):
    np.testing.assert_allclose(a.label_distributions_, b.label_distributions_,
                               rtol=0, atol=tol)
    assert a.n_iter_ == b.n_iter_
    np.testing.assert_array_equal(a.classes_, b.classes_)
    sure = np.sort(b.label_distributions_, axis=1)
    clear = sure[:, -1] - sure[:, -2] > 10 * tol  # argmax not decided by rounding
    np.testing.assert_array_equal(a.transduction_[clear], b.transduction_[clear])


@pytest.mark.parametrize("variant", ["spreading", "propagation"])
@pytest.mark.parametrize(("n", "seed", "gamma"), [(200, 0, 0.5), (700, 1, 0.1),
                                                  (1500, 2, 2.0)])
def test_rbf_distributions_match_sklearn(variant, n, seed, gamma, backend):
    X, y = _data(n, seed)
    params = {"gamma": gamma, "max_iter": 50}
    if variant == "spreading":
        params["alpha"] = [0.1, 0.5, 0.9][seed]
    ours, ref = _fit_both(variant, X, y, backend=backend, **params)
    _assert_same(ours, ref, 1e-10)
    Xt = X[:40] + 0.05
    np.testing.assert_allclose(ours.predict_proba(Xt), ref.predict_proba(Xt),
                               rtol=0, atol=1e-10)


@pytest.mark.parametrize("variant", ["spreading", "propagation"])
def test_rbf_distributions_match_sklearn_at_5000_points(variant):
    X, y = _data(5000, 3, n_features=15, n_classes=4, labelled=0.1)
    ours, ref = _fit_both(variant, X, y, gamma=0.05, max_iter=20)
    _assert_same(ours, ref, 1e-10)


@pytest.mark.parametrize("variant", ["spreading", "propagation"])
def test_float32_input(variant):
    X, y = _data(600, 4, dtype=np.float32)
    ours, ref = _fit_both(variant, X, y, gamma=0.3)
    assert ours.label_distributions_.dtype == np.float64
    _assert_same(ours, ref, TOL[np.dtype(np.float32)])
    np.testing.assert_allclose(ours.predict_proba(X[:30]), ref.predict_proba(X[:30]),
                               rtol=0, atol=1e-5)


@pytest.mark.parametrize("variant", ["spreading", "propagation"])
@pytest.mark.parametrize("n_neighbors", [3, 10])
def test_knn_distributions_match_sklearn(variant, n_neighbors):
    # continuous data: no tied neighbour distances, so the graphs are equal
    X, y = _data(800, 5)
    ours, ref = _fit_both(variant, X, y, kernel="knn", n_neighbors=n_neighbors)
    _assert_same(ours, ref, 1e-12)
    Xt = X[:25] + 0.01
    np.testing.assert_allclose(ours.predict_proba(Xt), ref.predict_proba(Xt),
                               atol=1e-12)
    ref_graph = ref._build_graph()  # sparse, or np.matrix (propagation)
    ref_graph = ref_graph.toarray() if scipy.sparse.issparse(ref_graph) else ref_graph
    np.testing.assert_array_equal(ours._build_graph().toarray(), ref_graph)


@pytest.mark.parametrize("variant", ["spreading", "propagation"])
def test_build_graph_is_sklearns(variant):
    X, y = _data(150, 6)
    ours, ref = _fit_both(variant, X, y, gamma=0.2)
    np.testing.assert_allclose(ours._build_graph(), ref._build_graph(), atol=1e-14)


def test_duplicated_points_and_far_outlier():
    # duplicates (off-diagonal pairs at distance 0) and an isolated point
    X, y = make_blobs(n_samples=120, centers=3, random_state=0)
    X = np.vstack([X, X[:10], [[1e3, 1e3]]])
    y = np.concatenate([y, y[:10], [0]])
    y[np.arange(len(y)) % 3 != 0] = -1
    for variant in PAIRS:
        ours, ref = _fit_both(variant, X, y, gamma=0.5)
        _assert_same(ours, ref, 1e-10)


def test_convergence_warning_and_n_iter():
    X, y = _data(300, 7)
    for variant in PAIRS:
        with pytest.warns(ConvergenceWarning, match="max_iter=2 was reached"):
            model = PAIRS[variant][0](gamma=0.5, max_iter=2).fit(X, y)
        assert model.n_iter_ == 2


def test_callable_kernel_and_sparse_input_go_to_sklearn():
    from sklearn.metrics.pairwise import rbf_kernel

    X, y = _data(100, 8)
    model = LabelSpreading(kernel=lambda a, b: rbf_kernel(a, b, gamma=0.5)).fit(X, y)
    ref = sks.LabelSpreading(gamma=0.5).fit(X, y)
    assert hasattr(model, "fallback_")
    np.testing.assert_allclose(model.label_distributions_, ref.label_distributions_,
                               atol=1e-12)
    sparse = LabelPropagation(gamma=0.5).fit(scipy.sparse.csr_matrix(X), y)
    assert hasattr(sparse, "fallback_")
    dense = LabelPropagation(gamma=0.5).fit(X, y)
    assert not hasattr(dense, "fallback_")
    np.testing.assert_allclose(sparse.label_distributions_, dense.label_distributions_,
                               atol=1e-10)
    np.testing.assert_array_equal(sparse.predict(X[:20]), dense.predict(X[:20]))


@pytest.mark.parametrize(("params", "match"), [
    ({"gamma": -1.0}, "'gamma' parameter"),
    ({"alpha": 1.5}, "'alpha' parameter"),
    ({"max_iter": 0}, "'max_iter' parameter"),
    ({"kernel": "linear"}, "'kernel' parameter"),
    ({"n_neighbors": 0}, "'n_neighbors' parameter"),
    ({"backend": "gpu42"}, "backend"),
])
def test_bad_parameters_raise(params, match):
    X, y = _data(50, 9)
    with pytest.raises(ValueError, match=match):
        LabelSpreading(**params).fit(X, y)


def test_bad_input_raises():
    X, y = _data(50, 10)
    Xnan = X.copy()
    Xnan[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        LabelSpreading().fit(Xnan, y)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        LabelPropagation().fit(X, y[:-1])
    with pytest.raises(ValueError, match="Unknown label type"):
        LabelPropagation().fit(X, y + 0.5)
    with pytest.raises(ValueError, match="every label is -1"):
        LabelSpreading().fit(X, np.full(len(X), -1))
    with pytest.raises(ValueError, match="features"):
        LabelSpreading().fit(X, y).predict(X[:, :3])


def test_pickle_round_trip():
    X, y = _data(120, 11)
    model = LabelSpreading(gamma=0.5).fit(X, y)
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(again.predict_proba(X[:10]),
                                  model.predict_proba(X[:10]))


@parametrize_with_checks([LabelSpreading(),
                          LabelPropagation(kernel="knn", n_neighbors=3),
                          LabelPropagation(max_iter=100)])
def test_sklearn_estimator_checks(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        check(estimator)


def test_doctests():
    import doctest

    from kerneltools.estimators.semi_supervised import _label_propagation

    failed, attempted = doctest.testmod(_label_propagation)
    assert attempted and not failed


def _clustered(n, seed, n_features=8):
    X, y = make_blobs(n_samples=n, n_features=n_features, centers=8, cluster_std=0.6,
                      center_box=(-5, 5), random_state=seed)
    X = np.vstack([X, X[:15], np.full((1, n_features), 40.0)])  # duplicates, outlier
    y = np.concatenate([y, y[:15], [0]])
    y[np.random.default_rng(seed).random(len(y)) >= 0.15] = -1
    return X, y


def test_cell_bounds_hold():
    # every pair of points of two cells is at least the bound apart
    from kerneltools.estimators.semi_supervised._cells import RbfCells

    X, _ = _clustered(1500, 8)
    cells = RbfCells(X, 0.5)
    D2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    C = len(cells.counts)
    lab = cells.labels
    lowest = np.full((C, C), np.inf)
    for a in range(C):
        np.minimum.at(lowest[a], lab, D2[lab == a].min(axis=0))
    assert np.all(-0.5 * lowest <= cells.log_w + 1e-9)
    assert (cells.log_w < -40).mean() > 0.3  # the bounds separate the blobs


@pytest.mark.parametrize("float32", [True, False], ids=["float32-far", "float64"])
@pytest.mark.parametrize("variant", ["spreading", "propagation"])
def test_cell_pruning_matches_sklearn(variant, float32, monkeypatch):
    from kerneltools.estimators.semi_supervised import _graphs

    monkeypatch.setattr(_graphs, "MIN_POINTS", 0)
    # the far pairs in float32 (RbfCells.far) or every kept pair in float64
    monkeypatch.setattr(_graphs, "FAR_MIN_SHARE", 0.0 if float32 else 2.0)
    X, y = _clustered(3000, 9)
    graph = _graphs.RbfGraph(X, 0.5, variant)
    assert graph.kept_share < 0.6  # the pruned path ran (the rest: dense)
    assert isinstance(graph.W, _graphs._SplitAffinity) == float32
    params = {"gamma": 0.5, "max_iter": 40}
    ours, ref = _fit_both(variant, X, y, **params)
    _assert_same(ours, ref, 1e-10)
    # each row of the pruned product within float64 rounding of the dense one
    monkeypatch.setattr(_graphs, "MIN_POINTS", 10**9)
    dense = _graphs.RbfGraph(X, 0.5, variant)
    F = np.random.default_rng(0).random((len(X), 5))
    # propagation: the pruned graph's rows are scaled by its own degrees (the
    # iteration's row normalisation cancels them); rescaled to the exact ones
    rescale = (graph.degrees / dense.degrees)[:, None] if variant == "propagation" else 1
    assert np.all((rescale <= 1 + 1e-13) & (rescale > 1 - 1e-6))  # lower bounds
    got, want = graph.matmat(F) * rescale, dense.matmat(F)
    scale = dense.matmat(np.ones_like(F))
    assert np.all(np.abs(got - want) <= 1e-13 * scale)
    # a sparse label matrix (its columns-only product) whose rows miss the
    # last cells
    cells = graph.cells.labels
    F[cells >= cells.max() // 4] = 0
    got, want = graph.matmat(F) * rescale, dense.matmat(F)
    assert np.all(np.abs(got - want) <= 1e-13 * scale)


@pytest.mark.parametrize("gamma, shift", [(0.5, 0.0), (0.1, 30.0), (0.02, -100.0)])
def test_float32_error_bounds_the_far_terms(gamma, shift):
    """:func:`_graphs._float32_error` bounds the relative error of each
    float32 kernel term times a label (the far pairs' products) against
    float64, and is not vacuous."""
    from kerneltools.estimators.semi_supervised import _graphs
    from kerneltools.lazy import Vi, Vj

    rng = np.random.default_rng(int(gamma * 100))
    X = rng.normal(size=(500, 15)) * 1.5 + shift
    Y = X[:40]
    v = np.diag(rng.random(40) + 0.5)  # one term per output
    bound = _graphs._float32_error(gamma, X)
    X32, Y32 = X.astype(np.float32), Y.astype(np.float32)
    K32 = (-Vi(X32).sqdist(Vj(Y32)) * np.float32(gamma)).exp()
    got = np.asarray(K32.matmul(v.astype(np.float32)), np.float64)
    exact = np.exp(-gamma * ((X[:, None] - Y[None]) ** 2).sum(-1)) @ v
    ok = exact > 1e-30  # float32's range
    err = np.abs(got - exact)[ok] / exact[ok]
    assert ok.mean() > 0.5 and bound < 1
    assert err.max() <= bound
    assert err.max() > bound * 1e-4  # a worst case, not vacuous
