"""Kernel ridge regression: kerneltools against scikit-learn.

The problem of ``asv_bench/krr_compare.py`` (which runs it at 1e4 to 1e6
points, each case in its own process), at asv's sizes: N points uniform in
[-2, 2]^8, a smooth target plus noise (std 0.3), the Gaussian kernel with
gamma = 0.1, alpha = 1e-4 N; ``predict`` on 1,000 new points.

- ``KernelRidge``         kerneltools' ``fit`` and ``predict`` for each solver
  ("cg": conjugate gradients preconditioned by Nystroem with m = 300
  landmarks, to tol = 1e-4; "falkon": m = 300 landmarks; "cholesky": dense,
  at the small size only: at the large one SklearnKernelRidge times LAPACK);
- ``SklearnKernelRidge``  scikit-learn's (dense Cholesky), the baseline.

Each ``setup`` makes one untimed fit and prediction: the first call of a
formula compiles it. ``NotImplementedError`` in ``setup`` skips a parameter
combination (the numpy backend at the large size, no GPU for "cuda"); see
``_common.py``.
"""

from __future__ import annotations

import numpy as np

from ._common import BACKENDS, DTYPES, _Estimator, require_backend, require_small

D = 8
GAMMA = 0.1
M = 300  # landmarks of "cg" (preconditioner) and "falkon" (model)
N_TEST = 1_000
SIZES = (1_000, 5_000)
SOLVERS = ("cg", "falkon", "cholesky")


def make_data(n: int, dtype="float64", seed: int = 0):
    """Training points and targets, and N_TEST test points (krr_compare's data)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n + N_TEST, D))
    f = (
        np.sin(2 * X[:, 0])
        + np.cos(X[:, 1]) * X[:, 2]
        + 0.5 * X[:, 3] * X[:, 4]
        + np.tanh(X[:, 5:].sum(1))
    )
    y = f + 0.3 * rng.normal(size=len(X))
    X = X.astype(dtype)
    return X[:n], y[:n], X[n:]


def alpha_for(n: int) -> float:
    """A fixed lambda = alpha / n across sizes, as in krr_compare.py."""
    return 1e-4 * n


class KernelRidge(_Estimator):
    """kerneltools: KernelRidge(kernel='rbf', solver=...), ``fit`` and ``predict``."""

    params = (DTYPES, BACKENDS, SOLVERS, SIZES)
    param_names = ("dtype", "backend", "solver", "N")

    def setup(self, dtype, backend, solver, n):
        from kerneltools.estimators import KernelRidge as Model

        require_small(backend, n, SIZES[0])
        if solver == "cholesky" and n > SIZES[0]:
            # LAPACK's dense path, as scikit-learn's: SklearnKernelRidge times it
            raise NotImplementedError("solver='cholesky' only at the small size")
        require_backend(backend)
        X, y, X_test = make_data(n, dtype)

        def make():
            return Model(
                alpha=alpha_for(n),
                kernel="rbf",
                gamma=GAMMA,
                solver=solver,
                n_components=M,
                tol=1e-6 if solver == "cholesky" else 1e-4,
                random_state=0,
                backend=backend,
            )

        self._prepare(make, X, y, X_test)


class SklearnKernelRidge(_Estimator):
    """Baseline: scikit-learn's KernelRidge (dense kernel matrix, Cholesky)."""

    params = (DTYPES, SIZES)
    param_names = ("dtype", "N")

    def setup(self, dtype, n):
        from sklearn.kernel_ridge import KernelRidge as Model

        X, y, X_test = make_data(n, dtype)
        make = lambda: Model(alpha=alpha_for(n), kernel="rbf", gamma=GAMMA)
        self._prepare(make, X, y, X_test)
