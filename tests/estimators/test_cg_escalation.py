"""The estimators' iterative solves never return CG's last iterate with only
a warning: when CG stops at ``max_iter`` short of ``tol``, a small system is
solved densely (float64 Cholesky) and a large one raises ConvergenceError
(kerneltools/estimators/_shared/_cg_escalation.py)."""

import warnings

import numpy as np
import pytest
import scipy.linalg
import scipy.spatial

from kerneltools.estimators import KernelRidge
from kerneltools.estimators._shared import _cg_escalation
from kerneltools.estimators.kernel_ridge import _warm as _krr_warm
from kerneltools.exceptions import ConvergenceError, ConvergenceWarning

#: An ill-conditioned problem: rbf with a large gamma on clustered points
#: (near-duplicate rows), a tiny alpha, and a max_iter far too small for CG.
GAMMA, ALPHA, MAX_ITER = 0.05, 1e-6, 3
#: The dense reference and the escalated fit both solve in float64 by
#: Cholesky; at cond(K + alpha I) ~ 8e7 two such solves differ by up to
#: cond * eps ~ 2e-8 of the largest coefficient (measured: 3e-9), and the
#: predictions, sums of terms up to |c| ~ 2e5, by about 1e-9 (measured 7e-10).
#: CG's third iterate is off by orders of magnitude more.
COEF_RTOL, PRED_ATOL = 1e-7, 1e-8
#: Falkon's model on 40 landmarks drawn from 10 tight clusters: cond(K_mm) ~
#: 2e10, so its predictions are determined to about 1e-7 (a converged CG,
#: tol=1e-12, and the escalated dense solve both came within 3.4e-7 of the
#: least-squares reference, and within 8e-8 of each other).
FALKON_ATOL = 1e-6


@pytest.fixture(autouse=True)
def _cold_fits():
    _krr_warm.clear()
    yield
    _krr_warm.clear()


def _problem(n=200, d=3, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=3.0, size=(10, d))
    X = centres[rng.integers(0, 10, n)] + 0.05 * rng.normal(size=(n, d))
    y = np.sin(X).sum(1) + 0.1 * rng.normal(size=n)
    return X, y


def _rbf(X, Y):
    return np.exp(-GAMMA * scipy.spatial.distance.cdist(X, Y, "sqeuclidean"))


def _dense_reference(X, y, alpha, w=None):
    """(K + alpha W^-1) c = y by NumPy/scipy, c = 0 where w = 0."""
    keep = np.ones(len(X), bool) if w is None else w > 0
    K = _rbf(X[keep], X[keep])
    shift = alpha if w is None else alpha / w[keep]
    c = np.zeros(y.shape)
    c[keep] = scipy.linalg.solve(K + np.diag(np.broadcast_to(shift, keep.sum())),
                                 y[keep], assume_a="pos")
    return c


