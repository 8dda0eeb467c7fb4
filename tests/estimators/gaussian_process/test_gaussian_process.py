"""GaussianProcessRegressor against scikit-learn's (exact path) and against the
exact path (iterative solver)."""

import pickle
import warnings

import numpy as np
import pytest
from sklearn.gaussian_process import GaussianProcessRegressor as SKGPR
from sklearn.gaussian_process.kernels import (
    RBF,
    ExpSineSquared,
    Matern,
    PairwiseKernel,
    RationalQuadratic,
    WhiteKernel,
)
from sklearn.gaussian_process.kernels import ConstantKernel as C
from sklearn.model_selection import GridSearchCV
from sklearn.utils.estimator_checks import parametrize_with_checks

from kerneltools.estimators import GaussianProcessRegressor


def _data(n, d=2, seed=0, targets=1):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, (n, d))
    f = np.sin(X[:, 0]) + 0.3 * X[:, 1] ** 2
    y = f + 0.1 * rng.normal(size=n)
    if targets > 1:
        y = np.column_stack([y, np.cos(X[:, 0]) + 0.1 * rng.normal(size=n)])
    return X, y


KERNELS = [
    C(1.0) * RBF([1.0, 1.0]) + WhiteKernel(0.1),
    C(1.0) * Matern(1.0, nu=0.5) + WhiteKernel(0.1),
    Matern([1.0, 2.0], nu=1.5) + WhiteKernel(0.1),
    C(1.0) * Matern(1.0, nu=2.5),
    RationalQuadratic(1.0, 1.0) + WhiteKernel(0.1),
]


