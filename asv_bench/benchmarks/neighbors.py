"""k-NN estimators: kerneltools against scikit-learn's brute force.

The problems (shared with ``asv_bench/knn_compare.py``, which imports this
module):

- ``kneighbors``  fit on M points, then the K = 10 nearest of N queries
                  (``NearestNeighbors(n_neighbors=10).fit(Y).kneighbors(X)``);
- ``predict``     ``KNeighborsClassifier(10).fit(Y, labels).predict_proba(X)``;
- ``radius``      ``NearestNeighbors().fit(Y).radius_neighbors(X, r)`` with r
                  chosen for about 20 neighbours per query.

Points: D = 3 uniform in the unit cube, larger D standard Gaussian (the
conventions of ``/work/shared/research/anchor_numbers.md``, section 3).

Each ``setup`` makes one untimed call: the first call of a formula compiles
it. ``NotImplementedError`` in ``setup`` skips a parameter combination (the
numpy backend at the large size, a library that is missing).
"""

from __future__ import annotations

import math

import numpy as np

K_NN = 10
DTYPES = ["float32", "float64"]
SMALL, LARGE = 2_000, 20_000


def make_points(n: int, d: int, dtype, seed: int = 0) -> np.ndarray:
    """n points: uniform in [0, 1]^3 for d = 3, standard Gaussian otherwise."""
    rng = np.random.default_rng(seed)
    pts = rng.random((n, d)) if d <= 3 else rng.standard_normal((n, d))
    return pts.astype(dtype)


def radius_for(count: float, m: int, d: int) -> float:
    """Radius holding about ``count`` of m uniform points of [0, 1]^d (d <= 3)."""
    ball = math.pi ** (d / 2) / math.gamma(d / 2 + 1)
    return (count / (m * ball)) ** (1.0 / d)


def kerneltools_knn(X, Y, k: int = K_NN, backend: str = "auto"):
    """Fit + query with kerneltools: a function returning (dist, ind)."""
    from kerneltools.estimators.neighbors import NearestNeighbors

    return lambda: NearestNeighbors(n_neighbors=k, backend=backend).fit(Y).kneighbors(X)


def sklearn_knn(X, Y, k: int = K_NN, algorithm: str = "brute", n_jobs: int = 2):
    """Fit + query with scikit-learn: a function returning (dist, ind)."""
    from sklearn.neighbors import NearestNeighbors

    def run():
        nn = NearestNeighbors(n_neighbors=k, algorithm=algorithm, n_jobs=n_jobs)
        return nn.fit(Y).kneighbors(X)

    return run


class _Knn:
    """One estimator call; subclasses set ``params`` and ``setup``."""

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


def _kt_check(backend: str, n: int) -> None:
    if backend == "numpy" and n > SMALL:
        raise NotImplementedError("the numpy reference backend only at the small size")


class KNeighbors(_Knn):
    """kerneltools: NearestNeighbors(10).fit(Y).kneighbors(X), N = M."""

    params = (DTYPES, ["cpu", "numpy"], [SMALL, LARGE], [3, 64])
    param_names = ("dtype", "backend", "N", "D")

    def setup(self, dtype, backend, n, d):
        _kt_check(backend, n)
        X, Y = make_points(n, d, dtype, 1), make_points(n, d, dtype, 2)
        self._setup(kerneltools_knn(X, Y, backend=backend))


class KNeighborsClassifierProba(_Knn):
    """kerneltools: KNeighborsClassifier(10, weights='distance').predict_proba."""

    params = (DTYPES, ["cpu", "numpy"], [SMALL, LARGE])
    param_names = ("dtype", "backend", "N")

    def setup(self, dtype, backend, n):
        from kerneltools.estimators.neighbors import KNeighborsClassifier

        _kt_check(backend, n)
        X, Y = make_points(n, 8, dtype, 1), make_points(n, 8, dtype, 2)
        labels = (Y[:, 0] > 0).astype(int) + (Y[:, 1] > 0)
        clf = KNeighborsClassifier(K_NN, weights="distance", backend=backend)
        clf.fit(Y, labels)
        self._setup(lambda: clf.predict_proba(X))


class RadiusNeighbors(_Knn):
    """kerneltools: radius_neighbors with about 20 neighbours per query, D = 3."""

    params = (DTYPES, ["cpu", "numpy"], [SMALL, LARGE])
    param_names = ("dtype", "backend", "N")

    def setup(self, dtype, backend, n):
        from kerneltools.estimators.neighbors import NearestNeighbors

        _kt_check(backend, n)
        X, Y = make_points(n, 3, dtype, 1), make_points(n, 3, dtype, 2)
        nn = NearestNeighbors(radius=radius_for(20, n, 3), backend=backend).fit(Y)
        self._setup(lambda: nn.radius_neighbors(X))


class SklearnBruteKNeighbors(_Knn):
    """Baseline: scikit-learn NearestNeighbors(algorithm='brute', n_jobs=2)."""

    params = (DTYPES, [SMALL, LARGE], [3, 64])
    param_names = ("dtype", "N", "D")

    def setup(self, dtype, n, d):
        X, Y = make_points(n, d, dtype, 1), make_points(n, d, dtype, 2)
        self._setup(sklearn_knn(X, Y))


class SklearnKDTreeKNeighbors(_Knn):
    """Baseline: scikit-learn NearestNeighbors(algorithm='kd_tree', n_jobs=2), D = 3."""

    params = (DTYPES, [SMALL, LARGE])
    param_names = ("dtype", "N")

    def setup(self, dtype, n):
        X, Y = make_points(n, 3, dtype, 1), make_points(n, 3, dtype, 2)
        self._setup(sklearn_knn(X, Y, algorithm="kd_tree"))
