"""Write the pickles that ``tests/test_pickles.py`` loads.

The files in this folder are ours: this script wrote them, run with the tree
of the release before the moves of issue 38 (commit d23a8ae) on
``PYTHONPATH``, so that they name that release's module paths::

    git worktree add /tmp/oldmain d23a8ae
    PYTHONPATH=/tmp/oldmain python tests/_support/pickles/write_pickles.py

Each case is a fitted estimator (or a LazyTensor formula) with the method
whose output the test compares: ``CASES[name]()`` returns ``(obj, method,
args)``; the test unpickles ``<name>.pkl`` with the new code, calls
``method(*args)`` on it and on the object made again by ``CASES[name]()``, and
compares. Everything runs on the NumPy backend (deterministic, no compiler).
"""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def _data(n=40, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.sin(X).sum(axis=1) + 0.1 * rng.standard_normal(n)
    return X, y, rng.standard_normal((7, d))


def kernel_ridge_cg():
    from kerneltools.estimators import KernelRidge

    X, y, Z = _data()
    est = KernelRidge(0.1, kernel="rbf", gamma=0.5, solver="cg", backend="numpy")
    return est.fit(X, y), "predict", (Z,)


def kernel_ridge_falkon():
    from kerneltools.estimators import KernelRidge

    X, y, Z = _data()
    est = KernelRidge(0.1, kernel="rbf", gamma=0.5, solver="falkon", n_components=15,
                      random_state=0, backend="numpy")
    return est.fit(X, y), "predict", (Z,)


def gaussian_process():
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

    from kerneltools.estimators import GaussianProcessRegressor

    X, y, Z = _data()
    kernel = ConstantKernel(1.0) * RBF(1.0) + WhiteKernel(0.1)
    est = GaussianProcessRegressor(kernel, random_state=0)
    return est.fit(X, y), "predict", (Z, True)


def k_neighbors_classifier():
    from kerneltools.estimators import KNeighborsClassifier

    X, y, Z = _data()
    est = KNeighborsClassifier(3, backend="numpy")
    return est.fit(X, y > 0), "predict_proba", (Z,)


def k_neighbors_regressor():
    from kerneltools.estimators import KNeighborsRegressor

    X, y, Z = _data()
    est = KNeighborsRegressor(4, weights="distance", backend="numpy")
    return est.fit(X, y), "predict", (Z,)


def radius_neighbors_classifier():
    from kerneltools.estimators import RadiusNeighborsClassifier

    X, y, Z = _data()
    est = RadiusNeighborsClassifier(2.0, outlier_label="most_frequent", backend="numpy")
    return est.fit(X, y > 0), "predict_proba", (Z,)


def k_neighbors_transformer():
    from kerneltools.estimators import KNeighborsTransformer

    X, _, Z = _data()
    est = KNeighborsTransformer(n_neighbors=4, mode="distance", backend="numpy")
    return est.fit(X), "transform", (Z,)


def nearest_neighbors():
    from kerneltools.estimators import NearestNeighbors

    X, _, Z = _data()
    return NearestNeighbors(n_neighbors=5, backend="numpy").fit(X), "kneighbors", (Z,)


def kernel_density():
    from kerneltools.estimators import KernelDensity

    X, _, Z = _data()
    return KernelDensity(bandwidth=0.7, backend="numpy").fit(X), "score_samples", (Z,)


def local_outlier_factor():
    from kerneltools.estimators import LocalOutlierFactor

    X, _, Z = _data()
    est = LocalOutlierFactor(n_neighbors=6, novelty=True, backend="numpy")
    return est.fit(X), "score_samples", (Z,)


def mean_shift():
    from kerneltools.estimators import MeanShift

    X, _, Z = _data()
    return MeanShift(bandwidth=1.5, backend="numpy").fit(X), "predict", (Z,)


def kernel_pca():
    from kerneltools.estimators import KernelPCA

    X, _, Z = _data()
    est = KernelPCA(3, kernel="rbf", gamma=0.3, backend="numpy")
    return est.fit(X), "transform", (Z,)


def spectral_embedding():
    from kerneltools.estimators import SpectralEmbedding

    X, _, _ = _data()
    est = SpectralEmbedding(2, affinity="rbf", gamma=0.3, random_state=0,
                            backend="numpy")
    return est.fit(X), "__getattribute__", ("embedding_",)


def nystroem():
    from kerneltools.estimators import Nystroem

    X, _, Z = _data()
    est = Nystroem(kernel="rbf", gamma=0.3, n_components=12, random_state=0,
                   backend="numpy")
    return est.fit(X), "transform", (Z,)


def sinkhorn_transport():
    from kerneltools.estimators import SinkhornTransport

    X, _, Z = _data()
    Xt = _data(30, seed=1)[0] + 1.0
    est = SinkhornTransport(blur=0.5, backend="numpy")
    return est.fit(X, Xt=Xt), "transform", (Z,)


def lazy_formula():
    import kerneltools as kt

    X, y, Z = _data()
    x_i, y_j, b_j = kt.Vi(Z), kt.Vj(X), kt.Vj(y[:, None])
    K_ij = (-kt.Pm(np.array([0.5])) * x_i.sqdist(y_j)).exp()
    return K_ij * b_j, "sum", (1,)


CASES = {f.__name__: f for f in (
    kernel_ridge_cg, kernel_ridge_falkon, gaussian_process, k_neighbors_classifier,
    k_neighbors_regressor, radius_neighbors_classifier, k_neighbors_transformer,
    nearest_neighbors, kernel_density, local_outlier_factor,
    mean_shift, kernel_pca, spectral_embedding, nystroem, sinkhorn_transport,
    lazy_formula)}


def main(folder=HERE):
    import kerneltools

    print("writing with", kerneltools.__file__, file=sys.stderr)
    for name, case in CASES.items():
        obj, _, _ = case()
        (Path(folder) / f"{name}.pkl").write_bytes(pickle.dumps(obj, protocol=4))


if __name__ == "__main__":
    main()
