"""KernelRidge against scikit-learn's: dense, CG and Falkon paths, the estimator
contract, grid search, and bad input."""

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_diabetes
from sklearn.gaussian_process.kernels import (
    RBF,
    ConstantKernel,
    ExpSineSquared,
    Matern,
    WhiteKernel,
)
from sklearn.kernel_ridge import KernelRidge as SKKernelRidge
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from kerneltools.estimators import KernelRidge
from kerneltools.estimators.kernel_ridge import _warm as _krr_warm
from kerneltools.kernels import PAIRWISE_KERNELS


@pytest.fixture(autouse=True)
def _cold_fits():
    """Each test starts with no remembered fit (the warm-start cache is
    process-wide: a test that counts CG iterations must not find the solution
    of an earlier test on the same data; the warm-start test fills it itself)."""
    _krr_warm.clear()
    yield
    _krr_warm.clear()


def _data(name):
    if name == "diabetes":
        X, y = load_diabetes(return_X_y=True)
    else:
        X, y = load_breast_cancer(return_X_y=True)
        X = StandardScaler().fit_transform(X)
        y = y.astype(float)
    return X, y


def _sk(kernel, X, y, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sklearn's own "Singular matrix" fallbacks
        return SKKernelRidge(kernel=kernel, **kw).fit(X, y)


@pytest.mark.parametrize("data", ["diabetes", "breast_cancer"])
@pytest.mark.parametrize("kernel", sorted(PAIRWISE_KERNELS))
def test_cholesky_matches_sklearn(data, kernel):
    X, y = _data(data)
    if "chi2" in kernel:
        X = np.abs(X)
    kw = {"alpha": 0.7, "gamma": 0.05, "degree": 2, "coef0": 0.5}
    ref = _sk(kernel, X, y, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = KernelRidge(kernel=kernel, **kw).fit(X, y)
    assert ours.solver_ == "cholesky" and ours.n_iter_ == 1
    np.testing.assert_allclose(ours.dual_coef_, ref.dual_coef_, rtol=1e-8,
                               atol=1e-8 * np.abs(ref.dual_coef_).max())
    Xt = X[::3] + 0.01
    np.testing.assert_allclose(ours.predict(Xt), ref.predict(Xt), rtol=1e-8,
                               atol=1e-8 * np.abs(y).max())


@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "poly", "sigmoid", "cosine", "linear"])
def test_cg_matches_sklearn_to_solver_tolerance(kernel, backend):
    X, y = _data("diabetes")
    kw = {"alpha": 0.5, "gamma": 0.3, "degree": 2, "coef0": 1.0}
    ref = _sk(kernel, X, y, **kw)
    ours = KernelRidge(kernel=kernel, solver="cg", tol=1e-8, n_components=100,
                       backend=backend, **kw).fit(X, y)
    assert ours.solver_ == "cg" and ours.n_iter_ > 0
    # |c - c*| <= cond * tol |c*|; the predictions are smoother still.
    np.testing.assert_allclose(ours.predict(X), ref.predict(X), rtol=1e-5,
                               atol=1e-5 * np.abs(y).max())


def test_falkon_with_every_point_a_landmark_is_exact_kernel_ridge():
    X, y = _data("diabetes")
    ref = _sk("rbf", X, y, alpha=0.5, gamma=0.3)
    ours = KernelRidge(kernel="rbf", alpha=0.5, gamma=0.3, solver="falkon",
                       n_components=len(X), tol=1e-12).fit(X, y)
    np.testing.assert_allclose(ours.predict(X), ref.predict(X), rtol=1e-7, atol=1e-6)
    assert ours.X_fit_.shape == X.shape


def test_falkon_with_few_landmarks_is_close():
    X, y = _data("diabetes")
    ref = _sk("rbf", X, y, alpha=0.5, gamma=0.3).score(X, y)
    ours = KernelRidge(kernel="rbf", alpha=0.5, gamma=0.3, solver="falkon",
                       n_components=100, random_state=0).fit(X, y)
    assert ours.X_fit_.shape == (100, X.shape[1]) and ours.dual_coef_.shape == (100,)
    assert abs(ours.score(X, y) - ref) < 0.01


