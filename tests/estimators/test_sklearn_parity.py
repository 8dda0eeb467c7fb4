"""Our estimators against scikit-learn's, directly, where a difference would be
silent: defaults, fitted hyperparameters, predictions and return types."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import gaussian_process as sk_gp
from sklearn.gaussian_process.kernels import RBF, WhiteKernel

from kerneltools.estimators import GaussianProcessRegressor


#: Noise variance on the diagonal: with scikit-learn's 1e-10 the noisy data make
#: L-BFGS stop on ill-conditioning, where two correct codes may part ways.
ALPHA = 1e-2


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 5, size=(40, 2))
    y = np.sin(X[:, 0]) + np.cos(X[:, 1]) + 0.05 * rng.normal(size=40)
    return X, y, rng.uniform(0, 5, size=(7, 2))


def test_gp_default_kernel_is_optimised_as_scikit_learns(data):
    """kernel=None: scikit-learn 1.9 fits ``C() * RBF()`` with its bounds."""
    X, y, Xq = data
    ours = GaussianProcessRegressor(alpha=ALPHA).fit(X, y)
    ref = sk_gp.GaussianProcessRegressor(alpha=ALPHA).fit(X, y)
    assert type(ours.kernel_) is type(ref.kernel_)
    assert [h.name for h in ours.kernel_.hyperparameters] == [
        h.name for h in ref.kernel_.hyperparameters]
    assert ours.kernel_.bounds.tolist() == ref.kernel_.bounds.tolist()
    np.testing.assert_allclose(ours.kernel_.theta, ref.kernel_.theta, rtol=1e-5)
    mean, std = ours.predict(Xq, return_std=True)
    ref_mean, ref_std = ref.predict(Xq, return_std=True)
    np.testing.assert_allclose(mean, ref_mean, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(std, ref_std, rtol=1e-6, atol=1e-8)
    assert ours.kernel is None  # the parameter is left as given


def test_gp_unfitted_prior_keeps_fixed_default_kernel(data):
    """Before fit, scikit-learn predicts from ``C(1, "fixed") * RBF(1, "fixed")``."""
    _, _, Xq = data
    ours = GaussianProcessRegressor().predict(Xq, return_cov=True)
    ref = sk_gp.GaussianProcessRegressor().predict(Xq, return_cov=True)
    np.testing.assert_allclose(ours[1], ref[1])


@pytest.mark.parametrize(("kernel", "alpha"), [(None, ALPHA), (RBF() + WhiteKernel(), 1e-10)],
                         ids=["default", "rbf+white"])
def test_gp_log_marginal_likelihood_is_float64(data, kernel, alpha):
    X, y, _ = data
    ours = GaussianProcessRegressor(kernel=kernel, alpha=alpha).fit(X, y)
    ref = sk_gp.GaussianProcessRegressor(kernel=kernel, alpha=alpha).fit(X, y)
    assert type(ours.log_marginal_likelihood_value_) is type(
        ref.log_marginal_likelihood_value_) is np.float64
    theta = ref.kernel_.theta
    for got, want, rtol in [
        (ours.log_marginal_likelihood(theta), ref.log_marginal_likelihood(theta), 1e-10),
        (ours.log_marginal_likelihood(), ref.log_marginal_likelihood(), 1e-6),
    ]:
        assert type(got) is type(want) is np.float64
        np.testing.assert_allclose(got, want, rtol=rtol)
    lml, grad = ours.log_marginal_likelihood(theta, eval_gradient=True)
    ref_lml, ref_grad = ref.log_marginal_likelihood(theta, eval_gradient=True)
    assert type(lml) is type(ref_lml) is np.float64
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-6, atol=1e-8)


def test_gp_no_optimizer_log_marginal_likelihood_is_float64(data):
    X, y, _ = data
    ours = GaussianProcessRegressor(optimizer=None, alpha=ALPHA).fit(X, y)
    ref = sk_gp.GaussianProcessRegressor(optimizer=None, alpha=ALPHA).fit(X, y)
    assert type(ours.log_marginal_likelihood_value_) is np.float64
    np.testing.assert_allclose(ours.log_marginal_likelihood_value_,
                               ref.log_marginal_likelihood_value_, rtol=1e-10)
