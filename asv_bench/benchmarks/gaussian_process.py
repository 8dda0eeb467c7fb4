"""Gaussian-process regression: kerneltools against scikit-learn.

The problem of ``asv_bench/gp_compare.py`` (which fits to convergence at
3,000 and 20,000 points), at asv's sizes: N points uniform in [-2, 2]^8, a
smooth target plus noise (std 0.2), the kernel ``C * RBF(8 length scales) +
WhiteKernel``; 500 test points. Both libraries compute in float64 whatever
the input's dtype (scikit-learn's convention), so there is no dtype
parameter.

A fit to convergence takes a data-dependent number of L-BFGS-B steps (20 to
200 here); the fits timed here stop after ``MAX_FUN`` evaluations of the
objective (the same optimizer for both libraries), so that their times
compare the cost per evaluation. ``time_log_marginal_likelihood`` is one
evaluation alone: the log marginal likelihood and its gradient at the fitted
hyperparameters.

- ``GaussianProcessRegressor``         kerneltools, solver "iterative"
  (conjugate gradients and stochastic Lanczos log-determinants) or
  "cholesky" (dense, as scikit-learn);
- ``SklearnGaussianProcessRegressor``  scikit-learn's, the baseline.

Each ``setup`` makes one untimed fit and prediction of each kind: the first
call of a formula compiles it. ``NotImplementedError`` in ``setup`` skips a
parameter combination (no GPU for "cuda"); see ``_common.py``.
"""

from __future__ import annotations

import numpy as np
import scipy.optimize

from ._common import _Estimator, require_backend

D = 8
N_TEST = 500
SIZES = (500, 2_000)
SOLVERS = ("iterative", "cholesky")
MAX_FUN = 5  # objective evaluations of a timed fit (L-BFGS-B's maxfun)


def make_data(n: int, seed: int = 0):
    """Training points and targets, and N_TEST test points (gp_compare's data)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n + N_TEST, D))
    f = np.sin(2 * X[:, 0]) + np.cos(X[:, 1]) * X[:, 2] + 0.5 * X[:, 3] * X[:, 4]
    y = f + 0.2 * rng.normal(size=len(X))
    return X[:n], y[:n], X[n:]


def make_kernel():
    """``C(1) * RBF(ones(D)) + WhiteKernel(0.1)``: gp_compare's starting point."""
    from sklearn.gaussian_process.kernels import RBF, WhiteKernel
    from sklearn.gaussian_process.kernels import ConstantKernel as C

    return C(1.0) * RBF(np.ones(D)) + WhiteKernel(0.1)


def capped_lbfgs(obj_func, initial_theta, bounds):
    """L-BFGS-B stopped after about MAX_FUN evaluations (a GP ``optimizer``)."""
    res = scipy.optimize.minimize(
        obj_func,
        initial_theta,
        method="L-BFGS-B",
        jac=True,
        bounds=bounds,
        options={"maxfun": MAX_FUN},
    )
    return res.x, res.fun


class _GP(_Estimator):
    def _prepare(self, make_model, X, y, X_query):
        super()._prepare(make_model, X, y, X_query)
        self.theta = self.model.kernel_.theta
        self.model.predict(X_query, return_std=True)  # compiles the variances
        self.time_log_marginal_likelihood()  # compiles the theta-gradient

    def time_predict_std(self, *args):
        self.model.predict(self.X_query, return_std=True)

    def peakmem_predict_std(self, *args):
        self.model.predict(self.X_query, return_std=True)

    def time_log_marginal_likelihood(self, *args):
        self.model.log_marginal_likelihood(self.theta, eval_gradient=True)


class GaussianProcessRegressor(_GP):
    """kerneltools: GaussianProcessRegressor(solver=...): ``fit`` (MAX_FUN
    evaluations), ``predict`` (mean; mean and std), one log marginal
    likelihood with its gradient."""

    params = (("cpu", "cuda"), SOLVERS, SIZES)
    param_names = ("backend", "solver", "N")

    def setup(self, backend, solver, n):
        from kerneltools.estimators import GaussianProcessRegressor as Model

        require_backend(backend)
        X, y, X_test = make_data(n)

        def make():
            return Model(
                make_kernel(),
                optimizer=capped_lbfgs,
                random_state=0,
                solver=solver,
                backend=backend,
            )

        self._prepare(make, X, y, X_test)


class SklearnGaussianProcessRegressor(_GP):
    """Baseline: scikit-learn's GaussianProcessRegressor (dense Cholesky)."""

    params = (SIZES,)
    param_names = ("N",)

    def setup(self, n):
        from sklearn.gaussian_process import GaussianProcessRegressor as Model

        X, y, X_test = make_data(n)
        make = lambda: Model(make_kernel(), optimizer=capped_lbfgs, random_state=0)
        self._prepare(make, X, y, X_test)
