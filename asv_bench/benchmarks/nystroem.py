"""Nystroem: kerneltools against scikit-learn's, at small sizes.

The problem (``asv_bench/nystroem_compare.py`` runs the large one, n = 1e5,
each case in its own process): n points in D = 8 from Gaussian blobs of
unequal sizes, the Gaussian kernel with gamma = 0.1, m landmarks.

- ``NystroemFitTransform``  ``Nystroem(...).fit(X).transform(X)``, kerneltools
  (every landmark strategy) and scikit-learn (uniform landmarks only);
- ``NystroemTransform``     ``transform(X)`` of a fitted model;
- ``LandmarkSelection``     the landmark choice alone (k-means++ and ridge
  leverage scores).

Each ``setup`` makes one untimed call: the first call of a kerneltools
formula compiles it. ``NotImplementedError`` in ``setup`` skips a parameter
combination (scikit-learn has only uniform landmarks).
"""

from __future__ import annotations

import numpy as np

D = 8
GAMMA = 0.1
SIZES = [2_000, 20_000]
STRATEGIES = ["uniform", "kmeans++", "rls", "rpcholesky"]


def make_data(n: int, dtype="float64", seed: int = 0) -> np.ndarray:
    """n points from 50 Gaussian blobs (std 0.5) of sizes varying 20-fold."""
    rng = np.random.default_rng(seed)
    weights = rng.uniform(1, 20, size=50)
    centers = rng.uniform(-4, 4, size=(50, D))
    labels = rng.choice(50, size=n, p=weights / weights.sum())
    return (centers[labels] + 0.5 * rng.normal(size=(n, D))).astype(dtype)


def nystroem(system: str, landmarks: str, m: int):
    """An unfitted Nystroem of ``system`` ('kerneltools' or 'sklearn')."""
    if system == "sklearn":
        if landmarks != "uniform":
            raise NotImplementedError("scikit-learn draws landmarks uniformly only")
        from sklearn.kernel_approximation import Nystroem

        return Nystroem("rbf", gamma=GAMMA, n_components=m, random_state=0)
    from kerneltools.estimators.nystroem import Nystroem

    return Nystroem(
        "rbf", gamma=GAMMA, n_components=m, random_state=0, landmarks=landmarks
    )


class _Nystroem:
    number = 1
    repeat = (2, 5, 20.0)
    rounds = 1
    warmup_time = 0.0  # setup makes the warm-up call itself
    timeout = 300

    def _setup(self, run):
        self.run = run
        self.run()  # compile (first call) and warm caches: never timed

    def time_call(self, *args):
        self.run()

    def peakmem_call(self, *args):
        self.run()


class NystroemFitTransform(_Nystroem):
    """fit + transform of the n training points, m = 200 landmarks."""

    params = (["kerneltools", "sklearn"], STRATEGIES, SIZES)
    param_names = ("system", "landmarks", "N")

    def setup(self, system, landmarks, n):
        X = make_data(n)
        model = nystroem(system, landmarks, 200)
        self._setup(lambda: model.fit(X).transform(X))


class NystroemTransform(_Nystroem):
    """transform of n points by a fitted model, m = 200 landmarks."""

    params = (["kerneltools", "sklearn"], ["float32", "float64"], SIZES)
    param_names = ("system", "dtype", "N")

    def setup(self, system, dtype, n):
        X = make_data(n, dtype)
        model = nystroem(system, "uniform", 200).fit(X)
        self._setup(lambda: model.transform(X))


class LandmarkSelection(_Nystroem):
    """kerneltools: the choice of m = 200 landmarks alone."""

    params = (["kmeans++", "rls"], SIZES)
    param_names = ("landmarks", "N")

    def setup(self, landmarks, n):
        from kerneltools.estimators import nystroem as ny
        from kerneltools.kernels import make_kernel

        X = make_data(n)
        kernel = make_kernel("rbf", gamma=GAMMA)
        select = (
            ny.kmeans_plusplus
            if landmarks == "kmeans++"
            else (ny.ridge_leverage_sample)
        )
        self._setup(lambda: select(kernel, X, 200, random_state=0))
