"""KernelPCA against dense scipy.linalg.eigh of the centred kernel and scikit-learn."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse
from sklearn import decomposition as skd
from sklearn.metrics.pairwise import pairwise_kernels
from sklearn.utils.estimator_checks import parametrize_with_checks

import kerneltools.estimators.kernel_pca as kpca_module
from kerneltools.estimators import KernelPCA
from kerneltools.estimators.kernel_pca import _transform as kpca_transform
from kerneltools.linalg import nystroem_start

TOL = {np.dtype(np.float32): 2e-3, np.dtype(np.float64): 1e-7}
ITERATIVE = ["lanczos", "lobpcg", "arpack", "randomized"]


def _data(n=120, d=4, seed=0):
    return np.random.default_rng(seed).uniform(0, 1, size=(n, d))


def _reference(X, k, kernel="rbf", **params):
    """Top-k eigenpairs of the centred kernel matrix, densely."""
    K = pairwise_kernels(X.astype(np.float64), metric=kernel, **params)
    n = len(K)
    C = np.eye(n) - 1.0 / n
    w, V = scipy.linalg.eigh(C @ K @ C)
    return w[::-1][:k], V[:, ::-1][:, :k]


def _histogram(a, b):
    """A kernel of two 1-D arrays, as scikit-learn's callables."""
    return float(np.minimum(a, b).sum())


def _assert_same_up_to_sign(A, B, atol):
    signs = np.sign(np.sum(A * B, axis=0))
    np.testing.assert_allclose(A * signs, B, atol=atol)


@pytest.mark.parametrize("solver", ["dense", *ITERATIVE])
def test_rbf_matches_dense_eigh(solver, backend, dtype):
    X = _data().astype(dtype)
    k = 4
    model = KernelPCA(k, kernel="rbf", gamma=2.0, eigen_solver=solver, random_state=0,
                      iterated_power=5, backend=backend).fit(X)
    w, V = _reference(X, k, gamma=2.0)
    assert model.eigenvalues_.dtype == dtype and model.eigenvectors_.dtype == dtype
    np.testing.assert_allclose(model.eigenvalues_, w, rtol=TOL[dtype])
    _assert_same_up_to_sign(model.eigenvectors_, V, TOL[dtype])


def test_lanczos_from_a_nystroem_start_matches_dense_eigh(backend):
    """Above 4 START_LANDMARKS points, lanczos starts from the Nystroem
    eigenvectors, with float32 Krylov blocks: the default tolerance (a
    relative residual of 1e-6) gives eigenvalues to about its square."""
    X = _data(900)
    model = KernelPCA(4, kernel="rbf", gamma=2.0, eigen_solver="lanczos",
                      random_state=0, backend=backend).fit(X)
    w, V = _reference(X, 4, gamma=2.0)
    np.testing.assert_allclose(model.eigenvalues_, w, rtol=1e-10)
    _assert_same_up_to_sign(model.eigenvectors_, V, 1e-5)
    Kc = _centred(X, gamma=2.0)
    R = Kc @ model.eigenvectors_ - model.eigenvectors_ * model.eigenvalues_
    assert np.linalg.norm(R, axis=0).max() <= kpca_module.LANCZOS_TOL * w[0]


def _centred(X, **params):
    K = pairwise_kernels(X, metric="rbf", **params)
    return K - K.mean(axis=0) - K.mean(axis=1)[:, None] + K.mean()


@pytest.mark.parametrize(("kernel", "params"), [
    ("linear", {}), ("poly", {"gamma": 0.5, "degree": 2, "coef0": 1.0}),
    ("laplacian", {"gamma": 0.7}), ("cosine", {}), ("sigmoid", {"gamma": 0.1, "coef0": 0.0}),
])
def test_every_kernel_matches_dense_eigh(kernel, params):
    X = _data(100)
    model = KernelPCA(3, kernel=kernel, eigen_solver="lanczos", random_state=0,
                      **params).fit(X)
    w, V = _reference(X, 3, kernel, **params)
    np.testing.assert_allclose(model.eigenvalues_, w, rtol=1e-8)
    _assert_same_up_to_sign(model.eigenvectors_, V, 1e-6)