def _fit_quietly(model, X, y, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        return model.fit(X, y, **kwargs)


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_krr_cg_short_of_tol_solves_densely(backend, weighted, capsys):
    X, y = _problem()
    w = None
    if weighted:
        w = np.random.default_rng(1).uniform(0.5, 2.0, len(X))
        w[::17] = 0.0
    model = KernelRidge(alpha=ALPHA, kernel="rbf", gamma=GAMMA, solver="cg",
                        max_iter=MAX_ITER, n_components=5, backend=backend, verbose=1)
    _fit_quietly(model, X, y, sample_weight=w)
    kept = len(X) if w is None else int(np.sum(w > 0))  # zero weights: c = 0 there
    assert f"solving the {kept} x {kept} system densely" in capsys.readouterr().out
    ref = _dense_reference(X, y, ALPHA, w)
    np.testing.assert_allclose(model.dual_coef_, ref, rtol=COEF_RTOL,
                               atol=COEF_RTOL * np.abs(ref).max())
    np.testing.assert_allclose(model.predict(X), _rbf(X, X) @ ref, atol=PRED_ATOL)


def test_krr_cg_that_converges_does_not_escalate(backend, capsys):
    X, y = _problem()
    model = KernelRidge(alpha=1.0, kernel="rbf", gamma=GAMMA, solver="cg",
                        n_components=50, backend=backend, verbose=1)
    _fit_quietly(model, X, y)
    assert "densely" not in capsys.readouterr().out
    ref = _dense_reference(X, y, 1.0)
    np.testing.assert_allclose(model.predict(X), _rbf(X, X) @ ref, atol=1e-5)


def test_krr_cg_short_of_tol_above_the_dense_limit_raises(backend, monkeypatch):
    monkeypatch.setattr(_cg_escalation, "DENSE_SOLVE_MAX", 100)
    X, y = _problem()
    model = KernelRidge(alpha=ALPHA, kernel="rbf", gamma=GAMMA, solver="cg",
                        max_iter=MAX_ITER, n_components=5, backend=backend)
    _assert_refused(model, X, y, (
        "KernelRidge(solver='cg')", "relative residual", "max_iter=3", "'max_iter'",
        "'alpha'", "'tol'", "solver='cholesky'", "solver='falkon'", "200", "100"))


def _assert_refused(model, X, y, parts):
    """``model.fit`` raises ConvergenceError (never a ConvergenceWarning)
    whose message holds each of ``parts``."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        with pytest.raises(ConvergenceError) as err:
            model.fit(X, y)
    message = str(err.value)
    for part in parts:
        assert part in message, (part, message)


def _falkon_reference(X, y, Z, alpha, w=None):
    """The Falkon model on the landmarks Z: the minimiser of
    ``|y - K_nm b|_W^2 + alpha b^T K_mm b``, by least squares on the stacked
    system ``[sqrt(W) K_nm; sqrt(alpha) R] b = [sqrt(W) y; 0]`` (``R^T R =
    K_mm``; no normal equations, whose condition number is squared)."""
    sw = np.sqrt(np.ones(len(X)) if w is None else w)
    Kmm = _rbf(Z, Z)
    R = scipy.linalg.cholesky(Kmm + 1e-13 * np.eye(len(Z)))
    lhs = np.vstack([sw[:, None] * _rbf(X, Z), np.sqrt(alpha) * R])
    rhs = np.concatenate([sw * y, np.zeros(len(Z))])
    return scipy.linalg.lstsq(lhs, rhs)[0]


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_falkon_short_of_tol_solves_densely(backend, weighted, capsys):
    X, y = _problem()
    w = None if not weighted else np.random.default_rng(1).uniform(0.5, 2.0, len(X))
    model = KernelRidge(alpha=ALPHA, kernel="rbf", gamma=GAMMA, solver="falkon",
                        max_iter=MAX_ITER, n_components=40, random_state=0,
                        backend=backend, verbose=1)
    _fit_quietly(model, X, y, sample_weight=w)
    assert "solving the 40 x 40 system densely" in capsys.readouterr().out
    b = _falkon_reference(X, y, model.X_fit_, ALPHA, w)
    np.testing.assert_allclose(model.predict(X), _rbf(X, model.X_fit_) @ b,
                               atol=FALKON_ATOL)


def test_falkon_short_of_tol_above_the_dense_limit_raises(backend, monkeypatch):
    monkeypatch.setattr(_cg_escalation, "DENSE_SOLVE_MAX", 20)
    X, y = _problem()
    model = KernelRidge(alpha=ALPHA, kernel="rbf", gamma=GAMMA, solver="falkon",
                        max_iter=MAX_ITER, n_components=40, backend=backend)
    _assert_refused(model, X, y, (
        "KernelRidge(solver='falkon')", "relative residual", "'max_iter'", "'alpha'",
        "'tol'", "solver='cholesky'", "solver='cg'", "40"))


# -- GaussianProcessRegressor(solver="iterative") ---------------------------
GP_ALPHA = 1e-6
#: scikit-learn's GP and the escalated one factor the same float64 matrix
#: (cond ~ 8e7): the means agree to about cond * eps * |y| (measured 2e-9),
#: the standard deviations, sqrt of a difference of O(1) terms that cancel
#: to ~1e-6, to about 1e-6 absolute.
GP_MEAN_ATOL, GP_STD_ATOL = 1e-7, 1e-5


def _gp(backend, max_iter, **kwargs):
    from sklearn.gaussian_process.kernels import RBF

    from kerneltools.estimators import GaussianProcessRegressor

    length_scale = 1 / np.sqrt(2 * GAMMA)  # exp(-gamma |x - y|^2)
    return GaussianProcessRegressor(RBF(length_scale), alpha=GP_ALPHA, optimizer=None,
                                    solver="iterative", max_iter=max_iter,
                                    n_components=5, backend=backend, **kwargs)


def test_gp_iterative_solves_short_of_tol_solve_densely(backend, capsys):
    from sklearn.gaussian_process import GaussianProcessRegressor as SKGP

    X, y = _problem()
    Xq = _problem(n=50, seed=1)[0]
    gp = _gp(backend, MAX_ITER, verbose=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        gp.fit(X, y)
        mean, std = gp.predict(Xq, return_std=True)
    assert "solving the 200 x 200 system densely" in capsys.readouterr().out
    ref = SKGP(gp.kernel, alpha=GP_ALPHA, optimizer=None).fit(X, y)
    ref_mean, ref_std = ref.predict(Xq, return_std=True)
    np.testing.assert_allclose(gp.alpha_, ref.alpha_, rtol=COEF_RTOL,
                               atol=COEF_RTOL * np.abs(ref.alpha_).max())
    np.testing.assert_allclose(mean, ref_mean, atol=GP_MEAN_ATOL)
    np.testing.assert_allclose(std, ref_std, atol=GP_STD_ATOL)
    # the log marginal likelihood (fit's, and with its gradient): exact, as
    # scikit-learn's, not the stochastic estimate from 3 CG iterations
    np.testing.assert_allclose(gp.log_marginal_likelihood_value_,
                               ref.log_marginal_likelihood_value_, rtol=1e-8)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        lml, grad = gp.log_marginal_likelihood(gp.kernel_.theta, eval_gradient=True)
    ref_lml, ref_grad = ref.log_marginal_likelihood(ref.kernel_.theta,
                                                    eval_gradient=True)
    np.testing.assert_allclose(lml, ref_lml, rtol=1e-8)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-6,
                               atol=1e-6 * np.abs(ref_grad).max())


def test_gp_variance_solve_short_of_tol_solves_densely(backend, monkeypatch):
    """The fit converges (max_iter 1,000); the variance solves, by CG (no
    dense factor pays at any size: DENSE_MAX_SAMPLES = 0), get 1 iteration."""
    from kerneltools.estimators.gaussian_process import _iterative as _gp_iterative

    monkeypatch.setattr(_gp_iterative, "DENSE_MAX_SAMPLES", 0)
    X, y = _problem()
    Xq = _problem(n=300, seed=1)[0]
    gp = _gp(backend, 1000, tol=1e-3)
    gp.fit(X, y)
    gp.max_iter = 1
    from sklearn.gaussian_process import GaussianProcessRegressor as SKGP

    ref = SKGP(gp.kernel, alpha=GP_ALPHA, optimizer=None).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        std = gp.predict(Xq, return_std=True)[1]
    np.testing.assert_allclose(std, ref.predict(Xq, return_std=True)[1],
                               atol=GP_STD_ATOL)


def test_gp_iterative_short_of_tol_above_the_dense_limit_raises(backend, monkeypatch):
    monkeypatch.setattr(_cg_escalation, "DENSE_SOLVE_MAX", 100)
    X, y = _problem()
    gp = _gp(backend, MAX_ITER)
    _assert_refused(gp, X, y, (
        "GaussianProcessRegressor(solver='iterative')", "relative residual",
        "'max_iter'", "'alpha'", "'tol'", "solver='cholesky'", "200"))


def test_krr_float32_refined_cg_short_of_tol_solves_densely_in_float64():
    """float32 data with a float64 ``tol``: float32 products refined in
    float64 (iterative refinement), stopped at max_iter; the dense finish
    solves in float64 (coefficients rounded to float32 at the end)."""
    X, y = _problem()
    X32 = X.astype(np.float32)
    model = KernelRidge(alpha=ALPHA, kernel="rbf", gamma=GAMMA, solver="cg",
                        max_iter=MAX_ITER, n_components=5, backend="numpy")
    _fit_quietly(model, X32, y)
    assert model.dual_coef_.dtype == np.float32
    ref = _dense_reference(X32.astype(np.float64), y, ALPHA)
    np.testing.assert_allclose(model.dual_coef_, ref, rtol=1e-6,
                               atol=1e-6 * np.abs(ref).max())


@pytest.mark.parametrize("solver", ["cg", "falkon"])
def test_krr_on_dask_rows_short_of_tol_solves_densely(solver):
    da = pytest.importorskip("dask.array")
    X, y = _problem()
    kwargs = {"alpha": ALPHA, "kernel": "rbf", "gamma": GAMMA, "solver": solver,
              "max_iter": MAX_ITER, "n_components": 5 if solver == "cg" else 40,
              "random_state": 0, "backend": "numpy"}
    on_dask = _fit_quietly(KernelRidge(**kwargs), da.from_array(X, chunks=64), y)
    in_memory = _fit_quietly(KernelRidge(**kwargs), X, y)
    np.testing.assert_allclose(np.asarray(on_dask.predict(X)), in_memory.predict(X),
                               atol=PRED_ATOL)
