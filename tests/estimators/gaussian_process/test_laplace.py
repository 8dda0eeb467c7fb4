"""The exact Laplace approximation against scikit-learn's: the log marginal
likelihood, its gradient (Algorithm 5.1) and the predictive probabilities.

scikit-learn forms the kernel and its gradient tensor with its own pairwise
code (rounding depends on the BLAS): values agree to 1e-8 relative, well
above that rounding and far below any change of the optimum.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import gaussian_process as skg
from sklearn.datasets import make_classification
from sklearn.gaussian_process.kernels import RBF, DotProduct, Kernel, Matern
from sklearn.gaussian_process.kernels import ConstantKernel as C
from sklearn.gaussian_process.kernels import RationalQuadratic, WhiteKernel

from kerneltools.estimators.gaussian_process._laplace import BinaryLaplaceGPC

KERNELS = [
    1.0 * RBF(1.0),
    C(2.0) * RBF([0.5, 1.0, 2.0, 1.5]),
    C(1.0) * Matern(1.0, nu=2.5),
    C(0.7) * Matern([1.0, 0.5, 2.0, 1.0], nu=1.5) + WhiteKernel(0.1),
    C(1.0) * Matern(1.0, nu=0.5),
    RationalQuadratic(1.0, 0.5),
    1.0 * RBF(1.0) + DotProduct(0.5),
]


def _data(n, seed):
    X, y = make_classification(n_samples=n, n_features=4, n_informative=3,
                               n_redundant=0, random_state=seed)
    return X, y


@pytest.mark.parametrize("kernel", KERNELS, ids=repr)
@pytest.mark.parametrize("seed", [0, 1])
def test_lml_and_gradient_match_sklearn(kernel, seed):
    X, y = _data(150, seed)
    ours = BinaryLaplaceGPC(kernel, optimizer=None).fit(X, y)
    ref = skg.GaussianProcessClassifier(kernel, optimizer=None).fit(X, y)
    rng = np.random.default_rng(seed)
    for _ in range(3):
        theta = kernel.theta + rng.uniform(-1, 1, kernel.theta.shape)
        a, ga = ours.log_marginal_likelihood(theta, eval_gradient=True)
        b, gb = ref.log_marginal_likelihood(theta, eval_gradient=True)
        np.testing.assert_allclose(a, b, rtol=1e-8)
        np.testing.assert_allclose(ga, gb, rtol=1e-8, atol=1e-8 * np.abs(gb).max())
        assert ours.log_marginal_likelihood(theta) == pytest.approx(a, rel=1e-14)


@pytest.mark.parametrize("kernel", KERNELS[:4], ids=repr)
def test_gradient_matches_finite_differences(kernel):
    X, y = _data(80, 3)
    ours = BinaryLaplaceGPC(kernel, optimizer=None).fit(X, y)
    theta = kernel.theta + 0.2
    _, grad = ours.log_marginal_likelihood(theta, eval_gradient=True)
    h = 1e-6
    for p in range(len(theta)):
        e = np.zeros_like(theta)
        e[p] = h
        fd = (ours.log_marginal_likelihood(theta + e)
              - ours.log_marginal_likelihood(theta - e)) / (2 * h)
        assert grad[p] == pytest.approx(fd, rel=1e-4, abs=1e-5)


def test_no_kernel_gradient_tensor(monkeypatch):
    # the (n, n, n_theta) tensor is never asked of the kernel
    def refuse(self, X, Y=None, eval_gradient=False):
        raise AssertionError("kernel gradient tensor requested")

    X, y = _data(100, 4)
    for kernel in (C(2.0) * RBF([1.0] * 4), RationalQuadratic() + DotProduct()):
        model = BinaryLaplaceGPC(kernel, optimizer=None).fit(X, y)
        for cls in {type(k) for k in _parts(kernel)}:
            monkeypatch.setattr(cls, "__call__", _refusing(cls.__call__, refuse))
        model.log_marginal_likelihood(kernel.theta, eval_gradient=True)
        monkeypatch.undo()


def _refusing(original, refuse):
    def call(self, X, Y=None, eval_gradient=False):
        return refuse(self, X) if eval_gradient else original(self, X, Y)

    return call


def _parts(kernel):
    out = [kernel]
    for name in ("k1", "k2"):
        if hasattr(kernel, name):
            out += _parts(getattr(kernel, name))
    return [k for k in out if isinstance(k, Kernel)]


@pytest.mark.parametrize("kernel", KERNELS[:3], ids=repr)
def test_predictions_match_sklearn(kernel):
    X, y = _data(200, 5)
    ours = BinaryLaplaceGPC(kernel, optimizer=None).fit(X, y)
    ref = skg.GaussianProcessClassifier(kernel, optimizer=None).fit(X, y)
    Xt = X[:50] + 0.1
    np.testing.assert_allclose(ours.predict_proba(Xt), ref.predict_proba(Xt),
                               atol=1e-10)
    m1, v1 = ours.latent_mean_and_variance(Xt)
    m2, v2 = ref.latent_mean_and_variance(Xt)
    np.testing.assert_allclose(m1, m2, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(v1, v2, rtol=1e-8, atol=1e-10)
    np.testing.assert_array_equal(ours.predict(Xt), ref.predict(Xt))
