"""The dual solver against dense NumPy and scikit-learn's libsvm: libsvm's
optimum to libsvm's tolerance, whatever the working-set size and the path
(dense blocks or kernel reductions)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.svm import SVC as SkSVC

from kerneltools.estimators.svm import _kernel_ops, _solver
from kerneltools.estimators.svm._kernel_ops import DataKernel, svm_kernel
from kerneltools.estimators.svm._problems import nu_svc
from kerneltools.estimators.svm._solver import DualProblem, solve
from kerneltools.linalg._box_qp import update_pair

TOL = 1e-3


def _binary(n=300, seed=0):
    X, y = make_classification(n, 6, n_informative=4, random_state=seed)
    return X, np.where(y == 0, 1.0, -1.0)


def _c_svc(X, y, C=1.0, q=_solver.WORKING_SET, gamma=0.2, shrinking=True):
    n = len(y)
    kernel = DataKernel(svm_kernel("rbf", gamma=gamma, degree=3, coef0=0.0), X)
    problem = DualProblem(p=-np.ones(n), y=y, C=np.full(n, C), alpha=np.zeros(n),
                          point=np.arange(n))
    return solve(problem, kernel, eps=TOL, q=q, shrinking=shrinking)


def _violation(alpha, y, C, K, p):
    """libsvm's maximal violating pair, from a dense float64 gradient."""
    G = (y[:, None] * y[None, :] * K) @ alpha + p
    v = -y * G
    up = np.where(y > 0, alpha < C, alpha > 0)
    low = np.where(y > 0, alpha > 0, alpha < C)
    return v[up].max() - v[low].min()


@pytest.mark.parametrize("shrinking", [True, False])
@pytest.mark.parametrize("q", [8, 64, 1024])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_c_svc_meets_libsvm_stopping_rule_on_the_dense_gradient(q, seed, shrinking):
    """With shrinking, the gradient of the shrunk variables is rebuilt and the
    stopping rule checked on all of them: the same exact gradient at the end."""
    X, y = _binary(seed=seed)
    sol = _c_svc(X, y, q=q, shrinking=shrinking)
    K = rbf_kernel(X, gamma=0.2)
    n = len(y)
    # the gradient kept by block updates and reductions is the dense one
    G = (y[:, None] * y[None, :] * K) @ sol.alpha - 1
    np.testing.assert_allclose(sol.G, G, atol=1e-6)
    assert _violation(sol.alpha, y, np.ones(n), K, -np.ones(n)) < TOL * 1.001
    assert abs(sol.alpha @ y) < 1e-9 * n
    assert sol.alpha.min() >= 0 and sol.alpha.max() <= 1


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dual_objective_is_libsvms_whatever_the_working_set(seed):
    X, y = _binary(seed=seed)
    ref = SkSVC(kernel="rbf", gamma=0.2, tol=TOL).fit(X, (y < 0).astype(int))
    K = rbf_kernel(X, gamma=0.2)
    c = np.zeros(len(y))
    c[ref.support_] = -ref.dual_coef_[0]  # libsvm's sign: class 0 is +1
    ref_obj = 0.5 * c @ K @ c - np.abs(c).sum()
    objs = []
    for q in (8, 32, 1024):
        sol = _c_svc(X, y, q=q)
        a = sol.alpha * y
        objs.append(0.5 * a @ K @ a - sol.alpha.sum())
        # libsvm computes its objective on float32 kernel values
        assert sol.obj == pytest.approx(objs[-1], rel=1e-6)
    np.testing.assert_allclose(objs, ref_obj, rtol=1e-6)


