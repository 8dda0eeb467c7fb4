"""Nystroem: kerneltools against scikit-learn's, at small sizes.

The problem (``asv_bench/nystroem_compare.py`` runs the large one, n = 1e5,
each case in its own process): n points in D = 8 from Gaussian blobs of
unequal sizes, the Gaussian kernel with gamma = 0.1, m landmarks.

- ``Nystroem``           kerneltools' ``fit(X)`` and ``transform(X)``, uniform
  landmarks, per dtype and backend; ``SklearnNystroem`` the same with
  scikit-learn's (the baseline);
- ``NystroemLandmarks``  kerneltools' ``fit(X)`` with each landmark strategy;
- ``LandmarkSelection``  the landmark choice alone (k-means++, ridge leverage
  scores, randomly pivoted Cholesky).

Each ``setup`` makes one untimed call: the first call of a kerneltools
formula compiles it. ``NotImplementedError`` in ``setup`` skips a parameter
combination (the numpy backend at the large size, no GPU for "cuda"); see
``_common.py``.
"""

from __future__ import annotations

import numpy as np

from ._common import (
    BACKENDS,
    DTYPES,
    _Fit,
    _Timed,
    _Transformer,
    require_backend,
    require_small,
)

D = 8
GAMMA = 0.1
M = 200  # landmarks
SIZES = (2_000, 20_000)
STRATEGIES = ("uniform", "kmeans++", "rls", "rpcholesky")


def make_data(n: int, dtype="float64", seed: int = 0) -> np.ndarray:
    """n points from 50 Gaussian blobs (std 0.5) of sizes varying 20-fold."""
    rng = np.random.default_rng(seed)
    weights = rng.uniform(1, 20, size=50)
    centers = rng.uniform(-4, 4, size=(50, D))
    labels = rng.choice(50, size=n, p=weights / weights.sum())
    return (centers[labels] + 0.5 * rng.normal(size=(n, D))).astype(dtype)


def nystroem(system: str, landmarks: str, m: int, backend: str | None = None):
    """An unfitted Nystroem of ``system`` ('kerneltools' or 'sklearn')."""
    if system == "sklearn":
        if landmarks != "uniform":
            raise NotImplementedError("scikit-learn draws landmarks uniformly only")
        from sklearn.kernel_approximation import Nystroem

        return Nystroem("rbf", gamma=GAMMA, n_components=m, random_state=0)
    from kerneltools.estimators.nystroem import Nystroem

    return Nystroem(
        "rbf",
        gamma=GAMMA,
        n_components=m,
        random_state=0,
        landmarks=landmarks,
        backend=backend,
    )


class _Call(_Timed):
    def _setup(self, run):
        self.run = run
        self.run()  # compile (first call) and warm caches: never timed

    def time_call(self, *args):
        self.run()

    def peakmem_call(self, *args):
        self.run()


class Nystroem(_Transformer):
    """kerneltools: ``fit(X)`` (uniform landmarks) and ``transform(X)``, m = 200."""

    params = (DTYPES, BACKENDS, SIZES)
    param_names = ("dtype", "backend", "N")

    def setup(self, dtype, backend, n):
        require_small(backend, n, SIZES[0])
        require_backend(backend)
        X = make_data(n, dtype)
        self._prepare(lambda: nystroem("kerneltools", "uniform", M, backend), X)


class NystroemLandmarks(_Fit):
    """kerneltools: ``fit(X)`` with each landmark strategy, m = 200, float64."""

    query = "transform"
    params = (STRATEGIES, SIZES)
    param_names = ("landmarks", "N")

    def setup(self, landmarks, n):
        self._prepare(lambda: nystroem("kerneltools", landmarks, M), make_data(n))


class LandmarkSelection(_Call):
    """kerneltools: the choice of m = 200 landmarks alone."""

    params = (["kmeans++", "rls", "rpcholesky"], SIZES)
    param_names = ("landmarks", "N")

    def setup(self, landmarks, n):
        from kerneltools.estimators import nystroem as ny
        from kerneltools.kernels import make_kernel
        from kerneltools.linalg import select_landmarks

        X = make_data(n)
        kernel = make_kernel("rbf", gamma=GAMMA)
        if landmarks == "kmeans++":
            self._setup(lambda: ny.kmeans_plusplus(kernel, X, M, random_state=0))
        elif landmarks == "rls":
            self._setup(lambda: ny.ridge_leverage_sample(kernel, X, M, random_state=0))
        else:
            self._setup(
                lambda: select_landmarks(kernel, X, M, method=landmarks, random_state=0)
            )


class SklearnNystroem(_Transformer):
    """Baseline: scikit-learn's Nystroem (uniform landmarks): fit, transform."""

    params = (DTYPES, SIZES)
    param_names = ("dtype", "N")

    def setup(self, dtype, n):
        X = make_data(n, dtype)
        self._prepare(lambda: nystroem("sklearn", "uniform", M), X)
