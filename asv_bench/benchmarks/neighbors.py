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

The estimators: ``KNeighborsClassifier`` and ``KNeighborsRegressor``, fit on
N points in D = 8 and predict N queries, against scikit-learn's brute force;
the k-NN query alone against FAISS and pykeops too.

Each ``setup`` makes one untimed call: the first call of a formula compiles
it. ``NotImplementedError`` in ``setup`` skips a parameter combination (the
numpy backend at the large size, no GPU for "cuda", a library that is
missing); see ``_common.py``.
"""

from __future__ import annotations

import math

import numpy as np

from ._common import (
    BACKENDS,
    DTYPES,
    _Estimator,
    _Timed,
    require_backend,
    require_module,
    require_small,
)

K_NN = 10


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


# -- asv benchmarks ------------------------------------------------------------------

SMALL, LARGE = 2_000, 20_000


class _Knn(_Timed):
    """One call; subclasses set ``params`` and ``setup``."""

    def _setup(self, run):
        self.run = run
        self.run()  # compile (first call) and warm caches: never timed

    def time_call(self, *args):
        self.run()

    def peakmem_call(self, *args):
        self.run()


def _kt_check(backend: str, n: int) -> None:
    require_small(backend, n, SMALL)
    require_backend(backend)


def _labelled(n: int, d: int, dtype):
    """Training points Y with 3 classes and a smooth target, queries X (N = M)."""
    X, Y = make_points(n, d, dtype, 1), make_points(n, d, dtype, 2)
    labels = (Y[:, 0] > 0).astype(int) + (Y[:, 1] > 0)
    target = np.sin(Y[:, 0]) + Y[:, 1] * Y[:, 2]
    return X, Y, labels, target


# kerneltools -------------------------------------------------------------------------


class KNeighbors(_Knn):
    """kerneltools: NearestNeighbors(10).fit(Y).kneighbors(X), N = M."""

    params = (DTYPES, BACKENDS, (SMALL, LARGE), (3, 64))
    param_names = ("dtype", "backend", "N", "D")

    def setup(self, dtype, backend, n, d):
        _kt_check(backend, n)
        X, Y = make_points(n, d, dtype, 1), make_points(n, d, dtype, 2)
        self._setup(kerneltools_knn(X, Y, backend=backend))


class RadiusNeighbors(_Knn):
    """kerneltools: radius_neighbors with about 20 neighbours per query, D = 3."""

    params = (DTYPES, BACKENDS, (SMALL, LARGE))
    param_names = ("dtype", "backend", "N")

    def setup(self, dtype, backend, n):
        from kerneltools.estimators.neighbors import NearestNeighbors

        _kt_check(backend, n)
        X, Y = make_points(n, 3, dtype, 1), make_points(n, 3, dtype, 2)
        nn = NearestNeighbors(radius=radius_for(20, n, 3), backend=backend).fit(Y)
        self._setup(lambda: nn.radius_neighbors(X))


class KNeighborsClassifier(_Estimator):
    """kerneltools: KNeighborsClassifier(10, weights='distance'), D = 8, 3 classes.

    ``fit`` on N points, ``predict`` and ``predict_proba`` of N queries.
    """

    params = (DTYPES, BACKENDS, (SMALL, LARGE))
    param_names = ("dtype", "backend", "N")

    def setup(self, dtype, backend, n):
        from kerneltools.estimators.neighbors import KNeighborsClassifier as Model

        _kt_check(backend, n)
        X, Y, labels, _ = _labelled(n, 8, dtype)
        make = lambda: Model(K_NN, weights="distance", backend=backend)
        self._prepare(make, Y, labels, X)

    def time_predict_proba(self, *args):
        self.model.predict_proba(self.X_query)


class KNeighborsRegressor(_Estimator):
    """kerneltools: KNeighborsRegressor(10), D = 8: ``fit`` on N points, ``predict``."""

    params = (DTYPES, BACKENDS, (SMALL, LARGE))
    param_names = ("dtype", "backend", "N")

    def setup(self, dtype, backend, n):
        from kerneltools.estimators.neighbors import KNeighborsRegressor as Model

        _kt_check(backend, n)
        X, Y, _, target = _labelled(n, 8, dtype)
        self._prepare(lambda: Model(K_NN, backend=backend), Y, target, X)


# baselines ---------------------------------------------------------------------------


class SklearnBruteKNeighbors(_Knn):
    """Baseline: scikit-learn NearestNeighbors(algorithm='brute', n_jobs=2)."""

    params = (DTYPES, (SMALL, LARGE), (3, 64))
    param_names = ("dtype", "N", "D")

    def setup(self, dtype, n, d):
        X, Y = make_points(n, d, dtype, 1), make_points(n, d, dtype, 2)
        self._setup(sklearn_knn(X, Y))


class SklearnKDTreeKNeighbors(_Knn):
    """Baseline: scikit-learn NearestNeighbors(algorithm='kd_tree', n_jobs=2), D = 3."""

    params = (DTYPES, (SMALL, LARGE))
    param_names = ("dtype", "N")

    def setup(self, dtype, n):
        X, Y = make_points(n, 3, dtype, 1), make_points(n, 3, dtype, 2)
        self._setup(sklearn_knn(X, Y, algorithm="kd_tree"))


class FaissKNeighbors(_Knn):
    """Baseline: FAISS IndexFlatL2 (exact, float32 only): add Y, search X."""

    params = (DTYPES, (SMALL, LARGE), (3, 64))
    param_names = ("dtype", "N", "D")

    def setup(self, dtype, n, d):
        faiss = require_module("faiss")
        if dtype != "float32":
            raise NotImplementedError("FAISS indexes float32 vectors only")
        X, Y = make_points(n, d, dtype, 1), make_points(n, d, dtype, 2)

        def run():
            index = faiss.IndexFlatL2(d)
            index.add(Y)
            return index.search(X, K_NN)

        self._setup(run)


class PykeopsKNeighbors(_Knn):
    """Baseline: pykeops argKmin(10) of the squared distances, backend CPU
    (D = 64 only at the small N: about 10 s per call at N = 2e4)."""

    params = (DTYPES, (SMALL, LARGE), (3, 64))
    param_names = ("dtype", "N", "D")

    def setup(self, dtype, n, d):
        from .reductions import pykeops_import

        try:
            PK = pykeops_import()
        except ImportError as exc:
            raise NotImplementedError(str(exc)) from None
        if d > 16 and n > SMALL:
            raise NotImplementedError("pykeops at D = 64 only at the small size")
        X, Y = make_points(n, d, dtype, 1), make_points(n, d, dtype, 2)
        D2 = ((PK(X[:, None, :]) - PK(Y[None, :, :])) ** 2).sum(-1)
        self._setup(lambda: D2.argKmin(K_NN, dim=1, backend="CPU"))


class SklearnKNeighborsClassifier(_Estimator):
    """Baseline: scikit-learn KNeighborsClassifier(10, weights='distance', brute)."""

    params = (DTYPES, (SMALL, LARGE))
    param_names = ("dtype", "N")

    def setup(self, dtype, n):
        from sklearn.neighbors import KNeighborsClassifier as Model

        X, Y, labels, _ = _labelled(n, 8, dtype)

        def make():
            return Model(K_NN, weights="distance", algorithm="brute", n_jobs=2)

        self._prepare(make, Y, labels, X)

    def time_predict_proba(self, *args):
        self.model.predict_proba(self.X_query)


class SklearnKNeighborsRegressor(_Estimator):
    """Baseline: scikit-learn KNeighborsRegressor(10, algorithm='brute', n_jobs=2)."""

    params = (DTYPES, (SMALL, LARGE))
    param_names = ("dtype", "N")

    def setup(self, dtype, n):
        from sklearn.neighbors import KNeighborsRegressor as Model

        X, Y, _, target = _labelled(n, 8, dtype)
        self._prepare(lambda: Model(K_NN, algorithm="brute", n_jobs=2), Y, target, X)
