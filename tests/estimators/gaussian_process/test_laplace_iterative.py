"""GaussianProcessClassifier(solver="iterative") against the exact path and
scikit-learn, at fixed hyperparameters.

The iterative path's log marginal likelihood is a stochastic estimate (64
probes of stochastic Lanczos quadrature, fixed seeds): within 1e-3 relative
of the exact one here (measured 2e-4 to 1e-10); its gradient a stochastic
estimate too (Hutchinson traces), within 10% of the largest component
(measured 4%); the mode is CG-accurate, so the latent means and the
probabilities agree to 1e-3.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import gaussian_process as skg
from sklearn.datasets import make_classification
from sklearn.gaussian_process.kernels import RBF, Matern, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

from kerneltools.estimators import GaussianProcessClassifier
from kerneltools.estimators.gaussian_process import _laplace


def _data(n, seed=0, d=4):
    X, y = make_classification(n_samples=n, n_features=d, n_informative=3,
                               n_redundant=0, flip_y=0.05, random_state=seed)
    return X, y


KERNELS = [C(2.0) * RBF(np.full(4, 1.5)), 1.0 * Matern(1.0, nu=1.5),
           C(1.0) * RBF(0.8) + WhiteKernel(0.1)]


@pytest.mark.parametrize("kernel", KERNELS, ids=["ard-rbf", "matern", "rbf+white"])
def test_lml_gradient_and_probabilities_near_exact(kernel):
    X, y = _data(800)
    ours = GaussianProcessClassifier(kernel, optimizer=None, solver="iterative").fit(X, y)
    ref = skg.GaussianProcessClassifier(kernel, optimizer=None).fit(X, y)
    theta = ref.kernel_.theta
    lml, grad = ours.log_marginal_likelihood(theta, eval_gradient=True)
    ref_lml, ref_grad = ref.log_marginal_likelihood(theta, eval_gradient=True)
    assert abs(lml - ref_lml) <= 1e-3 * abs(ref_lml)
    assert np.abs(grad - ref_grad).max() <= 0.1 * np.abs(ref_grad).max()
    Xq = X[:100] + 0.05
    np.testing.assert_allclose(ours.predict_proba(Xq), ref.predict_proba(Xq), atol=1e-3)
    mean, var = ours.latent_mean_and_variance(Xq)
    ref_mean, ref_var = ref.latent_mean_and_variance(Xq)
    np.testing.assert_allclose(mean, ref_mean, atol=1e-3 * np.abs(ref_mean).max())
    np.testing.assert_allclose(var, ref_var, atol=1e-3 * ref_var.max())
    sure = np.abs(ref_mean) > 1e-2
    np.testing.assert_array_equal(ours.predict(Xq)[sure], ref.predict(Xq)[sure])


def test_lml_within_1e3_at_3000_points():
    X, y = _data(3000, seed=1)
    kernel = C(1.5) * RBF(np.full(4, 1.0))
    ours = GaussianProcessClassifier(kernel, optimizer=None, solver="iterative").fit(X, y)
    exact = GaussianProcessClassifier(kernel, optimizer=None, solver="exact").fit(X, y)
    theta = kernel.theta
    a, b = ours.log_marginal_likelihood(theta), exact.log_marginal_likelihood(theta)
    assert abs(a - b) <= 1e-3 * abs(b)


def test_auto_solver_threshold(monkeypatch):
    X, y = _data(300)
    gpc = GaussianProcessClassifier(1.0 * RBF(1.0), optimizer=None).fit(X, y)
    assert gpc.base_estimator_.solver_ == "exact"
    monkeypatch.setattr(_laplace, "EXACT_MAX_SAMPLES", 100)
    gpc = GaussianProcessClassifier(1.0 * RBF(1.0), optimizer=None).fit(X, y)
    assert gpc.base_estimator_.solver_ == "iterative"
    assert not hasattr(gpc.base_estimator_, "L_")  # nothing n x n kept


def test_iterative_fit_optimises_and_multiclass():
    # L-BFGS-B on the stochastic gradient stops short of the exact optimum
    # (measured: 2.3% of the lml here, 2.5% at n = 1,000 with an ARD kernel),
    # but well above the start
    X, y = make_classification(n_samples=200, n_features=3, n_informative=3,
                               n_redundant=0, n_classes=3, n_clusters_per_class=1,
                               random_state=3)
    kernel = 1.0 * RBF(1.0)
    ours = GaussianProcessClassifier(kernel, solver="iterative", random_state=0).fit(X, y)
    ref = skg.GaussianProcessClassifier(kernel, random_state=0).fit(X, y)
    start = skg.GaussianProcessClassifier(kernel, optimizer=None).fit(X, y)
    best = ref.log_marginal_likelihood_value_
    got = ours.log_marginal_likelihood_value_
    assert abs(got - best) <= 0.05 * abs(best)
    assert got > start.log_marginal_likelihood_value_ + 0.5 * (
        best - start.log_marginal_likelihood_value_)
    assert (ours.predict(X) == ref.predict(X)).mean() > 0.95


def test_bad_solver_parameters_raise():
    X, y = _data(50)
    for params in ({"solver": "dense"}, {"n_probes": 0}, {"tol": 0.0}):
        with pytest.raises(ValueError, match=next(iter(params))):
            GaussianProcessClassifier(**params).fit(X, y)


def test_iterative_fit_pickles():
    import pickle

    X, y = _data(200)
    gpc = GaussianProcessClassifier(1.0 * RBF(1.0), optimizer=None,
                                    solver="iterative").fit(X, y)
    again = pickle.loads(pickle.dumps(gpc))
    np.testing.assert_array_equal(again.predict_proba(X[:20]), gpc.predict_proba(X[:20]))