@pytest.mark.parametrize("solver", ["dense", "lanczos"])
def test_transform_and_inverse_match_sklearn(solver, backend):
    X, Xnew = _data(110), _data(30, seed=1)
    args = {"kernel": "rbf", "gamma": 1.5, "fit_inverse_transform": True, "alpha": 0.1}
    # tol: the components to 1e-7 (the default, LANCZOS_TOL, aims at 1e-6 / gap)
    ours = KernelPCA(5, eigen_solver=solver, random_state=0, backend=backend, tol=1e-10,
                     **args)
    ref = skd.KernelPCA(5, eigen_solver="dense", **args)
    Z, Zref = ours.fit_transform(X), ref.fit_transform(X)
    _assert_same_up_to_sign(Z, Zref, 1e-7)
    T, Tref = ours.transform(Xnew), ref.transform(Xnew)
    signs = np.sign(np.sum(Z * Zref, axis=0))
    np.testing.assert_allclose(T * signs, Tref, atol=1e-7)
    np.testing.assert_allclose(ours.inverse_transform(Tref * signs),
                               ref.inverse_transform(Tref), atol=1e-6)
    np.testing.assert_allclose(ours.dual_coef_, ref.dual_coef_, atol=1e-6)


def test_lazy_transform_of_many_points(monkeypatch, backend):
    """The lazy transform (above the dense size) equals the dense one."""
    X, Xnew = _data(80), _data(40, seed=2)
    model = KernelPCA(3, kernel="rbf", eigen_solver="dense", backend=backend).fit(X)
    dense = model.transform(Xnew)
    monkeypatch.setattr(kpca_transform, "_DENSE_TRANSFORM_MAX", 0)
    np.testing.assert_allclose(model.transform(Xnew), dense, atol=1e-10)


def test_auto_goes_lazy_above_dense_max(monkeypatch):
    monkeypatch.setattr(kpca_module, "DENSE_MAX_SAMPLES", 50)
    X = _data(90)
    model = KernelPCA(3, kernel="rbf", random_state=0).fit(X)
    assert model.eigen_solver_ == "lanczos"
    w, V = _reference(X, 3, gamma=1.0 / X.shape[1])
    np.testing.assert_allclose(model.eigenvalues_, w, rtol=1e-8)
    _assert_same_up_to_sign(model.eigenvectors_, V, 1e-6)


def test_nystroem_is_exact_kernel_pca_of_its_approximation_within_its_bound(backend, dtype):
    """eigen_solver="nystroem" against scikit-learn's dense KernelPCA of the
    precomputed Nystroem kernel K(X, Z) K(Z, Z)^+ K(Z, X) (same landmarks):
    eigenvalues, fit_transform and transform of new points; and against the
    exact eigenvalues, within the stated bound 0 <= exact - ours <= error."""
    X, Xnew = _data().astype(dtype), _data(30, seed=1).astype(dtype)
    model = KernelPCA(4, kernel="rbf", gamma=2.0, eigen_solver="nystroem", n_landmarks=40,
                      random_state=0, backend=backend)
    Z = model.fit_transform(X)
    assert model.eigenvalues_.dtype == dtype and len(model.landmarks_) == 40
    X64, L = X.astype(np.float64), X.astype(np.float64)[model.landmarks_]
    pinv = np.linalg.pinv(pairwise_kernels(L, metric="rbf", gamma=2.0), rcond=1e-8,
                          hermitian=True)
    def approx(A):
        return pairwise_kernels(A, L, metric="rbf", gamma=2.0) @ pinv @ \
            pairwise_kernels(L, X64, metric="rbf", gamma=2.0)
    ref = skd.KernelPCA(4, kernel="precomputed", eigen_solver="dense")
    Zref = ref.fit_transform(approx(X64))
    np.testing.assert_allclose(model.eigenvalues_, ref.eigenvalues_, rtol=TOL[dtype])
    _assert_same_up_to_sign(Z, Zref, TOL[dtype] * np.abs(Zref).max())
    signs = np.sign(np.sum(Z * Zref, axis=0))
    np.testing.assert_allclose(model.transform(Xnew) * signs,
                               ref.transform(approx(Xnew.astype(np.float64))),
                               atol=TOL[dtype] * np.abs(Zref).max())
    exact, _ = _reference(X, 4, gamma=2.0)
    gap = exact - model.eigenvalues_
    assert np.all(gap >= -TOL[dtype] * exact[0])
    assert np.all(gap <= model.approximation_error_)
    assert model.approximation_error_ > 0.1 * gap.max()  # the bound is not vacuous here