@pytest.mark.parametrize("solver", ["cholesky", "cg"])
def test_sample_weight_and_multi_output_with_per_target_alpha(solver):
    X, y = _data("diabetes")
    rng = np.random.default_rng(0)
    w = rng.uniform(0, 2, len(X))
    w[:10] = 0  # zero weights: those points get no dual coefficient
    Y = np.column_stack([y, -2 * y + 5])
    alpha = np.array([0.3, 1.5])
    ref = SKKernelRidge(kernel="rbf", alpha=alpha, gamma=0.3).fit(X, Y, sample_weight=w)
    ours = KernelRidge(kernel="rbf", alpha=alpha, gamma=0.3, solver=solver, tol=1e-10,
                       n_components=100).fit(X, Y, sample_weight=w)
    assert ours.dual_coef_.shape == (len(X), 2)
    np.testing.assert_allclose(ours.predict(X), ref.predict(X), rtol=1e-6, atol=1e-4)


def test_float32_stays_float32():
    X, y = _data("diabetes")
    X32 = X.astype(np.float32)
    for solver in ("cholesky", "cg", "falkon"):
        kw = {"kernel": "rbf", "gamma": 0.3, "solver": solver, "n_components": 50,
              "tol": 1e-5, "random_state": 0}
        model = KernelRidge(**kw).fit(X32, y)
        assert model.dual_coef_.dtype == np.float32
        pred = model.predict(X32)
        assert pred.dtype == np.float32
        # float32 kernel values, float64 accumulation: close to the float64 fit.
        # Falkon's residual is measured in its preconditioned space, where
        # tol=1e-5 leaves ~1e-3 on the predictions (float64 alike).
        ref = KernelRidge(**{**kw, "tol": 1e-10}).fit(X, y).predict(X)
        close = 1e-3 if solver == "falkon" else 1e-4
        np.testing.assert_allclose(pred, ref, rtol=close, atol=close * np.abs(ref).max())


def test_gp_kernel_object_and_callable_kernel():
    X, y = _data("diabetes")
    k = ConstantKernel(2.0) * RBF(1.5)
    ours = KernelRidge(kernel=k, alpha=0.5).fit(X, y)
    K = k(X)
    c = np.linalg.solve(K + 0.5 * np.eye(len(X)), y)
    np.testing.assert_allclose(ours.dual_coef_, c, rtol=1e-8, atol=1e-8 * np.abs(c).max())

    def gauss(x_i, y_j, s=1.0):
        return (-x_i.sqdist(y_j) / (2 * s * s)).exp()

    cb = KernelRidge(kernel=gauss, kernel_params={"s": 1.5}, alpha=0.5).fit(X, y)
    ref = _sk("rbf", X, y, alpha=0.5, gamma=1 / 4.5)
    np.testing.assert_allclose(cb.predict(X), ref.predict(X), rtol=1e-8)


@pytest.mark.parametrize("kernel", [
    ExpSineSquared(1.0, 3.0), RBF(0.8) + WhiteKernel(0.1),
    ConstantKernel(2.0) * Matern([0.5, 1.0], nu=1.5)], ids=repr)
@pytest.mark.parametrize("n", [30, 300])
def test_small_fit_with_gp_kernel_object_is_sklearns_and_the_engines(kernel, n):
    """A GP kernel object on a few hundred points: the dense path (the
    object's own evaluation, cheap) gives scikit-learn's predictions, and the
    engine's (CG on the kernel's formula, tol=1e-12) the same to 1e-6. A
    WhiteKernel adds nothing, as in scikit-learn (its pairwise kernels call the
    object as k(X, X))."""
    rng = np.random.default_rng(0)
    d = 1 if isinstance(kernel, ExpSineSquared) else 2  # positive definite in 1-D
    X, Xq = rng.uniform(-2, 2, (n, d)), rng.uniform(-2, 2, (50, d))
    y = np.sin(2 * X[:, 0]) + X[:, -1] + 0.1 * rng.normal(size=n)
    ours = KernelRidge(alpha=0.1, kernel=kernel).fit(X, y)
    assert ours.solver_ == "cholesky"
    ref = SKKernelRidge(alpha=0.1, kernel=kernel).fit(X, y)
    pred, want = ours.predict(Xq), ref.predict(Xq)
    scale = np.abs(want).max()
    # the same kernel matrix; two Cholesky-type solves of a matrix of
    # condition <= ~1e2 (alpha = 0.1) part at ~1e-14 relative
    np.testing.assert_allclose(pred, want, rtol=1e-10, atol=1e-10 * scale)
    engine = KernelRidge(alpha=0.1, kernel=kernel, solver="cg", tol=1e-12).fit(X, y)
    np.testing.assert_allclose(engine.predict(Xq), want, rtol=1e-6, atol=1e-6 * scale)


