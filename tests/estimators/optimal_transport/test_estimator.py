"""SinkhornTransport: entropic optimal transport as a scikit-learn transformer.

Checked against the plan's marginals and a dense reference of the
self-transport, by the shift it recovers, and by scikit-learn's estimator
checks; the solvers themselves are tested in tests/ot/.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.special import logsumexp
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.estimator_checks import parametrize_with_checks

import kerneltools as kt
from kerneltools.estimators.optimal_transport import SinkhornTransport

X, Y = np.random.default_rng(0).random((10, 2)), np.random.default_rng(1).random((8, 2))
NAN = X.copy()
NAN[3, 1] = np.nan


def shifted_gaussians(n=200, m=150, shift=(3.0, -1.0), seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    Xs = rng.standard_normal((n, 2))
    Xt = rng.standard_normal((m, 2)) + np.asarray(shift)
    return Xs.astype(dtype), Xt.astype(dtype)


def test_transport_fits_to_tol_and_keeps_the_target_mean(backend, dtype):
    Xs, Xt = shifted_gaussians(dtype=dtype)
    ot = SinkhornTransport(blur=0.3, tol=1e-6, backend=backend).fit(Xs, Xt=Xt)
    # float32: tol is raised to the potentials' rounding floor (~1e-5 here).
    slack = 1e-6 if dtype == np.float64 else 1e-4
    assert ot.converged_ and ot.marginal_error_ <= slack and ot.n_iter_ >= 1
    assert ot.potential_s_.dtype == dtype and ot.n_features_in_ == 2
    P = ot.coupling_
    assert np.abs(P.sum(axis=1, backend=backend)[:, 0] - 1 / 200).sum() <= slack
    assert np.abs(P.sum(axis=0, backend=backend)[:, 0] - 1 / 150).sum() <= slack
    T = ot.transform(Xs)
    assert T.dtype == dtype
    scale = np.abs(Xt).max()
    np.testing.assert_allclose(
        T.mean(axis=0),
        Xt.mean(axis=0, dtype=np.float64),
        atol=(1e-6 if dtype == np.float64 else 1e-4) * scale,
    )
    # On the fitted samples, transform is the plan's row-normalised product.
    np.testing.assert_allclose(T, (P @ Xt) / P.sum(axis=1), rtol=slack, atol=slack)


def test_transform_recovers_a_shift():
    shift = np.array([3.0, -1.0])
    Xs, Xt = shifted_gaussians(n=200, m=200, shift=shift, seed=1)
    ot = SinkhornTransport(blur=0.5).fit(Xs=Xs, Xt=Xt, ys=np.zeros(200), yt=None)
    assert ot.converged_
    np.testing.assert_allclose((ot.transform(Xs) - Xs).mean(axis=0), shift, atol=0.1)
    np.testing.assert_allclose(
        (ot.inverse_transform(Xt) - Xt).mean(axis=0), -shift, atol=0.1
    )
    # Out-of-sample points move like their neighbours among the samples.
    new = Xs[:20] + 1e-3
    np.testing.assert_allclose(ot.transform(new), ot.transform(Xs[:20]), atol=0.05)
    np.testing.assert_allclose(ot.fit_transform(Xs, Xt=Xt), ot.transform(Xs))
    # POT's keywords (scikit-learn's output wrapper would rename Xs to X)
    np.testing.assert_array_equal(ot.transform(Xs=Xs), ot.transform(Xs))
    np.testing.assert_array_equal(ot.inverse_transform(Xt=Xt), ot.inverse_transform(Xt))


def test_transport_estimator_api(capsys):
    est = SinkhornTransport(blur=0.5, reach=2.0, max_iter=50, verbose=True)
    params = est.get_params()
    assert params["blur"] == 0.5 and params["reach"] == 2.0 and params["p"] == 2
    twin = clone(est).set_params(blur=0.25, verbose=False)
    assert twin.blur == 0.25 and est.blur == 0.5
    with pytest.raises(NotFittedError):
        est.transform(np.zeros((3, 2)))
    Xs, Xt = shifted_gaussians(n=40, m=30)
    est.fit(Xs, Xt=Xt)
    out = capsys.readouterr().out
    assert "epsilon-scaling over" in out and "marginal error" in out
    assert len(est.eps_schedule_) >= 2 and est.epsilon_ == 0.25
    assert repr(twin) == "SinkhornTransport(blur=0.25, max_iter=50, reach=2.0)"


def test_transport_warns_when_not_converged():
    Xs, Xt = shifted_gaussians(n=40, m=30)
    with pytest.warns(kt.ConvergenceWarning, match="did not converge"):
        ot = SinkhornTransport(blur=0.05, max_iter=3).fit(Xs, Xt=Xt)
    assert ot.n_iter_ == 3 and not ot.converged_ and ot.marginal_error_ > 1e-6


@pytest.mark.parametrize(
    "params, fit_args, match",
    [
        ({"blur": -1.0}, {}, "'blur' parameter"),
        ({"tol": 0.0}, {}, "'tol' parameter"),
        ({"max_iter": 0}, {}, "'max_iter' parameter"),
        ({"p": 4}, {}, "'p' parameter"),
        ({}, {"Xs": NAN}, "NaN"),
        ({}, {"Xt": np.random.rand(8, 3)}, "'Xt' has 3 features"),
    ],
)
def test_transport_bad_input(params, fit_args, match):
    args = {"Xs": X, "Xt": Y} | fit_args
    with pytest.raises(ValueError, match=match):
        SinkhornTransport(**params).fit(**args)


def test_a_target_passed_by_position_is_refused():
    """fit(X, y): the second argument is scikit-learn's y; a 2-D one is a
    target passed where a label goes, refused rather than ignored."""
    with pytest.raises(TypeError, match=r"fit\(Xs, Xt=Xt\)"):
        SinkhornTransport().fit(X, Y)


def test_without_a_target_transform_is_the_self_transport_smoothing():
    """Xt=None: the target is Xs; the map is the barycentric projection of the
    symmetric entropic plan of Xs onto itself (dense reference)."""
    rng = np.random.default_rng(3)
    Xs = rng.random((60, 2))
    ot = SinkhornTransport(blur=0.1, tol=1e-10).fit(Xs, np.zeros(60))
    eps = 0.01
    C = 0.5 * ((Xs[:, None] - Xs[None]) ** 2).sum(-1)
    f = np.zeros(60)
    for _ in range(5000):  # symmetric self-transport: f = softmin(f), averaged
        f = 0.5 * (f - eps * logsumexp(np.log(1 / 60) + (f[None] - C) / eps, axis=1))
    P = np.exp((f[:, None] + f[None] - C) / eps) / 60**2
    want = (P @ Xs) / P.sum(1)[:, None]
    np.testing.assert_allclose(ot.transform(Xs), want, atol=1e-6)


@parametrize_with_checks([SinkhornTransport(blur=0.5, max_iter=100)])
def test_sklearn_compatible(estimator, check):
    """scikit-learn's estimator checks, with no expected failure."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kt.ConvergenceWarning)
        check(estimator)


def test_transform_checks_its_input():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kt.ConvergenceWarning)
        ot = SinkhornTransport(blur=0.5, max_iter=5).fit(X, Xt=Y)
    with pytest.raises(ValueError, match="features"):
        ot.transform(np.random.rand(4, 3))
    with pytest.raises(ValueError, match="'Xt' has 3 features"):
        ot.inverse_transform(np.random.rand(4, 3))
    with pytest.raises(ValueError, match="NaN"):
        ot.transform(NAN)