def test_nystroem_with_every_point_a_landmark_is_exact():
    X = _data(90)
    model = KernelPCA(3, kernel="rbf", gamma=2.0, eigen_solver="nystroem", n_landmarks=90,
                      random_state=0).fit(X)
    w, V = _reference(X, 3, gamma=2.0)
    assert model.approximation_error_ <= 1e-8 * X.shape[0]
    np.testing.assert_allclose(model.eigenvalues_, w, rtol=1e-8)
    _assert_same_up_to_sign(model.eigenvectors_, V, 1e-6)


def test_remove_zero_eig_and_n_components_none():
    X = np.repeat(_data(6, 2), 3, axis=0)  # rank-deficient linear kernel
    model = KernelPCA(kernel="linear").fit(X)
    ref = skd.KernelPCA(kernel="linear").fit(X)
    assert model.eigenvalues_.shape == ref.eigenvalues_.shape == (2,)
    np.testing.assert_allclose(model.eigenvalues_, ref.eigenvalues_, rtol=1e-10)
    kept = KernelPCA(5, kernel="linear", remove_zero_eig=False).fit(X)
    assert kept.eigenvalues_.shape == (5,) and np.all(kept.eigenvalues_[2:] == 0)


@pytest.mark.parametrize("case", ["precomputed", "sparse", "callable"])
def test_fallback_equals_sklearn(case):
    X = _data(40)
    if case == "precomputed":
        args, data = {"kernel": "precomputed"}, pairwise_kernels(X, metric="rbf")
    elif case == "sparse":
        args, data = {"kernel": "rbf"}, scipy.sparse.csr_matrix(X)
    else:
        args, data = {"kernel": _histogram}, X
    ours = KernelPCA(3, **args).fit(data)
    ref = skd.KernelPCA(3, **args).fit(data)
    assert hasattr(ours, "fallback_")
    np.testing.assert_allclose(ours.eigenvalues_, ref.eigenvalues_)
    np.testing.assert_allclose(ours.transform(data), ref.transform(data))
    again = pickle.loads(pickle.dumps(ours))
    np.testing.assert_allclose(again.transform(data), ref.transform(data))


@pytest.mark.parametrize("solver", ["lanczos", "nystroem"])
def test_pickle_engine_fit(solver):
    X = _data(60)
    model = KernelPCA(3, kernel="rbf", eigen_solver=solver, n_landmarks=30,
                      random_state=0).fit(X)
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_allclose(again.transform(X), model.transform(X))
    if solver == "nystroem":  # transform through the landmarks = fit_transform
        np.testing.assert_allclose(model.transform(X),
                                   model.eigenvectors_ * np.sqrt(model.eigenvalues_),
                                   atol=1e-10)


def test_errors_name_the_argument():
    X = _data(20)
    with pytest.raises(ValueError, match="'n_components' parameter of KernelPCA"):
        KernelPCA(0).fit(X)
    with pytest.raises(ValueError, match="'eigen_solver' parameter of KernelPCA"):
        KernelPCA(2, eigen_solver="power").fit(X)
    with pytest.raises(ValueError, match="eigen_solver='lanczos' runs on the engine"):
        KernelPCA(2, kernel="precomputed", eigen_solver="lanczos").fit(np.eye(20))
    with pytest.raises(ValueError, match="NaN"):
        KernelPCA(2).fit(np.full((5, 2), np.nan))
    with pytest.raises(ValueError, match="'n_landmarks' parameter of KernelPCA"):
        KernelPCA(2, eigen_solver="nystroem", n_landmarks=0).fit(X)
    with pytest.raises(ValueError, match="eigen_solver='nystroem' runs on the engine"):
        KernelPCA(2, kernel="precomputed", eigen_solver="nystroem").fit(np.eye(20))


def test_verbose_says_the_solver(capsys):
    KernelPCA(2, kernel="rbf", eigen_solver="lanczos", verbose=1).fit(_data(60))
    assert "[KernelPCA] lanczos eigen-solver on 60 points" in capsys.readouterr().out


