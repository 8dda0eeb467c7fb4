"""KNNImputer against a dense NumPy imputer with exact distances, and
against scikit-learn's.

The dense reference follows scikit-learn's algorithm (donors per column,
NaN distances last and weighing 0, the column mean where no donor has a
finite distance, its rule for a zero distance) with the ``nan_euclidean``
distances computed directly, without the expanded form's cancellation; it
takes tied donors by index, as ours does. Against it the imputed values
agree to float64 rounding; against scikit-learn (whose expanded distances
err by up to ~1e-8 relative for near points, which 'distance' weights
carry into the values) to 1e-6.
"""

from __future__ import annotations

import doctest

import numpy as np
import pytest
from sklearn import impute as ski
from sklearn.utils.estimator_checks import parametrize_with_checks

from kerneltools.estimators import KNNImputer
from kerneltools.estimators.impute import _knn


def _with_missing(n, d, frac, seed, dtype=np.float64, missing=np.nan):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(dtype)
    X[rng.random(X.shape) < frac] = missing
    return X


def _dense_reference(X, fit_X, k, weights):
    """scikit-learn's imputation with exact nan_euclidean distances."""
    X, fit_X = X.astype(np.float64), fit_X.astype(np.float64)
    mx, mf = np.isnan(X), np.isnan(fit_X)
    both = (~mx)[:, None, :] & (~mf)[None, :, :]
    diff = np.where(both, np.nan_to_num(X)[:, None] - np.nan_to_num(fit_X)[None], 0)
    cnt = both.sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        D = np.sqrt(X.shape[1] / cnt * (diff**2).sum(-1))
    out = X.copy()
    for col in np.flatnonzero(~mf.all(0)):
        donors = np.flatnonzero(~mf[:, col])
        for i in np.flatnonzero(mx[:, col]):
            d = D[i, donors]
            if np.isnan(d).all():
                out[i, col] = fit_X[donors, col].mean()
                continue
            order = np.lexsort((donors, np.where(np.isnan(d), np.inf, d)))[:k]
            dd, v = d[order], fit_X[donors[order], col]
            if weights == "distance" and np.any(dd == 0):
                w = (dd == 0).astype(float)
            elif weights == "distance":
                w = 1 / dd
            else:
                w = np.ones_like(dd)
            w[np.isnan(dd)] = 0
            out[i, col] = (w * v).sum() / w.sum()
    return out[:, ~mf.all(0)]


@pytest.mark.parametrize("frac", [0.1, 0.3, 0.6])
@pytest.mark.parametrize("weights", ["uniform", "distance"])
@pytest.mark.parametrize("seed", range(3))
def test_matches_dense_reference(frac, weights, seed):
    X = _with_missing(150, 6, frac, seed)
    ours = KNNImputer(n_neighbors=4, weights=weights).fit_transform(X)
    ref = _dense_reference(X, X, 4, weights)
    np.testing.assert_allclose(ours, ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("frac", [0.1, 0.3, 0.6])
@pytest.mark.parametrize("weights", ["uniform", "distance"])
def test_matches_sklearn(frac, weights, backend, dtype):
    X = _with_missing(300, 8, frac, 7, dtype)
    Y = _with_missing(80, 8, frac, 8, dtype)
    ours = KNNImputer(n_neighbors=5, weights=weights, backend=backend).fit(X)
    ref = ski.KNNImputer(n_neighbors=5, weights=weights).fit(X)
    for data in (X, Y):
        a, b = ours.transform(data), ref.transform(data)
        assert a.dtype == b.dtype == dtype
        if dtype == np.float32 and weights == "distance":
            # scikit-learn's float32 expanded distances err by ~1e-3 and
            # change donors: the exact reference instead
            b = _dense_reference(data, X, 5, weights)
        tol = 1e-6 if dtype == np.float64 else 2e-6
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def test_integer_placeholder_indicator_and_empty_columns():
    X = _with_missing(120, 5, 0.3, 3, missing=-1.0)
    X[:, 2] = -1.0  # empty at fit
    for keep in (False, True):
        kw = dict(missing_values=-1.0, add_indicator=True, keep_empty_features=keep)
        ours = KNNImputer(**kw).fit_transform(X)
        ref = ski.KNNImputer(**kw).fit_transform(X)
        np.testing.assert_allclose(ours, ref, rtol=1e-6, atol=1e-9)
        assert ours.shape == ref.shape


def test_callable_weights_and_far_rows():
    X = np.array([[1.0, np.nan, 3.0], [np.nan, 2.0, np.nan], [4.0, 5.0, 6.0],
                  [np.nan, np.nan, 9.0], [2.0, 2.0, np.nan]])

    def w(dist):
        return np.exp(-np.nan_to_num(dist, nan=50.0))

    ours = KNNImputer(n_neighbors=2, weights=w).fit_transform(X)
    ref = ski.KNNImputer(n_neighbors=2, weights=w).fit_transform(X)
    np.testing.assert_allclose(ours, ref, rtol=1e-9)


def test_callable_metric_goes_to_sklearn():
    X = _with_missing(60, 3, 0.2, 4)

    def metric(a, b, **kw):
        return np.nansum(np.abs(a - b))

    ours = KNNImputer(metric=metric).fit(X)
    ref = ski.KNNImputer(metric=metric).fit(X)
    assert hasattr(ours, "fallback_")
    np.testing.assert_array_equal(ours.transform(X), ref.transform(X))


def test_copy_false_imputes_in_place():
    X = _with_missing(50, 3, 0.2, 1)
    out = KNNImputer(copy=False).fit(X).transform(X)
    assert not np.isnan(X).any() and np.shares_memory(out, X) or np.array_equal(
        out, X)


def test_errors():
    X = _with_missing(20, 3, 0.2, 0)
    with pytest.raises(ValueError, match="n_neighbors"):
        KNNImputer(n_neighbors=0).fit(X)
    with pytest.raises(ValueError, match="metric"):
        KNNImputer(metric="euclidean").fit(X)
    with pytest.raises(ValueError, match="features"):
        KNNImputer().fit(X).transform(X[:, :2])


@parametrize_with_checks([KNNImputer(), KNNImputer(weights="distance")])
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def test_doctests():
    assert doctest.testmod(_knn, raise_on_error=True).attempted > 0