def test_auto_switches_to_cg_above_the_threshold(monkeypatch):
    from kerneltools.estimators import kernel_ridge

    monkeypatch.setattr(kernel_ridge, "CHOLESKY_MAX_SAMPLES", 100)
    X, y = _data("diabetes")
    model = KernelRidge(kernel="rbf", gamma=0.3, n_components=50).fit(X, y)
    assert model.solver_ == "cg"


def test_mixed_precision_cg_refines_to_float64_accuracy(backend, monkeypatch, capsys):
    # Above MIXED_PRECISION_MIN_SAMPLES the products run in float32 and float64
    # ones refine the residual: the answer is the float64 one, to tol.
    from kerneltools.estimators import kernel_ridge

    monkeypatch.setattr(kernel_ridge, "MIXED_PRECISION_MIN_SAMPLES", 100)
    X, y = _data("diabetes")
    ref = _sk("rbf", X, y, alpha=0.5, gamma=0.3)
    ours = KernelRidge(kernel="rbf", alpha=0.5, gamma=0.3, solver="cg", tol=1e-8,
                       n_components=100, backend=backend, verbose=1).fit(X, y)
    assert "refinement sweep 2" in capsys.readouterr().out  # float32 alone stops at ~1e-6
    assert ours.dual_coef_.dtype == np.float64
    np.testing.assert_allclose(ours.predict(X), ref.predict(X), rtol=1e-5,
                               atol=1e-5 * np.abs(y).max())
    A = ref._get_kernel(X) + 0.5 * np.eye(len(X))
    assert np.linalg.norm(A @ ours.dual_coef_ - y) <= 1e-8 * np.linalg.norm(y)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cg_at_a_loose_tol_reaches_the_exact_test_r2(dtype, monkeypatch):
    # The stopping rule the benchmark's n = 10^5 fit uses (tol=1e-3, products in
    # float32): held-out R^2 within 1e-3 of scikit-learn's exact solve.
    from kerneltools.estimators import kernel_ridge

    monkeypatch.setattr(kernel_ridge, "MIXED_PRECISION_MIN_SAMPLES", 100)
    X, y = _data("diabetes")
    X = (X / X.std(0)).astype(dtype)  # unit features: held-out R^2 0.47
    train, test = slice(0, 330), slice(330, None)
    ref = _sk("rbf", X[train], y[train], alpha=0.05, gamma=0.03).score(X[test], y[test])
    ours = KernelRidge(kernel="rbf", alpha=0.05, gamma=0.03, solver="cg", tol=1e-3,
                       n_components=50, random_state=0).fit(X[train], y[train])
    # (tol=1e-1 misses it by 0.02, tol=1e-2 by 7e-4, tol=1e-3 by 5e-5)
    assert abs(ours.score(X[test], y[test]) - ref) < 1e-3
    assert ours.n_iter_ < 20