@parametrize_with_checks([KernelPCA(), KernelPCA(3, kernel="rbf", eigen_solver="lanczos")])
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def test_doctests():
    import doctest

    import kerneltools.linalg._lanczos as eigensolvers

    for module in (kpca_module, eigensolvers):
        failed, attempted = doctest.testmod(module)
        assert attempted and not failed, module.__name__


def test_nystroem_start_names_a_bad_block_size():
    X = np.random.default_rng(0).random((30, 3))
    for b in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="'b' must be an int >= 1"):
            nystroem_start("rbf", X, b)


@pytest.mark.parametrize("solver", ["dense", "lanczos", "arpack", "lobpcg", "nystroem"])
@pytest.mark.parametrize("offset", [1e6, 1e8])
def test_data_far_from_the_origin(solver, offset):
    """Data offset by 1e6-1e8 give the eigenvalues of the same points at the
    origin (dense float64 reference on the exactly translated data) and
    transform alike, with no warning. Before: lanczos ran 15 s at 1e8 to a
    ConvergenceWarning with residual 4.9 (its float32 twin rounded the
    points to multiples of 8), and the dense path, from BLAS's expanded
    distances, was 2e-5 (1e6) to 0.2 (1e8) off; nystroem (every point a
    landmark: exact) 10x off at 1e8."""
    X = _data(300, 3) * 4
    Xo = X + offset
    X0 = Xo - offset  # exact (Sterbenz)
    ref_w, ref_V = _reference(X0, 4, gamma=0.5)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est = KernelPCA(4, kernel="rbf", gamma=0.5, eigen_solver=solver,
                        n_landmarks=300, random_state=0).fit(Xo)
    np.testing.assert_allclose(est.eigenvalues_, ref_w, rtol=1e-7)
    _assert_same_up_to_sign(est.eigenvectors_, ref_V, 1e-5)
    Z = est.transform(Xo[:50])
    np.testing.assert_allclose(np.abs(Z), np.abs(ref_V[:50] * np.sqrt(ref_w)),
                               atol=1e-5 * np.sqrt(ref_w[0]))


@pytest.mark.parametrize("solver", ["nystroem", "dense", "lanczos", "lobpcg", "randomized"])
@pytest.mark.parametrize("kernel", ["linear", "rbf", "poly"])
def test_constant_data_give_zero_components_as_sklearn(solver, kernel):
    """The centred kernel of constant data is 0: n_components eigenvalues
    and projections, all 0 (scikit-learn's dense KernelPCA gives the same
    shapes and rounding-sized values, below 1e-10 here), whatever sign the
    rounding gave them. Before: "All eigenvalues are negative" (nystroem,
    linear), "significant negative eigenvalues" (randomized, poly), one
    component instead of 2 (nystroem), rounding-sized values elsewhere."""
    X = np.full((100, 5), 3.7)
    est = KernelPCA(2, kernel=kernel, eigen_solver=solver, random_state=0).fit(X)
    ref = skd.KernelPCA(2, kernel=kernel).fit(X)
    assert est.eigenvalues_.shape == ref.eigenvalues_.shape == (2,)
    assert np.abs(ref.eigenvalues_).max() <= 1e-10
    np.testing.assert_array_equal(est.eigenvalues_, 0.0)
    np.testing.assert_array_equal(est.transform(X[:5]), 0.0)


def test_arpack_with_all_components_as_sklearn():
    """n_components=None asks ARPACK for n eigenpairs: scikit-learn (SciPy)
    warns and decomposes densely; kerneltools raised SciPy's TypeError
    ("Cannot use scipy.linalg.eigh for LinearOperator A with k >= N")."""
    X = _data(40, 3)
    with pytest.warns(RuntimeWarning, match="k >= N"):
        ours = KernelPCA(kernel="rbf", eigen_solver="arpack", random_state=0).fit(X)
    with pytest.warns(RuntimeWarning, match="k >= N"):
        ref = skd.KernelPCA(kernel="rbf", eigen_solver="arpack", random_state=0).fit(X)
    np.testing.assert_allclose(ours.eigenvalues_, ref.eigenvalues_, rtol=1e-9,
                               atol=1e-12 * ref.eigenvalues_[0])
