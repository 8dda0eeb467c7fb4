"""Gaussian-process regression: kerneltools against scikit-learn.

The problem of ``asv_bench/gp_compare.py`` (which fits to convergence at
3,000 and 20,000 points), at asv's sizes: N points uniform in [-2, 2]^8, a
smooth target plus noise (std 0.2), the kernel ``C * RBF(8 length scales) +
WhiteKernel``; 200 test points. Both libraries compute in float64 whatever
the input's dtype (scikit-learn's convention), so there is no dtype
parameter.

A fit to convergence takes a data-dependent number of L-BFGS-B steps (20 to
200 here); the fits timed here stop after ``MAX_FUN`` evaluations of the
objective (the same optimizer for both libraries), so that their times
compare the cost per evaluation. ``time_log_marginal_likelihood`` is one
evaluation alone: the log marginal likelihood and its gradient at the fitted
hyperparameters.

- ``GaussianProcessRegressor``              ``fit`` and ``predict`` (the mean);
- ``GaussianProcessPredictStd``             ``predict(X, return_std=True)``;
- ``GaussianProcessLogMarginalLikelihood``  the objective and its gradient;

each for kerneltools with solver "iterative" (conjugate gradients and
stochastic Lanczos log-determinants) or "cholesky" (dense, as scikit-learn),
and as ``Sklearn...`` for scikit-learn's (the baselines).

Each ``setup`` fits the model, then makes the timed call once untimed: the
first call of a formula compiles it. ``NotImplementedError`` in ``setup`` skips a
parameter combination (no GPU for "cuda"); see ``_common.py``.
"""

from __future__ import annotations

import numpy as np
import scipy.optimize

from ._common import _Estimator, _Fitted, require_backend

D = 8
N_TEST = 200
SIZES = (500, 1_000)
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


class _PredictStd(_Fitted):
    """``predict(X, return_std=True)``: the mean and the predictive deviations."""

    def _query(self):
        return self.model.predict(self.X_query, return_std=True)

    def time_predict_std(self, *args):
        self._query()

    def peakmem_predict_std(self, *args):
        self._query()


class _LogMarginalLikelihood(_Fitted):
    """The log marginal likelihood and its gradient at the fitted hyperparameters:
    one evaluation of the optimizer's objective."""

    def _query(self):
        theta = self.model.kernel_.theta
        return self.model.log_marginal_likelihood(theta, eval_gradient=True)

    def time_log_marginal_likelihood(self, *args):
        self._query()

    def peakmem_log_marginal_likelihood(self, *args):
        self._query()


class _OnKerneltools:
    params = (("cpu", "cuda"), SOLVERS, SIZES)
    param_names = ("backend", "solver", "N")

    def setup(self, backend, solver, n):
        from kerneltools.estimators import GaussianProcessRegressor as Model

        require_backend(backend)

        def make():
            return Model(
                make_kernel(),
                optimizer=capped_lbfgs,
                random_state=0,
                solver=solver,
                backend=backend,
            )

        self._prepare(make, *make_data(n))


class _OnSklearn:
    params = (SIZES,)
    param_names = ("N",)

    def setup(self, n):
        from sklearn.gaussian_process import GaussianProcessRegressor as Model

        make = lambda: Model(make_kernel(), optimizer=capped_lbfgs, random_state=0)
        self._prepare(make, *make_data(n))


# kerneltools: solver "iterative" or "cholesky" ------------------------------------


class GaussianProcessRegressor(_OnKerneltools, _Estimator):
    """kerneltools: ``fit`` (MAX_FUN evaluations) and ``predict`` (the mean)."""


class GaussianProcessPredictStd(_OnKerneltools, _PredictStd):
    """kerneltools: ``predict(X, return_std=True)`` of a fitted model."""


class GaussianProcessLogMarginalLikelihood(_OnKerneltools, _LogMarginalLikelihood):
    """kerneltools: ``log_marginal_likelihood(theta, eval_gradient=True)``."""


# scikit-learn baselines -------------------------------------------------------------


class SklearnGaussianProcessRegressor(_OnSklearn, _Estimator):
    """Baseline: scikit-learn's ``fit`` (MAX_FUN evaluations) and ``predict``."""


class SklearnGaussianProcessPredictStd(_OnSklearn, _PredictStd):
    """Baseline: scikit-learn's ``predict(X, return_std=True)``."""


class SklearnGaussianProcessLogMarginalLikelihood(_OnSklearn, _LogMarginalLikelihood):
    """Baseline: scikit-learn's log marginal likelihood with its gradient."""