def _fit_pair(kernel, X, y, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the same bound warnings on both sides
        ref = SKGPR(kernel, random_state=0, **kw).fit(X, y)
        ours = GaussianProcessRegressor(kernel, random_state=0, **kw).fit(X, y)
    return ref, ours


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: repr(k)[:40])
def test_exact_path_matches_sklearn(kernel):
    X, y = _data(120)
    ref, ours = _fit_pair(kernel, X, y, alpha=1e-6)
    assert ours.solver_ == "cholesky"
    theta = ref.kernel_.theta + 0.1
    lml, grad = ours.log_marginal_likelihood(theta, eval_gradient=True)
    lml_ref, grad_ref = ref.log_marginal_likelihood(theta, eval_gradient=True)
    np.testing.assert_allclose(lml, lml_ref, rtol=1e-8)
    np.testing.assert_allclose(grad, grad_ref, rtol=1e-8, atol=1e-8 * np.abs(grad_ref).max())
    np.testing.assert_allclose(ours.kernel_.theta, ref.kernel_.theta, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ours.log_marginal_likelihood_value_,
                               ref.log_marginal_likelihood_value_, rtol=1e-6)
    Xt = _data(30, seed=1)[0]
    m, s = ours.predict(Xt, return_std=True)
    m_ref, s_ref = ref.predict(Xt, return_std=True)
    np.testing.assert_allclose(m, m_ref, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(s, s_ref, rtol=1e-4, atol=1e-6)
    # the factor at our optimum (the two L-BFGS runs stop a few 1e-7 apart
    # in theta where the objective is flat)
    K = ref.kernel_.clone_with_theta(ours.kernel_.theta)(X) + 1e-6 * np.eye(len(X))
    np.testing.assert_allclose(ours.L_, np.linalg.cholesky(K), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_exact_gradient_by_blocks_matches_sklearn(dtype, monkeypatch):
    """The exact path's log marginal likelihood and gradient (no (n, n,
    n_theta) tensor: BLAS on W = a a^T - t K^-1 for c * RBF / Matern, blocks
    of symbolic derivatives otherwise) equal scikit-learn's to 1e-8, with two
    targets, a per-sample alpha, a fixed hyperparameter, and blocks small
    enough that the inverse is mirrored and the derivatives evaluated in
    several pieces (float32 X: both fit on the same rounded points in float64)."""
    from kerneltools.estimators.gaussian_process import _exact as _gp_exact

    monkeypatch.setattr(_gp_exact, "_MIRROR", 32)
    monkeypatch.setattr(_gp_exact, "_BLOCK", 5000)
    X, Y = _data(120, targets=2)
    X = X.astype(dtype)
    alpha = np.linspace(1e-6, 1e-2, 120)
    for kernel in (C(1.0) * RBF([1.0, 1.5]) + WhiteKernel(0.1),
                   C(2.0, "fixed") * Matern(1.0, nu=2.5) + WhiteKernel(0.1),
                   KERNELS[1], KERNELS[4]):  # Matern(nu=0.5) and RQ: by blocks
        ref = SKGPR(kernel, optimizer=None, alpha=alpha).fit(X, Y)
        ours = GaussianProcessRegressor(kernel, optimizer=None, alpha=alpha).fit(X, Y)
        for theta in (kernel.theta, kernel.theta - 0.3):
            lml, grad = ours.log_marginal_likelihood(theta, eval_gradient=True)
            lml_ref, grad_ref = ref.log_marginal_likelihood(theta, eval_gradient=True)
            np.testing.assert_allclose(lml, lml_ref, rtol=1e-8)
            np.testing.assert_allclose(grad, grad_ref, rtol=1e-8,
                                       atol=1e-8 * np.abs(grad_ref).max())
            assert ours.log_marginal_likelihood(theta) == pytest.approx(lml, rel=1e-12)


def test_normalize_y_multi_target_restarts_and_covariance():
    X, Y = _data(80, targets=2)
    kernel = C(1.0, (1e-2, 1e2)) * RBF(1.0, (1e-2, 1e2)) + WhiteKernel(0.1, (1e-4, 1))
    ref, ours = _fit_pair(kernel, X, Y, normalize_y=True, n_restarts_optimizer=2)
    np.testing.assert_allclose(ours.kernel_.theta, ref.kernel_.theta, rtol=1e-4, atol=1e-4)
    Xt = _data(10, seed=2)[0]
    np.testing.assert_allclose(ours.predict(Xt), ref.predict(Xt), rtol=1e-4, atol=1e-6)
    for kw in ({"return_std": True}, {"return_cov": True}):
        for a, b in zip(ours.predict(Xt, **kw), ref.predict(Xt, **kw)):
            assert np.shape(a) == np.shape(b)
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_prior_prediction_and_sample_y():
    X, y = _data(60)
    gp = GaussianProcessRegressor(RBF(1.0))
    m, s = gp.predict(X[:5], return_std=True)
    np.testing.assert_array_equal(m, 0)
    np.testing.assert_allclose(s, 1.0)
    gp.fit(X, y)
    samples = gp.sample_y(X[:4], n_samples=4000, random_state=0)
    assert samples.shape == (4, 4000)
    mean, cov = gp.predict(X[:4], return_cov=True)
    np.testing.assert_allclose(samples.mean(1), mean, atol=5 * np.sqrt(cov.diagonal().max() / 4000) + 1e-6)
    X2, Y2 = _data(60, targets=2)
    assert GaussianProcessRegressor(RBF(1.0)).fit(X2, Y2).sample_y(X2[:3], 5).shape == (3, 2, 5)


def test_custom_optimizer_and_no_optimizer():
    X, y = _data(60)
    calls = []

    def optimizer(obj_func, initial_theta, bounds):
        calls.append(obj_func(initial_theta))
        return initial_theta, obj_func(initial_theta, eval_gradient=False)

    kernel = C(1.0) * RBF(1.0)
    gp = GaussianProcessRegressor(kernel, optimizer=optimizer).fit(X, y)
    assert len(calls) == 1 and len(calls[0]) == 2  # (value, gradient)
    np.testing.assert_allclose(gp.kernel_.theta, kernel.theta)
    fixed = GaussianProcessRegressor(kernel, optimizer=None).fit(X, y)
    np.testing.assert_allclose(fixed.kernel_.theta, kernel.theta)


def test_iterative_matches_exact_on_2000_points(monkeypatch):
    """2,000 points: nearly 7 per landmark of the preconditioner (300), CG and
    Lanczos do real work and the kernel products run multi-threaded; the
    variances at 200 test points take the dense factor, cheaper here than
    CG (the CG path: test_iterative_std_and_cov_match_sklearn). Errors here: lml 6e-4, gradient
    0.0016 with the trace's control variate (_gp_control), 0.018 without
    it, mean 5e-7, std 2e-8 relative, under the bounds below."""
    from kerneltools.estimators.gaussian_process import _control as _gp_control

    X, y = _data(2000, d=3)
    kernel = C(1.5) * RBF([1.0, 1.5, 2.0]) + WhiteKernel(0.05)
    exact = GaussianProcessRegressor(kernel, optimizer=None, solver="cholesky").fit(X, y)
    approx = GaussianProcessRegressor(kernel, optimizer=None, solver="iterative").fit(X, y)
    with pytest.raises(AttributeError, match="iterative"):
        approx.L_
    theta = kernel.theta
    lml, grad = exact.log_marginal_likelihood(theta, eval_gradient=True)
    lml2, grad2 = approx.log_marginal_likelihood(theta, eval_gradient=True)
    assert abs(lml2 - lml) <= 1e-2 * abs(lml)
    error = np.linalg.norm(grad2 - grad)
    assert error <= 5e-3 * np.linalg.norm(grad)
    with monkeypatch.context() as m:  # plain Hutchinson: the same probes
        m.setattr(_gp_control, "applies", lambda form, M: False)
        lml3, grad3 = approx.log_marginal_likelihood(theta, eval_gradient=True)
    assert lml3 == lml2  # the control variate changes the gradient only
    assert error <= 0.25 * np.linalg.norm(grad3 - grad)
    Xt = _data(200, d=3, seed=3)[0]
    m, s = exact.predict(Xt, return_std=True)
    m2, s2 = approx.predict(Xt, return_std=True)
    np.testing.assert_allclose(m2, m, rtol=1e-4, atol=1e-4 * np.abs(m).max())
    np.testing.assert_allclose(s2, s, rtol=1e-3, atol=1e-3 * s.max())


def test_iterative_fit_finds_a_likelihood_close_to_the_exact_optimum():
    X, y = _data(250)
    kernel = C(1.0) * RBF([1.0, 1.0]) + WhiteKernel(0.1)
    exact = GaussianProcessRegressor(kernel, random_state=0).fit(X, y)
    approx = GaussianProcessRegressor(kernel, solver="iterative", random_state=0).fit(X, y)
    # The iterative optimum, polished on the exact objective (n <=
    # POLISH_MAX_SAMPLES), is the exact one: the polish stops as the exact
    # path does (L-BFGS-B's relative ftol 2.2e-9), so the likelihoods agree
    # to 1e-6 relative, and the reported value is the exact likelihood there.
    best = exact.log_marginal_likelihood_value_
    at_approx = exact.log_marginal_likelihood(approx.kernel_.theta)
    np.testing.assert_allclose(approx.log_marginal_likelihood_value_, at_approx, rtol=1e-10)
    np.testing.assert_allclose(at_approx, best, rtol=1e-6)
    # theta to 0.1 only: amplitude and the second length scale trade off
    # along a ridge where the likelihood changes by 1e-7 relative (0.06 here)
    np.testing.assert_allclose(approx.kernel_.theta, exact.kernel_.theta, atol=0.1)


def test_polish_in_inverse_length_scales_reaches_the_exact_optimum():
    """The exact polish (L-BFGS-B in w = 1 / l, _gp_optimize.polish) from
    scikit-learn's start reaches scikit-learn's optimum (L-BFGS-B in log l),
    to 1e-6 relative in the likelihood, with an irrelevant third feature
    whose length scale runs to its bound; the mask marks the free length
    scales only."""
    from kerneltools.estimators.gaussian_process import _optimize as _gp_optimize

    X, y = _data(120, d=3)
    kernel = C(1.0) * RBF([1.0, 1.0, 1.0]) + WhiteKernel(0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the third length scale at its bound
        ref = SKGPR(kernel, random_state=0).fit(X, y)
    ours = GaussianProcessRegressor(kernel, optimizer=None, solver="cholesky").fit(X, y)

    def obj(theta):
        lml, grad = ours.log_marginal_likelihood(theta, eval_gradient=True)
        return -lml, -grad

    mask = _gp_optimize.length_scale_mask(kernel)
    np.testing.assert_array_equal(mask, [False, True, True, True, False])
    fixed = C(1.0, "fixed") * RBF([1.0, 1.0], (1e-2, 1e2)) + WhiteKernel(0.1)
    np.testing.assert_array_equal(_gp_optimize.length_scale_mask(fixed),
                                  [True, True, False])
    theta, value, nfev = _gp_optimize.polish(obj, kernel.theta, kernel.bounds, mask)
    assert np.all(theta >= kernel.bounds[:, 0]) and np.all(theta <= kernel.bounds[:, 1])
    np.testing.assert_allclose(-value, ref.log_marginal_likelihood_value_, rtol=1e-6)
    np.testing.assert_allclose(ours.log_marginal_likelihood(theta), -value, rtol=1e-12)
    assert ref.kernel_.k1.k2.length_scale[2] > 1e3  # the flat direction, at its far end
    np.testing.assert_allclose(theta[:3], ref.kernel_.theta[:3], atol=1e-2)


def test_grid_search_and_pickle():
    X, y = _data(80)
    search = GridSearchCV(GaussianProcessRegressor(RBF(1.0) + WhiteKernel(0.1)),
                          {"alpha": [1e-6, 1e-2, 1.0]}, cv=3).fit(X, y)
    ref = GridSearchCV(SKGPR(RBF(1.0) + WhiteKernel(0.1)), {"alpha": [1e-6, 1e-2, 1.0]}, cv=3).fit(X, y)
    assert search.best_params_ == ref.best_params_
    gp = search.best_estimator_
    clone = pickle.loads(pickle.dumps(gp))
    np.testing.assert_allclose(clone.predict(X[:5]), gp.predict(X[:5]))
    it = GaussianProcessRegressor(RBF(1.0) + WhiteKernel(0.1), solver="iterative").fit(X, y)
    m, s = it.predict(X[:5], return_std=True)
    m2, s2 = pickle.loads(pickle.dumps(it)).predict(X[:5], return_std=True)
    np.testing.assert_allclose(m2, m, rtol=1e-12)
    np.testing.assert_allclose(s2, s, rtol=1e-8)


def test_bad_input():
    X, y = _data(40)
    X[1] = X[0]  # a duplicate point: K singular without noise
    with pytest.raises(np.linalg.LinAlgError, match="alpha"):
        GaussianProcessRegressor(RBF(1.0), alpha=0.0, optimizer=None).fit(X, y)
    with pytest.raises(ValueError, match="NaN"):
        GaussianProcessRegressor().fit(np.full((5, 2), np.nan), np.ones(5))
    # kernels without a formula go to scikit-learn (tests/estimators/test_fallback.py)
    for kernel in (PairwiseKernel(), Matern(nu=1.0)):
        gp = GaussianProcessRegressor(kernel, alpha=1e-2).fit(X, y)
        assert hasattr(gp, "fallback_")
    with pytest.raises(ValueError, match="solver"):
        GaussianProcessRegressor(solver="lanczos").fit(X, y)
    with pytest.raises(ValueError, match="alpha"):
        GaussianProcessRegressor(alpha=np.ones(3)).fit(X, y)
    with pytest.raises(RuntimeError, match="At most one"):
        GaussianProcessRegressor().fit(X, y).predict(X, return_std=True, return_cov=True)


def test_periodic_kernel_gradient_matches_sklearn():
    X, y = _data(50)
    X = X[:, :1]  # a periodic kernel of the distance is positive definite in 1-D
    kernel = ExpSineSquared(1.0, 3.0) + WhiteKernel(0.1)
    ref, ours = _fit_pair(kernel, X, y, optimizer=None)
    for theta in (kernel.theta, kernel.theta + 0.2):
        a = ours.log_marginal_likelihood(theta, eval_gradient=True)
        b = ref.log_marginal_likelihood(theta, eval_gradient=True)
        np.testing.assert_allclose(a[0], b[0], rtol=1e-8)
        np.testing.assert_allclose(a[1], b[1], rtol=1e-6, atol=1e-8)


@parametrize_with_checks([GaussianProcessRegressor(),
                          # the iterative solver's API (its optimizer runs in the
                          # tests below; here it would only add time), on the
                          # NumPy reference backend: the checks' many feature
                          # counts would each compile its formulas (the C
                          # backend's results are tested against it elsewhere)
                          GaussianProcessRegressor(RBF(1.0) + WhiteKernel(0.1),
                                                   solver="iterative", n_components=10,
                                                   optimizer=None, backend="numpy")])
def test_sklearn_compatible(estimator, check):
    check(estimator)


FAST_KERNELS = [
    C(2.0) * RBF([1.0, 2.0, 0.5]) + WhiteKernel(0.1),
    WhiteKernel(0.3) + Matern([1.0, 2.0, 3.0], nu=1.5) * C(0.7) * C(1.5, "fixed"),
    C(0.5) * Matern(1.3, nu=0.5),
    Matern(0.8, nu=2.5) + WhiteKernel(0.2),
]


@pytest.mark.parametrize("kernel", FAST_KERNELS, ids=lambda k: repr(k)[:40])
def test_rescaled_fast_path_matches_sklearn(kernel):
    """c * RBF / Matern kernels run on X / l in the iterative solver: its
    products and its gradient contraction sum_ij l_i . r_j dK_ij / dtheta
    match scikit-learn's dense matrix and dense gradient."""
    from kerneltools.kernels._gp import stationary_form
    from kerneltools.estimators.gaussian_process._iterative import IterativeGP, kernel_operator
    from kerneltools.kernels import make_kernel

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    assert stationary_form(kernel) is not None
    k = make_kernel(kernel)
    A = kernel_operator(k, kernel, X, 1e-3)
    V = rng.normal(size=(200, 2))
    np.testing.assert_allclose(A @ V, kernel(X) @ V + 1e-3 * V, rtol=1e-10, atol=1e-10)
    # the solver's state without a fit (whose CG solve would compile formulas
    # this test does not check): the training points and the shift
    gp = GaussianProcessRegressor(kernel, solver="iterative")
    gp.X_train_ = gp._X_fit = X  # the compute-space copy the solver reads
    gp._alpha = 1e-3
    solver = IterativeGP(gp, k, kernel)
    left, right = rng.normal(size=(200, 4)), rng.normal(size=(200, 4))
    _, dK = kernel(X, eval_gradient=True)
    ref = np.einsum("ik,jk,ijl->l", left, right, dK)
    white = np.einsum("ik,ik->", left, right) * k.white_log_gradient()
    ours = solver._stationary_gradient(stationary_form(kernel), left, right, np.float64)
    np.testing.assert_allclose(ours + white, ref, rtol=1e-9, atol=1e-9 * np.abs(ref).max())
    assert stationary_form(RBF(1.0) * RBF(2.0)) is None
    assert stationary_form(C(1.0) * RBF(1.0) + C(1.0) * Matern(1.0)) is None


def test_pretraining_on_a_subset(monkeypatch, capsys):
    """The iterative optimizer alone (no exact polish), after pretraining in
    stages (here 400 points <- 100, iterative <- 25, exact): its optimum is
    within 0.1% of the exact one's likelihood."""
    from kerneltools.estimators.gaussian_process import _fit as _gp_fit

    monkeypatch.setattr(_gp_fit, "POLISH_MAX_SAMPLES", 0)
    monkeypatch.setattr(_gp_fit, "PRETRAIN_MIN_SAMPLES", 400)
    monkeypatch.setattr(_gp_fit, "PRETRAIN_EXACT_MAX", 50)
    X, y = _data(400)
    kernel = C(1.0) * RBF([1.0, 1.0]) + WhiteKernel(0.1)
    exact = GaussianProcessRegressor(kernel, random_state=0).fit(X, y)
    capsys.readouterr()
    approx = GaussianProcessRegressor(kernel, solver="iterative", random_state=0,
                                      verbose=1).fit(X, y)
    out = capsys.readouterr().out
    assert "pretrained on 25 of 100 points (cholesky)" in out
    assert "pretrained on 100 of 400 points (iterative)" in out
    at_approx = exact.log_marginal_likelihood(approx.kernel_.theta)
    best = exact.log_marginal_likelihood_value_
    assert at_approx >= best - 1e-3 * abs(best)
    with pytest.raises(ValueError, match="n_pretrain"):
        GaussianProcessRegressor(n_pretrain=0).fit(X, y)


def test_stored_nystroem_matches_the_lazy_preconditioner(backend):
    """StoredNystroem (features held dense, BLAS products) applies, samples
    and has the log-determinant of the lazy NystroemPreconditioner it
    extends, whose products are reductions on ``backend``."""
    from kerneltools.estimators.gaussian_process._iterative import StoredNystroem
    from kerneltools.kernels import make_kernel
    from kerneltools.linalg import NystroemPreconditioner

    X, _ = _data(250, d=3)
    kernel = C(1.5) * RBF([1.0, 1.5, 2.0]) + WhiteKernel(0.05)
    kw = {"shift": 1e-3, "landmarks": np.arange(0, 250, 10), "backend": backend,
          "diag_correction": True, "smooth": True}
    lazy = NystroemPreconditioner(make_kernel(kernel), X, **kw)
    stored = StoredNystroem(make_kernel(kernel), X, **kw)
    R = np.random.default_rng(1).normal(size=(250, 3))
    np.testing.assert_allclose(stored @ R, lazy @ R, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(stored.sample(4, 7), lazy.sample(4, 7), rtol=1e-10)
    assert stored.logdet() == lazy.logdet()


def test_trace_control_variate_matches_dense_algebra(monkeypatch):
    """The control variate of the gradient's trace (_gp_control): its closed
    forms, tr(P^-1 G_h) - mean_k v_k^T G_h v_k with G_h the Nystroem
    derivative of dK_h and the exact diagonal, against the same quantities
    formed densely from scikit-learn's kernel gradient, for the amplitude,
    each length scale and the white noise (G = I); by blocks of 37 rows too."""
    from kerneltools.kernels._gp import stationary_form
    from kerneltools.estimators.gaussian_process import _control as _gp_control
    from kerneltools.estimators.gaussian_process._control import trace_corrections
    from kerneltools.estimators.gaussian_process._iterative import StoredNystroem
    from kerneltools.kernels import make_kernel

    X, _ = _data(150, d=3)
    kernel = C(1.5) * RBF([1.0, 1.5, 2.0]) + WhiteKernel(0.05)
    idx = np.arange(0, 150, 6)
    M = StoredNystroem(make_kernel(kernel), X, shift=1e-3, landmarks=idx,
                       diag_correction=True, smooth=True)
    V = np.random.default_rng(2).normal(size=(150, 5))
    form = stationary_form(kernel)
    ours, white = trace_corrections(form, M, X / form.length_scale, V)
    P_inv = M @ np.eye(150)
    _, dK = kernel(X, eval_gradient=True)
    Bt = M._F @ M._W.T  # K_nm (K_mm + jitter)^-1
    expected = []
    for h in range(4):  # the amplitude and the three length scales
        d = dK[:, :, h]
        dQ = d[:, idx] @ Bt.T + Bt @ d[idx] - Bt @ d[np.ix_(idx, idx)] @ Bt.T
        G = dQ + np.diag(np.diag(d) - np.diag(dQ))
        expected.append(np.trace(P_inv @ G) - np.einsum("ik,ij,jk->", V, G, V) / 5)
    scale = np.abs(expected).max()
    np.testing.assert_allclose(ours, expected, rtol=1e-9, atol=1e-9 * scale)
    np.testing.assert_allclose(white, np.trace(P_inv) - np.sum(V * V) / 5, rtol=1e-10)
    monkeypatch.setattr(_gp_control, "_ROWS", 37)
    blocked, white2 = trace_corrections(form, M, X / form.length_scale, V)
    np.testing.assert_allclose(blocked, ours, rtol=1e-12, atol=1e-12 * scale)
    np.testing.assert_allclose(white2, white, rtol=1e-12)


def test_lbfgs_stops_where_the_iterative_objective_stalls():
    """On the iterative objective, L-BFGS-B stops once STALL_EVALUATIONS
    evaluations raised the best value by less than STALL_GAIN together, and
    returns the best point seen: here a gradient that disagrees with the
    value (as a stochastic estimate's does near the optimum) past x = 1."""
    from kerneltools.estimators.gaussian_process import _optimize as _gp_optimize

    calls = []

    def obj(x):
        calls.append(x.copy())
        value = float(np.sum((np.maximum(x, 1.0) - 3.0) ** 2))
        return value, 2 * (x - 3.0) + (x > 1) * 5.0  # pushes below x = 1

    theta, value, nfev = _gp_optimize.lbfgs(obj, np.array([0.0]), [(-10.0, 10.0)],
                                            iterative=True)
    values = [obj(x)[0] for x in calls[:nfev]]
    assert nfev == len(values) == int(np.argmin(values)) + 1 + \
        _gp_optimize.STALL_EVALUATIONS  # without the rule: 23 evaluations
    assert value == min(values)
    np.testing.assert_allclose(obj(theta)[0], value)


@pytest.mark.parametrize("path", ["cg", "dense"])
def test_iterative_std_and_cov_match_sklearn(path, backend, dtype, monkeypatch):
    """The iterative solver's predictive std and covariance against
    scikit-learn's exact ones, on both of its paths: block CG to 1e-5 (the
    std within 2.3e-5 relative here, asserted to 1e-4) and the dense Cholesky factor
    kept for later calls (to the mean's 1e-6 CG tolerance); the covariance's
    CG goes to 1e-6 (a bilinear form: first-order error). A rank-25
    preconditioner on 250 points, so that CG iterates."""
    from kerneltools.estimators.gaussian_process import _iterative as _gp_iterative

    if path == "cg":
        monkeypatch.setattr(_gp_iterative, "DENSE_MAX_SAMPLES", 0)
    X, y = _data(250, d=3)
    X = X.astype(dtype)  # both fit in float64 on the same (rounded) points
    Xt = _data(30, d=3, seed=4)[0].astype(dtype)
    kernel = C(1.5) * RBF([1.0, 1.5, 2.0]) + WhiteKernel(0.05)
    ref = SKGPR(kernel, optimizer=None).fit(X, y)
    ours = GaussianProcessRegressor(kernel, optimizer=None, solver="iterative",
                                    n_components=25, backend=backend).fit(X, y)
    assert ours.n_iter_ > 5
    m, s = ref.predict(Xt, return_std=True)
    m2, s2 = ours.predict(Xt, return_std=True)
    np.testing.assert_allclose(m2, m, rtol=1e-4, atol=1e-5 * np.abs(m).max())
    tol = 1e-4 if path == "cg" else 1e-6
    np.testing.assert_allclose(s2, s, rtol=tol)
    factor = getattr(ours._iter, "_L", None)
    assert (factor is None) == (path == "cg")
    cov = ref.predict(Xt, return_cov=True)[1]
    cov2 = ours.predict(Xt, return_cov=True)[1]
    np.testing.assert_allclose(cov2, cov, atol=tol * np.abs(cov).max())
    if path == "dense":
        assert ours._iter._L is factor  # built once, kept


def test_auto_is_exact_up_to_the_fixed_hyperparameter_limit(monkeypatch):
    """With fixed hyperparameters there is no (n, n, n_theta) gradient: auto
    stays exact up to CHOLESKY_MAX_SAMPLES_FIXED, with scikit-learn's log
    marginal likelihood from the one factorisation, and goes iterative above."""
    from kerneltools.estimators import gaussian_process

    monkeypatch.setattr(gaussian_process, "CHOLESKY_MAX_SAMPLES", 50)
    monkeypatch.setattr(gaussian_process, "CHOLESKY_MAX_SAMPLES_FIXED", 200)
    kernel = C(1.0) * RBF([1.0, 1.0]) + WhiteKernel(0.1)
    for targets in (1, 2):
        X, y = _data(150, targets=targets)
        ref = SKGPR(kernel, optimizer=None, normalize_y=True).fit(X, y)
        ours = GaussianProcessRegressor(kernel, optimizer=None, normalize_y=True).fit(X, y)
        assert ours.solver_ == "cholesky"
        assert isinstance(ours.log_marginal_likelihood_value_, np.float64)
        np.testing.assert_allclose(ours.log_marginal_likelihood_value_,
                                   ref.log_marginal_likelihood_value_, rtol=1e-10)
        np.testing.assert_allclose(ours.L_, ref.L_, rtol=1e-10, atol=1e-12)
    X, y = _data(250)
    assert GaussianProcessRegressor(kernel, optimizer=None).fit(X, y).solver_ == "iterative"