def test_reductions_give_the_dense_blocks_answer(monkeypatch):
    """Gradient updates through LazyTensor reductions (DENSE_MAX = 0) keep the
    exact gradient and reach the same optimum as dense products (the paths may
    part at a rounding-level tie, so the solutions agree to tol, not bits)."""
    X, y = _binary(n=200)
    dense = _c_svc(X, y, q=32)
    monkeypatch.setattr(_kernel_ops, "DENSE_MAX", 0)
    lazy = _c_svc(X, y, q=32)
    K = rbf_kernel(X, gamma=0.2)
    G = (y[:, None] * y[None, :] * K) @ lazy.alpha - 1
    np.testing.assert_allclose(lazy.G, G, atol=1e-9)
    assert _violation(lazy.alpha, y, np.ones(len(y)), K, -np.ones(len(y))) < TOL
    f_lazy, f_dense = K @ (lazy.alpha * y), K @ (dense.alpha * y)
    np.testing.assert_allclose(f_lazy - lazy.rho, f_dense - dense.rho, atol=10 * TOL)


@pytest.mark.parametrize("q", [16, 1024])
@pytest.mark.parametrize("nu", [0.1, 0.5])
def test_nu_solver_keeps_both_equalities(q, nu):
    X, y = _binary(n=200, seed=3)
    kernel = DataKernel(svm_kernel("rbf", gamma=0.2, degree=3, coef0=0.0), X)
    W = np.ones(len(y))
    dual = nu_svc(kernel, y, W, nu, eps=TOL, q=q)
    # back in libsvm's unscaled variables a = coef * y * r: sum a_+ = sum a_- =
    # nu n / 2; scaled, the two classes balance: sum coef = 0
    assert abs(dual.coef.sum()) < 1e-9 * len(y)
    frac_sv = np.count_nonzero(dual.coef) / len(y)
    assert frac_sv >= nu - 1e-9  # nu bounds the support-vector fraction below


def test_max_iter_stops_and_says_so():
    X, y = _binary(n=200)
    n = len(y)
    kernel = DataKernel(svm_kernel("rbf", gamma=0.2, degree=3, coef0=0.0), X)
    problem = DualProblem(p=-np.ones(n), y=y, C=np.ones(n), alpha=np.zeros(n),
                          point=np.arange(n))
    sol = solve(problem, kernel, eps=TOL, max_iter=5)
    assert sol.timed_out and sol.n_iter == 5
    full = solve(problem, kernel, eps=TOL)
    assert not full.timed_out and full.n_iter > 5


def test_update_pair_keeps_the_box_and_the_equality():
    rng = np.random.default_rng(0)
    for _ in range(500):
        yi, yj = rng.choice([-1.0, 1.0], 2)
        Ci, Cj = rng.uniform(0.5, 2, 2)
        ai, aj = rng.uniform(0, Ci), rng.uniform(0, Cj)
        Gi, Gj, quad = rng.normal(size=3)
        ni, nj = update_pair(ai, aj, Gi, Gj, yi, yj, Ci, Cj, quad)
        assert -1e-12 <= ni <= Ci + 1e-12 and -1e-12 <= nj <= Cj + 1e-12
        assert yi * ni + yj * nj == pytest.approx(yi * ai + yj * aj, abs=1e-12)


def test_shrinking_leaves_variables_out_and_reaches_the_same_optimum(capsys):
    """Small working sets on a problem with many bounded variables: some
    variables are shrunk on the way (reported by ``verbose``), and the optimum
    is the unshrunk run's to the tolerance's order."""
    X, y = _binary(n=600, seed=3)
    n = len(y)
    kernel = DataKernel(svm_kernel("rbf", gamma=0.2, degree=3, coef0=0.0), X)
    sols = []
    for shrinking in (True, False):
        problem = DualProblem(p=-np.ones(n), y=y, C=np.full(n, 1.0),
                              alpha=np.zeros(n), point=np.arange(n))
        sols.append(solve(problem, kernel, eps=TOL, q=16, shrinking=shrinking,
                          verbose=1))
    out = capsys.readouterr().out
    actives = [int(line.split("active ")[1].split(",")[0])
               for line in out.splitlines() if "active" in line]
    assert min(actives) < n  # something was shrunk
    assert sols[0].obj == pytest.approx(sols[1].obj, rel=1e-6)
    np.testing.assert_allclose(sols[0].alpha, sols[1].alpha, atol=20 * TOL)
    assert sols[0].rho == pytest.approx(sols[1].rho, abs=2 * TOL)