def test_warm_starts_across_alpha_reuse_the_fit_and_stay_exact(backend, monkeypatch, capsys):
    # A grid search refits clones on the same data: the landmarks, the
    # preconditioner's Gram matrix and the nearest alpha's solution are
    # reused (keyed on X's content), and every fit is still the exact one to tol
    from sklearn.base import clone

    from kerneltools.estimators.kernel_ridge import _warm as _krr_warm
    from kerneltools.estimators import kernel_ridge

    monkeypatch.setattr(kernel_ridge, "MIXED_PRECISION_MIN_SAMPLES", 100)
    _krr_warm.clear()
    X, y = _data("diabetes")
    X = X.copy()
    proto = KernelRidge(kernel="rbf", gamma=0.3, solver="cg", tol=1e-8, n_components=30,
                        random_state=0, backend=backend, verbose=1)
    iters = {}
    for step, a in enumerate([0.5, 0.3, 0.5]):
        ours = clone(proto).set_params(alpha=a).fit(X, y)
        reused = "are reused" in capsys.readouterr().out
        assert reused == (step > 0)
        iters.setdefault(a, []).append(ours.n_iter_)
        ref = _sk("rbf", X, y, alpha=a, gamma=0.3)
        np.testing.assert_allclose(ours.predict(X), ref.predict(X), rtol=1e-5,
                                   atol=1e-5 * np.abs(y).max())
        A = ref._get_kernel(X) + a * np.eye(len(X))
        assert np.linalg.norm(A @ ours.dual_coef_ - y) <= 1e-8 * np.linalg.norm(y)
    assert iters[0.5][1] == 0  # a refit starts at its answer
    # the same array changed in place: a new key, a cold fit of the new problem
    X[:5] += 0.5
    ours = clone(proto).set_params(alpha=0.5).fit(X, y)
    assert "are reused" not in capsys.readouterr().out
    ref = _sk("rbf", X, y, alpha=0.5, gamma=0.3)
    np.testing.assert_allclose(ours.predict(X), ref.predict(X), rtol=1e-5,
                               atol=1e-5 * np.abs(y).max())
    # another y on the same X reuses the preconditioner, not the solution
    ours = clone(proto).set_params(alpha=0.5).fit(X, -y)
    np.testing.assert_allclose(ours.predict(X), -ref.predict(X), rtol=1e-5,
                               atol=1e-5 * np.abs(y).max())
    assert ours.n_iter_ > 0
    # an entry over the memory cap is not kept: the next fit is cold
    monkeypatch.setattr(_krr_warm, "MAX_BYTES", 1000)
    _krr_warm.clear()
    capsys.readouterr()
    for _ in range(2):
        clone(proto).set_params(alpha=0.5).fit(X, y)
        assert "are reused" not in capsys.readouterr().out
    _krr_warm.clear()


def test_nystroem_preconditioner_with_shift_is_the_one_built_for_it():
    from kerneltools.linalg import NystroemPreconditioner

    X = _data("diabetes")[0][:200]
    R = np.random.default_rng(0).normal(size=(200, 2))
    P = NystroemPreconditioner("rbf", X, shift=0.5, n_components=30, random_state=0,
                               backend="numpy")
    Q = NystroemPreconditioner("rbf", X, shift=3.0, landmarks=P.landmarks_, backend="numpy")
    np.testing.assert_allclose(P.with_shift(3.0) @ R, Q @ R, rtol=1e-10)
    np.testing.assert_allclose(P.with_shift(3.0).with_shift(0.5) @ R, P @ R, rtol=1e-10)
    with pytest.raises(ValueError, match="shift"):
        P.with_shift(-1.0)
    W = NystroemPreconditioner("rbf", X, shift=np.linspace(1, 2, 200), n_components=30,
                               random_state=0, backend="numpy")
    with pytest.raises(ValueError, match="uniform"):
        W.with_shift(1.0)


def test_refined_conjugate_gradient_against_a_dense_solve():
    # the cheap operator is A with a 1e-3 relative error (converges by
    # refinement), then 0.3 A (refinement diverges: finished by the exact CG)
    from kerneltools import ConvergenceWarning
    from kerneltools.linalg import conjugate_gradient

    rng = np.random.default_rng(0)
    Q = rng.normal(size=(60, 60))
    A = Q @ Q.T + 60 * np.eye(60)
    E = rng.normal(size=(60, 60))
    B = rng.normal(size=(60, 3))
    exact = np.linalg.solve(A, B)
    for cheap in (A + 1e-3 * np.abs(A).max() * (E + E.T), 0.3 * A):
        info = {}
        X, n_iter = conjugate_gradient(cheap, B, refine_with=A, tol=1e-11, info=info)
        assert np.all(np.linalg.norm(A @ X - B, axis=0) <= 1e-11 * np.linalg.norm(B, axis=0))
        np.testing.assert_allclose(X, exact, rtol=1e-8, atol=1e-9)
        np.testing.assert_allclose(info["residual"], B - A @ X, atol=1e-12 * np.abs(B).max())
    # a warm start with its residual given: one accurate product fewer
    x0 = exact + 1e-4 * rng.normal(size=B.shape)
    runs = [{}, {}]
    for r0, info in zip([None, B - A @ x0], runs):
        X, _ = conjugate_gradient(cheap, B, refine_with=A, tol=1e-11, x0=x0, r0=r0, info=info)
        np.testing.assert_allclose(X, exact, rtol=1e-8, atol=1e-9)
    assert runs[1]["exact_products"] == runs[0]["exact_products"] - 1
    with pytest.warns(ConvergenceWarning, match="did not converge in 2 iterations"):
        conjugate_gradient(A + 1e-3 * (E + E.T), B, refine_with=A, tol=1e-12, max_iter=2)