def _float32_run(monkeypatch, n=1500, seed=4, **patch):
    """A problem whose gradient updates are float32 reductions (DENSE_MAX = 0)."""
    monkeypatch.setattr(_kernel_ops, "DENSE_MAX", 0)
    for name, value in patch.items():
        monkeypatch.setattr(_solver, name, value)
    X, y = _binary(n=n, seed=seed)
    X = (X - X.mean(0)) / X.std(0)
    gamma = 1 / (X.shape[1] * X.var())
    kernel = DataKernel(svm_kernel("rbf", gamma=gamma, degree=3, coef0=0.0), X,
                        rbf_gamma=gamma)
    assert kernel.single
    problem = DualProblem(p=-np.ones(n), y=y, C=np.ones(n), alpha=np.zeros(n),
                          point=np.arange(n))
    sol = solve(problem, kernel, eps=TOL, q=64, verbose=1)
    K = rbf_kernel(X, gamma=gamma)
    return sol, K, y


def test_float32_updates_meet_the_stopping_rule_on_the_exact_gradient(
        monkeypatch, capsys):
    """Float32 reductions: the kept gradient is within float32's error of the
    dense float64 one, and the stopping margin (measured on a float64 sample)
    makes libsvm's rule hold on the exact gradient."""
    sol, K, y = _float32_run(monkeypatch)
    out = capsys.readouterr().out
    errs = [float(line.split("float32 error ")[1]) for line in out.splitlines()
            if "float32 error" in line]
    assert errs and max(errs) > 0  # the float32 path ran and was measured
    n = len(y)
    G = (y[:, None] * y[None, :] * K) @ sol.alpha - 1
    assert 0 < np.abs(sol.G - G).max() < 1e-4
    assert _violation(sol.alpha, y, np.ones(n), K, -np.ones(n)) < TOL
    assert abs(sol.alpha @ y) < 1e-9 * n


def test_float32_updates_stop_only_on_the_float64_gradient(monkeypatch, capsys):
    """No margin and a sample of two (the float32 error estimate blind): the
    solver still stops only once libsvm's rule holds on the gradient
    recomputed in float64, and that is the gradient it returns."""
    sol, K, y = _float32_run(monkeypatch, SAMPLE=2, MARGIN=0.0)
    assert "float32 error" in capsys.readouterr().out  # it ran in float32
    G = (y[:, None] * y[None, :] * K) @ sol.alpha - 1
    np.testing.assert_allclose(sol.G, G, atol=1e-9)
    n = len(y)
    assert _violation(sol.alpha, y, np.ones(n), K, -np.ones(n)) < TOL


def test_float32_error_past_the_margin_goes_back_to_float64(monkeypatch, capsys):
    """A margin cap of zero: the first float32 error sends the solver back to
    float64 with the gradient recomputed, so the end gradient is exact."""
    sol, K, y = _float32_run(monkeypatch, MARGIN_MAX=0.0)
    G = (y[:, None] * y[None, :] * K) @ sol.alpha - 1
    np.testing.assert_allclose(sol.G, G, atol=1e-9)
    n = len(y)
    assert _violation(sol.alpha, y, np.ones(n), K, -np.ones(n)) < TOL
    assert "float32 error" in capsys.readouterr().out  # it started in float32


def test_float32_only_for_moderate_rbf_exponents():
    X, _ = _binary(n=100)
    X = (X - X.mean(0)) / X.std(0)
    rbf = svm_kernel("rbf", gamma=0.1, degree=3, coef0=0.0)
    assert DataKernel(rbf, X, rbf_gamma=0.1).single
    big = svm_kernel("rbf", gamma=10.0, degree=3, coef0=0.0)
    assert not DataKernel(big, X, rbf_gamma=10.0).single
    poly = svm_kernel("poly", gamma=0.1, degree=3, coef0=0.0)
    assert not DataKernel(poly, X).single