def test_verbose_reports_cg_progress(capsys):
    X, y = _data("diabetes")
    KernelRidge(kernel="rbf", gamma=0.3, solver="cg", verbose=1, n_components=50).fit(X, y)
    out = capsys.readouterr().out
    assert "[CG] iteration" in out and "relative residual" in out and "[KernelRidge] cg" in out


def test_cg_short_of_tol_is_finished_by_a_dense_solve():
    """CG stopped at max_iter: no warning and CG's last iterate, but the dense
    solve of the same system (n = 442 <= DENSE_SOLVE_MAX), which is
    scikit-learn's (tests/estimators/test_cg_escalation.py: the other solvers, and the
    error above the limit)."""
    from kerneltools import ConvergenceWarning

    X, y = _data("diabetes")
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = KernelRidge(kernel="laplacian", alpha=1e-6, solver="cg", max_iter=2,
                            tol=1e-12, n_components=10).fit(X, y)
    ref = SKKernelRidge(kernel="laplacian", alpha=1e-6).fit(X, y)
    # cond(K + alpha I) = 1e6: two float64 solves agree to about 1e-10
    np.testing.assert_allclose(model.dual_coef_, ref.dual_coef_, rtol=1e-8,
                               atol=1e-8 * np.abs(ref.dual_coef_).max())


def test_grid_search_picks_sklearns_parameters_and_compiles_each_kernel_once(tmp_path, monkeypatch):
    from kerneltools.backend.cpu import _backend as _cpu_backend

    monkeypatch.setenv("KERNELTOOLS_CACHE_DIR", str(tmp_path))
    X, y = _data("diabetes")
    grid = {"kernelridge__alpha": [0.1, 1.0, 10.0], "kernelridge__gamma": [0.01, 0.1, 1.0]}
    ref = GridSearchCV(make_pipeline(StandardScaler(), SKKernelRidge(kernel="rbf")), grid, cv=3)
    before = _cpu_backend.compile_count()
    ours = GridSearchCV(make_pipeline(StandardScaler(), KernelRidge(kernel="rbf", solver="cg",
                                                                    tol=1e-10, n_components=50)),
                        grid, cv=3)
    ref.fit(X, y)
    ours.fit(X, y)
    assert ours.best_params_ == ref.best_params_
    np.testing.assert_allclose(ours.best_score_, ref.best_score_, rtol=1e-6)
    # Two kernels at most: the product K @ v and the transposed product of the
    # preconditioner; gamma and alpha are run-time parameters.
    assert _cpu_backend.compile_count() - before <= 3


@pytest.mark.parametrize("params, X, y, match", [
    ({"alpha": -1.0}, None, None, "alpha"),
    ({"kernel": "gaussian"}, None, None, "kernel"),
    ({"solver": "lu"}, None, None, "solver"),
    ({"gamma": -2.0}, None, None, "gamma"),
    ({"solver": "cg", "alpha": 0.0}, None, None, "alpha"),
    ({}, np.full((5, 2), np.nan), np.ones(5), "NaN"),
    ({}, np.ones((5, 2)), np.ones(4), "inconsistent"),
])
def test_bad_input(params, X, y, match):
    X = np.random.default_rng(0).normal(size=(20, 3)) if X is None else X
    y = np.ones(len(X)) if y is None else y
    with pytest.raises(ValueError, match=match):
        KernelRidge(**params).fit(X, y)


def test_predict_with_wrong_feature_count():
    X, y = _data("diabetes")
    model = KernelRidge(kernel="rbf").fit(X, y)
    with pytest.raises(ValueError, match="features"):
        model.predict(X[:, :3])


@parametrize_with_checks([KernelRidge(), KernelRidge(kernel="rbf", solver="cg", n_components=20, tol=1e-10),
                          # sklearn compares weighted fits to 1e-7: the solver goes further
                          KernelRidge(kernel="rbf", solver="falkon", n_components=20, tol=1e-10)],
                         # Falkon's documented, honest exception (see the method)
                         expected_failed_checks=lambda e: e._expected_failed_checks())
def test_sklearn_compatible(estimator, check):
    check(estimator)
